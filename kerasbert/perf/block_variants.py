"""Faster forms of steps of the two Transformer blocks (`kerasbert.modeling.blocks`) for TensorFlow with oneDNN.

Each gives the blocks' plain form's numbers within float32 rounding; the kernels of `kerasbert.perf.kernels` take
them where `kerasbert.perf.variants.chosen` says so:

- ``dense_2d`` (`flat_tokens`, `dense_2d`): a projection of ``[B, S, H]`` as a 2-D matmul on ``[B·S, H]``.
  TensorFlow's graph optimizer then sees ``MatMul -> BiasAdd -> Gelu`` with nothing between (a 3-D matmul is
  a ``Tensordot`` that reshapes its product back before the bias and the GELU), and oneDNN runs the three as
  one kernel.
- ``onednn_scores`` (`onednn_scores`): ``1/√d`` multiplies Q, ``[B, A, S, d]``, not the scores, ``[B, A, S, S]``
  (the same numbers for d = 64), and the padding keys' ``+inf`` is *subtracted* as a ``[B, 1, 1, S]`` penalty,
  faster than a broadcast ``where``. Not added as a ``-inf`` bias: TensorFlow's remapper then folds the scale
  and the add into the batch matmul as oneDNN post-ops, and the broadcast one makes that slower than the
  three apart.
- ``float32_activation`` (`activation_in_float32`): mixed-precision inference computes the feed-forward
  activation in float32, rounded once.

Example:
>>> import keras
>>> tuple(flat_tokens(keras.ops.ones((2, 5, 8))).shape)
(10, 8)
>>> tuple(dense_2d(keras.layers.Dense(3), keras.ops.ones((2, 5, 8))).shape)
(2, 5, 3)
"""

from __future__ import annotations

import math
from collections.abc import Container

from keras import ops

from kerasbert.perf.onednn import ONEDNN_BF16_FLAGS, cpu_flags
from kerasbert.perf.variants import chosen

HALF = ("float16", "bfloat16")


def flat_tokens(x):
    """``[B, S, H]`` as ``[B·S, H]``, the rows a 2-D matmul reads."""
    return ops.reshape(x, (-1, x.shape[-1]))


def dense_2d(layer, x):
    """``layer(x)`` for ``x`` ``[..., H]`` (a Dense layer, or any function of the last axis), computed on
    `flat_tokens` and shaped back to ``[..., ·]``."""
    y = layer(flat_tokens(x))
    return ops.reshape(y, (*ops.shape(x)[:-1], y.shape[-1]))


def onednn_scores(q, k, seen):
    """``Q·Kᵀ/√d`` in float32 with the keys a query may not see at ``-inf``, as ``(Q/√d)·Kᵀ - penalty``.

    Args:
        q: ``[B, A, Q, d]`` queries.
        k: ``[B, A, S, d]`` keys.
        seen: bool, False where a query may not see a key: ``[B, 1, 1, S]`` (padding keys) or ``[B, 1, Q, S]``.

    Returns:
        ``[B, A, Q, S]`` float32 scores.

    Example:
    >>> s = onednn_scores(ops.ones((1, 1, 1, 4)), ops.ones((1, 1, 2, 4)), ops.array([[[[True, False]]]]))
    >>> [float(v) for v in ops.reshape(s, (-1,))]
    [2.0, -inf]
    """
    scores = ops.einsum("bhqd,bhkd->bhqk", q * (1 / math.sqrt(q.shape[-1])), k)
    penalty = ops.where(seen, 0.0, math.inf)  # +inf where the key is hidden
    return ops.subtract(ops.cast(scores, "float32"), penalty)


def activation_in_float32(compute_dtype: str, activation: str, training) -> bool:
    """Whether a half-precision feed-forward computes its activation in float32 and rounds once.

    At inference it is faster on a CPU, where TensorFlow runs erf/erfc on bf16 one element at a time. Not
    where oneDNN fuses a bf16 GELU into the matmul (`fuses_bf16_activation`), which computes it in float32
    on the accumulator and rounds once, in one kernel. Not in training: the backward pass would keep its
    float32 intermediates.

    Example:
    >>> activation_in_float32("float32", "gelu", False), activation_in_float32("float16", "relu", True)
    (False, False)
    """
    if training or compute_dtype not in HALF:
        return False
    return not (compute_dtype == "bfloat16" and activation == "gelu" and fuses_bf16_activation())


def fuses_bf16_activation(flags: Container[str] | None = None) -> bool:
    """Whether the graph being traced runs a bfloat16 MatMul + BiasAdd + GELU as one oneDNN kernel.

    That is a graph TensorFlow traces (not eager, not inside an XLA compile), with no GPU to place ops on,
    oneDNN on, a CPU on which TensorFlow gives oneDNN bf16 ops (`kerasbert.perf.onednn.ONEDNN_BF16_FLAGS`), and
    projections written as 2-D matmuls (the ``"dense_2d"`` variant: a 3-D one reshapes its product between the
    matmul and the GELU, which then cannot join the kernel). There the kernel computes the GELU in float32 on the
    accumulator, faster than a float32 GELU beside the matmul; elsewhere TensorFlow would run bf16 erf element by
    element.

    Example:
    >>> fuses_bf16_activation(flags={"avx2"})
    False
    """
    import keras

    if keras.config.backend() != "tensorflow" or not any(f in (cpu_flags() if flags is None else flags)
                                                         for f in ONEDNN_BF16_FLAGS):
        return False
    import tensorflow as tf

    from kerasbert.internals import enclosing_xla_context, onednn_enabled

    return (onednn_enabled() and not tf.executing_eagerly() and enclosing_xla_context() is None
            and not tf.config.list_logical_devices("GPU") and chosen("dense_2d"))
