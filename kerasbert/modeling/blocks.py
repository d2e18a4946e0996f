"""The two blocks of a Transformer layer: multi-head self-attention and the position-wise feed-forward.

Each block's projections are `keras.layers.Dense` sublayers (`Projection`), so Keras's own tools reach them:
``model.quantize("int8")`` (or ``"float8"``) quantizes their kernels and ``enable_lora(rank)`` (on a block, or
on each projection) adds LoRA weights. A block names its weights as the checkpoint tables do
(`weights_by_key`: ``qkv_kernel``, ``output_bias``, ...) and loads `.keras` files whose blocks kept those four
weights as their own (`load_own_variables`).

The math is written plainly with `keras.ops`; a step that has faster forms goes through one call of
`kerasbert.perf.kernels` with its plain form, and the kernel picks the form. Each block states its parameter
formula next to its `build`. Symbols: H hidden, I intermediate, A heads, d = H/A the head size.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.layers import Dropout, get_activation
from kerasbert.modeling.positions import rotate
from kerasbert.modeling.registry import register
from kerasbert.perf import kernels


@register
class Projection(keras.layers.Dense):
    """A block's projection: Keras's ``Dense`` with its math unchanged, whose weights its block may have loaded.

    Keras quantizes it as a ``Dense`` (``Dense.quantize`` refuses subclasses unless told their math is its
    own). A `.keras` file can keep a block's four weights as the block's own (a flat store of four
    variables); the block then assigns them here (its ``load_own_variables``) and this
    projection's own store in that file is empty.

    Example:
    >>> layer = FeedForward(units=16)
    >>> _ = layer(ops.ones((2, 5, 8)))
    >>> isinstance(layer.intermediate_dense, keras.layers.Dense), tuple(layer.intermediate_dense.kernel.shape)
    (True, (8, 16))
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loaded_by_block = False

    def load_own_variables(self, store):
        if self.loaded_by_block and not len(store.keys()):
            self.loaded_by_block = False
            return
        super().load_own_variables(store)

    def call(self, inputs, training=None):
        with kernels.autocast(self, training):  # Keras's autocast, or one keeping the gradients in bf16
            return super().call(inputs, training=training)

    def quantize(self, mode=None, type_check=True, config=None):
        super().quantize(mode, type_check=False, config=config)


