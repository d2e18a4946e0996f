"""bert4keras's AdaFactor (Shazeer & Stern 2018) as a Keras 3 optimizer, step for step as bert4keras 0.11.5's.

Its rule differs from ``keras.optimizers.Adafactor``'s: epsilon1 is added to the squared gradient and again under
the square root, the update is clipped by its root mean square, an optional first moment (``beta1``) averages
the clipped update, and the parameter scale multiplies after that average.
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert.compat._optimizer_mixins import dense_gradient, matches, string_list, variable_path
from kerasbert.errors import ConfigError, fail
from kerasbert.internals import variable_index
from kerasbert.modeling.registry import register


def _rms(x):
    """Root mean square over every element."""
    return ops.sqrt(ops.mean(ops.square(x)))


@register
class AdaFactorBase(keras.optimizers.Optimizer):
    """AdaFactor's arguments, its schedules and its factoring; `AdaFactor` adds the update.

    Args:
        learning_rate: float or None. the step size; None: ``min(1 / sqrt(t), 0.01)`` at step t (from 1), times
            0.05 unless ``multiply_by_parameter_scale``.
        beta1: float. decay of the average of the updates; 0 keeps none.
        beta2: float or None. decay of the second moments; None: ``1 - t ** -0.8``.
        epsilon1: float. added to the squared gradient and under the square root.
        epsilon2: float. the least parameter scale.
        multiply_by_parameter_scale: bool. scale each update by ``max(rms(w), epsilon2)``.
        clipping_threshold: float or None. divide the update by ``max(1, rms(update) / threshold)``.
        min_dim_size_to_factor: int. factor the second moment of a variable of 2+ axes whose second-largest axis
            is at least this long (one average per row and one per column).
        exclude_from_parameter_scale: list of str. regexes searched in variable paths: no parameter scale there.
        name: str. the optimizer's name.
        **kwargs: the arguments of ``keras.optimizers.Optimizer``.
    """

    def __init__(self, learning_rate=1e-3, beta1=0.0, beta2=None, epsilon1=1e-30, epsilon2=1e-3,
                 multiply_by_parameter_scale=True, clipping_threshold=1.0, min_dim_size_to_factor=128,
                 exclude_from_parameter_scale=None, name="adafactor", **kwargs):
        if not 0.0 <= beta1 < 1.0:
            raise fail(ConfigError, "beta1", "a float in [0, 1)", repr(beta1))
        if beta2 is not None and not 0.0 < beta2 < 1.0:
            raise fail(ConfigError, "beta2", "None or a float in (0, 1)", repr(beta2))
        if not isinstance(min_dim_size_to_factor, int) or min_dim_size_to_factor < 1:
            raise fail(ConfigError, "min_dim_size_to_factor", "an int >= 1", repr(min_dim_size_to_factor))
        excludes = string_list(exclude_from_parameter_scale, "exclude_from_parameter_scale")
        super().__init__(learning_rate=0.01 if learning_rate is None else learning_rate, name=name, **kwargs)
        self.relative_step = learning_rate is None
        self.beta1, self.beta2, self.epsilon1, self.epsilon2 = beta1, beta2, epsilon1, epsilon2
        self.multiply_by_parameter_scale = multiply_by_parameter_scale
        self.clipping_threshold, self.min_dim_size_to_factor = clipping_threshold, min_dim_size_to_factor
        self.exclude_from_parameter_scale = list(excludes)

    @property
    def learning_rate(self):
        if not getattr(self, "relative_step", False):
            return super().learning_rate
        rate = ops.minimum(1.0 / ops.sqrt(ops.cast(self.iterations + 1, "float32")), 0.01)
        return rate if self.multiply_by_parameter_scale else rate * 0.05

    @learning_rate.setter
    def learning_rate(self, value):
        keras.optimizers.Optimizer.learning_rate.fset(self, value)

    def beta2_at_step(self):
        """The second moments' decay for this step: ``beta2``, or ``1 - t ** -0.8`` (t from 1)."""
        if self.beta2 is not None:
            return self.beta2
        return 1.0 - ops.power(ops.cast(self.iterations + 1, "float32"), -0.8)

    def factored_shape(self, shape):
        """None for a variable whose second moment is kept whole; else ``(shape1, axis1, shape2, axis2)``: axis1
        the longest axis and axis2 the next (ties: the later axis counts as longer), shape1 the shape with axis1
        averaged away, shape2 with axis2."""
        shape = tuple(shape)
        if len(shape) < 2:
            return None
        *_, axis2, axis1 = sorted(range(len(shape)), key=lambda axis: (shape[axis], axis))
        if shape[axis2] < self.min_dim_size_to_factor:
            return None
        shape1 = tuple(1 if axis == axis1 else size for axis, size in enumerate(shape))
        shape2 = tuple(1 if axis == axis2 else size for axis, size in enumerate(shape))
        return shape1, axis1, shape2, axis2

    def _do_parameter_scale(self, variable) -> bool:
        return self.multiply_by_parameter_scale and not matches(variable_path(self, variable),
                                                                self.exclude_from_parameter_scale)

    def get_config(self):
        """Every constructor argument; ``learning_rate`` None for the relative step."""
        config = {**super().get_config(), "beta1": self.beta1, "beta2": self.beta2, "epsilon1": self.epsilon1,
                  "epsilon2": self.epsilon2, "multiply_by_parameter_scale": self.multiply_by_parameter_scale,
                  "clipping_threshold": self.clipping_threshold,
                  "min_dim_size_to_factor": self.min_dim_size_to_factor,
                  "exclude_from_parameter_scale": list(self.exclude_from_parameter_scale)}
        if self.relative_step:
            config["learning_rate"] = None
        return config


