"""bert4keras's attention layers on Keras 3: `MultiHeadAttention` and `GatedAttentionUnit` (Hua et al. 2022), with
bert4keras 0.11.5's arguments, sublayers (their weights in its order), call conventions and numbers.

Both take their extra inputs as bert4keras does: after the queries, keys and values (or the one input of a
self-attending GAU) come the attention bias when the call says ``a_bias=True``, then the position input named by
``p_bias``. Keys are masked by the Keras mask of the values (of the GAU's first input), and the bias, boolean or
additive, joins it; `kerasbert.compat.backend.attention_normalize` then turns the scores into weights (in
float32), and the rotary positions are its ``apply_rotary_position_embeddings``.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.compat._basic_layers import Layer, ScaleOffset, activation_of, serialized_activation
from kerasbert.compat._functions import apply_rotary_position_embeddings, attention_normalize
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling.registry import register_compat

NORMALIZATIONS = ("softmax", "squared_relu", "softmax_plus")
P_BIASES = (None, "typical_relative", "t5_relative", "rotary")


def _check_choice(layer: str, name: str, value, choices) -> None:
    if value not in choices:
        raise fail(ConfigError, f"{layer}: {name}", " or ".join(map(repr, choices)), repr(value))


class _Attending(Layer):
    """What both attention layers share: the checked call convention, the dropout and their Dense sublayers."""

    def _dense(self, name: str, units: int, inputs: int, activation=None) -> keras.layers.Dense:
        layer = keras.layers.Dense(units, activation=activation, use_bias=self.use_bias, name=name,
                                   kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy)
        layer.build((None, inputs))
        return layer

    def _extras(self, inputs, first: int, a_bias, p_bias):
        """The attention bias and the position input after the first ``first`` inputs (each None when not asked
        for), once ``inputs`` holds exactly those."""
        _check_choice(self.name, "p_bias", p_bias, P_BIASES)
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        expected = first + bool(a_bias) + (p_bias is not None)
        if len(inputs) != expected:
            names = ["q, k, v" if first == 3 else "x"] + ["the a_bias"] * bool(a_bias) + [f"the {p_bias} input"] * (
                p_bias is not None)
            raise fail(ModelError, f"{self.name}: inputs", f"{expected} ({', '.join(names)})", f"{len(inputs)}",
                       "pass a_bias=True with an attention bias input, p_bias=... with its position input")
        bias = inputs[first] if a_bias else None
        return bias, (inputs[-1] if p_bias is not None else None)

    def _normalize(self, scores, mask, bias, training):
        """The weights of ``scores`` (in float32), in the compute dtype, after dropout."""
        if bias is not None and keras.backend.standardize_dtype(bias.dtype) != "bool":
            bias = ops.cast(bias, "float32")  # Keras casts a float input to the compute dtype
        weights = attention_normalize(ops.cast(scores, "float32"), mask, -1, self.normalization, bias)
        return self.dropout(ops.cast(weights, self.compute_dtype), training=training)


@register_compat
class MultiHeadAttention(_Attending):
    """bert4keras's multi-head attention: ``o_dense(softmax(q·kᵀ/√k + bias)·v)`` per head, on ``[q, k, v, ...]``.

    Sublayers ``q_dense``, ``k_dense`` ``[H, heads·key_size]``, ``v_dense`` ``[H, heads·head_size]``, ``o_dense``
    ``[heads·head_size, out_dim]``, their weights in that order.

    Call: ``layer([q, k, v], a_bias=None, p_bias=None)``. ``a_bias=True``: the next input is an attention bias,
    ``[B, Sq, Sk]`` (given to every head), or ``[B or 1, heads or 1, Sq, Sk]``; boolean (False: hidden) or
    additive. ``p_bias``: the last input is ``"rotary"``'s sinusoids ``[B or 1, S, key_size]``
    (`SinusoidalPositionEmbedding` ``"zero"``), ``"typical_relative"``'s table ``[Sq, Sk, key_size]``
    (`RelativePositionEmbedding`), added to the scores as ``q·R`` and to the output as ``Σ p·R``, or
    ``"t5_relative"``'s ``[Sq, Sk, heads]`` (`RelativePositionEmbeddingT5`), added to the scores. Keys are masked
    by the Keras mask of ``v``; the output carries ``q``'s.

    Args:
        heads: int. the number of heads.
        head_size: int. each head's width of the values.
        out_dim: int or None. the output width; None: ``heads·head_size``.
        key_size: int or None. each head's width of the queries and keys; None: ``head_size``.
        use_bias: bool. biases on the projections.
        normalization: str. "softmax", "squared_relu" or "softmax_plus".
        attention_scale: bool. divide the scores by ``√key_size``.
        attention_dropout: float or None. dropout on the weights in training.
        return_attention_scores: bool. return ``[o, a]``, ``a`` the scores ``[B, heads, Sq, Sk]`` before the
            mask, the bias and the normalization.
        kernel_initializer: initializer of the kernels.

    Example:
    >>> layer = MultiHeadAttention(heads=2, head_size=4)
    >>> x = ops.ones((1, 3, 8))
    >>> tuple(layer([x, x, x]).shape), [w.path for w in layer.weights][:2]
    ((1, 3, 8), ['multi_head_attention/q_dense/kernel', 'multi_head_attention/q_dense/bias'])
    """

    def __init__(self, heads: int, head_size: int, out_dim: int | None = None, key_size: int | None = None,
                 use_bias: bool = True, normalization: str = "softmax", attention_scale: bool = True,
                 attention_dropout: float | None = None, return_attention_scores: bool = False,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        _check_choice(type(self).__name__, "normalization", normalization, NORMALIZATIONS)
        self.heads, self.head_size = heads, head_size
        self.out_dim, self.key_size = out_dim or heads * head_size, key_size or head_size
        self.use_bias, self.normalization, self.attention_scale = use_bias, normalization, attention_scale
        self.attention_dropout, self.return_attention_scores = attention_dropout, return_attention_scores
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.dropout = keras.layers.Dropout(attention_dropout or 0.0, dtype=self.dtype_policy)

    def build(self, input_shape):
        if not isinstance(input_shape[0], (list, tuple)) or len(input_shape) < 3:
            found = len(input_shape) if isinstance(input_shape[0], (list, tuple)) else 1
            raise fail(ModelError, f"{self.name}: inputs", "at least 3 (q, k, v)", str(found))
        # 2·H·A·k + 2·H·A·d (+ biases) parameters, for key size k and head size d
        self.q_dense = self._dense("q_dense", self.key_size * self.heads, input_shape[0][-1])
        self.k_dense = self._dense("k_dense", self.key_size * self.heads, input_shape[1][-1])
        self.v_dense = self._dense("v_dense", self.head_size * self.heads, input_shape[2][-1])
        self.o_dense = self._dense("o_dense", self.out_dim, self.head_size * self.heads)

    def _heads(self, x, size: int):
        """``[B, S, heads·size]`` to ``[B, S, heads, size]``."""
        return ops.reshape(x, (ops.shape(x)[0], -1, self.heads, size))

    def call(self, inputs, mask=None, a_bias=None, p_bias=None, training=None):
        bias, position = self._extras(inputs, 3, a_bias, p_bias)
        q, k, v = inputs[:3]
        v_mask = mask[2] if isinstance(mask, (list, tuple)) else None
        qw = self._heads(self.q_dense(q), self.key_size)  # (batch, Sq, heads, key_size)
        kw = self._heads(self.k_dense(k), self.key_size)
        vw = self._heads(self.v_dense(v), self.head_size)  # (batch, Sk, heads, head_size)
        o, a = self.pay_attention_to(qw, kw, vw, v_mask, bias, p_bias, position, training)
        o = self.o_dense(ops.reshape(o, (ops.shape(o)[0], -1, self.heads * self.head_size)))
        return [o, a] if self.return_attention_scores else o

    def pay_attention_to(self, qw, kw, vw, v_mask, bias, p_bias, position, training=None):
        """The heads' outputs ``[B, Sq, heads, head_size]`` and scores ``[B, heads, Sq, Sk]`` (before the mask)."""
        if p_bias == "rotary":
            qw, kw = apply_rotary_position_embeddings(ops.cast(position, qw.dtype), qw, kw)
        a = ops.einsum("bjhd,bkhd->bhjk", qw, kw)
        if p_bias == "typical_relative":
            a = a + ops.einsum("bjhd,jkd->bhjk", qw, ops.cast(position, qw.dtype))
        elif p_bias == "t5_relative":
            a = a + ops.cast(ops.transpose(position, (2, 0, 1)), a.dtype)[None]
        if self.attention_scale:
            a = a / math.sqrt(self.key_size)
        if bias is not None and len(bias.shape) == 3:
            bias = bias[:, None]  # (batch, 1, Sq, Sk): one bias for every head
        weights = self._normalize(a, v_mask, bias, training)
        o = ops.einsum("bhjk,bkhd->bjhd", weights, vw)
        if p_bias == "typical_relative":
            o = o + ops.einsum("bhjk,jkd->bjhd", weights, ops.cast(position, weights.dtype))
        return o, a

    def compute_output_spec(self, inputs, mask=None, a_bias=None, p_bias=None, training=None):
        self._extras(inputs, 3, a_bias, p_bias)
        q, k = inputs[0], inputs[1]
        o = keras.KerasTensor((q.shape[0], q.shape[1], self.out_dim), dtype=self.compute_dtype)
        if not self.return_attention_scores:
            return o
        return [o, keras.KerasTensor((q.shape[0], self.heads, q.shape[1], k.shape[1]), dtype=self.compute_dtype)]

    def compute_mask(self, inputs, mask=None):
        q_mask = mask[0] if isinstance(mask, (list, tuple)) else None
        return [q_mask, None] if self.return_attention_scores else q_mask

    def get_config(self):
        return {**super().get_config(), "heads": self.heads, "head_size": self.head_size, "out_dim": self.out_dim,
                "key_size": self.key_size, "use_bias": self.use_bias, "normalization": self.normalization,
                "attention_scale": self.attention_scale, "attention_dropout": self.attention_dropout,
                "return_attention_scores": self.return_attention_scores,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}


