"""The layers ModernBERT adds (Warner et al. 2024): rotary positions of a base θ, attention over a sliding window,
and the fused gated feed-forward.

    ThetaRotaryPositions      the sinusoids of positions 0..S-1 for a θ (160000 on global layers, 10000 on local
                              ones), with transformers' frequencies ``1 / θ^(2i/d)``, at most P positions
    WindowedSelfAttention     `kerasbert.modeling.blocks.MultiHeadSelfAttention` whose q and k turn by halves
                              (transformers' ``rotate_half``); a local layer's token sees the keys within ±window
    FusedGatedFeedForward     ``Wo(act(x·Wi[:, :I]) ⊙ x·Wi[:, I:])``: one ``Wi`` ``[H, 2I]``, input then gate

A local layer computes its scores chunk by chunk: the queries in chunks of ``window`` positions, each against the
keys of its own chunk and the two beside it, ``[B, A, S/w, w, 3w]`` instead of ``[B, A, S, S]``; the keys past the
window are masked as in the whole ``S×S`` form, so the numbers are the same.

Example:
>>> from keras import ops
>>> x = ops.ones((2, 9, 8))
>>> sinusoid = ThetaRotaryPositions(4, base=10000.0, max_length=16)(x)
>>> layer = WindowedSelfAttention(num_heads=2, window=2)
>>> tuple(layer([x, ops.ones((2, 9)) > 0, sinusoid]).shape), str(layer.param_formula())
((2, 9, 8), '4·(H·H+H) = 4·(8·8+8)')
"""

from __future__ import annotations

import math

from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention, visible
from kerasbert.modeling.positions import RotaryPositions, checked_length, rotate
from kerasbert.modeling.registry import register
from kerasbert.perf import kernels

MASKED = -1e30  # the score of a key a local query may not see: finite, so a window of padding alone stays finite
QUERY_BLOCK = 1024  # past this length a global layer attends this many queries at a time: [B, A, 1024, S] scores


@register
class ThetaRotaryPositions(RotaryPositions):
    """Rotary positions of base θ as transformers computes them (``inv_freq = 1 / θ^(2i/d)`` in float32), at most
    ``max_length`` positions: ``[B, S, H] -> [1, S, d]``, sin and cos interleaved as `RotaryPositions` gives them.

    Args:
        head_size: int. d, the width of one attention head (even).
        base: float. θ.
        max_length: int. P, the most positions (``max_position_embeddings``).

    Example:
    >>> layer = ThetaRotaryPositions(2, base=160000.0, max_length=8)
    >>> ops.convert_to_numpy(layer(ops.zeros((1, 2, 4))))[0].astype(float).round(4).tolist()
    [[0.0, 1.0], [0.8415, 0.5403]]
    """

    def __init__(self, head_size: int, base: float = 10000.0, max_length: int = 8192, **kwargs):
        super().__init__(head_size, **kwargs)
        self.base, self.max_length = float(base), max_length

    def call(self, inputs):
        inputs = checked_length(inputs, self.max_length)
        return self.at(ops.arange(ops.shape(inputs)[1])[None])

    def at(self, positions):
        """The sinusoids of ``positions`` ``[..., S]``: ``[..., S, d]``."""
        exponents = ops.arange(0, self.head_size, 2, dtype="float32") / self.head_size
        frequencies = 1.0 / ops.power(ops.convert_to_tensor(self.base, "float32"), exponents)  # (d/2,)
        angles = ops.cast(positions, "float32")[..., None] * frequencies
        pairs = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)  # (..., d/2, 2)
        return ops.cast(ops.reshape(pairs, (*ops.shape(angles)[:-1], self.head_size)), self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "base": self.base, "max_length": self.max_length}


