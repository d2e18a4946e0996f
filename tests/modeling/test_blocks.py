"""The Transformer blocks: numbers against NumPy, their speed variants against their plain forms, Keras's
quantization and LoRA on their projections, and `.keras` files old and new."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys

import keras
import numpy as np
import pytest

from kerasbert import build_transformer_model
from kerasbert.modeling import heads
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention
from kerasbert.perf.onednn import ONEDNN_BF16_FLAGS, cpu_flags
from kerasbert.perf.variants import forced

rng = np.random.default_rng(0)
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
BLOCK_VARIANTS = ("dense_2d", "onednn_scores", "xla_gelu", "float32_activation")
ON, OFF = dict.fromkeys(BLOCK_VARIANTS, True), dict.fromkeys(BLOCK_VARIANTS, False)


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def blocks_of(model: keras.Model) -> list[MultiHeadSelfAttention | FeedForward]:
    return [layer for layer in model._flatten_layers() if isinstance(layer, (MultiHeadSelfAttention, FeedForward))]


def tiny_inputs(batch: int = 2, length: int = 7) -> list[np.ndarray]:
    token_ids = rng.integers(1, 100, (batch, length))
    token_ids[1, length - 2:] = 0  # padding
    return [token_ids, np.zeros((batch, length), "int32")]


def numpy(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


@pytest.mark.parametrize("variants", [ON, OFF], ids=["variants", "plain"])
def test_attention_equals_numpy_reference(variants):
    batch, length, hidden, heads_ = 2, 5, 8, 2
    layer = MultiHeadSelfAttention(num_heads=heads_)
    x = rng.normal(size=(batch, length, hidden)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    layer([x, mask])
    for w in layer.weights:
        w.assign(rng.normal(0, 0.5, w.shape).astype("float32"))
    with forced(variants):
        got, first = numpy(layer([x, mask])), numpy(layer([x, mask], first_token=True))
    assert first.shape == (batch, hidden)
    wq, wk, wv = np.split(layer.qkv_kernel.numpy(), 3, axis=1)
    bq, bk, bv = np.split(layer.qkv_bias.numpy(), 3)
    d = hidden // heads_
    for b in range(batch):
        q, k, v = x[b] @ wq + bq, x[b] @ wk + bk, x[b] @ wv + bv
        heads_out = []
        for h in range(heads_):
            cols = slice(h * d, (h + 1) * d)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(d)
            scores[:, ~mask[b]] = -np.inf
            heads_out.append(np_softmax(scores) @ v[:, cols])
        expected = np.concatenate(heads_out, axis=1) @ layer.output_kernel.numpy() + layer.output_bias.numpy()
        np.testing.assert_allclose(got[b], expected, atol=1e-5)
        np.testing.assert_allclose(first[b], expected[0], atol=1e-5)  # [CLS]'s query alone: row 0


@pytest.mark.parametrize("variants", [ON, OFF], ids=["variants", "plain"])
def test_feed_forward_equals_numpy(variants):
    ff = FeedForward(units=6, activation="relu")
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    ff(x)
    expected = np.maximum(x @ ff.intermediate_kernel.numpy() + ff.intermediate_bias.numpy(), 0)
    expected = expected @ ff.output_kernel.numpy() + ff.output_bias.numpy()
    with forced(variants):
        np.testing.assert_allclose(ff(x), expected, atol=1e-5)


def test_blocks_name_their_weights_as_the_checkpoint_tables_do():
    attention, ff = MultiHeadSelfAttention(num_heads=2), FeedForward(units=16)
    attention([np.ones((1, 3, 8), "float32"), np.ones((1, 3), bool)])
    ff(np.ones((1, 3, 8), "float32"))
    assert list(attention.weights_by_key()) == ["qkv_kernel", "qkv_bias", "output_kernel", "output_bias"]
    assert list(ff.weights_by_key()) == ["intermediate_kernel", "intermediate_bias", "output_kernel", "output_bias"]
    assert [w.name for w in attention.weights] == ["kernel", "bias"] * 2
    assert attention.qkv_kernel is attention.weights_by_key()["qkv_kernel"] and tuple(ff.output_kernel.shape) == (16, 8)


def test_the_speed_variants_give_the_plain_forms_numbers_in_inference_and_training():
    """The whole tiny encoder in float32, every block variant on and then off: within float32 rounding; and the
    feed-forward of BERT-base's width (where the XLA GELU runs) in a traced training step."""
    model, inputs = build_transformer_model("tiny", verbose=False), tiny_inputs()
    with forced(ON):
        on = numpy(model(inputs, training=False))
    with forced(OFF):
        off = numpy(model(inputs, training=False))
    np.testing.assert_allclose(on, off, rtol=1e-6, atol=1e-6)
    if keras.config.backend() != "tensorflow":
        return
    import tensorflow as tf

    ff, x = FeedForward(units=3072), rng.normal(size=(2, 3, 16)).astype("float32")
    ff(x)
    results = []
    for variants in (ON, OFF):
        with forced(variants):
            results.append(numpy(tf.function(lambda v: ff(v, training=True))(x)))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


