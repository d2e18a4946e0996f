"""The custom layers: numbers against NumPy written from the formulas, formulas, config round trips."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys

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
from kerasbert.perf.fused import gelu_erf_composed
from kerasbert.perf.onednn import ONEDNN_BF16_FLAGS, cpu_flags

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


def test_attention_equals_numpy_reference():
    batch, length, hidden, heads = 2, 5, 8, 2
    layer = MultiHeadSelfAttention(num_heads=heads)
    x = rng.normal(size=(batch, length, hidden)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    layer([x, mask])
    for w in layer.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype("float32"))
    got = keras.ops.convert_to_numpy(layer([x, mask]))
    first = keras.ops.convert_to_numpy(layer([x, mask], first_token=True))
    assert first.shape == (batch, hidden)
    wq, wk, wv = np.split(layer.qkv_kernel.numpy(), 3, axis=1)
    bq, bk, bv = np.split(layer.qkv_bias.numpy(), 3)
    d = hidden // heads
    for b in range(batch):
        q, k, v = x[b] @ wq + bq, x[b] @ wk + bk, x[b] @ wv + bv
        heads_out = []
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(d)
            scores[:, ~mask[b]] = -np.inf
            heads_out.append(np_softmax(scores) @ v[:, cols])
        expected = np.concatenate(heads_out, axis=1) @ layer.output_kernel.numpy() + layer.output_bias.numpy()
        np.testing.assert_allclose(got[b], expected, atol=1e-5)
        np.testing.assert_allclose(first[b], expected[0], atol=1e-5)  # [CLS]'s query alone: row 0


def test_feed_forward_and_position_embedding_equal_numpy():
    ff = FeedForward(units=6, activation="relu")
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    ff(x)
    expected = np.maximum(x @ ff.intermediate_kernel.numpy() + ff.intermediate_bias.numpy(), 0)
    expected = expected @ ff.output_kernel.numpy() + ff.output_bias.numpy()
    np.testing.assert_allclose(ff(x), expected, atol=1e-5)
    pe = PositionEmbedding(10, 4, embeddings_initializer="random_normal")
    np.testing.assert_allclose(pe(x), x + pe.embeddings.numpy()[None, :3], atol=1e-6)


def test_token_embedding_reverse_is_tied_projection():
    emb = TokenEmbedding(7, 4, embeddings_initializer="random_normal")
    ids = np.array([[1, 2, 6]])
    looked_up = keras.ops.convert_to_numpy(emb(ids))
    np.testing.assert_array_equal(looked_up, emb.embeddings.numpy()[ids])
    np.testing.assert_allclose(emb(looked_up, reverse=True), looked_up @ emb.embeddings.numpy().T, atol=1e-6)


@pytest.mark.parametrize("rows", [2, 20])
def test_segment_embedding_equals_a_lookup_and_so_does_its_gradient(rows):
    """One-hot sum (2 rows) or lookup (20 > MAX_ONE_HOT): the same outputs as keras.layers.Embedding, bit for bit,
    and the same gradient: each row gets the sum of its tokens' output gradients."""
    import tensorflow as tf

    ours, theirs = SegmentEmbedding(rows, 4), keras.layers.Embedding(rows, 4)
    ids = rng.integers(0, rows, size=(3, 5)).astype("int32")
    ours.build(ids.shape), theirs.build(ids.shape)
    table = rng.normal(size=(rows, 4)).astype("float32")
    ours.embeddings.assign(table), theirs.embeddings.assign(table)
    upstream = rng.normal(size=(3, 5, 4)).astype("float32")
    grads = []
    for layer in (ours, theirs):
        with tf.GradientTape() as tape:
            out = layer(ids)
            loss = tf.reduce_sum(out * upstream)
        np.testing.assert_array_equal(out, table[ids])
        grads.append(tf.convert_to_tensor(tape.gradient(loss, layer.embeddings.value)).numpy())
    expected = np.zeros_like(table)
    np.add.at(expected, ids, upstream)
    np.testing.assert_allclose(grads[0], expected, atol=1e-5)
    np.testing.assert_allclose(grads[1], expected, atol=1e-5)


