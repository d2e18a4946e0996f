"""``bert4keras.layers`` -> ``kerasbert.compat.layers``: the CRF layer (``trans``, ``sparse_loss``,
``sparse_accuracy``), as `kerasbert.modeling.crf` defines it, the span-NER heads `GlobalPointer` and
`EfficientGlobalPointer` (`kerasbert.modeling.global_pointer`), the `Loss` base layer and the
`MaximumEntropyMarkovModel` tagging head (`kerasbert.compat._layers`)."""

from kerasbert.compat._layers import Loss, MaximumEntropyMarkovModel
from kerasbert.modeling.crf import ConditionalRandomField
from kerasbert.modeling.global_pointer import EfficientGlobalPointer, GlobalPointer

__all__ = ["ConditionalRandomField", "EfficientGlobalPointer", "GlobalPointer", "Loss", "MaximumEntropyMarkovModel"]
