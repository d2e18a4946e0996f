"""Every private Keras and TensorFlow name kerasbert reads, in one place, each with a fallback.

No public API answers these questions, so kerasbert reads attributes that Keras or TensorFlow may rename in
any release. Each accessor here returns a safe answer when its name is gone (the feature that needs it
degrades, nothing crashes), and `missing()` lists the names this installation lacks: the test suite
fails on it, naming the symbol, so a move is found at once rather than as a silent slowdown.

Why each is still needed (`SYMBOLS` names the reader):

- ``IsMklEnabled``: whether oneDNN is on in this process, which the environment variable does not tell (TensorFlow
  decides by CPU when it is unset); the mixed-precision feed-forward asks it (`kerasbert.perf.onednn`).
- ``get_enclosing_xla_context``: whether a layer is traced inside an XLA compile, which a layer cannot see
  otherwise (``jit_compile`` is the model's); the XLA-kernel variants (`kerasbert.perf.fused`) must not nest
  in one.
- ``Model._nodes_by_depth`` and ``Layer._inbound_nodes``: a functional model's graph, call by call, for the
  annotated summary (Keras's own ``summary`` reads the same).
- ``keras.src.backend.AutocastScope``: the scope in which Keras casts a layer's float32 variables to its compute
  dtype; a subclass keeps a projection's gradient in bf16 (`kerasbert.perf.half_gradients`).
- ``Optimizer._trainable_variables`` and ``Optimizer._get_variable_index``: on TensorFlow ``update_step``
  receives the backend variable, without its Keras path; these map it back to the Keras variable, for a
  per-variable learning rate (`kerasbert.modeling.optimizers.LayerwiseAdamW`) and kerasbert's optimizer wrappers.
"""

from __future__ import annotations

__all__ = ["SYMBOLS", "autocast_scope_class", "enclosing_xla_context", "inbound_nodes", "missing", "nodes_by_depth",
           "onednn_enabled", "optimizer_variables", "variable_index"]

#: each private name, and what reads it
SYMBOLS = {
    "tensorflow.python.util._pywrap_util_port.IsMklEnabled": "onednn_enabled: is this TensorFlow built with oneDNN",
    "tf.__internal__.get_enclosing_xla_context": "enclosing_xla_context: is the caller inside an XLA compile",
    "keras.src.backend.AutocastScope": "autocast_scope_class: the half_gradients variant's cast",
    "keras.Model._nodes_by_depth": "nodes_by_depth: the summary's graph walk",
    "keras.layers.Layer._inbound_nodes": "inbound_nodes: the summary's per-call rows",
    "keras.optimizers.Optimizer._trainable_variables": "optimizer_variables: LayerwiseAdamW's per-variable rate",
    "keras.optimizers.Optimizer._get_variable_index": "variable_index: LayerwiseAdamW's per-variable rate",
}


def onednn_enabled() -> bool:
    """TensorFlow's oneDNN kernels are on in this process (False when the name is gone)."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return False
    return bool(getattr(_pywrap_util_port, "IsMklEnabled", lambda: False)())


def enclosing_xla_context():
    """The XLA compile enclosing the caller, or None (also None when the name is gone: treated as no XLA)."""
    import tensorflow as tf

    get = getattr(getattr(tf, "__internal__", None), "get_enclosing_xla_context", None)
    return get() if get is not None else None


def nodes_by_depth(model) -> dict:
    """A functional model's graph nodes by depth ({} for a subclassed model, or when the name is gone)."""
    return getattr(model, "_nodes_by_depth", None) or {}


def inbound_nodes(layer) -> list:
    """The calls of ``layer`` in the graphs it belongs to ([] when never called symbolically or gone)."""
    return getattr(layer, "_inbound_nodes", None) or []


def optimizer_variables(optimizer) -> list:
    """The variables ``optimizer`` was built for, in its own order (what ``apply`` pairs gradients with)."""
    return list(getattr(optimizer, "_trainable_variables", None) or [])


def variable_index(optimizer, variable) -> int:
    """The position of ``variable`` (a backend variable, as ``update_step`` receives it) in
    `optimizer_variables`."""
    return optimizer._get_variable_index(variable)


def autocast_scope_class():
    """Keras's ``AutocastScope`` class (None when the name is gone)."""
    try:
        from keras.src.backend import AutocastScope
    except ImportError:
        return None
    return AutocastScope


def missing() -> list[str]:
    """The names of `SYMBOLS` that this Keras and TensorFlow do not have ([] when all are there).

    Example:
    >>> missing()
    []
    """
    import keras
    import tensorflow as tf

    found = {"tf.__internal__.get_enclosing_xla_context": hasattr(getattr(tf, "__internal__", None),
                                                                  "get_enclosing_xla_context")}
    try:
        from tensorflow.python.util import _pywrap_util_port

        found["tensorflow.python.util._pywrap_util_port.IsMklEnabled"] = hasattr(_pywrap_util_port, "IsMklEnabled")
    except ImportError:
        found["tensorflow.python.util._pywrap_util_port.IsMklEnabled"] = False
    inputs = keras.Input((2,))
    dense = keras.layers.Dense(1)
    model = keras.Model(inputs, dense(inputs))
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    found.update({"keras.src.backend.AutocastScope": autocast_scope_class() is not None,
                  "keras.Model._nodes_by_depth": bool(getattr(model, "_nodes_by_depth", None)),
                  "keras.layers.Layer._inbound_nodes": bool(getattr(dense, "_inbound_nodes", None)),
                  "keras.optimizers.Optimizer._trainable_variables": bool(getattr(optimizer, "_trainable_variables",
                                                                                  None)),
                  "keras.optimizers.Optimizer._get_variable_index": hasattr(optimizer, "_get_variable_index")})
    return [name for name in SYMBOLS if not found[name]]
