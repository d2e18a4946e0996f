"""The layers DeBERTa adds to BERT's: its table of relative positions and its disentangled self-attention.

DeBERTa (He et al. 2021, §3.1) gives each attention score three parts, each scaled by ``1/√(3·d)``: content to
content ``q_i·k_j``, content to position ``q_i·K_r[δ(i, j)]`` and position to content ``k_j·Q_r[δ(i, j)]``, where
``Q_r`` and ``K_r`` are the one table of relative embeddings (`RelativeEmbedding`, ``[2N, H]``, normalized) through
the attention's own query and key projections (``share_att_key``, DeBERTa-v3), and ``δ(i, j)`` is the row of
the distance ``i - j``: exact up to N/2, log-spaced beyond up to ``max_relative_positions`` (`log_buckets`, the
buckets of DeBERTa-v2 and -v3), clipped to the table (`relative_index`). No position table is added to the
embeddings.

Example:
>>> from keras import ops
>>> ops.convert_to_numpy(log_buckets(ops.arange(0, 31, 3), 8, 32)).tolist()  # distances 0, 3, ..., 30
[0, 3, 5, 6, 6, 6, 7, 7, 7, 7, 7]
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.modeling.blocks import MultiHeadSelfAttention, visible
from kerasbert.modeling.layers import Dropout
from kerasbert.modeling.registry import register

SCORE_PARTS = 3  # content to content, content to position, position to content: the scale is 1/√(3·d)


def log_buckets(relative, buckets: int, max_distance: int):
    """DeBERTa's bucket of each relative distance ``i - j`` (int ``[...]``): the distance itself below N/2 (``mid``),
    beyond it ``sign·(mid + ⌈log(|δ|/mid) / log((P-1)/mid) · (mid-1)⌉)`` (N ``buckets``, P ``max_distance``), in
    float32 in transformers' order of operations, so the rounding matches its buckets.

    Example:
    >>> ops.convert_to_numpy(log_buckets(ops.array([-300, -5, 0, 5, 130, 300, 511]), 256, 512)).tolist()
    [-207, -5, 0, 5, 130, 207, 255]
    """
    mid = buckets // 2
    relative = ops.cast(relative, "int32")
    near = ops.logical_and(relative < mid, relative > -mid)
    distance = ops.where(near, mid - 1, ops.abs(relative))
    scale = ops.cast(math.log((max_distance - 1) / mid), "float32")  # a float64 quotient, as transformers takes it
    far = ops.ceil(ops.log(ops.cast(distance, "float32") / mid) / scale * (mid - 1)) + mid
    return ops.where(distance <= mid, relative, ops.cast(far, "int32") * ops.sign(relative))


def relative_index(queries, keys, buckets: int, max_distance: int):
    """The row of the relative table each query reads for each key: ``clip(δ(i - j) + N, 0, 2N-1)`` ``[Q, K]`` for
    positions ``queries`` ``[Q]`` and ``keys`` ``[K]`` (N ``buckets``, or ``max_distance`` unbucketed where
    ``buckets`` is 0).

    Example:
    >>> ops.convert_to_numpy(relative_index(ops.arange(3), ops.arange(3), 0, 2)).tolist()
    [[2, 1, 0], [3, 2, 1], [3, 3, 2]]
    """
    relative = ops.cast(queries, "int32")[:, None] - ops.cast(keys, "int32")[None, :]
    span = buckets or max_distance
    if buckets:
        relative = log_buckets(relative, buckets, max_distance)
    return ops.clip(relative + span, 0, 2 * span - 1)


@register
class RelativeEmbedding(keras.layers.Layer):
    """DeBERTa's relative position table ``[2N, H]`` (``rel_embeddings``): ``x -> table``, whatever ``x`` holds (the
    call places the table in the graph after the embeddings). Its norm is a `kerasbert.modeling.layers.LayerNorm`
    of its own.

    Args:
        rows: int. 2N, twice the position buckets (or twice ``max_relative_positions`` unbucketed).
        output_dim: int. H.
        embeddings_initializer: initializer of the table.

    Example:
    >>> layer = RelativeEmbedding(8, 4)
    >>> tuple(layer(ops.zeros((2, 5, 4))).shape), str(layer.param_formula())
    ((8, 4), '2·N·H = 2·4·4')
    """

    def __init__(self, rows: int, output_dim: int, embeddings_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.rows, self.output_dim = rows, output_dim
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, input_shape):
        # 2·N·H parameters
        self.embeddings = self.add_weight(shape=(self.rows, self.output_dim), initializer=self.embeddings_initializer,
                                          name="embeddings")

    def call(self, inputs):
        return ops.cast(ops.convert_to_tensor(self.embeddings), self.compute_dtype)

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((self.rows, self.output_dim), dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None

    def param_formula(self) -> Formula:
        return Formula.of("2·N·H", N=self.rows // 2, H=self.output_dim)

    def get_config(self):
        return {**super().get_config(), "rows": self.rows, "output_dim": self.output_dim,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer)}


@register
class DisentangledSelfAttention(MultiHeadSelfAttention):
    """DeBERTa's disentangled self-attention over ``[x, mask, relative]``: ``softmax((q_i·k_j + q_i·K_r[δ] +
    k_j·Q_r[δ]) / √(3·d) + mask)·V`` per head, then ``W_o`` (``relative`` the normalized `RelativeEmbedding`
    ``[2N, H]``, projected by the query and key kernels themselves).

    Its weights are `kerasbert.modeling.blocks.MultiHeadSelfAttention`'s (``qkv`` ``[H, 3H]``, ``output``
    ``[H, H]``): the relative projections share them, so its formula is the same ``4·(H·H+H)``. With
    ``first_token=True`` it attends from position 0 alone, ``[B, H]``.

    Args:
        num_heads: int. A.
        position_buckets: int. N, the log buckets of the distances (0: none, every distance up to
            ``max_relative_positions`` its own row).
        max_relative_positions: int. P of `log_buckets`, the distance the last bucket reaches.
        position_dropout: float. dropout on the relative table in training (transformers' ``pos_dropout``).
        **kwargs: `MultiHeadSelfAttention`'s (``dropout``, ``kernel_initializer``, ``use_bias``).

    Example:
    >>> layer = DisentangledSelfAttention(2, position_buckets=4, max_relative_positions=16)
    >>> x, mask = ops.ones((1, 6, 8)), ops.array([[1, 1, 1, 1, 0, 0]]) > 0
    >>> tuple(layer([x, mask, ops.ones((8, 8))]).shape), str(layer.param_formula())
    ((1, 6, 8), '4·(H·H+H) = 4·(8·8+8)')
    """

    def __init__(self, num_heads: int, position_buckets: int = 256, max_relative_positions: int = 512,
                 position_dropout: float = 0.0, **kwargs):
        kwargs.pop("positions", None)  # MultiHeadSelfAttention's config names none
        super().__init__(num_heads, **kwargs)
        self.position_buckets, self.max_relative_positions = position_buckets, max_relative_positions
        self.position_dropout = position_dropout
        self.position_dropout_layer = Dropout(position_dropout, dtype=self.dtype_policy)

    def call(self, inputs, training=None, first_token: bool = False):
        x, key_mask, relative = inputs
        q, k, v = self._first_token_qkv(x) if first_token else self.qkv(x)  # each (batch, heads, seq or 1, d)
        length = ops.shape(x)[1]
        index = relative_index(ops.arange(1 if first_token else length), ops.arange(length), self.position_buckets,
                               self.max_relative_positions)  # (seq or 1, seq)
        table = self.position_dropout_layer(relative, training=training)
        context = self.attend(q, k, v, visible(key_mask, first_token), (*self.relative_qk(table), index), training)
        if first_token:
            return self.output_dense(ops.reshape(context, (ops.shape(x)[0], self.num_heads * self.head_size)))
        return self.merge(context)

    def relative_qk(self, table):
        """The relative table ``[2N, H]`` through the query and key projections: ``Q_r``, ``K_r``, each
        ``[A, 2N, d]``."""
        projected = ops.reshape(self.qkv_dense(table), (-1, 3, self.num_heads, self.head_size))
        return ops.transpose(projected[:, 0], (1, 0, 2)), ops.transpose(projected[:, 1], (1, 0, 2))

    def attend(self, q, k, v, seen, relative=None, training=None):
        """``softmax(scores + mask)·V`` per head over the disentangled `scores`: ``[B, A, Q, d]`` (``relative``:
        ``(Q_r, K_r, index)``)."""
        probs = ops.cast(ops.softmax(self.scores(q, k, seen, relative), axis=-1), q.dtype)
        probs = self.dropout_layer(probs, training=training, width=self.num_heads * self.head_size)
        return ops.einsum("bhqk,bhkd->bhqd", probs, v)

    def scores(self, q, k, seen, relative):
        """The three parts summed and scaled, float32 ``[B, A, Q, K]``, ``-inf`` where a query may not see a key.

        Args:
            q: ``[B, A, Q, d]``.
            k: ``[B, A, K, d]``.
            seen: bool, broadcast to ``[B, 1, Q, K]``.
            relative: ``(Q_r, K_r, index)``: ``[A, 2N, d]`` each, and each query's row per key ``[Q, K]``.
        """
        q_r, k_r, index = relative
        shape = ops.shape(q)[:2]
        content = ops.einsum("bhqd,bhkd->bhqk", q, k)
        to_position = ops.einsum("bhqd,hrd->bhqr", q, k_r)  # (batch, heads, Q, 2N)
        to_position = ops.take_along_axis(to_position, self._spread(index, shape), axis=-1)
        from_position = ops.einsum("bhkd,hrd->bhkr", k, q_r)  # (batch, heads, K, 2N)
        from_position = ops.take_along_axis(from_position, self._spread(ops.transpose(index), shape), axis=-1)
        total = content + to_position + ops.transpose(from_position, (0, 1, 3, 2))
        scaled = ops.cast(total, "float32") / math.sqrt(self.head_size * SCORE_PARTS)
        return ops.where(seen, scaled, -math.inf)

    @staticmethod
    def _spread(index, batch_heads):
        """``index`` ``[Q, K]`` for every row and head: ``[B, A, Q, K]``."""
        return ops.broadcast_to(index[None, None], (batch_heads[0], batch_heads[1], *ops.shape(index)))

    def get_config(self):
        return {**super().get_config(), "position_buckets": self.position_buckets,
                "max_relative_positions": self.max_relative_positions, "position_dropout": self.position_dropout}
