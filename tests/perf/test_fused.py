"""Training's GELU: numbers by hand, and where it runs as XLA kernels; kerasbert's Dropout is Keras's."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.modeling.blocks import FeedForward
from kerasbert.modeling.layers import Dropout
from kerasbert.perf.fused import MIN_WIDTH, gelu_erf_training

rng = np.random.default_rng(0)


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
    without XLA around it, through the XLA kernels (width ≥ MIN_WIDTH) or as written."""
    x = np.resize(np.linspace(-6, 6, 97), (3, width)).astype("float32")
    y, dy = _value_and_gradient(tf.constant(x), jit_compile)
    by_hand = np.vectorize(lambda t: 0.5 * t * (1 + math.erf(t / math.sqrt(2))))(x.astype(float))
    slope = np.vectorize(lambda t: 0.5 * (1 + math.erf(t / math.sqrt(2)))
                         + t * math.exp(-t * t / 2) / math.sqrt(2 * math.pi))(x.astype(float))
    np.testing.assert_allclose(y.numpy(), by_hand, atol=1e-6)
    np.testing.assert_allclose(dy.numpy(), slope, atol=1e-6)


def _ops_of_gradient(width: int, jit_compile: bool):
    graph = tf.function(_value_and_gradient, jit_compile=jit_compile).get_concrete_function(
        tf.TensorSpec([None, width], tf.float32)).graph
    xla_calls = [op for op in graph.get_operations()
                 if "_XlaMustCompile" in op.node_def.attr and op.get_attr("_XlaMustCompile")]
    return xla_calls, [op.type for op in graph.get_operations()]


def test_the_plain_graph_runs_each_direction_as_one_xla_kernel():
    xla_calls, types = _ops_of_gradient(MIN_WIDTH, jit_compile=False)
    assert len(xla_calls) == 2 and "Erf" not in types  # forward and backward, nothing left op by op


def test_narrow_layers_and_compiled_steps_run_the_formula_as_written():
    for width, jit_compile in ((MIN_WIDTH - 1, False), (MIN_WIDTH, True)):
        xla_calls, types = _ops_of_gradient(width, jit_compile)
        assert not xla_calls and "Erf" in types, (width, jit_compile)


def test_bfloat16_stays_bfloat16():
    """bf16 in, bf16 out; through the XLA kernels (width ≥ MIN_WIDTH) computed in float32 and rounded once:
    the float32 kernels' numbers rounded to bf16. As written (narrower) in bf16 arithmetic, close to them."""
    for width in (MIN_WIDTH, 8):
        x = tf.constant(rng.normal(0, 2, size=(4, width)), tf.bfloat16)
        y, dy = _value_and_gradient(x)
        assert y.dtype == dy.dtype == tf.bfloat16
        exact = _value_and_gradient(tf.cast(x, tf.float32))
        for got, want in zip((y, dy), exact, strict=True):
            if width >= MIN_WIDTH:
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


# --- dropout: Keras's, registered under kerasbert's name -----------------------------------------------------


def test_dropout_layer_is_keras_dropout_with_its_seeded_stream():
    """The same outputs as keras.layers.Dropout for the same seed; seeded runs repeat, calls differ, inference is
    the identity, the config is Keras's, and bfloat16 stays bfloat16."""
    x = tf.constant(rng.normal(size=(4, 16, 64)).astype("float32"))
    keras_layer, layer, twin = keras.layers.Dropout(0.2, seed=3), Dropout(0.2, seed=3), Dropout(0.2, seed=3)
    first, again = layer(x, training=True).numpy(), layer(x, training=True).numpy()
    np.testing.assert_array_equal(first, twin(x, training=True).numpy())
    np.testing.assert_array_equal(first, keras_layer(x, training=True).numpy())
    assert (first != again).mean() > 0.2
    assert abs((first == 0).mean() - 0.2) < 0.02
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    assert layer.get_config() == {**keras_layer.get_config(), "name": layer.name}
    assert Dropout.from_config(layer.get_config()).rate == 0.2
    half = Dropout(0.2, seed=3, dtype="mixed_bfloat16")(tf.cast(x, tf.bfloat16), training=True)
    assert half.dtype == tf.bfloat16
