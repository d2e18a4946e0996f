"""Training's elementwise work on TensorFlow's plain graph as XLA kernels: the feed-forward GELU, dropout, LayerNorm.

A training step that TensorFlow runs as a plain graph (kerasbert's default on CPUs:
`kerasbert.perf.xla.xla_pays`) runs each elementwise op as a pass of its own over memory. Three steps are
compiled here, each direction into one pass, with the formulas in `keras.ops` and only the compile and the
custom gradient TensorFlow's:

- **GELU** (`gelu_erf_training`): the erf GELU ``0.5·x·(1+erf(x/√2))`` and the gradient TensorFlow derives
  for it op by op are about ten passes over the inner layer ``[B·S, I]``; compiled, the backward is written
  out as ``dy·(Φ(x) + x·φ(x))`` (Φ the normal CDF, φ its density) from the pre-activation ``x`` alone.
- **Dropout** (`dropout_training`): TensorFlow's dropout draws Philox random floats, compares and selects
  in three passes and keeps the mask for the backward pass. Here the keep decision comes from a counter
  hash (`random_bits`) in the same pass as the select, and the backward pass recomputes it from its seed.
- **LayerNorm** (`layer_norm_training`): Keras's norm computes in float32 (a cast each way under mixed
  precision), and its gradient is a dozen ops over ``[B, S, H]``; compiled, the forward is the centred form
  (`kerasbert.perf.forms.centred_layer_norm`) and the backward is written out (`layer_norm_gradient`) from the
  input alone.

Each is a speed variant (`kerasbert.perf.variants`, ``"xla_gelu"``, ``"xla_dropout"``, ``"xla_layer_norm"``) of a
kernel of `kerasbert.perf.kernels`, which takes it where `kerasbert.perf.variants.chosen` says so (from the widths
the table gives: XLA compiles once for each batch shape, and without XLA `kerasbert train` pads a batch to its
longest row, so a run meets up to ``maxlen`` shapes: BERT-base repays each compile in about one step of that
shape, a much smaller model only after many; figures in benchmarks/HISTORY.md); the dropout's masks then come from
this random stream, not Keras's. The same numbers as the formulas within float32 rounding
(`tests/perf/test_fused.py`); under mixed precision the GELU's kernels compute in float32 and round to bf16 once
(`_in_float32`). Where the step is compiled with XLA already (`jit_compile`, JAX), each runs as written (the
compiler fuses it), and so on PyTorch. Inference keeps Keras's erfc GELU (`kerasbert.modeling.layers.gelu_erf`),
which TensorFlow's oneDNN fuses with the matmul before it, and has no dropout.

Example:
>>> import keras
>>> x = keras.ops.convert_to_tensor([[-1.0, 0.0, 2.0]])
>>> [round(float(v), 4) for v in gelu_erf_training(x)[0]]
[-0.1587, 0.0, 1.9545]
>>> y = keras.ops.convert_to_numpy(dropout_training(keras.ops.ones((4, 1024)), 0.25, seed=[7, 0]))
>>> [round(float(v), 4) for v in sorted(set(y.ravel()))], abs(float((y > 0).mean()) - 0.75) < 0.02
([0.0, 1.3333], True)
"""

from __future__ import annotations

import functools

import keras
import numpy as np
from keras import ops

SQRT_HALF = 0.7071067811865476  # 1/√2
INV_SQRT_TWO_PI = 0.3989422804014327  # 1/√(2π) = φ(0)
_LOWBIAS32 = (np.uint32(0x7FEB352D), np.uint32(0x846CA68B))  # C. Wellons's hash-prospector, "lowbias32"
_GOLDEN = np.uint32(0x9E3779B9)  # 2³²/φ, a constant with no structure, to separate the two keys


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
    if plain_tensorflow_graph():
        return _xla_gelu()(x)
    return gelu_erf_composed(x)


def _mix(h):
    """A bijection of uint32 in which every input bit flips each output bit with probability ≈ 1/2."""
    h = ops.bitwise_xor(h, ops.right_shift(h, np.uint32(16))) * _LOWBIAS32[0]
    h = ops.bitwise_xor(h, ops.right_shift(h, np.uint32(15))) * _LOWBIAS32[1]
    return ops.bitwise_xor(h, ops.right_shift(h, np.uint32(16)))


def random_bits(shape, seed):
    """32 random bits (uint32) for each element of a tensor of ``shape``: ``mix(mix(i + k0) ^ k1)`` for the
    element's row-major index ``i``, the keys ``k0, k1`` hashed from the two-number ``seed``.

    Counter-based, like the Philox of ``tf.random.stateless_*``: a pure function of its seed and the index,
    so the backward pass recomputes a dropout mask instead of keeping it. Two rounds of a 32-bit mixer, not
    Philox's ten: enough for dropout (uniform bits, no correlation between neighbours or seeds: tested), not
    meant for anything that needs a cryptographic generator. Indices are int32: up to 2³¹ elements.

    Example:
    >>> bits = random_bits((2, 3), seed=[1, 2])
    >>> bits.dtype == "uint32", tuple(bits.shape)
    (True, (2, 3))
    """
    seed = ops.cast(ops.convert_to_tensor(seed), "uint32")
    k0 = _mix(ops.bitwise_xor(_mix(seed[1]), seed[0]))
    k1 = _mix(k0 + _GOLDEN)
    index = ops.cast(ops.reshape(ops.arange(ops.prod(ops.convert_to_tensor(shape)), dtype="int32"), shape), "uint32")
    return _mix(ops.bitwise_xor(_mix(index + k0), k1))


