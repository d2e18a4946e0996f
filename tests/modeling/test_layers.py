"""The custom layers: numbers against NumPy written from the formulas, formulas, config round trips."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest

from kerasbert.annotated.formulas import Formula
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention
from kerasbert.modeling.layers import (
    Bias,
    LayerNorm,
    PaddingMask,
    PositionEmbedding,
    SegmentEmbedding,
    TakeToken,
    TokenEmbedding,
    gelu_erf,
    gelu_tanh,
)
from kerasbert.modeling.pooling import TakePositions
from kerasbert.perf.fused import gelu_erf_composed
from kerasbert.perf.variants import forced

rng = np.random.default_rng(0)


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_formula():
    f = Formula.of("4·(H·H+H)", H=768)
    assert (f.numbers, f.value, str(f)) == ("4·(768·768+768)", 2362368, "4·(H·H+H) = 4·(768·768+768)")
    assert Formula.of("H·I+I+I·H+H", H=768, I=3072).value == 4722432
    with pytest.raises(KeyError):
        Formula.of("V·H", H=3)


def test_gelu_forms():
    x = np.linspace(-4, 4, 17).astype("float32")
    erf = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    tanh = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(gelu_erf(x), erf, atol=1e-6)
    np.testing.assert_allclose(gelu_tanh(x), tanh, atol=1e-6)
    assert np.abs(erf - tanh).max() > 1e-4  # the two forms really differ
    np.testing.assert_allclose(gelu_erf_composed(x), erf, atol=1e-6)


def test_position_embedding_equals_numpy():
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    pe = PositionEmbedding(10, 4, embeddings_initializer="random_normal")
    np.testing.assert_allclose(pe(x), x + pe.embeddings.numpy()[None, :3], atol=1e-6)


def test_token_embedding_reverse_is_tied_projection():
    emb = TokenEmbedding(7, 4, embeddings_initializer="random_normal")
    ids = np.array([[1, 2, 6]])
    looked_up = keras.ops.convert_to_numpy(emb(ids))
    np.testing.assert_array_equal(looked_up, emb.embeddings.numpy()[ids])
    np.testing.assert_allclose(emb(looked_up, reverse=True), looked_up @ emb.embeddings.numpy().T, atol=1e-6)


@pytest.mark.parametrize("variant", [False, True])
@pytest.mark.parametrize("rows", [2, 20])
def test_segment_embedding_equals_a_lookup_and_so_does_its_gradient(rows, variant):
    """A lookup, or with the "one_hot_segments" variant a one-hot sum (2 rows; 20 > MAX_ONE_HOT: a lookup): the
    same outputs as keras.layers.Embedding, bit for bit, and the same gradient: each row gets the sum of its
    tokens' output gradients."""
    import tensorflow as tf

    ours, theirs = SegmentEmbedding(rows, 4), keras.layers.Embedding(rows, 4)
    ids = rng.integers(0, rows, size=(3, 5)).astype("int32")
    ours.build(ids.shape), theirs.build(ids.shape)
    table = rng.normal(size=(rows, 4)).astype("float32")
    ours.embeddings.assign(table), theirs.embeddings.assign(table)
    upstream = rng.normal(size=(3, 5, 4)).astype("float32")
    grads = []
    for layer in (ours, theirs):
        with tf.GradientTape() as tape, forced({"one_hot_segments": variant}):
            out = layer(ids)
            loss = tf.reduce_sum(out * upstream)
        np.testing.assert_array_equal(out, table[ids])
        grads.append(tf.convert_to_tensor(tape.gradient(loss, layer.embeddings.value)).numpy())
    expected = np.zeros_like(table)
    np.add.at(expected, ids, upstream)
    np.testing.assert_allclose(grads[0], expected, atol=1e-5)
    np.testing.assert_allclose(grads[1], expected, atol=1e-5)


@pytest.mark.parametrize("variant", [False, True])
def test_segment_embedding_under_mixed_precision_rounds_the_table_once(variant):
    layer = SegmentEmbedding(2, 4, dtype="mixed_bfloat16")
    layer.build((1, 3))
    table = rng.normal(size=(2, 4)).astype("float32")
    layer.embeddings.assign(table)
    with forced({"one_hot_segments": variant}):
        out = layer(np.array([[0, 1, 1]]))
    assert out.dtype == "bfloat16" and layer.embeddings.dtype == "float32"
    expected = keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(table, "bfloat16"), "float32"))[[0, 1, 1]]
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))[0], expected)


