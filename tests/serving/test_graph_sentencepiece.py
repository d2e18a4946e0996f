"""GraphSpTokenizer against SpTokenizer.encode (bert4keras's ids, tests/text/test_sentencepiece.py): rows and pairs,
cut to maxlen, eagerly, in a tf.function and in a SavedModel."""

from __future__ import annotations

import random

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.errors import ConfigError
from kerasbert.serving.graph_sentencepiece import GraphSpTokenizer
from kerasbert.text.sentencepiece import SpTokenizer

import helpers

SETUPS = [("unigram", None, "</s>"), ("bpe", "[CLS]", "[SEP]"), ("unigram", "</s>", None), ("bpe", None, None)]


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(helpers.SP_CHINESE + "龘，。") for _ in range(rng.randint(0, 14))) + " "
            + " ".join(rng.choice(helpers.SP_ENGLISH + ["unknown", "ＡＢＣ", "😀"]) for _ in range(rng.randint(0, 7)))
            for _ in range(count)] + ["", "  ", "x\ty\nz", "新闻\u3000标题"]


TEXTS, SECONDS = _texts(0, 40), _texts(1, 40)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    folder = str(tmp_path_factory.mktemp("spm"))
    return {kind: helpers.write_sentencepiece(folder, kind) for kind in ("unigram", "bpe")}


def _expected(tokenizer: SpTokenizer, firsts, seconds, maxlen: int) -> tuple[np.ndarray, np.ndarray]:
    rows = [tokenizer.encode(first, second, maxlen=maxlen) for first, second in
            zip(firsts, seconds if seconds is not None else [None] * len(firsts), strict=True)]
    length = max(len(ids) for ids, _ in rows)
    ids = np.full((len(rows), length), tokenizer._token_pad_id)
    segments = np.zeros((len(rows), length), int)
    for i, (row, segment) in enumerate(rows):
        ids[i, :len(row)], segments[i, :len(segment)] = row, segment
    return ids, segments


@pytest.mark.parametrize("setup", SETUPS, ids=["t5", "bert-tokens", "start-only", "bare"])
@pytest.mark.parametrize("maxlen", [1, 3, 8, 64])
def test_ids_equal_sp_tokenizer(models, setup, maxlen):
    kind, start, end = setup
    tokenizer = SpTokenizer(models[kind], token_start=start, token_end=end)
    graph = GraphSpTokenizer(tokenizer, maxlen=maxlen)
    for seconds in (None, SECONDS):
        out = graph.tokenize(tf.constant(TEXTS), None if seconds is None else tf.constant(seconds))
        ids, segments = _expected(tokenizer, TEXTS, seconds, maxlen)
        np.testing.assert_array_equal(out["token_ids"].numpy(), ids)
        np.testing.assert_array_equal(out["segment_ids"].numpy(), segments)
        assert out["lengths"].numpy().tolist() == [len(tokenizer.encode(first, second, maxlen)[0]) for first, second
                                                   in zip(TEXTS, seconds or [None] * len(TEXTS), strict=True)]


def test_long_rows_are_cut(models):
    """maxlen 8 cuts most rows here, so the comparison above covers the cut."""
    tokenizer = SpTokenizer(models["unigram"], token_start=None, token_end="</s>")
    assert sum(len(tokenizer.encode(text)[0]) > 8 for text in TEXTS) > 20


def test_in_a_saved_model(models, tmp_path):
    tokenizer = SpTokenizer(models["bpe"], token_start=None, token_end="</s>")
    module = GraphSpTokenizer(tokenizer, maxlen=12)
    module.serve = tf.function(lambda texts: module.tokenize(texts)["token_ids"],
                               input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "sp"))
    loaded = tf.saved_model.load(str(tmp_path / "sp"))
    np.testing.assert_array_equal(loaded.serve(tf.constant(TEXTS)).numpy(), _expected(tokenizer, TEXTS, None, 12)[0])


def test_what_the_graph_cannot_run(models):
    with pytest.raises(ConfigError, match=r"^SpTokenizer's pre_tokenize: expected None \(the graph runs SentencePiece "
                                          r"alone\), found .*\. tokenize in Python with SpTokenizer\.encode$"):
        GraphSpTokenizer(SpTokenizer(models["bpe"], pre_tokenize=list), maxlen=8)
    with pytest.raises(ConfigError, match=r"^SpTokenizer's token_translate: expected None"):
        GraphSpTokenizer(SpTokenizer(models["bpe"], token_translate={"▁the": "THE"}), maxlen=8)
    with pytest.raises(ConfigError, match=r"^maxlen: expected an int >= 1, found 0$"):
        GraphSpTokenizer(SpTokenizer(models["bpe"]), maxlen=0)