@register
class AdaFactor(AdaFactorBase):
    """bert4keras's AdaFactor; the arguments are `AdaFactorBase`'s.

    Per variable: ``v`` (or its row and column averages) tracks ``g ** 2 + epsilon1``; the update
    ``u = g / sqrt(v + epsilon1)`` is clipped, averaged by ``beta1``, scaled by ``max(rms(w), epsilon2)``, and
    ``w -= lr * u``.

    Example:
    >>> import numpy as np
    >>> import keras
    >>> w = keras.Variable(np.ones((2, 2), "float32"))
    >>> optimizer = AdaFactor(learning_rate=0.1, min_dim_size_to_factor=2)
    >>> optimizer.apply([np.ones((2, 2), "float32")], [w])
    >>> [round(float(x), 4) for x in w.numpy().ravel()]  # u = 1, clipped to rms 1, scaled by rms(w) = 1
    [0.9, 0.9, 0.9, 0.9]
    """

    def build(self, var_list):
        """Create ``m`` (when ``beta1``) and ``v``, or ``vr`` and ``vc`` for a factored variable, at zero."""
        if self.built:
            return
        super().build(var_list)
        self._m, self._v, self._vr, self._vc = [], [], [], []
        for variable in var_list:
            factored = self.factored_shape(variable.shape)
            self._m.append(self.add_variable_from_reference(variable, "m") if self.beta1 > 0.0 else None)
            self._v.append(self.add_variable_from_reference(variable, "v") if factored is None else None)
            for moments, shape, suffix in ((self._vr, 0, "vr"), (self._vc, 2, "vc")):
                moments.append(None if factored is None else self.add_variable(
                    factored[shape], dtype=variable.dtype, name=f"{variable.path.replace('/', '_')}_{suffix}"))

    def _second_moment(self, g2, variable, index):
        """Update the second moment of ``variable`` with ``g2``; its full estimate."""
        beta2 = self.beta2_at_step()
        factored = self.factored_shape(variable.shape)
        if factored is None:
            v = self._v[index]
            self.assign(v, beta2 * v + (1.0 - beta2) * g2)
            return ops.convert_to_tensor(v)
        _, axis1, _, axis2 = factored
        vr, vc = self._vr[index], self._vc[index]
        self.assign(vr, beta2 * vr + (1.0 - beta2) * ops.mean(g2, axis=axis1, keepdims=True))
        self.assign(vc, beta2 * vc + (1.0 - beta2) * ops.mean(g2, axis=axis2, keepdims=True))
        vr, vc = ops.convert_to_tensor(vr), ops.convert_to_tensor(vc)
        return vr * vc / ops.mean(vr, axis=axis2, keepdims=True)

    def update_step(self, gradient, variable, learning_rate):
        """One AdaFactor step on one variable."""
        index, dtype = variable_index(self, variable), variable.dtype
        gradient, lr = ops.cast(dense_gradient(gradient), dtype), ops.cast(learning_rate, dtype)
        v = self._second_moment(ops.square(gradient) + self.epsilon1, variable, index)
        update = gradient / ops.sqrt(v + self.epsilon1)
        if self.clipping_threshold is not None:
            update = update / ops.maximum(1.0, _rms(update) / self.clipping_threshold)
        if self.beta1 > 0.0:
            m = self._m[index]
            self.assign(m, self.beta1 * m + (1.0 - self.beta1) * update)
            update = ops.convert_to_tensor(m)
        if self._do_parameter_scale(variable):
            update = update * ops.maximum(_rms(variable), self.epsilon2)
        self.assign(variable, variable - lr * update)
