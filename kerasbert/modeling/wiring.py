"""`Wiring`: what every architecture holds (its config, family and layers by name) and reads the same way.

`kerasbert.modeling.encoder.Encoder`, `kerasbert.modeling.gpt.GPT` and `kerasbert.modeling.t5.T5` are each one; a
built model's comes from `Wiring.of` over the model's own layers.

Example:
>>> from kerasbert import build_transformer_model
>>> from kerasbert.modeling.encoder import Encoder
>>> Encoder.of(build_transformer_model("tiny", verbose=False)).dtype
'float32'
"""

from __future__ import annotations

import dataclasses

import keras

from kerasbert import layer_names as names
from kerasbert.modeling import families
from kerasbert.modeling.config import BertConfig, config_of
from kerasbert.modeling.families import Family


@dataclasses.dataclass
class Wiring:
    """An architecture's data: the sizes, what its family changes, and every layer by name.

    Args:
        config: BertConfig. the sizes.
        family: Family. the family (and, for T5, its part).
        layers: dict. every layer by name (for a built model, the rest of its graph too).
    """

    config: BertConfig
    family: Family
    layers: dict[str, keras.layers.Layer]

    @classmethod
    def of(cls, model: keras.Model):
        """The architecture of a built kerasbert model, over its own layers (`kerasbert.config_of`, its family)."""
        return cls(config_of(model), families.of_model(model), {layer.name: layer for layer in model.layers})

    @property
    def dtype(self) -> str:
        """Its dtype policy's name (its token embedding's)."""
        return self.layers[names.EMBEDDING_TOKEN].dtype_policy.name
