"""Keras masks: every sequence output carries ``Input-Token != 0``, as in bert4keras; reduced outputs carry none."""

from __future__ import annotations

import os
import re
import warnings

import keras
import numpy as np
import pytest
from keras import ops

from kerasbert import build_transformer_model, heads
from kerasbert.modeling.crf import ConditionalRandomField
from kerasbert.modeling.pooling import MaskedMean

TOKENS = np.array([[2, 9, 17, 40, 3, 0, 0], [2, 5, 6, 7, 8, 9, 3], [2, 70, 3, 0, 0, 0, 0]])
SEGMENTS = np.array([[0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0, 0]])
PADDING = TOKENS != 0
SEQUENCE_LAYER = re.compile(r"Embedding-(Token|Token-Segment|Position|Norm|Dropout)|Transformer-\d+-.+")


def keras_mask(tensor):
    return getattr(tensor, "_keras_mask", None)


@pytest.fixture(scope="module")
def bert():
    return build_transformer_model("tiny", verbose=False)


def sequence_outputs(model: keras.Model) -> keras.Model:
    names = [layer.name for layer in model.layers if SEQUENCE_LAYER.fullmatch(layer.name)]
    return keras.Model(model.inputs, {name: model.get_layer(name).output for name in names})


def test_every_sequence_output_carries_the_padding_mask(bert):
    outputs = sequence_outputs(bert)([TOKENS, SEGMENTS])
    assert len(outputs) == 5 + 2 * 8  # five embedding layers, eight per block
    for name, output in outputs.items():
        assert keras_mask(output) is not None, name
        np.testing.assert_array_equal(ops.convert_to_numpy(keras_mask(output)), PADDING, err_msg=name)


def test_masks_without_segments_and_at_a_fixed_length():
    model = build_transformer_model("tiny", type_vocab_size=0, sequence_length=7, verbose=False)
    output = model([TOKENS])
    np.testing.assert_array_equal(ops.convert_to_numpy(keras_mask(output)), PADDING)


@pytest.mark.parametrize("build", [
    lambda b: build_transformer_model("tiny", with_pool=True, verbose=False),
    lambda b: build_transformer_model("tiny", with_nsp=True, verbose=False),
    lambda b: heads.cls(b, 3),
    lambda b: heads.cls(b, 3, first_token_only=False, dropout=0.1),
    lambda b: heads.cls(b, 3, pooling="pooler"),
    lambda b: heads.cls(b, 3, pooling="mean"),
    lambda b: heads.nsp(b),
    lambda b: heads.mlm(b),  # the MLM loss skips label 0 itself: a mask would reweight its per-batch number
    lambda b: heads.tagging(b, 5, crf=True),
], ids=["with_pool", "with_nsp", "cls", "cls-full-block", "cls-pooler", "cls-mean", "nsp", "mlm", "tagging-crf"])
def test_reduced_and_head_outputs_carry_no_mask(bert, build):
    model = build(bert)
    assert all(keras_mask(output) is None for output in model.outputs)
    results = model([TOKENS, SEGMENTS])
    assert all(keras_mask(r) is None for r in (results if isinstance(results, (list, tuple)) else [results]))


def test_softmax_tagging_output_keeps_its_mask(bert):
    output = heads.tagging(bert, 5)([TOKENS, SEGMENTS])
    np.testing.assert_array_equal(ops.convert_to_numpy(keras_mask(output)), PADDING)


def test_no_layer_drops_a_mask_with_a_warning(bert):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for model in (heads.cls(bert, 2), heads.cls(bert, 2, pooling="mean"), heads.mlm(bert),
                      heads.tagging(bert, 3, crf=True, bilstm_units=4, dropout=0.1), heads.tagging(bert, 3)):
            model([TOKENS, SEGMENTS])
    assert not [str(w.message) for w in caught if "mask" in str(w.message)]


def test_saved_model_keeps_the_masks(bert, tmp_path):
    path = os.path.join(tmp_path, "bert.keras")
    bert.save(path)
    loaded = keras.saving.load_model(path)
    for name, output in sequence_outputs(loaded)([TOKENS, SEGMENTS]).items():
        np.testing.assert_array_equal(ops.convert_to_numpy(keras_mask(output)), PADDING, err_msg=name)


