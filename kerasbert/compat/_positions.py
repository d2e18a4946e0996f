"""bert4keras's position layers on Keras 3: the learned `PositionEmbedding` and the fixed
`SinusoidalPositionEmbedding`, merged with their input by ``merge_mode``; the relative tables
`RelativePositionEmbedding` (Shaw et al. 2018) and `RelativePositionEmbeddingT5` (T5's buckets) that
`MultiHeadAttention` reads as ``p_bias``.

The math is kerasbert's own: `kerasbert.modeling.layers.PositionEmbedding` (its hierarchical decomposition),
`kerasbert.modeling.positions` (the sinusoids, the clipped distances) and `kerasbert.modeling.t5_layers.buckets`.
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.compat._basic_layers import Layer
from kerasbert.errors import ConfigError, fail
from kerasbert.modeling import layers as modeling_layers
from kerasbert.modeling.layers import lookup
from kerasbert.modeling.positions import checked_length, clipped_distances, sinusoids
from kerasbert.modeling.registry import register_compat
from kerasbert.modeling.t5_layers import MAX_DISTANCE, buckets

MERGE_MODES = ("add", "mul", "zero", "concat")  # bert4keras's: any other name than the first three concatenates


class _Merged:
    """What both absolute position layers share: ``custom_position_ids`` (``[x, position_ids]``) and ``merge_mode``.

    ``add``: ``x + P``; ``mul``: ``x · (P + 1)``; ``zero``: ``P`` alone; any other: ``[x, P]`` along the last axis.
    ``P`` is ``[1, S, D]`` for positions 0..S-1 (``zero`` returns it so: one row for the whole batch, as
    bert4keras's) and ``[B, S, D]`` for custom ids.
    """

    def _check_merge_mode(self) -> None:
        if not isinstance(self.merge_mode, str):
            raise fail(ConfigError, f"{type(self).__name__}: merge_mode", " or ".join(map(repr, MERGE_MODES)),
                       repr(self.merge_mode))

    def _split(self, inputs):
        """``(x, position ids or None)``."""
        if self.custom_position_ids:
            if not isinstance(inputs, (list, tuple)) or len(inputs) != 2:
                raise fail(ConfigError, f"{self.name}: inputs", "[x, position_ids] (custom_position_ids=True)",
                           f"{len(inputs) if isinstance(inputs, (list, tuple)) else 1} input(s)")
            return inputs
        return inputs, None

    def _merge(self, inputs, embeddings):
        embeddings = ops.cast(embeddings, inputs.dtype)
        if self.merge_mode == "add":
            return inputs + embeddings
        if self.merge_mode == "mul":
            return inputs * (embeddings + 1.0)
        if self.merge_mode == "zero":
            return embeddings
        if not self.custom_position_ids:
            embeddings = ops.repeat(embeddings, ops.shape(inputs)[0], axis=0)  # (batch, seq, D)
        return ops.concatenate([inputs, embeddings], axis=-1)

    def compute_output_shape(self, input_shape):
        shape = input_shape[0] if self.custom_position_ids else input_shape
        width = self.output_dim + (shape[2] if self.merge_mode not in MERGE_MODES[:3] else 0)
        batch = 1 if self.merge_mode == "zero" and not self.custom_position_ids else shape[0]
        return (batch, shape[1], width)

    def compute_output_spec(self, inputs):
        self._split(inputs)  # [x, position_ids] where custom_position_ids says so
        shapes = [x.shape for x in inputs] if isinstance(inputs, (list, tuple)) else inputs.shape
        return keras.KerasTensor(self.compute_output_shape(shapes), dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return mask[0] if isinstance(mask, (list, tuple)) else mask


@register_compat
class PositionEmbedding(_Merged, modeling_layers.PositionEmbedding):
    """bert4keras's learned absolute positions: a table ``embeddings`` ``[P, D]`` (``input_dim`` P positions)
    merged with the input by ``merge_mode``, for positions 0..S-1 or, with ``custom_position_ids``, for the ids of
    a second input: ``[x, position_ids]``.

    ``hierarchical`` (True: α = 0.4, or α itself) embeds positions past P as ``α·U[p // P] + (1-α)·U[p % P]``,
    ``U = (E - α·E[0]) / (1-α)`` (kerasbert's `kerasbert.modeling.layers.PositionEmbedding`, whose config keeps α).
    Longer inputs than the table allows raise a ModelError (bert4keras fails in the addition).

    Args:
        input_dim: int. P, the number of positions.
        output_dim: int. D, the embedding width.
        merge_mode: str. "add", "mul", "zero", or any other name to concatenate.
        hierarchical: bool, float or None. the hierarchical decomposition's α (True: 0.4); None or False: none.
        embeddings_initializer: initializer of the table.
        custom_position_ids: bool. take ``[x, position_ids]``.

    Example:
    >>> layer = PositionEmbedding(8, 4, merge_mode="zero")
    >>> tuple(layer(ops.zeros((2, 5, 4))).shape), tuple(PositionEmbedding(8, 4, "concat")(ops.zeros((2, 5, 3))).shape)
    ((1, 5, 4), (2, 5, 7))
    """

    def __init__(self, input_dim: int, output_dim: int, merge_mode: str = "add", hierarchical=None,
                 embeddings_initializer="zeros", custom_position_ids: bool = False, **kwargs):
        alpha = 0.4 if hierarchical is True else (hierarchical or None)
        super().__init__(input_dim, output_dim, embeddings_initializer=embeddings_initializer, hierarchical=alpha,
                         **kwargs)
        self.merge_mode, self.custom_position_ids = merge_mode, custom_position_ids
        self._check_merge_mode()

    def call(self, inputs):
        x, position_ids = self._split(inputs)
        if position_ids is None:
            x = checked_length(x, self.max_length, self.hierarchical)
            position_ids = ops.arange(ops.shape(x)[1])[None]  # (1, seq)
        return self._merge(x, self.at(ops.cast(position_ids, "int32")))

    def compute_output_spec(self, inputs):
        x, position_ids = self._split(inputs)
        if position_ids is None and isinstance(x.shape[1], int):
            checked_length(x, self.max_length, self.hierarchical)  # a length known when the model is built
        return super().compute_output_spec(inputs)

    def at(self, positions):
        if self.hierarchical:
            return super().at(positions)
        return lookup(self.embeddings, positions)  # the gradient of the rows read, summed per row

    def get_config(self):
        return {**super().get_config(), "merge_mode": self.merge_mode,
                "custom_position_ids": self.custom_position_ids}


@register_compat
class SinusoidalPositionEmbedding(_Merged, Layer):
    """Fixed sinusoidal positions (Vaswani et al. 2017, interleaved ``sin, cos`` pair by pair as bert4keras's
    ``sinusoidal_embeddings``) merged with the input by ``merge_mode``; ``merge_mode="zero"`` gives the ``[1, S, d]``
    table that ``MultiHeadAttention(p_bias="rotary")`` turns its queries and keys by. No weights.

    Args:
        output_dim: int. D, the width (even).
        merge_mode: str. "add", "mul", "zero", or any other name to concatenate.
        custom_position_ids: bool. take ``[x, position_ids]`` (float positions allowed).

    Example:
    >>> out = SinusoidalPositionEmbedding(2, merge_mode="zero")(ops.zeros((3, 2, 5)))
    >>> ops.convert_to_numpy(out)[0].astype(float).round(4).tolist()
    [[0.0, 1.0], [0.8415, 0.5403]]
    """

    def __init__(self, output_dim: int, merge_mode: str = "add", custom_position_ids: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.output_dim, self.merge_mode, self.custom_position_ids = output_dim, merge_mode, custom_position_ids
        self._check_merge_mode()

    def call(self, inputs):
        x, position_ids = self._split(inputs)
        if position_ids is None:
            position_ids = ops.arange(ops.shape(x)[1], dtype="float32")[None]  # (1, seq)
        return self._merge(x, sinusoids(position_ids, self.output_dim))

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        return {**super().get_config(), "output_dim": self.output_dim, "merge_mode": self.merge_mode,
                "custom_position_ids": self.custom_position_ids}


@register_compat
class RelativePositionEmbedding(Layer):
    """Learned relative positions (Shaw et al. 2018): on ``[q, v]`` the table ``embeddings`` ``[N, D]`` read at
    ``clip(j - i, ±K) + K`` for query i and key j (``K = (N - 1) // 2``): ``[Sq, Sv, D]``, the ``p_bias`` of
    ``MultiHeadAttention(p_bias="typical_relative")`` (NEZHA's, with a learned table). Its mask is ``q``'s.

    Args:
        input_dim: int. N, the number of distances (2K+1).
        output_dim: int. D, the width (the attention's key size).
        embeddings_initializer: initializer of the table.

    Example:
    >>> layer = RelativePositionEmbedding(5, 4)
    >>> tuple(layer([ops.zeros((2, 3, 8)), ops.zeros((2, 6, 8))]).shape)
    (3, 6, 4)
    """

    def __init__(self, input_dim: int, output_dim: int, embeddings_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.input_dim, self.output_dim = input_dim, output_dim
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, input_shape):
        # N·D parameters
        self.embeddings = self.add_weight(shape=(self.input_dim, self.output_dim), name="embeddings",
                                          initializer=self.embeddings_initializer)

    def call(self, inputs):
        return ops.cast(lookup(self.embeddings, self.compute_position_ids(inputs)), self.compute_dtype)

    def compute_position_ids(self, inputs):
        """The table's row for each (query, key): ``[Sq, Sv]`` int."""
        q, v = inputs
        return clipped_distances(ops.arange(ops.shape(q)[1]), ops.arange(ops.shape(v)[1]), (self.input_dim - 1) // 2)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((inputs[0].shape[1], inputs[1].shape[1], self.output_dim), dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None if mask is None else mask[0]

    def param_formula(self) -> Formula:
        return Formula.of("N·D", N=self.input_dim, D=self.output_dim)

    def get_config(self):
        return {**super().get_config(), "input_dim": self.input_dim, "output_dim": self.output_dim,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer)}


@register_compat
class RelativePositionEmbeddingT5(RelativePositionEmbedding):
    """T5's relative positions (Raffel et al. 2020): the table ``[N, A]`` (N buckets, one bias per head A) read at
    each (query, key)'s bucket of ``j - i`` (`kerasbert.modeling.t5_layers.buckets`): ``[Sq, Sv, A]``, the ``p_bias``
    of ``MultiHeadAttention(p_bias="t5_relative")``.

    Args:
        input_dim: int. N, the number of buckets.
        output_dim: int. A, the number of heads.
        max_distance: int. the distance from which keys share the last bucket.
        bidirectional: bool. buckets for keys on both sides (an encoder); False: causal (a decoder).
        embeddings_initializer: initializer of the table.

    Example:
    >>> layer = RelativePositionEmbeddingT5(32, 2)
    >>> ops.convert_to_numpy(layer.compute_position_ids([ops.zeros((1, 2, 4))] * 2)).tolist()
    [[0, 17], [1, 0]]
    """

    def __init__(self, input_dim: int, output_dim: int, max_distance: int = MAX_DISTANCE, bidirectional: bool = True,
                 embeddings_initializer="zeros", **kwargs):
        super().__init__(input_dim, output_dim, embeddings_initializer=embeddings_initializer, **kwargs)
        self.max_distance, self.bidirectional = max_distance, bidirectional

    def compute_position_ids(self, inputs):
        q, v = inputs
        queries, keys = ops.arange(ops.shape(q)[1]), ops.arange(ops.shape(v)[1])
        return buckets(keys[None, :] - queries[:, None], self.input_dim, self.bidirectional, self.max_distance)

    def get_config(self):
        return {**super().get_config(), "max_distance": self.max_distance, "bidirectional": self.bidirectional}
