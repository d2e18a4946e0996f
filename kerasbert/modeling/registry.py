"""The one way kerasbert registers its classes and functions with Keras: `register`, as ``kerasbert>Name``.

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

PACKAGE = "kerasbert"


def register(obj=None, *, name: str | None = None):
    """Register ``obj`` (a class or function) with Keras as ``kerasbert>{name or its own name}``.

    Used bare (``@register``) or with a name (``register(cls, name="AdamEMA")``, ``@register(name=...)``).
    """
    decorator = keras.saving.register_keras_serializable(package=PACKAGE, name=name)
    return decorator if obj is None else decorator(obj)
