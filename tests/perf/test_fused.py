"""Training's GELU and dropout: numbers by hand, and where they run as XLA kernels."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.modeling import heads
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention
from kerasbert.modeling.layers import Dropout
from kerasbert.perf import fused, kernels
from kerasbert.perf.fused import dropout_training, gelu_erf_training, random_bits
from kerasbert.perf.variants import VARIANTS, forced

from helpers import xla_calls

rng = np.random.default_rng(0)
MIN_WIDTH = VARIANTS["xla_gelu"].min_width  # BERT-base's inner layer
MIN_DROPOUT_WIDTH = VARIANTS["xla_dropout"].min_width  # BERT-base's width


def _value_and_gradient(x, jit_compile=None):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = gelu_erf_training(x)
        return y, tape.gradient(y, x)

    return run(x) if jit_compile is None else tf.function(run, jit_compile=jit_compile)(x)


@pytest.mark.parametrize("width", [8, MIN_WIDTH])
@pytest.mark.parametrize("jit_compile", [None, False, True])
def test_values_and_gradients_equal_the_formulas_computed_by_hand(width, jit_compile):
    """0.5·x·(1+erf(x/√2)) and its derivative Φ(x) + x·φ(x), by Python's math, eager and traced, with and
    without XLA around it: through the XLA kernels on the plain graph, as written inside XLA."""
    x = np.resize(np.linspace(-6, 6, 97), (3, width)).astype("float32")
    y, dy = _value_and_gradient(tf.constant(x), jit_compile)
    by_hand = np.vectorize(lambda t: 0.5 * t * (1 + math.erf(t / math.sqrt(2))))(x.astype(float))
    slope = np.vectorize(lambda t: 0.5 * (1 + math.erf(t / math.sqrt(2)))
                         + t * math.exp(-t * t / 2) / math.sqrt(2 * math.pi))(x.astype(float))
    np.testing.assert_allclose(y.numpy(), by_hand, atol=1e-6)
    np.testing.assert_allclose(dy.numpy(), slope, atol=1e-6)


def _ops_of_gradient(width: int, jit_compile: bool):
    return xla_calls(_value_and_gradient, tf.TensorSpec([None, width], tf.float32), jit_compile=jit_compile)


def test_the_plain_graph_runs_each_direction_as_one_xla_kernel():
    xla_calls, types = _ops_of_gradient(MIN_WIDTH, jit_compile=False)
    assert len(xla_calls) == 2 and "Erf" not in types  # forward and backward, nothing left op by op


def test_compiled_steps_run_the_formula_as_written():
    xla_calls, types = _ops_of_gradient(MIN_WIDTH, jit_compile=True)
    assert not xla_calls and "Erf" in types


def test_bfloat16_stays_bfloat16():
    """bf16 in, bf16 out; through the XLA kernels computed in float32 and rounded once: the float32 kernels'
    numbers rounded to bf16. As written (inside XLA) in bf16 arithmetic, close to them."""
    x = tf.constant(rng.normal(0, 2, size=(4, 8)), tf.bfloat16)
    exact = _value_and_gradient(tf.cast(x, tf.float32))
    for jit_compile in (None, True):
        y, dy = _value_and_gradient(x, jit_compile)
        assert y.dtype == dy.dtype == tf.bfloat16
        for got, want in zip((y, dy), exact, strict=True):
            if jit_compile is None:
                np.testing.assert_array_equal(got.numpy(), tf.cast(want, tf.bfloat16).numpy())
            else:
                np.testing.assert_allclose(tf.cast(got, tf.float32).numpy(), want.numpy(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("units", [16, MIN_WIDTH])
def test_feed_forward_trains_with_the_same_numbers_as_it_predicts(units):
    """Training's GELU (composed, or the XLA kernels from MIN_WIDTH on) against inference's erfc form:
    outputs and the gradients of the input and of all four weights."""
    ff = FeedForward(units=units)
    x = tf.constant(rng.normal(0, 2, size=(2, 5, 8)).astype("float32"))
    ff(x)

    def run(training):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = ff(x, training=training)
        return y.numpy(), [g.numpy() for g in tape.gradient(y, [x, *ff.trainable_variables])]

    (y_train, grads_train), (y_infer, grads_infer) = run(True), run(False)
    np.testing.assert_allclose(y_train, y_infer, atol=1e-6)
    for a, b in zip(grads_train, grads_infer, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


# --- dropout ---------------------------------------------------------------------------------------------------


def _lowbias32(h):
    h = h.astype(np.uint32)
    h = (h ^ (h >> 16)) * np.uint32(0x7FEB352D)
    h = (h ^ (h >> 15)) * np.uint32(0x846CA68B)
    return h ^ (h >> 16)


def _bits_by_hand(shape, seed):
    """mix(mix(i + k0) ^ k1), k0 = mix(mix(s1) ^ s0), k1 = mix(k0 + 0x9E3779B9), in numpy's uint32 arithmetic."""
    s0, s1 = (np.uint32(s) for s in seed)
    k0 = _lowbias32(np.array(_lowbias32(np.array(s1)) ^ s0))
    k1 = _lowbias32(np.array(k0 + np.uint32(0x9E3779B9)))
    index = np.arange(int(np.prod(shape)), dtype=np.uint32).reshape(shape)
    return _lowbias32(_lowbias32(index + k0) ^ k1)


