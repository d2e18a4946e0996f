"""``bert4keras.models`` -> ``kerasbert.compat.models``: `build_transformer_model`, bert4keras's model classes
(`Transformer` and the families' classes, `kerasbert.compat._model_classes`), and `T5Transformer`, what
``return_keras_model=False`` returns for a whole T5."""

from __future__ import annotations

import dataclasses
import os

from kerasbert.compat import backend
from kerasbert.compat._model_builder import build_model_object
from kerasbert.compat._model_classes import (
    LM_Mask,
    Transformer,
    UniLM_Mask,
    extend_with_language_model,
    extend_with_unified_language_model,
)
from kerasbert.compat._model_classes_families import (
    ALBERT,
    BERT,
    ELECTRA,
    GPT,
    GPT2,
    GPT2_ML,
    NEZHA,
    ALBERT_Unshared,
    RoFormer,
    RoFormerV2,
)
from kerasbert.modeling import families, models
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.config import resolve_config
from kerasbert.modeling.t5 import T5

__all__ = ["ALBERT", "BERT", "ELECTRA", "GPT", "GPT2", "GPT2_ML", "NEZHA", "ALBERT_Unshared", "LM_Mask", "RoFormer",
           "RoFormerV2", "T5Transformer", "Transformer", "UniLM_Mask", "build_transformer_model",
           "extend_with_language_model", "extend_with_unified_language_model"]


@dataclasses.dataclass(frozen=True)
class T5Transformer:
    """bert4keras's ``T5`` object: the whole encoder-decoder and its two parts alone, three graphs over one set of
    layers, so training ``model`` trains ``encoder`` and ``decoder`` too (a seq2seq script trains the one and
    decodes with the others).

    Args:
        model: TransformerModel. ``[Encoder-Input-Token, Decoder-Input-Token]`` -> the next-token probabilities.
        encoder: TransformerModel. ``[Encoder-Input-Token]`` -> the encoder's output ``[B, S, H]``.
        decoder: TransformerModel. ``[Input-Context, Decoder-Input-Token]`` -> the next-token probabilities, every
            position of the context read.
        name: str. the ``name=`` given (the parts are ``{name}_Encoder`` and ``{name}_Decoder``), or None.
    """

    model: TransformerModel
    encoder: TransformerModel
    decoder: TransformerModel
    name: str | None = None

    @property
    def inputs(self) -> list:
        """The whole model's inputs."""
        return self.model.inputs

    @property
    def outputs(self) -> list:
        """The whole model's outputs."""
        return self.model.outputs

    @classmethod
    def of(cls, model: TransformerModel, name: str | None = None) -> T5Transformer:
        """The encoder and decoder alone wired over a whole T5 ``model``'s own layers, named as bert4keras names
        them (``Encoder``/``Decoder``, ``{name}_Encoder``/``{name}_Decoder`` with a ``name``)."""
        whole, length = T5.of(model), model.inputs[0].shape[1]
        parts = []
        for part in families.PARTS:
            t5 = whole.alone(part)
            inputs, title = t5.inputs(length), part.title()
            alone = TransformerModel(inputs, t5.outputs(inputs, "encoder", {})[0], name=f"{name}_{title}" if name
                                     else title, bert_config=whole.config, family=t5.family.name,
                                     application="encoder")
            alone.jit_compile = model.jit_compile
            parts.append(alone)
        return cls(model, *parts, name)


# bert4keras's arguments only its model objects take: a model built with one goes through its class
OBJECT_ARGUMENTS = {"compound_tokens", "prefix", "layer_norm_cond", "layer_norm_cond_hidden_size",
                    "layer_norm_cond_hidden_act", "additional_input_layers", "attention_caches", "layers",
                    "residual_attention_scores", "ignore_invalid_weights", "autoresize_weights", "custom_position_ids",
                    "attention_key_size"}