def test_small_layers():
    np.testing.assert_array_equal(PaddingMask()(np.array([[3, 0, 4, 0]])), [[True, False, True, False]])
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    np.testing.assert_array_equal(TakeToken(1)(x), x[:, 1])
    positions = np.array([[2, 0], [1, 1]])
    np.testing.assert_array_equal(TakePositions()([x, positions]), [x[0, [2, 0]], x[1, [1, 1]]])
    bias = Bias()
    bias(x)
    bias.bias.assign(np.arange(4, dtype="float32"))
    np.testing.assert_allclose(bias(x), x + np.arange(4))


LAYERS = [
    (lambda: TokenEmbedding(21128, 768), np.zeros((1, 2), "int32"), "V·H", 16226304),
    (lambda: SegmentEmbedding(2, 768), np.zeros((1, 2), "int32"), "T·H", 1536),
    (lambda: PositionEmbedding(512, 768), np.zeros((1, 2, 768), "float32"), "P·H", 393216),
    (lambda: MultiHeadSelfAttention(12), [np.zeros((1, 2, 768), "float32"), np.ones((1, 2), bool)], "4·(H·H+H)",
     2362368),
    (lambda: FeedForward(3072), np.zeros((1, 2, 768), "float32"), "H·I+I+I·H+H", 4722432),
    (lambda: Bias(), np.zeros((1, 2, 21128), "float32"), "V", 21128),
    (lambda: TakeToken(), np.zeros((1, 2, 768), "float32"), "0", 0),
    (lambda: TakePositions(), [np.zeros((1, 2, 768), "float32"), np.zeros((1, 1), "int32")], "0", 0),
    (lambda: PaddingMask(), np.zeros((1, 2), "int32"), "0", 0),
    (lambda: LayerNorm(epsilon=1e-12), np.zeros((1, 2, 768), "float32"), "2·H", 1536),
]


@pytest.mark.parametrize("variant", [False, True])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"center": False}, {"scale": False}])
def test_layer_norm_equals_keras_layer_normalization_in_values_and_gradients(policy, kwargs, variant):
    """Same weights in, the same outputs and gradients for x, gamma and beta (float32: within 1e-5; bf16:
    within one bf16 rounding of values up to ~4, both computing in float32), with the "centred_layer_norm"
    variant too; other axes, and center or scale off, go to Keras's own code."""
    import tensorflow as tf

    ours, keras_ln = (cls(epsilon=1e-6, dtype=policy, **kwargs) for cls in (LayerNorm, keras.layers.LayerNormalization))
    x = tf.constant(rng.normal(2.0, 3.0, size=(3, 5, 16)).astype("float32"))
    for layer in (ours, keras_ln):
        layer.build(x.shape)
    weights = [rng.normal(1.0, 0.5, size=w.shape).astype("float32") for w in keras_ln.weights]
    ours.set_weights(weights)
    keras_ln.set_weights(weights)
    results = []
    for layer in (ours, keras_ln):
        with tf.GradientTape() as tape, forced({"centred_layer_norm": variant}):
            tape.watch(x)
            y = tf.cast(layer(x), "float32")
            loss = tf.reduce_sum(y * tf.cast(tf.range(16), "float32"))
        results.append([y, *tape.gradient(loss, [x, *layer.trainable_weights])])
    assert ours.compute_dtype == keras_ln.compute_dtype and ours(x).dtype == keras_ln(x).dtype
    tolerance = 1e-5 if policy == "float32" else 0.02
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("make,inputs,symbols,count", LAYERS)
def test_formula_matches_count_and_config_round_trips(make, inputs, symbols, count):
    layer = make()
    out = layer(inputs)
    formula = layer.param_formula()
    assert (formula.symbols, formula.value, layer.count_params()) == (symbols, count, count)
    clone = layer.__class__.from_config(layer.get_config())
    clone(inputs)
    clone.set_weights(layer.get_weights())
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(clone(inputs)), keras.ops.convert_to_numpy(out))
