"""kerasbert.compat.tokenizers with bert4keras 0.11.5's arguments: Tokenizer's defaults, token_translate,
word_maxlen, token_start/token_end, encode's pattern and truncate_from give bert4keras's tokens and ids (one oracle
run); TokenizerBase subclasses and save_vocab as bert4keras defines them."""

from __future__ import annotations

import compat_calls
import pytest

from kerasbert import ConfigError
from kerasbert.compat import tokenizers
from kerasbert.compat.tokenizers import Tokenizer, TokenizerBase, load_vocab, save_vocab
from kerasbert.text import tokenizer as _tokenizer

import helpers

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>", "中", "国", "人", "hello", "Hello", "##s",
         "world", "a", "##b", "long", "##er", "，", "。", "x"]
TEXTS = ["中国人hello，Hello worlds。", "Héllo WORLD 中国", "xxxxxxxxxxxx a ab", "", "longer longer人人人人中"]


def tok(name, made, method, *args, **kwargs):
    return [name, "tokenizers", f"Tokenizer.{method}", [made, *args], kwargs]


def calls(vocab: str) -> list:
    plain, lower = {"token_dict": vocab}, {"token_dict": vocab, "do_lower_case": True}
    translated = {"token_dict": vocab, "token_translate": {"中": "国", "hello": "[MASK]", "[UNK]": "x"}}
    short = {"token_dict": vocab, "word_maxlen": 5}
    bare = {"token_dict": vocab, "token_start": None, "token_end": None}
    ends = {"token_dict": vocab, "token_start": "<s>", "token_end": "</s>"}
    result = []
    for i, text in enumerate(TEXTS):
        second = TEXTS[(i + 2) % len(TEXTS)]
        for label, made in [("plain", plain), ("lower", lower), ("translated", translated), ("short", short),
                            ("bare", bare), ("ends", ends)]:
            result.append(tok(f"{label}:tokenize:{i}", made, "tokenize", text))
            result.append(tok(f"{label}:tokenize:{i}:cut", made, "tokenize", text, maxlen=4))
            result.append(tok(f"{label}:pair:{i}", made, "encode", text, second, maxlen=9))
        for truncate_from in ("right", "left", 2, -3):
            for pattern in ("S*E*E", "S*ES*E"):
                result.append(tok(f"encode:{i}:{truncate_from}:{pattern}", plain, "encode", text, second,
                                  maxlen=7, pattern=pattern, truncate_from=truncate_from))
                result.append(tok(f"ends:{i}:{truncate_from}:{pattern}", ends, "encode", text, second,
                                  maxlen=6, pattern=pattern, truncate_from=truncate_from))
        result.append(tok(f"one:{i}:left", translated, "encode", text, maxlen=5, truncate_from="left"))
    result.append(tok("tokens", plain, "encode", ["[CLS]", "中", "[SEP]"], ["[CLS]", "x", "a", "[SEP]"], maxlen=4))
    result += own_vocabulary_calls()
    result.append(tok("decode", plain, "decode", [2, 7, 8, 10, 12, 18, 13, 3]))
    result.append(tok("stem", plain, "stem", "##er"))
    return result


def own_vocabulary_calls() -> list:
    """A dict without [UNK], [CLS] and [SEP] (the chess example's ``[PAD]`` and the moves' characters), its unknown
    id set after construction: [CLS], [SEP] and unknown words take that id."""
    chars = ["[PAD]", *"0123456789abcdefghi"]
    result = []
    for unk in (0, 5):
        made = {"token_dict": {c: i for i, c in enumerate(chars)}, "__set__": {"_token_unk_id": unk}}
        result += [tok(f"own:{unk}:moves", made, "encode", " ".join("h2e2h9g7")),
                   tok(f"own:{unk}:tokenize", made, "tokenize", "0a 1 b z 中"),
                   tok(f"own:{unk}:unknown", made, "encode", "h 2 z 中 0a 1", maxlen=7),
                   tok(f"own:{unk}:pair", made, "encode", "h 2 z", "b 1 0a", maxlen=6),
                   tok(f"own:{unk}:left", made, "encode", "h 2 z 3", maxlen=4, truncate_from="left"),
                   tok(f"own:{unk}:tokens", made, "encode", ["[CLS]", "a", "x", "[SEP]"])]
    return result


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return helpers.write_vocab(str(tmp_path_factory.mktemp("vocab")), VOCAB)


