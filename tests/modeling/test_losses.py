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