def test_segment_embedding_under_mixed_precision_rounds_the_table_once():
    layer = SegmentEmbedding(2, 4, dtype="mixed_bfloat16")
    layer.build((1, 3))
    table = rng.normal(size=(2, 4)).astype("float32")
    layer.embeddings.assign(table)
    out = layer(np.array([[0, 1, 1]]))
    assert out.dtype == "bfloat16" and layer.embeddings.dtype == "float32"
    expected = keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(table, "bfloat16"), "float32"))[[0, 1, 1]]
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))[0], expected)


def test_small_layers():
    np.testing.assert_array_equal(PaddingMask()(np.array([[3, 0, 4, 0]])), [[True, False, True, False]])
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    np.testing.assert_array_equal(TakeToken(1)(x), x[:, 1])
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
    (lambda: PaddingMask(), np.zeros((1, 2), "int32"), "0", 0),
    (lambda: LayerNorm(epsilon=1e-12), np.zeros((1, 2, 768), "float32"), "2·H", 1536),
]


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"center": False}, {"scale": False}])
def test_layer_norm_equals_keras_layer_normalization_in_values_and_gradients(policy, kwargs):
    """Same weights in, the same outputs and gradients for x, gamma and beta (float32: within 1e-5; bf16:
    within one bf16 rounding of values up to ~4, both computing in float32); other axes, and center or scale
    off, go to Keras's own code."""
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
        with tf.GradientTape() as tape:
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


def test_feed_forward_computes_its_activation_in_float32_under_mixed_precision_in_inference():
    """Identity kernels, zero biases: the bf16 layer returns gelu(x) rounded to bf16 once (within half a bf16
    unit in the last place of the float64 value), called eagerly and in a graph (where oneDNN may compute it
    on the matmul's accumulator, `fuses_bf16_activation`: within one unit below x = -3); in bf16 arithmetic
    its three products round three times. Training keeps bf16 (float32 intermediates kept for the backward
    pass cost more memory than they save)."""
    import ml_dtypes

    layer = FeedForward(units=64, dtype="mixed_bfloat16")
    layer.build((None, 64))
    layer.set_weights([np.eye(64, dtype="float32"), np.zeros(64, "float32"), np.eye(64, dtype="float32"),
                       np.zeros(64, "float32")])
    x = np.linspace(-4, 4, 64 * 64, dtype="float32").reshape(64, 64)
    y = np.asarray(layer(x), "float64")
    xb = x.astype(ml_dtypes.bfloat16).astype("float64")
    exact = 0.5 * xb * (1 + np.vectorize(math.erf)(xb / math.sqrt(2)))
    half_ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(exact), 1e-30))) - 8)
    assert (np.abs(y - exact) <= half_ulp * 1.0001).all()
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        graph = np.asarray(tf.function(lambda v: layer(v, training=False))(x), "float64")
        # oneDNN's kernel computes 0.5·x·(1+erf(x/√2)) in float32, where 1+erf cancels below x = -3: one ulp there
        assert (np.abs(graph - exact) <= np.where(xb < -3, 2.0, 1.0001) * half_ulp).all()
    trained = np.asarray(layer(x, training=True), "float64")
    assert (np.abs(trained - exact) > half_ulp * 1.0001).any()  # bf16 arithmetic: some more than half an ulp off


# TensorFlow's oneDNN rewrites exist only there; kerasbert.perf.onednn turns them on on x86-64
onednn_rewrites = pytest.mark.skipif(
    keras.config.backend() != "tensorflow" or platform.machine().lower() not in ("x86_64", "amd64"),
    reason="TensorFlow's oneDNN graph rewrite (kerasbert.perf.onednn turns it on on x86-64)")


