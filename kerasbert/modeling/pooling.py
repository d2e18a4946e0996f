"""Weightless layers that take a sequence's hidden states at given positions, or their mean over the real tokens.

Registered layers rather than ``Lambda`` layers, so that a saved model loads in safe mode; each states its
parameter formula (none) for the annotated summary. One token, ``x[:, i]``, is `kerasbert.modeling.layers.TakeToken`.
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert.annotated.formulas import Formula
from kerasbert.modeling.registry import register


@register
class TakePositions(keras.layers.Layer):
    """``x[b, positions[b, p]]``: the hidden states at given positions of each row, ``[B, S, H], [B, P] -> [B, P, H]``
    (``MLM-Gather``: the masked LM run at the masked positions alone, as Google's ``gather_indexes``).

    Example:
    >>> tuple(TakePositions()([ops.zeros((2, 5, 8)), ops.zeros((2, 3), "int32")]).shape)
    (2, 3, 8)
    """

    def call(self, inputs):
        x, positions = inputs
        shape = ops.shape(x)  # rows of the flattened [B·S, H] at b·S + position, a gather of whole rows
        rows = ops.cast(positions, "int32") + ops.expand_dims(ops.arange(shape[0], dtype="int32") * shape[1], -1)
        return ops.take(ops.reshape(x, (-1, shape[2])), rows, axis=0)

    def compute_mask(self, inputs, mask=None):
        return None  # other positions than the sequence's: its padding mask does not apply

    def compute_output_shape(self, input_shape):
        return (*input_shape[1][:2], input_shape[0][-1])

    def param_formula(self) -> Formula:
        return Formula.of("0")


@register
class MaskedMean(keras.layers.Layer):
    """Mean of ``x`` over the unmasked steps: ``[x [B, S, H], mask [B, S]] -> [B, H]``.

    The ``"mean"`` pooling of the classification head; padding (mask False) does not count.

    Example:
    >>> x, mask = ops.array([[[1.0], [3.0], [100.0]]]), ops.array([[True, True, False]])
    >>> ops.convert_to_numpy(MaskedMean()([x, mask])).tolist()
    [[2.0]]
    """

    def call(self, inputs):
        x, mask = inputs
        mask = ops.cast(mask, x.dtype)[..., None]  # (batch, seq, 1)
        return ops.sum(x * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)

    def compute_mask(self, inputs, mask=None):
        return None  # [B, H]: the sequence is reduced

    def compute_output_shape(self, input_shape):
        return (input_shape[0][0], input_shape[0][2])

    def param_formula(self) -> Formula:
        return Formula.of("0")
