"""Losses and metrics for ``compile`` on a head model: ``model.compile(opt, **loss_and_metrics(model))``.

Each head's output layer has its loss: sparse cross-entropy for ``CLS-Dense``, ``Tagging-Dense`` and
``NSP-Proba``, the CRF's sparse loss for ``Tagging-CRF``, a masked cross-entropy for ``MLM-Activation`` (and
RoFormer-V2's ``Output-MLM-Activation``), and binary cross-entropy for ELECTRA's ``Discriminator-Prediction``.
The losses check that label ids are in range inside the graph (see `check_label_ids`).
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert import layer_names as names
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.crf import ConditionalRandomField, crf_accuracy
from kerasbert.modeling.global_pointer import GlobalPointer, global_pointer_crossentropy, global_pointer_f1
from kerasbert.modeling.registry import register
from kerasbert.text.qa_data import BOTH, END, REAL, START

__all__ = ["CRFLoss", "CoSENTLoss", "InBatchNegativesLoss", "SparseLabelLoss", "TokenBinaryLoss", "accuracy_metric",
           "check_label_ids", "loss_and_metrics", "masked_accuracy", "token_binary_accuracy"]


def loss_and_metrics(model: keras.Model) -> dict:
    """The default ``compile`` arguments for a head model: ``model.compile(opt, **loss_and_metrics(model))``.

    ``CLS-Dense``/``Tagging-Dense``/``NSP-Proba``: sparse categorical cross-entropy + accuracy
    (sigmoid ``CLS-Dense``: binary cross-entropy + binary accuracy); ``Tagging-CRF``: the CRF's
    sparse loss + its accuracy on non-padding tokens; ``Span-GlobalPointer``: multilabel categorical
    cross-entropy + span F1; ``MLM-Activation`` and ``Output-MLM-Activation``: cross-entropy averaged over
    the tokens whose label is not 0 (0 marks unmasked tokens and padding) + their accuracy;
    ``Discriminator-Prediction`` (ELECTRA, one sigmoid per token): `TokenBinaryLoss` on labels ``[B, S]``, 1
    marking a replaced token, + `token_binary_accuracy`. A model with several head outputs (``with_nsp`` and
    ``with_mlm``: ``[NSP-Proba, MLM-Activation]``) gets a list of each, in the order of its outputs: its loss is
    their sum.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> from kerasbert.modeling.heads import cls
    >>> model = cls(build_transformer_model("tiny", verbose=False), 2)
    >>> model.compile("adam", **loss_and_metrics(model))
    """
    chosen = [_head_loss_and_metrics(layer) for layer in _output_layers(model)]
    if len(chosen) == 1:
        return chosen[0]
    return {"loss": [one["loss"] for one in chosen], "metrics": [one["metrics"] for one in chosen]}


def _head_loss_and_metrics(layer: keras.layers.Layer) -> dict:
    """The loss and metrics of one head output layer (`loss_and_metrics`'s rules)."""
    if isinstance(layer, ConditionalRandomField):
        return {"loss": CRFLoss(layer), "metrics": [accuracy_metric(crf_accuracy)]}
    if isinstance(layer, GlobalPointer):
        return {"loss": global_pointer_crossentropy, "metrics": [accuracy_metric(global_pointer_f1)]}
    if layer.name in (names.MLM_ACTIVATION, names.OUTPUT_MLM_ACTIVATION, names.LM_ACTIVATION):
        loss = SparseLabelLoss(int(layer.output.shape[-1]), ignore_id=0, what=layer.name, name="masked_lm_loss")
        return {"loss": loss, "metrics": [accuracy_metric(masked_accuracy)]}
    if layer.name == names.DISCRIMINATOR_PREDICTION:
        return {"loss": TokenBinaryLoss(), "metrics": [accuracy_metric(token_binary_accuracy)]}
    activation = keras.activations.serialize(layer.activation)
    activation = activation if isinstance(activation, str) else getattr(layer.activation, "__name__", activation)
    if activation == "sigmoid":
        return {"loss": "binary_crossentropy", "metrics": [accuracy_metric(keras.metrics.binary_accuracy)]}
    if activation not in ("softmax", "linear"):
        raise fail(ModelError, f"{layer.name} activation", "softmax, sigmoid or linear for a default loss",
                   repr(activation), "pass loss= to compile yourself")
    loss = SparseLabelLoss(int(layer.output.shape[-1]), from_logits=activation == "linear", what=layer.name)
    return {"loss": loss, "metrics": [accuracy_metric(keras.metrics.sparse_categorical_accuracy)]}


def accuracy_metric(fn) -> keras.metrics.Metric:
    """The metric that averages ``fn(y_true, y_pred)``, named after ``fn``, as an object.

    An object, not a name: its variables exist before ``fit`` traces the train step. A metric given
    by name is built inside that trace, and a ``tf.function`` that creates variables is traced a second
    time, which for BERT-base costs seconds before the first step and more peak memory.

    Example:
    >>> accuracy_metric(keras.metrics.sparse_categorical_accuracy).name
    'sparse_categorical_accuracy'
    """
    return keras.metrics.MeanMetricWrapper(fn, name=fn.__name__)


def _output_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The head layer that produces each of the model's outputs, in order."""
    layers = {layer.name: layer for layer in model.layers}
    found = [next((layers[name] for name in names.HEAD_OUTPUTS if name in layers and layers[name].output is output),
                  None) for output in model.outputs]
    if None in found:
        raise fail(ModelError, "loss_and_metrics", f"a model whose outputs come from {', '.join(names.HEAD_OUTPUTS)}",
                   f"{len(model.outputs)} output(s) of {model.name}, not all from them",
                   "build it with kerasbert.modeling.heads")
    return found


def check_label_ids(y_true, num_classes: int, what: str):
    """``y_true`` unchanged, after an in-graph check that every label id is in ``[0, num_classes)``.

    Runs inside ``fit``'s compiled step (a ``tf.debugging.Assert``, kerasbert's backend being
    TensorFlow): out-of-range ids stop training with ``InvalidArgumentError`` whose message reads
    ``<what> labels: expected label ids in [0, K), found min, max: ...``. XLA (``jit_compile=True``)
    drops asserts, and so does every compiled JAX step (other backends: no check); there, check the data
    before ``fit``.
    """
    if keras.config.backend() != "tensorflow":
        return y_true
    import tensorflow as tf

    ids = tf.cast(y_true, "int64")
    in_range = tf.logical_and(tf.reduce_all(ids >= 0), tf.reduce_all(ids < num_classes))
    message = f"{what} labels: expected label ids in [0, {num_classes}), found min, max:"
    check = tf.debugging.Assert(in_range, [message, tf.reduce_min(ids), tf.reduce_max(ids)])
    with tf.control_dependencies([check]):
        return tf.identity(y_true)


@register
class SparseLabelLoss(keras.losses.Loss):
    """Sparse categorical cross-entropy with a label-range check, optionally ignoring one label id.

    With ``ignore_id`` (the MLM head: 0 marks unmasked tokens and padding) the loss is the mean
    over the other tokens of the batch, ``Σ_t m_t·CE_t / Σ_t m_t`` with ``m_t = [y_t ≠ ignore_id]``.

    Args:
        num_classes: int. the number of classes; labels must be in ``[0, num_classes)``.
        from_logits: bool. ``y_pred`` holds logits rather than probabilities.
        ignore_id: int. a label id that does not count; None counts every label.
        what: str. the layer named in the out-of-range message.

    Example:
    >>> import numpy as np
    >>> float(SparseLabelLoss(2)(np.array([1]), np.array([[0.5, 0.5]])))  # log 2
    0.6931...
    """

    def __init__(self, num_classes: int, from_logits: bool = False, ignore_id: int | None = None,
                 what: str = "y_true", name: str = "sparse_label_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_classes, self.from_logits, self.ignore_id, self.what = num_classes, from_logits, ignore_id, what

    def call(self, y_true, y_pred):
        y_true = check_label_ids(y_true, self.num_classes, self.what)
        loss = keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=self.from_logits)
        if self.ignore_id is None:
            return loss
        keep = ops.cast(ops.not_equal(ops.reshape(y_true, ops.shape(loss)), self.ignore_id), loss.dtype)
        return ops.sum(loss * keep) / ops.maximum(ops.sum(keep), 1.0)

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes, "from_logits": self.from_logits,
                "ignore_id": self.ignore_id, "what": self.what}