@register_compat
class GatedAttentionUnit(_Attending):
    """The gated attention unit (Hua et al. 2022, FLASH's GAU) as bert4keras builds it: ``o_dense(u ⊙ (A·v))`` with
    one head of attention ``A = normalize(q·kᵀ/√key_size)``.

    Self-attending (``self_attention=True``, one input ``x``): ``i_dense`` ``[H, 2·units+key_size]`` (activated)
    gives ``u``, ``v`` and a shared ``z``, and ``q_scaleoffset``, ``k_scaleoffset`` (`ScaleOffset`, offsets with
    ``use_bias``) make ``q`` and ``k`` of ``z``. Otherwise on ``[q, k, v]``: ``uq_dense`` ``[H, units+key_size]``
    gives ``u`` and ``q``, ``k_dense`` and ``v_dense`` the keys and values. Then ``o_dense`` ``[units, H]``. The
    weights in that order. Call arguments ``a_bias`` and ``p_bias`` (``"rotary"`` alone) as `MultiHeadAttention`'s;
    keys are masked by the Keras mask of the first input (bert4keras's, also for ``[q, k, v]``).

    Args:
        units: int. the width of ``u`` and ``v``.
        key_size: int. the width of ``q`` and ``k``.
        activation: str or function. of the projections (swish).
        use_bias: bool. biases on the projections and offsets on ``q`` and ``k``.
        normalization: str. "squared_relu", "softmax" or "softmax_plus".
        self_attention: bool. one input ``x``; False: ``[q, k, v]``.
        attention_scale: bool. divide the scores by ``√key_size``.
        attention_dropout: float or None. dropout on the weights in training.
        kernel_initializer: initializer of the kernels.

    Example:
    >>> layer = GatedAttentionUnit(units=6, key_size=4)
    >>> tuple(layer(ops.ones((2, 3, 8))).shape), len(layer.weights)
    ((2, 3, 8), 8)
    """

    def __init__(self, units: int, key_size: int, activation="swish", use_bias: bool = True,
                 normalization: str = "squared_relu", self_attention: bool = True, attention_scale: bool = True,
                 attention_dropout: float | None = None, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        _check_choice(type(self).__name__, "normalization", normalization, NORMALIZATIONS)
        self.units, self.key_size, self.activation, self.use_bias = units, key_size, activation, use_bias
        self.normalization, self.self_attention, self.attention_scale = normalization, self_attention, attention_scale
        self.attention_dropout = attention_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.dropout = keras.layers.Dropout(attention_dropout or 0.0, dtype=self.dtype_policy)

    def build(self, input_shape):
        shapes = input_shape if isinstance(input_shape[0], (list, tuple)) else [input_shape]
        hidden, act = shapes[0][-1], activation_of(self.activation)
        if self.self_attention:
            self.i_dense = self._dense("i_dense", 2 * self.units + self.key_size, hidden, act)
            self.q_scaleoffset = ScaleOffset(offset=self.use_bias, name="q_scaleoffset", dtype=self.dtype_policy)
            self.k_scaleoffset = ScaleOffset(offset=self.use_bias, name="k_scaleoffset", dtype=self.dtype_policy)
            for layer in (self.q_scaleoffset, self.k_scaleoffset):
                layer.build((None, self.key_size))
        else:
            self.uq_dense = self._dense("uq_dense", self.units + self.key_size, hidden, act)
            self.k_dense = self._dense("k_dense", self.key_size, shapes[1][-1], act)
            self.v_dense = self._dense("v_dense", self.units, shapes[2][-1], act)
        self.o_dense = self._dense("o_dense", hidden, self.units)

    def _check_call(self, inputs, a_bias, p_bias):
        """The bias and the position input, once the call's arguments are a GAU's."""
        _check_choice(self.name, "p_bias", p_bias, (None, "rotary"))
        return self._extras(inputs, 1 if self.self_attention else 3, a_bias, p_bias)

    def call(self, inputs, mask=None, a_bias=None, p_bias=None, training=None):
        bias, position = self._check_call(inputs, a_bias, p_bias)
        inputs = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        key_mask = mask[0] if isinstance(mask, (list, tuple)) else mask
        if self.self_attention:
            u, v, z = ops.split(self.i_dense(inputs[0]), [self.units, 2 * self.units], axis=-1)
            q, k = self.q_scaleoffset(z), self.k_scaleoffset(z)
        else:
            u, q = ops.split(self.uq_dense(inputs[0]), [self.units], axis=-1)
            k, v = self.k_dense(inputs[1]), self.v_dense(inputs[2])
        if p_bias == "rotary":
            q, k = apply_rotary_position_embeddings(ops.cast(position, q.dtype), q, k)
        a = ops.einsum("bmd,bnd->bmn", q, k)  # (batch, Sq, Sk)
        if self.attention_scale:
            a = a / math.sqrt(self.key_size)
        weights = self._normalize(a, key_mask, bias, training)
        return self.o_dense(u * ops.einsum("bmn,bnd->bmd", weights, v))

    def compute_output_spec(self, inputs, mask=None, a_bias=None, p_bias=None, training=None):
        self._check_call(inputs, a_bias, p_bias)
        x = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
        return keras.KerasTensor(x.shape, dtype=self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return mask[0] if isinstance(mask, (list, tuple)) else mask

    def get_config(self):
        return {**super().get_config(), "units": self.units, "key_size": self.key_size,
                "activation": serialized_activation(self.activation), "use_bias": self.use_bias,
                "normalization": self.normalization, "self_attention": self.self_attention,
                "attention_scale": self.attention_scale, "attention_dropout": self.attention_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}
