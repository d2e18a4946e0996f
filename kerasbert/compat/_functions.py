"""bert4keras 0.11.5's ``backend`` tensor functions over `keras.ops`, with its arguments and numbers.

`kerasbert.compat.backend` re-exports them: `align`, `reshape`, `flatten`, `dtype`, `where`, `sequence_masking`,
`batch_gather`, `pool1d`, `divisible_temporal_padding`, `root_mean_square`, `swish`, `leaky_relu`,
`attention_normalize`, `piecewise_linear`, `sinusoidal_embeddings`, `Sinusoidal`,
`apply_rotary_position_embeddings` and `sparse_multilabel_categorical_crossentropy`. They take Keras 3 tensors,
TensorFlow tensors or NumPy arrays, eagerly or inside a layer's ``call``; those that read unknown lengths run in a
``Lambda`` layer when given a functional model's symbolic tensors.
"""

from __future__ import annotations

import functools
import math
import operator

import keras
import numpy as np
from keras import ops

from kerasbert.errors import ConfigError, fail
from kerasbert.modeling.global_pointer import sparse_multilabel_categorical_crossentropy  # one copy, the library's
from kerasbert.modeling.positions import rotate, sinusoids

__all__ = ["align", "attention_normalize", "batch_gather", "divisible_temporal_padding", "dtype", "flatten",
           "leaky_relu", "piecewise_linear", "pool1d", "reshape", "root_mean_square", "sequence_masking", "swish",
           "where", "Sinusoidal", "apply_rotary_position_embeddings", "sinusoidal_embeddings",
           "sparse_multilabel_categorical_crossentropy"]


def _dims(tensor) -> list:
    """Each axis's length: an int where it is known, else a scalar tensor (the graph's length)."""
    static, dynamic = tuple(tensor.shape), ops.shape(tensor)
    return [d if d is not None else dynamic[i] for i, d in enumerate(static)]