def _dropout_and_gradient(x, rate, seed, dy, jit_compile=None):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = dropout_training(x, rate, seed)
        return y, tape.gradient(y, x, output_gradients=dy)

    return run(x) if jit_compile is None else tf.function(run, jit_compile=jit_compile)(x)


def test_random_bits_are_the_hash_computed_by_hand():
    for shape, seed in (((3, 5), (1, 2)), ((2, 3, 4, 7), (123456789, 4000000000)), ((11,), (0, 0))):
        with np.errstate(over="ignore"):
            want = _bits_by_hand(shape, seed)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(random_bits(shape, seed)), want)


@pytest.mark.parametrize("width", [8, MIN_DROPOUT_WIDTH])
@pytest.mark.parametrize("jit_compile", [None, False, True])
def test_dropout_values_and_gradients_follow_the_bits(width, jit_compile):
    """Kept where bits ≥ rate·2³², scaled by 1/(1-rate), and the backward pass keeps the same elements:
    through the XLA kernel on the plain graph or as written inside XLA, eager and traced."""
    rate, seed, shape = 0.3, (5, 9), (3, 4, width)
    x = rng.normal(size=shape).astype("float32")
    dy = rng.normal(size=shape).astype("float32")
    y, dx = _dropout_and_gradient(tf.constant(x), rate, tf.constant(seed), tf.constant(dy), jit_compile)
    with np.errstate(over="ignore"):
        keep = _bits_by_hand(shape, seed) >= np.uint32(round(rate * 2**32))
    np.testing.assert_allclose(y.numpy(), np.where(keep, x / np.float32(1 - rate), 0), rtol=1e-6, atol=0)
    np.testing.assert_allclose(dx.numpy(), np.where(keep, dy / np.float32(1 - rate), 0), rtol=1e-6, atol=0)