class _ProjectedBlock(keras.layers.Layer):
    """What both blocks share: their `Projection` sublayers, their dtype policies, LoRA and weight keys.

    ``dtype`` may be a `keras.dtype_policies.DTypePolicyMap` whose keys are projection names (``qkv``): a block
    with quantized projections saves one, so that its projections are rebuilt quantized when it is loaded.
    """

    PROJECTIONS: dict[str, tuple[str, str]] = {}  # name: (fan-in, fan-out) in symbols, in the order of the weights

    def __init__(self, **kwargs):
        policy = keras.dtype_policies.get(kwargs.pop("dtype", None))
        is_map = isinstance(policy, keras.dtype_policies.DTypePolicyMap)
        super().__init__(dtype=policy.default_policy if is_map else policy, **kwargs)
        self.projection_policies = dict(policy.items()) if is_map else {}

    def _projection(self, name: str, units: int, inputs: int) -> Projection:
        """A built `Projection` ``[inputs, units]`` named ``name``, in the block's dtype policy or its saved one."""
        layer = Projection(units, use_bias=self.use_bias, kernel_initializer=self.kernel_initializer, name=name,
                           dtype=self.projection_policies.get(name, self.dtype_policy))
        layer.build((None, inputs))
        return layer

    @property
    def projections(self) -> dict[str, Projection]:
        """The projections by name, in the order of the block's weights (none before the block is built)."""
        return {name: getattr(self, f"{name}_dense") for name in self.PROJECTIONS} if self.built else {}

    def _formula(self, symbols: str, **sizes: int) -> Formula:
        """The parameter formula ``symbols`` of the float block, plus each projection's LoRA weights,
        ``rank·(fan-in + fan-out)``, and its int8 scales, one per output."""
        for name, layer in self.projections.items():
            fan_in, fan_out = self.PROJECTIONS[name]
            symbols += f"+{layer.lora_rank}·({fan_in}+{fan_out})" if layer.lora_enabled else ""
            symbols += f"+{fan_out}" if layer.quantization_mode == "int8" else ""
        return Formula.of(symbols, **sizes)

    def weights_by_key(self) -> dict[str, keras.Variable]:
        """Every weight by its key ``<projection>_<weight>``: ``qkv_kernel``, ``output_bias``, and under int8
        ``qkv_kernel_scale``, under LoRA ``qkv_lora_kernel_a`` (the keys of `kerasbert.weights.names`)."""
        return {f"{name}_{w.name}": w for name, layer in self.projections.items() for w in layer.weights}

    def checkpoint_weights(self) -> dict[str, keras.Variable]:
        """The float weights a checkpoint holds (`weights_by_key`'s kernels and biases), for loading and saving
        one; a ModelError where a projection is quantized or has LoRA, whose kernels a checkpoint cannot hold."""
        for name, layer in self.projections.items():
            if layer.quantization_mode or layer.lora_enabled:
                found = f"{layer.quantization_mode} quantization" if layer.quantization_mode else "LoRA weights"
                raise fail(ModelError, f"{self.name}'s {name} projection", "float kernels to read or write a "
                           "checkpoint", found, "load the checkpoint before quantize or enable_lora; save those "
                           "models as .keras")
        return self.weights_by_key()

    def enable_lora(self, rank: int, lora_alpha: float | None = None, a_initializer="he_uniform",
                    b_initializer="zeros") -> None:
        """LoRA weights of rank ``rank`` on every projection, whose kernel freezes (`keras.layers.Dense.enable_lora`).

        Saving merges them into the kernels, as Keras's ``Dense`` does; a loaded model has plain kernels.
        """
        self._check_built("enable_lora")
        for layer in self.projections.values():
            layer.enable_lora(rank, lora_alpha=lora_alpha, a_initializer=a_initializer, b_initializer=b_initializer)

    def quantize(self, mode=None, type_check=True, config=None):
        """Quantize every projection (`keras.layers.Dense.quantize`); ``model.quantize`` reaches them itself."""
        self._check_built("quantize")
        for layer in self.projections.values():
            layer.quantize(mode, type_check=type_check, config=config)

    def _check_built(self, what: str) -> None:
        if not self.built:
            raise fail(ModelError, self.name, f"a built block for {what}", "a block never called or built")

    def load_own_variables(self, store):
        """Nothing of its own in a file this block saved; a block's four weights in the flat store of a file
        that kept them as the block's own, assigned to its projections (their stores there are then empty)."""
        if not len(store.keys()):
            return
        weights = [w for layer in self.projections.values() for w in (layer.kernel, layer.bias) if w is not None]
        if len(store.keys()) != len(weights) or any(layer.lora_enabled or layer.quantization_mode
                                                    for layer in self.projections.values()):
            raise fail(ModelError, f"the stored weights of {self.name}",
                       f"{len(weights)} float weights for its {', '.join(self.PROJECTIONS)} projections",
                       f"{len(store.keys())} weights")
        for i, weight in enumerate(weights):
            weight.assign(store[str(i)])
        for layer in self.projections.values():
            layer.loaded_by_block = True

    def get_config(self):
        config = {**super().get_config(), "use_bias": self.use_bias}
        quantized = {name: layer.dtype_policy for name, layer in self.projections.items()
                     if layer.dtype_policy.name != self.dtype_policy.name}
        if quantized:
            config["dtype"] = keras.dtype_policies.serialize(
                keras.dtype_policies.DTypePolicyMap(default_policy=self.dtype_policy, policy_map=quantized))
        return config


def visible(mask, first_token: bool = False):
    """``mask`` as ``[B, 1, Q, S]`` over the scores: a ``[B, S]`` key mask (padding) for every query, or a
    ``[B, S, S]`` query-by-key mask (`kerasbert.modeling.masks`), its first row alone for ``first_token``."""
    if len(mask.shape) == 2:
        return mask[:, None, None, :]
    return mask[:, None, :1, :] if first_token else mask[:, None, :, :]


