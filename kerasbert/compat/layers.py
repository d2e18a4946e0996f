"""``bert4keras.layers`` -> ``kerasbert.compat.layers``: the CRF layer (``trans``, ``sparse_loss``,
``sparse_accuracy``), as `kerasbert.modeling.crf` defines it."""

from kerasbert.modeling.crf import ConditionalRandomField

__all__ = ["ConditionalRandomField"]
