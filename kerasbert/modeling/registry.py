"""The one way kerasbert registers its classes and functions with Keras: `register`, as ``kerasbert>Name``
(bert4keras's own layers in `kerasbert.compat`, whose names kerasbert's layers take too, as
``kerasbert.compat>Name``: `register_compat`).

Every layer, loss, metric function, optimizer and schedule kerasbert defines is registered where it is defined, so
a ``.keras`` file loads with ``keras.saving.load_model(path)`` and no ``custom_objects`` once
``import kerasbert.modeling`` (which imports each of those modules) has run.

Example:
>>> import keras
>>> @register
... class Twice(keras.layers.Layer):
...     def call(self, x):
...         return 2 * x
>>> keras.saving.get_registered_name(Twice)
'kerasbert>Twice'
"""

from __future__ import annotations

import keras

from kerasbert.errors import ModelError, fail

PACKAGE = "kerasbert"
COMPAT_PACKAGE = "kerasbert.compat"


def register(obj=None, *, name: str | None = None, package: str = PACKAGE):
    """Register ``obj`` (a class or function) with Keras as ``{package}>{name or its own name}``.

    Used bare (``@register``) or with a name (``register(cls, name="AdamEMA")``, ``@register(name=...)``). A name
    another class already holds is a ModelError: Keras would silently load files of the one as the other.
    """

    def decorator(target):
        key = f"{package}>{name or target.__name__}"
        held = keras.saving.get_custom_objects().get(key)
        if held is not None and (held.__module__, held.__qualname__) != (target.__module__, target.__qualname__):
            raise fail(ModelError, "registered name", "a name no other class holds",
                       f"{key} held by {held.__module__}.{held.__qualname__}")
        return keras.saving.register_keras_serializable(package=package, name=name)(target)

    return decorator if obj is None else decorator(obj)


def register_compat(obj=None, *, name: str | None = None):
    """`register` under ``kerasbert.compat>``: bert4keras's layers (``FeedForward``, ``PositionEmbedding``...)."""
    return register(obj, name=name, package=COMPAT_PACKAGE)