def test_model_quantize_int8_reaches_every_projection_and_the_file_keeps_it(tmp_path):
    model, inputs = build_transformer_model("tiny", verbose=False), tiny_inputs()
    before = numpy(model(inputs))
    model.quantize("int8")
    for block in blocks_of(model):
        assert [layer.quantization_mode for layer in block.projections.values()] == ["int8", "int8"]
        assert all(keras.backend.standardize_dtype(w.dtype) == "int8" for key, w in block.weights_by_key().items()
                   if key.endswith("_kernel"))
    after = numpy(model(inputs))
    assert np.linalg.norm(after - before) / np.linalg.norm(before) <= 0.05
    assert all(block.param_formula().value == block.count_params() for block in blocks_of(model))  # + int8 scales
    model.save(tmp_path / "int8.keras")
    loaded = keras.saving.load_model(tmp_path / "int8.keras", compile=False)
    assert all(layer.quantization_mode == "int8" for block in blocks_of(loaded) for layer in block.projections.values())
    np.testing.assert_allclose(numpy(loaded(inputs)), after, rtol=1e-6, atol=1e-6)


def test_float8_quantization_reaches_the_projections_too():
    model, inputs = build_transformer_model("tiny", verbose=False), tiny_inputs()
    before = numpy(model(inputs))
    model.quantize("float8")
    modes = {layer.quantization_mode for block in blocks_of(model) for layer in block.projections.values()}
    assert modes == {"float8"}
    assert np.linalg.norm(numpy(model(inputs)) - before) / np.linalg.norm(before) <= 0.05


def test_a_quantized_classifier_reads_cls_from_every_positions_projection():
    """`heads.cls` runs its last attention block for ``[CLS]`` alone (``first_token=True``); a quantized Q/K/V
    kernel is not split, so that call projects every position and keeps ``[CLS]``'s query."""
    model, inputs = heads.cls(build_transformer_model("tiny", verbose=False), 3), tiny_inputs()
    before = numpy(model(inputs))
    model.quantize("int8")
    np.testing.assert_allclose(numpy(model(inputs)), before, atol=0.05)
    attention = blocks_of(model)[-2]
    x, mask = rng.normal(size=(2, 5, 32)).astype("float32"), np.ones((2, 5), bool)
    np.testing.assert_allclose(numpy(attention([x, mask], first_token=True)), numpy(attention([x, mask]))[:, 0],
                               atol=1e-5)


