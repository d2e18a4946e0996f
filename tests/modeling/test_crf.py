"""ConditionalRandomField and Viterbi decoding: bert4keras parity, brute-force checks, interface."""

from __future__ import annotations

import itertools
import os

import keras
import numpy as np
import pytest
from keras import ops

from kerasbert.errors import ModelError
from kerasbert.modeling.crf import ConditionalRandomField, ViterbiDecoder, crf_accuracy, log_partition, viterbi_decode

import helpers

# (batch, seq, labels, starts/ends for the NumPy decoder); every batch has ragged right padding.
CASES = [(6, 9, 5, None), (8, 16, 11, None), (5, 7, 3, None), (6, 9, 5, ([0], [0]))]


def make_case(index: int, batch: int, length: int, labels: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(100 + index)
    lengths = rng.integers(1, length + 1, batch)
    lengths[0], lengths[-1] = length, 1  # one full row, one single-step row
    return {
        "emissions": rng.normal(0, 2, (batch, length, labels)).astype(np.float32),
        "trans": rng.normal(0, 1, (labels, labels)).astype(np.float32),
        "mask": np.arange(length)[None] < lengths[:, None],
        "labels": rng.integers(0, labels, (batch, length)).astype(np.int32),
    }


@pytest.fixture(scope="module")
def oracle_crf(tmp_path_factory):
    """bert4keras's CRF outputs for every case, from one subprocess."""
    work = str(tmp_path_factory.mktemp("oracle_crf"))
    cases, tasks = [], []
    for index, (batch, length, labels, bounds) in enumerate(CASES):
        case = make_case(index, batch, length, labels)
        path = os.path.join(work, f"crf-{index}.npz")
        np.savez(path, **case)
        starts, ends = bounds or (None, None)
        tasks.append({"kind": "crf", "inputs": path, "starts": starts, "ends": ends})
        cases.append(case)
    return cases, helpers.run_oracle(tasks, work)


def crf_with(trans: np.ndarray, lr_multiplier: float = 1.0) -> ConditionalRandomField:
    layer = ConditionalRandomField(lr_multiplier)
    layer.build((None, None, trans.shape[0]))
    layer._trans.assign(trans / lr_multiplier)
    return layer


@pytest.mark.parametrize("index", range(len(CASES)))
def test_loss_and_accuracy_equal_bert4keras(oracle_crf, index):
    cases, theirs = oracle_crf
    case = cases[index]
    layer = crf_with(case["trans"])
    masked = layer([case["emissions"], case["mask"]])
    np.testing.assert_array_equal(ops.convert_to_numpy(masked), theirs[f"{index}/masked"])  # -inf on padding
    loss = ops.convert_to_numpy(layer.sparse_loss(case["labels"], masked))
    assert loss.shape == (len(case["mask"]),)
    np.testing.assert_allclose(loss, theirs[f"{index}/loss"], atol=1e-5, rtol=0)
    accuracy = float(layer.sparse_accuracy(case["labels"], masked))
    assert accuracy == pytest.approx(float(theirs[f"{index}/accuracy"]), abs=1e-6)


@pytest.mark.parametrize("index", range(len(CASES)))
def test_viterbi_paths_equal_bert4keras(oracle_crf, index):
    cases, theirs = oracle_crf
    case, expected = cases[index], theirs[f"{index}/paths"]
    starts, ends = CASES[index][3] or (None, None)
    decoder = ViterbiDecoder(case["trans"], starts, ends)
    for row, length in enumerate(case["mask"].sum(1)):
        emissions = case["emissions"][row, :length].copy()
        np.testing.assert_array_equal(decoder.decode(emissions), expected[row, :length])
        np.testing.assert_array_equal(emissions, case["emissions"][row, :length])  # input not modified
    if starts is None:  # the in-graph decoder has no start/end constraints
        paths = viterbi_decode(case["emissions"], case["trans"], case["mask"])
        np.testing.assert_array_equal(ops.convert_to_numpy(paths), expected)


def brute_force(emissions: np.ndarray, trans: np.ndarray) -> tuple[float, np.ndarray, dict]:
    """log Z, the best path and every path's score of one unpadded sequence, by enumeration."""
    length, labels = emissions.shape
    scores = {}
    for path in itertools.product(range(labels), repeat=length):
        steps = zip(path, path[1:], strict=False)
        scores[path] = emissions[np.arange(length), path].sum() + sum(trans[a, b] for a, b in steps)
    values = np.array(list(scores.values()), np.float64)
    log_z = values.max() + np.log(np.exp(values - values.max()).sum())
    return log_z, np.array(max(scores, key=scores.get)), scores


@pytest.mark.parametrize("length", [1, 2, 4])
def test_log_partition_and_viterbi_brute_force(length):
    rng = np.random.default_rng(length)
    emissions = rng.normal(0, 1.5, (3, 6, 3)).astype(np.float32)
    trans = rng.normal(0, 1, (3, 3)).astype(np.float32)
    mask = np.arange(6)[None] < np.array([length, length, 6])[:, None] if length < 6 else np.ones((3, 6), bool)
    mask[1, :length] = True
    log_z = ops.convert_to_numpy(log_partition(emissions, trans, mask))
    paths = ops.convert_to_numpy(viterbi_decode(emissions, trans, mask))
    layer = crf_with(trans)
    labels = rng.integers(0, 3, (3, 6))
    loss = ops.convert_to_numpy(layer.sparse_loss(labels, layer([emissions, mask])))
    for row in range(2):
        expected_z, best, scores = brute_force(emissions[row, :length], trans)
        assert log_z[row] == pytest.approx(expected_z, abs=1e-5)
        np.testing.assert_array_equal(paths[row, :length], best)
        assert (paths[row, length:] == -1).all()
        assert loss[row] == pytest.approx(expected_z - scores[tuple(labels[row, :length])], abs=1e-5)


def test_uniform_crf_loss_is_length_times_log_k():
    # All scores zero: every one of K^n paths is equally likely, so -log p(y) = n·log K.
    layer = crf_with(np.zeros((3, 3), np.float32))
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]], bool)
    loss = ops.convert_to_numpy(layer.sparse_loss(np.zeros((3, 4)), layer([np.zeros((3, 4, 3), np.float32), mask])))
    np.testing.assert_allclose(loss, np.log(3) * np.array([3, 2, 1]), atol=1e-6)