@register
class WindowedSelfAttention(MultiHeadSelfAttention):
    """Self-attention over ``[x, padding, sinusoid]`` with q and k turned by their positions' halves (transformers'
    ``rotate_half``), over every key (``window`` None) or over the keys within ``±window`` of each query.

    ``padding`` is the ``[B, S]`` key mask (`kerasbert.modeling.layers.PaddingMask`), ``sinusoid`` ``[1, S, d]``
    (`ThetaRotaryPositions`). Projections, weights and ``first_token`` are `MultiHeadSelfAttention`'s.

    Args:
        num_heads: int. A.
        window: int or None. how far a query sees on each side (``local_attention / 2``); None: global.
        **kwargs: `MultiHeadSelfAttention`'s (``dropout``, ``kernel_initializer``, ``use_bias``, ...).

    Example:
    >>> x, keys = ops.ones((1, 5, 8)), ops.ones((1, 5)) > 0
    >>> layer = WindowedSelfAttention(num_heads=2, window=1)
    >>> tuple(layer([x, keys, ThetaRotaryPositions(4)(x)], first_token=True).shape)
    (1, 8)
    """

    def __init__(self, num_heads: int, window: int | None = None, **kwargs):
        super().__init__(num_heads, **kwargs)
        self.window = window

    def call(self, inputs, training=None, first_token: bool = False):
        x, padding, sinusoid = inputs
        q, k, v = self._first_token_qkv(x) if first_token else self.qkv(x)  # each (batch, heads, seq or 1, d)
        q = rotate(q, sinusoid[:, :1] if first_token else sinusoid, halves=True)
        k = rotate(k, sinusoid, halves=True)
        if self.window is not None and not first_token:
            context = self._windowed(q, k, v, padding, training)
        else:
            seen = visible(padding, first_token)
            if self.window is not None:  # [CLS]'s keys within the window
                seen = ops.logical_and(seen, ops.arange(ops.shape(k)[2]) <= self.window)
            context = self._global(q, k, v, seen, training)
        if first_token:
            return self.output_dense(ops.reshape(context, (ops.shape(x)[0], self.num_heads * self.head_size)))
        return self.merge(context)

    def _global(self, q, k, v, seen, training):
        """Every query's context over every key ``[B, A, Q, d]``: at once up to `QUERY_BLOCK` queries, past it
        `QUERY_BLOCK` queries at a time, one block after another; in training at once (the gradient keeps every
        block's scores anyway, and the blocks' slice update has no gradient outside XLA)."""
        length = q.shape[2]
        if training:
            return self.attend(q, k, v, seen, training=training)
        if isinstance(length, int):
            return self.attend(q, k, v, seen, training=training) if length <= QUERY_BLOCK else self._blocks(
                q, k, v, seen, training)
        return ops.cond(ops.shape(q)[2] > QUERY_BLOCK, lambda: self._blocks(q, k, v, seen, training),
                        lambda: self.attend(q, k, v, seen, training=training))

    def _blocks(self, q, k, v, seen, training):
        """`attend` on `QUERY_BLOCK` queries at a time, each block's ``[B, A, block, S]`` scores freed before the
        next block's are made: ``[B, A, S, d]``."""
        batch, length = ops.shape(q)[0], ops.shape(q)[2]
        blocks = (length + QUERY_BLOCK - 1) // QUERY_BLOCK
        q = ops.pad(q, [[0, 0], [0, 0], [0, blocks * QUERY_BLOCK - length], [0, 0]])
        size = (batch, self.num_heads, QUERY_BLOCK, self.head_size)

        def block(i, context):
            rows = ops.slice(q, (0, 0, i * QUERY_BLOCK, 0), size)
            return ops.slice_update(context, (0, 0, i * QUERY_BLOCK, 0), self.attend(rows, k, v, seen,
                                                                                      training=training))

        return ops.fori_loop(0, blocks, block, ops.zeros_like(q))[:, :, :length]

    def _windowed(self, q, k, v, padding, training):
        """Each query's context over the keys within ``±window``, chunk by chunk: ``[B, A, S, d]``."""
        w, batch, length = self.window, ops.shape(q)[0], ops.shape(q)[2]
        extra = (length + w - 1) // w * w - length  # padding of the last chunk

        def chunked(t, before, after):  # (batch, heads, seq, d) -> (batch, heads, chunks, w, d)
            t = ops.pad(t, [[0, 0], [0, 0], [before, after], [0, 0]])
            return ops.reshape(t, (batch, self.num_heads, -1, w, self.head_size))

        def beside(t, axis):  # chunks i-1, i and i+1 side by side on ``axis``
            return ops.concatenate([t[:, :, :-2], t[:, :, 1:-1], t[:, :, 2:]], axis=axis)

        q, k, v = chunked(q, 0, extra), beside(chunked(k, w, w + extra), 3), beside(chunked(v, w, w + extra), 3)
        keys = ops.pad(ops.cast(padding, "int32"), [[0, 0], [w, w + extra]])  # (batch, seq + 2w + extra)
        keys = beside(ops.reshape(keys, (batch, 1, -1, w)) > 0, 3)  # (batch, 1, chunks, 3w)
        offsets = ops.arange(3 * w)[None, :] - w - ops.arange(w)[:, None]  # (w, 3w): key minus query position
        seen = ops.logical_and(keys[:, :, :, None, :], ops.abs(offsets) <= w)  # (batch, 1, chunks, w, 3w)
        scores = ops.einsum("bhnqd,bhnkd->bhnqk", q, k)
        scores = ops.where(seen, ops.cast(scores / math.sqrt(self.head_size), "float32"), MASKED)
        probs = ops.cast(ops.softmax(scores, axis=-1), q.dtype)
        probs = self.dropout_layer(probs, training=training, width=self.num_heads * self.head_size)
        context = ops.einsum("bhnqk,bhnkd->bhnqd", probs, v)
        return ops.reshape(context, (batch, self.num_heads, -1, self.head_size))[:, :, :length]

    def activation_elements(self, batch: int, seq: int, queries: int | None = None) -> int:
        """`MultiHeadSelfAttention`'s, a local layer's scores and probabilities over 3·window keys a query."""
        queries = seq if queries is None else queries
        keys = seq if self.window is None or queries == 1 else min(seq, 3 * self.window)
        hidden = int(self.output_kernel.shape[-1])
        return batch * hidden * (2 * queries + 2 * seq) + 2 * batch * self.num_heads * queries * keys

    def get_config(self):
        return {**super().get_config(), "window": self.window}


