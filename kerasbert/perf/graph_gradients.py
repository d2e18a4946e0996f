"""Custom gradients on TensorFlow that a long process does not pile up: one gradient function registered per kind.

``tf.custom_gradient`` in a graph (a ``tf.function`` trace, such as every ``fit``'s train step) registers a new
gradient function under a new name each time it is traced, and TensorFlow's gradient registry keeps every one, with
the closure that holds the traced graph: a process that builds and trains many models keeps every train step's
graph. Here each kind of gradient is registered once (``tf.RegisterGradient``, its name holding the kind's settings),
a traced call routes its op to it (``gradient_override_map``), and the gradient reads its inputs from the op. Eager
calls, which register nothing, take ``tf.custom_gradient`` itself.

Example:
>>> import tensorflow as tf
>>> x = tf.constant([1.0, 2.0])
>>> with tf.GradientTape() as tape:
...     tape.watch(x)
...     y = with_gradient("kerasbert_doctest_triple", lambda v: v * 2.0, lambda xs, dy: [3.0 * dy], x)
>>> tape.gradient(y, x).numpy().tolist(), y.numpy().tolist()
([3.0, 3.0], [2.0, 4.0])
>>> tf.function(lambda v: tf.gradients(with_gradient("kerasbert_doctest_triple", lambda t: t * 2.0,
...                                                  lambda xs, dy: [3.0 * dy], v), v)[0])(x).numpy().tolist()
[3.0, 3.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

_REGISTERED: dict[str, Callable] = {}  # name -> its backward: registered with TensorFlow once


def with_gradient(name: str, forward: Callable, backward: Callable, *args):
    """``forward(*args)``, whose gradient is ``backward(args, dy)``: one gradient (or None) per argument.

    Args:
        name: str. the kind of gradient, with every setting ``backward`` closes over (``"kerasbert_dropout_0.1"``):
            the first call of a name registers its ``backward`` and later calls of it reuse that one.
        forward: callable. ``*args -> tensor``.
        backward: callable. ``(args as a list of tensors, dy) -> list`` of each argument's gradient.
        args: the tensors ``forward`` takes.
    """
    import tensorflow as tf

    args = [tf.convert_to_tensor(arg) for arg in args]
    if tf.executing_eagerly():
        @tf.custom_gradient
        def eager(*xs):
            return forward(*xs), lambda dy: tuple(backward(list(xs), dy))

        return eager(*args)
    _register(name, backward)
    result = forward(*args)
    with tf.compat.v1.get_default_graph().gradient_override_map({"IdentityN": name}):
        return tf.identity_n([result, *args])[0]  # the gradient skips forward's ops: `_register` gives none to result


def _register(name: str, backward: Callable) -> None:
    """``backward`` as TensorFlow's gradient of the ``IdentityN`` ops routed to ``name``, once."""
    if name in _REGISTERED:
        return
    import tensorflow as tf

    def gradient(op, *grads) -> Sequence:
        return [None, *backward(list(op.inputs[1:]), grads[0])]  # none into forward's own ops

    tf.RegisterGradient(name)(gradient)
    _REGISTERED[name] = backward


def dense_gather(table, ids):
    """``table[ids]`` whose gradient with respect to ``table`` is dense, summed per row
    (`kerasbert.modeling.layers.lookup`), on TensorFlow.

    Example:
    >>> import tensorflow as tf
    >>> table = tf.constant([[1.0], [2.0]])
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(table)
    ...     y = dense_gather(table, tf.constant([1, 1, 0]))
    >>> type(tape.gradient(y, table)).__name__, tape.gradient(y, table).numpy().ravel().tolist()
    ('EagerTensor', [1.0, 2.0])
    """
    import tensorflow as tf

    return with_gradient("kerasbert_dense_gather", lambda t, i: tf.gather(t, i, axis=0), _dense_gather_gradient,
                         table, ids)


def _dense_gather_gradient(inputs: list, dy) -> list:
    import tensorflow as tf

    table, ids = inputs
    rows = tf.reshape(dy, (-1, tf.shape(table)[-1]))
    return [tf.math.unsorted_segment_sum(rows, tf.reshape(ids, (-1,)), num_segments=tf.shape(table)[0]), None]
