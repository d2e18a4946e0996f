"""``bert4keras.models`` -> ``kerasbert.compat.models``: `build_transformer_model`."""

from __future__ import annotations

import os

from kerasbert.compat import backend
from kerasbert.modeling import models
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.config import resolve_config

__all__ = ["build_transformer_model"]


def build_transformer_model(config_path: str | os.PathLike | None = None,
                            checkpoint_path: str | os.PathLike | None = None, model: str | None = None,
                            application: str = "encoder", **kwargs) -> TransformerModel:
    """`kerasbert.modeling.models.build_transformer_model`, with bert4keras's `set_gelu` applied.

    ``model`` takes bert4keras's encoder families, passed through: ``bert`` (``roberta``), ``albert``,
    ``albert_unshared``, ``nezha``, ``electra``, ``roformer``, ``roformer_v2`` (`kerasbert.modeling.families`).
    Left out, it is ``bert`` for a Google ``bert_config.json``, as in bert4keras, and the ``model_type`` of a
    Hugging Face ``config.json``. ``application`` is bert4keras's ``"encoder"``, ``"lm"`` or ``"unilm"``
    (`kerasbert.modeling.masks`).

    After ``set_gelu("tanh")`` a config whose ``hidden_act`` is ``"gelu"`` builds with the tanh approximation
    (``hidden_act="gelu_tanh"``), as bert4keras does, whatever the family; an explicit ``hidden_act=...``
    argument wins. Every other argument, and the model built, are kerasbert's.

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
    """
    if backend.gelu_version() == "tanh" and "hidden_act" not in kwargs:
        config = kwargs.get("config")
        if resolve_config(config if config is not None else config_path).activation == "gelu":
            kwargs["hidden_act"] = "gelu_tanh"
    return models.build_transformer_model(config_path, checkpoint_path, model, application, **kwargs)
