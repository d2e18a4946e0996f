"""The share of [UNK] word pieces and its warning: counted once, over the data, by every encoder."""

from __future__ import annotations

import logging

import pytest

from kerasbert.text.coverage import UNKNOWN_SHARE, unknown_share, warn_unknown
from kerasbert.text.pipeline import encode_classification, encode_ner, text_example
from kerasbert.text.readers import ClassificationExample
from kerasbert.text.span_data import SpanExample, encode_spans
from kerasbert.text.tokenizer import Tokenizer

CHINESE = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"很好北京天气"])})
ENGLISH = ["the weather is good", "Beijing is big"]  # every word [UNK] in a character vocabulary of Chinese


@pytest.fixture
def warnings(caplog):
    caplog.set_level(logging.WARNING, logger="kerasbert")
    logging.getLogger("kerasbert").addHandler(caplog.handler)  # the logger does not propagate
    yield lambda: [r.getMessage() for r in caplog.records if "[UNK]" in r.getMessage()]
    logging.getLogger("kerasbert").removeHandler(caplog.handler)


def test_the_share_counts_pieces_without_cls_and_sep():
    assert unknown_share([[2, 1, 4, 3], [2, 1, 1, 5, 6, 3]], 1, (2, 3)) == pytest.approx(3 / 6)
    assert unknown_share([[2, 3]], 1, (2, 3)) == 0.0 and unknown_share([], 1) == 0.0


def test_a_share_past_the_threshold_warns_once_with_the_share_and_an_example(warnings):
    texts = ["很好", "北京天气很好", "the weather", "很好"]
    rows = CHINESE.encode_batch(texts)[0]  # 12 pieces, 2 of them [UNK] ("the", "weather")
    assert warn_unknown(CHINESE, rows, texts, "in.txt") == pytest.approx(2 / 12)
    assert warnings() == ["in.txt: 16.7% of the word pieces are [UNK] (more than 5%), e.g. in 'the weather': the "
                          "vocabulary does not cover this text, and the model sees little of it. Use the vocab.txt of "
                          "the checkpoint, of a model for this language"]


def test_a_share_at_the_threshold_is_quiet(warnings):
    texts = ["很好" * 10 + "x"] * 2  # 1 [UNK] in 21 pieces: under 5 %
    assert warn_unknown(CHINESE, CHINESE.encode_batch(texts)[0], texts, "data") < UNKNOWN_SHARE
    assert warnings() == []


def test_each_encoder_warns_once_per_data(warnings):
    encode_classification(CHINESE, [ClassificationExample(text, "") for text in ENGLISH * 3], maxlen=8, what="cls")
    encode_ner(CHINESE, [text_example(CHINESE, text) for text in ENGLISH], what="ner")
    encode_spans(CHINESE, [SpanExample(text, []) for text in ENGLISH], None, 16, "span")
    assert [message.split(":")[0] for message in warnings()] == ["cls", "ner", "span"]
    assert all("100.0% of the word pieces are [UNK]" in message and "'the weather is good'" in message
               for message in warnings())
