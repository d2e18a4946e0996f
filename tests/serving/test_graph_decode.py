"""GraphDetokenizer against kerasbert's Tokenizer.decode: random id rows, eagerly, traced and in a SavedModel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.serving.graph_decode import GraphDetokenizer
from kerasbert.text.tokenizer import Tokenizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused1]", "[]"]
VOCAB = list(dict.fromkeys(
    SPECIALS + list("中国人我们好天气") + ["中国", "ab中", "##中", "##国"]
    + list(",.!?'()[]#:;\"") + list("，。！？、（）《》“”：；…—·＋－／＝") + list("+-/={<")
    + list("0123456789") + ["１", "２", "３", "٣", "²", "12", "##3", "3.5"]
    + "hello world play ##ing ##ed ##s ##er ## ### don re s t ll ve m d it we".split()
    + ["\u3000", "\u2003", "\xa0", "", "a b"]))  # whitespace in tokens: a list vocabulary can hold it


@pytest.fixture(scope="module")
def graph():
    detokenizer = GraphDetokenizer(VOCAB)
    ids, lengths = tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)
    traced = tf.function(detokenizer.detokenize, input_signature=[ids, lengths])
    return detokenizer, traced


@pytest.fixture(scope="module")
def reference():
    return Tokenizer({token: i for i, token in enumerate(VOCAB)})


def _texts(tensor: tf.Tensor) -> list[str]:
    return [value.decode() for value in tensor.numpy()]


rows = st.lists(st.lists(st.integers(0, len(VOCAB) - 1), max_size=14), min_size=1, max_size=6)


@settings(max_examples=50, deadline=None)
@given(rows=rows, pad=st.integers(0, 3), filler=st.integers(0, len(VOCAB) - 1))
def test_random_rows_decode_as_tokenizer(graph, reference, rows, pad, filler):
    detokenizer, traced = graph
    width = max(map(len, rows)) + pad
    ids = np.full((len(rows), width), filler, np.int32)  # ids past a row's length are not read
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    lengths = np.array([len(row) for row in rows], np.int32)
    expected = [reference.decode(row) for row in rows]
    assert _texts(traced(ids, lengths)) == expected
    assert _texts(detokenizer.detokenize(tf.constant(ids), tf.constant(lengths))) == expected
    full = [reference.decode(row) for row in ids.tolist()]
    assert _texts(detokenizer.detokenize(tf.constant(ids))) == full  # no lengths: every id


def test_edges(graph, reference):
    detokenizer, _ = graph
    assert detokenizer.detokenize(tf.zeros([0, 4], tf.int32)).shape == (0,)
    assert _texts(detokenizer.detokenize(tf.zeros([2, 0], tf.int32))) == ["", ""]
    ids = tf.constant([[VOCAB.index("中"), VOCAB.index("hello")]] * 3, tf.int64)
    assert _texts(detokenizer.detokenize(ids, tf.constant([-1, 1, 9]))) == ["", "中", "中hello"]  # clipped to 0..T


def test_saved_model_without_kerasbert(graph, reference, tmp_path):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, len(VOCAB), (64, 20)).astype(np.int32)
    lengths = rng.integers(0, 21, 64).astype(np.int32)
    module = tf.Module()
    module.detokenizer = GraphDetokenizer({token: i for i, token in enumerate(VOCAB)})
    module.decode = tf.function(lambda ids, lengths: module.detokenizer.detokenize(ids, lengths), input_signature=[
        tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None], tf.int32)])
    tf.saved_model.save(module, str(tmp_path / "model"))
    (tmp_path / "ids.json").write_text(json.dumps([ids.tolist(), lengths.tolist()]), encoding="utf-8")
    script = """if True:
        import json, sys
        sys.modules["kerasbert"] = sys.modules["tensorflow_text"] = None  # neither can be imported here
        import tensorflow as tf
        ids, lengths = json.load(open("ids.json", encoding="utf-8"))
        model = tf.saved_model.load("model")
        texts = model.decode(tf.constant(ids, tf.int32), tf.constant(lengths, tf.int32)).numpy()
        json.dump([text.decode() for text in texts], open("out.json", "w", encoding="utf-8"))
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    run = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    expected = [reference.decode(row[:n]) for row, n in zip(ids.tolist(), lengths.tolist(), strict=True)]
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8")) == expected
    loaded = tf.saved_model.load(str(tmp_path / "model"))
    assert _texts(loaded.decode(tf.constant(ids), tf.constant(lengths))) == expected


def test_bad_vocabulary():
    with pytest.raises(Exception, match=r"\[CLS\]"):
        GraphDetokenizer(["[PAD]", "[UNK]", "a"])
