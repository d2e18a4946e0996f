"""``Tokenizer(..., pre_tokenize=...)`` on a vocabulary of words and characters (RoFormer's Chinese kind) against
bert4keras's ``Tokenizer(..., pre_tokenize=lambda s: jieba.cut(s, HMM=False))``."""

from __future__ import annotations

import json
import os
import re

import pytest

from kerasbert.errors import ConfigError
from kerasbert.text.pre_tokenize import jieba_words
from kerasbert.text.tokenizer import Tokenizer

import helpers

TEXTS = [
    "我们今天去北京大学看看，天气很好！",
    "中华人民共和国成立了",
    "我用BERT做NER，效果Very Good!",
    "RoFormer的词表有五万个词和字",
    "北京hello世界 world1 Café",
    "自然语言处理是人工智能的一个方向",
    "",
]
# [PAD] [UNK] [CLS] [SEP] [MASK], punctuation, every character of the texts, then the words jieba cuts (most of
# them: a word the vocabulary lacks is tokenized character by character), and English word pieces
WORDS = ["我们", "今天", "北京大学", "天气", "中华人民共和国", "成立", "效果", "词表", "五万", "自然语言", "处理",
         "人工智能", "方向", "世界", "hello", "world", "bert", "ner", "very", "good", "ro", "##former", "cafe", "1",
         "BERT", "Very", "##1"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("，！,!")
         + sorted({ch for text in TEXTS for ch in text if "\u4e00" <= ch <= "\u9fff"}) + WORDS)
CASES = [[text, None, maxlen] for text in TEXTS for maxlen in (None, 6)] + [
    [TEXTS[0], TEXTS[1], None], [TEXTS[2], TEXTS[3], 12], [TEXTS[5], TEXTS[4], 9]]


@pytest.fixture(scope="module")
def vocab_path(tmp_path_factory) -> str:
    return helpers.write_vocab(str(tmp_path_factory.mktemp("words")), VOCAB)


@pytest.fixture(scope="module")
def oracle(vocab_path, tmp_path_factory) -> dict[bool, list[dict]]:
    tasks = [{"kind": "tokenizer", "vocab": vocab_path, "do_lower_case": lower, "cases": CASES,
              "pre_tokenize": "jieba"} for lower in (True, False)]
    out = helpers.run_oracle(tasks, str(tmp_path_factory.mktemp("words_oracle")))
    return {True: json.loads(str(out["0/json"])), False: json.loads(str(out["1/json"]))}


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_jieba_words_equal_bert4keras(vocab_path, oracle, lower):
    tokenizer = Tokenizer(vocab_path, do_lower_case=lower, pre_tokenize=jieba_words)
    for i, (first, second, maxlen) in enumerate(CASES):
        expected, tokens, where = oracle[lower][i], tokenizer.tokenize(first), f"case {i}: {CASES[i]!r}"
        assert tokens == expected["tokens"], where
        assert tokenizer.tokenize(first, maxlen=maxlen) == expected["cut"], where
        assert list(tokenizer.encode(first, second, maxlen=maxlen)) == [expected["ids"], expected["segments"]], where
        assert tokenizer.rematch(first, tokens) == expected["rematch"], where
        assert tokenizer.decode(expected["ids"]) == expected["decode"], where
    firsts = [case[0] for case in CASES]
    assert tokenizer.encode_batch(firsts) == tuple(list(rows) for rows in zip(*map(tokenizer.encode, firsts),
                                                                              strict=True))


def test_words_of_the_vocabulary_are_one_token(vocab_path):
    words = Tokenizer(vocab_path, pre_tokenize=jieba_words).tokenize(TEXTS[0])
    characters = Tokenizer(vocab_path).tokenize(TEXTS[0])
    assert words[1:5] == ["我们", "今天", "去", "北京大学"]
    assert characters[1:5] == ["我", "们", "今", "天"]


def test_compat_tokenizer_takes_pre_tokenize(vocab_path):
    import jieba

    from kerasbert.compat.tokenizers import Tokenizer as CompatTokenizer

    tokenizer = CompatTokenizer(vocab_path, do_lower_case=True, pre_tokenize=lambda s: jieba.cut(s, HMM=False))
    assert tokenizer.encode(TEXTS[1]) == Tokenizer(vocab_path, pre_tokenize=jieba_words).encode(TEXTS[1])


def test_a_pre_tokenize_that_is_not_a_function(vocab_path):
    with pytest.raises(ConfigError, match="pre_tokenize: expected a function from a text to its words"):
        Tokenizer(vocab_path, pre_tokenize="jieba")


@pytest.fixture
def without_jieba(monkeypatch):
    import sys

    from kerasbert.text.pre_tokenize import require_jieba

    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba raises ImportError
    require_jieba.cache_clear()
    yield
    require_jieba.cache_clear()


def test_without_jieba_the_error_says_how_to_install_it(without_jieba):
    with pytest.raises(ConfigError, match=r"^pre_tokenize: expected the jieba package .*found it is not installed\. "
                                          r"pip install 'kerasbert\[chinese\]' \(or pip install jieba\)$"):
        jieba_words("北京")


def test_without_jieba_whole_word_masking_says_how_to_do_without(without_jieba, vocab_path, tmp_path, capsys):
    """The same missing package named where whole-word masking needs it: by `word_pieces` and, before TensorFlow
    starts, by ``kerasbert pretrain``, with ``--no-whole-word`` as the way out."""
    from kerasbert.cli import main
    from kerasbert.text.masking import word_pieces

    words = (r"whole-word masking: expected the jieba package \(Chinese word segmentation\), found it is not "
             r'installed\. pip install -e "\.\[chinese\]" \(or pip install jieba\), or pass --no-whole-word')
    with pytest.raises(ConfigError, match="^" + words):
        word_pieces(Tokenizer(vocab_path), "北京大学")
    assert word_pieces(Tokenizer(vocab_path), "北京", segment=list)[1] == [0, 1]  # no jieba needed
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("北京大学。\n", encoding="utf-8")
    assert main(["pretrain", "--vocab", vocab_path, "--data", str(corpus), "--out", str(tmp_path / "pt")]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch("kerasbert pretrain: error: " + words + r".*\n", err), err
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt"]


@pytest.mark.slow
def test_jieba_prints_nothing_when_it_builds_its_dictionary():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "from kerasbert.text.pre_tokenize import jieba_words\n"
                           "print(jieba_words('我们去北京大学'))"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, "['我们', '去', '北京大学']\n", "")
