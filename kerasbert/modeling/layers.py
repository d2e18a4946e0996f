"""The custom layers of a BERT encoder, written with `keras.ops` only.

Each layer states its own parameter formula next to its `build`, in symbols and in numbers
(`param_formula()` returns a :class:`Formula`); the annotated summary asks the layers and never
re-derives a count. Symbols: V vocab, H hidden, I intermediate, P positions, A heads.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.registry import register
from kerasbert.perf.fused import (  # noqa: F401 (gelu_erf_composed: re-exported)
    dropout_pays,
    dropout_training,
    gelu_erf_composed,
    gelu_erf_training,
)
from kerasbert.perf.onednn import fuses_bf16_activation

HALF_DTYPES = ("bfloat16", "float16")  # the compute dtypes of Keras's mixed precision policies


def dense(x, kernel, bias):
    """``x·kernel + bias`` for a 2-D ``x`` [N, in], as ``ops.add(ops.matmul(x, kernel), bias)``.

    The layers flatten ``[B, S, H]`` to ``[B·S, H]`` around it, so TensorFlow's graph optimizer sees
    ``MatMul -> BiasAdd -> Gelu`` with nothing between (``ops.add`` of a vector is ``tf.nn.bias_add`` there; a
    3-D ``ops.matmul`` is a ``Tensordot`` that reshapes its product back before the bias and the GELU): its
    oneDNN kernels then run the matmul, the bias and the GELU as one kernel. The same numbers on every backend.

    Example:
    >>> tuple(dense(ops.ones((10, 8)), ops.ones((8, 3)), ops.zeros(3)).shape)
    (10, 3)
    """
    return ops.add(ops.matmul(x, kernel), bias)


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
class TokenEmbedding(keras.layers.Embedding):
    """Word-piece embedding that can also project back onto the vocabulary (tied MLM output).

    ``layer(ids)`` looks up ``[B, S] -> [B, S, H]``; ``layer(x, reverse=True)`` computes
    ``x · Eᵀ`` (``[B, S, H] -> [B, S, V]``), as bert4keras's ``Embedding(mode='dense')``.

    Its output carries ``ids != 0`` as its Keras mask (id 0 is ``[PAD]``), as bert4keras's token embedding
    (``mask_zero=True``): the layers after it pass the mask on, so a layer wired on any sequence output (a CRF, a
    masked pooling) sees the padding. The logits of ``reverse=True`` carry none: kerasbert's MLM loss skips label
    0, padding included, and returns one number per batch, which ``compile`` cannot weight by a ``[B, S]`` mask.

    Example:
    >>> emb = TokenEmbedding(100, 8)
    >>> tuple(emb(ops.ones((2, 5), "int32")).shape), tuple(emb(ops.ones((2, 5, 8)), reverse=True).shape)
    ((2, 5, 8), (2, 5, 100))
    >>> ops.convert_to_numpy(emb.compute_mask(ops.array([[5, 7, 0]]))).tolist()
    [[True, True, False]]
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.supports_masking = True  # whatever mask_zero says: a model saved before this change masks too

    def call(self, inputs, reverse: bool = False):
        if reverse:
            return ops.matmul(inputs, ops.transpose(ops.cast(self.embeddings, inputs.dtype)))
        return ops.cast(lookup(self.embeddings, inputs), self.compute_dtype)  # a dense gradient (see `lookup`)

    def compute_output_spec(self, inputs, reverse: bool = False):
        if reverse:
            return keras.KerasTensor((*inputs.shape[:-1], self.input_dim), dtype=self.compute_dtype)
        return super().compute_output_spec(inputs)

    def compute_mask(self, inputs, mask=None):
        return ops.not_equal(inputs, 0) if len(inputs.shape) == 2 else None  # ids [B, S]; not the MLM logits

    def param_formula(self) -> Formula:
        return Formula.of("V·H", V=self.input_dim, H=self.output_dim)