@register
class MultiHeadSelfAttention(_ProjectedBlock):
    """Multi-head self-attention over ``[x, mask]``: ``softmax(Q·Kᵀ/√d + mask)·V`` per head, then ``W_o``.

    Vaswani et al. 2017, eq. 1, with the keys a query may not see set to -inf as bert4keras does: padding keys
    (a ``[B, S]`` mask), or those of a ``[B, S, S]`` query-by-key mask (`kerasbert.modeling.masks`).
    Projections: ``qkv`` ``[H, 3H]`` (Google's query, key and value kernels side by side) and ``output``
    ``[H, H]``, with biases unless ``use_bias=False``; weight keys ``qkv_kernel``, ``qkv_bias``, ``output_kernel``,
    ``output_bias``.

    With ``positions``, a third input carries the positions (`kerasbert.modeling.positions`): ``"relative"``
    (NEZHA) adds ``q_i·R[i, j]`` to the scores before the scale and ``Σⱼ p_ij·R[i, j]`` to the context;
    ``"rotary"`` (RoFormer) turns q and k by their positions before the scores.

    Called with ``first_token=True`` it attends from position 0 (``[CLS]``) alone, over every key, and
    returns ``[B, H]``, equal to ``layer([x, mask])[:, 0]``: a head that reads only ``[CLS]`` runs the last
    block that way (`kerasbert.modeling.heads.cls`). Its steps, `qkv`, `attend` and `merge`, are public: a decoder
    that keeps earlier keys and values runs them on one new position (`kerasbert.generation.cache`).

    Args:
        num_heads: int. A, the number of heads; must divide the input width H.
        dropout: float. dropout on the attention probabilities.
        kernel_initializer: initializer of both kernels.
        positions: str or None. ``"relative"`` or ``"rotary"``: the kind of the third input; None: two inputs.
        use_bias: bool. biases on both projections.

    Example:
    >>> layer = MultiHeadSelfAttention(num_heads=2)
    >>> x, mask = ops.ones((2, 5, 8)), ops.array([[1, 1, 1, 0, 0]] * 2) > 0
    >>> tuple(layer([x, mask]).shape), tuple(layer([x, mask], first_token=True).shape)
    ((2, 5, 8), (2, 8))
    >>> sorted(layer.weights_by_key())
    ['output_bias', 'output_kernel', 'qkv_bias', 'qkv_kernel']
    """

    PROJECTIONS = {"qkv": ("H", "3·H"), "output": ("H", "H")}

    def __init__(self, num_heads: int, dropout: float = 0.0, kernel_initializer="glorot_uniform",
                 positions: str | None = None, use_bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        if positions not in (None, "relative", "rotary"):
            raise fail(ModelError, "positions", 'None, "relative" or "rotary"', repr(positions))
        self.num_heads = num_heads
        self.dropout = dropout
        self.positions, self.use_bias = positions, use_bias
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
        self.qkv_dense = self._projection("qkv", 3 * hidden, hidden)
        self.output_dense = self._projection("output", hidden, hidden)

    qkv_kernel = property(lambda self: self.qkv_dense.kernel, doc="``[H, 3H]``, Q, K and V side by side.")
    qkv_bias = property(lambda self: self.qkv_dense.bias, doc="``[3H]``.")
    output_kernel = property(lambda self: self.output_dense.kernel, doc="``[H, H]``.")
    output_bias = property(lambda self: self.output_dense.bias, doc="``[H]``.")

    def param_formula(self) -> Formula:
        return self._formula("4·(H·H+H)" if self.use_bias else "4·H·H", H=int(self.output_kernel.shape[-1]))

    def activation_elements(self, batch: int, seq: int, queries: int | None = None) -> int:
        """Tensors inside the layer kept for backprop: q B·Q·H, k and v B·S·2H, scores and probs 2·B·A·Q·S,
        context B·Q·H, for Q queries (S; 1 for the ``first_token=True`` call)."""
        hidden, queries = int(self.output_kernel.shape[-1]), seq if queries is None else queries
        return batch * hidden * (2 * queries + 2 * seq) + 2 * batch * self.num_heads * queries * seq

    def call(self, inputs, training=None, first_token: bool = False):
        x, key_mask = inputs[:2]
        q, k, v = self._first_token_qkv(x) if first_token else self.qkv(x)  # each (batch, heads, seq or 1, d)
        relative = None  # NEZHA's R of the queries: (seq or 1, seq, d)
        if self.positions == "relative":
            relative = inputs[2][:1] if first_token else inputs[2]
        if self.positions == "rotary":
            q, k = rotate(q, inputs[2][:, :1] if first_token else inputs[2]), rotate(k, inputs[2])
        context = self.attend(q, k, v, visible(key_mask, first_token), relative, training)  # (batch, heads, seq|1, d)
        if first_token:
            return self.output_dense(ops.reshape(context, (ops.shape(x)[0], self.num_heads * self.head_size)))
        return self.merge(context)

    def attend(self, q, k, v, seen, relative=None, training=None):
        """The attention's core, ``softmax(Q·Kᵀ/√d + mask)·V`` per head: what `call` and a decoder that keeps
        earlier keys and values (`kerasbert.generation`) share.

        Args:
            q: ``[B, A, Q, d]`` queries.
            k: ``[B, A, K, d]`` keys.
            v: ``[B, A, K, d]`` values.
            seen: bool, broadcast to ``[B, 1, Q, K]``: False where a query may not see a key (`visible`).
            relative: NEZHA's ``R``, ``[Q, K, d]`` for every row or ``[B, Q, K, d]`` per row; None without.
            training: bool. dropout on the probabilities.

        Returns:
            ``[B, A, Q, d]``, each query's context.

        Example:
        >>> layer = MultiHeadSelfAttention(num_heads=2)
        >>> _ = layer([ops.ones((1, 3, 8)), ops.ones((1, 3)) > 0])
        >>> q = k = v = ops.ones((1, 2, 3, 4))
        >>> tuple(layer.attend(q, k, v, ops.array([[[[True, True, False]]]])).shape)
        (1, 2, 3, 4)
        """
        hidden = self.num_heads * self.head_size
        per_row = relative is not None and len(relative.shape) == 4  # (batch, Q, K, d): positions differ by row
        scores = kernels.scores(q, k, seen, relative, self._scores)  # (batch, heads, Q, K), float32
        probs = ops.cast(ops.softmax(scores, axis=-1), q.dtype)  # the softmax in float32 in mixed precision
        probs = self.dropout_layer(probs, training=training, width=hidden)
        context = ops.einsum("bhqk,bhkd->bhqd", probs, v)  # (batch, heads, Q, d)
        if relative is not None:
            context = context + ops.einsum("bhqk,bqkd->bhqd" if per_row else "bhqk,qkd->bhqd", probs, relative)
        return context

    def _scores(self, q, k, seen, relative):
        """``Q·Kᵀ/√d`` (plus NEZHA's ``q_i·R[i, j]``) in float32, ``-inf`` where a query may not see a key."""
        scores = ops.einsum("bhqd,bhkd->bhqk", q, k)  # (batch, heads, Q, K)
        if relative is not None:
            per_row = len(relative.shape) == 4  # (batch, Q, K, d): positions differ by row
            scores = scores + ops.einsum("bhqd,bqkd->bhqk" if per_row else "bhqd,qkd->bhqk", q, relative)
        return ops.where(seen, ops.cast(scores / math.sqrt(self.head_size), "float32"), -math.inf)

    def merge(self, context):
        """The heads' contexts ``[B, A, Q, d]`` side by side, through the output projection: ``[B, Q, H]``."""
        batch, length = ops.shape(context)[0], ops.shape(context)[2]
        context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (batch, length, self.num_heads * self.head_size))
        return kernels.project(self.output_dense, context)

    def qkv(self, x):
        """Q, K and V of every position of ``x`` ``[B, S, H]``, each ``[B, A, S, d]`` (before any rotation)."""
        projected = kernels.project(self.qkv_dense, x)  # (batch, seq, 3H)
        return ops.unstack(self._heads_first(projected, 3, ops.shape(x)[0]), axis=0)

    def _first_token_qkv(self, x):
        """``[CLS]``'s query ``[B, A, 1, d]``, and every position's keys and values: the query kernel's columns
        alone multiply ``[CLS]``. A quantized kernel is not split: there every position's query is computed
        and ``[CLS]``'s kept."""
        if self.qkv_dense.quantization_mode:
            q, k, v = self.qkv(x)
            return q[:, :, :1], k, v
        batch, hidden = ops.shape(x)[0], self.num_heads * self.head_size
        q_kernel, kv_kernel = ops.split(self.qkv_dense.kernel, [hidden], axis=-1)
        q = ops.matmul(x[:, 0], q_kernel)
        kv = kernels.project(lambda tokens: ops.matmul(tokens, kv_kernel), x)  # (batch, seq, 2H)
        if self.use_bias:
            q_bias, kv_bias = ops.split(self.qkv_dense.bias, [hidden], axis=-1)
            q, kv = q + q_bias, kv + kv_bias
        q = ops.reshape(q, (batch, self.num_heads, 1, self.head_size))
        k, v = ops.unstack(self._heads_first(kv, 2, batch), axis=0)
        return q, k, v

    def _heads_first(self, projected, parts: int, batch):
        """``[B, S, parts·H]`` (Q, K, V side by side) to ``[parts, B, A, S, d]`` in one
        transpose: the parts are then slices of one tensor (``ops.unstack``), and the attention's matmuls read
        them as they lie. A split into Q, K and V and a transpose of each would copy every element twice."""
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
            "positions": self.positions,
        }


