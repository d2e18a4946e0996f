"""kerasbert.text.predictions: the one NumPy Viterbi and the prediction rows every predictor makes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.text.predictions import entities_row, label_row, piece_tags, spans_row, viterbi
from kerasbert.text.readers import LabelSet


def test_the_numpy_viterbi_is_the_crf_layers():
    from keras import ops

    from kerasbert.modeling.crf import viterbi_decode

    rng = np.random.default_rng(0)
    for case in range(50):
        batch, length, k = int(rng.integers(1, 4)), int(rng.integers(1, 21)), int(rng.integers(2, 10))
        emissions = rng.normal(size=(batch, length, k)).astype(np.float32) * 3
        trans = rng.normal(size=(k, k)).astype(np.float32) * 2
        lengths = rng.integers(1, length + 1, size=batch)
        lengths[0] = length  # one row unpadded
        mask = np.arange(length)[None] < lengths[:, None]
        paths = ops.convert_to_numpy(viterbi_decode(ops.array(emissions), ops.array(trans), ops.array(mask)))
        for row in range(batch):
            n = int(lengths[row])
            assert viterbi(emissions[row, :n], trans).tolist() == paths[row, :n].tolist(), (case, row)
            assert (paths[row, n:] == -1).all()


def test_the_viterbi_decoder_is_the_same_viterbi():
    from kerasbert.modeling.crf import ViterbiDecoder

    rng = np.random.default_rng(1)
    for _ in range(20):
        length, k = int(rng.integers(1, 12)), int(rng.integers(2, 7))
        emissions, trans = rng.normal(size=(length, k)) * 3, rng.normal(size=(k, k))
        starts, ends = [0], [0, k - 1]
        before = emissions.copy()
        got = ViterbiDecoder(trans, starts, ends).decode(emissions)
        assert got.tolist() == viterbi(emissions, trans, starts, ends).tolist()
        assert got[0] == 0 and got[-1] in ends
        np.testing.assert_array_equal(emissions, before)  # not modified


def test_a_label_row_rounds_to_six_places_by_label():
    row = label_row(np.array([0.1234567, 0.8765433], np.float32), ["neg", "pos"])
    assert row == {"label": "pos", "probabilities": {"neg": 0.123457, "pos": 0.876543}}
    assert json.dumps(row) == '{"label": "pos", "probabilities": {"neg": 0.123457, "pos": 0.876543}}'
    assert label_row([0.5, 0.5], ["a", "b"])["label"] == "a"  # a tie: the first label, as argmax


def test_an_entities_row_reads_each_words_first_piece():
    labels = LabelSet(["O", "B-LOC", "I-LOC", "B-PER", "I-PER"])
    text = "张伟去北京"
    offsets = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    # [CLS] 张 伟 去 北 京 [SEP]; the last word cut by maxlen (-1) reads as O
    tags = [0, 3, 4, 0, 1, 2, 0]
    assert entities_row(text, tags, [1, 2, 3, 4, 5], offsets, labels) == {"entities": [
        {"start": 0, "end": 2, "label": "PER", "text": "张伟"}, {"start": 3, "end": 5, "label": "LOC", "text": "北京"}]}
    assert entities_row(text, tags, [1, 2, 3, 4, -1], offsets, labels)["entities"][-1]["end"] == 4
    assert spans_row(text, [(3, 5, "LOC")]) == {"entities": [{"start": 3, "end": 5, "label": "LOC", "text": "北京"}]}


@pytest.mark.parametrize("crf", [False, True])
def test_piece_tags_are_the_argmax_or_the_viterbi_path(crf):
    scores = np.array([[0.0, 2.0], [1.0, 0.0], [0.0, 1.0]], np.float32)
    trans = np.array([[0.0, 0.0], [-9.0, 0.0]]) if crf else None
    assert piece_tags(scores, trans).tolist() == ([1, 1, 1] if crf else [1, 0, 1])


def test_predictions_import_without_tensorflow():
    code = ("import sys, kerasbert.text.predictions, kerasbert.serving.runtime; "
            "print('tensorflow' in sys.modules, 'keras' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
