"""``bert4keras.optimizers`` -> ``kerasbert.compat.optimizers``: bert4keras's Adam and its ``extend_with_*`` wrappers.

Each wrapper takes a Keras 3 optimizer class (`Adam` here, or ``keras.optimizers.Adam``, ``SGD``...) and returns
a subclass with the wrapper's arguments added; wrappers compose in any order, and the numbers match bert4keras
0.11.5 on tf.keras step for step, its first-step quirks included:

- `extend_with_piecewise_linear_lr`: the multiplier is read at the step count *before* the step, so with
  ``{1000: 1}`` the first step has learning rate 0. Every wrapper (and the decay) sees the scheduled rate.
- `extend_with_gradient_accumulation`: the update runs on steps 0, N, 2N... with the mean of the N gradients
  *before* that step (step 0 applies a zero gradient), and Adam's bias correction counts every step. Keras's
  own ``gradient_accumulation_steps`` (any optimizer takes it) updates on steps N-1, 2N-1... and counts updates.
- `extend_with_exponential_moving_average`: the averages start at zero and `apply_ema_weights` divides by
  ``1 - momentum ** steps``; Keras's ``use_ema`` starts them at the weights and has no such correction.
- `extend_with_lookahead`: the slow weights start at zero and the first sync is on step 0, as in bert4keras
  (the Lookahead paper starts them at the weights).

Saving: `Adam` and `AdamW` are registered as ``kerasbert>Adam`` and ``kerasbert>AdamW``. A class a wrapper
builds is registered under ``kerasbert>`` + its name (``name``, or the base's name and a suffix such as
``AdamWithWeightDecay``): a saved model loads in any process that has built the same class again first.

Example:
>>> import numpy as np
>>> import keras
>>> from kerasbert.compat.optimizers import Adam, extend_with_piecewise_linear_lr, extend_with_weight_decay
>>> AdamWLR = extend_with_piecewise_linear_lr(extend_with_weight_decay(Adam))
>>> optimizer = AdamWLR(learning_rate=0.1, weight_decay_rate=0.01, lr_schedule={2: 1.0})
>>> w = keras.Variable(np.ones(2, "float32"))
>>> for _ in range(3):
...     optimizer.apply([np.ones(2, "float32")], [w])
>>> AdamWLR.__name__, [round(float(x), 4) for x in w.numpy()]  # steps at lr 0, 0.05, 0.1
('AdamWithWeightDecayWithPiecewiseLinearLR', [0.8486, 0.8486])
"""

from __future__ import annotations

import re

import keras
import numpy as np
from keras import ops

from kerasbert.errors import ConfigError, fail
from kerasbert.internals import optimizer_variables, variable_index
from kerasbert.modeling.registry import register

__all__ = ["Adam", "AdamW", "extend_with_exponential_moving_average", "extend_with_gradient_accumulation",
           "extend_with_layer_adaptation", "extend_with_lookahead", "extend_with_piecewise_linear_lr",
           "extend_with_weight_decay"]


@register
class Adam(keras.optimizers.Optimizer):
    """bert4keras's Adam: epsilon is added after the bias correction, and the correction can be switched off.

    ``w -= lr * m_hat / (sqrt(v_hat) + epsilon)`` with ``m_hat = m / (1 - beta_1 ** t)`` and likewise for v
    (Kingma & Ba 2015, Algorithm 1); Keras's Adam folds the correction into the rate, which moves epsilon.

    Args:
        learning_rate: float or schedule. the step size.
        beta_1: float. decay of the first-moment average.
        beta_2: float. decay of the second-moment average.
        epsilon: float. added to ``sqrt(v_hat)``.
        bias_correction: bool. divide the moments by ``1 - beta ** t``.
        name: str. the optimizer's name.
        **kwargs: the arguments of ``keras.optimizers.Optimizer`` (``clipnorm``, ``weight_decay``...).
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-6, bias_correction=True,
                 name="adam", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.bias_correction = bias_correction

    def build(self, var_list):
        """Create the moments m and v, one pair per variable, at zero."""
        if not self.built:
            super().build(var_list)
            self._m, self._v = self.add_optimizer_variables(var_list, ["m", "v"])

    def update_step(self, gradient, variable, learning_rate):
        """One Adam step on one variable."""
        index = variable_index(self, variable)
        m, v, dtype = self._m[index], self._v[index], variable.dtype
        gradient, lr = ops.cast(_dense(gradient), dtype), ops.cast(learning_rate, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        self.assign(m, beta_1 * m + (1 - beta_1) * gradient)
        self.assign(v, beta_2 * v + (1 - beta_2) * ops.square(gradient))
        m_hat, v_hat = ops.convert_to_tensor(m), ops.convert_to_tensor(v)
        if self.bias_correction:
            m_hat = m_hat / (1.0 - ops.power(beta_1, step))
            v_hat = v_hat / (1.0 - ops.power(beta_2, step))
        self.assign(variable, variable - lr * m_hat / (ops.sqrt(v_hat) + self.epsilon))

    def get_config(self):
        """Every constructor argument."""
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
                "bias_correction": self.bias_correction}


def _dense(gradient):
    """An embedding's sparse gradient (TensorFlow's ``IndexedSlices``, a row once per lookup) as a dense tensor,
    each row summed first, as tf.keras's optimizers take it: squared lookup by lookup, the moment ``v`` of a row
    looked up twice in a batch would be half its due and the step sqrt(2) times too long."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return tf.convert_to_tensor(gradient)
    return gradient


