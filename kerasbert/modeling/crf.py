"""Linear-chain conditional random field: the CRF layer, its losses, and Viterbi decoding.

The layer keeps bert4keras's interface (``trans``, ``lr_multiplier``, ``sparse_loss``,
``dense_loss``, ``sparse_accuracy``, ``dense_accuracy``) and its padding convention: the
layer's output is the emissions with padded steps set to ``-inf``, and the losses read the
mask back from those ``-inf`` steps. Everything in the graph is written with ``keras.ops``;
:class:`ViterbiDecoder` is the NumPy decoder of bert4keras's ``snippets`` (over
`kerasbert.text.predictions.viterbi`, the one NumPy Viterbi).
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.registry import register
from kerasbert.text.predictions import viterbi


def _time_major(x):
    """``[B, S, ...] -> [S, B, ...]``: ``ops.scan`` runs over the leading axis."""
    return ops.moveaxis(x, 1, 0)


def _steps(emissions, mask):
    """Steps 2..S of ``emissions`` with the mask as one extra channel, time-major: ``[S-1, B, K+1]``.

    One scanned tensor, not two: Keras's TensorFlow ``scan`` fails on several inputs of unknown
    length (its static-shape check calls a method of ``None``), and batches here have any length.
    """
    packed = ops.concatenate([emissions, ops.cast(mask, emissions.dtype)[..., None]], axis=-1)
    return _time_major(packed[:, 1:])


def _unpack(step):
    """``[B, K+1] -> ([B, K] emissions, [B] bool mask)``: the inverse of `_steps` for one step."""
    return step[:, :-1], step[:, -1] > 0.5


def log_partition(emissions, trans, mask):
    """``log Z`` of each sequence by the forward algorithm: ``[B, S, K], [K, K], [B, S] -> [B]``.

    ``α_1 = e_1``, ``α_t(j) = logsumexp_i(α_{t-1}(i) + T(i, j)) + e_t(j)`` on unmasked steps
    (masked steps carry ``α`` unchanged), ``log Z = logsumexp_j α_S(j)``.
    """

    def step(alpha, inputs):  # alpha (batch, K)
        e_t, m_t = _unpack(inputs)
        new = ops.logsumexp(alpha[:, :, None] + trans[None], axis=1) + e_t  # (batch, from, to) -> (batch, to)
        alpha = ops.where(m_t[:, None], new, alpha)
        return alpha, alpha

    alpha, _ = ops.scan(step, emissions[:, 0], _steps(emissions, mask))
    return ops.logsumexp(alpha, axis=1)


def viterbi_decode(emissions, trans, mask=None):
    """Batched in-graph Viterbi: the best label path of each sequence, ``[B, S, K] -> [B, S]`` int32.

    ``δ_1 = e_1``, ``δ_t(j) = max_i(δ_{t-1}(i) + T(i, j)) + e_t(j)``, ``ψ_t(j) = argmax_i(...)``;
    the path ends in ``argmax_j δ_S(j)`` and follows ``ψ`` back. Masked steps carry ``δ`` and
    get the label -1. For right-padded rows this is the Viterbi path of the unpadded row.

    Example:
    >>> e, trans = ops.array([[[2.0, 0.0], [0.0, 1.0], [9.0, 9.0]]]), ops.array([[0.0, -5.0], [0.0, 0.0]])
    >>> ops.convert_to_numpy(viterbi_decode(e, trans, ops.array([[1, 1, 0]]) > 0)).tolist()
    [[0, 0, -1]]
    """
    emissions, trans = ops.cast(emissions, "float32"), ops.cast(trans, "float32")
    mask = ops.ones(ops.shape(emissions)[:2], "bool") if mask is None else ops.cast(mask, "bool")
    labels = ops.arange(ops.shape(trans)[0], dtype="float32")[None]

    def forward(delta, inputs):  # delta (batch, K)
        e_t, m_t = _unpack(inputs)
        scores = delta[:, :, None] + trans[None]  # (batch, from, to)
        back = ops.cast(ops.argmax(scores, axis=1), "float32")  # scan outputs share the carry's dtype
        keep = m_t[:, None]
        return ops.where(keep, ops.max(scores, axis=1) + e_t, delta), ops.where(keep, back, labels)

    delta, backs = ops.scan(forward, emissions[:, 0], _steps(emissions, mask))
    backs = ops.cast(backs, "int32")  # (seq-1, batch, K)

    def backward(label, back_t):  # label at step t+1 -> label at step t
        return ops.take_along_axis(back_t, label[:, None], axis=1)[:, 0], label

    first, rest = ops.scan(backward, ops.cast(ops.argmax(delta, axis=1), "int32"), backs, reverse=True)
    paths = ops.concatenate([first[:, None], ops.transpose(rest)], axis=1)  # (batch, seq)
    return ops.where(mask, paths, -1)


def _unpad(y_pred):
    """bert4keras's convention: a step is padding when its emissions are ``-inf``; those become 0."""
    y_pred = ops.cast(y_pred, "float32")
    mask = ops.all(ops.not_equal(y_pred, -math.inf), axis=-1)  # (batch, seq)
    return ops.where(mask[..., None], y_pred, 0.0), mask