def dropout_with_bits(x, rate: float, seed):
    """``x / (1 - rate)`` where `random_bits` ≥ ``rate·2³²`` (a fraction ``1 - rate`` of elements), else 0."""
    threshold = np.uint32(min(round(rate * 2**32), 2**32 - 1))
    keep = random_bits(ops.shape(x), seed) >= threshold
    return ops.where(keep, x * ops.cast(1.0 / (1.0 - rate), x.dtype), ops.zeros_like(x))


def dropout_training(x, rate: float, seed):
    """Dropout of ``x`` in training, `dropout_with_bits`: one XLA kernel each way on TensorFlow's plain graph, as
    written elsewhere. ``seed``: two integers, a new pair for each call (`keras.random.SeedGenerator.next`)."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout rate must be in [0, 1): got {rate}")
    if rate == 0.0:
        return x
    return _xla_dropout(float(rate))(x, seed) if plain_tensorflow_graph() else dropout_with_bits(x, rate, seed)


def layer_norm_gradient(x, gamma, dy, epsilon: float):
    """The gradients of a LayerNorm over the last axis, ``(dx, dγ, dβ)``, from its input ``x`` and ``dy``:
    ``dx = r·(g - mean(g) - x̂·mean(g·x̂))`` with ``g = dy·γ``, ``x̂ = (x-μ)·r``, ``r = 1/√(σ²+ε)``;
    ``dγ = Σ dy·x̂``, ``dβ = Σ dy`` over every axis but the last."""
    mean = ops.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    r = ops.rsqrt(ops.mean(ops.square(centred), axis=-1, keepdims=True) + epsilon)
    normed = centred * r
    g = dy * gamma
    dx = r * (g - ops.mean(g, axis=-1, keepdims=True) - normed * ops.mean(g * normed, axis=-1, keepdims=True))
    rows = tuple(range(len(x.shape) - 1))
    return dx, ops.sum(dy * normed, axis=rows), ops.sum(dy, axis=rows)


def layer_norm_training(x, gamma, beta, epsilon: float):
    """LayerNorm over the last axis in training, one XLA kernel each way, computed in float32 and returned in
    the dtype of ``x`` (as Keras's); its backward recomputes the moments from ``x``."""
    return _xla_layer_norm(float(epsilon))(x, gamma, beta)


def plain_tensorflow_graph() -> bool:
    """TensorFlow is the backend and no XLA compile encloses the caller (`jit_compile`, the GPU default)."""
    if keras.config.backend() != "tensorflow":
        return False
    from kerasbert.internals import enclosing_xla_context

    return enclosing_xla_context() is None


@functools.cache
def _xla_dropout(rate: float):
    import tensorflow as tf

    kernel = tf.function(functools.partial(dropout_with_bits, rate=rate), jit_compile=True)

    @tf.custom_gradient
    def dropout(x, seed):
        return kernel(x, seed=seed), lambda dy: (kernel(dy, seed=seed), None)  # the same mask, recomputed

    return dropout


def _in_float32(fn):
    """``fn`` computed in float32 and given back in the dtype of its first argument. Inside an XLA kernel a
    bf16 input is then converted once each way and the arithmetic runs in float32 (one rounding), where XLA
    would round to bf16 after every operation, more slowly and with more rounding."""

    def run(x, *rest):
        return ops.cast(fn(*(ops.cast(t, "float32") for t in (x, *rest))), x.dtype)

    return run


@functools.cache
def _xla_layer_norm(epsilon: float):
    import tensorflow as tf

    from kerasbert.perf.forms import centred_layer_norm

    def forward(x, gamma, beta):
        return centred_layer_norm(x, gamma, beta, epsilon, x.dtype)

    def backward(x, gamma, dy):
        x32, dy32 = ops.cast(x, "float32"), ops.cast(dy, "float32")
        dx, dgamma, dbeta = layer_norm_gradient(x32, ops.cast(gamma, "float32"), dy32, epsilon)
        return ops.cast(dx, x.dtype), ops.cast(dgamma, gamma.dtype), ops.cast(dbeta, gamma.dtype)

    forward, backward = (tf.function(f, jit_compile=True) for f in (forward, backward))

    @tf.custom_gradient
    def norm(x, gamma, beta):
        return forward(x, gamma, beta), lambda dy: backward(x, gamma, dy)

    return norm


@functools.cache
def _xla_gelu():
    import tensorflow as tf

    forward = tf.function(_in_float32(gelu_erf_composed), jit_compile=True)
    backward = tf.function(_in_float32(gelu_erf_gradient), jit_compile=True)

    @tf.custom_gradient
    def gelu(x):
        return forward(x), lambda dy: backward(x, dy)

    return gelu