def _in_graph(function):
    """``function`` run inside a ``Lambda`` layer when an argument is a symbolic Keras tensor (a functional model's
    ``keras.Input`` and what follows it): there its unknown lengths are graph tensors, as ``ops.shape`` reads them."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        symbolic = [i for i, arg in enumerate(args) if isinstance(arg, keras.KerasTensor)]
        if not symbolic:
            return function(*args, **kwargs)

        def call(tensors):
            filled = list(args)
            for i, tensor in zip(symbolic, tensors, strict=True):
                filled[i] = tensor
            return function(*filled, **kwargs)

        return keras.layers.Lambda(call)([args[i] for i in symbolic])

    return wrapper


def _product(values):
    return functools.reduce(operator.mul, values, 1)


def align(tensor, axes, ndim: int | None = None):
    """``tensor`` with new axes of 1 inserted so that its axis i becomes axis ``axes[i]`` of an ``ndim``-axis
    tensor (a batched ``expand_dims``); ``axes`` increasing, negative ones counted from ``ndim``.

    Example:
    >>> tuple(align(ops.ones((2, 5)), [0, 2], 4).shape)
    (2, 1, 5, 1)
    """
    rank = len(tensor.shape)
    if len(axes) != rank or (ndim is None and min(axes) < 0):
        raise fail(ConfigError, "align: axes", f"{rank} axes (one per axis of the tensor), non-negative without ndim",
                   f"{list(axes)} with ndim={ndim}")
    ndim = ndim or max(axes) + 1
    kept = {axis % ndim for axis in axes}
    for position in range(ndim):
        if position not in kept:
            tensor = ops.expand_dims(tensor, position)
    return tensor


@_in_graph
def reshape(tensor, *args):
    """``ops.reshape(tensor, shape)`` for one argument; for ``(shape1, axis1, shape2, axis2, ...)``, axis1 becomes
    the axes ``shape1`` (one -1 among them: the rest of its length), and so on.

    Example:
    >>> tuple(reshape(ops.ones((2, 6, 4)), (2, -1), 1).shape)
    (2, 2, 3, 4)
    """
    if len(args) == 1:
        return ops.reshape(tensor, args[0])
    if len(args) % 2:
        raise fail(ConfigError, "reshape: args", "one shape, or (shape, axis) pairs", f"{len(args)} arguments")
    shape = [[d] for d in _dims(tensor)]
    for new, axis in zip(args[::2], args[1::2], strict=True):
        new = list(new)
        if new.count(-1) > 1:
            raise fail(ConfigError, "reshape: shape", "at most one -1", repr(new))
        if -1 in new:
            new[new.index(-1)] = shape[axis][0] // -_product(new)
        shape[axis] = new
    return ops.reshape(tensor, [d for dims in shape for d in dims])


@_in_graph
def flatten(tensor, start: int | None = None, end: int | None = None):
    """``tensor`` with its axes ``start:end`` (default: all) merged into one.

    Example:
    >>> tuple(flatten(ops.ones((2, 3, 4, 5)), 1, 3).shape)
    (2, 12, 5)
    """
    start, end = start or 0, end or len(tensor.shape)
    dims = _dims(tensor)
    return ops.reshape(tensor, dims[:start] + [_product(dims[start:end])] + dims[end:])


def dtype(x) -> str | None:
    """The dtype name of a tensor or variable; None for anything else (a Python number, a NumPy array), as
    bert4keras's ``K.dtype`` wrapper answers.

    Example:
    >>> dtype(ops.ones(2)), dtype(1.0)
    ('float32', None)
    """
    if isinstance(x, (np.ndarray, np.generic)) or not hasattr(x, "dtype"):
        return None
    return keras.backend.standardize_dtype(x.dtype)


def where(cond, x, y):
    """``ops.where`` that broadcasts all three and gives a plain number the other side's dtype (floatx if both are).

    Example:
    >>> ops.convert_to_numpy(where(ops.array([True, False]), ops.ones((2, 2)), -1)).tolist()
    [[1.0, -1.0], [1.0, -1.0]]
    """
    dx, dy = dtype(x), dtype(y)
    if dx is None:
        x = ops.convert_to_tensor(x, dy or keras.config.floatx())
    if dy is None:
        y = ops.convert_to_tensor(y, dx or keras.config.floatx())
    return ops.where(ops.cast(cond, "bool"), x, y)


def _full_mask(x, mask, axis):
    """``mask`` ``[batch, seq]`` aligned to x along axis 0 and each sequence axis, and-ed over those axes."""
    ndim = len(x.shape)
    axes = [1] if axis is None else list(axis) if isinstance(axis, (list, tuple)) else [axis]
    mask = ops.cast(mask, "bool")
    full = None
    for ax in axes:
        aligned = align(mask, [0, ax % ndim], ndim)
        full = aligned if full is None else ops.logical_and(full, aligned)
    return full


def sequence_masking(x, mask=None, value=0, axis=None, bias=None, return_mask: bool = False):
    """``x`` with ``value`` where ``mask`` is 0, as bert4keras 0.11.5 masks a sequence.

    Args:
        x: tensor. the values, ``[batch, ..., seq, ...]``.
        mask: tensor or None. ``[batch, seq]``, 1 (True) where kept.
        value: number. what masked places become (``-np.inf`` before a softmax).
        axis: int, list of int or None. the sequence axis (default 1); with a list, masked along each.
        bias: tensor or None. a bool tensor is one more mask; any other is added to the kept values.
        return_mask: bool. also return the mask as aligned to ``x`` (None without mask and bias).

    Example:
    >>> x = ops.ones((1, 3))
    >>> ops.convert_to_numpy(sequence_masking(x, ops.array([[1, 1, 0]]), -math.inf)).tolist()
    [[1.0, 1.0, -inf]]
    """
    if mask is not None:
        mask = _full_mask(x, mask, axis)
    if bias is not None and dtype(bias) == "bool":
        mask = bias if mask is None else ops.logical_and(mask, bias)
    elif bias is not None:
        x = x + bias
    if mask is not None:
        x = where(mask, x, float(value) if isinstance(value, str) else value)  # "-inf" too
    return (x, mask) if return_mask else x


@_in_graph
def batch_gather(params, indices):
    """``tf.gather(params, indices, batch_dims=ndim(indices) - 1)``: along the axis after indices' leading ones,
    the items each row of ``indices`` names (cast to int32 when not integers).

    Example:
    >>> ops.convert_to_numpy(batch_gather(ops.array([[1.0, 2.0, 3.0]]), ops.array([[2, 0]]))).tolist()
    [[3.0, 1.0]]
    """
    if not dtype(indices) or not dtype(indices).startswith(("int", "uint")):
        indices = ops.cast(indices, "int32")
    axis = len(indices.shape) - 1
    extra = len(params.shape) - len(indices.shape)
    if extra:  # gather whole rows: indices [..., k] -> [..., k, 1..] broadcast over params' trailing axes
        dims = _dims(params)
        indices = ops.reshape(indices, (*_dims(indices), *[1] * extra))
        indices = ops.broadcast_to(indices, _dims(indices)[:axis + 1] + dims[axis + 1:])
    return ops.take_along_axis(params, indices, axis=axis)


def pool1d(x, pool_size: int, strides: int = 1, padding: str = "valid", data_format: str | None = None,
           pool_mode: str = "max"):
    """Max (``pool_mode="max"``) or average (``"avg"``) pooling of a sequence of vectors ``[batch, seq, dim]``
    (``[batch, dim, seq]`` with ``data_format="channels_first"``) along the sequence.

    Example:
    >>> ops.convert_to_numpy(pool1d(ops.reshape(ops.arange(4.0), (1, 4, 1)), 2, 2))[0, :, 0].tolist()
    [1.0, 3.0]
    """
    pools = {"max": ops.max_pool, "avg": ops.average_pool}
    if pool_mode not in pools:
        raise fail(ConfigError, "pool1d: pool_mode", '"max" or "avg"', repr(pool_mode))
    return pools[pool_mode](x, pool_size, strides, padding, data_format or keras.config.image_data_format())


@_in_graph
def divisible_temporal_padding(x, n: int):
    """``x`` ``[batch, seq, ...]`` padded with zeros at the end of axis 1 to a multiple of ``n``.

    Example:
    >>> tuple(divisible_temporal_padding(ops.ones((2, 5, 3)), 4).shape)
    (2, 8, 3)
    """
    length = ops.shape(x)[1]
    extra = (n - length % n) % n
    return ops.pad(x, [[0, 0], [0, extra]] + [[0, 0]] * (len(x.shape) - 2))


def root_mean_square(x, axis=None, keepdims: bool = False):
    """``sqrt(mean(x²))`` over ``axis`` (all axes for None).

    Example:
    >>> float(root_mean_square(ops.array([3.0, 4.0, 0.0, 0.0])))
    2.5
    """
    return ops.sqrt(ops.mean(ops.square(x), axis=axis, keepdims=keepdims))


def swish(x):
    """``x · sigmoid(x)`` (``tf.nn.swish``), as a named function for a config's activation."""
    return ops.silu(x)


