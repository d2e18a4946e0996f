"""`build_model_object`: bert4keras's ``build_transformer_model`` for a model object: the config's values as the
class's arguments, the class under the application's mask, ``build``, then the checkpoint.

Example:
>>> from kerasbert.compat.models import NEZHA
>>> nezha = build_model_object("tiny", model=NEZHA, verbose=False)
>>> type(nezha).__name__, nezha.model.family, nezha.max_position
('NEZHA', 'nezha', 64)
"""

from __future__ import annotations

import os

from kerasbert.compat._model_classes import Transformer, extend_with_language_model, extend_with_unified_language_model
from kerasbert.compat._model_classes_families import CLASSES
from kerasbert.compat._model_classes_t5 import T5_CLASSES, VERSIONS
from kerasbert.errors import ConfigError, fail
from kerasbert.modeling import families
from kerasbert.modeling.config import BertConfig, resolve_config
from kerasbert.modeling.masks import check_application


def arguments_of(config: BertConfig) -> dict:
    """A kerasbert config as bert4keras's arguments (its keys of no field too, e.g. ``attention_key_size``), the
    config itself as ``config``."""
    return {**config.extra, "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
            "num_hidden_layers": config.num_hidden_layers, "num_attention_heads": config.num_attention_heads,
            "intermediate_size": config.intermediate_size, "hidden_act": config.hidden_act,
            "dropout_rate": config.hidden_dropout_prob, "attention_dropout_rate": config.attention_probs_dropout_prob,
            "embedding_size": config.embedding_size, "attention_head_size": config.attention_head_size,
            "max_position": config.max_position_embeddings, "segment_vocab_size": config.type_vocab_size,
            "config": config}


def class_of(family: families.Family, kwargs: dict) -> type:
    """The model class of ``family``; a T5's puts bert4keras's ``version`` in ``kwargs`` (``model="t5"`` keeps a
    ``version`` given, as bert4keras does)."""
    if family.architecture == "t5":
        whole = family.name[:-len(family.part) - 1] if family.part else family.name
        version = next(v for v, name in VERSIONS.items() if name == whole)
        if whole != "t5" or "version" not in kwargs:
            kwargs["version"] = version
        return T5_CLASSES[family.part]
    return CLASSES[family.name]


def build_model_object(config_path: str | os.PathLike | None = None,
                       checkpoint_path: str | os.PathLike | None = None, model: str | type | None = None,
                       application: str = "encoder", **kwargs) -> Transformer:
    """The model object of ``model`` (a family's name or a model class), built, its checkpoint loaded.

    Args:
        config_path: str. a config file, folder or preset name.
        checkpoint_path: str. a TF checkpoint (prefix, folder or ``.index``), or None.
        model: str or type. a family (`kerasbert.modeling.families`, T5's whole or a part), or a `Transformer`
            class.
        application: str. ``"encoder"``, ``"lm"`` (`extend_with_language_model`) or ``"unilm"``
            (`extend_with_unified_language_model`).
        **kwargs: the class's and ``build``'s arguments, kerasbert's ``config`` (instead of ``config_path``),
            ``allow_missing`` (``ignore_invalid_weights``), ``verbose`` and ``dtype``.

    Returns:
        The built `Transformer`.
    """
    config = kwargs.pop("config", None)
    if config is not None and config_path is not None:
        raise fail(ConfigError, "build_transformer_model", "config_path or config, not both", "both")
    config = resolve_config(config if config is not None else config_path)
    if isinstance(model, type):
        cls, family = model, getattr(model, "kerasbert_family", None)
    else:
        resolved = families.resolve(model, config)
        cls, family = class_of(resolved, kwargs), resolved.name
    application = check_application(application, family) if family else application
    if application == "lm" and not getattr(cls, "application", None) == "lm":
        cls = extend_with_language_model(cls)
    elif application == "unilm":
        cls = extend_with_unified_language_model(cls)
    if kwargs.pop("allow_missing", False):
        kwargs["ignore_invalid_weights"] = True
    arguments = {**arguments_of(config), **kwargs}
    transformer = cls(**arguments)
    transformer.build(**arguments)
    if checkpoint_path is not None:
        transformer.load_weights_from_checkpoint(checkpoint_path)
    return transformer