_EXTENDED: dict[tuple[type, type, str], type] = {}  # (mixin, base, name) -> the class made for it


def _extend(mixin: type, base, name: str | None, suffix: str, where: str) -> type:
    """``class name(mixin, base)``, registered with Keras as ``kerasbert>name``; the same class again for the same
    mixin, base and name (a script's ``extend_with_weight_decay(Adam, 'AdamW')`` is `AdamW`), so that a saved
    model loads as the class it was saved with."""
    if not (isinstance(base, type) and issubclass(base, keras.optimizers.Optimizer)):
        raise fail(ConfigError, where, "a keras.optimizers.Optimizer subclass", repr(base),
                   "pass the class (Adam, keras.optimizers.Adam), not an instance or a Keras 2 optimizer")
    name = name or base.__name__ + suffix
    if (mixin, base, name) not in _EXTENDED:
        cls = type(name, (mixin, base), {"__module__": __name__, "__qualname__": name})
        _EXTENDED[mixin, base, name] = register(cls, name=name)
    return _EXTENDED[mixin, base, name]


def _path(optimizer, variable) -> str:
    """A trainable variable's Keras path (``dense/kernel``); `update_step` may get its backend variable."""
    return optimizer_variables(optimizer)[variable_index(optimizer, variable)].path


def _matches(path: str, patterns) -> bool:
    """bert4keras's ``string_matching``: does any pattern (a regex) occur in the path?"""
    return any(re.search(pattern, path) for pattern in patterns)


class _WeightDecay(keras.optimizers.Optimizer):
    """``w_new = step(w) - lr * weight_decay_rate * w``, w before the step, unless a pattern matches the path."""

    def __init__(self, *args, weight_decay_rate=0.01, exclude_from_weight_decay=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.weight_decay_excludes = tuple(exclude_from_weight_decay)

    def update_step(self, gradient, variable, learning_rate):
        before = ops.copy(variable)  # a snapshot: converting a Variable may alias it
        super().update_step(gradient, variable, learning_rate)
        if not _matches(_path(self, variable), self.weight_decay_excludes):
            rate = ops.cast(learning_rate, variable.dtype) * self.weight_decay_rate
            self.assign(variable, variable - rate * before)

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate,
                "exclude_from_weight_decay": list(self.weight_decay_excludes)}


def extend_with_weight_decay(BaseOptimizer, name=None):
    """``BaseOptimizer`` with decoupled weight decay (Loshchilov & Hutter 2019), taken after its step.

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithWeightDecay").

    Returns:
        type. a subclass taking ``weight_decay_rate`` (float, 0.01) and ``exclude_from_weight_decay`` (regexes
        searched in each variable's path, such as ``["Norm", "bias"]``).

    Example:
    >>> extend_with_weight_decay(Adam)(weight_decay_rate=0.01, exclude_from_weight_decay=["Norm"]).weight_decay_rate
    0.01
    """
    return _extend(_WeightDecay, BaseOptimizer, name, "WithWeightDecay", "extend_with_weight_decay")


def _piecewise_linear(step, schedule: dict):
    """bert4keras's ``piecewise_linear``: ``{1000: 1, 2000: 0.1}`` rises 0 -> 1 over steps 0-1000, falls to 0.1 by
    2000 and stays there; a schedule without key 0 starts from 0."""
    points = sorted(schedule.items())
    if points[0][0] != 0:
        points.insert(0, (0, 0.0))
    step = ops.cast(step, "float32")
    value = ops.ones_like(step) * points[-1][1]
    for (t0, v0), (t1, v1) in reversed(list(zip(points[:-1], points[1:], strict=True))):
        slope = (v1 - v0) / (t1 - t0)
        value = ops.where(step < t1, v0 + slope * (step - t0), value)
    return value


