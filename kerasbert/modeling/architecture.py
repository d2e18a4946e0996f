"""The architecture of a model: the object that owns the wiring of one kind of model, and the table of kinds.

An architecture creates a model's layers and runs them: its embeddings, one block per layer index (in a graph,
for ``[CLS]`` alone, or one new position at a time over a decoder's kept keys and values), and its final layers.
The builder (`kerasbert.modeling.models.build_transformer_model`), the task heads (`kerasbert.modeling.heads`) and
the cached decoder (`kerasbert.generation.cache`) call it, and no other module spells how a block is wired. Each
family names its architecture (`kerasbert.modeling.families.Family.architecture`); bert4keras's encoder families
are data within one, `kerasbert.modeling.encoder.Encoder`. A new kind of model (a pre-norm decoder, an
encoder-decoder with cross-attention) is one module with a class of the `Architecture` shape, one row of
`ARCHITECTURES`, and its checkpoint tables in `kerasbert.weights` (docs/layout.md, "Adding a family").

Example:
>>> from kerasbert import build_transformer_model
>>> type(of(build_transformer_model("tiny", model="nezha", verbose=False))).__name__
'Encoder'
"""

from __future__ import annotations

from typing import Protocol

import keras

from kerasbert.modeling import families
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.deberta import DeBERTa
from kerasbert.modeling.encoder import Encoder
from kerasbert.modeling.families import Family
from kerasbert.modeling.gpt import GPT
from kerasbert.modeling.modernbert import ModernBert
from kerasbert.modeling.t5 import T5


class Architecture(Protocol):
    """What the builder, the heads and the decoder ask of an architecture (`kerasbert.modeling.encoder.Encoder`
    is one)."""

    config: BertConfig
    family: Family
    layers: dict[str, keras.layers.Layer]

    @classmethod
    def create(cls, config: BertConfig, family: Family, *, dtype=None, hierarchical=None) -> Architecture:
        """New layers, not yet wired."""

    @classmethod
    def of(cls, model: keras.Model) -> Architecture:
        """The architecture over a built model's layers."""

    def inputs(self, sequence_length: int | None) -> list:
        """The model's ``keras.Input`` tensors, with bert4keras's names."""

    def outputs(self, inputs: list, application: str, flags: dict) -> list:
        """The whole graph on ``inputs`` under ``application``'s attention mask, with the final layers ``flags``
        asks for: the output tensors, in bert4keras's order."""

    def encode(self, token_ids, segment_ids, mask):
        """The inputs through embeddings and every block: the sequence output."""

    def embed(self, token_ids, segment_ids, positions=None):
        """The embedding step."""

    @property
    def segments(self) -> bool:
        """Whether `embed` reads segment ids."""

    def positions(self, x):
        """What every attention reads of the positions in a graph (None where the embeddings add them)."""

    def positions_at(self, queries, keys):
        """The same for a decoder's rows at their own positions."""

    def block(self, index: int, x, mask, positions=None, *, cache=None, first=None):
        """Block ``index``: in a graph, for ``[CLS]`` alone (``first``), or over a decoder's ``cache``."""

    def final(self, x, flags: dict) -> list:
        """The final layers the ``with_*`` flags ask for."""

    def logits(self, x):
        """Next-token (or masked-token) logits at ``x``."""


# Family.architecture -> its class
ARCHITECTURES: dict[str, type] = {"encoder": Encoder, "gpt": GPT, "t5": T5, "deberta": DeBERTa,
                                  "modernbert": ModernBert}


def create(config: BertConfig, family: Family, *, dtype=None, hierarchical: float | None = None) -> Architecture:
    """New layers of ``family``'s architecture for ``config`` (`Architecture.create`)."""
    return ARCHITECTURES[family.architecture].create(config, family, dtype=dtype, hierarchical=hierarchical)


def of(model: keras.Model) -> Architecture:
    """The architecture of a built kerasbert model, over its own layers."""
    return ARCHITECTURES[families.of_model(model).architecture].of(model)
