"""The feed-forward block's GELU in training: on TensorFlow's plain graph, one XLA kernel each way.

A training step that TensorFlow runs as a plain graph (kerasbert's default on CPUs:
`kerasbert.models.xla_pays`) runs the erf GELU ``0.5·x·(1+erf(x/√2))`` and the gradient TensorFlow derives for
it op by op: about ten passes over the inner layer ``[B·S, I]``, each reading and writing it in memory.
`gelu_erf_training` compiles each direction with XLA into one pass, the backward written out as ``dy·(Φ(x) +
x·φ(x))`` (Φ the normal CDF, φ its density) from the pre-activation ``x`` alone. BERT-base at 8 × 128 on AVX2:
17 against 29 ms a block, forward and backward with the bias add, and the whole training step 1.02 × faster;
the same numbers within float32 rounding (`tests/test_fused.py`).

Where the step is compiled with XLA already (`jit_compile`, JAX), XLA fuses `gelu_erf_composed` by itself, and
it is used as written; so it is on PyTorch, and on inner layers narrower than `MIN_WIDTH`. XLA compiles once
for each batch shape, and without XLA `kerasbert train` pads a batch to its longest row, so a run meets up to
``maxlen`` shapes: each costs 0.13 s (both directions), which BERT-base (0.14 s saved a step at 8 × 128)
repays in about one step of that shape, and a model of a quarter its width and depth in about 15. Inference
keeps Keras's erfc form (`kerasbert.layers.gelu_erf`), which TensorFlow's oneDNN fuses with the matmul before
it.

Example:
>>> import keras
>>> x = keras.ops.convert_to_tensor([[-1.0, 0.0, 2.0]])
>>> [round(float(v), 4) for v in gelu_erf_training(x)[0]]
[-0.1587, 0.0, 1.9545]
"""

from __future__ import annotations

import functools

import keras
from keras import ops

SQRT_HALF = 0.7071067811865476  # 1/√2
INV_SQRT_TWO_PI = 0.3989422804014327  # 1/√(2π) = φ(0)
MIN_WIDTH = 3072  # inner layers at least this wide get the XLA kernels: BERT-base's and wider


def normal_cdf(x):
    """Φ(x) = ``0.5·(1+erf(x/√2))``, the standard normal CDF: GELU is ``x·Φ(x)``."""
    return 0.5 * (1.0 + ops.erf(x * SQRT_HALF))


def gelu_erf_composed(x):
    """GELU written as ``0.5·x·(1+erf(x/√2))``, the form of Google's BERT and bert4keras; equal to Keras's
    erfc form (`kerasbert.layers.gelu_erf`) within float32 rounding (1e-7 relative, more for x < -3 where
    1+erf cancels).

    The training form: under XLA the gradient of this form keeps one tensor of the inner layer's size (erf's)
    from the forward pass for the backward one, where Keras's erfc form keeps two (BERT-base, 8 × 128: 144 MB
    less of the step's 1.3 GB buffer).

    Example:
    >>> from kerasbert.layers import gelu_erf
    >>> float(ops.max(ops.abs(gelu_erf_composed(ops.ones(3)) - gelu_erf(ops.ones(3))))) < 1e-6
    True
    """
    return x * normal_cdf(x)


def gelu_erf_gradient(x, dy):
    """``dy·d gelu/dx = dy·(Φ(x) + x·φ(x))``, the backward pass of `gelu_erf_composed` from its input."""
    return dy * (normal_cdf(x) + x * (INV_SQRT_TWO_PI * ops.exp(-0.5 * x * x)))


def gelu_erf_training(x):
    """`gelu_erf_composed` of a ``[N, I]`` inner layer, as XLA kernels on TensorFlow's plain graph (above)."""
    if keras.config.backend() == "tensorflow" and (x.shape[-1] or 0) >= MIN_WIDTH:
        import tensorflow as tf

        if tf.__internal__.get_enclosing_xla_context() is None:
            return _xla_gelu()(x)
    return gelu_erf_composed(x)


@functools.cache
def _xla_gelu():
    import tensorflow as tf

    forward = tf.function(gelu_erf_composed, jit_compile=True)
    backward = tf.function(gelu_erf_gradient, jit_compile=True)

    @tf.custom_gradient
    def gelu(x):
        return forward(x), lambda dy: backward(x, dy)

    return gelu
