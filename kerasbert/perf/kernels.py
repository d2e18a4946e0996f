"""One call per kernel: the steps of kerasbert's layers that have faster forms, each choosing its form in one place.

A layer of `kerasbert.modeling.layers` or `kerasbert.modeling.blocks` hands each such step to one function here,
with its plain form (the layer's own math, the default); the function reads the kernel table
(`kerasbert.perf.variants.chosen`: this machine's kind, the step's width, what is forced or granted) and runs the
plain form or the variant chosen, as it traces the graph:

| kernel | variants |
|---|---|
| `layer_norm` | ``xla_layer_norm`` (training), ``portable_layer_norm``, ``centred_layer_norm`` (outside training) |
| `dropout` | ``xla_dropout`` |
| `scores` | ``onednn_scores`` |
| `project` | ``dense_2d`` |
| `activation` | ``xla_gelu`` (training), ``portable_gelu``, ``float32_activation`` (mixed-precision inference) |
| `segments` | ``one_hot_segments`` |
| `autocast` | ``half_gradients`` |

`recording` lists the forms traced inside it, ``(kernel, form)`` with ``"plain"`` for the plain form, so a test
can tell that a variant ran.

Example:
>>> from keras import ops
>>> from kerasbert.perf.variants import forced
>>> with recording() as traced, forced({"dense_2d": True}):
...     y = project(lambda t: t * 2.0, ops.ones((2, 3, 4)))
>>> tuple(y.shape), traced
((2, 3, 4), [('projection', 'dense_2d')])
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from keras import ops

from kerasbert.perf import half_gradients
from kerasbert.perf.block_variants import activation_in_float32, dense_2d, onednn_scores
from kerasbert.perf.forms import centred_layer_norm, one_hot_lookup
from kerasbert.perf.fused import (
    dropout_training,
    gelu_erf_composed,
    gelu_erf_training,
    layer_norm_training,
    plain_tensorflow_graph,
)
from kerasbert.perf.portable import portable_layer_norm
from kerasbert.perf.variants import chosen, forced

_recordings: list[list[tuple[str, str]]] = []
_second_order: list[bool] = []  # inside `second_order`
# the variants whose gradients are written by hand, exact to the first derivative only
HAND_GRADIENTS = ("xla_layer_norm", "xla_gelu", "xla_dropout", "half_gradients")


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[str, str]]]:
    """The forms the kernels trace inside, in order: ``(kernel, variant)``, or ``(kernel, "plain")``."""
    traced: list[tuple[str, str]] = []
    _recordings.append(traced)
    try:
        yield traced
    finally:
        _recordings.remove(traced)


@contextlib.contextmanager
def second_order() -> Iterator[None]:
    """Inside, the graphs traced have exact second derivatives (a gradient penalty differentiates a gradient): the
    variants with hand-written gradients off, and LayerNorm in its centred form, since Keras's moments
    (``tf.nn.moments``) stop the mean's gradient inside the variance, which leaves the first derivative exact but
    not the second."""
    with forced(dict.fromkeys(HAND_GRADIENTS, False)):
        _second_order.append(True)
        try:
            yield
        finally:
            _second_order.pop()


def _ran(kernel: str, form: str) -> None:
    for traced in _recordings:
        traced.append((kernel, form))


def layer_norm(inputs, gamma, beta, epsilon: float, dtype: str, training, plain: Callable):
    """A LayerNorm over the last axis with both weights, ``plain(inputs)`` in its plain form, returned in ``dtype``."""
    width = inputs.shape[-1]
    if _second_order:
        _ran("layer_norm", "centred_layer_norm")
        return centred_layer_norm(inputs, gamma, beta, epsilon, dtype)
    if training and chosen("xla_layer_norm", width) and plain_tensorflow_graph():
        _ran("layer_norm", "xla_layer_norm")
        return ops.cast(layer_norm_training(inputs, gamma, beta, epsilon), dtype)
    for name, form in (("portable_layer_norm", portable_layer_norm), ("centred_layer_norm", centred_layer_norm)):
        if not training and chosen(name, width):
            _ran("layer_norm", name)
            return form(inputs, gamma, beta, epsilon, dtype)
    _ran("layer_norm", "plain")
    return plain(inputs)


def dropout(inputs, rate: float, seeds, width: int | None, plain: Callable):
    """Training's dropout of ``inputs`` at ``rate``, ``plain(inputs)`` in its plain form. ``seeds``: a
    `keras.random.SeedGenerator` that the variant draws from; ``width``: the model's, which decides the variant
    (the last axis of ``inputs`` when None)."""
    width = inputs.shape[-1] if width is None else width
    if chosen("xla_dropout", width) and plain_tensorflow_graph():
        _ran("dropout", "xla_dropout")
        return dropout_training(inputs, rate, seeds.next())
    _ran("dropout", "plain")
    return plain(inputs)


def scores(q, k, seen, relative, plain: Callable):
    """The attention's float32 scores ``[B, A, Q, K]``, ``plain(q, k, seen, relative)`` in its plain form; the
    variant computes them without NEZHA's relative positions only (``relative`` None)."""
    if relative is None and chosen("onednn_scores"):
        _ran("scores", "onednn_scores")
        return onednn_scores(q, k, seen)
    _ran("scores", "plain")
    return plain(q, k, seen, relative)


def project(layer: Callable, x, activation: Callable | None = None):
    """``activation(layer(x))`` (``layer(x)`` without one) for ``x`` ``[B, S, H]``: ``layer`` a projection, or any
    function of the last axis. As 2-D matmuls on ``[B·S, H]`` where ``"dense_2d"`` is chosen, with the activation
    on the 2-D product, so that oneDNN fuses MatMul, BiasAdd and the activation."""
    apply = layer if activation is None else (lambda t: activation(layer(t)))
    if chosen("dense_2d"):
        _ran("projection", "dense_2d")
        return dense_2d(apply, x)
    _ran("projection", "plain")
    return apply(x)


def activation(name: str, plain: Callable, x, dtype: str, training):
    """The feed-forward's activation ``name`` of the inner layer ``x`` ``[..., I]``, ``plain(x)`` in its plain form."""
    fn, forms = plain, []
    if name == "gelu" and training and chosen("xla_gelu", x.shape[-1]) and plain_tensorflow_graph():
        fn, forms = gelu_erf_training, ["xla_gelu"]
    elif name == "gelu" and chosen("portable_gelu"):
        fn, forms = gelu_erf_composed, ["portable_gelu"]
    if chosen("float32_activation") and activation_in_float32(dtype, name, training):
        forms.append("float32_activation")
        y = ops.cast(fn(ops.cast(x, "float32")), dtype)
    else:
        y = fn(x)
    for form in forms or ["plain"]:
        _ran("activation", form)
    return y


def segments(table, ids, dtype: str, plain: Callable):
    """The segment embedding ``table[ids]`` in ``dtype``, ``plain(ids)`` in its plain form."""
    if chosen("one_hot_segments", int(table.shape[0])):
        _ran("segments", "one_hot_segments")
        return one_hot_lookup(table, ids, dtype)
    _ran("segments", "plain")
    return plain(ids)


def autocast(layer, training) -> contextlib.AbstractContextManager:
    """The autocast scope of a projection's call: Keras's own (nothing), or under ``"half_gradients"`` one that keeps
    its weights' gradients in bf16 (`kerasbert.perf.half_gradients`)."""
    scope = half_gradients.scope(layer, training) if chosen("half_gradients") else None
    _ran("autocast", "plain" if scope is None else "half_gradients")
    return contextlib.nullcontext() if scope is None else scope