def test_dense_and_sparse_interfaces_agree():
    case = make_case(7, 4, 6, 4)
    layer = crf_with(case["trans"])
    masked = layer([case["emissions"], case["mask"]])
    one_hot = np.eye(4, dtype=np.float32)[case["labels"]]
    np.testing.assert_allclose(ops.convert_to_numpy(layer.dense_loss(one_hot, masked)),
                               ops.convert_to_numpy(layer.sparse_loss(case["labels"], masked)), atol=1e-6)
    assert float(layer.dense_accuracy(one_hot, masked)) == float(crf_accuracy(case["labels"], masked))
    # hand count: argmax of the emissions against the labels, on unpadded steps only
    hits = (case["emissions"].argmax(-1) == case["labels"])[case["mask"]]
    assert float(layer.sparse_accuracy(case["labels"], masked)) == pytest.approx(hits.mean(), abs=1e-6)


def test_keras_mask_is_used_like_bert4keras():
    # bert4keras gets padding from the Keras mask; a single-tensor call here does the same.
    token_ids = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(10, 4, mask_zero=True)(token_ids)
    out = ConditionalRandomField(name="crf")(x)
    model = keras.Model(token_ids, out)
    result = model.predict(np.array([[3, 4, 0]]), verbose=0)
    assert np.isinf(result[0, 2]).all() and np.isfinite(result[0, :2]).all()


def test_lr_multiplier_scales_stored_transitions():
    layer = ConditionalRandomField(lr_multiplier=100.0)
    layer.build((None, None, 4))
    stored = ops.convert_to_numpy(layer._trans)
    np.testing.assert_allclose(ops.convert_to_numpy(layer.trans), 100.0 * stored, rtol=1e-6)
    assert np.abs(stored).max() < np.sqrt(6 / 8) / 100 + 1e-7  # glorot_uniform bound / lr_multiplier
    clone = ConditionalRandomField.from_config(layer.get_config())
    assert clone.lr_multiplier == 100.0 and str(layer.param_formula()) == "K·K = 4·4"


def test_in_graph_decode_runs_in_a_model():
    emissions = keras.Input((None, 3))
    mask = keras.Input((None,), dtype="bool")
    layer = ConditionalRandomField()
    paths = layer([emissions, mask], decode=True)
    assert paths.dtype == "int32" and tuple(paths.shape) == (None, None)
    model = keras.Model([emissions, mask], paths)
    case = make_case(8, 3, 5, 3)
    got = model.predict([case["emissions"], case["mask"]], verbose=0)
    trans = ops.convert_to_numpy(layer.trans)
    for row, length in enumerate(case["mask"].sum(1)):
        np.testing.assert_array_equal(got[row, :length], ViterbiDecoder(trans).decode(case["emissions"][row, :length]))


def test_numpy_decoder_rejects_a_batch():
    message = r"ViterbiDecoder.decode: expected emissions \[seq, 3\], found shape \[2, 4, 3\]"
    with pytest.raises(ModelError, match=message):
        ViterbiDecoder(np.zeros((3, 3))).decode(np.zeros((2, 4, 3)))