@register
class FeedForward(_ProjectedBlock):
    """Position-wise feed-forward block ``act(x·W1 + b1)·W2 + b2``.

    Projections: ``intermediate`` ``[H, I]`` and ``output`` ``[I, H]``, with biases unless ``use_bias=False``;
    weight keys ``intermediate_kernel``, ``intermediate_bias``, ``output_kernel``, ``output_bias``.

    Args:
        units: int. I, the inner width.
        activation: str. gelu (erf form), gelu_tanh, relu, swish, or any Keras activation name.
        kernel_initializer: initializer of both kernels.
        use_bias: bool. biases on both projections.

    Example:
    >>> tuple(FeedForward(units=16)(ops.ones((2, 5, 8))).shape)
    (2, 5, 8)
    """

    PROJECTIONS = {"intermediate": ("H", "I"), "output": ("I", "H")}

    def __init__(self, units: int, activation: str = "gelu", kernel_initializer="glorot_uniform",
                 use_bias: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.units, self.use_bias = units, use_bias
        self.activation = activation
        self.activation_fn = get_activation(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        hidden = input_shape[-1]
        # H·I+I+I·H+H parameters
        self.intermediate_dense = self._projection("intermediate", self.units, hidden)
        self.output_dense = self._projection("output", hidden, self.units)

    intermediate_kernel = property(lambda self: self.intermediate_dense.kernel, doc="``[H, I]``.")
    intermediate_bias = property(lambda self: self.intermediate_dense.bias, doc="``[I]``.")
    output_kernel = property(lambda self: self.output_dense.kernel, doc="``[I, H]``.")
    output_bias = property(lambda self: self.output_dense.bias, doc="``[H]``.")

    def param_formula(self) -> Formula:
        return self._formula("H·I+I+I·H+H" if self.use_bias else "H·I+I·H", H=int(self.output_kernel.shape[-1]),
                             I=self.units)

    def activation_elements(self, batch: int, seq: int, queries: int | None = None) -> int:
        """Tensors inside the layer kept for backprop: the inner layer before and after the activation, 2·B·Q·I
        for Q positions (S; 1 on ``[B, H]``, the ``[CLS]``-only block)."""
        return 2 * batch * (seq if queries is None else queries) * self.units

    def call(self, inputs, training=None):
        return kernels.project(self.output_dense, self._inner(inputs, training))  # (batch, seq, H)

    def _inner(self, inputs, training):
        """The activated inner layer ``[B, S, I]``."""
        def activation(x):  # of the inner layer (batch, seq, I)
            return kernels.activation(self.activation, self.activation_fn, x, self.compute_dtype, training)

        return kernels.project(self.intermediate_dense, inputs, activation)  # MatMul + BiasAdd + GELU may fuse

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "activation": self.activation,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@register
class GatedFeedForward(FeedForward):
    """The gated feed-forward ``(act(x·W0) ⊙ x·W1)·W2`` (Shazeer 2020, GEGLU with ``gelu``): T5.1.1's, bert4keras's
    ``FeedForward`` with activations ``[act, "linear"]``.

    Projections: ``intermediate`` ``[H, I]`` (W0, activated), ``gate`` ``[H, I]`` (W1, linear) and ``output``
    ``[I, H]``; weight keys ``intermediate_kernel``, ``gate_kernel``, ``output_kernel`` (and ``*_bias`` with
    ``use_bias``). The arguments are `FeedForward`'s.

    Example:
    >>> layer = GatedFeedForward(units=16, use_bias=False)
    >>> tuple(layer(ops.ones((2, 5, 8))).shape), str(layer.param_formula())
    ((2, 5, 8), '2·H·I+I·H = 2·8·16+16·8')
    """

    PROJECTIONS = {"intermediate": ("H", "I"), "gate": ("H", "I"), "output": ("I", "H")}

    def build(self, input_shape):
        hidden = input_shape[-1]
        # 2·H·I+I·H parameters (2·(H·I+I)+I·H+H with biases), in the order of PROJECTIONS
        self.intermediate_dense = self._projection("intermediate", self.units, hidden)
        self.gate_dense = self._projection("gate", self.units, hidden)
        self.output_dense = self._projection("output", hidden, self.units)

    def param_formula(self) -> Formula:
        return self._formula("2·(H·I+I)+I·H+H" if self.use_bias else "2·H·I+I·H",
                             H=int(self.output_kernel.shape[-1]), I=self.units)

    def activation_elements(self, batch: int, seq: int, queries: int | None = None) -> int:
        """Tensors inside the layer kept for backprop: the activated inner layer before and after its activation
        and the gate, 3·B·Q·I for Q positions."""
        return 3 * batch * (seq if queries is None else queries) * self.units

    def _inner(self, inputs, training):
        """``act(x·W0) ⊙ x·W1`` ``[B, S, I]``."""
        return super()._inner(inputs, training) * kernels.project(self.gate_dense, inputs)