@register
class SegmentEmbedding(keras.layers.Embedding):
    """Segment (token type) embedding ``E[ids]``, looked up as ``Σ_t one_hot(ids)_t · E_t`` in float32.

    The same weights and outputs as ``keras.layers.Embedding`` (exactly: each sum has one non-zero term);
    what differs is the gradient. A lookup's gradient scatter-adds every token's row onto the T (= 2) rows
    of ``E``; under mixed precision that scatter is in bfloat16/float16, which a GPU adds with emulated
    atomics, thousands of tokens onto two rows, slowly enough to cost about half a BERT-base training step;
    the one-hot form's gradient is a float32 sum over the tokens. Tables of
    more than ``MAX_ONE_HOT`` rows are looked up by `lookup`, as ``TokenEmbedding`` does.

    Example:
    >>> layer = SegmentEmbedding(2, 4, embeddings_initializer="random_normal")
    >>> ids = ops.convert_to_tensor([[0, 1, 1]])
    >>> bool(ops.all(layer(ids) == ops.take(layer.embeddings, ids, axis=0)))
    True
    """

    MAX_ONE_HOT = 16

    def call(self, inputs):
        if self.input_dim > self.MAX_ONE_HOT:
            return ops.cast(lookup(self.embeddings, inputs), self.compute_dtype)
        one_hot = ops.one_hot(ops.cast(inputs, "int32"), self.input_dim, dtype="float32")  # [B, S, T]
        table = ops.cast(self.embeddings, "float32")  # [T, H]
        rows = ops.sum(one_hot[..., None] * table, axis=-2)  # [B, S, H]: a sum, not a matmul (TF32 on GPUs)
        return ops.cast(rows, self.compute_dtype)

    def param_formula(self) -> Formula:
        return Formula.of("T·H", T=self.input_dim, H=self.output_dim)


