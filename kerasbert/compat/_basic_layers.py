"""bert4keras's small layers on Keras 3: the `Layer` base, the masked poolings, `Embedding` with its
``mode="dense"`` output, `ScaleOffset`, `Concatenate1D`, `BatchSplit`, `BatchConcat` and `FeedForward`, with
bert4keras 0.11.5's arguments, weights (in its order) and masks; and its `integerize_shape` decorator.

Each takes its Keras masks as bert4keras's do: a layer that passes a mask on passes the mask of its (first) input;
`GlobalMaxPooling1D` and `GlobalAveragePooling1D` reduce over the real steps only. bert4keras's ``recompute_grad``
(gradient checkpointing switched on by an environment variable) is not reproduced: the numbers are the same.
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.compat._functions import sequence_masking
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling.conditional_norm import ConditionalLayerNorm
from kerasbert.modeling.layers import TokenEmbedding, get_activation
from kerasbert.modeling.registry import register_compat
from kerasbert.modeling.t5_layers import first_kept


def integerize_shape(func):
    """Decorate a ``build(self, input_shape)`` so that it receives plain ints and None: each dimension object with a
    ``value`` (Keras 2's ``Dimension``) is replaced by that value, and nested shapes become lists.

    Keras 3's shapes are already tuples of ints and None; the decorator keeps bert4keras's layers that use it
    working unchanged.

    Example:
    >>> class Probe:
    ...     @integerize_shape
    ...     def build(self, input_shape):
    ...         return input_shape
    >>> Probe().build((None, 4))
    [None, 4]
    """
    def convert(item):
        if hasattr(item, "__iter__"):
            return [convert(i) for i in item]
        return item.value if hasattr(item, "value") else item

    def new_func(self, input_shape):
        return func(self, convert(input_shape))

    return new_func


def activation_of(value):
    """The activation function of ``value`` (a name or a function): kerasbert's `get_activation` for a name, where
    ``"gelu"`` is the GELU `kerasbert.compat.backend.set_gelu` chose (exact by default, as bert4keras)."""
    if not isinstance(value, str):
        return keras.activations.get(value)
    from kerasbert.compat.backend import gelu_version

    return get_activation("gelu_tanh" if value == "gelu" and gelu_version() == "tanh" else value)


def serialized_activation(value):
    """``value`` as a config holds it: a name as given, a function serialized."""
    return value if isinstance(value, str) or value is None else keras.activations.serialize(value)


@register_compat
class Layer(keras.layers.Layer):
    """Keras's ``Layer`` whose Keras masks pass on (``supports_masking``): the base of bert4keras's layers, and of
    a script's own layers written on it.

    Example:
    >>> x = keras.layers.Masking(0.0)(ops.array([[[1.0], [0.0]]]))
    >>> ops.convert_to_numpy(Layer()(x)._keras_mask).tolist()
    [[True, False]]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs):
        return inputs


@register_compat
class GlobalAveragePooling1D(keras.layers.GlobalAveragePooling1D):
    """Keras's ``GlobalAveragePooling1D``: the mean over the steps, over the real steps where the input has a Keras
    mask (bert4keras's redefinition; Keras 3's own already honours the mask).

    Example:
    >>> x = keras.layers.Masking(0.0)(ops.array([[[1.0], [3.0], [0.0]]]))
    >>> ops.convert_to_numpy(GlobalAveragePooling1D()(x)).tolist()
    [[2.0]]
    """