def test_enable_lora_trains_only_the_lora_weights_of_the_projections(tmp_path):
    model, inputs = build_transformer_model("tiny", verbose=False), tiny_inputs()
    for block in blocks_of(model):
        block.enable_lora(2)
    projections = [layer for block in blocks_of(model) for layer in block.projections.values()]
    assert len(projections) == 2 * len(blocks_of(model)) and all(layer.lora_enabled for layer in projections)
    assert all(block.param_formula().value == block.count_params() for block in blocks_of(model))  # + r·(in+out)
    trainable = {id(w) for w in model.trainable_weights}
    kernels = [layer._kernel for layer in projections]
    loras = [w for layer in projections for w in (layer.lora_kernel_a, layer.lora_kernel_b)]
    assert not any(id(k) in trainable for k in kernels) and all(id(w) in trainable for w in loras)
    kernels_before, loras_before = [k.numpy() for k in kernels], [w.numpy() for w in loras]
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(inputs, rng.normal(size=(2, 7, 32)), epochs=2, verbose=0)
    assert all(np.array_equal(k.numpy(), before) for k, before in zip(kernels, kernels_before, strict=True))
    assert any(not np.array_equal(w.numpy(), before) for w, before in zip(loras, loras_before, strict=True))
    attention, x, mask = blocks_of(model)[0], rng.normal(size=(2, 5, 32)).astype("float32"), np.ones((2, 5), bool)
    np.testing.assert_allclose(numpy(attention([x, mask], first_token=True)), numpy(attention([x, mask]))[:, 0],
                               atol=1e-5)  # [CLS]'s query from the kernel with its LoRA update
    trained = numpy(model(inputs))
    model.save(tmp_path / "lora.keras")  # Keras's Dense saves its LoRA merged into the kernel
    loaded = keras.saving.load_model(tmp_path / "lora.keras", compile=False)
    np.testing.assert_allclose(numpy(loaded(inputs)), trained, rtol=1e-5, atol=1e-6)


def test_lora_the_keras_way_on_each_dense_and_on_a_quantized_model(tmp_path):
    model, inputs = build_transformer_model("tiny", verbose=False), tiny_inputs()
    model.quantize("int8")
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dense):
            layer.enable_lora(2)
    assert all(layer.lora_enabled for block in blocks_of(model) for layer in block.projections.values())
    assert "qkv_lora_kernel_a" in blocks_of(model)[0].weights_by_key()
    out = numpy(model(inputs))
    model.save(tmp_path / "int8-lora.keras")
    # a reloaded int8 model may take another oneDNN kernel (its buffers placed elsewhere) and sum in another order
    np.testing.assert_allclose(numpy(keras.saving.load_model(tmp_path / "int8-lora.keras")(inputs)), out, atol=1e-4)


def test_a_checkpoint_is_not_read_into_or_written_from_quantized_or_lora_projections(tmp_path):
    from kerasbert.errors import ModelError
    from kerasbert.weights.google import save_google_checkpoint

    model = build_transformer_model("tiny", verbose=False)
    blocks_of(model)[0].enable_lora(2)
    with pytest.raises(ModelError, match="Transformer-0-MultiHeadSelfAttention's qkv projection: expected float"):
        save_google_checkpoint(model, tmp_path / "bert_model.ckpt")
    model = build_transformer_model("tiny", verbose=False)
    model.quantize("int8")
    with pytest.raises(ModelError, match="found int8 quantization"):
        save_google_checkpoint(model, tmp_path / "bert_model.ckpt")


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_blocks_and_their_projections_share_the_mixed_precision_policy(policy):
    x, mask = rng.normal(size=(2, 5, 8)).astype("float32"), np.array([[1, 1, 1, 0, 0]] * 2, bool)
    for make, inputs in ((lambda **k: MultiHeadSelfAttention(num_heads=2, **k), [x, mask]),
                         (lambda **k: FeedForward(units=16, **k), x)):
        reference, layer = make(), make(dtype=policy)
        expected = numpy(reference(inputs))
        layer(inputs)
        layer.set_weights(reference.get_weights())
        out = layer(inputs)
        assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
        assert all(p.dtype_policy.name == policy for p in layer.projections.values())
        assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in layer.weights)
        np.testing.assert_allclose(numpy(keras.ops.cast(out, "float32")), expected, atol=0.05)


def test_enable_lora_and_quantize_ask_for_a_built_block():
    from kerasbert.errors import ModelError

    with pytest.raises(ModelError, match="expected a built block for enable_lora"):
        FeedForward(units=4, name="ffn").enable_lora(2)


