"""bert4keras's loss layers on Keras 3: `Loss`, the base of a layer that adds its own loss to the model, and
`MaximumEntropyMarkovModel`, the bidirectional MEMM tagging head (``trans``, ``sparse_loss``, ``sparse_accuracy``).

Both follow bert4keras's contracts so its scripts port unchanged: a `Loss` subclass overrides ``compute_loss``
and the model compiles without a loss; the MEMM's output is the emissions with padded steps set to ``-inf``,
from which its losses and accuracies read the mask back, as the CRF's do.
"""

from __future__ import annotations

import math

import keras
from keras import ops

from kerasbert.errors import ConfigError, fail
from kerasbert.modeling.registry import register


def _as_floats(inputs):
    """``inputs`` with the integer tensors cast to floatx: bert4keras's model inputs are float32 (Keras 2's
    ``Input`` default), kerasbert's ids int32, and a loss such as ``K.sum(loss * segment_ids)`` mixes them."""
    def cast(x):
        return ops.cast(x, keras.config.floatx()) if "int" in keras.backend.standardize_dtype(x.dtype) else x

    return [cast(x) for x in inputs] if isinstance(inputs, (list, tuple)) else cast(inputs)


class _Metrics:
    """`Loss.add_metric`'s means by name, in a plain holder: Keras tracks (and locks after ``build``) the state a
    layer keeps in its attributes directly, and these are made on first use, inside ``call``."""

    def __init__(self):
        self.means: dict[str, keras.metrics.Mean] = {}