def test_dropout_bits_are_uniform_and_uncorrelated():
    """2²² bits: each of the 32 bit positions set half the time, the top byte uniform (χ², 255 degrees of
    freedom), and keep masks uncorrelated between neighbours and between consecutive seeds (the second number,
    which `keras.random.SeedGenerator.next` counts up): all within 5 standard deviations of chance."""
    n = 2**22
    bits = keras.ops.convert_to_numpy(random_bits((n,), (42, 7)))
    ones = np.unpackbits(bits.view(np.uint8)).reshape(n, 32).mean(axis=0)
    assert np.all(np.abs(ones - 0.5) < 5 * 0.5 / math.sqrt(n)), ones
    counts = np.bincount(bits >> 24, minlength=256)
    chi2 = ((counts - n / 256) ** 2 / (n / 256)).sum()
    assert chi2 < 255 + 5 * math.sqrt(2 * 255), chi2
    keep = (bits >= np.uint32(round(0.1 * 2**32))).astype(float)
    following = (keras.ops.convert_to_numpy(random_bits((n,), (42, 8))) >= np.uint32(round(0.1 * 2**32)))
    for a, b in ((keep[:-1], keep[1:]), (keep, following.astype(float))):
        assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(n)
    assert abs(keep.mean() - 0.9) < 5 * math.sqrt(0.09 / n)


def test_the_plain_graph_runs_dropout_as_one_xla_kernel_each_way():
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = dropout_training(x, 0.1, tf.constant([1, 2]))
        return tape.gradient(y, x)

    spec = tf.TensorSpec([None, None, MIN_DROPOUT_WIDTH])
    calls, types = xla_calls(step, spec)
    assert len(calls) == 2 and not [t for t in types if "Random" in t]  # forward, backward; no mask kept
    gradient = tf.function(step, input_signature=[spec])(tf.ones((2, 5, MIN_DROPOUT_WIDTH))).numpy()
    with np.errstate(over="ignore"):  # traced with unknown batch and length, run on (2, 5): the same mask
        keep = _bits_by_hand((2, 5, MIN_DROPOUT_WIDTH), (1, 2)) >= np.uint32(round(0.1 * 2**32))
    np.testing.assert_allclose(gradient, np.where(keep, np.float32(1 / 0.9), 0), rtol=1e-6, atol=0)
    assert fused.plain_tensorflow_graph()
    assert not tf.function(lambda: tf.constant(fused.plain_tensorflow_graph()), jit_compile=True)().numpy()


def test_dropout_rejects_a_rate_out_of_range_and_passes_rate_zero_through():
    x = tf.ones((2, MIN_DROPOUT_WIDTH))
    assert dropout_training(x, 0.0, (1, 2)) is x
    for rate in (1.0, -0.1):
        with pytest.raises(ValueError, match=f"dropout rate must be in \\[0, 1\\): got {rate}"):
            dropout_training(x, rate, (1, 2))


@pytest.mark.parametrize("variant", [False, True])
@pytest.mark.parametrize("width", [32, MIN_DROPOUT_WIDTH])
def test_dropout_layer(width, variant):
    """Keras's Dropout unless the "xla_dropout" variant is chosen (the same outputs for the same seed),
    kerasbert's kernel where it is; either way: seeded runs repeat, calls differ, inference is the identity, the
    config is Keras's, and bfloat16 stays bfloat16."""
    x = tf.constant(rng.normal(size=(4, 16, width)).astype("float32"))
    keras_layer, layer, twin = keras.layers.Dropout(0.2, seed=3), Dropout(0.2, seed=3), Dropout(0.2, seed=3)
    with forced({"xla_dropout": variant}):
        first, again = layer(x, training=True).numpy(), layer(x, training=True).numpy()
        np.testing.assert_array_equal(first, twin(x, training=True).numpy())
    assert (first != again).mean() > 0.2
    same_as_keras = np.array_equal(first, keras_layer(x, training=True).numpy())
    assert same_as_keras == (not variant)
    assert abs((first == 0).mean() - 0.2) < 5 * math.sqrt(0.2 * 0.8 / first.size)  # 5 standard deviations
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    assert layer.get_config() == {**keras_layer.get_config(), "name": layer.name}
    assert Dropout.from_config(layer.get_config()).rate == 0.2
    half = Dropout(0.2, seed=3, dtype="mixed_bfloat16")(tf.cast(x, tf.bfloat16), training=True)
    assert half.dtype == tf.bfloat16


