"""``bert4keras.optimizers`` -> ``kerasbert.compat.optimizers``: bert4keras's optimizers and ``extend_with_*`` wrappers.

`Adam`, `AdamW`, `Lion` (``LionV2``) and `AdaFactor` (``AdaFactorV1``, ``AdaFactorV2``, on `AdaFactorBase`) are
Keras 3 optimizers with bert4keras 0.11.5's update rules. Each wrapper takes a Keras 3 optimizer class (one of
these, or ``keras.optimizers.Adam``, ``SGD``...) and returns a subclass with the wrapper's arguments added;
wrappers compose in any order, and the numbers match bert4keras on tf.keras step for step, its quirks included
(the module ``kerasbert.compat._optimizer_mixins`` says how the rewriting wrappers compose):

- `extend_with_piecewise_linear_lr`: the multiplier is read at the step count *before* the step, so with
  ``{1000: 1}`` the first step has learning rate 0. Every wrapper (and the decay) sees the scheduled rate.
- `extend_with_gradient_accumulation`: the update runs on steps 0, N, 2N... with the mean of the N gradients
  *before* that step (step 0 applies a zero gradient), and Adam's bias correction counts every step. Keras's
  own ``gradient_accumulation_steps`` (any optimizer takes it) updates on steps N-1, 2N-1... and counts updates.
- `extend_with_exponential_moving_average`: the averages start at zero and `apply_ema_weights` divides by
  ``1 - momentum ** steps``; Keras's ``use_ema`` starts them at the weights and has no such correction.
- `extend_with_lookahead`: the slow weights start at zero and the first sync is on step 0, as in bert4keras
  (the Lookahead paper starts them at the weights).
- `extend_with_lazy_optimization`: the rows (last axis) whose gradient is all zero keep their values, though
  the moments of the optimizer inside still decay there.
- `extend_with_parameter_wise_lr`: a key matches a variable when it occurs in the variable's Keras path
  (``dense/kernel``; bert4keras read the TensorFlow name, ``dense/kernel:0``).

The ``extend_with_*_v2`` names are the same functions: Keras 3 has one optimizer API.

Saving: the optimizers are registered as ``kerasbert>Adam``, ``kerasbert>AdamW``, ``kerasbert>Lion``,
``kerasbert>AdaFactor``. A class a wrapper builds is registered under ``kerasbert>`` + its name (``name``, or the
base's name and a suffix such as ``AdamWithWeightDecay``): a saved model loads in any process that has built the
same class again first. `custom_objects` is bert4keras's dict; kerasbert does not add it to Keras's global names.

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

import functools
from collections.abc import Callable

import keras
from keras import ops

from kerasbert.compat import _optimizer_mixins as mixins
from kerasbert.compat._adafactor import AdaFactor, AdaFactorBase
from kerasbert.compat._optimizer_mixins import dense_gradient, extend
from kerasbert.errors import ConfigError, fail
from kerasbert.internals import variable_index
from kerasbert.modeling.registry import register

__all__ = ["AdaFactor", "AdaFactorBase", "AdaFactorV1", "AdaFactorV2", "Adam", "AdamW", "Lion", "LionV2",
           "custom_objects", "export_to_custom_objects", "extend_with_exponential_moving_average",
           "extend_with_exponential_moving_average_v2", "extend_with_gradient_accumulation",
           "extend_with_gradient_accumulation_v2", "extend_with_layer_adaptation", "extend_with_layer_adaptation_v2",
           "extend_with_lazy_optimization", "extend_with_lazy_optimization_v2", "extend_with_lookahead",
           "extend_with_lookahead_v2", "extend_with_parameter_wise_lr", "extend_with_parameter_wise_lr_v2",
           "extend_with_piecewise_linear_lr", "extend_with_piecewise_linear_lr_v2", "extend_with_weight_decay",
           "extend_with_weight_decay_v2"]


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
        gradient, lr = ops.cast(dense_gradient(gradient), dtype), ops.cast(learning_rate, dtype)
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


@register
class Lion(keras.optimizers.Optimizer):
    """bert4keras's Lion (Chen et al. 2023, arXiv:2302.06675), with its defaults.

    ``w -= lr * sign(beta_1 * m + (1 - beta_1) * g)``, then ``m = beta_2 * m + (1 - beta_2) * g``.

    Args:
        learning_rate: float or schedule. the step size.
        beta_1: float. the weight of the momentum in the step's sign.
        beta_2: float. decay of the momentum.
        name: str. the optimizer's name.
        **kwargs: the arguments of ``keras.optimizers.Optimizer``.

    Example:
    >>> import numpy as np
    >>> import keras
    >>> w = keras.Variable(np.zeros(2, "float32"))
    >>> Lion(learning_rate=0.1).apply([np.array([3.0, -0.5], "float32")], [w])
    >>> [round(float(x), 4) for x in w.numpy()]
    [-0.1, 0.1]
    """

    def __init__(self, learning_rate=3e-4, beta_1=0.95, beta_2=0.98, name="lion", **kwargs):
        for argument, value in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0.0 <= value <= 1.0:
                raise fail(ConfigError, argument, "a float in [0, 1]", repr(value))
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.beta_1, self.beta_2 = beta_1, beta_2

    def build(self, var_list):
        """Create the momentum m, one per variable, at zero."""
        if not self.built:
            super().build(var_list)
            self._m = self.add_optimizer_variables(var_list, "m")

    def update_step(self, gradient, variable, learning_rate):
        """One Lion step on one variable."""
        m, dtype = self._m[variable_index(self, variable)], variable.dtype
        gradient, lr = ops.cast(dense_gradient(gradient), dtype), ops.cast(learning_rate, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        self.assign(variable, variable - lr * ops.sign(beta_1 * m + (1 - beta_1) * gradient))
        self.assign(m, beta_2 * m + (1 - beta_2) * gradient)

    def get_config(self):
        """Every constructor argument."""
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2}


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
    return extend(mixins.WeightDecay, BaseOptimizer, name, "WithWeightDecay", "extend_with_weight_decay")


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
    return extend(mixins.PiecewiseLinearLR, BaseOptimizer, name, "WithPiecewiseLinearLR",
                   "extend_with_piecewise_linear_lr")


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
    return extend(mixins.GradientAccumulation, BaseOptimizer, name, "WithGradientAccumulation",
                   "extend_with_gradient_accumulation")


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
    return extend(mixins.ExponentialMovingAverage, BaseOptimizer, name, "WithEMA",
                   "extend_with_exponential_moving_average")


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
    return extend(mixins.LayerAdaptation, BaseOptimizer, name, "WithLayerAdaptation", "extend_with_layer_adaptation")


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
    return extend(mixins.Lookahead, BaseOptimizer, name, "WithLookahead", "extend_with_lookahead")


def extend_with_lazy_optimization(BaseOptimizer, name=None):
    """``BaseOptimizer`` under which, for the variables named, only the rows with a nonzero gradient move (an
    embedding's rows not looked up in the batch stay put even when the optimizer's moments would move them).

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithLazyOptimization").

    Returns:
        type. a subclass taking ``include_in_lazy_optimization`` (regexes searched in each variable's path, such
        as ``["Embedding-Token"]``; a row is a slice along the last axis).

    Example:
    >>> optimizer = extend_with_lazy_optimization(Adam)(include_in_lazy_optimization=["Embedding"])
    >>> optimizer.get_config()["include_in_lazy_optimization"]
    ['Embedding']
    """
    return extend(mixins.LazyOptimization, BaseOptimizer, name, "WithLazyOptimization",
                  "extend_with_lazy_optimization")


def extend_with_parameter_wise_lr(BaseOptimizer, name=None):
    """``BaseOptimizer`` whose step of each variable is scaled by the multipliers of the keys in its path.

    Args:
        BaseOptimizer: type. a ``keras.optimizers.Optimizer`` subclass.
        name: str. the new class's name (default: the base's name + "WithParameterWiseLR").

    Returns:
        type. a subclass taking ``paramwise_lr_schedule``: dict {name part: multiplier}, such as
        ``{"Transformer-0": 0.1}``; a variable whose path holds several keys gets their product.

    Example:
    >>> extend_with_parameter_wise_lr(Adam)(paramwise_lr_schedule={"Embedding": 0.1}).paramwise_lr_schedule
    {'Embedding': 0.1}
    """
    return extend(mixins.ParameterWiseLR, BaseOptimizer, name, "WithParameterWiseLR",
                  "extend_with_parameter_wise_lr")


_EXPORTED: dict[tuple[type, str], type] = {}  # (class, name) -> its subclass under that name


def export_to_custom_objects(extend_with: Callable) -> Callable:
    """bert4keras's decorator for a function ``extend_with(BaseOptimizer)`` that returns an optimizer class: the
    function gains a ``name`` argument, and the class it returns is registered with Keras (``kerasbert>`` +
    its name), so that a model saved with it loads.

    Args:
        extend_with: callable. takes an optimizer class and returns a subclass of it.

    Returns:
        callable. ``(BaseOptimizer, name=None) -> type``; with a name, a subclass of ``extend_with``'s class under
        that name (the same one for the same name).

    Example:
    >>> @export_to_custom_objects
    ... def extend_with_nothing(BaseOptimizer):
    ...     return BaseOptimizer
    >>> keras.saving.get_registered_name(extend_with_nothing(Adam, "PlainAdam"))
    'kerasbert>PlainAdam'
    """

    @functools.wraps(extend_with)
    def exported(BaseOptimizer, name=None):
        cls = extend_with(BaseOptimizer)
        if not (isinstance(cls, type) and issubclass(cls, keras.optimizers.Optimizer)):
            raise fail(ConfigError, getattr(extend_with, "__name__", repr(extend_with)),
                       "a function returning a keras.optimizers.Optimizer subclass", repr(cls))
        if name is not None and name != cls.__name__:
            if (cls, name) not in _EXPORTED:
                _EXPORTED[cls, name] = type(name, (cls,), {"__module__": cls.__module__, "__qualname__": name})
            cls = _EXPORTED[cls, name]
        return register(cls, name=cls.__name__)

    return exported


AdamW = extend_with_weight_decay(Adam, "AdamW")
AdamW.__doc__ = """bert4keras's AdamW: `Adam` with `extend_with_weight_decay`'s decoupled decay."""
LionV2 = Lion
AdaFactorV1 = AdaFactorV2 = AdaFactor
extend_with_weight_decay_v2 = extend_with_weight_decay
extend_with_layer_adaptation_v2 = extend_with_layer_adaptation
extend_with_piecewise_linear_lr_v2 = extend_with_piecewise_linear_lr
extend_with_gradient_accumulation_v2 = extend_with_gradient_accumulation
extend_with_lookahead_v2 = extend_with_lookahead
extend_with_lazy_optimization_v2 = extend_with_lazy_optimization
extend_with_exponential_moving_average_v2 = extend_with_exponential_moving_average
extend_with_parameter_wise_lr_v2 = extend_with_parameter_wise_lr
#: bert4keras's names for a ``load_model(path, custom_objects=custom_objects)``
custom_objects = {"Adam": Adam, "AdaFactor": AdaFactor}