@register
class Loss(keras.layers.Layer):
    """A layer that computes a loss from its inputs, adds it to the model, and passes (some of) its inputs on.

    Subclasses override ``compute_loss(inputs, mask)``. A model whose loss comes from such a layer compiles
    without a loss (``model.compile(optimizer=...)``) and trains with ``fit`` or ``train_on_batch`` on its
    inputs alone: Keras adds the layer's loss to the compiled one. ``compute_loss`` gets integer inputs (token
    and segment ids) as floatx, as bert4keras's float32 inputs, and may report terms with `add_metric`.

    Args:
        output_axis: int, list of int or None. what the layer returns: its inputs (None), ``inputs[i]`` (int),
            or ``[inputs[i] for i in output_axis]`` (list).

    Example:
    >>> class CrossEntropy(Loss):
    ...     def compute_loss(self, inputs, mask=None):
    ...         y_true, y_pred = inputs
    ...         return ops.mean(ops.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True))
    >>> x, y_in = keras.Input((4,)), keras.Input((1,))
    >>> output = CrossEntropy(1)([y_in, keras.layers.Dense(3, kernel_initializer="zeros")(x)])
    >>> model = keras.Model([x, y_in], output)
    >>> model.compile(optimizer="sgd")
    >>> round(model.train_on_batch([ops.ones((2, 4)), ops.zeros((2, 1))]), 4)  # log 3
    1.0986
    """

    def __init__(self, output_axis: int | list[int] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.output_axis = output_axis
        self._named = _Metrics()  # add_metric's means, created on first use (after build, so not tracked state)

    def call(self, inputs, mask=None):
        self.add_loss(self.compute_loss(_as_floats(inputs), mask))
        return self._select(inputs)

    def compute_loss(self, inputs, mask=None):
        """The scalar loss of ``inputs`` (their Keras masks in ``mask``); subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define compute_loss(self, inputs, mask=None)")

    def add_metric(self, value, name: str | None = None, aggregation: str | None = None):
        """Report ``value`` (a scalar tensor, such as one term of the loss) as the metric ``name``: Keras 2's
        ``Layer.add_metric``, which bert4keras's loss layers call in ``compute_loss`` and Keras 3 removed.

        The metric is the mean over the batches of an epoch, as in Keras 2; ``fit``'s history and
        ``train_on_batch`` (after the loss, in the order first added) report it under ``name``.

        Args:
            value: tensor. a scalar, or a tensor whose mean is reported.
            name: str. the metric's name in the logs.
            aggregation: None or "mean". Keras 2's argument; the mean is the only aggregation.
        """
        if not isinstance(name, str) or not name:
            raise fail(ConfigError, f"{self.name}.add_metric: name", "the metric's name, a str", repr(name),
                       'pass name=..., e.g. self.add_metric(loss, name="seq2seq_loss")')
        if aggregation not in (None, "mean"):
            raise fail(ConfigError, f"{self.name}.add_metric: aggregation", 'None or "mean"', repr(aggregation))
        if name not in self._named.means:
            self._named.means[name] = keras.metrics.Mean(name=name)
        self._named.means[name].update_state(value)

    @property
    def metrics(self):
        return [*super().metrics, *self._named.means.values()]

    def _select(self, values):
        if self.output_axis is None:
            return values
        if isinstance(self.output_axis, (list, tuple)):
            return [values[i] for i in self.output_axis]
        return values[self.output_axis]

    def compute_mask(self, inputs, mask=None):
        return None if mask is None else self._select(mask)

    def get_config(self):
        return {**super().get_config(), "output_axis": self.output_axis}


def _reverse(x, lengths):
    """Reverse the first ``lengths[b]`` steps of each row of ``x`` ``[B, S, ...]`` (as ``tf.reverse_sequence``)."""
    steps = ops.arange(ops.shape(x)[1])[None]  # (1, seq)
    index = ops.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)  # (batch, seq)
    index = ops.reshape(index, ops.shape(index) + (1,) * (len(x.shape) - 2))
    return ops.take_along_axis(x, ops.broadcast_to(index, ops.shape(x)), axis=1)


@register
class MaximumEntropyMarkovModel(keras.layers.Layer):
    """Bidirectional maximum-entropy Markov model over per-token label scores: a lighter CRF.

    Each step's label distribution is ``softmax((e_t + h_t) / 2)`` with the history ``h_t = T(y_{t-1}, ·)``
    from the gold previous label (``h_1 = e_1``); the loss is the masked mean cross-entropy of that
    distribution, averaged over the left-to-right pass and the right-to-left pass (``Tᵀ``). With
    ``hidden_dim``, ``T = L·Rᵀ`` is factored into ``l_trans`` and ``r_trans`` ``[K, hidden_dim]``.

    Padding as `ConditionalRandomField`'s: call on ``[emissions, mask]`` or on ``emissions`` with a Keras mask;
    the output is the emissions with padded steps set to ``-inf``, and the losses read the mask back from them.

    Args:
        lr_multiplier: float. the transitions are stored divided by it and used multiplied by it.
        hidden_dim: int or None. the rank of the factored transitions; None keeps a full ``trans`` ``[K, K]``.

    Example:
    >>> memm = MaximumEntropyMarkovModel()
    >>> out = memm([ops.zeros((1, 3, 2)), ops.array([[1, 1, 0]]) > 0])
    >>> _ = memm.trans.assign(ops.zeros((2, 2)))  # uniform: each real step costs log 2
    >>> round(float(memm.sparse_loss(ops.zeros((1, 3)), out)), 4)
    0.6931
    """

    def __init__(self, lr_multiplier: float = 1.0, hidden_dim: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.lr_multiplier = lr_multiplier
        self.hidden_dim = hidden_dim

    def build(self, input_shape):
        shape = input_shape[0] if isinstance(input_shape[0], (list, tuple)) else input_shape
        labels = shape[-1]
        # K·K parameters, or 2·K·hidden_dim factored
        shapes = {"trans": (labels, labels)} if self.hidden_dim is None else {
            "l_trans": (labels, self.hidden_dim), "r_trans": (labels, self.hidden_dim)}
        for name, weight_shape in shapes.items():
            weight = self.add_weight(shape=weight_shape, initializer="glorot_uniform", name=name)
            if self.lr_multiplier != 1:
                weight.assign(weight / self.lr_multiplier)
            setattr(self, "_" + name, weight)

    def _scaled(self, weight):
        return weight * self.lr_multiplier if self.lr_multiplier != 1 else weight

    @property
    def trans(self):
        """The transition scores ``[K, K]`` (the stored weight times ``lr_multiplier``)."""
        return self._scaled(self._trans)

    @property
    def l_trans(self):
        """The left factor ``L`` ``[K, hidden_dim]`` of the transitions."""
        return self._scaled(self._l_trans)

    @property
    def r_trans(self):
        """The right factor ``R`` ``[K, hidden_dim]`` of the transitions."""
        return self._scaled(self._r_trans)

    def call(self, inputs, mask=None):
        if isinstance(inputs, (list, tuple)):
            inputs, mask = inputs
        if mask is None:
            return inputs
        return ops.where(ops.cast(mask, "bool")[..., None], inputs, -math.inf)

    def compute_mask(self, inputs, mask=None):
        return None

    def _history(self, y_true, backwards: bool):
        """``T(y_t, ·)`` for each step: ``[B, S] -> [B, S, K]``."""
        if self.hidden_dim is None:
            trans = ops.transpose(self.trans) if backwards else self.trans
            return ops.take(ops.cast(trans, "float32"), y_true, axis=0)
        left, right = (self.r_trans, self.l_trans) if backwards else (self.l_trans, self.r_trans)
        left, right = ops.cast(left, "float32"), ops.cast(right, "float32")
        return ops.einsum("bnd,kd->bnk", ops.take(left, y_true, axis=0), right)

    def _scores(self, y_true, y_pred, backwards: bool):
        """The per-step logits ``(e_t + h_t) / 2`` of one pass, its labels and the float mask."""
        y_pred = ops.cast(y_pred, "float32")
        mask = ops.all(ops.not_equal(y_pred, -math.inf), axis=-1)  # (batch, seq)
        y_pred = ops.where(mask[..., None], y_pred, 0.0)
        y_true = ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")
        if backwards:
            lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
            y_true, y_pred = _reverse(y_true, lengths), _reverse(y_pred, lengths)
        history = ops.concatenate([y_pred[:, :1], self._history(y_true, backwards)[:, :-1]], axis=1)
        scores = ops.where(mask[..., None], (y_pred + history) / 2, 0.0)
        return scores, y_true, ops.cast(mask, "float32")

    def _pass_loss(self, y_true, y_pred, backwards: bool):
        scores, y_true, mask = self._scores(y_true, y_pred, backwards)
        loss = ops.sparse_categorical_crossentropy(y_true, scores, from_logits=True)
        return ops.sum(loss * mask) / ops.maximum(ops.sum(mask), 1.0)

    def _pass_accuracy(self, y_true, y_pred, backwards: bool):
        scores, y_true, mask = self._scores(y_true, y_pred, backwards)
        hits = ops.cast(ops.equal(y_true, ops.cast(ops.argmax(scores, axis=-1), "int32")), "float32")
        return ops.sum(hits * mask) / ops.maximum(ops.sum(mask), 1.0)

    def sparse_loss(self, y_true, y_pred):
        """The mean of both passes' masked cross-entropy, ``y_true`` label ids ``[B, S]``."""
        return (self._pass_loss(y_true, y_pred, False) + self._pass_loss(y_true, y_pred, True)) / 2

    def dense_loss(self, y_true, y_pred):
        """`sparse_loss` for one-hot ``y_true`` ``[B, S, K]``."""
        return self.sparse_loss(ops.argmax(y_true, axis=-1), y_pred)

    def sparse_accuracy(self, y_true, y_pred):
        """The mean of both passes' per-token accuracy given the gold history, padding excluded."""
        return (self._pass_accuracy(y_true, y_pred, False) + self._pass_accuracy(y_true, y_pred, True)) / 2

    def dense_accuracy(self, y_true, y_pred):
        """`sparse_accuracy` for one-hot ``y_true``."""
        return self.sparse_accuracy(ops.argmax(y_true, axis=-1), y_pred)

    def get_config(self):
        return {**super().get_config(), "lr_multiplier": self.lr_multiplier, "hidden_dim": self.hidden_dim}
