"""TransformerModel: a functional Keras model that carries the `BertConfig` it was built from.

bert4keras keeps the config on its ``Transformer`` object, keras-hub on its ``Backbone``, Hugging Face as
``model.config``; kerasbert keeps it on the functional model itself, with the model's family (``"bert"``,
``"albert"``, ...: `kerasbert.modeling.families`) and application (``"encoder"``, ``"lm"``, ``"unilm"``:
`kerasbert.modeling.masks`). `build_transformer_model` and every head of `kerasbert.modeling.heads` return one;
the graph, its layer names and its outputs are those of ``keras.Model(inputs, outputs)``. The config travels
through ``get_config``/``from_config``, `clone` and ``.keras`` files; consumers read it with `kerasbert.config_of`
(`kerasbert.modeling.config.config_of`).
"""

from __future__ import annotations

import keras

from kerasbert.errors import ModelError, fail
from kerasbert.modeling import families
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.masks import APPLICATIONS
from kerasbert.modeling.registry import register
from kerasbert.perf import half_gradients

__all__ = ["APPLICATIONS", "FAMILIES", "TransformerModel", "clone"]

FAMILIES = (*families.FAMILY_NAMES, *families.PART_NAMES)  # the families kerasbert builds, T5's parts alone too


@register
class TransformerModel(keras.Model):
    """``keras.Model(inputs, outputs)`` that also keeps its `BertConfig`, family and application.

    Args:
        inputs: the model's input tensors (``Input-Token``, ``Input-Segment``).
        outputs: its output tensor(s).
        name: str. the model's name.
        bert_config: BertConfig or dict. the config the graph was built from (None only where Keras makes the
            model from tensors alone, ``keras.models.clone_model``: reading it is then a ModelError).
        family: str. the architecture, one of `FAMILIES`.
        application: str. one of `APPLICATIONS`.
        **kwargs: ``keras.Model`` arguments (``trainable``).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> bert = build_transformer_model("tiny", verbose=False)
    >>> type(bert).__name__, bert.family, bert.application, bert.bert_config.hidden_size
    ('TransformerModel', 'bert', 'encoder', 32)
    """

    def __init__(self, inputs, outputs, name=None, *, bert_config: BertConfig | dict | None = None,
                 family: str = "bert", application: str = "encoder", **kwargs):
        super().__init__(inputs=inputs, outputs=outputs, name=name, **kwargs)
        for argument, value, allowed in (("family", family, FAMILIES), ("application", application, APPLICATIONS)):
            if value not in allowed:
                raise fail(ModelError, argument, " or ".join(map(repr, allowed)), repr(value))
        if isinstance(bert_config, dict):
            bert_config = BertConfig.from_dict(bert_config, source=f"the config stored in model {self.name}")
        self._stored_config = bert_config
        self.family, self.application = family, application

    @property
    def bert_config(self) -> BertConfig:
        """The `BertConfig` the model was built from."""
        if self._stored_config is None:  # a model made by Keras from tensors alone (keras.models.clone_model)
            raise fail(ModelError, f"model {self.name!r}", "a kerasbert model that carries its config",
                       "a copy made without one", families.WRAP_HINT)
        return self._stored_config

    def train_step(self, *args, **kwargs):  # (data) on TensorFlow, (state, data) on JAX
        # projections may hand their gradients over in bf16 to an optimizer that says it takes them
        with half_gradients.allowing(getattr(self.optimizer, "half_gradients", False)):
            return super().train_step(*args, **kwargs)

    def get_config(self) -> dict:
        return {**super().get_config(), "bert_config": self.bert_config.to_dict(), "family": self.family,
                "application": self.application}


def clone(model: TransformerModel, **options) -> TransformerModel:
    """``keras.models.clone_model(model, **options)`` that keeps the model's config, family and application.

    Args:
        model: TransformerModel. the model to copy.
        **options: arguments of ``keras.models.clone_model`` (``clone_function``, ``input_tensors``, ...).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> bert = build_transformer_model("tiny", verbose=False)
    >>> copy = clone(bert)
    >>> copy.bert_config == bert.bert_config, copy.layers[-1] is bert.layers[-1]
    (True, False)
    """
    copy = keras.models.clone_model(model, **options)
    return TransformerModel(copy.inputs, copy.outputs, name=model.name, bert_config=model.bert_config,
                            family=model.family, application=model.application)
