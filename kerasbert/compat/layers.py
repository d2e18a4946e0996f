"""``bert4keras.layers`` -> ``kerasbert.compat.layers``: the CRF layer (``trans``, ``sparse_loss``,
``sparse_accuracy``), as `kerasbert.modeling.crf` defines it, and the span-NER heads `GlobalPointer` and
`EfficientGlobalPointer` (`kerasbert.modeling.global_pointer`)."""

from kerasbert.modeling.crf import ConditionalRandomField
from kerasbert.modeling.global_pointer import EfficientGlobalPointer, GlobalPointer

__all__ = ["ConditionalRandomField", "EfficientGlobalPointer", "GlobalPointer"]