@register_compat
class GlobalMaxPooling1D(keras.layers.GlobalMaxPooling1D):
    """The maximum over the steps, over the real steps where the input has a Keras mask (padding set to ``-inf``
    first, as bert4keras's ``sequence_masking``); the output has no mask.

    Example:
    >>> x = keras.layers.Masking(0.0)(ops.array([[[-1.0], [-3.0], [0.0]]]))
    >>> ops.convert_to_numpy(GlobalMaxPooling1D()(x)).tolist()
    [[-1.0]]
    """

    def __init__(self, data_format: str = "channels_last", **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        axis = 1 if self.data_format == "channels_last" else 2
        inputs = sequence_masking(inputs, mask, -math.inf, axis)
        return ops.max(inputs, axis=axis, keepdims=self.keepdims)

    def compute_mask(self, inputs, mask=None):
        return None


@register_compat
class Embedding(TokenEmbedding):
    """Keras's ``Embedding`` that also projects back onto its vocabulary: ``layer(ids)`` looks up ``[B, S] ->
    [B, S, D]``; ``layer(x, mode="dense")`` is ``x · Eᵀ`` ``[B, S, D] -> [B, S, V]`` (the tied output layer).

    The arguments are Keras's ``Embedding``'s. With ``mask_zero=True`` the ids' mask is ``ids != 0`` except the
    first position, which is always real (T5's decoder starts with id 0, bert4keras's rule); without it there is
    none. ``mode="dense"`` passes the input's mask on. The lookup's gradient is dense (`lookup`).

    Example:
    >>> emb = Embedding(10, 4, mask_zero=True)
    >>> tuple(emb(ops.ones((2, 3), "int32")).shape), tuple(emb(ops.ones((2, 3, 4)), mode="dense").shape)
    ((2, 3, 4), (2, 3, 10))
    >>> ops.convert_to_numpy(emb.compute_mask(ops.array([[0, 5, 0]]))).tolist()
    [[True, True, False]]
    """

    MODES = ("embedding", "dense")

    def call(self, inputs, mode: str = "embedding"):
        return super().call(inputs, reverse=self._dense(mode))

    def _dense(self, mode) -> bool:
        if mode not in self.MODES:
            raise fail(ModelError, f"{self.name}: mode", " or ".join(map(repr, self.MODES)), repr(mode))
        return mode == "dense"

    def compute_output_spec(self, inputs, mode: str = "embedding"):
        return super().compute_output_spec(inputs, reverse=self._dense(mode))

    def compute_mask(self, inputs, mask=None):
        if len(inputs.shape) != 2:
            return mask
        return first_kept(inputs) if self.mask_zero else None


@register_compat
class ScaleOffset(ConditionalLayerNorm):
    """``x · γ + β`` over the last axis: ``γ`` ``[H]`` and ``β`` ``[H]`` learned where ``scale``/``offset`` is True, the
    constant itself where it is a number, nothing where it is False or None.

    Conditional (``conditional=True``): called on ``[x, cond]``, ``γ`` and ``β`` each gain ``Dense(H)(c)`` (no bias,
    zero kernels) of the condition ``c`` ``[B, C]`` (first through ``Dense(hidden_units, hidden_activation)`` when
    ``hidden_units``), broadcast over the steps. Weights in bert4keras's order: ``beta``, ``gamma``, then the
    sublayers ``hidden_dense``, ``beta_dense``, ``gamma_dense``. It is kerasbert's
    `kerasbert.modeling.conditional_norm.ConditionalLayerNorm` without its normalization (as bert4keras's
    ``LayerNormalization`` is its ``ScaleOffset`` after one).

    Args:
        scale: bool or float. learn γ (True), multiply by this constant, or not scale (False or None).
        offset: bool or float. learn β (True), add this constant, or not offset (False or None).
        conditional: bool. take ``[x, cond]`` and add the condition's projections to γ and β.
        hidden_units: int or None. the width of the condition's first projection; None: none.
        hidden_activation: str or function. that projection's activation.
        hidden_initializer: initializer of that projection's kernel.

    Example:
    >>> layer = ScaleOffset(offset=False)
    >>> out = layer(ops.ones((1, 2, 3)))
    >>> [w.name for w in layer.weights]
    ['gamma']
    """

    def __init__(self, scale=True, offset=True, conditional: bool = False, hidden_units: int | None = None,
                 hidden_activation="linear", hidden_initializer="glorot_uniform", **kwargs):
        super().__init__(zero_mean=False, unit_variance=False, scale=scale, offset=offset, conditional=conditional,
                         hidden_units=hidden_units, hidden_activation=hidden_activation,
                         hidden_initializer=hidden_initializer, **kwargs)

    def get_config(self):
        config = super().get_config()
        for key in ("epsilon", "zero_mean", "unit_variance"):  # fixed: no normalization
            config.pop(key)
        return config


@register_compat
class Concatenate1D(Layer):
    """Sequences joined along the steps: ``[[B, S1, H], [B, S2, H], ...] -> [B, S1+S2+..., H]``; the mask joins the
    inputs' masks, all True for an input without one (Keras's ``Concatenate`` fails on such a mix).

    Example:
    >>> a = keras.layers.Masking(0.0)(ops.array([[[1.0], [0.0]]]))
    >>> out = Concatenate1D()([a, ops.ones((1, 1, 1))])
    >>> tuple(out.shape), ops.convert_to_numpy(out._keras_mask).tolist()
    ((1, 3, 1), [[True, False, True]])
    """

    def call(self, inputs):
        return ops.concatenate(inputs, axis=1)

    def compute_mask(self, inputs, mask=None):
        if mask is None:
            return None
        masks = [ops.ones_like(x[..., 0], dtype="bool") if m is None else ops.cast(m, "bool")
                 for x, m in zip(inputs, mask, strict=True)]
        return ops.concatenate(masks, axis=1)

    def compute_output_shape(self, input_shape):
        lengths = [shape[1] for shape in input_shape]
        length = sum(lengths) if all(lengths) else None
        return (input_shape[0][0], length, input_shape[0][2])


@register_compat
class BatchSplit(Layer):
    """The batch cut into parts (bert4keras's hand-made data parallelism): ``parts`` equal parts of
    ``ceil(B / parts)`` rows (the last the rest), or parts in the proportions of a list; a list of inputs gives
    each input's parts in turn. Masks are cut alike.

    Args:
        parts: int or list of numbers. the number of parts, or their proportions.

    Example:
    >>> [tuple(x.shape) for x in BatchSplit(2)(ops.zeros((5, 3)))]
    [(3, 3), (2, 3)]
    >>> [tuple(x.shape) for x in BatchSplit([1, 3])(ops.zeros((8, 3)))]
    [(2, 3), (6, 3)]
    """

    def __init__(self, parts, **kwargs):
        super().__init__(**kwargs)
        self.parts = parts

    @property
    def count(self) -> int:
        return len(self.parts) if np.ndim(self.parts) > 0 else int(self.parts)

    def _bounds(self, batch):
        """The row each part but the last ends at."""
        if np.ndim(self.parts) > 0:
            total = float(sum(self.parts))
            batch = ops.cast(batch, "float64")
            return [ops.cast(p * batch / total, "int32") for p in np.cumsum(self.parts).astype("float64")][:-1]
        stride = ops.cast(ops.ceil(ops.cast(batch, "float64") / self.parts), "int32")
        return [stride * (i + 1) for i in range(self.count - 1)]

    def call(self, inputs):
        if isinstance(inputs, (list, tuple)):
            return [part for x in inputs for part in self.call(x)]
        bounds = [0, *self._bounds(ops.shape(inputs)[0]), ops.shape(inputs)[0]]
        return [inputs[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            return [part for m in mask for part in self.compute_mask(inputs, m)]
        if mask is None:
            return [None] * self.count
        return self.compute_output_spec(mask) if isinstance(mask, keras.KerasTensor) else self.call(mask)

    def compute_output_spec(self, inputs):
        if isinstance(inputs, (list, tuple)):
            return [spec for x in inputs for spec in self.compute_output_spec(x)]
        return [keras.KerasTensor((None, *inputs.shape[1:]), dtype=inputs.dtype) for _ in range(self.count)]

    def get_config(self):
        return {**super().get_config(), "parts": self.parts}


@register_compat
class BatchConcat(Layer):
    """Inputs joined along the batch (the inverse of `BatchSplit`); the masks joined where every input has one.

    Example:
    >>> tuple(BatchConcat()([ops.zeros((3, 2)), ops.zeros((2, 2))]).shape)
    (5, 2)
    """

    def call(self, inputs):
        return ops.concatenate(inputs, axis=0)

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)) and all(m is not None for m in mask):
            return ops.concatenate(mask, axis=0)
        return None

    def compute_output_shape(self, input_shape):
        return (None, *input_shape[0][1:])


@register_compat
class FeedForward(Layer):
    """bert4keras's feed-forward: ``Dense(H)(act(x·W0 + b0))`` for one activation; for a list of activations the
    gated form (Shazeer 2020) ``Dense(H)(act0(x·W0 + b0) ⊙ act1(x·W1 + b1) ⊙ ...)``.

    Sublayers ``i0_dense``, ``i1_dense``, ... ``[H, units]`` (one per activation) and ``o_dense`` ``[units, H]``,
    their weights in that order, as bert4keras's. kerasbert's own blocks are `kerasbert.modeling.blocks.FeedForward`
    and ``GatedFeedForward``.

    Args:
        units: int. the inner width.
        activation: str, function or a list of them. one: the plain form; a list: the gated form.
        use_bias: bool. biases on every projection.
        kernel_initializer: initializer of the kernels.

    Example:
    >>> layer = FeedForward(16, activation=["gelu", "linear"], use_bias=False)
    >>> tuple(layer(ops.ones((2, 5, 8))).shape), [w.path for w in layer.weights]
    ((2, 5, 8), ['feed_forward/i0_dense/kernel', 'feed_forward/i1_dense/kernel', 'feed_forward/o_dense/kernel'])
    """

    def __init__(self, units: int, activation="relu", use_bias: bool = True, kernel_initializer="glorot_uniform",
                 **kwargs):
        super().__init__(**kwargs)
        self.units, self.use_bias = units, use_bias
        self.activation = list(activation) if isinstance(activation, (list, tuple)) else [activation]
        if not self.activation:
            raise fail(ConfigError, "FeedForward: activation", "an activation or a non-empty list of them", "[]")
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, input_shape):
        hidden = input_shape[-1]
        # len(activation)·(H·I+I) + I·H+H parameters (no biases without use_bias)
        for i, activation in enumerate(self.activation):
            setattr(self, f"i{i}_dense", self._dense(f"i{i}_dense", self.units, hidden, activation_of(activation)))
        self.o_dense = self._dense("o_dense", hidden, self.units)

    def _dense(self, name: str, units: int, inputs: int, activation=None):
        layer = keras.layers.Dense(units, activation=activation, use_bias=self.use_bias, name=name,
                                   kernel_initializer=self.kernel_initializer, dtype=self.dtype_policy)
        layer.build((None, inputs))
        return layer

    def call(self, inputs):
        x = self.i0_dense(inputs)
        for i in range(1, len(self.activation)):
            x = x * getattr(self, f"i{i}_dense")(inputs)
        return self.o_dense(x)

    def compute_output_shape(self, input_shape):
        return input_shape

    def param_formula(self) -> Formula:
        gates = len(self.activation)
        symbols = f"{gates}·(H·I+I)+I·H+H" if self.use_bias else f"{gates}·H·I+I·H"
        return Formula.of(symbols, H=int(self.o_dense.units), I=self.units)

    def get_config(self):
        return {**super().get_config(), "units": self.units,
                "activation": [serialized_activation(a) for a in self.activation], "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}