def crf_cases(bert, num_labels=4):
    """bert4keras's NER wiring on ``Transformer-1-FeedForward-Norm`` and kerasbert's tagging head, same weights."""
    keras.utils.set_random_seed(3)
    dense = keras.layers.Dense(num_labels)
    emissions = dense(bert.get_layer("Transformer-1-FeedForward-Norm").output)
    crf = ConditionalRandomField()
    by_hand = keras.Model(bert.inputs, crf(emissions))
    head = heads.tagging(bert, num_labels, crf=True, crf_lr_multiplier=1.0)
    head.get_layer("Tagging-Dense").set_weights(dense.get_weights())
    head.get_layer("Tagging-CRF").set_weights(crf.get_weights())
    unmasked = keras.Model(bert.inputs, keras.layers.Identity()(emissions))  # numpy out: no mask, no -inf
    labels = np.random.default_rng(0).integers(0, num_labels, TOKENS.shape)  # padded steps get labels too
    return by_hand, crf, head, unmasked, labels


def test_crf_wired_the_bert4keras_way_reads_the_mask(bert):
    by_hand, crf, head, unmasked, labels = crf_cases(bert)
    out = by_hand.predict([TOKENS, SEGMENTS], verbose=0)
    assert np.isinf(out[~PADDING]).all() and np.isfinite(out[PADDING]).all()
    np.testing.assert_array_equal(out, head.predict([TOKENS, SEGMENTS], verbose=0))
    loss = ops.convert_to_numpy(crf.sparse_loss(labels, out))
    head_crf = head.get_layer("Tagging-CRF")
    np.testing.assert_array_equal(loss, ops.convert_to_numpy(head_crf.sparse_loss(labels, head.predict(
        [TOKENS, SEGMENTS], verbose=0))))
    counted = ops.convert_to_numpy(crf.sparse_loss(labels, unmasked.predict([TOKENS, SEGMENTS], verbose=0)))
    assert np.abs(counted - loss)[[0, 2]].min() > 1e-3  # padding counted: the padded rows' losses change
    np.testing.assert_allclose(counted[1], loss[1], rtol=1e-6)  # the unpadded row is the same


def test_crf_wired_the_bert4keras_way_compiles_to_the_head_loss(bert):
    by_hand, crf, head, _, labels = crf_cases(bert)
    by_hand.compile("sgd", loss=crf.sparse_loss, metrics=[crf.sparse_accuracy])
    head.compile("sgd", **heads.loss_and_metrics(head))
    got = by_hand.evaluate([TOKENS, SEGMENTS], labels, verbose=0)
    want = head.evaluate([TOKENS, SEGMENTS], labels, verbose=0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


class MaskedAverage(keras.layers.Layer):
    """A pooling written the bert4keras way: it reads the Keras mask of its input."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x, mask=None):
        weights = ops.cast(mask, x.dtype)[..., None]
        return ops.sum(x * weights, axis=1) / ops.sum(weights, axis=1)

    def compute_mask(self, inputs, mask=None):
        return None


def test_pooling_on_the_keras_mask_ignores_padding(bert):
    sequence = bert.get_layer("Transformer-1-FeedForward-Norm").output
    pooled = keras.Model(bert.inputs, MaskedAverage()(sequence))
    explicit = keras.Model(bert.inputs, MaskedMean()([sequence, bert.get_layer("Attention-Mask").output]))
    got = pooled.predict([TOKENS, SEGMENTS], verbose=0)
    np.testing.assert_array_equal(got, explicit.predict([TOKENS, SEGMENTS], verbose=0))
    for row in (0, 2):  # the padded rows pool as the same rows without their padding
        length = int(PADDING[row].sum())
        alone = pooled.predict([TOKENS[row:row + 1, :length], SEGMENTS[row:row + 1, :length]], verbose=0)
        np.testing.assert_allclose(got[row], alone[0], atol=1e-5)