def _unmasked(y_pred):
    """``y_pred`` without the Keras mask it carries (a new tensor of the same values)."""
    import tensorflow as tf

    return tf.identity(y_pred)


@register
class UnmaskedLoss(SparseLabelLoss):
    """`SparseLabelLoss` of the output without its Keras mask: the labels that are 0 say which tokens count.

    Example:
    >>> import numpy as np
    >>> round(float(UnmaskedLoss(2, ignore_id=0)(np.array([[1, 0]]), np.full((1, 2, 2), 0.5))), 4)  # log 2
    0.6931
    """

    def __call__(self, y_true, y_pred, sample_weight=None):
        return super().__call__(y_true, _unmasked(y_pred), sample_weight)


@register
class UnmaskedMean(keras.metrics.MeanMetricWrapper):
    """The mean of ``fn(y_true, y_pred)`` on the output without its Keras mask (`UnmaskedLoss`'s reason): a
    T5's next-token accuracy."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        return super().update_state(y_true, _unmasked(y_pred), sample_weight)


@register
class CRFLoss(keras.losses.Loss):
    """``crf.sparse_loss`` with a label-range check, saved by the CRF layer's name.

    A compiled model saved as ``.keras`` reloads with this loss unbound (a loss cannot hold a
    layer across a file); calling it then raises a `ModelError` that says to compile again with
    `loss_and_metrics`.

    Args:
        crf: ConditionalRandomField. the layer whose transitions the loss uses.
        layer_name: str. set by ``from_config`` when reloading.
    """

    def __init__(self, crf: ConditionalRandomField | None = None, layer_name: str | None = None,
                 name: str = "crf_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.crf, self.layer_name = crf, crf.name if crf is not None else layer_name

    def call(self, y_true, y_pred):
        if self.crf is None:
            raise fail(ModelError, f"crf_loss of {self.layer_name}", "a loss bound to the model's CRF layer",
                       "a loss reloaded from a .keras file",
                       "compile again: model.compile(optimizer, **kerasbert.modeling.heads.loss_and_metrics(model))")
        y_true = check_label_ids(y_true, int(self.crf.trans.shape[0]), self.layer_name)
        return self.crf.sparse_loss(y_true, y_pred)

    def get_config(self):
        return {**super().get_config(), "layer_name": self.layer_name}


@register
def masked_accuracy(y_true, y_pred):
    """Accuracy over the tokens whose label is not 0 (the MLM head's masked tokens)."""
    y_true = ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")
    keep = ops.cast(ops.not_equal(y_true, 0), "float32")
    hits = ops.cast(ops.equal(y_true, ops.cast(ops.argmax(y_pred, axis=-1), "int32")), "float32")
    return ops.sum(hits * keep) / ops.maximum(ops.sum(keep), 1.0)


@register
class TokenBinaryLoss(keras.losses.Loss):
    """Binary cross-entropy per token of ELECTRA's discriminator: labels ``[B, S]`` (1: replaced) against
    probabilities ``[B, S, 1]``, averaged over the non-padding tokens (the output's Keras mask).

    Keras's ``binary_crossentropy`` would squeeze the probabilities to ``[B, S]`` and average each row into one
    number, which the ``[B, S]`` padding mask then no longer fits.

    Example:
    >>> import numpy as np
    >>> round(float(TokenBinaryLoss()(np.array([[1, 0]]), np.array([[[0.5], [0.5]]]))), 4)  # log 2
    0.6931
    """

    def __init__(self, name: str = "token_binary_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        y_true = ops.reshape(ops.cast(y_true, y_pred.dtype), ops.shape(y_pred))  # (batch, seq, 1)
        return keras.losses.binary_crossentropy(y_true, y_pred)  # (batch, seq)


@register
def token_binary_accuracy(y_true, y_pred):
    """Per token ``[B, S]``: 1 where the replaced/original call (probability > 0.5) matches the label; the metric
    averages them over the non-padding tokens (the output's Keras mask)."""
    y_true = ops.reshape(ops.cast(y_true, "float32"), ops.shape(y_pred)[:-1])
    return ops.cast(ops.equal(y_true, ops.cast(y_pred[..., 0] > 0.5, "float32")), "float32")


# ------------------------------------------------------------------------------------------- sentence pairs
def _pair_vectors(y_pred):
    """Sentence vectors ``[2P, H]``, a pair's two texts in rows ``2i`` and ``2i + 1``, as unit float32 ``a``, ``b``
    of ``[P, H]`` each."""
    x = ops.normalize(ops.cast(y_pred, "float32"), axis=-1)
    x = ops.reshape(x, (-1, 2, x.shape[-1]))  # (pairs, 2, H)
    return x[:, 0], x[:, 1]


@register
class CoSENTLoss(keras.losses.Loss):
    """CoSENT (Su 2022, https://kexue.fm/archives/8847) over the sentence pairs of a batch:
    ``log(1 + Σ_{(i, j): y_i > y_j} exp(λ (cos_j − cos_i)))``, ``cos_i`` the cosine of pair i's two vectors.

    Every pair ranked above another should have the higher cosine; only the labels' order counts, so 0/1 labels
    and graded scores (STS-B's 0-5) train alike. A batch whose labels are all equal has no such (i, j): loss 0.

    Args:
        scale: float. λ, the cosines' scale (20 in CoSENT).

    Inputs: ``y_true`` ``[2P]``, a pair's label on both its rows; ``y_pred`` ``[2P, H]``, rows ``2i`` and ``2i + 1``
    pair i's texts (normalized here, whatever the model's output).

    Example:
    >>> import numpy as np
    >>> vectors = np.array([[1, 0], [1, 0], [1, 0], [0, 1]], "float32")  # cosines 1 (label 1) and 0 (label 0)
    >>> round(float(CoSENTLoss()(np.array([1, 1, 0, 0]), vectors)), 6)  # log(1 + e^-20)
    0.0
    >>> round(float(CoSENTLoss()(np.array([0, 0, 1, 1]), vectors)), 4)  # log(1 + e^20)
    20.0
    """

    def __init__(self, scale: float = 20.0, name: str = "cosent_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = scale

    def call(self, y_true, y_pred):
        a, b = _pair_vectors(y_pred)
        cosines = ops.sum(a * b, axis=-1)  # (pairs,)
        labels = ops.reshape(ops.cast(y_true, "float32"), (-1, 2))[:, 0]
        differences = self.scale * (cosines[None, :] - cosines[:, None])  # [i, j]: λ (cos_j − cos_i)
        ranked = ops.greater(labels[:, None], labels[None, :])  # y_i > y_j
        terms = ops.reshape(ops.where(ranked, differences, -1e12), (-1,))
        return ops.logsumexp(ops.concatenate([ops.zeros((1,), "float32"), terms]))  # the 1 is e^0

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


@register
class InBatchNegativesLoss(keras.losses.Loss):
    """In-batch negatives, sentence-transformers' MultipleNegativesRankingLoss: for every pair i, the softmax
    cross-entropy of ``λ cos(a_i, b_j)`` over the batch's second texts j, with b_i the answer; the mean over pairs.

    For pairs that are all positives (paraphrases, question and answer): the other pairs' second texts serve as
    negatives. The labels are not read. Inputs as `CoSENTLoss`'s.

    Args:
        scale: float. λ (20 in sentence-transformers).

    Example:
    >>> import numpy as np
    >>> round(float(InBatchNegativesLoss()(np.ones(4), np.ones((4, 2)))), 4)  # b_0, b_1 alike for each a_i: log 2
    0.6931
    """

    def __init__(self, scale: float = 20.0, name: str = "in_batch_negatives_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.scale = scale

    def call(self, y_true, y_pred):
        a, b = _pair_vectors(y_pred)
        scores = self.scale * ops.matmul(a, ops.transpose(b))  # (pairs, pairs): [i, j] = λ cos(a_i, b_j)
        log_probabilities = scores - ops.logsumexp(scores, axis=1, keepdims=True)
        return -ops.mean(ops.diagonal(log_probabilities))

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}


def _pointer_loss(logits, target, real):
    """Softmax cross-entropy of ``logits`` ``[B, S]`` against the one ``target`` position of each row, over its
    ``real`` positions."""
    masked = ops.where(real, logits, ops.full_like(logits, -1e9))
    return ops.logsumexp(masked, axis=-1) - ops.sum(ops.where(target, logits, ops.zeros_like(logits)), axis=-1)


@register
class PointerLoss(keras.losses.Loss):
    """The mean of the start's and the end's softmax cross-entropy, each over a row's real positions: ``y_true`` is
    `kerasbert.text.qa_data.pointer_labels` rows ``[B, S]`` (0 on padding), ``y_pred`` the logits ``[B, S, 2]``.

    Example:
    >>> import numpy as np
    >>> y_true = np.array([[4, 1, 0]])  # [CLS] is the start and the end; the last position is padding
    >>> round(float(PointerLoss()(y_true, np.zeros((1, 3, 2), np.float32))), 4)  # log 2
    0.6931
    """

    def __init__(self, name: str = "pointer_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # the logits carry the padding mask of the sequence output; the labels say which positions are real
        return super().__call__(y_true, _unmasked(y_pred), sample_weight)

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        logits = ops.cast(y_pred, "float32")
        real = ops.greater_equal(y_true, REAL)
        starts = ops.logical_or(ops.equal(y_true, START), ops.equal(y_true, BOTH))
        ends = ops.logical_or(ops.equal(y_true, END), ops.equal(y_true, BOTH))
        return (_pointer_loss(logits[..., 0], starts, real) + _pointer_loss(logits[..., 1], ends, real)) / 2
