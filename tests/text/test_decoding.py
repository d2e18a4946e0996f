"""decode_tokens (bert4keras's decode rules), piece_table, and the RE2 forms of the rules against Python's ``re``."""

from __future__ import annotations

import re

import pytest
import tensorflow as tf

from kerasbert.text.decoding import _DECODE_RULES, decode_rules_re2, decode_tokens, piece_table
from kerasbert.text.tokenizer import Tokenizer

CASES = [
    (["[CLS]", "今", "天", "天", "气", "很", "好", "，", "我", "们", "去", "公", "园", "。", "[SEP]"],
     "今天天气很好，我们去公园。"),
    (["中", "国", "（", "北", "京", "）", "、", "上", "海"], "中国（北京）、上海"),
    (["un", "##believ", "##able", "fast", "##er", "!"], "unbelievable faster!"),
    (["don", "'", "t", "go", ",", "it", "'", "ll", "rain"], "don't go, it'll rain"),
    (["it", "'", "s"], "it' s"),  # the rule wants a space after the contraction
    (["3", ".", "5", "and", "a", ".", "b"], "3.5 and a. b"),
    (["\uff13", ".", "\uff15", "\u0663", ".", "\u0664"], "\uff13.\uff15 \u0663.\u0664"),  # any decimal digit
    (["x", "\u00b2", ".", "5"], "x \u00b2. 5"),  # a superscript is no decimal digit
    (["1", "+", "2", "-", "3", "=", "x"], "1+2-3=x"),
    (["[CLS]", "[UNK]", "hello", "[MASK]", "[SEP]", "[PAD]"], "hello"),
    (["[", "a", "]"], "[a]"),  # a lone bracket is punctuation, not a special token
    (["中", "hello", "world", "国", "##s", "x"], "中hello world国s x"),
    (["##", "hello"], "hello"),
    (["[CLS]", "中国", "人"], "中国人"),
]


@pytest.mark.parametrize("tokens, text", CASES, ids=[text for _, text in CASES])
def test_decode_tokens(tokens, text):
    assert decode_tokens(tokens) == text


def test_tokenizer_decode_uses_the_rules():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "今", "天", "，", "play", "##ing"]
    tokenizer = Tokenizer({token: i for i, token in enumerate(vocab)})
    assert tokenizer.decode([2, 4, 5, 6, 7, 8, 3]) == "今天，playing"
    assert tokenizer.decode([], tokens=["a", "'", "re", "b"]) == "a're b"
    assert tokenizer.decode([]) == ""


def test_piece_table():
    table = piece_table(["[PAD]", "[]", "中", "，", "!", "##中", "##", "word", "中国", "", "["])
    assert table["text"].tolist() == ["", "", "中", "， ", "! ", "中", "", "word", "中国", "", "[ "]
    assert table["spaced"].tolist() == [False] * 7 + [True] * 3 + [False]
    assert table["ends_cjk"].tolist() == [False, False, True, False, False, True, False, False, True, False, False]


def _re2(texts: list[str]) -> list[str]:
    text = tf.constant(texts)
    for pattern, rewrite in decode_rules_re2():
        text = tf.strings.regex_replace(text, pattern, rewrite)
    return [value.decode() for value in text.numpy()]


def _python_rules(text: str) -> str:
    """`_DECODE_RULES` then the strip: what decode_tokens does after joining the pieces."""
    for pattern, replacement in _DECODE_RULES:
        text = pattern.sub(replacement, text)
    return text.strip()


def test_re2_digits_are_pythons():
    chars = [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]
    digits = [ch for ch in chars if re.fullmatch(r"\d", ch)]
    near = [ch for ch in chars if ch.isnumeric() and ch not in digits][:400]  # superscripts, fractions, numerals
    texts = [f"{a}. {b}" for a, b in zip(digits + near, digits[::-1] + near[::-1], strict=True)]
    assert len(digits) > 600
    assert _re2(texts) == [_python_rules(text) for text in texts]


def test_re2_strips_what_python_strips():
    chars = [chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF]
    spaces = [ch for ch in chars if ch.isspace()]
    kept = ["\u200b", "\ufeff", "\u180e", "\x00", "a"]
    texts = [f"{ch}{ch} a b{ch}" for ch in spaces + kept] + ["".join(spaces), ""]
    assert _re2(texts) == [_python_rules(text) for text in texts]


def test_re2_rules_on_decoded_shapes():
    texts = [" don'  t go' ll  it' s", "a ' re b ' ve c' m d' d", "中， 国（ x+ y- z/ w= v{ u( t< s[ r",
             " \u3000 a\u3000 b", "1. 2. 3. 4", "1.  2", "x' re", "' ll ", "＋ 中 ，"]
    assert _re2(texts) == [_python_rules(text) for text in texts]
