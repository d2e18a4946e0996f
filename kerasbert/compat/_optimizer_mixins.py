"""The mixins behind `kerasbert.compat.optimizers`' ``extend_with_*`` wrappers, and the helpers they share.

bert4keras's wrappers work by intercepting ``K.update`` while the optimizer inside them steps: every value
written to the variable being updated (gradient accumulation: to any variable) passes through the wrapper's
rule, the innermost wrapper's rule first. `RewritesWrites` does the same with the optimizer's ``assign``,
``assign_add`` and ``assign_sub``, so that wrappers compose as bert4keras's do, its quirks included: weight decay
around Lookahead decays at both writes of a sync step, and around gradient accumulation on every step.
"""

from __future__ import annotations

import contextlib
import re

import keras
import numpy as np
from keras import ops

from kerasbert.compat._functions import piecewise_linear
from kerasbert.errors import ConfigError, fail
from kerasbert.internals import optimizer_variables, variable_index
from kerasbert.modeling.registry import register

PUBLIC_MODULE = "kerasbert.compat.optimizers"  # where the classes the wrappers build say they come from
_EXTENDED: dict[tuple[type, type, str], type] = {}  # (mixin, base, name) -> the class made for it


def dense_gradient(gradient):
    """An embedding's sparse gradient (TensorFlow's ``IndexedSlices``, a row once per lookup) as a dense tensor,
    each row summed first, as tf.keras's optimizers take it: squared lookup by lookup, the moment ``v`` of a row
    looked up twice in a batch would be half its due and the step sqrt(2) times too long."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return tf.convert_to_tensor(gradient)
    return gradient


def extend(mixin: type, base, name: str | None, suffix: str, where: str) -> type:
    """``class name(mixin, base)``, registered with Keras as ``kerasbert>name``; the same class again for the same
    mixin, base and name (a script's ``extend_with_weight_decay(Adam, 'AdamW')`` is `AdamW`), so that a saved
    model loads as the class it was saved with."""
    if not (isinstance(base, type) and issubclass(base, keras.optimizers.Optimizer)):
        raise fail(ConfigError, where, "a keras.optimizers.Optimizer subclass", repr(base),
                   "pass the class (Adam, keras.optimizers.Adam), not an instance or a Keras 2 optimizer")
    name = name or base.__name__ + suffix
    if (mixin, base, name) not in _EXTENDED:
        cls = type(name, (mixin, base), {"__module__": PUBLIC_MODULE, "__qualname__": name})
        _EXTENDED[mixin, base, name] = register(cls, name=name)
    return _EXTENDED[mixin, base, name]


def variable_path(optimizer, variable) -> str:
    """A trainable variable's Keras path (``dense/kernel``); `update_step` may get its backend variable."""
    return optimizer_variables(optimizer)[variable_index(optimizer, variable)].path


def matches(path: str, patterns) -> bool:
    """bert4keras's ``string_matching``: does any pattern (a regex) occur in the path?"""
    return any(re.search(pattern, path) for pattern in patterns)


def string_list(value, where: str) -> tuple[str, ...]:
    """A list of patterns as a tuple; a bare string (which bert4keras would read letter by letter) is refused."""
    if value is None:
        return ()
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise fail(ConfigError, where, "a list of strings", repr(value), f'write [{value!r}]')
    return tuple(value)


class RewritesWrites(keras.optimizers.Optimizer):
    """The base of the wrappers that rewrite what the optimizer inside them writes (see the module docstring)."""

    _write_rules: tuple = ()  # (target variable or None for every variable, rule(x, new) -> new), outermost first

    @contextlib.contextmanager
    def rewriting(self, target, rule):
        """While the block runs, each value written to ``target`` (None: to any variable) becomes
        ``rule(x, value)``, x the variable's value before the write."""
        self._write_rules = (*self._write_rules, (target, rule))
        try:
            yield
        finally:
            self._write_rules = self._write_rules[:-1]

    def _rules_for(self, variable) -> list:
        return [rule for target, rule in reversed(self._write_rules) if target is None or target is variable]

    def _rewritten(self, variable, rules, value):
        x = ops.convert_to_tensor(variable)
        value = ops.cast(dense_gradient(value), x.dtype)
        for rule in rules:
            value = rule(x, value)
        return value

    def assign(self, variable, value):
        rules = self._rules_for(variable)
        super().assign(variable, self._rewritten(variable, rules, value) if rules else value)

    def assign_add(self, variable, value):
        rules = self._rules_for(variable)
        if not rules:
            return super().assign_add(variable, value)
        super().assign(variable, self._rewritten(variable, rules, ops.convert_to_tensor(variable)
                                                 + ops.cast(dense_gradient(value), variable.dtype)))

    def assign_sub(self, variable, value):
        rules = self._rules_for(variable)
        if not rules:
            return super().assign_sub(variable, value)
        super().assign(variable, self._rewritten(variable, rules, ops.convert_to_tensor(variable)
                                                 - ops.cast(dense_gradient(value), variable.dtype)))


class WeightDecay(RewritesWrites):
    """``w_new = new - lr * weight_decay_rate * w`` at each write to w, unless a pattern matches its path."""

    def __init__(self, *args, weight_decay_rate=0.01, exclude_from_weight_decay=(), **kwargs):
        excludes = string_list(exclude_from_weight_decay, "exclude_from_weight_decay")
        super().__init__(*args, **kwargs)
        self.weight_decay_rate, self.weight_decay_excludes = weight_decay_rate, excludes

    def update_step(self, gradient, variable, learning_rate):
        if matches(variable_path(self, variable), self.weight_decay_excludes):
            return super().update_step(gradient, variable, learning_rate)
        lr = ops.cast(learning_rate, variable.dtype)
        with self.rewriting(variable, lambda x, new: new - lr * self.weight_decay_rate * x):
            super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate,
                "exclude_from_weight_decay": list(self.weight_decay_excludes)}