def build_transformer_model(config_path: str | os.PathLike | None = None,
                            checkpoint_path: str | os.PathLike | None = None, model: str | type | None = None,
                            application: str = "encoder", return_keras_model: bool = True,
                            **kwargs) -> TransformerModel | T5Transformer | Transformer:
    """`kerasbert.modeling.models.build_transformer_model`, with bert4keras's `set_gelu` applied, its model classes
    and ``return_keras_model``.

    ``model`` takes bert4keras's families: ``bert`` (``roberta``), ``albert``, ``albert_unshared``, ``nezha``,
    ``electra``, ``roformer``, ``roformer_v2``, ``gpt``, ``gpt2``, ``gpt2_ml`` and T5's
    (`kerasbert.modeling.families`), or a model class (`BERT`, ..., a subclass of one). Left out, it is ``bert``
    for a Google ``bert_config.json``, as in bert4keras, and the ``model_type`` of a Hugging Face ``config.json``.
    ``application`` is bert4keras's ``"encoder"``, ``"lm"`` or ``"unilm"`` (`kerasbert.modeling.masks`).

    After ``set_gelu("tanh")`` a config whose ``hidden_act`` is ``"gelu"`` builds with the tanh approximation
    (``hidden_act="gelu_tanh"``), as bert4keras does, whatever the family; an explicit ``hidden_act=...``
    argument wins. Every other argument, and the model built, are kerasbert's.

    ``return_keras_model=False`` returns bert4keras's model object instead: the family's class (`BERT`, `ALBERT`,
    ..., `GPT2_ML`), built, with ``.model`` (the Keras model), ``.layers``, ``.inputs``, ``.outputs``,
    ``variable_mapping()``, ``load_weights_from_checkpoint`` and ``save_weights_as_checkpoint``; for a whole T5
    (``model="t5"``, ``"t5.1.1"``, ``"mt5.1.1"``), `T5Transformer`, whose ``.model``, ``.encoder`` and ``.decoder``
    share their layers. A model class is built the same way, its own steps wherever it overrides them.

    Example:
    >>> from kerasbert.compat.backend import set_gelu
    >>> set_gelu("tanh")
    >>> from kerasbert import config_of
    >>> config_of(build_transformer_model("tiny", verbose=False)).activation
    'gelu_tanh'
    >>> albert = build_transformer_model("tiny", model="albert", embedding_size=16, verbose=False)
    >>> albert.family, config_of(albert).activation
    ('albert', 'gelu_tanh')
    >>> set_gelu("erf")
    >>> bert = build_transformer_model("tiny", return_keras_model=False, verbose=False)
    >>> type(bert).__name__, bert.model.name, bert.layers["Embedding-Token"] is bert.model.get_layer("Embedding-Token")
    ('BERT', 'bert', True)
    >>> config = {"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
    ...           "attention_head_size": 4, "intermediate_size": 32, "hidden_act": ["gelu", "linear"],
    ...           "relative_attention_num_buckets": 32}
    >>> t5 = build_transformer_model(config=config, model="mt5.1.1", return_keras_model=False, name="T5",
    ...                              verbose=False)
    >>> t5.encoder.name, [t.name for t in t5.decoder.inputs], t5.decoder.family
    ('T5_Encoder', ['Input-Context', 'Decoder-Input-Token'], 'mt5.1.1_decoder')
    >>> t5.encoder.get_layer("Embedding-Token") is t5.model.get_layer("Embedding-Token")
    True
    """
    if backend.gelu_version() == "tanh" and "hidden_act" not in kwargs:
        config = kwargs.get("config")
        if resolve_config(config if config is not None else config_path).activation == "gelu":
            kwargs["hidden_act"] = "gelu_tanh"
    if isinstance(model, type):
        built = build_model_object(config_path, checkpoint_path, model, application, **kwargs)
        return built.model if return_keras_model else built
    if return_keras_model and not OBJECT_ARGUMENTS & set(kwargs):
        return models.build_transformer_model(config_path, checkpoint_path, model, application, **kwargs)
    if return_keras_model and not _whole_t5(model, kwargs.get("config"), config_path):
        return build_model_object(config_path, checkpoint_path, model, application, **kwargs).model
    if _whole_t5(model, kwargs.get("config"), config_path):
        built = models.build_transformer_model(config_path, checkpoint_path, model, application, **kwargs)
        return T5Transformer.of(built, kwargs.get("name"))
    return build_model_object(config_path, checkpoint_path, model, application, **kwargs)


def _whole_t5(model: str | None, config, config_path) -> bool:
    """Whether ``model`` (else the config's ``model_type``) is a whole T5, whose parts bert4keras returns too."""
    family = families.resolve(model, resolve_config(config if config is not None else config_path))
    return family.architecture == "t5" and not family.part
