"""Position information without a learned table: NEZHA's relative positions and RoFormer's rotary positions.

Both are fixed sinusoids (Vaswani et al. 2017, §3.5), interleaved as ``[sin θ₀, cos θ₀, sin θ₁, cos θ₁, ...]`` with
``θᵢ = p / 10000^(2i/d)`` over the head size d, as NEZHA's and RoFormer's checkpoints were trained with. A layer
computes them from the length of its input (so any length works) and has no weights; every attention layer of
the model reads the one tensor it returns. The angles and their sines are float32, as bert4keras computes them: exact
float64 angles would stray from its models' outputs by half a float32 ulp of the angle, past 1e-5 from a few
hundred positions. `checked_length` guards the length a position table allows
(`kerasbert.modeling.layers.PositionEmbedding`).

Example:
>>> from keras import ops
>>> x = ops.zeros((2, 5, 8))
>>> tuple(RelativePositions(head_size=4, max_distance=3)(x).shape), tuple(RotaryPositions(head_size=4)(x).shape)
((5, 5, 4), (1, 5, 4))
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.registry import register


def sinusoids(positions, dim: int, base: float = 10000.0):
    """``[..., dim]`` sinusoids of float ``positions``, sin and cos interleaved pair by pair: ``θᵢ = p / base^(2i/d)``
    (``base`` 10000 in Vaswani et al. 2017)."""
    frequencies = ops.power(float(base), -2.0 * ops.arange(dim // 2, dtype="float32") / dim)  # (dim/2,)
    angles = ops.cast(positions, "float32")[..., None] * frequencies  # (..., dim/2)
    return ops.reshape(ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1), (*ops.shape(angles)[:-1], dim))


def rotate(x, sinusoid, halves: bool = False):
    """RoFormer's rotary position embedding (Su et al. 2021, eq. 34) of ``x`` ``[..., S, d]``: each pair
    ``(x₂ᵢ, x₂ᵢ₊₁)`` turned by the angle of its position, ``sinusoid`` ``[1, S, d]`` (`sinusoids` of 0..S-1), or
    ``[B, 1, S, d]`` where each row's positions are its own (`RotaryPositions.at`). With ``halves`` the pairs are
    ``(xᵢ, xᵢ₊d/₂)``, the two halves of x turned together (transformers' ``rotate_half``: ModernBERT's).

    Example:
    >>> s = sinusoids(ops.arange(2), 4)[None]
    >>> x = ops.reshape(ops.arange(8, dtype="float32"), (1, 2, 4))
    >>> bool(ops.all(rotate(x, s, halves=True)[0, 0] == x[0, 0]))
    True
    """
    if halves:
        cos = ops.concatenate([sinusoid[..., 1::2]] * 2, axis=-1)  # cos θ₀, cos θ₁, ..., cos θ₀, cos θ₁, ...
        sin = ops.concatenate([sinusoid[..., ::2]] * 2, axis=-1)
        first, second = ops.split(x, 2, axis=-1)
        return x * ops.cast(cos, x.dtype) + ops.concatenate([-second, first], axis=-1) * ops.cast(sin, x.dtype)
    cos = ops.repeat(sinusoid[..., 1::2], 2, axis=-1)  # (1, S, d): cos θ₀, cos θ₀, cos θ₁, ...
    sin = ops.repeat(sinusoid[..., ::2], 2, axis=-1)
    turned = ops.reshape(ops.stack([-x[..., 1::2], x[..., ::2]], axis=-1), ops.shape(x))  # (-x₁, x₀, -x₃, x₂, ...)
    return x * ops.cast(cos, x.dtype) + turned * ops.cast(sin, x.dtype)


def clipped_distances(query_positions, key_positions, max_distance: int):
    """The row of a table of ``2K+1`` relative positions that each (query, key) pair reads: the distance ``j - i``
    clipped to ``±K`` (K = ``max_distance``) plus K, ``[..., Q]`` and ``[..., K]`` -> ``[..., Q, K]`` (Shaw et al.
    2018, §3.2).

    Example:
    >>> ops.convert_to_numpy(clipped_distances(ops.arange(3), ops.arange(3), 1)).tolist()
    [[1, 2, 2], [0, 1, 2], [0, 0, 1]]
    """
    distances = ops.expand_dims(key_positions, -2) - ops.expand_dims(query_positions, -1)  # (..., Q, K): j - i
    return ops.clip(distances, -max_distance, max_distance) + max_distance


def checked_length(inputs, limit: int, hierarchical: float | None = None):
    """``inputs`` ``[B, S, ...]`` once known to be at most ``limit`` long (a position table's P, or P² with
    ``hierarchical``).

    A ModelError where the length is known when the graph is traced; where it is not (a ``predict`` retraced
    for any length, an exported signature), on TensorFlow an in-graph assert with the same message, which XLA
    drops (as `kerasbert.modeling.losses.check_label_ids`); there the slice of the table fails instead.

    Example:
    >>> checked_length(ops.zeros((1, 5, 2)), 4)
    Traceback (most recent call last):
    ...
    kerasbert.errors.ModelError: Input-Token: expected at most 4 tokens (max_position_embeddings), found sequences \
