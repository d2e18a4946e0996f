"""Mixed-bf16 training without the cast of each projection's gradient back to float32 (variant ``"half_gradients"``).

Under Keras's mixed precision a layer's float32 kernel is cast to bf16 where the layer reads it, and the gradient
of that cast casts the kernel's bf16 gradient back to float32: a pass over every kernel, in TensorFlow's plain
graph, each step. Here a projection (`kerasbert.modeling.blocks.Projection`) reads its weights through a cast
whose gradient stays in bf16, and kerasbert's optimizer (`kerasbert.modeling.optimizers.LayerwiseAdamW`, whose
``half_gradients`` says it takes them) casts each gradient to its variable's dtype inside its XLA-compiled
update, where the cast costs no pass of its own. The bf16 gradient is the same number either way, so the update
is the same. The projection's autocast kernel (`kerasbert.perf.kernels.autocast`) takes `scope` where the
kernel table chooses the variant, and the table's entry needs a grant: only a step of a kerasbert model
(`kerasbert.modeling.backbone.TransformerModel.train_step`) whose optimizer takes them gives it (`allowing`).
It runs on TensorFlow's plain graph, outside a distribution strategy (whose all-reduce would then sum in bf16):
any other optimizer gets float32 gradients as Keras gives them.
"""

from __future__ import annotations

import contextlib
import functools

from kerasbert.perf.variants import granted


def allowing(allowed: bool) -> contextlib.AbstractContextManager:
    """Whether the projections traced inside may hand their gradients over in bf16 (``allowed``): grants the kernel
    table's ``"half_gradients"`` entry, or withholds it."""
    return granted({"half_gradients": bool(allowed)})


def scope(layer, training) -> contextlib.AbstractContextManager | None:
    """The autocast scope that keeps ``layer``'s weights' gradients in bf16, where the layer trains in mixed bf16 on
    TensorFlow's plain graph outside a distribution strategy; None elsewhere (Keras's own autocast)."""
    if not (training and layer.compute_dtype == "bfloat16" and layer.variable_dtype == "float32"):
        return None
    from kerasbert.perf.fused import plain_tensorflow_graph

    if not plain_tensorflow_graph():
        return None
    import tensorflow as tf

    cls = _scope_class()
    return None if cls is None or tf.distribute.has_strategy() else cls("bfloat16")


@functools.cache
def _scope_class():
    """Keras's ``AutocastScope`` with float32 values cast by `_cast_keeping_gradient` (None without the class)."""
    from kerasbert.internals import autocast_scope_class

    base = autocast_scope_class()
    if base is None:
        return None

    class HalfGradientScope(base):
        def maybe_cast(self, value):
            if value.dtype == "float32":
                return _cast_keeping_gradient(value)
            return super().maybe_cast(value)

    return HalfGradientScope


def _cast_keeping_gradient(value):
    """``value`` in bf16, whose gradient comes back in bf16 (the gradient of a cast, less its cast)."""
    import tensorflow as tf

    @tf.custom_gradient
    def cast(x):
        return tf.cast(x, tf.bfloat16), lambda dy: dy

    return cast(value)
