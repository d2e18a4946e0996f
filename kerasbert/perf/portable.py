"""The forms two steps take in a graph traced for a portable runtime (OpenVINO, onnxruntime), so it fuses them.

The ONNX and OpenVINO exports trace the model inside `portable_graph` (`kerasbert.serving.convert`), which grants
two entries of the kernel table (`kerasbert.perf.variants`): ``"portable_gelu"`` and ``"portable_layer_norm"``.
There:

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
>>> from kerasbert.perf.variants import chosen
>>> with portable_graph():
...     chosen("portable_layer_norm")
True
>>> y = portable_layer_norm(ops.reshape(ops.arange(6, dtype="float32"), (2, 3)), ops.ones(3), ops.zeros(3), 1e-12,
...                         "float32")
>>> [round(float(v), 4) for v in ops.convert_to_numpy(y)[0]]
[-1.2247, 0.0, 1.2247]
"""

from __future__ import annotations

import contextlib

from keras import ops

from kerasbert.perf.variants import granted

__all__ = ["PORTABLE_FORMS", "portable_graph", "portable_layer_norm"]

PORTABLE_FORMS = ("portable_gelu", "portable_layer_norm")


def portable_graph() -> contextlib.AbstractContextManager:
    """Trace the graphs built inside for a portable runtime: the kernel table's `PORTABLE_FORMS` are granted."""
    return granted(dict.fromkeys(PORTABLE_FORMS, True))


def portable_layer_norm(inputs, gamma, beta, epsilon: float, dtype: str):
    """``(x-μ)/√(σ²+ε)·γ + β`` over the last axis, in float32, the moments reduced over the axis list ``[-1]``."""
    x = ops.cast(inputs, "float32")
    centred = x - ops.mean(x, axis=[-1], keepdims=True)
    variance = ops.mean(ops.square(centred), axis=[-1], keepdims=True)
    return ops.cast(centred / ops.sqrt(variance + epsilon) * gamma + beta, dtype)
