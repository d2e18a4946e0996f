"""The layers T5 adds to kerasbert's: RMS norms, relative position buckets, attention without scale and with an
additive position bias (self- and cross-), the padding mask that keeps the first position, the output scale.

T5 (Raffel et al. 2020, §2.1) as bert4keras 0.11.5 builds it: every norm is ``x / rms(x) · g`` (no mean, no bias,
ε = 1e-6), attention scores are ``Q·Kᵀ + b[bucket(j - i)]`` (no ``1/√d``; T5 folds it into the initialization),
each head ``d_kv`` wide (``attention_head_size``, not necessarily H / A), and id 0 is padding except in the first
position, where T5's decoder starts with it. `kerasbert.modeling.t5` wires them; the gated feed-forward is
`kerasbert.modeling.blocks.GatedFeedForward`. Symbols: H hidden, A heads, d the head size, N buckets, V vocab.

Example:
>>> from keras import ops
>>> bias = RelativePositionBuckets(32, 2, bidirectional=True)
>>> tuple(bias([ops.zeros((1, 5, 8)), ops.zeros((1, 5, 8))]).shape)
(2, 5, 5)
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.modeling.blocks import _ProjectedBlock, visible
from kerasbert.modeling.layers import Dropout, ScaleFreeNorm, TokenEmbedding, first_kept, lookup
from kerasbert.modeling.registry import register

NORM_EPSILON = 1e-6  # T5's layer_norm_epsilon, which bert4keras fixes for every T5 norm
MAX_DISTANCE = 128  # distances from here on share the last bucket (T5's max_distance)


@register
class T5TokenEmbedding(TokenEmbedding):
    """`TokenEmbedding` under T5's name, shared by T5's encoder and decoder: its Keras mask keeps the first position
    (`kerasbert.modeling.layers.first_kept`), where T5's decoder starts with id 0, also its padding id, as every
    `TokenEmbedding`'s does.

    Example:
    >>> ops.convert_to_numpy(T5TokenEmbedding(10, 4).compute_mask(ops.array([[0, 7, 0]]))).tolist()
    [[True, True, False]]
    """


@register
class T5PaddingMask(keras.layers.Layer):
    """What each position's attention may see: the keys of `first_kept` ``[B, S]``; with ``causal``, ``[B, S, S]``,
    those up to the query's own position too (the decoder's ``Attention-LM-Mask``).

    Args:
        causal: bool. a decoder's mask: query i sees keys j <= i.
        padding: bool. hide the id-0 keys after the first position; False: a causal mask alone (transformers'
            T5 decoder, `kerasbert.modeling.t5.T5Options`).

    Example:
    >>> ops.convert_to_numpy(T5PaddingMask(causal=True)(ops.array([[0, 4, 0]])))[0].astype(int).tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 0]]
    """

    def __init__(self, causal: bool = False, padding: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.causal, self.padding = causal, padding

    def call(self, token_ids):
        seen = first_kept(token_ids) if self.padding else ops.ones_like(token_ids, dtype="bool")  # (B, S)
        if not self.causal:
            return seen
        order = ops.arange(ops.shape(token_ids)[1])
        return ops.logical_and(order[None, :] <= order[:, None], seen[:, None, :])  # (B, S, S): query i, key j

    def compute_output_spec(self, token_ids):
        shape = (*token_ids.shape, token_ids.shape[1]) if self.causal else token_ids.shape
        return keras.KerasTensor(shape, dtype="bool")

    def compute_mask(self, inputs, mask=None):
        return None

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        return {**super().get_config(), "causal": self.causal, "padding": self.padding}


@register
class RMSNorm(ScaleFreeNorm):
    """``x / √(mean(x²) + ε) · g`` over the last axis, a gain ``g [H]`` and no bias: T5's norm (Zhang & Sennrich
    2019), bert4keras's ``LayerNormalization(zero_mean=False, offset=False)``.

    Example:
    >>> ops.convert_to_numpy(RMSNorm(epsilon=0.0)(ops.array([[3.0, -3.0]]))).tolist()
    [[1.0, -1.0]]
    """

    def build(self, input_shape):
        # H parameters
        self.gamma = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="gamma")

    def call(self, inputs):
        return super().call(inputs) * ops.cast(self.gamma, self.compute_dtype)

    def param_formula(self) -> Formula:
        return Formula.of("H", H=int(self.gamma.shape[0]))


@register
class Scale(keras.layers.Layer):
    """``x · factor``, a constant: T5's ``Decoder-Output-Scale`` (``H^-0.5`` before the output layer).

    Example:
    >>> ops.convert_to_numpy(Scale(0.5)(ops.array([2.0, 4.0]))).tolist()
    [1.0, 2.0]
    """

    def __init__(self, factor: float, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor
        self.supports_masking = True

    def call(self, inputs):
        return inputs * ops.cast(self.factor, inputs.dtype)

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@register
class OutputLM(keras.layers.Dense):
    """Keras's ``Dense`` ``[H, V]`` without bias, T5.1.1's untied ``Decoder-Output-LM`` (``decoder/logits``).

    Example:
    >>> layer = OutputLM(10, use_bias=False)
    >>> _ = layer(ops.ones((1, 4)))
    >>> str(layer.param_formula())
    'H·V = 4·10'
    """

    def logits(self, x):
        """``x·W``, the scores before the softmax: ``[..., H] -> [..., V]``."""
        return ops.matmul(x, ops.cast(self.kernel, x.dtype))

    def param_formula(self) -> Formula:
        return Formula.of("H·V", H=int(self.kernel.shape[0]), V=self.units)


def buckets(relative, num_buckets: int, bidirectional: bool, max_distance: int = MAX_DISTANCE):
    """T5's bucket of each relative distance ``key - query`` (int ``[...]``): half the buckets exact distances, the
    rest logarithmic up to ``max_distance`` (Raffel et al. 2020, §2.1); bidirectional: half the buckets for keys
    after the query; causal: keys after the query share bucket 0.

    Example:
    >>> ops.convert_to_numpy(buckets(ops.array([-200, -20, -3, 0, 3]), 32, True)).tolist()
    [15, 10, 3, 0, 19]
    """
    n, bucket = -relative, 0
    if bidirectional:
        num_buckets //= 2
        bucket = ops.cast(n < 0, "int32") * num_buckets
        n = ops.abs(n)
    else:
        n = ops.maximum(n, 0)
    exact = num_buckets // 2
    far = ops.cast(ops.maximum(n, exact), "float32") / exact  # >= 1: the log is finite where it is used
    far = exact + ops.cast(ops.log(far) / math.log(max_distance / exact) * (num_buckets - exact), "int32")
    return bucket + ops.where(n < exact, n, ops.minimum(far, num_buckets - 1))


@register
class RelativePositionBuckets(keras.layers.Layer):
    """Each head's score bias by relative position, ``b[bucket(j - i)]``: ``[queries, keys] -> [A, Q, K]`` from a
    table ``[N, A]`` (N buckets; Google stores it ``[A, N]``). bert4keras's ``RelativePositionEmbeddingT5``.

    Args:
        num_buckets: int. N, T5's ``relative_attention_num_buckets``.
        num_heads: int. A.
        bidirectional: bool. the encoder's buckets (keys on both sides); False: the decoder's (causal).
        max_distance: int. the distance from which keys share the last bucket.
        embeddings_initializer: initializer of the table.

    Example:
    >>> layer = RelativePositionBuckets(32, 2, bidirectional=False)
    >>> tuple(layer([ops.zeros((1, 3, 4)), ops.zeros((1, 7, 4))]).shape), str(layer.param_formula())
    ((2, 3, 7), 'N·A = 32·2')
    """

    def __init__(self, num_buckets: int, num_heads: int, bidirectional: bool = True, embeddings_initializer="zeros",
                 max_distance: int = MAX_DISTANCE, **kwargs):
        super().__init__(**kwargs)
        self.num_buckets, self.num_heads, self.bidirectional = num_buckets, num_heads, bidirectional
        self.max_distance = max_distance
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, input_shape):
        # N·A parameters
        self.embeddings = self.add_weight(shape=(self.num_buckets, self.num_heads), name="embeddings",
                                          initializer=self.embeddings_initializer)

    def call(self, inputs):
        queries, keys = (ops.arange(ops.shape(x)[1]) for x in inputs)
        return self.between(queries, keys)

    def between(self, queries, keys):
        """The bias of queries at positions ``[Q]`` over keys at ``[K]``: ``[A, Q, K]``. Every bucket is read many
        times; `lookup` sums its gradient per bucket, so any Keras optimizer squares the sum as Adam means to."""
        ids = buckets(keys[None, :] - queries[:, None], self.num_buckets, self.bidirectional, self.max_distance)
        return ops.transpose(ops.cast(lookup(self.embeddings, ids), self.compute_dtype), (2, 0, 1))

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((self.num_heads, inputs[0].shape[1], inputs[1].shape[1]), dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None

    def param_formula(self) -> Formula:
        return Formula.of("N·A", N=self.num_buckets, A=self.num_heads)

    def get_config(self):
        return {**super().get_config(), "num_buckets": self.num_buckets, "num_heads": self.num_heads,
                "bidirectional": self.bidirectional, "max_distance": self.max_distance,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer)}


class _BiasedAttention(_ProjectedBlock):
    """What T5's two attentions share: ``softmax(Q·Kᵀ + bias)·V`` per head, no ``1/√d``, heads ``d`` wide."""

    def __init__(self, num_heads: int, head_size: int, dropout: float = 0.0, kernel_initializer="glorot_uniform",
                 use_bias: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.head_size, self.dropout, self.use_bias = num_heads, head_size, dropout, use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy)

    def _build_output(self, hidden: int) -> None:
        self.output_dense = self._projection("output", hidden, self.num_heads * self.head_size)

    def param_formula(self) -> Formula:
        hidden = int(self.output_dense.kernel.shape[-1])
        return self._formula("4·H·A·d+3·A·d+H" if self.use_bias else "4·H·A·d", H=hidden, A=self.num_heads,
                             d=self.head_size)

    def _split(self, projected, parts: int):
        """``[B, S, parts·A·d]`` to ``[parts, B, A, S, d]``."""
        # the length as -1: tf2onnx folds the Dense's own reshape, so a length read from ``projected`` is its rows
        heads = ops.reshape(projected, (ops.shape(projected)[0], -1, parts, self.num_heads, self.head_size))
        return ops.transpose(heads, (2, 0, 3, 1, 4))

    def attend(self, q, k, v, seen, bias, training=None):
        """Each query's context ``[B, Q, H]`` over keys it may see: what `call` and a decoder that keeps earlier
        keys and values (`kerasbert.generation.seq2seq_cache`) share.

        Args:
            q: ``[B, A, Q, d]`` queries.
            k: ``[B, A, K, d]`` keys.
            v: ``[B, A, K, d]`` values.
            seen: bool, broadcast to ``[B, 1, Q, K]``: False where a query may not see a key; None: every key.
            bias: ``[A, Q, K]`` the relative position bias; None: none (transformers' cross-attention).
            training: bool. dropout on the probabilities.
        """
        scores = ops.cast(ops.einsum("bhqd,bhkd->bhqk", q, k), "float32")
        if bias is not None:
            scores = scores + ops.cast(bias, "float32")[None]
        if seen is not None:
            scores = ops.where(seen, scores, -math.inf)
        probs = ops.cast(ops.softmax(scores, axis=-1), q.dtype)  # (batch, heads, Q, K), the softmax in float32
        probs = self.dropout_layer(probs, training=training, width=self.num_heads * self.head_size)
        context = ops.einsum("bhqk,bhkd->bqhd", probs, v)  # (batch, Q, heads, d)
        shape = ops.shape(context)
        return self.output_dense(ops.reshape(context, (shape[0], shape[1], self.num_heads * self.head_size)))

    def compute_mask(self, inputs, mask=None):
        return mask[0] if isinstance(mask, (list, tuple)) else mask

    def compute_output_spec(self, inputs, training=None):
        return keras.KerasTensor(inputs[0].shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "num_heads": self.num_heads, "head_size": self.head_size,
                "dropout": self.dropout, "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}


@register
class T5SelfAttention(_BiasedAttention):
    """T5's self-attention over ``[x, mask, bias]``: ``x`` ``[B, S, H]``, ``mask`` ``[B, S]`` keys or ``[B, S, S]``,
    ``bias`` ``[A, S, S]`` (`RelativePositionBuckets`). Projections ``qkv`` ``[H, 3·A·d]`` (Google's ``q``, ``k``,
    ``v`` side by side) and ``output`` ``[A·d, H]``.

    Args:
        num_heads: int. A.
        head_size: int. d, T5's ``d_kv`` (``attention_head_size``).
        dropout: float. dropout on the attention probabilities.
        kernel_initializer: initializer of the kernels.
        use_bias: bool. biases on the projections (T5 has none).

    Example:
    >>> layer = T5SelfAttention(2, 3)
    >>> out = layer([ops.ones((1, 4, 8)), ops.ones((1, 4)) > 0, ops.zeros((2, 4, 4))])
    >>> tuple(out.shape), str(layer.param_formula())
    ((1, 4, 8), '4·H·A·d = 4·8·2·3')
    """

    PROJECTIONS = {"qkv": ("H", "3·A·d"), "output": ("A·d", "H")}

    def build(self, input_shape):
        hidden = input_shape[0][-1]
        # 4·H·A·d parameters
        self.qkv_dense = self._projection("qkv", 3 * self.num_heads * self.head_size, hidden)
        self._build_output(hidden)

    def call(self, inputs, training=None):
        x, mask, bias = inputs
        return self.attend(*self.qkv(x), visible(mask), bias, training)

    def qkv(self, x):
        """Q, K and V of every position of ``x`` ``[B, S, H]``, each ``[B, A, S, d]``."""
        return ops.unstack(self._split(self.qkv_dense(x), 3), axis=0)


@register
class T5CrossAttention(_BiasedAttention):
    """T5's cross-attention over ``[x, context, bias]`` or ``[x, context, bias, mask]``: queries of ``x``
    ``[B, Q, H]``, keys and values of the encoder's ``context`` ``[B, K, H]``, ``bias`` ``[A, Q, K]``, ``mask``
    ``[B, K]`` the context's real positions (without it every position is seen, as bert4keras's decoder alone).
    Projections ``q`` ``[H, A·d]``, ``kv`` ``[H, 2·A·d]`` (Google's ``k``, ``v`` side by side), ``output``.
    With ``position_bias=False`` (transformers' T5) it takes no bias: ``[x, context]`` or ``[x, context, mask]``.

    Example:
    >>> layer = T5CrossAttention(2, 3)
    >>> tuple(layer([ops.ones((1, 2, 8)), ops.ones((1, 5, 8)), ops.zeros((2, 2, 5))]).shape)
    (1, 2, 8)
    """

    PROJECTIONS = {"q": ("H", "A·d"), "kv": ("H", "2·A·d"), "output": ("A·d", "H")}

    def __init__(self, num_heads: int, head_size: int, position_bias: bool = True, **kwargs):
        super().__init__(num_heads, head_size, **kwargs)
        self.position_bias = position_bias

    def build(self, input_shape):
        hidden = input_shape[0][-1]
        # 4·H·A·d parameters
        self.q_dense = self._projection("q", self.num_heads * self.head_size, hidden)
        self.kv_dense = self._projection("kv", 2 * self.num_heads * self.head_size, input_shape[1][-1])
        self._build_output(hidden)

    def call(self, inputs, training=None):
        x, context, *rest = inputs
        bias = rest.pop(0) if self.position_bias else None
        k, v = self.keys_values(context)
        return self.attend(self.query(x), k, v, visible(rest[0]) if rest else None, bias, training)

    def get_config(self):
        return {**super().get_config(), "position_bias": self.position_bias}

    def query(self, x):
        """The queries of ``x`` ``[B, Q, H]``: ``[B, A, Q, d]``."""
        return self._split(self.q_dense(x), 1)[0]

    def keys_values(self, context):
        """The keys and values of the encoder's output ``context`` ``[B, K, H]``, each ``[B, A, K, d]``: what a
        decoder computes once a source and keeps."""
        return ops.unstack(self._split(self.kv_dense(context), 2), axis=0)
