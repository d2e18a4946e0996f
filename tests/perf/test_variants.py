"""Speed variants: the seam that chooses them, and the same numbers with each one on and off.

Every variant but ``xla_dropout`` gives the plain form's outputs and gradients within float rounding, in float32
and under mixed_bfloat16; ``xla_dropout`` draws another random stream, so its rate and scaling are tested.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.errors import ConfigError
from kerasbert.modeling.layers import Dropout, LayerNorm, SegmentEmbedding
from kerasbert.perf import kernels, variants
from kerasbert.perf.portable import portable_graph
from kerasbert.perf.variants import KINDS, MEASURED, VARIANTS, chosen, cpu_kind, forced, granted, machine_kind, table

from helpers import xla_calls

rng = np.random.default_rng(0)
POLICIES = ["float32", "mixed_bfloat16"]
TOLERANCE = {"float32": 2e-5, "mixed_bfloat16": 2e-2}  # relative to the largest magnitude; bf16 keeps 8 bits
UNSCOPED = [name for name, v in VARIANTS.items() if not v.needs]


@pytest.fixture
def policy(request):
    keras.config.set_dtype_policy(request.param)
    yield request.param
    keras.config.set_dtype_policy("float32")


def _close(a, b, policy, scale=None):
    """``a`` equals ``b`` within the policy's rounding of ``scale`` (``b``'s largest magnitude when None)."""
    a, b = (np.asarray(tf.cast(t, tf.float32)) for t in (a, b))
    scale = float(np.abs(b).max()) if scale is None else scale
    np.testing.assert_allclose(a, b, rtol=0, atol=TOLERANCE[policy] * max(scale, 1e-6))


def _all_close(gradients, expected, policy):
    """Each gradient equals its expected one within rounding of the largest gradient (some, as the attention's key
    bias, are zero in exact arithmetic: only rounding noise, at the scale of the others)."""
    expected = [np.asarray(tf.cast(tf.convert_to_tensor(g), tf.float32)) for g in expected]
    scale = max(float(np.abs(g).max()) for g in expected)
    for a, b in zip(gradients, expected, strict=True):
        _close(tf.convert_to_tensor(a), b, policy, scale)


def test_every_variant_belongs_to_a_kernel_and_the_seam_reads_kind_width_and_scope():
    assert all(v.kinds and v.kinds <= set(KINDS) and v.what and v.kernel in variants.KERNELS
               for v in VARIANTS.values())
    assert machine_kind() in KINDS
    for name, variant in VARIANTS.items():
        assert chosen(name, width=4096) == (not variant.needs and variant.pays(machine_kind(), 4096))
    assert cpu_kind({"avx512f", "avx2"}) == "avx512" and cpu_kind(["amx_tile"]) == "amx"


def test_the_widths_from_which_a_variant_pays_are_in_its_entry():
    """The XLA kernels pay from BERT-base's widths on (their compiles repay), the one-hot sum up to 16 rows; a
    forced choice holds at any width."""
    for name, narrow, wide in (("xla_dropout", 767, 768), ("xla_layer_norm", 767, 768), ("xla_gelu", 3071, 3072)):
        kind = next(iter(VARIANTS[name].kinds))
        assert VARIANTS[name].pays(kind, wide) and not VARIANTS[name].pays(kind, narrow)
        assert not VARIANTS[name].pays(kind, None) and not VARIANTS[name].pays("gpu", wide)
        with forced({name: True}):
            assert chosen(name, narrow)
    assert VARIANTS["one_hot_segments"].pays("gpu", 16) and not VARIANTS["one_hot_segments"].pays("gpu", 17)


def test_a_scoped_variant_runs_only_where_granted_even_forced():
    for name in ("portable_gelu", "portable_layer_norm", "half_gradients"):
        with forced({name: True}):
            assert not chosen(name)
            with granted({name: True}):
                assert chosen(name)
                with granted({name: False}):
                    assert not chosen(name)
    with portable_graph():
        assert chosen("portable_gelu") and chosen("portable_layer_norm") and not chosen("half_gradients")
        with forced({"portable_gelu": False}):
            assert not chosen("portable_gelu")
    assert not chosen("portable_gelu")


def test_forced_choices_hold_inside_and_are_undone_after_even_on_error():
    before = {name: chosen(name, 4096) for name in UNSCOPED}
    with pytest.raises(RuntimeError):
        with forced({name: not on for name, on in before.items()}):
            assert {name: chosen(name, 4096) for name in UNSCOPED} == {n: not on for n, on in before.items()}
            with forced({"xla_dropout": True}):
                assert chosen("xla_dropout")
            raise RuntimeError
    assert {name: chosen(name, 4096) for name in UNSCOPED} == before
    with pytest.raises(ConfigError, match="variant: expected one of .*found 'fast_everything'"):
        with forced({"fast_everything": True}):
            pass
    with pytest.raises(ConfigError):
        chosen("fast_everything")
    with pytest.raises(ConfigError):
        with granted({"fast_everything": True}):
            pass


def test_table_lists_each_variant_with_its_kernel_widths_and_whether_it_runs():
    rows = table("avx2").splitlines()
    assert rows[0] == "| variant | kernel | what | kinds | widths | runs on avx2 |" and len(rows) == 2 + len(VARIANTS)
    assert "| xla_dropout | dropout | training's dropout as one XLA kernel each way (a counter-hash random stream) " \
           "| amx, avx512, avx2 | ≥ 768 | yes |" in rows
    with forced({"one_hot_segments": True}):
        assert "| one_hot_segments | segments | the segment embedding as a one-hot sum, a float32 gradient | gpu " \
               "| T ≤ 16 | yes |" in table("avx2")
    assert any(row.startswith("| portable_gelu |") and row.endswith("| no |") for row in rows)
    with portable_graph():
        assert any(row.startswith("| portable_gelu |") and row.endswith("| yes |") for row in table("avx2").split("\n"))
    assert variants.table().splitlines()[0].endswith(f"runs on {machine_kind()} |")


def _forms(traced, kernel=None):
    """The forms of ``traced`` (`kerasbert.perf.kernels.recording`), of one kernel or all."""
    return {form for k, form in traced if kernel in (None, k)}


def _value_and_gradients(layer, x, upstream, variant, on, **call):
    """The layer's output, the gradients of ``Σ output·upstream`` for its input and weights, and the forms the
    kernels traced, traced inside `forced` so that the variant's choice is read when the graph is built; ``call``:
    the layer's call arguments."""
    with forced({variant: on}), kernels.recording() as traced:
        @tf.function
        def run(x):
            sources = [x] if x.dtype.is_floating else []  # ids have no gradient
            with tf.GradientTape() as tape:
                tape.watch(sources)
                loss = tf.reduce_sum(tf.cast(y := layer(x, **call), tf.float32) * upstream)
            return y, tape.gradient(loss, [*sources, *layer.trainable_variables])

        return (*run(x), traced)


