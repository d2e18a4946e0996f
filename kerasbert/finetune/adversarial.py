"""Training against a perturbation of the token embedding: bert4keras's three examples as a Keras 3 ``train_step``.

`enable` gives a compiled model (any model with an ``Embedding-Token`` layer) one of three steps, each the update of
bert4keras's example on the same batch:

- ``"fgm"`` (task_iflytek_adversarial_training.py): the loss's gradient ``g`` by the embedding matrix ``E``, taken
  without dropout; ``E += ε·g/(‖g‖+1e-8)`` (‖·‖ over the whole matrix); the ordinary step there (its gradient alone
  is applied, not summed with ``g``'s); then the perturbation taken off again.
- ``"gp"`` (task_iflytek_gradient_penalty.py): the loss ``L + ε/2·Σ‖∂L/∂e‖²``, ``e`` each looked-up row of ``E``
  (a token repeated in the batch counts once per occurrence, as the rows of TensorFlow's sparse gradient).
- ``"vat"`` (task_sentiment_virtual_adversarial_training.py): the model's own predictions ``p`` without dropout, a
  random direction ``d``, ``iters`` power iterations ``d <- ∇_E D(p, f(E + ξ·d/‖d‖))``, then the loss at
  ``E + ε·d/‖d‖``. With ``supervised=False`` the targets are ``p`` and the loss the compiled one (bert4keras's
  ``model_vat`` on unlabeled text, compiled with ``kld``); with ``supervised=True`` (``kerasbert train``) the step
  trains on the labelled loss at ``E`` plus the KL divergence ``KL(p ‖ f(E + r))`` at once: the training texts are
  VAT's unlabeled texts.

The step is the model's own ``train_step`` attribute, as bert4keras's examples replace the model's
``train_function``: the class and every other model are untouched, and a saved model holds no trace of it. On
TensorFlow (``tf.GradientTape``).

Example:
>>> import numpy as np, keras
>>> from kerasbert import build_transformer_model, heads
>>> model = heads.cls(build_transformer_model("tiny", verbose=False), 2)
>>> model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy")
>>> step = enable(model, "fgm", 0.5)
>>> ids = np.array([[2, 7, 9, 3]] * 2)
>>> history = model.fit([ids, np.zeros_like(ids)], np.array([0, 1]), verbose=0)
>>> step.method, len(history.history["loss"])
('fgm', 1)
"""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
from keras import ops

from kerasbert import layer_names as names
from kerasbert.choices import ADVERSARIAL_METHODS
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.perf import half_gradients, kernels

__all__ = ["AdversarialStep", "EmbeddingSplit", "enable", "numpy_normal", "unit"]

TINY = 1e-8  # bert4keras's l2_normalize: x / (‖x‖ + 1e-8)


def unit(x):
    """``x / (‖x‖ + 1e-8)``, the norm over every entry (bert4keras's ``l2_normalize``).

    Example:
    >>> [round(float(v), 6) for v in ops.convert_to_numpy(unit(ops.array([3.0, 4.0])))]
    [0.6, 0.8]
    """
    return x / (ops.sqrt(ops.sum(ops.square(x))) + TINY)


def numpy_normal(shape: tuple[int, ...]):
    """A float64 normal draw of ``shape`` from NumPy's global generator, inside the step: VAT's first direction as
    bert4keras's example draws it (``np.random.randn``), so ``np.random.seed`` fixes it. Not under XLA."""
    import tensorflow as tf

    draw = tf.numpy_function(lambda: np.random.randn(*shape), [], tf.float64, stateful=True)
    return tf.ensure_shape(draw, shape)


class EmbeddingSplit:
    """A model cut at its token embedding: the lookup (`embed`) and the rest of the graph from the looked-up rows
    and the other inputs (`run`), the layers the model's own.

    Args:
        model: keras.Model. a functional model whose input feeds the layer ``name`` directly.
        name: str. the token embedding's layer name (bert4keras's ``Embedding-Token``).

    Example:
    >>> import numpy as np
    >>> from kerasbert import build_transformer_model
    >>> bert = build_transformer_model("tiny", verbose=False)
    >>> split, ids = EmbeddingSplit(bert), np.array([[2, 7, 3]])
    >>> x = [ids, np.zeros_like(ids)]
    >>> bool(np.allclose(split.run(x, split.embed(x)), bert(x)))
    True
    """

    def __init__(self, model: keras.Model, name: str = names.EMBEDDING_TOKEN):
        self.model, self.layer = model, embedding_layer(model, name)
        self.names = [tensor.name for tensor in model.inputs]
        feeds = [i for i, tensor in enumerate(model.inputs) if tensor is self.layer.input]
        if not feeds:
            raise fail(ModelError, f"layer {name!r}", "a layer fed by one of the model's inputs",
                       "a layer fed by another layer's output")
        self.position = feeds[0]
        self.rest = keras.Model([*model.inputs, self.layer.output], model.outputs)
        self.rest.supports_masking = True  # the rows keep the lookup's padding mask

    def inputs(self, x) -> list:
        """The model's inputs as a list, in its order (from a list, a tuple, a dict by name or one tensor)."""
        if isinstance(x, dict):
            return [x[name] for name in self.names]
        return list(x) if isinstance(x, (list, tuple)) else [x]

    def embed(self, x):
        """The token embedding's rows of the batch ``x`` (``[B, S, E]``)."""
        return self.layer(ops.convert_to_tensor(self.inputs(x)[self.position]))

    def run(self, x, rows, training: bool = False):
        """The model's outputs with ``rows`` in place of the token embedding's."""
        return self.rest([*(ops.convert_to_tensor(value) for value in self.inputs(x)), rows], training=training)


