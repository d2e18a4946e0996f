"""The custom layers of a BERT encoder around its blocks (embeddings, norm, dropout, masks), `keras.ops` only.

The attention and feed-forward blocks are in `kerasbert.modeling.blocks`.

Each layer states its own parameter formula next to its `build`, in symbols and in numbers
(`param_formula()` returns a :class:`Formula`); the annotated summary asks the layers and never
re-derives a count. Symbols: V vocab, H hidden, I intermediate, P positions, A heads, E the embedding size
where it differs from H (ALBERT, ELECTRA-small): a layer of that width is told so by ``width_symbol="E"``.
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.positions import checked_length
from kerasbert.modeling.registry import register
from kerasbert.perf import kernels

WIDTH_SYMBOLS = ("H", "E")  # a layer's width in its formula: the hidden size, or the embedding size E ≠ H


def first_kept(token_ids, pad_id: int = 0):
    """``token_ids != pad_id`` ``[B, S]`` with position 0 always True: the padding mask, as bert4keras's
    ``Embedding.compute_mask`` gives it. The padding id is 0 in BERT's vocabularies; a family whose vocabulary pads
    with another id (RoBERTa's ``<pad>`` is 1) passes its config's ``pad_token_id``. It is padding after the first
    position only: T5's decoder and the chess language model's rows start with id 0, and a row of padding alone
    keeps one key every query may see.

    Example:
    >>> ops.convert_to_numpy(first_kept(ops.array([[0, 5, 0], [2, 0, 0]]))).tolist()
    [[True, True, False], [True, False, False]]
    >>> ops.convert_to_numpy(first_kept(ops.array([[0, 5, 1]]), pad_id=1)).tolist()
    [[True, True, False]]
    """
    seen = ops.not_equal(token_ids, pad_id)
    return ops.concatenate([ops.ones_like(seen[:, :1]), seen[:, 1:]], axis=1)


class _Width:
    """What the layers of the embedding width share: ``width_symbol``, the symbol their formula gives their width
    (one of `WIDTH_SYMBOLS`; a ModelError for any other), kept in their config.

    Example:
    >>> str(LayerNorm(width_symbol="E", epsilon=1e-12)._width_formula("2", 4))
    '2·E = 2·4'
    """

    def __init__(self, *args, width_symbol: str = "H", **kwargs):
        super().__init__(*args, **kwargs)
        if width_symbol not in WIDTH_SYMBOLS:
            raise fail(ModelError, "width_symbol", " or ".join(map(repr, WIDTH_SYMBOLS)), repr(width_symbol),
                       '"E" for a layer of the embedding size where it differs from the hidden size')
        self.width_symbol = width_symbol

    def _width_formula(self, factor: str, width: int, **sizes: int) -> Formula:
        """``{factor}·{width symbol}``: ``V·E``, ``2·H``."""
        return Formula.of(f"{factor}·{self.width_symbol}", **sizes, **{self.width_symbol: width})

    def get_config(self):
        return {**super().get_config(), "width_symbol": self.width_symbol}


@register
def gelu_erf(x):
    """GELU, exact form ``0.5·x·(1+erf(x/√2))`` (Hendrycks & Gimpel 2016), as Google BERT and bert4keras."""
    return keras.activations.gelu(x, approximate=False)


@register
def gelu_tanh(x):
    """GELU, tanh approximation ``0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³)))`` (HF "gelu_new")."""
    return keras.activations.gelu(x, approximate=True)


def get_activation(name: str):
    """Map a canonical activation name (see `BertConfig.activation`) to a serializable function."""
    table = {"gelu": gelu_erf, "gelu_tanh": gelu_tanh, "relu": keras.activations.relu, "swish": keras.activations.silu}
    return table[name] if name in table else keras.activations.get(name)


def lookup(table, ids):
    """``table[ids]`` (``[N, H]``, ``[...]`` -> ``[..., H]``) whose gradient is the dense ``[N, H]`` sum per row.

    A plain lookup's gradient on TensorFlow is a ``tf.IndexedSlices`` with one row per token, repeated
    tokens repeated; Keras's Adam and AdamW square those rows one by one (``ops.square`` keeps the
    slices), so a token seen ``n`` times gets ``Σ g_i²`` as its second moment instead of ``(Σ g_i)²``. The
    dense gradient, summed per row first, gives every Keras optimizer Adam's own update (and bert4keras's:
    tf-keras sums repeated rows before its update). Adam updates every row of its moments each step, so the
    dense gradient adds no pass over the table.

    Example:
    >>> ops.convert_to_numpy(lookup(ops.array([[1.0], [2.0]]), ops.array([1, 1, 0]))).ravel().tolist()
    [2.0, 2.0, 1.0]
    """

    @ops.custom_gradient
    def gather(table, ids):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            rows = ops.reshape(upstream, (-1, ops.shape(table)[-1]))
            return ops.segment_sum(rows, ops.reshape(ids, (-1,)), num_segments=ops.shape(table)[0]), None

        return ops.take(table, ids, axis=0), grad

    # a tensor, not the variable: TensorFlow's custom gradient of a function that reads a variable needs more
    return gather(ops.copy(table), ops.cast(ids, "int32"))


@register
class TokenEmbedding(_Width, keras.layers.Embedding):
    """Word-piece embedding that can also project back onto the vocabulary (tied MLM output).

    ``layer(ids)`` looks up ``[B, S] -> [B, S, H]``; ``layer(x, reverse=True)`` computes
    ``x · Eᵀ`` (``[B, S, H] -> [B, S, V]``), as bert4keras's ``Embedding(mode='dense')``. Its arguments are
    Keras's ``Embedding``'s, and ``width_symbol`` (``"H"``, or ``"E"`` where the table is E wide, ALBERT's and
    ELECTRA-small's embedding size): the width's symbol in its formula, ``V·H`` or ``V·E``.

    Its output carries `first_kept` (``ids != 0``, the first position always kept) as its Keras mask (id 0 is
    ``[PAD]``), as bert4keras's token embedding (``mask_zero=True``) does: the layers after it pass the mask on, so
    a layer wired on any sequence output (a CRF, a masked pooling) sees the padding. The logits of ``reverse=True``
    carry none: kerasbert's MLM loss skips label 0, padding included, and returns one number per batch, which
    ``compile`` cannot weight by a ``[B, S]`` mask.

    Example:
    >>> emb = TokenEmbedding(100, 8)
    >>> tuple(emb(ops.ones((2, 5), "int32")).shape), tuple(emb(ops.ones((2, 5, 8)), reverse=True).shape)
    ((2, 5, 8), (2, 5, 100))
    >>> ops.convert_to_numpy(emb.compute_mask(ops.array([[5, 7, 0], [0, 7, 0]]))).tolist()
    [[True, True, False], [True, True, False]]
    >>> str(TokenEmbedding(100, 4, width_symbol="E").param_formula())
    'V·E = 100·4'
    """

    def __init__(self, *args, pad_id: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.supports_masking = True  # the padding mask, whatever mask_zero says (files saved without it too)
        self.pad_id = pad_id  # the id `first_kept` masks: 0, or the config's pad_token_id where the vocabulary says

    def get_config(self):
        return {**super().get_config(), **({"pad_id": self.pad_id} if self.pad_id else {})}

    def call(self, inputs, reverse: bool = False):
        if reverse:
            return ops.matmul(inputs, ops.transpose(ops.cast(self.embeddings, inputs.dtype)))
        return ops.cast(lookup(self.embeddings, inputs), self.compute_dtype)  # a dense gradient (see `lookup`)

    def compute_output_spec(self, inputs, reverse: bool = False):
        if reverse:
            return keras.KerasTensor((*inputs.shape[:-1], self.input_dim), dtype=self.compute_dtype)
        return super().compute_output_spec(inputs)

    def compute_mask(self, inputs, mask=None):
        return first_kept(inputs, self.pad_id) if len(inputs.shape) == 2 else None  # ids [B, S]; not MLM logits

    def param_formula(self) -> Formula:
        return self._width_formula("V", self.output_dim, V=self.input_dim)


@register
class SegmentEmbedding(_Width, keras.layers.Embedding):
    """Segment (token type) embedding ``E[ids]``: ``[B, S] -> [B, S, H]``, Keras's ``Embedding``.

    Looked up by `lookup` (a dense gradient, as ``TokenEmbedding``), through `kerasbert.perf.kernels.segments`,
    which may take a faster form with the same outputs. ``width_symbol`` is ``TokenEmbedding``'s: ``T·H``, or
    ``T·E`` for an E-wide table.

    Example:
    >>> layer = SegmentEmbedding(2, 4, embeddings_initializer="random_normal")
    >>> ids = ops.convert_to_tensor([[0, 1, 1]])
    >>> bool(ops.all(layer(ids) == ops.take(layer.embeddings, ids, axis=0)))
    True
    """

    def call(self, inputs):
        return kernels.segments(self.embeddings, inputs, self.compute_dtype, self._lookup)

    def _lookup(self, ids):
        return ops.cast(lookup(self.embeddings, ids), self.compute_dtype)

    def param_formula(self) -> Formula:
        return self._width_formula("T", self.output_dim, T=self.input_dim)


@register
class PositionEmbedding(_Width, keras.layers.Layer):
    """Adds a learned absolute position embedding: ``x + E[:S]`` for ``x`` of shape ``[B, S, H]``.

    With ``hierarchical`` α, positions beyond P are decomposed as ``p = P·i + j`` and embedded as
    ``α·U[i] + (1-α)·U[j]`` with ``U = (E - α·E[0]) / (1-α)`` (bert4keras's ``hierarchical_position``, Su 2020):
    the first P positions keep their trained embeddings, and a table of P rows covers P² positions.

    With ``offset`` k the positions read rows k, k+1, ...: ``x + E[k:k+S]`` (RoBERTa's and XLM-R's tables, whose
    first ``pad_token_id + 1`` rows Hugging Face's position ids never reach); the whole ``[P, H]`` table is kept,
    so a checkpoint saves back as it was, and P - k positions are left.

    Args:
        input_dim: int. P, the number of positions (max_position_embeddings).
        output_dim: int. H, the embedding width.
        embeddings_initializer: initializer of the ``[P, H]`` table.
        hierarchical: float or None. α (bert4keras's ``True`` is 0.4); None: at most P positions.
        width_symbol: str. the width's symbol in the formula: ``"H"`` (``P·H``), or ``"E"`` for an E-wide table.
        offset: int. the row of position 0 (0 < offset < P, without ``hierarchical``).

    Example:
    >>> layer = PositionEmbedding(16, 8)
    >>> tuple(layer(ops.zeros((2, 5, 8))).shape)
    (2, 5, 8)
    >>> PositionEmbedding(514, 8, offset=2).max_length
    512
    """

    def __init__(self, input_dim: int, output_dim: int, embeddings_initializer="zeros",
                 hierarchical: float | None = None, offset: int = 0, **kwargs):
        super().__init__(**kwargs)  # width_symbol among them (`_Width`)
        if offset and (hierarchical or not 0 < offset < input_dim):
            raise fail(ModelError, "PositionEmbedding: offset", f"0 < offset < {input_dim} without hierarchical "
                       "positions", f"offset {offset}" + (f", hierarchical {hierarchical}" if hierarchical else ""),
                       "a table read from a row past its first has no hierarchical positions")
        self.offset = offset
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.hierarchical = hierarchical
        self.supports_masking = True  # the padding mask passes, as on every layer of the sequence path

    @property
    def max_length(self) -> int:
        """The longest input: P (less ``offset``), or P² with ``hierarchical``."""
        return self.input_dim ** 2 if self.hierarchical else self.input_dim - self.offset

    def build(self, input_shape):
        # P·H parameters
        self.embeddings = self.add_weight(  # float32 in mixed precision: α·U[i] + (1-α)·U[j] is summed in float32
            shape=(self.input_dim, self.output_dim), initializer=self.embeddings_initializer, name="embeddings",
            autocast=False)

    def param_formula(self) -> Formula:
        return self._width_formula("P", self.output_dim, P=self.input_dim)

    def call(self, inputs, positions=None):
        if positions is not None:  # each row at positions of its own (a decoder's next token)
            return inputs + ops.cast(self.at(positions), inputs.dtype)
        inputs = checked_length(inputs, self.max_length, self.hierarchical)
        length = ops.shape(inputs)[1]  # of the checked input: the slices below run after the check
        if self.hierarchical:
            rows = (length - 1) // self.input_dim + 1  # U's rows that the positions below length read
            return inputs + ops.cast(self._hierarchical(ops.arange(length), rows), inputs.dtype)[None]
        positions = ops.slice(ops.convert_to_tensor(self.embeddings), (self.offset, 0), (length, self.output_dim))
        return inputs + ops.cast(positions, inputs.dtype)[None]

    def at(self, positions):
        """The embeddings of integer ``positions`` ``[...]``: ``[..., H]``, each below `max_length` (unchecked).

        Example:
        >>> layer = PositionEmbedding(4, 2, embeddings_initializer="random_normal", hierarchical=0.4)
        >>> sixth = layer(ops.zeros((1, 6, 2)))[0, 5]  # builds the table: positions beyond P = 4, hierarchical
        >>> bool(ops.all(ops.abs(layer.at(ops.array([5])) - sixth) < 1e-6))
        True
        """
        if self.hierarchical:
            return self._hierarchical(positions, self.input_dim)
        return ops.take(ops.convert_to_tensor(self.embeddings), positions + self.offset, axis=0)

    def _hierarchical(self, positions, upper: int):
        """``α·U[p // P] + (1-α)·U[p % P]`` for the ``positions`` p, reading ``U[i]`` among its first ``upper`` rows."""
        alpha, table = self.hierarchical, ops.convert_to_tensor(self.embeddings)
        table = (table - alpha * table[:1]) / (1 - alpha)  # (P, H)
        # the rows U[i] that p = P·i + j reads, sliced: beyond P² the slice fails, where XLA would clamp a gather
        rows = ops.slice(table, (0, 0), (upper, self.output_dim))
        return alpha * ops.take(rows, positions // self.input_dim, axis=0) + (1 - alpha) * ops.take(
            table, positions % self.input_dim, axis=0)

    def compute_output_shape(self, input_shape):
        return input_shape  # given, not traced: JAX cannot trace a slice of a symbolic length

    def get_config(self):
        return {
            **super().get_config(),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            "hierarchical": self.hierarchical,
            **({"offset": self.offset} if self.offset else {}),
        }


@register
class Add(keras.layers.Add):
    """Keras's ``Add`` whose Keras mask is that of its masked inputs (``Embedding-Token-Segment``).

    Keras's ``Add`` drops the mask when one input has none; the segment embedding has none (segment 0 is
    not padding), so the token embedding's padding mask would stop at the sum. Masks of the inputs that
    have one are combined with AND, as tf.keras's ``Add`` in bert4keras.

    Example:
    >>> a, b = ops.ones((1, 3, 2)), ops.ones((1, 3, 2))
    >>> ops.convert_to_numpy(Add().compute_mask([a, b], [ops.array([[True, True, False]]), None])).tolist()
    [[True, True, False]]
    """

    def compute_mask(self, inputs, mask=None):
        masks = [m for m in mask or () if m is not None]
        if not masks:
            return None
        return masks[0] if len(masks) == 1 else ops.all(ops.stack(masks), axis=0)

    def param_formula(self) -> Formula:
        return Formula.of("0")


@register
class PaddingMask(keras.layers.Layer):
    """`first_kept` (``token_ids != 0``, the first position always kept): the key mask every attention layer
    uses, computed once per batch.

    bert4keras masks exactly these keys (its token embedding has ``mask_zero=True`` and keeps the first position).

    Example:
    >>> ops.convert_to_numpy(PaddingMask()(ops.array([[5, 7, 0], [0, 7, 0]]))).tolist()
    [[True, True, False], [True, True, False]]

    Args:
        pad_id: int. the id that pads a row (`first_kept`): 0, or the config's ``pad_token_id``.
    """

    def __init__(self, pad_id: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = pad_id

    def call(self, token_ids):
        return first_kept(token_ids, self.pad_id)

    def get_config(self):
        return {**super().get_config(), **({"pad_id": self.pad_id} if self.pad_id else {})}

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_output_spec(self, token_ids):
        return keras.KerasTensor(token_ids.shape, dtype="bool")

    def param_formula(self) -> Formula:
        return Formula.of("0")


@register
class KerasMask(keras.layers.Layer):
    """``[x, mask] -> x`` with ``mask`` as its Keras mask, which the layers after it pass on.

    kerasbert computes the padding mask once and passes it explicitly; a softmax tagging head's output
    carries it as well, so that ``compile``'s loss and metrics average over real tokens only, as they do
    on bert4keras's masked outputs.

    Example:
    >>> inputs = [ops.ones((1, 3, 2)), ops.array([[1, 1, 0]]) > 0]
    >>> ops.convert_to_numpy(KerasMask().compute_mask(inputs)).tolist()
    [[True, True, False]]
    """

    def call(self, inputs):
        return ops.copy(inputs[0])  # a new tensor: the mask is set on the output, not on the shared input

    def compute_mask(self, inputs, mask=None):
        return ops.cast(inputs[1], "bool")

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(inputs[0].shape, dtype=inputs[0].dtype)

    def param_formula(self) -> Formula:
        return Formula.of("0")


@register
class TakeToken(keras.layers.Layer):
    """``x[:, index]``: the hidden state of one position (index 0 is ``[CLS]``).

    A registered layer rather than a ``Lambda`` so that a saved model loads in safe mode.

    Example:
    >>> tuple(TakeToken()(ops.zeros((2, 5, 8))).shape)
    (2, 8)
    """

    def __init__(self, index: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.index = index

    def call(self, inputs):
        return inputs[:, self.index]

    def compute_mask(self, inputs, mask=None):
        return None  # one position: the sequence's padding mask does not apply

    def compute_output_shape(self, input_shape):
        return (input_shape[0], *input_shape[2:])

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        return {**super().get_config(), "index": self.index}


@register
class Bias(keras.layers.Layer):
    """Adds a learned bias over the last axis (``MLM-Bias``: one logit offset per vocabulary entry).

    Example:
    >>> tuple(Bias()(ops.zeros((2, 5, 10))).shape)
    (2, 5, 10)
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, input_shape):
        # V parameters
        self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="bias")

    def call(self, inputs):
        return inputs + ops.cast(self.bias, inputs.dtype)

    def param_formula(self) -> Formula:
        return Formula.of("V", V=int(self.bias.shape[0]))


@register
class LayerNorm(_Width, keras.layers.LayerNormalization):
    """Keras's ``LayerNormalization``: ``(x-μ)/√(σ²+ε)·γ + β`` over the last axis (Ba et al. 2016).

    The same arguments, weights (``gamma [H]``, ``beta [H]``), config and math as the Keras layer, which it
    runs; a norm over the last axis with both weights goes through `kerasbert.perf.kernels.layer_norm`, which may
    take a faster form: the same numbers within float32 rounding.
    ``width_symbol`` names the width in its formula: ``2·H``, or ``2·E`` for a norm over the embedding size E.

    Example:
    >>> layer = LayerNorm(epsilon=1e-12)
    >>> x = ops.reshape(ops.arange(12, dtype="float32"), (2, 2, 3))
    >>> float(ops.max(ops.abs(layer(x) - keras.layers.LayerNormalization(epsilon=1e-12)(x)))) < 1e-6
    True
    """

    def call(self, inputs, training=None):
        if not self._last_axis_affine(inputs):
            return super().call(inputs)
        return kernels.layer_norm(inputs, self.gamma, self.beta, self.epsilon, self.compute_dtype, training,
                                  super().call)

    def _last_axis_affine(self, inputs) -> bool:
        """A norm over the last axis with both ``gamma`` and ``beta`` (the only one the kernel's variants compute)."""
        last = self.axis in ([-1], [len(inputs.shape) - 1])
        return last and self.center and self.scale and not self.rms_scaling

    def param_formula(self) -> Formula:
        width = int(self.gamma.shape[-1])
        if not self.center:  # γ alone (ModernBERT's norms, norm_bias false): H
            return Formula.of(self.width_symbol, **{self.width_symbol: width})
        return self._width_formula("2", width)


@register
class ScaleFreeNorm(keras.layers.Layer):
    """``x / √(mean(x²) + ε)`` over the last axis, with no weights: RoFormer-V2's norm (an RMS norm, Zhang &
    Sennrich 2019, without its gain).

    Args:
        epsilon: float. ε, added to the mean square.

    Example:
    >>> ops.convert_to_numpy(ScaleFreeNorm()(ops.array([[3.0, -3.0]]))).tolist()
    [[1.0, -1.0]]
    """

    def __init__(self, epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.supports_masking = True

    def call(self, inputs):
        x = ops.cast(inputs, "float32")  # the mean square in float32 in mixed precision
        x = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.epsilon)
        return ops.cast(x, self.compute_dtype)

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


@register
class Dropout(keras.layers.Dropout):
    """Keras's ``Dropout``: in training a fraction ``rate`` of elements zeroed, the rest scaled by
    ``1/(1-rate)``, the mask drawn from Keras's seeded random stream (the layer's ``seed``).

    The same arguments, config and random stream as the Keras layer, which it runs; in training it goes through
    `kerasbert.perf.kernels.dropout`, whose variant draws its masks from another random stream (the same rule).

    Call arguments: ``inputs``, ``training``, and ``width``: the width of the model, which decides the
    variant; the last axis of ``inputs`` when None (the attention passes its ``H`` for probabilities
    ``[B, A, S, S]``).

    Example:
    >>> y = Dropout(0.5, seed=1)(ops.ones((2, 768)), training=True)
    >>> sorted({float(v) for v in ops.convert_to_numpy(y).ravel()})
    [0.0, 2.0]
    """

    def call(self, inputs, training=False, width: int | None = None):
        if training and 0 < self.rate < 1 and self.noise_shape is None:
            return kernels.dropout(inputs, self.rate, self.seed_generator, width, self._keras_dropout)
        return super().call(inputs, training=training)

    def _keras_dropout(self, inputs):
        return super().call(inputs, training=True)