class _PiecewiseLinearLR(keras.optimizers.Optimizer):
    """The learning rate times ``_piecewise_linear(steps so far, lr_schedule)``."""

    def __init__(self, *args, lr_schedule=None, **kwargs):
        schedule = {0: 1.0} if lr_schedule is None else lr_schedule
        if not isinstance(schedule, dict) or not schedule:
            raise fail(ConfigError, "lr_schedule", "a non-empty dict {step: multiplier}", repr(lr_schedule))
        super().__init__(*args, **kwargs)
        self.lr_schedule = {int(step): float(value) for step, value in schedule.items()}

    @property
    def learning_rate(self):
        rate = super().learning_rate
        if not hasattr(self, "lr_schedule"):  # read by the base constructor, before the schedule is set
            return rate
        return rate * ops.cast(_piecewise_linear(self.iterations, self.lr_schedule), "float32")

    @learning_rate.setter
    def learning_rate(self, value):
        keras.optimizers.Optimizer.learning_rate.fset(self, value)

    def get_config(self):
        return {**super().get_config(), "lr_schedule": dict(self.lr_schedule)}


def extend_with_piecewise_linear_lr(BaseOptimizer, name=None):
    """``BaseOptimizer`` whose learning rate follows a piecewise linear multiplier of the step (warm-up, decay).

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithPiecewiseLinearLR").

    Returns:
        type. a subclass taking ``lr_schedule``: dict {step: multiplier}, linear between the steps, constant
        after the last, from 0 at step 0 unless step 0 is given (default ``{0: 1}``).

    Example:
    >>> optimizer = extend_with_piecewise_linear_lr(Adam)(learning_rate=1.0, lr_schedule={4: 1.0})
    >>> float(optimizer.learning_rate)
    0.0
    """
    return _extend(_PiecewiseLinearLR, BaseOptimizer, name, "WithPiecewiseLinearLR",
                   "extend_with_piecewise_linear_lr")


class _GradientAccumulation(keras.optimizers.Optimizer):
    """On steps 0, N, 2N... step with the mean of the gradients summed since the last update; always add."""

    def __init__(self, *args, grad_accum_steps=2, **kwargs):
        if not isinstance(grad_accum_steps, int) or grad_accum_steps < 1:
            raise fail(ConfigError, "grad_accum_steps", "an int >= 1", repr(grad_accum_steps))
        super().__init__(*args, **kwargs)
        self.grad_accum_steps = grad_accum_steps

    def build(self, var_list):
        if not self.built:
            super().build(var_list)
            self._accumulated = self.add_optimizer_variables(var_list, "accumulated_gradient")

    def update_step(self, gradient, variable, learning_rate):
        summed = self._accumulated[variable_index(self, variable)]
        is_update = ops.equal(self.iterations % self.grad_accum_steps, 0)
        mean = ops.convert_to_tensor(summed) / self.grad_accum_steps
        ops.cond(is_update, lambda: super(_GradientAccumulation, self).update_step(mean, variable, learning_rate),
                 lambda: None)
        kept = ops.where(is_update, ops.zeros_like(summed), summed)
        self.assign(summed, kept + ops.cast(ops.convert_to_tensor(gradient), summed.dtype))

    def get_config(self):
        return {**super().get_config(), "grad_accum_steps": self.grad_accum_steps}


def extend_with_gradient_accumulation(BaseOptimizer, name=None):
    """``BaseOptimizer`` that updates every ``grad_accum_steps`` steps with the mean gradient (bigger batches).

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithGradientAccumulation").

    Returns:
        type. a subclass taking ``grad_accum_steps`` (int, 2). It updates on steps 0, N, 2N..., one step after
        Keras's ``gradient_accumulation_steps`` would (see the module docstring).

    Example:
    >>> extend_with_gradient_accumulation(Adam)(grad_accum_steps=4).get_config()["grad_accum_steps"]
    4
    """
    return _extend(_GradientAccumulation, BaseOptimizer, name, "WithGradientAccumulation",
                   "extend_with_gradient_accumulation")


class _ExponentialMovingAverage(keras.optimizers.Optimizer):
    """After each step ``ema = momentum * ema + (1 - momentum) * w``, ema starting at zero."""

    def __init__(self, *args, ema_momentum=0.999, **kwargs):
        super().__init__(*args, **kwargs)
        self.ema_momentum = ema_momentum  # the base's own attribute: its get_config reports it
        self.old_weights = None

    def build(self, var_list):
        if not self.built:
            super().build(var_list)
            self._ema = self.add_optimizer_variables(var_list, "ema")

    def update_step(self, gradient, variable, learning_rate):
        super().update_step(gradient, variable, learning_rate)
        ema = self._ema[variable_index(self, variable)]
        self.assign(ema, ema * self.ema_momentum + variable * (1.0 - self.ema_momentum))

    def apply_ema_weights(self, bias_correction=True):
        """Keep the weights in ``old_weights``, then set them to their averages (divided by
        ``1 - momentum ** steps`` when ``bias_correction``)."""
        weights = optimizer_variables(self)
        self.old_weights = [ops.convert_to_numpy(w) for w in weights]
        averages = [ops.convert_to_numpy(a) for a in self._ema]
        if bias_correction:
            scale = 1.0 - np.power(self.ema_momentum, int(ops.convert_to_numpy(self.iterations)))
            averages = [a / scale for a in averages]
        for weight, average in zip(weights, averages, strict=True):
            weight.assign(average.astype(weight.dtype))

    def reset_old_weights(self):
        """Put back the weights `apply_ema_weights` kept."""
        for weight, old in zip(optimizer_variables(self), self.old_weights, strict=True):
            weight.assign(old)


