"""Losses and metrics for compile: the default per head, label-range checks in the graph, a reloaded CRF loss."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from kerasbert import ModelError, build_transformer_model, heads
from kerasbert.modeling.losses import loss_and_metrics

BATCH = [np.array([[2, 9, 17, 40, 3, 0, 0], [2, 5, 6, 7, 8, 9, 3], [2, 70, 3, 0, 0, 0, 0]]),
         np.array([[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]])]


@pytest.fixture(scope="module")
def bert():
    return build_transformer_model("tiny", verbose=False)


def test_compiled_crf_model_reloads_and_asks_to_compile_again(tmp_path, bert):
    model = heads.tagging(bert, 3, crf=True)
    model.compile("adam", **loss_and_metrics(model))
    labels = np.ones(BATCH[0].shape, np.int32)
    model.save(str(tmp_path / "crf.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "crf.keras"))
    np.testing.assert_array_equal(loaded.predict(BATCH, verbose=0), model.predict(BATCH, verbose=0))
    with pytest.raises(ModelError, match="crf_loss of Tagging-CRF: expected a loss bound to the model's CRF layer"):
        loaded.fit(BATCH, labels, verbose=0)
    loaded.compile("adam", **loss_and_metrics(loaded))
    assert np.isfinite(loaded.fit(BATCH, labels, verbose=0).history["loss"][0])


@pytest.mark.slow
def test_label_ids_out_of_range_stop_fit(bert):
    import tensorflow as tf

    model = heads.tagging(bert, 3, crf=True)
    model.compile("adam", **loss_and_metrics(model))
    labels = np.zeros(BATCH[0].shape, np.int32)
    labels[1, 2] = 7
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Tagging-CRF labels: expected label ids in \[0, 3\)"):
        model.fit(BATCH, labels, verbose=0)


@pytest.mark.parametrize("head, labels", [(lambda b: heads.cls(b, 2), np.array([0, 2, 1])),
                                          (lambda b: heads.tagging(b, 4), np.full(BATCH[0].shape, -1)),
                                          (heads.mlm, np.full(BATCH[0].shape, 128))])
def test_loss_checks_label_ids_in_graph_mode(bert, head, labels):
    import tensorflow as tf

    model = head(bert)
    loss = loss_and_metrics(model)["loss"]
    predictions = model.predict(BATCH, verbose=0)
    layer, size = model.layers[-1].name, predictions.shape[-1]
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"{layer} labels: expected label ids in \[0, {size}\)"):
        tf.function(loss)(labels, predictions)  # graph mode, as inside fit
    np.testing.assert_allclose(float(tf.function(loss)(np.clip(labels, 0, size - 1), predictions)),
                               float(loss(np.clip(labels, 0, size - 1), predictions)), rtol=1e-6)


# ------------------------------------------------------------------------------------------- sentence pairs
def _unit_pairs(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    unit = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    return unit[0::2], unit[1::2]


def cosent_by_hand(labels: np.ndarray, vectors: np.ndarray, scale: float = 20.0) -> float:
    """log(1 + Σ_{y_i > y_j} exp(λ (cos_j − cos_i))), the pairs' cosines and labels from rows 2i, 2i + 1."""
    a, b = _unit_pairs(vectors.astype(np.float64))
    cosines, pair_labels = (a * b).sum(-1), labels[0::2]
    terms = [scale * (cosines[j] - cosines[i]) for i in range(len(cosines)) for j in range(len(cosines))
             if pair_labels[i] > pair_labels[j]]
    return float(np.log1p(np.exp(terms).sum()))


def in_batch_by_hand(vectors: np.ndarray, scale: float = 20.0) -> float:
    """The mean over pairs i of −log softmax_j(λ cos(a_i, b_j))[i]."""
    a, b = _unit_pairs(vectors.astype(np.float64))
    scores = scale * a @ b.T
    top = scores.max(1, keepdims=True)
    log_softmax = scores - (top + np.log(np.exp(scores - top).sum(1, keepdims=True)))
    return float(-np.diag(log_softmax).mean())


PAIR_LABELS = np.repeat(np.array([3.8, 1.0, 1.0, 5.0, 0.0, 2.5], np.float32), 2)  # ties, graded scores


@pytest.mark.parametrize("scale", [20.0, 5.0])
def test_cosent_equals_numpy_by_hand(scale):
    import tensorflow as tf

    from kerasbert.modeling.losses import CoSENTLoss

    vectors = np.random.default_rng(3).normal(size=(12, 8)).astype(np.float32)  # not unit: the loss normalizes
    expected = cosent_by_hand(PAIR_LABELS, vectors, scale)
    loss = CoSENTLoss(scale)
    assert float(loss(PAIR_LABELS, vectors)) == pytest.approx(expected, rel=1e-5)
    assert float(tf.function(loss)(PAIR_LABELS, vectors)) == pytest.approx(expected, rel=1e-5)  # as inside fit
    assert float(loss(np.zeros(12), vectors)) == 0.0  # equal labels: nothing to rank


def test_in_batch_negatives_equals_numpy_by_hand():
    import tensorflow as tf

    from kerasbert.modeling.losses import InBatchNegativesLoss

    vectors = np.random.default_rng(4).normal(size=(10, 8)).astype(np.float32)
    loss = InBatchNegativesLoss()
    assert float(loss(np.ones(10), vectors)) == pytest.approx(in_batch_by_hand(vectors), rel=1e-5)
    assert float(tf.function(loss)(np.zeros(10), vectors)) == pytest.approx(in_batch_by_hand(vectors), rel=1e-5)
    assert float(InBatchNegativesLoss(5.0)(np.ones(10), vectors)) == pytest.approx(in_batch_by_hand(vectors, 5.0),
                                                                                   rel=1e-5)


@pytest.mark.parametrize("loss_class", ["CoSENTLoss", "InBatchNegativesLoss"])
def test_pair_losses_take_half_precision_vectors_and_round_trip_their_config(loss_class):
    from kerasbert.modeling import losses

    vectors = np.random.default_rng(5).normal(size=(12, 8)).astype(np.float32)
    loss = getattr(losses, loss_class)(scale=7.0)
    again = keras.losses.deserialize(keras.losses.serialize(loss))
    assert type(again) is type(loss) and again.scale == 7.0
    half = float(loss(PAIR_LABELS, vectors.astype("bfloat16")))
    assert half == pytest.approx(float(loss(PAIR_LABELS, vectors.astype("bfloat16").astype(np.float32))), rel=1e-6)
