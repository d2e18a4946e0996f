"""kerasbert.Tokenizer against bert4keras's Tokenizer: tokens, ids, segments, rematch offsets, decode."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kerasbert.errors import ConfigError
from kerasbert.text.tokenizer import Tokenizer

import helpers

CHINESE = "我爱北京天安门，今天天气很好。我们去公园吧！中国人民银行发布了新的数据"
VOCAB = (
    ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("，。！？（）：；、“”《》…")
    + sorted(set(CHINESE) - set("，。！"))
    + "hello world token ##izer ##s are un ##believ ##ably fast the quick brown fox jump over lazy dog back".split()
    + "bert ner very good cafe naive resume angstrom a ##a 1 2 3 ##2 ##3 12 in ##side is it i ##t".split()
    + ["Hello", "The", "ＡＢ", "##Ｃ", "ｅ"]
)
TEXTS = {
    "chinese": ["我爱北京天安门。", "今天天气很好，我们去公园吧！", CHINESE],
    "english": ["Hello, world! Tokenizers are unbelievably fast.",
                "The quick brown fox jumps over the lazy dog's back.", "it is inside 12 3 123 xyzzy"],
    "mixed": ["我用BERT做NER，效果very good!", "北京hello世界world1", "中a国b人c"],
    "accented": ["Café naïve résumé Ångström", "cafe\u0301 NAI\u0308VE", "Héllo ÀÉÎÕÜ", "ΟΔΟΣ ΣΟΦΙΑ İstanbul"],
    "full-width": ["ＡＢＣ１２３，全角！", "（测试）ｅ", "ＡＢ　ＡＢＣ"],
    "emoji": ["我❤️北京😀 hello👍", "🇨🇳中国", "a😀b 😀"],
    "control": ["hel\x00lo\u200bwor\tld\r\n中\x07国\ufffd", "a\u200db\x0bc\x1fd", "\x00\x01"],
    "over-long": ["a" * 201, "a" * 200, "hello " * 80 + CHINESE * 6, "pre" + "x" * 250 + " the"],
    "empty": ["", "   ", "\t\n"],
}
MAXLENS = [None, 3, 8, 20, 64]


def _cases() -> list[list]:
    """[first, second, maxlen] for every text alone and paired with a text of another class."""
    texts = [text for group in TEXTS.values() for text in group]
    cases = [[text, None, maxlen] for text in texts for maxlen in MAXLENS]
    for i, first in enumerate(texts):
        for maxlen in MAXLENS:
            cases.append([first, texts[(i * 7 + 3) % len(texts)], maxlen])
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def vocab_path(tmp_path_factory) -> str:
    return helpers.write_vocab(str(tmp_path_factory.mktemp("tokenizer")), VOCAB)


@pytest.fixture(scope="module")
def oracle(vocab_path, tmp_path_factory) -> dict[bool, list[dict]]:
    """bert4keras's results on every case, cased and uncased: one subprocess for the module."""
    tasks = [{"kind": "tokenizer", "vocab": vocab_path, "do_lower_case": lower, "cases": CASES}
             for lower in (True, False)]
    tasks += [{"kind": "tokenizer", "vocab": vocab_path, "do_lower_case": True, "cases": CASES, "token_start": start,
               "token_end": end} for start, end in ENDS]
    out = helpers.run_oracle(tasks, str(tmp_path_factory.mktemp("tokenizer_oracle")))
    return {True: json.loads(str(out["0/json"])), False: json.loads(str(out["1/json"])),
            **{ends: json.loads(str(out[f"{2 + i}/json"])) for i, ends in enumerate(ENDS)}}


ENDS = [(None, None), ("[CLS]", None), (None, "[SEP]")]  # GPT's tokenizers: no start or end token


def _case_ids(group: str) -> list[int]:
    return [i for i, case in enumerate(CASES) if case[0] in TEXTS[group]]


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
@pytest.mark.parametrize("group", list(TEXTS))
def test_parity_with_bert4keras(vocab_path, oracle, group, lower):
    tokenizer = Tokenizer(vocab_path, do_lower_case=lower)
    for i in _case_ids(group):
        first, second, maxlen = CASES[i]
        expected, tokens = oracle[lower][i], tokenizer.tokenize(first)
        where = f"case {i}: {CASES[i]!r}"
        assert tokens == expected["tokens"], where
        assert tokenizer.tokenize(first, maxlen=maxlen) == expected["cut"], where
        assert list(tokenizer.encode(first, second, maxlen=maxlen)) == [expected["ids"], expected["segments"]], where
        assert tokenizer.rematch(first, tokens) == expected["rematch"], where
        assert tokenizer.decode(expected["ids"]) == expected["decode"], where


