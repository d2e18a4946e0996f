"""The optimizer and learning-rate schedule `kerasbert.finetune.training` compiles with.

`LayerwiseAdamW` is Keras's ``AdamW`` with a learning rate that shrinks layer by layer down from the head
(and an optional XLA-compiled update); `WarmupSchedule` is a linear warmup followed by cosine, linear or
no decay. Both are registered, so a saved optimizer state names them.
"""

from __future__ import annotations

import math

import keras

from kerasbert import layer_names as names
from kerasbert.choices import SCHEDULES
from kerasbert.internals import optimizer_variables, variable_index
from kerasbert.modeling.registry import register

__all__ = ["LayerwiseAdamW", "WarmupSchedule"]


@register
class LayerwiseAdamW(keras.optimizers.AdamW):
    """Keras ``AdamW`` whose learning rate shrinks by ``layer_decay`` per layer below the top.

    Counting down from the head: ``Transformer-i`` learns at ``lr · decay^(L-i)`` (the top layer at
    ``lr · decay``), the embeddings at ``lr · decay^(L+1)``; the head, pooler and CRF at ``lr``. ALBERT's
    shared block (``Transformer-MultiHeadSelfAttention``, no index) is every layer at once; it learns at the top
    layer's ``lr · decay``, the rate of the block nearest the head, so a shared block is never slowed by the
    depth of the layers below.

    With ``xla_update``, a training step that is not compiled with XLA still applies the update as one
    XLA-compiled function: the plain graph runs AdamW's arithmetic as a dozen passes over every weight and
    both moments, XLA as one fused pass. It is for a step that stays out of XLA for another reason (bfloat16
    on CPU, where TensorFlow's oneDNN matmuls use the CPU's AMX units and XLA's do not; a CRF); on
    TensorFlow, and only outside a distribution strategy.

    Args:
        layer_decay: float. the factor per layer, in (0, 1]; 1 is plain AdamW.
        num_layers: int. L, the number of transformer layers.
        xla_update: bool. apply the update as one XLA-compiled function (see above).
        **kwargs: ``keras.optimizers.AdamW`` arguments.
    """

    half_gradients = True  # takes gradients in another dtype than their variable's (`kerasbert.perf.half_gradients`)

    def __init__(self, layer_decay: float = 1.0, num_layers: int = 12, xla_update: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.layer_decay, self.num_layers, self.xla_update = layer_decay, num_layers, xla_update
        self._xla_apply = None

    def lr_scale(self, path: str) -> float:
        """The learning-rate factor of the variable at ``path`` (``Transformer-3-FeedForward/kernel``).

        Example:
        >>> optimizer = LayerwiseAdamW(0.5, num_layers=2)
        >>> [optimizer.lr_scale(p) for p in ("CLS-Dense/kernel", "Transformer-1-FeedForward/kernel",
        ...                                  "Transformer-FeedForward/kernel", "Embedding-Token/embeddings")]
        [1.0, 0.5, 0.5, 0.125]
        """
        block = names.parse_block(path)  # (index, part) under Transformer-{index}-
        if block is not None:
            depth = self.num_layers - block[0]
        elif path.startswith(names.BLOCK_PREFIX):  # ALBERT's shared block: the top layer's rate
            depth = 1
        else:
            depth = self.num_layers + 1 if path.startswith(names.EMBEDDING_PREFIX) else 0
        return self.layer_decay ** depth

    def apply(self, grads, trainable_variables=None):
        if not self._compiles_update(trainable_variables):
            variables = optimizer_variables(self) if trainable_variables is None else trainable_variables
            return super().apply(_in_dtypes_of(grads, variables), trainable_variables)
        import tensorflow as tf

        if self._xla_apply is None:  # gradients cast to their variables' dtypes inside, where it costs no pass
            self._xla_apply = tf.function(lambda dense: super(LayerwiseAdamW, self).apply(
                _in_dtypes_of(dense, optimizer_variables(self))), jit_compile=True)
        # an embedding's gradient (tf.IndexedSlices, as many rows as the batch has tokens) made dense here, in
        # the plain graph, and every gradient given its variable's static shape (a step traced for inputs of
        # any length leaves some unknown): the XLA function then compiles once
        return self._xla_apply([g if g is None else tf.ensure_shape(tf.convert_to_tensor(g), v.shape)
                                for g, v in zip(grads, optimizer_variables(self), strict=True)])

    def _compiles_update(self, trainable_variables) -> bool:
        """``xla_update`` is on and can be: TensorFlow, a built optimizer, its own variables, inside a traced
        step and outside a distribution strategy (whose cross-replica update cannot run inside XLA)."""
        if not (self.xla_update and self.built and keras.config.backend() == "tensorflow"):
            return False
        import tensorflow as tf

        own = trainable_variables is None or [id(v) for v in trainable_variables] == [
            id(v) for v in optimizer_variables(self)]
        return own and tf.inside_function() and not tf.distribute.has_strategy()

    def update_step(self, gradient, variable, learning_rate):
        if type(gradient).__name__ == "IndexedSlices":
            # an embedding's gradient on TensorFlow: made dense here once, not twice inside AdamW (m, then v)
            import tensorflow as tf

            gradient = tf.convert_to_tensor(gradient)
        # the TensorFlow backend passes the backend variable; its Keras variable knows the path
        scale = self.lr_scale(optimizer_variables(self)[variable_index(self, variable)].path)
        super().update_step(gradient, variable, learning_rate * scale if scale != 1 else learning_rate)

    def get_config(self):
        return {**super().get_config(), "layer_decay": self.layer_decay, "num_layers": self.num_layers,
                "xla_update": self.xla_update}


def _in_dtypes_of(grads, variables) -> list:
    """Each gradient in its variable's dtype (a bf16 gradient of a float32 weight: `kerasbert.perf.half_gradients`)."""
    return [g if g is None or g.dtype == v.dtype else keras.ops.cast(g, v.dtype)
            for g, v in zip(grads, variables, strict=True)]


@register
class WarmupSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0 to ``peak`` over ``warmup`` steps, then ``decay`` over the remaining steps.

    ``cosine``: ``peak · ½(1 + cos(π·p))``, ``linear``: ``peak · (1 - p)``, ``constant``: ``peak``, where
    ``p`` is the share of the decay steps done (Keras's ``CosineDecay`` with ``warmup_steps`` is the first).

    Example:
    >>> schedule = WarmupSchedule(1e-3, total=10, warmup=2, decay="linear")
    >>> [round(float(schedule(step)), 6) for step in (0, 1, 2, 6, 10)]
    [0.0, 0.0005, 0.001, 0.0005, 0.0]
    """

    DECAYS = SCHEDULES  # the names ``kerasbert train --schedule`` takes

    def __init__(self, peak: float, total: int, warmup: int = 0, decay: str = "cosine"):
        self.peak, self.total, self.warmup, self.decay = peak, total, warmup, decay

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        done = keras.ops.clip((step - self.warmup) / max(1, self.total - self.warmup), 0.0, 1.0)
        if self.decay == "cosine":
            factor = 0.5 * (1.0 + keras.ops.cos(math.pi * done))
        else:
            factor = 1.0 - done if self.decay == "linear" else keras.ops.ones_like(done)
        if self.warmup:
            factor = keras.ops.where(step < self.warmup, step / self.warmup, factor)
        return self.peak * factor

    def get_config(self):
        return {"peak": self.peak, "total": self.total, "warmup": self.warmup, "decay": self.decay}