@register
class PositionEmbedding(keras.layers.Layer):
    """Adds a learned absolute position embedding: ``x + E[:S]`` for ``x`` of shape ``[B, S, H]``.

    Args:
        input_dim: int. P, the number of positions (max_position_embeddings).
        output_dim: int. H, the embedding width.
        embeddings_initializer: initializer of the ``[P, H]`` table.

    Example:
    >>> layer = PositionEmbedding(16, 8)
    >>> tuple(layer(ops.zeros((2, 5, 8))).shape)
    (2, 5, 8)
    """

    def __init__(self, input_dim: int, output_dim: int, embeddings_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.supports_masking = True  # the padding mask passes, as on every layer of the sequence path

    def build(self, input_shape):
        # P·H parameters
        self.embeddings = self.add_weight(
            shape=(self.input_dim, self.output_dim), initializer=self.embeddings_initializer, name="embeddings"
        )

    def param_formula(self) -> Formula:
        return Formula.of("P·H", P=self.input_dim, H=self.output_dim)

    def call(self, inputs):
        length = inputs.shape[1]
        if isinstance(length, int) and length > self.input_dim:  # JAX traces with symbolic lengths
            raise fail(ModelError, "Input-Token", f"at most {self.input_dim} tokens (max_position_embeddings)",
                       f"sequences of {length}", "truncate with maxlen when encoding")
        positions = ops.slice(ops.convert_to_tensor(self.embeddings), (0, 0), (ops.shape(inputs)[1], self.output_dim))
        return inputs + ops.cast(positions, inputs.dtype)[None]

    def compute_output_shape(self, input_shape):
        return input_shape  # given, not traced: JAX cannot trace a slice of a symbolic length

    def get_config(self):
        return {
            **super().get_config(),
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
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
    """``token_ids != 0``: the key mask every attention layer uses, computed once per batch.

    bert4keras masks exactly these keys (its token embedding has ``mask_zero=True``).

    Example:
    >>> ops.convert_to_numpy(PaddingMask()(ops.array([[5, 7, 0]]))).tolist()
    [[True, True, False]]
    """

    def call(self, token_ids):
        return ops.not_equal(token_ids, 0)

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
class LayerNorm(keras.layers.LayerNormalization):
    """Keras's ``LayerNormalization`` over the last axis, computed as ``(x-μ)·(γ/√(σ²+ε)) + β``.

    A drop-in for the Keras layer (same arguments, weights ``gamma [H]`` and ``beta [H]``, config, and numbers
    within float32 rounding; in float32 under mixed precision, as Keras): the centred ``x-μ`` is computed once
    and used for both the variance and the output, where ``ops.layer_normalization`` takes the moments,
    then forms ``x·(γ/σ) + (β-μ·γ/σ)`` with two more full-size products, so it is faster on TensorFlow. Other
    axes, ``center`` or
    ``scale`` off and ``rms_scaling`` run Keras's own code.

    Example:
    >>> layer = LayerNorm(epsilon=1e-12)
    >>> x = ops.reshape(ops.arange(12, dtype="float32"), (2, 2, 3))
    >>> float(ops.max(ops.abs(layer(x) - keras.layers.LayerNormalization(epsilon=1e-12)(x)))) < 1e-6
    True
    """

    def call(self, inputs):
        if self.axis not in ([-1], [len(inputs.shape) - 1]) or not (self.center and self.scale) or self.rms_scaling:
            return super().call(inputs)
        half = keras.backend.standardize_dtype(inputs.dtype) in HALF_DTYPES
        x = ops.cast(inputs, "float32") if half else inputs  # as Keras: float32 for half-precision inputs
        centred = ops.subtract(x, ops.mean(x, axis=-1, keepdims=True))
        variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)
        scale = ops.multiply(ops.rsqrt(ops.add(variance, self.epsilon)), ops.cast(self.gamma, x.dtype))
        return ops.cast(ops.add(ops.multiply(centred, scale), ops.cast(self.beta, x.dtype)), self.compute_dtype)

    def param_formula(self) -> Formula:
        return Formula.of("2·H", H=int(self.gamma.shape[-1]))


@register
class Dropout(keras.layers.Dropout):
    """Keras's ``Dropout`` (same arguments, config and rule: a fraction ``rate`` of elements zeroed in
    training, the rest scaled by ``1/(1-rate)``), whose training pass on TensorFlow's plain graph runs as
    one XLA kernel each way for models at least `kerasbert.perf.fused.MIN_DROPOUT_WIDTH` wide (BERT-base):
    `kerasbert.perf.fused.dropout_training`, faster than TensorFlow's dropout. There the masks come
    from kerasbert's counter hash (`kerasbert.perf.fused.random_bits`) instead of TensorFlow's Philox: for the
    same seed, another random stream from the same distribution. Elsewhere it is Keras's layer.

    Call arguments: ``inputs``, ``training``, and ``width``: the width of the model, which decides; the last
    axis of ``inputs`` when None (the attention passes its ``H`` for probabilities ``[B, A, S, S]``).

    Example:
    >>> y = Dropout(0.5, seed=1)(ops.ones((2, 768)), training=True)
    >>> sorted({float(v) for v in ops.convert_to_numpy(y).ravel()})
    [0.0, 2.0]
    """

    def call(self, inputs, training=False, width: int | None = None):
        if training and 0 < self.rate < 1 and self.noise_shape is None and dropout_pays(inputs, width):
            return dropout_training(inputs, self.rate, self.seed_generator.next(), width)
        return super().call(inputs, training=training)


@register
class MultiHeadSelfAttention(keras.layers.Layer):
    """Multi-head self-attention over ``[x, key_mask]`` with one fused Q/K/V projection.

    ``softmax(Q·Kᵀ/√d + mask)·V`` per head (Vaswani et al. 2017, eq. 1), padding keys set to -inf
    as bert4keras does. Weights: ``qkv_kernel [H, 3H]`` (Google's query, key and value kernels
    side by side), ``qkv_bias [3H]``, ``output_kernel [H, H]``, ``output_bias [H]``.

    How the scores are formed is chosen for TensorFlow with oneDNN (benchmarks/HISTORY.md): ``1/√d``
    multiplies Q, ``[B, A, S, d]``, not the scores, ``[B, A, S, S]`` (the same numbers for d = 64), and the
    padding keys' ``+inf`` is *subtracted* as a ``[B, 1, 1, S]`` penalty, faster than a broadcast ``where``.
    Not added as a ``-inf`` bias: TensorFlow's remapper then folds the scale and the add into the batch
    matmul as oneDNN post-ops, and the broadcast one makes that slower than the three apart.

    Called with ``first_token=True`` it attends from position 0 (``[CLS]``) alone, over every key, and
    returns ``[B, H]``, equal to ``layer([x, mask])[:, 0]``: a head that reads only ``[CLS]`` runs the last
    block that way (`kerasbert.modeling.heads.cls`).

    Args:
        num_heads: int. A, the number of heads; must divide the input width H.
        dropout: float. dropout on the attention probabilities.
        kernel_initializer: initializer of both kernels.

    Example:
    >>> layer = MultiHeadSelfAttention(num_heads=2)
    >>> x, mask = ops.ones((2, 5, 8)), ops.array([[1, 1, 1, 0, 0]] * 2) > 0
    >>> tuple(layer([x, mask]).shape), tuple(layer([x, mask], first_token=True).shape)
    ((2, 5, 8), (2, 8))
    """

    def __init__(self, num_heads: int, dropout: float = 0.0, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy)

    def compute_mask(self, inputs, mask=None):
        """The Keras mask of ``x`` passes on (the queries' padding); ``key_mask`` is an input, not a Keras mask.

        Keras does not tell this method about ``first_token=True``: there the ``[B, H]`` output keeps ``x``'s
        mask too, and the block's ``Add`` with `TakeToken`'s unmasked ``[CLS]`` drops it."""
        return mask[0] if isinstance(mask, (list, tuple)) else mask

    def build(self, input_shape):
        hidden = input_shape[0][-1]
        if hidden % self.num_heads:
            raise fail(ModelError, self.name, f"a width divisible by {self.num_heads} heads", str(hidden))
        self.head_size = hidden // self.num_heads
        # 4·(H·H+H) parameters: Q, K, V and output projections with biases
        add = self.add_weight
        self.qkv_kernel = add(shape=(hidden, 3 * hidden), initializer=self.kernel_initializer, name="qkv_kernel")
        self.qkv_bias = add(shape=(3 * hidden,), initializer="zeros", name="qkv_bias")
        self.output_kernel = add(shape=(hidden, hidden), initializer=self.kernel_initializer, name="output_kernel")
        self.output_bias = add(shape=(hidden,), initializer="zeros", name="output_bias")

    def param_formula(self) -> Formula:
        return Formula.of("4·(H·H+H)", H=int(self.output_bias.shape[0]))

    def activation_elements(self, batch: int, seq: int, queries: int | None = None) -> int:
        """Tensors inside the layer kept for backprop: q B·Q·H, k and v B·S·2H, scores and probs 2·B·A·Q·S,
        context B·Q·H, for Q queries (S; 1 for the ``first_token=True`` call)."""
        hidden, queries = int(self.output_bias.shape[0]), seq if queries is None else queries
        return batch * hidden * (2 * queries + 2 * seq) + 2 * batch * self.num_heads * queries * seq

    def call(self, inputs, training=None, first_token: bool = False):
        x, key_mask = inputs
        batch, length, hidden = ops.shape(x)[0], ops.shape(x)[1], self.num_heads * self.head_size
        flat = ops.reshape(x, (-1, hidden))  # (batch·seq, H)
        if first_token:  # [CLS]'s query alone (a head that reads only [CLS]): keys and values of every position
            q_kernel, kv_kernel = ops.split(self.qkv_kernel, [hidden], axis=-1)
            q_bias, kv_bias = ops.split(self.qkv_bias, [hidden], axis=-1)
            q = ops.reshape(dense(x[:, 0], q_kernel, q_bias), (batch, self.num_heads, 1, self.head_size))
            k, v = ops.unstack(self._heads_first(dense(flat, kv_kernel, kv_bias), 2, batch), axis=0)
        else:
            q, k, v = ops.unstack(self._heads_first(dense(flat, self.qkv_kernel, self.qkv_bias), 3, batch), axis=0)
        scores = ops.einsum("bhqd,bhkd->bhqk", q * (1 / math.sqrt(self.head_size)), k)  # (batch, heads, seq or 1, seq)
        penalty = ops.where(key_mask, 0.0, math.inf)[:, None, None, :]  # (batch, 1, 1, seq): +inf on padding keys
        probs = ops.softmax(ops.subtract(ops.cast(scores, "float32"), penalty), axis=-1)  # float32 in mixed precision
        probs = ops.cast(probs, x.dtype)
        probs = self.dropout_layer(probs, training=training, width=hidden)
        out = ops.einsum("bhqk,bhkd->bhqd", probs, v)  # (batch, heads, seq or 1, d)
        if first_token:
            return dense(ops.reshape(out, (batch, hidden)), self.output_kernel, self.output_bias)  # (batch, H)
        out = ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (-1, hidden))  # (batch·seq, H)
        return ops.reshape(dense(out, self.output_kernel, self.output_bias), (batch, length, hidden))

    def _heads_first(self, projected, parts: int, batch):
        """``[B·S, parts·H]`` (Q, K, V side by side) to ``[parts, B, A, S, d]`` in one transpose: the parts
        are then slices of one tensor (``ops.unstack``), and the attention's matmuls read them as they lie.
        A split into Q, K and V and a transpose of each would copy every element twice."""
        parts_last = ops.reshape(projected, (batch, -1, parts, self.num_heads, self.head_size))
        return ops.transpose(parts_last, (2, 0, 3, 1, 4))

    def compute_output_spec(self, inputs, training=None, first_token: bool = False):
        x = inputs[0]
        return keras.KerasTensor((x.shape[0], x.shape[-1]) if first_token else x.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "dropout": self.dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@register
class FeedForward(keras.layers.Layer):
    """Position-wise feed-forward block ``act(x·W1 + b1)·W2 + b2``.

    Weights: ``intermediate_kernel [H, I]``, ``intermediate_bias [I]``, ``output_kernel [I, H]``,
    ``output_bias [H]``.

    Args:
        units: int. I, the inner width.
        activation: str. gelu (erf form), gelu_tanh, relu, swish, or any Keras activation name.
        kernel_initializer: initializer of both kernels.

    Example:
    >>> tuple(FeedForward(units=16)(ops.ones((2, 5, 8))).shape)
    (2, 5, 8)
    """

    def __init__(self, units: int, activation: str = "gelu", kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.activation = activation
        self.activation_fn = get_activation(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        hidden, add, init = input_shape[-1], self.add_weight, self.kernel_initializer
        # H·I+I+I·H+H parameters
        self.intermediate_kernel = add(shape=(hidden, self.units), initializer=init, name="intermediate_kernel")
        self.intermediate_bias = add(shape=(self.units,), initializer="zeros", name="intermediate_bias")
        self.output_kernel = add(shape=(self.units, hidden), initializer=init, name="output_kernel")
        self.output_bias = add(shape=(hidden,), initializer="zeros", name="output_bias")

    def param_formula(self) -> Formula:
        return Formula.of("H·I+I+I·H+H", H=int(self.output_bias.shape[0]), I=self.units)

    def activation_elements(self, batch: int, seq: int, queries: int | None = None) -> int:
        """Tensors inside the layer kept for backprop: the inner layer before and after the activation, 2·B·Q·I
        for Q positions (S; 1 on ``[B, H]``, the ``[CLS]``-only block)."""
        return 2 * batch * (seq if queries is None else queries) * self.units

    def _activation_in_float32(self, training) -> bool:
        """Inference under mixed precision computes the activation in float32, rounded once: faster on a CPU,
        where TensorFlow runs erf/erfc on bf16 one element at a time. Not where oneDNN fuses a bf16 GELU into the matmul
        (`fuses_bf16_activation`), which computes it in float32 on the accumulator and rounds once, in one
        kernel. Not in training: the backward pass would keep its float32 intermediates."""
        if training or self.compute_dtype not in HALF_DTYPES:
            return False
        return not (self.compute_dtype == "bfloat16" and self.activation == "gelu" and fuses_bf16_activation())

    def call(self, inputs, training=None):
        activation = gelu_erf_training if training and self.activation == "gelu" else self.activation_fn
        x = dense(ops.reshape(inputs, (-1, inputs.shape[-1])), self.intermediate_kernel, self.intermediate_bias)
        if self._activation_in_float32(training):
            x = ops.cast(activation(ops.cast(x, "float32")), self.compute_dtype)
        else:
            x = activation(x)
        return ops.reshape(dense(x, self.output_kernel, self.output_bias), ops.shape(inputs))  # (batch, seq, H)

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "activation": self.activation,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@register
class MaskedMean(keras.layers.Layer):
    """Mean of ``x`` over the unmasked steps: ``[x [B, S, H], mask [B, S]] -> [B, H]``.

    The ``"mean"`` pooling of the classification head; padding (mask False) does not count.

    Example:
    >>> x, mask = ops.array([[[1.0], [3.0], [100.0]]]), ops.array([[True, True, False]])
    >>> ops.convert_to_numpy(MaskedMean()([x, mask])).tolist()
    [[2.0]]
    """

    def call(self, inputs):
        x, mask = inputs
        mask = ops.cast(mask, x.dtype)[..., None]  # (batch, seq, 1)
        return ops.sum(x * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)

    def compute_mask(self, inputs, mask=None):
        return None  # [B, H]: the sequence is reduced

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], input_shape[0][2])

    def param_formula(self) -> Formula:
        return Formula.of("0")