def embedding_layer(model: keras.Model, name: str = names.EMBEDDING_TOKEN):
    """The layer ``name`` of ``model`` with an ``embeddings`` matrix; a ModelError naming it where there is none."""
    found = [layer for layer in model.layers if layer.name == name]
    if not found or not hasattr(found[0], "embeddings"):
        raise fail(ModelError, f"embedding_name {name!r}", f"an embedding layer of model {model.name!r}",
                   "no such layer" if not found else f"a {type(found[0]).__name__} without embeddings",
                   f"pass the name of the model's token embedding (bert4keras's {names.EMBEDDING_TOKEN!r})")
    return found[0]


class AdversarialStep:
    """A model's training step under one of the three methods (the module docstring); `enable` installs it.

    Args:
        model: keras.Model. compiled, with the layer ``embedding_name``.
        method: str. ``"fgm"``, ``"gp"`` or ``"vat"``.
        epsilon: float. the perturbation's norm (fgm, vat) or the penalty's weight (gp).
        embedding_name: str. the token embedding's layer.
        xi: float. vat: the norm of the direction its power iteration starts from.
        iters: int. vat: power iterations.
        supervised: bool. vat: the labelled loss plus the KL term (True), or bert4keras's step on its own
            predictions (False).
        draw: callable or None. vat: ``shape -> tensor``, the random direction (None: a normal draw seeded by
            ``seed`` and the optimizer's step, so a resumed run draws what an uninterrupted one does).
        seed: int. vat: the seed of the default draw.
    """

    def __init__(self, model: keras.Model, method: str, epsilon: float, *, embedding_name: str = names.EMBEDDING_TOKEN,
                 xi: float = 10.0, iters: int = 1, supervised: bool = True, draw: Callable | None = None,
                 seed: int = 0):
        if method not in ADVERSARIAL_METHODS:
            raise fail(ConfigError, "method", " or ".join(map(repr, ADVERSARIAL_METHODS)), repr(method))
        self.model, self.method, self.epsilon, self.xi, self.iters = model, method, float(epsilon), float(xi), iters
        self.split = EmbeddingSplit(model, embedding_name)
        self.embeddings = self.split.layer.embeddings
        self.supervised, self.draw, self.seed = supervised, draw or self._normal, seed

    def __call__(self, data) -> dict:
        x, y, weights = keras.utils.unpack_x_y_sample_weight(data)
        with half_gradients.allowing(getattr(self.model.optimizer, "half_gradients", False)):
            return getattr(self, "_" + self.method)(x, y, weights)

    # ------------------------------------------------------------------------------------------- the methods
    def _fgm(self, x, y, weights) -> dict:
        delta = self.epsilon * unit(self._embedding_gradient(x, lambda y_pred: self._loss(x, y, y_pred, weights)))
        self.embeddings.assign_add(delta)
        logs = self._descend(x, y, weights, self._plain)
        self.embeddings.assign_sub(delta)
        return logs

    def _gp(self, x, y, weights) -> dict:
        with kernels.second_order():  # the penalty's gradient differentiates a gradient
            return self._descend(x, y, weights, self._penalized)

    def _vat(self, x, y, weights) -> dict:
        predicted = ops.stop_gradient(self.model(x, training=False))
        if self.supervised:
            divergence = lambda y_pred: ops.mean(keras.losses.kl_divergence(predicted, y_pred))  # noqa: E731
        else:
            divergence = lambda y_pred: self._loss(x, predicted, y_pred, weights)  # noqa: E731
        direction = self.draw(tuple(self.embeddings.shape))
        for _ in range(self.iters):
            step = ops.cast(self.xi * unit(direction), self.embeddings.dtype)
            self.embeddings.assign_add(step)
            direction = self._embedding_gradient(x, divergence)
            self.embeddings.assign_sub(step)
        delta = self.epsilon * unit(direction)
        if not self.supervised:
            self.embeddings.assign_add(delta)
            logs = self._descend(x, predicted, weights, self._plain)
            self.embeddings.assign_sub(delta)
            return logs
        return self._descend(x, y, weights, lambda x, y, weights: self._with_divergence(x, y, weights, delta,
                                                                                         divergence))

    # ------------------------------------------------------------------------------------------- the forward passes
    def _plain(self, x, y, weights):
        """``(y_pred, loss)`` as Keras's own step computes them."""
        y_pred = self.model(x, training=True)
        return y_pred, self._loss(x, y, y_pred, weights)

    def _penalized(self, x, y, weights):
        """``(y_pred, L + ε/2·Σ‖∂L/∂e‖²)``, ``e`` the looked-up rows."""
        import tensorflow as tf

        rows = self.split.embed(x)
        with tf.GradientTape() as inner:
            inner.watch(rows)
            y_pred = self.split.run(x, rows, training=True)
            loss = self._loss(x, y, y_pred, weights)
        gradient = ops.cast(inner.gradient(loss, rows), "float32")
        return y_pred, loss + 0.5 * self.epsilon * ops.sum(ops.square(gradient))

    def _with_divergence(self, x, y, weights, delta, divergence):
        """``(y_pred, L(E) + D(p, f(E + δ)))``: the labelled loss, then the divergence with the perturbation on."""
        y_pred, loss = self._plain(x, y, weights)
        self.embeddings.assign_add(delta)
        loss = loss + ops.cast(divergence(self.model(x, training=True)), loss.dtype)
        self.embeddings.assign_sub(delta)
        return y_pred, loss

    # ------------------------------------------------------------------------------------------- the pieces
    def _loss(self, x, y, y_pred, weights):
        return self.model.compute_loss(x, y, y_pred, weights, training=True)

    def _embedding_gradient(self, x, loss_of: Callable):
        """The dense gradient by ``E`` of ``loss_of(y_pred)``, the model run without dropout (as bert4keras's
        ``K.function``, which does not feed the learning phase)."""
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_of(self.model(x, training=False))
        return tf.convert_to_tensor(tape.gradient(loss, self.embeddings))

    def _descend(self, x, y, weights, forward: Callable) -> dict:
        """Keras's own step with ``forward``'s ``(y_pred, loss)``: the loss logged, its gradient applied."""
        import tensorflow as tf

        model = self.model
        with tf.GradientTape() as tape:
            y_pred, loss = forward(x, y, weights)
            self._track(loss, x)
            scaled = model.optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled, model.trainable_weights)
        model.optimizer.apply_gradients(zip(gradients, model.trainable_weights, strict=True))
        return model.compute_metrics(x, y, y_pred, sample_weight=weights)

    def _track(self, loss, x) -> None:
        """The ``loss`` Keras logs: the mean of each step's loss over its rows (over every replica's)."""
        import tensorflow as tf

        tracker = next((metric for metric in self.model.metrics if metric.name == "loss"), None)
        if tracker is not None:
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            rows = ops.shape(next(value for value in self.split.inputs(x) if value is not None))[0]
            tracker.update_state(loss * replicas, sample_weight=rows)

    def _normal(self, shape: tuple[int, ...]):
        """A normal draw seeded by ``seed`` and the optimizer's step count."""
        import tensorflow as tf

        seed = tf.stack([tf.constant(self.seed, tf.int64), tf.cast(self.model.optimizer.iterations, tf.int64)])
        return tf.random.stateless_normal(shape, seed, dtype=self.embeddings.dtype)