@pytest.mark.parametrize("name", ["cls", "tagging", "tagging-crf"])
def test_a_file_whose_blocks_kept_flat_weights_loads_and_saves_in_the_new_form(name, tmp_path):
    model = keras.saving.load_model(os.path.join(FIXTURES, f"{name}.keras"), compile=False)
    saved = np.load(os.path.join(FIXTURES, f"{name}.npz"))
    inputs = [saved["token_ids"], saved["segment_ids"]]
    np.testing.assert_allclose(numpy(model(inputs, training=False)), saved["outputs"], rtol=1e-5, atol=1e-6)
    model.save(tmp_path / "again.keras")
    again = keras.saving.load_model(tmp_path / "again.keras", compile=False)
    np.testing.assert_allclose(numpy(again(inputs, training=False)), saved["outputs"], rtol=1e-5, atol=1e-6)


def test_a_block_refuses_a_flat_store_that_does_not_fit():
    layer = FeedForward(units=4)
    layer(np.ones((1, 2, 8), "float32"))
    with pytest.raises(ValueError, match="4 float weights for its intermediate, output projections, found 3"):
        layer.load_own_variables({"0": 0, "1": 0, "2": 0})


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
    with forced({"float32_activation": True}):
        y = np.asarray(layer(x), "float64")
        xb = x.astype(ml_dtypes.bfloat16).astype("float64")
        exact = 0.5 * xb * (1 + np.vectorize(math.erf)(xb / math.sqrt(2)))
        half_ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(exact), 1e-30))) - 8)
        assert (np.abs(y - exact) <= half_ulp * 1.0001).all()
        if keras.config.backend() == "tensorflow":
            import tensorflow as tf

            graph = np.asarray(tf.function(lambda v: layer(v, training=False))(x), "float64")
            # oneDNN's kernel computes 0.5·x·(1+erf(x/√2)) in float32, where 1+erf cancels below x = -3: one ulp
            assert (np.abs(graph - exact) <= np.where(xb < -3, 2.0, 1.0001) * half_ulp).all()
        trained = np.asarray(layer(x, training=True), "float64")
        assert (np.abs(trained - exact) > half_ulp * 1.0001).any()  # bf16 arithmetic: some more than half an ulp


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
from kerasbert.perf.variants import forced

ffn, attention = FeedForward(units=32, dtype=DTYPE), MultiHeadSelfAttention(num_heads=2, dtype=DTYPE)

@tf.function
def blocks(x, mask):
    with tf.device("/device:CPU:0"):  # TensorFlow's remapper fuses nodes placed on a CPU
        return ffn(x, training=False), attention([x, mask], training=False)

with forced({"dense_2d": True, "onednn_scores": True, "float32_activation": True}):
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
def test_with_dense_2d_tensorflow_runs_each_projection_with_its_bias_and_the_gelu_as_one_matmul():
    """``dense_2d`` keeps ``MatMul -> BiasAdd -> Gelu`` adjacent: TensorFlow's grappler, with oneDNN on, turns
    every projection of both blocks into one ``_FusedMatMul``, the feed-forward's first with its GELU (3-D
    matmuls reshape back before the GELU: four ``BiasAdd`` fusions, none with it)."""
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
from kerasbert.perf.variants import forced

attention = MultiHeadSelfAttention(num_heads=2)
x, mask = tf.random.normal((2, 5, 8)), tf.sequence_mask([5, 3], 5)
with forced({"onednn_scores": True}):
    tf.function(lambda x, mask: attention([x, mask], training=False))(x, mask)
"""


@onednn_rewrites
def test_with_onednn_scores_tensorflow_runs_the_attention_batch_matmuls_without_post_ops():
    """The scale on Q and the subtracted padding penalty keep the scores' batch matmul a plain oneDNN matmul:
    a ``-inf`` bias added to scaled scores is folded into it by TensorFlow as ``binary_mul`` + broadcast
    ``binary_add`` post-ops, slower than the three apart (`kerasbert.perf.block_variants`)."""
    done = run_with_onednn(ATTENTION_PRIMITIVES, ONEDNN_VERBOSE="1")
    matmuls = [line.split(",") for line in done.stdout.splitlines() if line.startswith("onednn_verbose")
               and ",exec," in line and ",matmul," in line]
    assert sorted(fields[-2] for fields in matmuls) == ["2x2x5x4:2x2x4x5", "2x2x5x5:2x2x5x4"]
    assert [fields for fields in matmuls if "post-ops" in ",".join(fields)] == []
