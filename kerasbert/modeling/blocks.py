"""The two blocks of a Transformer layer: multi-head self-attention and the position-wise feed-forward.

Written with `keras.ops` only; each states its parameter formula next to its `build`. Symbols: H hidden,
I intermediate, A heads, d = H/A the head size.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.layers import HALF_DTYPES, Dropout, get_activation
from kerasbert.modeling.registry import register
from kerasbert.perf.fused import gelu_erf_training
from kerasbert.perf.onednn import fuses_bf16_activation


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