def run_with_onednn(script: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh Python that imports kerasbert first, so that kerasbert turns oneDNN on."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**{k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


FUSED_OPS = """
import kerasbert, tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.framework import meta_graph
from tensorflow.python.grappler import tf_optimizer
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention

ffn, attention = FeedForward(units=32, dtype=DTYPE), MultiHeadSelfAttention(num_heads=2, dtype=DTYPE)

@tf.function
def blocks(x, mask):
    with tf.device("/device:CPU:0"):  # TensorFlow's remapper fuses nodes placed on a CPU
        return ffn(x, training=False), attention([x, mask], training=False)

graph = blocks.get_concrete_function(tf.TensorSpec((2, 5, 8)), tf.TensorSpec((2, 5), tf.bool)).graph
meta = meta_graph.create_meta_graph_def(graph=graph)
meta.collection_def["train_op"].node_list.value.extend(t.name for t in graph.outputs)
for node in tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta).node:
    if "MatMul" in node.op and "BatchMatMul" not in node.op:
        print(node.op, "+".join(op.decode() for op in node.attr["fused_ops"].list.s))
    if node.op == "Erfc":  # a GELU outside the matmul's kernel
        print("Erfc", tf.as_dtype(node.attr["T"].type).name)
"""


@onednn_rewrites
def test_tensorflow_runs_each_projection_with_its_bias_and_the_gelu_as_one_matmul():
    """`dense` keeps ``MatMul -> BiasAdd -> Gelu`` adjacent: TensorFlow's grappler, with oneDNN on, turns every
    projection of both blocks into one ``_FusedMatMul``, the feed-forward's first with its GELU (3-D matmuls
    reshape back before the GELU: four ``BiasAdd`` fusions, none with it)."""
    done = run_with_onednn("DTYPE = 'float32'" + FUSED_OPS)
    assert sorted(done.stdout.split("\n")[:-1]) == ["_FusedMatMul BiasAdd"] * 3 + ["_FusedMatMul BiasAdd+GeluExact"]


@onednn_rewrites
def test_under_bf16_tensorflow_fuses_the_gelu_where_onednn_does_bf16_and_else_runs_it_in_float32():
    """Inference under ``mixed_bfloat16``: on a CPU where oneDNN does bf16 (AVX-512, `fuses_bf16_activation`)
    the feed-forward's matmul, bias and GELU are one kernel, as in float32; elsewhere the GELU runs in float32
    beside the matmul (an ``Erfc`` on float32), not in bf16 one element at a time."""
    lines = sorted(run_with_onednn("DTYPE = 'mixed_bfloat16'" + FUSED_OPS).stdout.split("\n")[:-1])
    if any(flag in cpu_flags() for flag in ONEDNN_BF16_FLAGS):
        assert lines == ["_FusedMatMul BiasAdd"] * 3 + ["_FusedMatMul BiasAdd+GeluExact"]
    else:
        assert "Erfc float32" in lines and not any("Gelu" in line for line in lines)


ATTENTION_PRIMITIVES = """
import kerasbert, tensorflow as tf
from kerasbert.modeling.blocks import MultiHeadSelfAttention

attention = MultiHeadSelfAttention(num_heads=2)
x, mask = tf.random.normal((2, 5, 8)), tf.sequence_mask([5, 3], 5)
tf.function(lambda x, mask: attention([x, mask], training=False))(x, mask)
"""


@onednn_rewrites
def test_tensorflow_runs_the_attention_batch_matmuls_without_post_ops():
    """The scale on Q and the subtracted padding penalty keep the scores' batch matmul a plain oneDNN matmul:
    a ``-inf`` bias added to scaled scores is folded into it by TensorFlow as ``binary_mul`` + broadcast
    ``binary_add`` post-ops, 1.4 × slower than the three apart on BERT-base (see `MultiHeadSelfAttention`)."""
    done = run_with_onednn(ATTENTION_PRIMITIVES, ONEDNN_VERBOSE="1")
    matmuls = [line.split(",") for line in done.stdout.splitlines() if line.startswith("onednn_verbose")
               and ",exec," in line and ",matmul," in line]
    assert sorted(fields[-2] for fields in matmuls) == ["2x2x5x4:2x2x4x5", "2x2x5x5:2x2x5x4"]
    assert [fields for fields in matmuls if "post-ops" in ",".join(fields)] == []