def enable(model: keras.Model, method: str, epsilon: float = 1.0, **options) -> AdversarialStep:
    """Train ``model`` (compiled) with ``method``'s step from now on: `AdversarialStep` as its ``train_step``.

    Args:
        model: keras.Model. compiled, on the TensorFlow backend, with a token embedding layer.
        method: str. ``"fgm"``, ``"gp"`` or ``"vat"``.
        epsilon: float. the perturbation's norm, or the penalty's weight.
        **options: `AdversarialStep`'s keywords (``embedding_name``, ``xi``, ``iters``, ``supervised``, ``draw``,
            ``seed``).

    Returns:
        AdversarialStep. the step installed.

    Raises:
        ModelError: the model is not compiled, or has no such embedding layer.
        ConfigError: another backend than TensorFlow, an unknown method, or an epsilon that is not a number > 0.
    """
    if keras.backend.backend() != "tensorflow":
        raise fail(ConfigError, "adversarial training", "the TensorFlow backend", keras.backend.backend())
    if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool) or not epsilon > 0:
        raise fail(ConfigError, "epsilon", "a number > 0", repr(epsilon))
    if getattr(model, "optimizer", None) is None:
        raise fail(ModelError, f"model {model.name!r}", "a compiled model", "no optimizer",
                   "call model.compile(...) first, then add the adversarial step")
    step = AdversarialStep(model, method, epsilon, **options)
    model.train_step = step
    model.train_function = None  # fit makes its function again, around the new step
    return step