def leaky_relu(x, alpha: float = 0.2):
    """``x`` where positive, ``alpha · x`` elsewhere (``tf.nn.leaky_relu``)."""
    return ops.leaky_relu(x, negative_slope=alpha)


@_in_graph
def attention_normalize(a, mask=None, axis: int = -1, method: str = "softmax", bias=None):
    """Attention scores ``a`` to weights along ``axis``, ``mask``ed (-inf) and ``bias``ed as `sequence_masking`.

    Methods: ``"softmax"``; ``"squared_relu"`` (``relu(a)² / length``, https://arxiv.org/abs/2202.10447);
    ``"softmax_plus"`` (softmax of ``a · log(max(length, 16)) / log(512)``, https://kexue.fm/archives/8823),
    ``length`` the number of unmasked keys. Another name gives the masked scores, as bert4keras does.

    Example:
    >>> ops.convert_to_numpy(attention_normalize(ops.zeros((1, 1, 4)), ops.array([[1, 1, 0, 0]]))).tolist()
    [[[0.5, 0.5, 0.0, 0.0]]]
    """
    a, mask = sequence_masking(a, mask, -math.inf, axis, bias, True)
    if method == "softmax":
        return ops.softmax(a, axis=axis)
    if mask is None:
        length = ops.cast(ops.shape(a)[-1], keras.config.floatx())
    else:
        length = ops.sum(ops.cast(mask, keras.config.floatx()), axis=axis, keepdims=True)
    if method == "squared_relu":
        return ops.relu(a) ** 2 / length
    if method == "softmax_plus":
        return ops.softmax(a * ops.log(ops.maximum(length, 16.0)) / np.log(512), axis=axis)
    return a