def _on_and_off(layer, x, upstream, variant, kernel, **call):
    """`_value_and_gradients` with the variant on and off, each checked to have traced its form (and only then)."""
    (y_on, g_on, on), (y_off, g_off, off) = (_value_and_gradients(layer, x, upstream, variant, flag, **call)
                                             for flag in (True, False))
    assert _forms(on, kernel) == {variant} and _forms(off, kernel) == {"plain"}, (on, off)
    return (y_on, g_on), (y_off, g_off)


def _layer_norm(width):
    layer = LayerNorm(epsilon=1e-12)
    x = tf.constant(3 + 2 * rng.normal(size=(2, 5, width)), dtype=layer.compute_dtype)
    layer.build(x.shape)
    layer.gamma.assign(rng.normal(size=width)), layer.beta.assign(rng.normal(size=width))
    return layer, x, tf.constant(rng.normal(size=(2, 5, width)), tf.float32)


@pytest.mark.parametrize("policy", POLICIES, indirect=True)
def test_centred_layer_norm_gives_keras_numbers_forward_and_backward(policy):
    layer, x, upstream = _layer_norm(64)
    (y_on, g_on), (y_off, g_off) = _on_and_off(layer, x, upstream, "centred_layer_norm", "layer_norm")
    assert y_on.dtype == y_off.dtype == layer.compute_dtype
    _close(y_on, y_off, policy)
    _all_close(g_on, g_off, policy)


@pytest.mark.parametrize("policy", POLICIES, indirect=True)
def test_xla_layer_norm_gives_keras_numbers_forward_and_backward_in_two_kernels(policy):
    """Training's LayerNorm: Keras's numbers, its gradients for the input, ``gamma`` and ``beta`` from the
    hand-written backward, each direction one XLA call."""
    layer, x, upstream = _layer_norm(64)
    (y_on, g_on), (y_off, g_off) = _on_and_off(layer, x, upstream, "xla_layer_norm", "layer_norm", training=True)
    assert y_on.dtype == y_off.dtype == g_on[0].dtype == layer.compute_dtype
    _close(y_on, y_off, policy)
    _all_close(g_on, g_off, policy)
    with forced({"xla_layer_norm": True}):
        compiled, types = xla_calls(lambda x: tf.gradients(layer(x, training=True), x), x)
    assert len(compiled) == 2 and "Mean" not in types


