"""SpTokenizer against bert4keras's SpTokenizer on SentencePiece models trained here (unigram and BPE), and T5
PEGASUS's word-level Tokenizer (``pre_tokenize=jieba.cut``) against bert4keras's, in one bert4keras subprocess."""

from __future__ import annotations

import json
import random
import re

import pytest

from kerasbert.errors import ConfigError, DataError
from kerasbert.text.sentencepiece import SpTokenizer, load_model

import helpers

# (model type, token_start, token_end): T5's scripts, and bert4keras's defaults (pieces the model lacks: <unk>)
SETUPS = [("unigram", None, "</s>"), ("bpe", "[CLS]", "[SEP]")]
ODD = ["", "   ", "☃ 😀", "ＡＢＣ１２３", "天气！！", "Hello, World?", "<pad></s>", "x\ty\nz", "北京 大学\u3000新闻"]


def _sentences() -> list[str]:
    rng = random.Random(1)
    words = helpers.SP_ENGLISH + ["unknown", "Tokenizer", "2024", "mT5", "T5"]
    mixed = ["".join(rng.choice(helpers.SP_CHINESE + "龘鬱，。") for _ in range(rng.randint(1, 12))) + " "
             + " ".join(rng.choice(words) for _ in range(rng.randint(0, 6))) for _ in range(40)]
    return mixed + ODD


SENTENCES = _sentences()
CASES = ([[text, None, None, "right"] for text in SENTENCES]
         + [[text, None, [1, 2, 3, 5, 8][i % 5], "right"] for i, text in enumerate(SENTENCES[:12])]
         + [[SENTENCES[2 * i], SENTENCES[2 * i + 1], [None, 4, 7, 10, 16][i % 5], "right"] for i in range(10)]
         + [[SENTENCES[3], None, 4, "left"], [SENTENCES[5], SENTENCES[6], 9, "left"], [SENTENCES[7], None, 5, 1]])
LOOKUP_TOKENS = ["<pad>", "</s>", "<unk>", "[CLS]", "[MASK]", "▁the", "▁新闻", "not-a-piece", ""]
DECODE = [[0, 5, 1], [7, 8, 9, 1, 0, 0], [2, 2, 10], [11, 240, 1]]

# T5 PEGASUS's vocabulary: BERT's special tokens, characters, jieba's words and English word pieces
PEGASUS_TEXTS = ["我们今天去北京大学看看，天气很好！", "新闻标题生成是自然语言处理的一个任务",
                 "T5 PEGASUS用BERT的词表做摘要", "人工智能模型reads news and writes titles.",
                 "中华人民共和国成立了", ""]
PEGASUS_WORDS = ["我们", "今天", "北京大学", "天气", "新闻", "标题", "生成", "自然语言", "处理", "任务", "词表", "摘要",
                 "人工智能", "模型", "中华人民共和国", "成立", "t5", "pe", "##gas", "##us", "bert", "read", "##s",
                 "news", "and", "write", "title"]
PEGASUS_VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("，！.")
                 + sorted({ch for text in PEGASUS_TEXTS for ch in text if "\u4e00" <= ch <= "\u9fff"}) + PEGASUS_WORDS)
PEGASUS_CASES = [[text, None, maxlen] for text in PEGASUS_TEXTS for maxlen in (None, 5)] + [
    [PEGASUS_TEXTS[0], PEGASUS_TEXTS[1], 12]]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    folder = str(tmp_path_factory.mktemp("spm"))
    return {kind: helpers.write_sentencepiece(folder, kind) for kind in ("unigram", "bpe")}


@pytest.fixture(scope="module")
def pegasus_vocab(tmp_path_factory) -> str:
    return helpers.write_vocab(str(tmp_path_factory.mktemp("pegasus")), PEGASUS_VOCAB)