@register
class FusedGatedFeedForward(FeedForward):
    """The gated feed-forward with one fused input projection, ModernBERT's MLP: ``x·Wi`` ``[B, S, 2I]`` split
    into input and gate, ``act(input) ⊙ gate``, then ``Wo``.

    Projections: ``intermediate`` ``[H, 2I]`` (``Wi``, input then gate) and ``output`` ``[I, H]`` (``Wo``); weight
    keys ``intermediate_kernel``, ``output_kernel`` (and ``*_bias`` with ``use_bias``). The arguments are
    `FeedForward`'s, ``units`` I.

    Example:
    >>> layer = FusedGatedFeedForward(units=16, use_bias=False)
    >>> tuple(layer(ops.ones((2, 5, 8))).shape), str(layer.param_formula())
    ((2, 5, 8), 'H·2·I+I·H = 8·2·16+16·8')
    """

    PROJECTIONS = {"intermediate": ("H", "2·I"), "output": ("I", "H")}

    def build(self, input_shape):
        hidden = input_shape[-1]
        # H·2·I+I·H parameters (H·2·I+2·I+I·H+H with biases)
        self.intermediate_dense = self._projection("intermediate", 2 * self.units, hidden)
        self.output_dense = self._projection("output", hidden, self.units)

    def param_formula(self) -> Formula:
        return self._formula("H·2·I+2·I+I·H+H" if self.use_bias else "H·2·I+I·H",
                             H=int(self.output_kernel.shape[-1]), I=self.units)

    def activation_elements(self, batch: int, seq: int, queries: int | None = None) -> int:
        """The fused projection ``2I``, the activated input and the product, 4·B·Q·I for Q positions."""
        return 4 * batch * (seq if queries is None else queries) * self.units

    def _inner(self, inputs, training):
        """``act(x·Wi[:, :I]) ⊙ x·Wi[:, I:]`` ``[B, S, I]``."""
        given, gate = ops.split(kernels.project(self.intermediate_dense, inputs), 2, axis=-1)
        return kernels.activation(self.activation, self.activation_fn, given, self.compute_dtype, training) * gate