@pytest.mark.parametrize("policy", POLICIES, indirect=True)
def test_one_hot_segments_give_a_lookups_numbers_forward_and_backward(policy):
    layer = SegmentEmbedding(2, 16, embeddings_initializer="random_normal")
    ids = tf.constant(rng.integers(0, 2, size=(3, 7)), tf.int32)
    layer.build(ids.shape)
    upstream = tf.constant(rng.normal(size=(3, 7, 16)), tf.float32)
    (y_on, g_on), (y_off, g_off) = _on_and_off(layer, ids, upstream, "one_hot_segments", "segments")
    np.testing.assert_array_equal(tf.cast(y_on, tf.float32), tf.cast(y_off, tf.float32))  # one term per sum
    _close(tf.convert_to_tensor(g_on[0]), tf.convert_to_tensor(g_off[0]), policy)


@pytest.mark.parametrize("policy", POLICIES, indirect=True)
def test_xla_dropout_keeps_the_rate_and_the_scaling(policy):
    layer = Dropout(0.25, seed=5)
    x = tf.ones((8, 16, 512), layer.compute_dtype)
    masks = {}
    for on in (True, False):
        with forced({"xla_dropout": on}), kernels.recording() as traced:
            y = np.asarray(tf.cast(tf.function(lambda x: layer(x, training=True))(x), tf.float32))
        assert _forms(traced, "dropout") == {"xla_dropout" if on else "plain"}
        assert sorted(np.unique(y).tolist()) == [0.0, pytest.approx(4 / 3, rel=1e-2)]
        assert abs((y == 0).mean() - 0.25) < 0.01
        np.testing.assert_array_equal(layer(x, training=False), x)
        masks[on] = y == 0
    assert (masks[True] != masks[False]).any()  # another random stream: the variant ran


def _tiny_model():
    from kerasbert import build_transformer_model

    keras.utils.set_random_seed(1)
    return build_transformer_model("tiny", hidden_size=64, num_attention_heads=4, intermediate_size=256,
                                   num_hidden_layers=1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                   verbose=False)


# what a variant needs around it to act in the one-block model: its scope granted, float32_activation the 3-D
# projections (oneDNN's fused bf16 GELU stands it aside), and half precision for two of them
ENGAGE = {"float32_activation": {"dense_2d": False}}
HALF_ONLY = {"float32_activation", "half_gradients"}
CASES = [(variant, policy) for variant in sorted(set(VARIANTS) - {"xla_dropout"}) for policy in POLICIES
         if policy != "float32" or variant not in HALF_ONLY]


def _model_run(model, inputs, variant, on):
    """The model's inference output and training gradients, traced with ``variant`` on or off, and the forms traced."""
    scope = {variant: True} if VARIANTS[variant].needs else {}
    with forced({**ENGAGE.get(variant, {}), variant: on}), granted(scope), kernels.recording() as traced:
        @tf.function
        def run(inputs):
            with tf.GradientTape() as tape:
                train = model(inputs, training=True)
                loss = tf.reduce_sum(tf.cast(train, tf.float32) ** 2)
            return model(inputs, training=False), tape.gradient(loss, model.trainable_variables)

        return (*run(inputs), traced)


@pytest.mark.parametrize(("variant", "policy"), CASES, indirect=["policy"])
def test_each_variant_runs_and_keeps_the_models_numbers(policy, variant):
    """A one-block model, inference and the gradients of training, with the variant on (its form traced) and off
    (never traced): the same numbers within float32 (or bf16) rounding."""
    model = _tiny_model()
    ids = rng.integers(1, 100, size=(2, 9)).astype("int32")
    ids[1, 6:] = 0
    inputs = [tf.constant(ids), tf.constant(np.zeros_like(ids))]
    (y_on, g_on, on), (y_off, g_off, off) = (_model_run(model, inputs, variant, flag) for flag in (True, False))
    kernel = VARIANTS[variant].kernel
    assert variant in _forms(on, kernel) and variant not in _forms(off), (on, off)
    _close(y_on, y_off, policy)
    _all_close(g_on, g_off, policy)


@pytest.mark.slow
def test_the_variants_benchmark_writes_a_row_per_variant(tmp_path):
    """``benchmarks/variants.py --quick`` runs every speed variant on and off and writes its RESULTS.md section."""
    results = tmp_path / "RESULTS.md"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "variants.py"), "--quick", "--results",
                           str(results)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    text = results.read_text()
    assert f"<!-- variants-{machine_kind()} -->" in text and "CPU flags:" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and " × |" in line]
    assert sorted(row.split(" | ")[0][2:] for row in rows) == sorted([*MEASURED, "control"])
