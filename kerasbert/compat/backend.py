"""``bert4keras.backend`` -> ``kerasbert.compat.backend``: every public name of bert4keras 0.11.5's module.

`keras` is Keras 3 and `tf` TensorFlow. `K` answers the Keras 2 backend calls bert4keras's examples make, each over
`keras.ops`, and the names bert4keras adds to it (`reshape`, `flatten`, `where`, `logsumexp`, `symbolic`); any other
name raises `BackendNameError` saying what to use instead. It is not a Keras 2 emulator: there is no session, graph,
placeholder, symbolic gradient or global learning phase in Keras 3. The tensor functions live in
`kerasbert.compat._functions`, the graph and device helpers in `kerasbert.compat._graph`.
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from kerasbert.compat._functions import (
    Sinusoidal,
    align,
    apply_rotary_position_embeddings,
    attention_normalize,
    batch_gather,
    divisible_temporal_padding,
    dtype,
    flatten,
    leaky_relu,
    piecewise_linear,
    pool1d,
    reshape,
    root_mean_square,
    sequence_masking,
    sinusoidal_embeddings,
    sparse_multilabel_categorical_crossentropy,
    swish,
    where,
)
from kerasbert.compat._graph import (
    do_recompute,
    get_available_gpus,
    graph_mode_decorator,
    is_tf_keras,
    recompute_grad,
    search_layer,
    symbolic,
)
from kerasbert.errors import ConfigError, KerasBertError, fail
from kerasbert.modeling.global_pointer import multilabel_categorical_crossentropy  # bert4keras keeps it here
from kerasbert.modeling.layers import gelu_erf, gelu_tanh

__all__ = ["K", "BackendNameError", "Sinusoidal", "align", "apply_rotary_position_embeddings", "attention_normalize",
           "batch_gather", "custom_objects", "divisible_temporal_padding", "do_recompute", "dtype", "flatten",
           "gelu_erf", "gelu_tanh", "gelu_version", "get_available_gpus", "graph_mode_decorator", "is_tf_keras",
           "keras", "leaky_relu", "multilabel_categorical_crossentropy", "piecewise_linear", "pool1d",
           "recompute_grad", "reshape", "root_mean_square", "search_layer", "sequence_masking", "set_gelu",
           "sinusoidal_embeddings", "sparse_multilabel_categorical_crossentropy", "swish", "symbolic", "tf", "where"]

_gelu = "erf"  # what "gelu" in a config means for models `compat.models.build_transformer_model` builds next


def set_gelu(version: str) -> None:
    """Choose the GELU that ``hidden_act: "gelu"`` builds: ``"erf"`` (exact, the default) or ``"tanh"``.

    bert4keras swaps the function Keras registers as "gelu"; kerasbert leaves Keras alone and keeps the choice
    here: `kerasbert.compat.models.build_transformer_model` reads it and builds with ``hidden_act="gelu_tanh"``.
    Models built before the call, and saved models, keep their activation.

    Args:
        version: str. "erf" or "tanh" (any case).
    """
    global _gelu
    if not isinstance(version, str) or version.lower() not in ("erf", "tanh"):
        raise fail(ConfigError, "set_gelu", '"erf" or "tanh"', repr(version))
    _gelu = version.lower()


def gelu_version() -> str:
    """The GELU `set_gelu` chose: "erf" or "tanh"."""
    return _gelu


class BackendNameError(KerasBertError, AttributeError):
    """A Keras 2 backend name that `K` does not cover."""


_INSTEAD = {
    "learning_phase": "Keras 3 has no global learning phase: pass training=... to the layer's call",
    "set_learning_phase": "Keras 3 has no global learning phase: pass training=... to the layer's call",
    "in_train_phase": "branch on the training argument of your layer's call",
    "in_test_phase": "branch on the training argument of your layer's call",
    "function": "call the model, or wrap the computation in a keras.Model",
    "placeholder": "use keras.Input",
    "variable": "use keras.Variable",
    "get_session": "Keras 3 has no session",
    "set_session": "Keras 3 has no session",
    "clear_session": "use keras.backend.clear_session",
    "gradients": "Keras 3 has no symbolic gradients: compute them in a train_step with tf.GradientTape",
}


def _axes(x, y, axes):
    """Keras 2 ``batch_dot``'s contracted axes, non-negative: default last of x with second-last of y."""
    if axes is None:
        axes = (x.ndim - 1, y.ndim - 1 if y.ndim == 2 else y.ndim - 2)
    elif isinstance(axes, int):
        axes = (axes, axes)
    return axes[0] % x.ndim, axes[1] % y.ndim