def test_attention_dropout_reads_the_model_width_not_the_sequence_length(monkeypatch):
    """The dropout of probabilities [B, A, S, S] asks the kernel table about the model's width H, not S; forced, it
    runs as one XLA kernel."""
    asked, chosen = [], kernels.chosen

    def spy(name, width=None):
        asked.append((name, width))
        return chosen(name, width)

    monkeypatch.setattr(kernels, "chosen", spy)
    attention = MultiHeadSelfAttention(num_heads=4, dropout=0.1)
    with forced({"xla_dropout": True}):
        calls, _ = xla_calls(lambda x, m: attention([x, m], training=True), tf.TensorSpec([None, 8, 64]),
                             tf.TensorSpec([None, 8], tf.bool))
    assert ("xla_dropout", 64) in asked and not [w for name, w in asked if name == "xla_dropout" and w != 64]
    assert len(calls) == 1


_WIDE = MIN_DROPOUT_WIDTH
_HEADS = {  # head: (build, labels for 8 rows of 16 tokens, the (rate, *shape) of each dropout reaching the kernel)
    # the last block reads [CLS] alone for `cls`: its attention [B, 12, 1, S] and residuals [B, H]
    "cls": (lambda b: heads.cls(b, 2), (8,), [(0.1, 16, _WIDE), (0.1, 12, 1, 16), (0.1, _WIDE), (0.1, _WIDE)]),
    "tagging": (lambda b: heads.tagging(b, 3, dropout=0.2), (8, 16),
                [(0.1, 16, _WIDE), (0.1, 12, 16, 16), (0.1, 16, _WIDE), (0.1, 16, _WIDE), (0.2, 16, _WIDE)]),
}


@pytest.mark.slow
@pytest.mark.parametrize("head", sorted(_HEADS))
def test_a_bert_base_wide_model_fits_with_every_dropout_through_the_kernel(monkeypatch, tmp_path, head):
    """Embedding-Dropout, the attention's and the two residual dropouts of a block, and the tagger's
    Tagging-Dropout: traced through the kernel in `fit` at their own rates and shapes, none in `predict`; the
    model trains, and saves and loads with kerasbert's Dropout."""
    traced, kernel = [], fused._xla_dropout

    def spy(rate):  # the rates and shapes reaching the XLA kernel, each time fit's step is traced
        def dropout(x, seed):
            traced.append((rate, *x.shape[1:]))
            return kernel(rate)(x, seed)

        return dropout

    monkeypatch.setattr(fused, "_xla_dropout", spy)
    with forced({"xla_dropout": True}):
        _fit_save_and_load(tmp_path, head, traced)


def _fit_save_and_load(tmp_path, head, traced):
    from kerasbert import build_transformer_model

    keras.utils.set_random_seed(0)
    build, label_shape, per_trace = _HEADS[head]
    model = build(build_transformer_model("tiny", hidden_size=_WIDE, num_attention_heads=12,
                                          intermediate_size=MIN_WIDTH, num_hidden_layers=1, verbose=False))
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy")
    ids = rng.integers(1, 100, size=(8, 16)).astype("int32")
    x, y = {"Input-Token": ids, "Input-Segment": np.zeros_like(ids)}, rng.integers(0, 2, size=label_shape)
    losses = model.fit(x, y, batch_size=4, epochs=3, verbose=0).history["loss"]
    assert losses[-1] < losses[0], losses
    assert traced and traced == per_trace * (len(traced) // len(per_trace)), traced
    calls = len(traced)
    model.predict(x, verbose=0)
    assert len(traced) == calls
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    dropouts = [layer.name for layer in model.layers if isinstance(layer, keras.layers.Dropout)]
    assert len(dropouts) == len(per_trace) - 1  # and the attention's, inside its layer
    assert all(type(loaded.get_layer(name)) is Dropout for name in dropouts), dropouts
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
