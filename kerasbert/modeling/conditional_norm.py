"""Conditional layer normalization: a norm whose γ and β are shifted by projections of a condition vector, so one
model generates under a condition (a class, an image's features), as bert4keras's ``layer_norm_cond`` builds it
(https://kexue.fm/archives/7124).

`ConditionalLayerNorm` normalizes ``x`` over its last axis (centred, divided by the root mean square, each where
asked) and applies ``γ + Dense(c)``, ``β + Dense(c)`` of the condition ``c`` ``[B, C]``, first mapped by
``Dense(hidden_units, hidden_activation)`` where asked; the condition's projections start at zero, so it begins as
the plain norm of the checkpoint. Its weights come in bert4keras's order (``beta``, ``gamma``, then
``hidden_dense``, ``beta_dense`` and ``gamma_dense``'s kernels), and ``gamma``/``beta`` keep the names the checkpoint
tables read. `Conditioned` binds a norm to its condition while an architecture wires it: the architecture calls
its norms on ``x`` alone and each runs on ``[x, condition]``.

Example:
>>> import numpy as np
>>> norm = ConditionalLayerNorm(epsilon=1e-12, conditional=True)
>>> x, c = ops.array([[[1.0, 3.0]]]), ops.array([[0.5, 0.5, 0.5]])
>>> ops.convert_to_numpy(norm([x, c])).round(4).tolist(), [w.name for w in norm.trainable_weights]
([[[-1.0, 1.0]]], ['beta', 'gamma', 'kernel', 'kernel'])
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.modeling.layers import get_activation
from kerasbert.modeling.registry import register


def _on(setting) -> bool:
    """Whether γ or β is applied: learned (True) or a constant (a number), not False or None."""
    return setting is not False and setting is not None


@register
class ConditionalLayerNorm(keras.layers.Layer):
    """``normalize(x)·(γ + Dense(c)) + (β + Dense(c))`` over the last axis; without ``conditional``, a layer norm.

    Args:
        epsilon: float. ε, added to the mean square.
        zero_mean: bool. subtract the mean first.
        unit_variance: bool. divide by ``√(mean(x²) + ε)``.
        scale: bool or float. learn γ (True), multiply by this constant, or not at all (False, None).
        offset: bool or float. learn β (True), add this constant, or not at all (False, None).
        conditional: bool. called on ``[x, c]``: γ and β gain zero-initialized projections of ``c``.
        hidden_units: int. the width of ``Dense(hidden_units, hidden_activation)`` mapping ``c`` first (None: none).
        hidden_activation: str. that Dense's activation.
        hidden_initializer: that Dense's kernel initializer.
    """

    def __init__(self, epsilon: float = 1e-12, zero_mean: bool = True, unit_variance: bool = True, scale=True,
                 offset=True, conditional: bool = False, hidden_units: int | None = None, hidden_activation="linear",
                 hidden_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.epsilon, self.zero_mean, self.unit_variance = epsilon, zero_mean, unit_variance
        self.scale, self.offset, self.conditional, self.hidden_units = scale, offset, conditional, hidden_units
        self.hidden_activation = hidden_activation
        self.hidden_initializer = keras.initializers.get(hidden_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        shape, condition = (input_shape[0], input_shape[1]) if self.conditional else (input_shape, None)
        width = shape[-1]
        if self.offset is True:
            self.beta = self.add_weight(shape=(width,), initializer="zeros", name="beta")
        if self.scale is True:
            self.gamma = self.add_weight(shape=(width,), initializer="ones", name="gamma")
        if not self.conditional:
            return
        if self.hidden_units:
            self.hidden_dense = self._dense("hidden_dense", self.hidden_units, condition, self.hidden_initializer,
                                            get_activation(self.hidden_activation))
            condition = (*condition[:-1], self.hidden_units)
        for name, setting in (("beta_dense", self.offset), ("gamma_dense", self.scale)):
            if _on(setting):
                setattr(self, name, self._dense(name, width, condition, "zeros"))

    def _dense(self, name: str, units: int, input_shape, initializer, activation=None) -> keras.layers.Dense:
        dense = keras.layers.Dense(units, activation=activation, use_bias=False, kernel_initializer=initializer,
                                   dtype=self.dtype_policy, name=name)
        dense.build(input_shape)
        return dense

    def call(self, inputs):
        x, condition = inputs if self.conditional else (inputs, None)
        y = ops.cast(x, "float32")  # the moments in float32 in mixed precision
        if self.zero_mean:
            y = y - ops.mean(y, axis=-1, keepdims=True)
        if self.unit_variance:
            y = y * ops.rsqrt(ops.mean(ops.square(y), axis=-1, keepdims=True) + self.epsilon)
        y = ops.cast(y, self.compute_dtype)
        if condition is not None:
            condition = self.hidden_dense(condition) if self.hidden_units else condition
            condition = ops.reshape(condition, (ops.shape(condition)[0], *[1] * (len(y.shape) - 2), -1))  # [B, 1, C]
        if _on(self.scale):
            y = y * self._term(self.gamma if self.scale is True else self.scale, "gamma_dense", condition)
        if _on(self.offset):
            y = y + self._term(self.beta if self.offset is True else self.offset, "beta_dense", condition)
        return y

    def _term(self, value, dense: str, condition):
        """γ or β, plus the condition's projection."""
        return value if condition is None else value + getattr(self, dense)(condition)

    def compute_output_shape(self, input_shape):
        return input_shape[0] if self.conditional else input_shape

    def compute_mask(self, inputs, mask=None):
        return mask[0] if self.conditional and mask is not None else mask

    def param_formula(self) -> Formula:
        return Formula.of(str(sum(int(ops.size(w)) for w in self.weights)))

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon, "zero_mean": self.zero_mean,
                "unit_variance": self.unit_variance, "scale": self.scale, "offset": self.offset,
                "conditional": self.conditional, "hidden_units": self.hidden_units,
                "hidden_activation": self.hidden_activation,
                "hidden_initializer": keras.initializers.serialize(self.hidden_initializer)}


class Conditioned:
    """A norm bound to its condition while an architecture wires it: ``bound(x)`` is ``layer([x, condition])``;
    every other attribute is the layer's.

    Args:
        layer: ConditionalLayerNorm. a conditional norm.
        condition: the condition tensor ``[B, C]``.
    """

    def __init__(self, layer: ConditionalLayerNorm, condition):
        self.layer, self.condition = layer, condition

    def __call__(self, x, **kwargs):
        return self.layer([x, self.condition], **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.layer, name)
