"""Faster forms of two steps of the plain layers, in `keras.ops`: the centred LayerNorm, the one-hot segment lookup.

Each is a speed variant (`kerasbert.perf.variants`) of a kernel of `kerasbert.perf.kernels`, which takes it where
`kerasbert.perf.variants.chosen` says so; `kerasbert.modeling.layers.LayerNorm` and
`kerasbert.modeling.layers.SegmentEmbedding` compute Keras's own math elsewhere. Both give the plain layer's
numbers within float32 rounding, forward and gradients (`tests/perf/test_variants.py`).

- **Centred LayerNorm** (`centred_layer_norm`, variant ``"centred_layer_norm"``): ``(x-μ)·(γ/√(σ²+ε)) + β``
  with the centred ``x-μ`` computed once and used for both the variance and the output, where
  ``ops.layer_normalization`` takes the moments, then forms ``x·(γ/σ) + (β-μ·γ/σ)`` with two more full-size
  products; fewer passes over ``[B, S, H]`` on TensorFlow's plain graph.
- **One-hot segments** (`one_hot_lookup`, variant ``"one_hot_segments"``): ``E[ids]`` as
  ``Σ_t one_hot(ids)_t · E_t`` in float32, the same outputs exactly (each sum has one non-zero term). A
  lookup's gradient scatter-adds every token's row onto the T (= 2) rows of ``E``; under mixed precision that
  scatter is in bfloat16/float16, which a GPU adds with emulated atomics, thousands of tokens onto two rows;
  the one-hot form's gradient is a float32 sum over the tokens.

Example:
>>> from keras import ops
>>> x = ops.reshape(ops.arange(6, dtype="float32"), (2, 3))
>>> y = centred_layer_norm(x, ops.ones(3), ops.zeros(3), 1e-12, "float32")
>>> [round(float(v), 4) for v in ops.convert_to_numpy(y)[0]]
[-1.2247, 0.0, 1.2247]
>>> table = ops.convert_to_tensor([[1.0, 2.0], [3.0, 4.0]])
>>> ops.convert_to_numpy(one_hot_lookup(table, ops.array([[1, 0]]), "float32")).tolist()
[[[3.0, 4.0], [1.0, 2.0]]]
"""

from __future__ import annotations

import keras
from keras import ops


def centred_layer_norm(inputs, gamma, beta, epsilon: float, dtype: str):
    """LayerNorm over the last axis, ``(x-μ)·(γ/√(σ²+ε)) + β``, centring ``x`` once; computed in float32 or
    wider (half-precision inputs in float32, as Keras) and returned in ``dtype``."""
    x = ops.cast(inputs, keras.backend.result_type(inputs.dtype, "float32"))
    centred = ops.subtract(x, ops.mean(x, axis=-1, keepdims=True))
    variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)
    scale = ops.multiply(ops.rsqrt(ops.add(variance, epsilon)), ops.cast(gamma, x.dtype))
    return ops.cast(ops.add(ops.multiply(centred, scale), ops.cast(beta, x.dtype)), dtype)


def one_hot_lookup(table, ids, dtype: str):
    """``table[ids]`` (``[T, H]``, ``[...]`` -> ``[..., H]``) as a float32 sum of one-hot rows, in ``dtype``."""
    one_hot = ops.one_hot(ops.cast(ids, "int32"), int(table.shape[0]), dtype="float32")  # [..., T]
    rows = ops.sum(one_hot[..., None] * ops.cast(table, "float32"), axis=-2)  # a sum, not a matmul (TF32 on GPUs)
    return ops.cast(rows, dtype)