def extend_with_exponential_moving_average(BaseOptimizer, name=None):
    """``BaseOptimizer`` that keeps an exponential moving average of the weights, to evaluate with.

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithEMA").

    Returns:
        type. a subclass taking ``ema_momentum`` (float, 0.999), with ``apply_ema_weights(bias_correction=True)``
        and ``reset_old_weights()``.

    Example:
    >>> extend_with_exponential_moving_average(Adam)(ema_momentum=0.99).get_config()["ema_momentum"]
    0.99
    """
    return _extend(_ExponentialMovingAverage, BaseOptimizer, name, "WithEMA",
                   "extend_with_exponential_moving_average")


class _LayerAdaptation(keras.optimizers.Optimizer):
    """LAMB's trust ratio (You et al. 2020): scale the step dw so that ``|dw / lr| = |w|``."""

    def __init__(self, *args, exclude_from_layer_adaptation=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.layer_adaptation_excludes = tuple(exclude_from_layer_adaptation)

    def update_step(self, gradient, variable, learning_rate):
        before = ops.copy(variable)  # a snapshot: converting a Variable may alias it
        super().update_step(gradient, variable, learning_rate)
        if _matches(_path(self, variable), self.layer_adaptation_excludes):
            return
        step = ops.convert_to_tensor(variable) - before
        lr = ops.maximum(ops.cast(learning_rate, variable.dtype), keras.config.epsilon())
        w_norm = ops.sqrt(ops.sum(ops.square(before)))
        step_norm = ops.sqrt(ops.sum(ops.square(step / lr)))
        ratio = ops.where(w_norm > 0.0, ops.where(step_norm > 0.0, w_norm / step_norm, 1.0), 1.0)
        self.assign(variable, before + step * ratio)

    def get_config(self):
        return {**super().get_config(), "exclude_from_layer_adaptation": list(self.layer_adaptation_excludes)}


def extend_with_layer_adaptation(BaseOptimizer, name=None):
    """``BaseOptimizer`` with a per-variable trust ratio (Adam -> LAMB).

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithLayerAdaptation").

    Returns:
        type. a subclass taking ``exclude_from_layer_adaptation`` (regexes searched in variable paths).

    Example:
    >>> extend_with_layer_adaptation(Adam, "LAMB").__name__
    'LAMB'
    """
    return _extend(_LayerAdaptation, BaseOptimizer, name, "WithLayerAdaptation", "extend_with_layer_adaptation")


class _Lookahead(keras.optimizers.Optimizer):
    """Lookahead (Zhang et al. 2019): on steps 0, k, 2k... ``slow += alpha * (w - slow)`` and w = slow."""

    def __init__(self, *args, steps_per_slow_update=5, slow_step_size=0.5, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps_per_slow_update, self.slow_step_size = steps_per_slow_update, slow_step_size

    def build(self, var_list):
        if not self.built:
            super().build(var_list)
            self._slow = self.add_optimizer_variables(var_list, "slow")

    def update_step(self, gradient, variable, learning_rate):
        super().update_step(gradient, variable, learning_rate)
        slow = self._slow[variable_index(self, variable)]
        is_sync = ops.equal(self.iterations % self.steps_per_slow_update, 0)
        self.assign(slow, ops.where(is_sync, slow + self.slow_step_size * (variable - slow), slow))
        self.assign(variable, ops.where(is_sync, slow, variable))

    def get_config(self):
        return {**super().get_config(), "steps_per_slow_update": self.steps_per_slow_update,
                "slow_step_size": self.slow_step_size}


def extend_with_lookahead(BaseOptimizer, name=None):
    """``BaseOptimizer`` with Lookahead's slow weights.

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithLookahead").

    Returns:
        type. a subclass taking ``steps_per_slow_update`` (k, 5) and ``slow_step_size`` (alpha, 0.5).

    Example:
    >>> extend_with_lookahead(Adam)(steps_per_slow_update=3).get_config()["steps_per_slow_update"]
    3
    """
    return _extend(_Lookahead, BaseOptimizer, name, "WithLookahead", "extend_with_lookahead")


AdamW = extend_with_weight_decay(Adam, "AdamW")
AdamW.__doc__ = """bert4keras's AdamW: `Adam` with `extend_with_weight_decay`'s decoupled decay."""
