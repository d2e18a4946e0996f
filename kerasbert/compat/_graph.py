"""bert4keras 0.11.5's ``backend`` helpers about graphs, gradients and devices, on Keras 3 and TensorFlow 2.

`kerasbert.compat.backend` re-exports them: `is_tf_keras`, `do_recompute`, `get_available_gpus`, `search_layer`,
`symbolic`, `graph_mode_decorator` and `recompute_grad`.
"""

from __future__ import annotations

import functools
import inspect
import os

import keras

from kerasbert.errors import ConfigError, fail

__all__ = ["do_recompute", "get_available_gpus", "graph_mode_decorator", "is_tf_keras", "recompute_grad",
           "search_layer", "symbolic"]

_TRUE, _FALSE = ("y", "yes", "t", "true", "on", "1"), ("n", "no", "f", "false", "off", "0")


def _env_flag(name: str, default: str = "0") -> bool:
    """An environment switch read as bert4keras reads it (``distutils.util.strtobool``)."""
    value = os.environ.get(name, default).lower()
    if value not in _TRUE + _FALSE:
        raise fail(ConfigError, f"environment variable {name}", "1/0, true/false, yes/no or on/off", repr(value))
    return value in _TRUE


is_tf_keras = True  # kerasbert's keras is Keras 3, the keras `tf.keras` names: there is no other to switch to
do_recompute = _env_flag("RECOMPUTE")  # RECOMPUTE=1: `recompute_grad` recomputes layers' activations for gradients


def get_available_gpus() -> list[str]:
    """The names of the GPUs TensorFlow sees (``"/device:GPU:0"``, ...); ``[]`` on a machine without one.

    Example:
    >>> isinstance(get_available_gpus(), list)
    True
    """
    import tensorflow as tf

    return [device.name for device in tf.config.list_logical_devices("GPU")]


def _layer_of(inputs):
    """The layer ``inputs`` is, or the one that made the tensor ``inputs``; a ConfigError for anything else."""
    if isinstance(inputs, keras.Operation):
        return inputs
    history = getattr(inputs, "_keras_history", None)
    if history is None:
        raise fail(ConfigError, "search_layer: inputs", "a layer or a tensor of a functional model (model.outputs)",
                   type(inputs).__name__)
    return history[0]


def search_layer(inputs, name: str, exclude_from: set | None = None):
    """The layer called ``name`` that ``inputs`` (a layer, or a tensor of a functional model) is or comes from,
    searched upwards through the layers that fed it (and inside nested models); None where none is.

    Example:
    >>> x = keras.Input((3,))
    >>> y = keras.layers.Dense(2, name="Last")(keras.layers.Dense(4, name="First")(x))
    >>> search_layer(y, "First").name, search_layer(y, "Missing")
    ('First', None)
    """
    exclude_from = set() if exclude_from is None else exclude_from
    layer = _layer_of(inputs)
    if layer.name == name:
        return layer
    if id(layer) in exclude_from:
        return None
    exclude_from.add(id(layer))
    if isinstance(layer, keras.Model):
        for inner in layer.layers:
            if inner.name == name:
                return inner
    nodes = layer._inbound_nodes[:1]  # Keras 3 keeps no public accessor for a layer's inputs
    for parent in (node.operation for node in (nodes[0].parent_nodes if nodes else [])):
        found = search_layer(parent, name, exclude_from)
        if found is not None:
            return found
    return None


def symbolic(f):
    """The function itself: bert4keras marks functions with it for old Keras versions."""
    return f


def graph_mode_decorator(f, *args, **kwargs):
    """``f(*args, **kwargs)`` with the gradient ``f`` defines: ``f`` returns ``(outputs, grad_fn)``, as for
    ``tf.custom_gradient``, which this is.

    Example:
    >>> import tensorflow as tf
    >>> def doubled_gradient(x):
    ...     return x * 1.0, lambda dy: 2.0 * dy
    >>> x = tf.constant(3.0)
    >>> with tf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = graph_mode_decorator(doubled_gradient, x)
    >>> float(tape.gradient(y, x))
    2.0
    """
    import tensorflow as tf

    return tf.custom_gradient(f)(*args, **kwargs)


def recompute_grad(call):
    """Decorate a layer's ``call(self, inputs, **kwargs)`` to keep no activations for the gradient, recomputing
    them in the backward pass (https://arxiv.org/abs/1604.06174): less memory for more time. Only with
    ``RECOMPUTE=1`` in the environment (bert4keras's switch, read at import); otherwise ``call`` itself.

    ``mask`` and ``training`` keyword arguments that ``call`` does not take are dropped, as bert4keras drops them.

    Example:
    >>> recompute_grad(keras.layers.Dense.call) is keras.layers.Dense.call  # without RECOMPUTE=1
    True
    """
    if not do_recompute:
        return call
    accepted = inspect.signature(call).parameters

    @functools.wraps(call)
    def recomputed(self, inputs, **kwargs):
        import tensorflow as tf

        kwargs = {key: value for key, value in kwargs.items() if key in accepted or key not in ("mask", "training")}
        flat = tf.nest.flatten(inputs)

        def forward(*flat_inputs):
            return call(self, tf.nest.pack_sequence_as(inputs, list(flat_inputs)), **kwargs)

        return tf.recompute_grad(forward)(*flat)

    return recomputed