@register
def crf_accuracy(y_true, y_pred):
    """Per-token accuracy of the CRF layer's ``argmax`` emissions, padding (``-inf`` steps) excluded.

    A quick training signal, as bert4keras's ``sparse_accuracy``; the decoded path is `viterbi_decode`'s.
    """
    y_pred, mask = _unpad(y_pred)
    y_true = ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")
    hits = ops.cast(ops.equal(y_true, ops.cast(ops.argmax(y_pred, axis=-1), "int32")), "float32")
    mask = ops.cast(mask, "float32")
    return ops.sum(hits * mask) / ops.maximum(ops.sum(mask), 1.0)


@register
class ConditionalRandomField(keras.layers.Layer):
    """Linear-chain CRF over per-token label scores (a loss layer, as bert4keras's).

    With emissions ``e_t ∈ R^K`` (the ``Tagging-Dense`` output), transitions ``T = trans`` ``[K, K]``
    and a padding mask ``m``, the score of a label path ``y`` is

        ``s(y) = Σ_t m_t·e_t(y_t) + Σ_t m_t·m_{t+1}·T(y_t, y_{t+1})``

    and the loss is the negative log-likelihood ``-log p(y) = log Z - s(y)``, where
    ``log Z = logsumexp_y s(y)`` comes from the forward recursion
    ``α_1 = e_1``, ``α_t(j) = logsumexp_i(α_{t-1}(i) + T(i, j)) + e_t(j)``, ``log Z = logsumexp_j α_S(j)``.
    Decoding is Viterbi: the same recursion with ``max`` for ``logsumexp`` and back-pointers
    ``ψ_t(j) = argmax_i(δ_{t-1}(i) + T(i, j))``, read back from ``argmax_j δ_S(j)``.

    Padding: call the layer on ``[emissions, mask]`` (kerasbert's tagging head passes the
    ``Attention-Mask``), or on ``emissions`` alone with a Keras mask, as bert4keras does. The output
    is the emissions with padded steps set to ``-inf``; ``sparse_loss`` and ``sparse_accuracy``
    recover the mask from them, so they work as ``compile`` loss and metric unchanged.
    ``layer([emissions, mask], decode=True)`` returns the Viterbi paths instead (int32, -1 on padding).

    Args:
        lr_multiplier: float. the transitions are stored divided by it and used multiplied by it,
            so their effective learning rate is this many times the optimizer's.

    Example:
    >>> crf = ConditionalRandomField()
    >>> e, mask = ops.zeros((2, 4, 3)), ops.array([[1, 1, 1, 0], [1, 1, 0, 0]]) > 0
    >>> out = crf([e, mask])
    >>> _ = crf.trans.assign(ops.zeros((3, 3)))  # uniform: log Z - s(y) = n·log 3 for n real steps
    >>> [round(float(v), 4) for v in crf.sparse_loss(ops.zeros((2, 4)), out)]
    [3.2958, 2.1972]
    """

    xla_compatible = False  # its scan runs over a dynamic length (`kerasbert.perf.xla.xla_pays`)

    def __init__(self, lr_multiplier: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.lr_multiplier = lr_multiplier

    def build(self, input_shape):
        shape = input_shape[0] if isinstance(input_shape[0], (list, tuple)) else input_shape
        # K·K parameters
        self._trans = self.add_weight(shape=(shape[-1], shape[-1]), initializer="glorot_uniform", name="trans")
        if self.lr_multiplier != 1:
            self._trans.assign(self._trans / self.lr_multiplier)

    def param_formula(self) -> Formula:
        return Formula.of("K·K", K=int(self._trans.shape[0]))

    @property
    def trans(self):
        """The transition scores ``T`` ``[K, K]`` (the stored weight times ``lr_multiplier``)."""
        return self._trans * self.lr_multiplier if self.lr_multiplier != 1 else self._trans

    def call(self, inputs, mask=None, decode: bool = False):
        if isinstance(inputs, (list, tuple)):
            inputs, mask = inputs
        if decode:
            return viterbi_decode(inputs, self.trans, mask)
        if mask is None:
            return inputs
        return ops.where(ops.cast(mask, "bool")[..., None], inputs, -math.inf)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_spec(self, inputs, mask=None, decode: bool = False):
        emissions = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
        if decode:
            return keras.KerasTensor(emissions.shape[:-1], dtype="int32")
        return keras.KerasTensor(emissions.shape, dtype=self.compute_dtype)

    def dense_loss(self, y_true, y_pred):
        """``log Z - s(y)`` per sequence, ``y_true`` one-hot ``[B, S, K]``."""
        y_pred, mask = _unpad(y_pred)
        y_true = ops.where(mask[..., None], ops.cast(y_true, "float32"), 0.0)
        trans = ops.cast(self.trans, "float32")
        point = ops.sum(y_true * y_pred, axis=(1, 2))
        transition = ops.sum(ops.matmul(y_true[:, :-1], trans) * y_true[:, 1:], axis=(1, 2))
        return log_partition(y_pred, trans, mask) - (point + transition)

    def sparse_loss(self, y_true, y_pred):
        """``log Z - s(y)`` per sequence, ``y_true`` label ids ``[B, S]``."""
        y_true = ops.cast(ops.reshape(y_true, ops.shape(y_pred)[:-1]), "int32")
        return self.dense_loss(ops.one_hot(y_true, ops.shape(self._trans)[0]), y_pred)

    def sparse_accuracy(self, y_true, y_pred):
        """Per-token accuracy of ``argmax`` emissions, padding excluded (see `crf_accuracy`)."""
        return crf_accuracy(y_true, y_pred)

    def dense_accuracy(self, y_true, y_pred):
        """`sparse_accuracy` for one-hot ``y_true``."""
        return self.sparse_accuracy(ops.argmax(y_true, axis=-1), y_pred)

    def get_config(self):
        return {**super().get_config(), "lr_multiplier": self.lr_multiplier}


def crf_layers(model: keras.Model) -> list[ConditionalRandomField]:
    """The ``ConditionalRandomField`` layers of ``model`` (a tagging head has one).

    Example:
    >>> crf_layers(keras.Sequential([ConditionalRandomField()]))[0].name.startswith("conditional_random_field")
    True
    """
    return [layer for layer in model.layers if isinstance(layer, ConditionalRandomField)]


class ViterbiDecoder:
    """NumPy Viterbi decoding of one sequence, bert4keras's ``ViterbiDecoder`` interface.

    Args:
        trans: array ``[K, K]``. the transition scores, e.g. ``ops.convert_to_numpy(crf.trans)``.
        starts: list of int. labels a path may start with (all when ``None``).
        ends: list of int. labels a path may end with (all when ``None``).

    Example:
    >>> decoder = ViterbiDecoder(np.array([[0.0, -5.0], [0.0, 0.0]]))
    >>> decoder.decode(np.array([[2.0, 0.0], [0.0, 1.0]])).tolist()
    [0, 0]
    """

    def __init__(self, trans, starts=None, ends=None):
        self.trans = np.asarray(trans)
        self.num_labels = len(self.trans)
        self.starts, self.ends = starts, ends
        self.non_starts = [i for i in range(self.num_labels) if starts is not None and i not in starts]
        self.non_ends = [i for i in range(self.num_labels) if ends is not None and i not in ends]

    def decode(self, nodes) -> np.ndarray:
        """The best label path for emissions ``nodes`` ``[S, K]`` (not modified), by
        `kerasbert.text.predictions.viterbi`."""
        if np.ndim(nodes) != 2 or np.shape(nodes)[1] != self.num_labels:
            raise fail(ModelError, "ViterbiDecoder.decode", f"emissions [seq, {self.num_labels}]",
                       f"shape {list(np.shape(nodes))}", "decode one sequence at a time, padding removed")
        return viterbi(nodes, self.trans, self.starts, self.ends)