class LayerAdaptation(RewritesWrites):
    """LAMB's trust ratio (You et al. 2020): scale each step dw so that ``|dw / lr| = |w|``."""

    def __init__(self, *args, exclude_from_layer_adaptation=(), **kwargs):
        excludes = string_list(exclude_from_layer_adaptation, "exclude_from_layer_adaptation")
        super().__init__(*args, **kwargs)
        self.layer_adaptation_excludes = excludes

    def update_step(self, gradient, variable, learning_rate):
        if matches(variable_path(self, variable), self.layer_adaptation_excludes):
            return super().update_step(gradient, variable, learning_rate)
        lr = ops.maximum(ops.cast(learning_rate, variable.dtype), keras.config.epsilon())

        def adapt(x, new):
            step = new - x
            x_norm, step_norm = ops.sqrt(ops.sum(ops.square(x))), ops.sqrt(ops.sum(ops.square(step / lr)))
            return x + step * ops.where(x_norm > 0.0, ops.where(step_norm > 0.0, x_norm / step_norm, 1.0), 1.0)

        with self.rewriting(variable, adapt):
            super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        return {**super().get_config(), "exclude_from_layer_adaptation": list(self.layer_adaptation_excludes)}


class GradientAccumulation(RewritesWrites):
    """Every step, the step inside runs on the mean of the gradients summed since the last update, but its writes
    (slots included) take effect only on steps 0, N, 2N...; then the new gradient is added to the sum."""

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
        with self.rewriting(None, lambda x, new: ops.where(is_update, new, x)):
            super().update_step(mean, variable, learning_rate)
        kept = ops.where(is_update, ops.zeros_like(summed), summed)
        self.assign(summed, kept + ops.cast(dense_gradient(gradient), summed.dtype))

    def get_config(self):
        return {**super().get_config(), "grad_accum_steps": self.grad_accum_steps}


class LazyOptimization(RewritesWrites):
    """For the variables a pattern matches, only the rows (last axis) with a nonzero gradient move."""

    def __init__(self, *args, include_in_lazy_optimization=(), **kwargs):
        includes = string_list(include_in_lazy_optimization, "include_in_lazy_optimization")
        super().__init__(*args, **kwargs)
        self.lazy_includes = includes

    def update_step(self, gradient, variable, learning_rate):
        if not matches(variable_path(self, variable), self.lazy_includes):
            return super().update_step(gradient, variable, learning_rate)
        moves = ops.any(ops.not_equal(dense_gradient(gradient), 0.0), axis=-1, keepdims=True)
        moves = ops.cast(moves, variable.dtype)  # (rows..., 1): 1 where the row has a gradient
        with self.rewriting(variable, lambda x, new: x + (new - x) * moves):
            super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        return {**super().get_config(), "include_in_lazy_optimization": list(self.lazy_includes)}


class ParameterWiseLR(RewritesWrites):
    """Each step of a variable times the product of the multipliers whose key occurs in its path."""

    def __init__(self, *args, paramwise_lr_schedule=None, **kwargs):
        schedule = {} if paramwise_lr_schedule is None else paramwise_lr_schedule
        if not isinstance(schedule, dict) or not all(isinstance(key, str) for key in schedule):
            raise fail(ConfigError, "paramwise_lr_schedule", "a dict {name part: multiplier}",
                       repr(paramwise_lr_schedule))
        super().__init__(*args, **kwargs)
        self.paramwise_lr_schedule = {key: float(value) for key, value in schedule.items()}

    def update_step(self, gradient, variable, learning_rate):
        path, multiplier = variable_path(self, variable), 1.0
        for key, value in self.paramwise_lr_schedule.items():
            multiplier = multiplier * value if key in path else multiplier
        if multiplier == 1.0:
            return super().update_step(gradient, variable, learning_rate)
        with self.rewriting(variable, lambda x, new: x + (new - x) * multiplier):
            super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        return {**super().get_config(), "paramwise_lr_schedule": dict(self.paramwise_lr_schedule)}


class PiecewiseLinearLR(keras.optimizers.Optimizer):
    """The learning rate times ``piecewise_linear(steps so far, lr_schedule)`` (bert4keras's: from 0 at step 0
    unless the schedule gives step 0, constant after its last step)."""

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
        return rate * ops.cast(piecewise_linear(self.iterations, self.lr_schedule), "float32")

    @learning_rate.setter
    def learning_rate(self, value):
        keras.optimizers.Optimizer.learning_rate.fset(self, value)

    def get_config(self):
        return {**super().get_config(), "lr_schedule": dict(self.lr_schedule)}


class ExponentialMovingAverage(keras.optimizers.Optimizer):
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


class Lookahead(keras.optimizers.Optimizer):
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