of 5. truncate with maxlen when encoding, or build with hierarchical_position=True
    """
    where = "max_position_embeddings" + (" squared, hierarchical" if hierarchical else "")
    hint = "truncate with maxlen when encoding" + ("" if hierarchical else ", or build with hierarchical_position=True")
    length = inputs.shape[1]
    if isinstance(length, int):  # JAX traces with symbolic lengths
        if length > limit:
            raise fail(ModelError, "Input-Token", f"at most {limit} tokens ({where})", f"sequences of {length}", hint)
        return inputs
    if keras.config.backend() != "tensorflow":
        return inputs
    import tensorflow as tf

    message = f"Input-Token: expected at most {limit} tokens ({where}), found a longer sequence. {hint}"
    with tf.control_dependencies([tf.debugging.assert_less_equal(tf.shape(inputs)[1], limit, message=message)]):
        return tf.identity(inputs)


@register
class RelativePositions(keras.layers.Layer):
    """NEZHA's functional relative positions: ``[B, S, H] -> R [S, S, d]``, ``R[i, j]`` the sinusoid of the
    distance ``j - i`` clipped to ``±K`` (K = ``max_distance``), offset by K as NEZHA's table of 2K+1 rows
    indexes it (Wei et al. 2019, §3.2).

    Attention adds ``q_i·R[i, j]`` to its scores and ``Σⱼ p_ij·R[i, j]`` to its output.

    Args:
        head_size: int. d, the width of one attention head.
        max_distance: int. the largest distance told apart (``max_relative_position``, 64 in NEZHA).

    Example:
    >>> layer = RelativePositions(head_size=2, max_distance=1)
    >>> r = ops.convert_to_numpy(layer(ops.zeros((1, 3, 4))))
    >>> bool((r[0, 2] == r[0, 1]).all()), bool((r[1, 1] == r[0, 0]).all()), bool((r[1, 0] == [0.0, 1.0]).all())
    (True, True, True)
    """

    def __init__(self, head_size: int, max_distance: int = 64, **kwargs):
        super().__init__(**kwargs)
        self.head_size, self.max_distance = head_size, max_distance

    def call(self, inputs):
        positions = ops.arange(ops.shape(inputs)[1])
        return self.between(positions, positions)  # (S, S, d)

    def between(self, query_positions, key_positions):
        """``R`` from queries at ``query_positions`` ``[..., Q]`` to keys at ``key_positions`` ``[..., K]``:
        ``[..., Q, K, d]``, for a decoder whose rows hold their positions apart (`kerasbert.generation`).

        Example:
        >>> layer = RelativePositions(head_size=2, max_distance=1)
        >>> r = layer.between(ops.array([[4]]), ops.array([[0, 4, 9]]))  # distances -4, 0 and 5, clipped to ±1
        >>> ops.convert_to_numpy(r)[0, 0].astype(float).round(4).tolist()
        [[0.0, 1.0], [0.8415, 0.5403], [0.9093, -0.4161]]
        """
        rows = clipped_distances(query_positions, key_positions, self.max_distance)  # (..., Q, K): 0..2K
        table = sinusoids(ops.arange(2 * self.max_distance + 1), self.head_size)  # (2K+1, d), NEZHA's table
        return ops.cast(ops.take(table, rows, axis=0), self.compute_dtype)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((inputs.shape[1], inputs.shape[1], self.head_size), dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        return {**super().get_config(), "head_size": self.head_size, "max_distance": self.max_distance}


@register
class RotaryPositions(keras.layers.Layer):
    """RoFormer's rotary positions: ``[B, S, H] -> [1, S, d]``, the sinusoids of positions 0..S-1 that every
    attention layer turns its q and k by (`rotate`).

    Args:
        head_size: int. d, the width of one attention head (even).

    Example:
    >>> ops.convert_to_numpy(RotaryPositions(head_size=2)(ops.zeros((1, 2, 4))))[0].astype(float).round(4).tolist()
    [[0.0, 1.0], [0.8415, 0.5403]]
    """

    def __init__(self, head_size: int, **kwargs):
        super().__init__(**kwargs)
        self.head_size = head_size

    def call(self, inputs):
        return self.at(ops.arange(ops.shape(inputs)[1])[None])

    def at(self, positions):
        """The sinusoids of ``positions`` ``[..., S]``: ``[..., S, d]``, for rows whose positions are their own.

        Example:
        >>> tuple(RotaryPositions(head_size=4).at(ops.array([[3], [7]])).shape)
        (2, 1, 4)
        """
        return ops.cast(sinusoids(positions, self.head_size), self.compute_dtype)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((1, inputs.shape[1], self.head_size), dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        return {**super().get_config(), "head_size": self.head_size}
