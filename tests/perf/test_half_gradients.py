"""The ``half_gradients`` variant: under mixed bf16 a projection's gradient reaches kerasbert's optimizer in bf16
and is cast in its update, with the same numbers; any other optimizer gets Keras's float32 gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import build_transformer_model, heads
from kerasbert.modeling.optimizers import LayerwiseAdamW
from kerasbert.perf import half_gradients, kernels
from kerasbert.perf.variants import forced

rng = np.random.default_rng(0)
IDS = rng.integers(1, 100, size=(4, 9)).astype("int32")
DATA = ([IDS, np.zeros_like(IDS)], np.array([0, 1, 1, 0]))


@pytest.fixture
def mixed_bf16():
    keras.config.set_dtype_policy("mixed_bfloat16")
    yield
    keras.config.set_dtype_policy("float32")


def _trained(on: bool, optimizer, steps: int = 3) -> tuple[list[np.ndarray], set[str]]:
    """A tiny classifier's weights after ``steps`` training steps, built and traced with the variant ``on``, and
    the forms the projections' autocast traced."""
    with forced({"half_gradients": on}), kernels.recording() as traced:
        keras.utils.set_random_seed(3)
        model = heads.cls(build_transformer_model("tiny", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                                  verbose=False), 2)
        model.compile(optimizer, "sparse_categorical_crossentropy")
        for _ in range(steps):
            model.train_on_batch(*DATA)
    return model.get_weights(), {form for kernel, form in traced if kernel == "autocast"}


class Recording(LayerwiseAdamW):
    """`LayerwiseAdamW` that notes the dtypes of the gradients it is given (when the step is traced)."""

    def apply(self, grads, trainable_variables=None):
        self.seen = {keras.backend.standardize_dtype(g.dtype) for g in grads if g is not None}
        return super().apply(grads, trainable_variables)


@pytest.mark.parametrize("xla_update", [True, False])
def test_bf16_gradients_give_kerasbert_optimizer_the_same_update(mixed_bf16, xla_update):
    optimizers = {flag: Recording(learning_rate=1e-2, xla_update=xla_update) for flag in (True, False)}
    (on, forms_on), (off, forms_off) = (_trained(flag, optimizers[flag]) for flag in (True, False))
    assert "bfloat16" in optimizers[True].seen and optimizers[False].seen == {"float32"}
    assert "half_gradients" in forms_on and forms_off == {"plain"}
    untrained, _ = _trained(False, LayerwiseAdamW(learning_rate=1e-2), steps=0)
    assert any(np.abs(a - b).max() > 0 for a, b in zip(on, untrained, strict=True))  # the steps changed weights
    for a, b in zip(on, off, strict=True):
        np.testing.assert_array_equal(a, b)


def test_another_optimizer_gets_float32_gradients(mixed_bf16):
    """Keras's Adam with a global norm clip adds the gradients' squares, which a bf16 one among float32 ones
    would break: the variant stays off for it."""
    (on, forms_on), (off, _) = (_trained(flag, keras.optimizers.Adam(1e-2, global_clipnorm=1.0))
                                for flag in (True, False))
    assert forms_on == {"plain"}  # forced on, but the step of an optimizer that does not take bf16 withholds it
    for a, b in zip(on, off, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_gradient_of_a_projection_kernel_stays_bf16_only_where_allowed(mixed_bf16):
    model = build_transformer_model("tiny", verbose=False)
    kernel = model.get_layer("Transformer-0-FeedForward").intermediate_dense.kernel

    def dtype(allowed: bool, training: bool) -> tf.DType:
        with forced({"half_gradients": True}), half_gradients.allowing(allowed):
            @tf.function
            def gradient(inputs):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(tf.cast(model(inputs, training=training), tf.float32))
                return tape.gradient(loss, kernel.value)
            return gradient(DATA[0]).dtype

    assert dtype(allowed=True, training=True) == tf.bfloat16
    assert dtype(allowed=False, training=True) == dtype(allowed=True, training=False) == tf.float32