class _Backend:
    """Keras 2 backend names over `keras.ops`; arguments and defaults are Keras 2's.

    Names: abs, arange, argmax, argmin, batch_dot, binary_crossentropy, cast, categorical_crossentropy, clip,
    concatenate, cos, cumsum, dot, dtype, epsilon, equal, eval, exp, expand_dims, eye, flatten, floatx, get_value,
    greater, greater_equal, int_shape, l2_normalize, less, less_equal, log, logsumexp, max, maximum, mean, min,
    minimum, ndim, not_equal, one_hot, ones_like, permute_dimensions, pow, prod, relu, reshape, round, set_value,
    shape, sigmoid, sign, sin, softmax, softplus, sparse_categorical_crossentropy, sqrt, square, squeeze, stack, std,
    stop_gradient, sum, switch, symbolic, tanh, tile, transpose, var, where, zeros_like. Of these, ``reshape``,
    ``flatten`` and ``where`` are the functions bert4keras puts on its K (this module's `reshape`, `flatten` and
    `where`).

    Any other name raises `BackendNameError` (an `AttributeError`) naming what to use instead, `keras.ops`
    for most.

    Example:
    >>> from kerasbert.compat.backend import K
    >>> K.eval(K.sum(K.cast([[1, 2], [3, 4]], "float32"), axis=1)).tolist()
    [3.0, 7.0]
    """

    __slots__ = ()

    def __getattr__(self, name):
        hint = _INSTEAD.get(name, f"use keras.ops.{name} if it exists, or another keras.ops function")
        raise BackendNameError(f"K.{name}: expected a name kerasbert.compat.backend.K covers, found {name!r}. {hint}")

    # values and settings
    @staticmethod
    def eval(x):
        """The value as a NumPy array (a variable's too)."""
        return x.numpy() if isinstance(x, keras.Variable) else ops.convert_to_numpy(x)

    get_value = eval
    floatx = staticmethod(keras.config.floatx)
    epsilon = staticmethod(keras.config.epsilon)

    @staticmethod
    def set_value(x, value):
        x.assign(value)

    @staticmethod
    def int_shape(x):
        return tuple(x.shape)

    @staticmethod
    def ndim(x):
        return len(x.shape)

    @staticmethod
    def dtype(x):
        return keras.backend.standardize_dtype(x.dtype)

    # element-wise and comparisons
    cast = staticmethod(ops.cast)
    shape = staticmethod(ops.shape)
    abs = staticmethod(ops.abs)
    sign = staticmethod(ops.sign)
    round = staticmethod(ops.round)
    square = staticmethod(ops.square)
    exp = staticmethod(ops.exp)
    log = staticmethod(ops.log)
    sin = staticmethod(ops.sin)
    cos = staticmethod(ops.cos)
    tanh = staticmethod(ops.tanh)
    sigmoid = staticmethod(ops.sigmoid)
    relu = staticmethod(ops.relu)
    softplus = staticmethod(ops.softplus)
    maximum = staticmethod(ops.maximum)
    minimum = staticmethod(ops.minimum)
    equal = staticmethod(ops.equal)
    not_equal = staticmethod(ops.not_equal)
    greater = staticmethod(ops.greater)
    greater_equal = staticmethod(ops.greater_equal)
    less = staticmethod(ops.less)
    less_equal = staticmethod(ops.less_equal)
    stop_gradient = staticmethod(ops.stop_gradient)
    zeros_like = staticmethod(ops.zeros_like)
    ones_like = staticmethod(ops.ones_like)
    pow = staticmethod(ops.power)

    @staticmethod
    def sqrt(x):
        """Keras 2 clips at 0 first, so that a rounding error below 0 gives 0, not NaN."""
        return ops.sqrt(ops.maximum(x, 0))

    @staticmethod
    def clip(x, min_value, max_value):
        return ops.clip(x, min_value, max_value)

    # reductions: Keras 2 defaults axis=None, keepdims=False
    @staticmethod
    def sum(x, axis=None, keepdims=False):
        return ops.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def mean(x, axis=None, keepdims=False):
        return ops.mean(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def max(x, axis=None, keepdims=False):
        return ops.max(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def min(x, axis=None, keepdims=False):
        return ops.min(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def prod(x, axis=None, keepdims=False):
        return ops.prod(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def std(x, axis=None, keepdims=False):
        return ops.std(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def var(x, axis=None, keepdims=False):
        return ops.var(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def cumsum(x, axis=0):
        """Keras 2's default is axis 0 (`keras.ops.cumsum` flattens by default)."""
        return ops.cumsum(x, axis=axis)

    @staticmethod
    def argmax(x, axis=-1):
        return ops.argmax(x, axis=axis)

    @staticmethod
    def argmin(x, axis=-1):
        return ops.argmin(x, axis=axis)

    @staticmethod
    def softmax(x, axis=-1):
        return ops.softmax(x, axis=axis)

    # shapes
    reshape = staticmethod(reshape)  # bert4keras's: also (shape, axis) pairs
    flatten = staticmethod(flatten)  # bert4keras's: axes start:end merged
    where = staticmethod(where)
    symbolic = staticmethod(symbolic)

    @staticmethod
    def logsumexp(x, axis=None, keepdims=False):
        return ops.logsumexp(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def permute_dimensions(x, pattern):
        return ops.transpose(x, pattern)

    @staticmethod
    def transpose(x):
        """Keras 2 reverses every axis."""
        return ops.transpose(x)

    @staticmethod
    def expand_dims(x, axis=-1):
        return ops.expand_dims(x, axis)

    @staticmethod
    def squeeze(x, axis):
        return ops.squeeze(x, axis)

    @staticmethod
    def concatenate(tensors, axis=-1):
        return ops.concatenate(tensors, axis=axis)

    @staticmethod
    def stack(tensors, axis=0):
        return ops.stack(tensors, axis=axis)

    @staticmethod
    def tile(x, n):
        return ops.tile(x, n)

    @staticmethod
    def arange(start, stop=None, step=1, dtype="int32"):
        return ops.arange(start, stop, step, dtype=dtype)

    @staticmethod
    def one_hot(indices, num_classes):
        return ops.one_hot(indices, num_classes)

    @staticmethod
    def eye(size, dtype=None):
        """The identity matrix ``[size, size]`` in floatx (``size`` may be a tensor, such as the batch size); a
        tensor, where Keras 2 made a variable of it."""
        return ops.eye(size, dtype=dtype or keras.config.floatx())

    @staticmethod
    def l2_normalize(x, axis=None):
        """``x / sqrt(max(sum(x²), 1e-12))`` along ``axis`` (all axes for None), as ``tf.linalg.l2_normalize``."""
        return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=axis, keepdims=True), 1e-12))

    # products
    @staticmethod
    def dot(x, y):
        """Keras 2 ``dot``: contracts x's last axis with y's second-last (its only one when y is 1-D or 2-D)."""
        return ops.tensordot(x, y, axes=[[len(x.shape) - 1], [max(len(y.shape) - 2, 0)]])

    @staticmethod
    def batch_dot(x, y, axes=None):
        """Keras 2 ``batch_dot``: per batch row, contract ``axes`` (default: x's last with y's second-last, or
        last when y is 2-D); a result with the batch axis only gets a trailing axis of 1, as in Keras 2."""
        x, y = ops.convert_to_tensor(x), ops.convert_to_tensor(y)
        ax, ay = _axes(x, y, axes)
        letters = "bcdefghijklmnopqrstuvwxyz"  # "a" is the contracted axis, "b" the batch axis
        xs = ["b"] + [letters[i] for i in range(1, x.ndim)]
        ys = ["b"] + [letters[x.ndim + i] for i in range(1, y.ndim)]
        xs[ax], ys[ay] = "a", "a"
        out = [s for s in xs if s != "a"] + [s for s in ys[1:] if s != "a"]
        result = ops.einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)
        return ops.expand_dims(result, -1) if len(out) == 1 else result

    # control flow and losses
    @staticmethod
    def switch(condition, then_expression, else_expression):
        """Element-wise ``where``; a condition of lower rank applies along the leading axes, as in Keras 2."""
        then_value = then_expression() if callable(then_expression) else then_expression
        else_value = else_expression() if callable(else_expression) else else_expression
        condition = ops.convert_to_tensor(condition)
        while condition.ndim < len(ops.shape(then_value)):
            condition = ops.expand_dims(condition, -1)
        return ops.where(condition, then_value, else_value)

    @staticmethod
    def sparse_categorical_crossentropy(target, output, from_logits=False, axis=-1):
        return ops.sparse_categorical_crossentropy(target, output, from_logits=from_logits, axis=axis)

    @staticmethod
    def categorical_crossentropy(target, output, from_logits=False, axis=-1):
        return ops.categorical_crossentropy(target, output, from_logits=from_logits, axis=axis)

    @staticmethod
    def binary_crossentropy(target, output, from_logits=False):
        """Keras 2's: probabilities clipped to [ε, 1 - ε], and ε inside both logs."""
        if from_logits:
            return ops.binary_crossentropy(target, output, from_logits=True)
        eps = keras.config.epsilon()
        output = ops.clip(output, eps, 1.0 - eps)
        return -(target * ops.log(output + eps) + (1.0 - target) * ops.log(1.0 - output + eps))


K = _Backend()

custom_objects = {  # what bert4keras registers with Keras; pass it to keras.saving.load_model(custom_objects=...)
    "gelu_erf": gelu_erf,
    "gelu_tanh": gelu_tanh,
    "gelu": gelu_erf,
    "root_mean_square": root_mean_square,
    "swish": swish,
    "leaky_relu": leaky_relu,
    "Sinusoidal": Sinusoidal,
    "multilabel_categorical_crossentropy": multilabel_categorical_crossentropy,
    "initializer": keras.initializers.GlorotUniform,
}
