"""GlobalPointer span heads for NER, their loss and their F1, written with `keras.ops` only.

A GlobalPointer scores every span ``(start, end)`` of a sequence as one unit, per entity type: logits
``[B, heads, S, S]`` where ``[b, h, i, j] > 0`` predicts an entity of type ``h`` from token ``i`` to token ``j``
(Su 2021, https://kexue.fm/archives/8373; the efficient variant, https://kexue.fm/archives/8877). Spans
that start or end on padding, and when ``tril_mask`` spans that end before they start, are set to -inf, as
bert4keras 0.11.5 does; `multilabel_categorical_crossentropy` leaves the -inf logits out of the loss.

Symbols of the parameter formulas: H input width, A heads (entity types), D head size.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.registry import register


def rotary(x, base: float = 10000.0):
    """Rotary position embedding (RoPE, Su et al. 2021, https://arxiv.org/abs/2104.09864) over axis 1.

    ``x`` is ``[B, S, ..., D]``. Position ``p`` rotates each interleaved pair ``(x[2i], x[2i+1])`` by the angle
    ``p·base^(-2i/D)``, as bert4keras's ``apply_rotary_position_embeddings`` pairs them (not the two halves).

    Example:
    >>> x = ops.ones((1, 3, 2))
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(rotary(x))[0, 1]]  # (cos 1 - sin 1, sin 1 + cos 1)
    [-0.3012, 1.3818]
    """
    shape, dim = ops.shape(x), x.shape[-1]
    frequencies = ops.power(base, -2.0 * ops.arange(dim // 2, dtype="float32") / dim)  # (D/2,)
    angles = ops.arange(shape[1], dtype="float32")[:, None] * frequencies[None, :]  # (S, D/2)
    broadcast = (1, shape[1]) + (1,) * (len(x.shape) - 3) + (dim,)  # (1, S, 1.., D)
    cos = ops.reshape(ops.cast(ops.repeat(ops.cos(angles), 2, axis=-1), x.dtype), broadcast)
    sin = ops.reshape(ops.cast(ops.repeat(ops.sin(angles), 2, axis=-1), x.dtype), broadcast)
    turned = ops.reshape(ops.stack([-x[..., 1::2], x[..., ::2]], axis=-1), shape)  # (-x1, x0, -x3, x2, ...)
    return x * cos + turned * sin


def mask_spans(logits, padding=None, tril_mask: bool = True):
    """``logits`` ``[B, A, S, S]`` with -inf where a span starts or ends on padding or (``tril_mask``) ends
    before it starts.

    Args:
        logits: tensor. span logits ``[B, A, S, S]``.
        padding: tensor or None. ``[B, S]``, true (or nonzero) on real tokens.
        tril_mask: bool. mask the spans ``end < start`` as well.

    Example:
    >>> out = mask_spans(ops.zeros((1, 1, 3, 3)), ops.array([[1, 1, 0]]) > 0)
    >>> ops.convert_to_numpy(out)[0, 0].tolist()
    [[0.0, 0.0, -inf], [-inf, 0.0, -inf], [-inf, -inf, -inf]]
    """
    keep = None
    if padding is not None:
        padding = ops.cast(padding, "bool")
        keep = ops.logical_and(padding[:, None, :, None], padding[:, None, None, :])  # (batch, 1, start, end)
    if tril_mask:
        positions = ops.arange(ops.shape(logits)[-1])
        upper = ops.less_equal(positions[:, None], positions[None, :])[None, None]  # (1, 1, start, end)
        keep = upper if keep is None else ops.logical_and(keep, upper)
    return logits if keep is None else ops.where(keep, logits, -math.inf)


@register
class GlobalPointer(keras.layers.Layer):
    """Span logits ``[B, A, S, S]`` from ``[B, S, H]``, one head per entity type (bert4keras's ``GlobalPointer``).

    One dense projection gives each head a query and a key of size D per token (``kernel [H, A·2·D]``, each
    head's query then key side by side, as bert4keras lays them out); the logit of span ``(i, j)`` is
    ``q_i·k_j/√D``, after RoPE on both when ``RoPE``.

    The padding mask comes from the inputs ``[x, mask]`` (kerasbert passes its mask explicitly) and from the
    Keras mask on ``x`` (bert4keras relies on that one); with both, a token must be real in both.
    The output carries no Keras mask: the padding is already -inf in it.

    Args:
        heads: int. A, the number of entity types.
        head_size: int. D, the size of each query and key (even when ``RoPE``).
        RoPE: bool. rotate queries and keys by their positions (relative-position aware scores).
        use_bias: bool. give the projection a bias.
        tril_mask: bool. set the spans that end before they start to -inf.
        kernel_initializer: initializer of the projection kernel ("lecun_normal", as bert4keras).

    Example:
    >>> layer = GlobalPointer(heads=2, head_size=4)
    >>> x, mask = ops.ones((3, 5, 8)), ops.array([[1, 1, 1, 0, 0]] * 3) > 0
    >>> logits = layer([x, mask])
    >>> tuple(logits.shape), layer.param_formula().value == layer.count_params()
    ((3, 2, 5, 5), True)
    """

    def __init__(self, heads: int, head_size: int, RoPE: bool = True, use_bias: bool = True,  # noqa: N803
                 tril_mask: bool = True, kernel_initializer="lecun_normal", **kwargs):
        super().__init__(**kwargs)
        if RoPE and head_size % 2:
            raise fail(ModelError, self.name, "an even head_size with RoPE", f"head_size = {head_size}",
                       "RoPE rotates pairs of features")
        self.heads, self.head_size, self.RoPE = heads, head_size, RoPE
        self.use_bias, self.tril_mask = use_bias, tril_mask
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._make_projections()

    def _make_projections(self):
        self.dense = self._dense(self.heads * 2 * self.head_size, "dense")

    def _dense(self, units: int, name: str):
        return keras.layers.Dense(units, use_bias=self.use_bias, kernel_initializer=self.kernel_initializer,
                                  dtype=self.dtype_policy, name=name)

    def build(self, input_shape):
        # H·2·A·D (+2·A·D bias) parameters: a query and a key of size D per head
        self.dense.build(self._features_shape(input_shape))

    def param_formula(self) -> Formula:
        sizes = {"H": int(self.dense.kernel.shape[0]), "A": self.heads, "D": self.head_size}
        return Formula.of("H·2·A·D+2·A·D" if self.use_bias else "H·2·A·D", **sizes)

    def call(self, inputs, mask=None):
        x, padding = self._features_and_padding(inputs, mask)
        shape = ops.shape(x)
        projected = ops.reshape(self.dense(x), (shape[0], shape[1], self.heads, 2 * self.head_size))  # (b, s, A, 2D)
        q, k = projected[..., :self.head_size], projected[..., self.head_size:]  # (batch, seq, heads, D) each
        if self.RoPE:
            q, k = rotary(q), rotary(k)
        logits = ops.einsum("bmhd,bnhd->bhmn", q, k) / math.sqrt(self.head_size)  # (batch, heads, start, end)
        return mask_spans(logits, padding, self.tril_mask)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        shape = self._features_shape(input_shape)
        return (shape[0], self.heads, shape[1], shape[1])

    @staticmethod
    def _features_shape(input_shape):
        """The shape of ``x`` from the shape of ``x`` or of ``[x, mask]``."""
        nested = isinstance(input_shape, (list, tuple)) and isinstance(input_shape[0], (list, tuple))
        return tuple(input_shape[0] if nested else input_shape)

    @staticmethod
    def _features_and_padding(inputs, mask):
        """``x`` and its padding mask (or None), from ``x`` or ``[x, mask]`` and the Keras mask(s)."""
        explicit = None
        if isinstance(inputs, (list, tuple)):
            inputs, explicit = inputs
        keras_mask = mask[0] if isinstance(mask, (list, tuple)) else mask
        masks = [ops.cast(m, "bool") for m in (explicit, keras_mask) if m is not None]
        if not masks:
            return inputs, None
        return inputs, masks[0] if len(masks) == 1 else ops.logical_and(masks[0], masks[1])

    def get_config(self):
        return {
            **super().get_config(),
            "heads": self.heads,
            "head_size": self.head_size,
            "RoPE": self.RoPE,
            "use_bias": self.use_bias,
            "tril_mask": self.tril_mask,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@register
class EfficientGlobalPointer(GlobalPointer):
    """GlobalPointer whose heads share one query and key, each head adding its own start and end biases
    (bert4keras's ``EfficientGlobalPointer``): far fewer parameters for many entity types.

    ``p_dense [H, 2·D]`` gives the shared query (even features) and key (odd features); ``q_dense [2·D, 2·A]``
    reads that projection and gives, per head, an end bias (even outputs) and a start bias (odd outputs), each
    halved: ``logit[h, i, j] = q_i·k_j/√D + (e_h,j + s_h,i)/2``. Arguments and masking as `GlobalPointer`.

    Example:
    >>> layer = EfficientGlobalPointer(heads=2, head_size=4)
    >>> logits = layer(ops.ones((3, 5, 8)), mask=ops.array([[1, 1, 1, 0, 0]] * 3) > 0)
    >>> tuple(logits.shape), str(layer.param_formula()), layer.count_params()
    ((3, 2, 5, 5), 'H·2·D+2·D+2·D·2·A+2·A = 8·2·4+2·4+2·4·2·2+2·2', 108)
    """

    def _make_projections(self):
        self.p_dense = self._dense(2 * self.head_size, "p_dense")
        self.q_dense = self._dense(2 * self.heads, "q_dense")

    def build(self, input_shape):
        # H·2·D+2·D (shared query and key) + 2·D·2·A+2·A (start and end bias per head) parameters
        shape = self._features_shape(input_shape)
        self.p_dense.build(shape)
        self.q_dense.build((*shape[:-1], 2 * self.head_size))

    def param_formula(self) -> Formula:
        sizes = {"H": int(self.p_dense.kernel.shape[0]), "A": self.heads, "D": self.head_size}
        return Formula.of("H·2·D+2·D+2·D·2·A+2·A" if self.use_bias else "H·2·D+2·D·2·A", **sizes)

    def call(self, inputs, mask=None):
        x, padding = self._features_and_padding(inputs, mask)
        projected = self.p_dense(x)  # (batch, seq, 2D)
        q, k = projected[..., ::2], projected[..., 1::2]  # (batch, seq, D) each
        if self.RoPE:
            q, k = rotary(q), rotary(k)
        logits = ops.einsum("bmd,bnd->bmn", q, k) / math.sqrt(self.head_size)  # (batch, start, end)
        bias = ops.transpose(self.q_dense(projected), (0, 2, 1)) / 2  # (batch, 2·heads, seq)
        logits = logits[:, None] + bias[:, ::2, None, :] + bias[:, 1::2, :, None]  # (batch, heads, start, end)
        return mask_spans(logits, padding, self.tril_mask)


@register
def multilabel_categorical_crossentropy(y_true, y_pred):
    """``log(1 + Σ_neg e^s) + log(1 + Σ_pos e^-s)`` over the last axis (Su 2020, https://kexue.fm/archives/7359).

    ``y_true`` has ``y_pred``'s shape, 1 on the target classes (a probability in [0, 1] in general); ``y_pred``
    are raw scores, a class is predicted where its score is > 0. Scores of -inf (masked spans) count in neither
    sum. Computed in float32.

    Example:
    >>> loss = multilabel_categorical_crossentropy(ops.array([[1.0, 0.0]]), ops.array([[0.0, -math.inf]]))
    >>> round(float(loss[0]), 4)  # log(1 + e^0): the target class at score 0, the masked class ignored
    0.6931
    """
    y_true, y_pred = ops.cast(y_true, "float32"), ops.cast(y_pred, "float32")
    valid = ops.not_equal(y_pred, -math.inf)
    negatives = ops.where(valid, y_pred, -math.inf) + ops.log(1.0 - y_true)
    positives = ops.where(valid, -y_pred, -math.inf) + ops.log(y_true)
    zeros = ops.zeros_like(y_pred[..., :1])  # the 1 in log(1 + Σ): the threshold score 0
    negative_loss = ops.logsumexp(ops.concatenate([negatives, zeros], axis=-1), axis=-1)
    positive_loss = ops.logsumexp(ops.concatenate([positives, zeros], axis=-1), axis=-1)
    return negative_loss + positive_loss


def sparse_multilabel_categorical_crossentropy(y_true, y_pred, mask_zero: bool = False):
    """`multilabel_categorical_crossentropy` with the targets given by index (https://kexue.fm/archives/7359):
    ``log(1 + Σ_pos e^-s) + log(1 + Σ_neg e^s)``, the negatives' sum taken as all classes' minus the targets',
    as bert4keras 0.11.5's ``sparse_multilabel_categorical_crossentropy`` computes it (`kerasbert.compat.backend`
    answers with this one).

    Args:
        y_true: tensor. ``[..., num_positive]``, the target classes of each row (cast to int32 when not integers).
        y_pred: tensor. ``[..., num_classes]``, raw scores (a class is predicted where > 0).
        mask_zero: bool. class 0 pads ``y_true`` (a row with fewer targets) and counts as no target.

    Example:
    >>> loss = sparse_multilabel_categorical_crossentropy(ops.array([[0]]), ops.array([[0.0, -math.inf]]))
    >>> round(float(loss[0]), 4)
    0.6931
    """
    y_true = ops.convert_to_tensor(y_true)
    if not keras.backend.standardize_dtype(y_true.dtype).startswith(("int", "uint")):
        y_true = ops.cast(y_true, "int32")
    zeros = ops.zeros_like(y_pred[..., :1])
    y_pred = ops.concatenate([y_pred, zeros], axis=-1)  # the threshold class, score 0
    if mask_zero:
        y_pred = ops.concatenate([zeros + math.inf, y_pred[..., 1:]], axis=-1)  # padding: e^-inf in the positives
    y_pos_2 = ops.take_along_axis(y_pred, y_true, axis=-1)
    y_pos_1 = ops.concatenate([y_pos_2, zeros], axis=-1)
    if mask_zero:
        y_pred = ops.concatenate([zeros - math.inf, y_pred[..., 1:]], axis=-1)  # and e^-inf in the negatives
        y_pos_2 = ops.take_along_axis(y_pred, y_true, axis=-1)
    positive_loss = ops.logsumexp(-y_pos_1, axis=-1)
    all_loss = ops.logsumexp(y_pred, axis=-1)
    aux_loss = ops.clip(1 - ops.exp(ops.logsumexp(y_pos_2, axis=-1) - all_loss), keras.config.epsilon(), 1)
    return positive_loss + all_loss + ops.log(aux_loss)


@register
def global_pointer_crossentropy(y_true, y_pred):
    """The mean `multilabel_categorical_crossentropy` of each (example, head) over its S·S spans.

    Args:
        y_true: tensor. ``[B, A, S, S]``, 1 on the gold spans.
        y_pred: tensor. ``[B, A, S, S]``, GlobalPointer logits.

    Example:
    >>> y_pred = mask_spans(ops.zeros((1, 1, 2, 2)))
    >>> round(float(global_pointer_crossentropy(ops.array([[[[0.0, 1.0], [0.0, 0.0]]]]), y_pred)), 4)
    1.7918
    """
    shape = ops.shape(y_pred)
    flat = (-1, shape[-2] * shape[-1])  # (batch·heads, spans)
    return ops.mean(multilabel_categorical_crossentropy(ops.reshape(y_true, flat), ops.reshape(y_pred, flat)))


@register
def global_pointer_f1(y_true, y_pred):
    """Span F1 of one batch, ``2·|gold ∩ predicted| / (|gold| + |predicted|)``, a span predicted where its logit
    is > 0. The denominator is at least `keras.config.epsilon()`: 0, not NaN, when both sets are empty.

    Example:
    >>> y_true = ops.array([[[[0.0, 1.0], [0.0, 1.0]]]])
    >>> round(float(global_pointer_f1(y_true, ops.array([[[[-1.0, 2.0], [-1.0, -3.0]]]]))), 4)
    0.6667
    """
    y_true = ops.cast(y_true, "float32")
    y_pred = ops.cast(ops.greater(y_pred, 0), "float32")
    return 2 * ops.sum(y_true * y_pred) / ops.maximum(ops.sum(y_true + y_pred), keras.config.epsilon())


global_pointer_f1_score = global_pointer_f1  # the name bert4keras's GlobalPointer examples define


def span_target(codes, logits):
    """The dense target ``[B, A, S, S]`` of ``logits``, 1 on each gold span, from the span codes of
    `kerasbert.text.span_data.span_code`.

    A code is ``1 + type + A·(end·(end + 1)/2 + start)`` (``start <= end``, word-piece positions), 0 padding;
    it needs no sequence length to read, so a row of codes is as long as its row of tokens and pads as they do.

    Args:
        codes: tensor. ``[B, N]`` int span codes, 0 where there is none.
        logits: tensor. ``[B, A, S, S]``, for its shape.

    Example:
    >>> codes = ops.array([[1 + 1 + 2 * (1 * 2 // 2 + 0), 1 + 0 + 2 * (2 * 3 // 2 + 2), 0]])  # (1, 0, 1), (0, 2, 2)
    >>> target = ops.convert_to_numpy(span_target(codes, ops.zeros((1, 2, 3, 3))))
    >>> [tuple(int(i) for i in index) for index in zip(*target.nonzero())]
    [(0, 0, 2, 2), (0, 1, 0, 1)]
    """
    heads, length = logits.shape[1], ops.shape(logits)[2]
    codes = ops.cast(codes, "int32") - 1  # -1: padding
    real = ops.greater_equal(codes, 0)
    kinds, triangle_index = codes % heads, codes // heads
    positions = ops.arange(length, dtype="int32")
    triangle = positions * (positions + 1) // 2  # end·(end + 1)/2 of each end
    ends = ops.sum(ops.cast(ops.less_equal(triangle[1:], triangle_index[..., None]), "int32"), axis=-1)  # (b, n)
    starts = triangle_index - ops.take(triangle, ends)

    def one_hot(values, count):  # (b, n, count), all 0 on padding
        hits = ops.logical_and(ops.equal(values[..., None], ops.arange(count, dtype="int32")), real[..., None])
        return ops.cast(hits, "float32")

    spans = ops.einsum("bna,bni,bnj->baij", one_hot(kinds, heads), one_hot(starts, length), one_hot(ends, length))
    return ops.minimum(spans, 1.0)


@register
class SpanCodeLoss(keras.losses.Loss):
    """`global_pointer_crossentropy` with the gold spans given as span codes (`span_target`): per example, the
    mean over its A types of `multilabel_categorical_crossentropy` over the S·S spans.

    Args:
        name: str. the loss's name.
        reduction: str. Keras's reduction over the examples.

    Example:
    >>> logits = mask_spans(ops.zeros((1, 1, 2, 2)))
    >>> round(float(SpanCodeLoss()(ops.array([[1 + 0 + 1 * (1 + 0), 0]]), logits)), 4)  # gold (0, 1), as above
    1.7918
    """

    def __init__(self, name: str = "span_code_loss", reduction: str = "sum_over_batch_size", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)

    def call(self, y_true, y_pred):
        shape = ops.shape(y_pred)
        flat = (shape[0], y_pred.shape[1], shape[2] * shape[3])  # (batch, heads, spans)
        target = ops.reshape(span_target(y_true, y_pred), flat)
        return ops.mean(multilabel_categorical_crossentropy(target, ops.reshape(y_pred, flat)), axis=-1)


@register
def span_f1(y_true, y_pred):
    """`global_pointer_f1` with the gold spans given as span codes (`span_target`).

    Example:
    >>> round(float(span_f1(ops.array([[1 + 0 + 1 * (1 + 0)]]), ops.array([[[[-1.0, 2.0], [-1.0, 3.0]]]]))), 4)
    0.6667
    """
    return global_pointer_f1(span_target(y_true, y_pred), y_pred)


def unpair(index):
    """``(i, j)`` of each int of Szudzik's pairing, ``j·j + i`` where ``i < j`` else ``i·i + i + j``: every pair of
    positions one int, whatever the sequence's length (`kerasbert.text.relation_data.pair_code` writes them).

    Example:
    >>> [ops.convert_to_numpy(v).tolist() for v in unpair(ops.array([0, 1, 2, 3, 7]))]
    [[0, 0, 1, 1, 2], [0, 1, 0, 1, 1]]
    """
    index = ops.cast(index, "int32")
    root = ops.cast(ops.floor(ops.sqrt(ops.cast(index, "float32"))), "int32")
    root = root - ops.cast(root * root > index, "int32")  # the square root's rounding, either way
    root = root + ops.cast((root + 1) * (root + 1) <= index, "int32")
    rest = index - root * root
    return ops.where(rest < root, rest, root), ops.where(rest < root, root, rest - root)


def pair_targets(codes, first: int, heads: int, kinds: int, length):
    """The sparse targets ``[B, heads, N]`` of pointers ``first..first + heads - 1`` among ``kinds``, each a flat span
    index ``i·length + j``, 0 (no target, with ``mask_zero``) where a code is another pointer's or padding.

    A code is ``1 + kind + kinds·pair(i, j)`` (`unpair`), 0 padding: one int row per example holds the targets of
    every pointer, as long as its row of tokens.

    Example:
    >>> codes = ops.array([[1 + 1 + 2 * 1, 1 + 0 + 2 * 3, 0]])  # kind 1 at (0, 1), kind 0 at (1, 1)
    >>> ops.convert_to_numpy(pair_targets(codes, 0, 2, 2, 3)).tolist()
    [[[0, 4, 0], [1, 0, 0]]]
    """
    codes = ops.cast(codes, "int32") - 1  # -1: padding
    kind = codes % kinds - first
    i, j = unpair(codes // kinds)
    hit = (kind[:, None, :] == ops.arange(heads, dtype="int32")[None, :, None]) & (codes >= 0)[:, None, :]
    return ops.where(hit, (i * ops.cast(length, "int32") + j)[:, None, :], 0)


@register
class PairCodeLoss(keras.losses.Loss):
    """GPLinker's loss of one pointer (bert4keras's relation example's ``globalpointer_crossentropy``): per example,
    the sum over its heads of `sparse_multilabel_categorical_crossentropy` (``mask_zero``) over the S·S spans, the
    targets given as pair codes (`pair_targets`).

    Args:
        first: int. the pointer's first kind among the codes' ``kinds``.
        heads: int. the pointer's heads (its kinds ``first..first + heads - 1``).
        kinds: int. every pointer's heads, together.
        name: str. the loss's name.
        reduction: str. Keras's reduction over the examples (their mean, as the example's).

    Example:
    >>> logits = mask_spans(ops.zeros((1, 1, 2, 2)))
    >>> round(float(PairCodeLoss(0, 1, 1)(ops.array([[1 + 1, 0]]), logits)), 4)  # gold (0, 1); (0, 0) masked
    1.3863
    """

    def __init__(self, first: int, heads: int, kinds: int, name: str = "pair_code_loss",
                 reduction: str = "sum_over_batch_size", **kwargs):
        super().__init__(name=name, reduction=reduction, **kwargs)
        self.first, self.heads, self.kinds = first, heads, kinds

    def call(self, y_true, y_pred):
        shape = ops.shape(y_pred)
        flat = ops.reshape(ops.cast(y_pred, "float32"), (shape[0], self.heads, shape[2] * shape[3]))
        targets = pair_targets(y_true, self.first, self.heads, self.kinds, shape[2])
        return ops.sum(sparse_multilabel_categorical_crossentropy(targets, flat, mask_zero=True), axis=1)

    def get_config(self):
        return {**super().get_config(), "first": self.first, "heads": self.heads, "kinds": self.kinds}
