"""Training's feed-forward GELU on TensorFlow's plain graph as XLA kernels.

A training step that TensorFlow runs as a plain graph (kerasbert's default on CPUs:
`kerasbert.perf.xla.xla_pays`) runs each elementwise op as a pass of its own over memory. The erf GELU
``0.5·x·(1+erf(x/√2))`` and the gradient TensorFlow derives for it op by op are about ten passes over the inner
layer ``[B·S, I]``; `gelu_erf_training` compiles each direction into one pass, with the formulas in `keras.ops`
and only the compile and the custom gradient TensorFlow's: the backward is written out as
``dy·(Φ(x) + x·φ(x))`` (Φ the normal CDF, φ its density) from the pre-activation ``x`` alone.

It is a speed variant (`kerasbert.perf.variants`, ``"xla_gelu"``): the feed-forward takes it where
`kerasbert.perf.variants.chosen` says so. The same numbers as the formula within float32 rounding
(`tests/perf/test_fused.py`); under mixed precision the kernels compute in float32 and round to bf16 once
(`_in_float32`). Where the step is compiled with XLA already (`jit_compile`, JAX), the compiler fuses the GELU as
written; so it is on PyTorch, and on inner layers narrower than BERT-base's (`MIN_WIDTH`). XLA compiles once for
each batch shape, and without XLA `kerasbert train` pads a batch to its longest row, so a run meets up to
``maxlen`` shapes: BERT-base repays each compile in about one step of that shape, a much smaller model only after
many (hence the width threshold; figures in benchmarks/HISTORY.md). Inference keeps Keras's erfc GELU
(`kerasbert.modeling.layers.gelu_erf`), which TensorFlow's oneDNN fuses with the matmul before it.

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
MIN_WIDTH = 3072  # inner layers at least this wide get the XLA GELU: BERT-base's and wider


def normal_cdf(x):
    """Φ(x) = ``0.5·(1+erf(x/√2))``, the standard normal CDF: GELU is ``x·Φ(x)``."""
    return 0.5 * (1.0 + ops.erf(x * SQRT_HALF))


def gelu_erf_composed(x):
    """GELU written as ``0.5·x·(1+erf(x/√2))``, the form of Google's BERT and bert4keras; equal to Keras's
    erfc form (`kerasbert.modeling.layers.gelu_erf`) within float32 rounding (1e-7 relative, more for x < -3 where
    1+erf cancels).

    The training form: under XLA the gradient of this form keeps one tensor of the inner layer's size (erf's)
    from the forward pass for the backward one, where Keras's erfc form keeps two.

    Example:
    >>> from kerasbert.modeling.layers import gelu_erf
    >>> float(ops.max(ops.abs(gelu_erf_composed(ops.ones(3)) - gelu_erf(ops.ones(3))))) < 1e-6
    True
    """
    return x * normal_cdf(x)


def gelu_erf_gradient(x, dy):
    """``dy·d gelu/dx = dy·(Φ(x) + x·φ(x))``, the backward pass of `gelu_erf_composed` from its input."""
    return dy * (normal_cdf(x) + x * (INV_SQRT_TWO_PI * ops.exp(-0.5 * x * x)))


def gelu_erf_training(x):
    """`gelu_erf_composed` of a ``[N, I]`` inner layer, as XLA kernels on TensorFlow's plain graph (above)."""
    if (x.shape[-1] or 0) >= MIN_WIDTH and _plain_tensorflow_graph():
        return _xla_gelu()(x)
    return gelu_erf_composed(x)


def _plain_tensorflow_graph() -> bool:
    """TensorFlow is the backend and no XLA compile encloses the caller (`jit_compile`, the GPU default)."""
    if keras.config.backend() != "tensorflow":
        return False
    from kerasbert.internals import enclosing_xla_context

    return enclosing_xla_context() is None


def _in_float32(fn):
    """``fn`` computed in float32 and given back in the dtype of its first argument. Inside an XLA kernel a
    bf16 input is then converted once each way and the arithmetic runs in float32 (one rounding), where XLA
    would round to bf16 after every operation, more slowly and with more rounding."""

    def run(x, *rest):
        return ops.cast(fn(*(ops.cast(t, "float32") for t in (x, *rest))), x.dtype)

    return run


@functools.cache
def _xla_gelu():
    import tensorflow as tf

    forward = tf.function(_in_float32(gelu_erf_composed), jit_compile=True)
    backward = tf.function(_in_float32(gelu_erf_gradient), jit_compile=True)

    @tf.custom_gradient
    def gelu(x):
        return forward(x), lambda dy: backward(x, dy)

    return gelu
