"""The forms two steps take in a graph traced for a portable runtime (OpenVINO, onnxruntime), so it fuses them.

The ONNX and OpenVINO exports trace the model inside `portable_graph` (`kerasbert.serving.convert`). There:

- the feed-forward's erf GELU is written ``0.5·x·(1+erf(x/√2))`` (`kerasbert.perf.fused.gelu_erf_composed`), the
  pattern OpenVINO turns into one ``Gelu``, a post-op of the matmul before it; Keras writes
  ``0.5·x·erfc(-x/√2)``, the form TensorFlow's oneDNN fuses, which OpenVINO runs as a dozen elementwise passes
  over the inner layer;
- LayerNorm is written ``(x-μ)/√(σ²+ε)·γ + β`` with its axis as a list (`portable_layer_norm`), the pattern
  OpenVINO fuses into one ``MVN`` (a scalar axis stops its fusion with an error).

onnxruntime fuses neither form as tf2onnx writes them, and runs both at the same speed. Both give the plain
layers' numbers within float32 rounding (`tests/serving/test_export_portable.py`); the SavedModel export and every
TensorFlow graph keep Keras's forms.

Example:
>>> from keras import ops
>>> with portable_graph():
...     in_portable_graph()
True
>>> y = portable_layer_norm(ops.reshape(ops.arange(6, dtype="float32"), (2, 3)), ops.ones(3), ops.zeros(3), 1e-12,
...                         "float32")
>>> [round(float(v), 4) for v in ops.convert_to_numpy(y)[0]]
[-1.2247, 0.0, 1.2247]
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from keras import ops

__all__ = ["in_portable_graph", "portable_graph", "portable_layer_norm"]

_state = threading.local()


@contextlib.contextmanager
def portable_graph() -> Iterator[None]:
    """Trace the graphs built inside for a portable runtime (this thread only)."""
    saved = in_portable_graph()
    _state.on = True
    try:
        yield
    finally:
        _state.on = saved


def in_portable_graph() -> bool:
    """Whether the graph being traced is for a portable runtime (`portable_graph`)."""
    return getattr(_state, "on", False)


def portable_layer_norm(inputs, gamma, beta, epsilon: float, dtype: str):
    """``(x-μ)/√(σ²+ε)·γ + β`` over the last axis, in float32, the moments reduced over the axis list ``[-1]``."""
    x = ops.cast(inputs, "float32")
    centred = x - ops.mean(x, axis=[-1], keepdims=True)
    variance = ops.mean(ops.square(centred), axis=[-1], keepdims=True)
    return ops.cast(centred / ops.sqrt(variance + epsilon) * gamma + beta, dtype)