@pytest.fixture(scope="module")
def oracle(models, pegasus_vocab, tmp_path_factory) -> list:
    """bert4keras's answers: one entry per SETUPS row, then T5 PEGASUS's tokenizer, from one subprocess."""
    ids = [0, 1, 2, 3, 100, 1000]
    tasks = [{"kind": "sp_tokenizer", "model": models[kind], "token_start": start, "token_end": end, "cases": CASES,
              "ids": ids, "tokens": LOOKUP_TOKENS, "decode": DECODE} for kind, start, end in SETUPS]
    tasks.append({"kind": "tokenizer", "vocab": pegasus_vocab, "do_lower_case": True, "cases": PEGASUS_CASES,
                  "pre_tokenize": "jieba"})
    out = helpers.run_oracle(tasks, str(tmp_path_factory.mktemp("spm_oracle")))
    return [json.loads(str(out[f"{i}/json"])) for i in range(len(tasks))]


@pytest.mark.slow
@pytest.mark.parametrize("setup", range(len(SETUPS)), ids=[kind for kind, _, _ in SETUPS])
def test_tokens_ids_and_text_equal_bert4keras(models, oracle, setup):
    kind, start, end = SETUPS[setup]
    tokenizer, expected = SpTokenizer(models[kind], token_start=start, token_end=end), oracle[setup]
    assert tokenizer.vocab_size == tokenizer._vocab_size == expected["specials"]["_vocab_size"] > 150
    assert {name: getattr(tokenizer, name) for name in expected["specials"]} == expected["specials"]
    for i, (first, second, maxlen, truncate_from) in enumerate(CASES):
        case, where = expected["cases"][i], f"case {i}: {CASES[i]!r}"
        assert tokenizer.tokenize(first) == case["tokens"], where
        assert tokenizer.tokenize(first, maxlen=maxlen) == case["cut"], where
        assert list(tokenizer.encode(first, second, maxlen, truncate_from=truncate_from)) == [case["ids"],
                                                                                             case["segments"]], where
        assert tokenizer.decode(case["ids"]) == case["decode"], where
    assert [tokenizer.id_to_token(i) for i in [0, 1, 2, 3, 100, 1000]] == expected["id_to_token"]
    assert tokenizer.tokens_to_ids(LOOKUP_TOKENS) == expected["token_to_id"]
    assert [tokenizer.decode(ids) for ids in DECODE] == expected["decode"]
    assert tokenizer.ids_to_tokens(tokenizer.tokens_to_ids(["▁the"])) == ["▁the"]


def test_cases_reach_truncation_and_unknown_pieces(models):
    """The parity cases cut rows and pairs and hold pieces the model lacks, so the comparison covers them."""
    tokenizer = SpTokenizer(models["unigram"], token_start=None, token_end="</s>")
    cut = [case for case in CASES if case[2] is not None and len(tokenizer.encode(*case[:2])[0]) > case[2]]
    assert len(cut) > 15 and any(case[1] is not None for case in cut)
    assert sum(tokenizer._token_unk_id in tokenizer.encode(text)[0] for text in SENTENCES) > 5


@pytest.mark.slow
def test_t5_pegasus_word_tokenizer_equals_bert4keras(pegasus_vocab, oracle):
    """T5 PEGASUS's ``Tokenizer(dict_path, do_lower_case=True, pre_tokenize=lambda s: jieba.cut(s, HMM=False))``,
    ported unchanged: a word of the vocabulary is one token, other text word pieces."""
    import jieba

    from kerasbert.compat.tokenizers import Tokenizer

    tokenizer = Tokenizer(pegasus_vocab, do_lower_case=True, pre_tokenize=lambda s: jieba.cut(s, HMM=False))
    for i, (first, second, maxlen) in enumerate(PEGASUS_CASES):
        expected, where = oracle[-1][i], f"case {i}: {PEGASUS_CASES[i]!r}"
        assert tokenizer.tokenize(first) == expected["tokens"], where
        assert tokenizer.tokenize(first, maxlen=maxlen) == expected["cut"], where
        assert list(tokenizer.encode(first, second, maxlen=maxlen)) == [expected["ids"], expected["segments"]], where
        assert tokenizer.decode(expected["ids"]) == expected["decode"], where
    assert oracle[-1][0]["tokens"][1:5] == ["我们", "今天", "去", "北京大学"]  # whole words of the vocabulary
    assert "##gas" in oracle[-1][4]["tokens"]  # word pieces for the rest


