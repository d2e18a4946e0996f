"""``bert4keras.layers`` -> ``kerasbert.compat.layers``: the CRF layer (``trans``, ``sparse_loss``,
``sparse_accuracy``), as `kerasbert.modeling.crf` defines it, the span-NER heads `GlobalPointer` and
`EfficientGlobalPointer` (`kerasbert.modeling.global_pointer`), the `Loss` base layer and the
`MaximumEntropyMarkovModel` tagging head (`kerasbert.compat._layers`); bert4keras's building blocks with its
arguments, weights and numbers: `Embedding`, `ScaleOffset`, `FeedForward`, `Concatenate1D`, `BatchSplit`,
`BatchConcat`, the masked `GlobalAveragePooling1D` and `GlobalMaxPooling1D`, the `Layer` base, `integerize_shape`
(`kerasbert.compat._basic_layers`), `MultiHeadAttention` and `GatedAttentionUnit` (`kerasbert.compat._attention`),
`LayerNormalization` (`kerasbert.compat._norm`), `PositionEmbedding`, `SinusoidalPositionEmbedding`,
`RelativePositionEmbedding` and `RelativePositionEmbeddingT5` (`kerasbert.compat._positions`); and
`custom_objects`, every layer here by its name, for
``keras.saving.load_model(path, custom_objects=custom_objects)`` (kerasbert's layers load without it too)."""

import keras

from kerasbert.compat._attention import GatedAttentionUnit, MultiHeadAttention
from kerasbert.compat._basic_layers import (
    BatchConcat,
    BatchSplit,
    Concatenate1D,
    Embedding,
    FeedForward,
    GlobalAveragePooling1D,
    GlobalMaxPooling1D,
    Layer,
    ScaleOffset,
    integerize_shape,
)
from kerasbert.compat._layers import Loss, MaximumEntropyMarkovModel
from kerasbert.compat._norm import LayerNormalization
from kerasbert.compat._positions import (
    PositionEmbedding,
    RelativePositionEmbedding,
    RelativePositionEmbeddingT5,
    SinusoidalPositionEmbedding,
)
from kerasbert.modeling.crf import ConditionalRandomField
from kerasbert.modeling.global_pointer import EfficientGlobalPointer, GlobalPointer

__all__ = ["ConditionalRandomField", "EfficientGlobalPointer", "GlobalPointer", "Loss", "MaximumEntropyMarkovModel",
           "BatchConcat", "BatchSplit", "Concatenate1D", "Embedding", "FeedForward", "GatedAttentionUnit",
           "GlobalAveragePooling1D", "GlobalMaxPooling1D", "Layer", "LayerNormalization", "MultiHeadAttention",
           "PositionEmbedding", "RelativePositionEmbedding", "RelativePositionEmbeddingT5", "ScaleOffset",
           "SinusoidalPositionEmbedding", "custom_objects", "integerize_shape"]

# bert4keras's dict of its layers by name: every layer class above, read from __all__ (one added there is in it)
custom_objects = {name: globals()[name] for name in __all__
                  if isinstance(globals().get(name), type) and issubclass(globals()[name], keras.layers.Layer)}