@pytest.mark.parametrize("ends", ENDS, ids=["neither", "no-end", "no-start"])
def test_parity_without_start_or_end_tokens(vocab_path, oracle, ends):
    tokenizer = Tokenizer(vocab_path, do_lower_case=True, token_start=ends[0], token_end=ends[1])
    for i, (first, second, maxlen) in enumerate(CASES):
        expected, where = oracle[ends][i], f"case {i}: {CASES[i]!r}"
        assert tokenizer.tokenize(first) == expected["tokens"], where
        assert tokenizer.tokenize(first, maxlen=maxlen) == expected["cut"], where
        assert list(tokenizer.encode(first, second, maxlen=maxlen)) == [expected["ids"], expected["segments"]], where
        assert tokenizer.decode(expected["ids"]) == expected["decode"], where
    firsts = [case[0] for case in CASES[:40]]
    assert tokenizer.encode_batch(firsts, maxlen=6)[0] == [tokenizer.encode(f, maxlen=6)[0] for f in firsts]
    assert tokenizer._token_start_id == (None if ends[0] is None else 2)


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_encode_batch_equals_encode(vocab_path, lower):
    tokenizer = Tokenizer(vocab_path, do_lower_case=lower)
    for maxlen in MAXLENS:
        pairs = [case[:2] for case in CASES if case[2] == maxlen and case[1] is not None]
        firsts, seconds = [p[0] for p in pairs], [p[1] for p in pairs]
        rows = [tokenizer.encode(f, s, maxlen=maxlen) for f, s in pairs]
        assert tokenizer.encode_batch(firsts, seconds, maxlen=maxlen) == ([r[0] for r in rows], [r[1] for r in rows])
        rows = [tokenizer.encode(f, maxlen=maxlen) for f in firsts]
        assert tokenizer.encode_batch(firsts, maxlen=maxlen) == ([r[0] for r in rows], [r[1] for r in rows])


def test_token_ids_and_lookups(vocab_path):
    tokenizer = Tokenizer(vocab_path)
    assert tokenizer.vocab_size == len(VOCAB)
    assert [tokenizer.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "nope")] == [0, 1, 2, 3, 1]
    assert tokenizer.id_to_token(VOCAB.index("##izer")) == "##izer"
    assert tokenizer.tokenize("Tokenizers!") == ["[CLS]", "token", "##izer", "##s", "!", "[SEP]"]
    assert tokenizer.encode(["[CLS]", "hello", "[SEP]"]) == ([2, VOCAB.index("hello"), 3], [0, 0, 0])


def test_token_dict_is_accepted():
    tokenizer = Tokenizer({token: i for i, token in enumerate(VOCAB)})
    assert tokenizer.encode("中国") == ([2, VOCAB.index("中"), VOCAB.index("国"), 3], [0, 0, 0, 0])


def test_missing_special_tokens_name_file_and_tokens(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"vocab\.txt: .*found no \[CLS\], \[SEP\]"):
        Tokenizer(str(path))
    with pytest.raises(ConfigError, match=r"token_dict: .*found no \[PAD\], \[UNK\], \[CLS\], \[SEP\]"):
        Tokenizer({"hello": 0})


def test_bad_arguments(vocab_path):
    tokenizer = Tokenizer(vocab_path)
    with pytest.raises(ConfigError, match="maxlen"):
        tokenizer.encode("hello", maxlen=0)
    with pytest.raises(ConfigError, match="seconds"):
        tokenizer.encode_batch(["a", "b"], ["a"])
    with pytest.raises(ConfigError, match=r'padding: expected False, True, "longest" or "max_length" with maxlen, '
                                          "found 'max_length' without maxlen"):
        tokenizer.encode_batch(["a"], padding="max_length")
    with pytest.raises(ConfigError, match="padding: .*found 'left'"):
        tokenizer.encode_batch(["a"], padding="left")


def test_encode_batch_padded_is_sequence_padding_of_the_rows(vocab_path):
    from kerasbert.compat.snippets import sequence_padding

    tokenizer = Tokenizer(vocab_path)
    firsts, seconds = TEXTS["chinese"] + TEXTS["english"], TEXTS["mixed"] * 2
    for args in ((firsts,), (firsts, seconds)):
        rows = tokenizer.encode_batch(*args, maxlen=20)
        longest = max(map(len, rows[0]))
        for padding, length in ((True, longest), ("longest", longest), ("max_length", 20)):
            padded = tokenizer.encode_batch(*args, maxlen=20, padding=padding)
            for array, unpadded in zip(padded, rows, strict=True):
                assert array.dtype == np.int32 and array.shape == (len(firsts), length)
                np.testing.assert_array_equal(array, sequence_padding(unpadded, length))
    token_ids, segment_ids = tokenizer.encode_batch([], padding=True)
    assert token_ids.shape == segment_ids.shape == (0, 0)
    assert tokenizer.encode_batch(["hello"], padding=False) == ([[2, VOCAB.index("hello"), 3]], [[0, 0, 0]])
