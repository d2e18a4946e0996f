"""``bert4keras.models`` -> ``kerasbert.compat.models``: `build_transformer_model` and bert4keras's model classes
(`Transformer`, `kerasbert.compat._model_classes`; the families' classes; T5's, `kerasbert.compat._model_classes_t5`).
"""

from __future__ import annotations

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
from kerasbert.compat._model_classes_t5 import T5, T5_Base, T5_Decoder, T5_Encoder
from kerasbert.modeling import models
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.config import resolve_config

__all__ = ["ALBERT", "BERT", "ELECTRA", "GPT", "GPT2", "GPT2_ML", "NEZHA", "ALBERT_Unshared", "LM_Mask", "RoFormer",
           "RoFormerV2", "T5", "T5_Base", "T5_Decoder", "T5_Encoder", "Transformer", "UniLM_Mask",
           "build_transformer_model", "extend_with_language_model", "extend_with_unified_language_model"]


# bert4keras's arguments only its model objects take: a model built with one goes through its class
OBJECT_ARGUMENTS = {"compound_tokens", "prefix", "layer_norm_cond", "layer_norm_cond_hidden_size",
                    "layer_norm_cond_hidden_act", "additional_input_layers", "attention_caches", "layers",
                    "residual_attention_scores", "ignore_invalid_weights", "autoresize_weights", "custom_position_ids",
                    "attention_key_size", "version", "with_lm", "cross_position_bias"}


def build_transformer_model(config_path: str | os.PathLike | None = None,
                            checkpoint_path: str | os.PathLike | None = None, model: str | type | None = None,
                            application: str = "encoder", return_keras_model: bool = True,
                            **kwargs) -> TransformerModel | Transformer:
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
    ..., `GPT2_ML`, `T5_Encoder`, `T5_Decoder`), built, with ``.model`` (the Keras model), ``.layers``, ``.inputs``,
    ``.outputs``, ``variable_mapping()``, ``load_weights_from_checkpoint`` and ``save_weights_as_checkpoint``; for a
    whole T5 (``model="t5"``, ``"t5.1.1"``, ``"mt5.1.1"``), `T5`, whose ``.model``, ``.encoder`` and ``.decoder``
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
    if isinstance(model, type) or not return_keras_model or OBJECT_ARGUMENTS & set(kwargs):
        built = build_model_object(config_path, checkpoint_path, model, application, **kwargs)
        return built.model if return_keras_model else built
    return models.build_transformer_model(config_path, checkpoint_path, model, application, **kwargs)