def test_start_and_end_tokens(models):
    tokenizer = SpTokenizer(models["unigram"], token_start=None, token_end="</s>")
    pieces = tokenizer.sp_model.encode_as_pieces("新闻标题")
    assert tokenizer.tokenize("新闻标题") == pieces + ["</s>"]
    assert tokenizer.encode("新闻标题")[0] == tokenizer.sp_model.encode_as_ids("新闻标题") + [1]
    assert tokenizer._token_start_id is None and tokenizer._token_end_id == 1 and tokenizer._token_pad_id == 0
    bert_like = SpTokenizer(models["unigram"])  # [CLS] and [SEP]: pieces the model lacks
    assert bert_like.tokenize("新闻") == ["[CLS]", *tokenizer.sp_model.encode_as_pieces("新闻"), "[SEP]"]
    assert bert_like._token_start_id == bert_like._token_end_id == bert_like._token_unk_id == 2


def test_pre_tokenize_and_token_translate(models):
    tokenizer = SpTokenizer(models["unigram"], token_start=None, token_end="</s>",
                            pre_tokenize=lambda text: list(text), token_translate={"</s>": "[END]"})
    assert tokenizer.tokenize("新闻") == tokenizer.sp_model.encode_as_pieces("新 闻") + ["</s>"]
    plain = SpTokenizer(models["unigram"], token_start=None, token_end=None, token_translate={"▁the": "THE"})
    assert plain.tokenize("the news")[0] == "THE"
    assert plain.decode(plain.tokens_to_ids(plain.sp_model.encode_as_pieces("the news"))) == "the news"


def test_missing_model_file(tmp_path):
    path = str(tmp_path / "spiece.model")
    words = r": expected a SentencePiece \.model file, found {}\. pass the \.model file SentencePiece wrote .*\.vocab"
    with pytest.raises(ConfigError, match="^" + re.escape(path) + words.format("no such file")):
        SpTokenizer(path)
    with pytest.raises(ConfigError, match="^" + re.escape(str(tmp_path)) + words.format("a folder")):
        load_model(tmp_path)


def test_a_file_that_is_not_a_sentencepiece_model(models, tmp_path):
    vocab = models["unigram"][:-len(".model")] + ".vocab"  # the text file the trainer writes beside the model
    words = (r": expected a SentencePiece model \(a serialized ModelProto\), found \d+ bytes starting b'<pad>\\t0\\n"
             r".*', which sentencepiece cannot load\. pass the \.model file SentencePiece wrote .*\.vocab beside it$")
    with pytest.raises(ConfigError, match="^" + re.escape(vocab) + words):
        SpTokenizer(vocab)
    empty = tmp_path / "empty.model"  # no pieces at all: no unknown piece
    empty.write_bytes(b"")
    with pytest.raises(ConfigError, match=r"empty\.model: expected .* found 0 bytes starting b'', which sentencepie"):
        load_model(empty)


def test_a_model_without_a_padding_piece(tmp_path):
    path = helpers.write_sentencepiece(str(tmp_path), "unigram", pad_id=-1)
    with pytest.raises(ConfigError, match=r"expected a SentencePiece model with a padding piece \(pad_id >= 0, as "
                                          r"T5's and mT5's\), found pad_id = -1\. train the model with pad_id=0"):
        SpTokenizer(path)


def test_bad_arguments(models):
    with pytest.raises(ConfigError, match="^pre_tokenize: expected a function from a text to its words"):
        SpTokenizer(models["bpe"], pre_tokenize="jieba")
    tokenizer = SpTokenizer(models["bpe"])
    with pytest.raises(ConfigError, match=r"^maxlen: expected an int >= 1, found 0$"):
        tokenizer.encode("news", maxlen=0)
    with pytest.raises(ConfigError, match=r'^truncate_from: expected "right", "left" or an int index, found .middle.'):
        tokenizer.encode("news", maxlen=2, truncate_from="middle")
    with pytest.raises(DataError, match=r"^ids: expected integer token ids, found the bool True"):
        tokenizer.decode([True])
    with pytest.raises(DataError, match=r"^ids: expected ids from 0 to \d+, found -1$"):
        tokenizer.id_to_token(-1)


def test_exported_from_compat_and_kerasbert(models):
    import kerasbert
    from kerasbert.compat.tokenizers import SpTokenizer as CompatSpTokenizer

    assert CompatSpTokenizer is kerasbert.SpTokenizer is SpTokenizer