@pytest.fixture(scope="module")
def results(vocab, tmp_path_factory):
    job = calls(vocab)
    return job, compat_calls.run_oracle(job, {}, str(tmp_path_factory.mktemp("oracle")))


def test_tokenizer_equals_bert4keras(results):
    job, out = results
    for call in job:
        compat_calls.check(call, {}, out, 0)


def test_private_attributes_scripts_read(vocab):
    tokenizer = Tokenizer(vocab, token_start="<s>", token_end="</s>")
    assert (tokenizer._token_start_id, tokenizer._token_end_id, tokenizer._token_mask_id) == (5, 6, 4)
    assert (tokenizer._token_pad_id, tokenizer._token_unk_id, tokenizer._vocab_size) == (0, 1, len(VOCAB))
    assert isinstance(tokenizer, TokenizerBase) and tokenizer._do_lower_case is False
    with pytest.raises(ConfigError, match="word_maxlen"):
        Tokenizer(vocab, word_maxlen=0)
    with pytest.raises(ConfigError, match="truncate_from"):
        tokenizer.encode("中", "国", maxlen=3, truncate_from="middle")


def test_own_vocabulary_attributes():
    """A dict without [UNK], [CLS] and [SEP]: the start and end ids are the unknown id once a script sets it; until
    then, a token outside the dict is a ConfigError (bert4keras: an AttributeError)."""
    tokenizer = Tokenizer({"[PAD]": 0, "a": 1, "b": 2})
    assert tokenizer.encode(["a", "b"]) == ([1, 2], [0, 0]) and tokenizer.tokenize("a c") == ["[CLS]", "a", "c",
                                                                                               "[SEP]"]
    with pytest.raises(ConfigError, match="_token_unk_id"):
        tokenizer.encode("a b")
    tokenizer._token_unk_id = 0
    assert (tokenizer._token_start_id, tokenizer._token_end_id, tokenizer._token_pad_id) == (0, 0, 0)
    assert tokenizer.encode("a c b") == ([0, 1, 0, 2, 0], [0, 0, 0, 0, 0])
    with pytest.raises(ConfigError, match="expected a vocabulary with"):
        _tokenizer.Tokenizer({"[PAD]": 0, "a": 1})  # kerasbert's own Tokenizer: a BERT checkpoint's vocabulary


def test_tokenizer_base_subclass():
    class Characters(TokenizerBase):
        def _tokenize(self, text):
            return list(text)

        def token_to_id(self, token):
            return ord(token) if len(token) == 1 else {"[CLS]": 1, "[SEP]": 2}[token]

        def id_to_token(self, i):
            return chr(i)

    characters = Characters(token_translate={"b": "c"})
    assert characters.tokenize("abb", maxlen=4) == ["[CLS]", "a", "c", "[SEP]"]  # cut before [SEP]
    assert characters.encode("ab", "de", maxlen=5) == ([1, 97, 2, 100, 2], [0, 0, 0, 1, 1])
    assert characters.ids_to_tokens([97, 98]) == ["a", "b"]
    with pytest.raises(NotImplementedError, match="decode"):
        characters.decode([97])


def test_save_vocab_round_trip(vocab, tmp_path):
    token_dict, keep_tokens = load_vocab(vocab, simplified=True, startswith=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    path = str(tmp_path / "kept.txt")
    save_vocab(path, token_dict)
    assert load_vocab(dict_path=path) == token_dict
    assert tokenizers.__all__ == ["SpTokenizer", "Tokenizer", "TokenizerBase", "load_vocab", "save_vocab"]


def test_load_vocab_reads_the_encoding_given(tmp_path):
    """bert4keras's ``load_vocab(dict_path, encoding)``, its second argument by position: a GBK vocabulary reads as
    it is written, and read as UTF-8 it is one clear error naming the line."""
    from kerasbert.errors import ConfigError

    path = str(tmp_path / "vocab.txt")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "中", "国"]
    with open(path, "w", encoding="gbk") as f:
        f.write("\n".join(tokens) + "\n")
    assert load_vocab(path, "gbk") == {token: i for i, token in enumerate(tokens)}
    assert load_vocab(path, encoding="gbk", simplified=True, startswith=["[PAD]"])[1] == [0, 4, 5]  # [..] dropped
    with pytest.raises(ConfigError, match=r"vocab.txt:5: expected utf-8 text"):
        load_vocab(path)