def piecewise_linear(t, schedule: dict, from_zero: bool = True):
    """The piecewise linear function through ``schedule``'s points ``{t: value}``: ``{1000: 1, 2000: 0.1}`` rises
    from 0 to 1 over t in [0, 1000] (``from_zero``: a point (0, 0) is added where t=0 has none), falls to 0.1 by
    2000 and stays there; before the first point it is the first value.

    Example:
    >>> [round(float(piecewise_linear(t, {1000: 1, 2000: 0.1})), 4) for t in (500, 1500, 3000)]
    [0.5, 0.55, 0.1]
    """
    points = sorted(schedule.items())
    if from_zero and points[0][0] != 0:
        points = [(0, 0.0)] + points
    t = ops.cast(t, keras.config.floatx())
    value = ops.ones_like(t) * points[0][1]
    for (t0, v0), (t1, v1) in zip(points, points[1:] + [(None, points[-1][1])], strict=True):
        segment = v1 * ops.ones_like(t) if t1 is None else v0 + (v1 - v0) / (t1 - t0) * (t - t0)
        value = ops.where(t >= t0, segment, value)
    return value


def sinusoidal_embeddings(pos, dim: int, base: float = 10000):
    """``[..., dim]`` sinusoidal encodings of positions ``pos`` (Vaswani et al. 2017, §3.5), sin and cos
    interleaved pair by pair: ``[sin θ₀, cos θ₀, sin θ₁, ...]``, ``θᵢ = pos / base^(2i/dim)``.

    Example:
    >>> ops.convert_to_numpy(sinusoidal_embeddings(ops.array([0.0]), 4)).tolist()
    [[0.0, 1.0, 0.0, 1.0]]
    """
    if dim % 2:
        raise fail(ConfigError, "sinusoidal_embeddings: dim", "an even number", str(dim))
    return sinusoids(pos, dim, base)


@keras.saving.register_keras_serializable(package="kerasbert")
class Sinusoidal(keras.initializers.Initializer):
    """An initializer of a ``[positions, dim]`` table with `sinusoidal_embeddings` of 0, 1, ... (a fixed
    position table to train from).

    Example:
    >>> [[round(v, 4) for v in row] for row in ops.convert_to_numpy(Sinusoidal()((2, 2))).tolist()]
    [[0.0, 1.0], [0.8415, 0.5403]]
    """

    def __call__(self, shape, dtype=None):
        size, dim = shape
        table = sinusoidal_embeddings(ops.arange(size, dtype="float32"), dim)
        return ops.cast(table, dtype or keras.config.floatx())

    def get_config(self):
        return {}


def apply_rotary_position_embeddings(sinusoidal, *tensors):
    """RoPE (Su et al. 2021, https://arxiv.org/abs/2104.09864) of each tensor ``[batch, seq, ..., dim]`` by the
    ``sinusoidal`` ``[batch, seq, dim]`` of its positions (`sinusoidal_embeddings`); one tensor, or a list.

    Example:
    >>> x = ops.ones((1, 2, 2))
    >>> rotated = apply_rotary_position_embeddings(sinusoidal_embeddings(ops.arange(2.0), 2)[None], x)
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(rotated)[0, 1]]
    [-0.3012, 1.3818]
    """
    if not tensors or any(tuple(t.shape) != tuple(tensors[0].shape) for t in tensors[1:]):
        raise fail(ConfigError, "apply_rotary_position_embeddings: tensors", "one or more tensors of one shape",
                   ", ".join(str(tuple(t.shape)) for t in tensors) or "none")
    sinusoidal = align(sinusoidal, [0, 1, -1], len(tensors[0].shape))  # (batch, seq, 1.., dim)
    outputs = [rotate(tensor, sinusoidal) for tensor in tensors]
    return outputs[0] if len(outputs) == 1 else outputs
