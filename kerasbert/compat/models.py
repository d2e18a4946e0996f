"""``bert4keras.models`` -> ``kerasbert.compat.models``: `build_transformer_model`."""

from __future__ import annotations

from kerasbert.compat import backend
from kerasbert.modeling import models
from kerasbert.modeling.config import resolve_config

__all__ = ["build_transformer_model"]


def build_transformer_model(config_path=None, checkpoint_path=None, model="bert", **kwargs):
    """`kerasbert.modeling.models.build_transformer_model`, with bert4keras's `set_gelu` applied.

    After ``set_gelu("tanh")`` a config whose ``hidden_act`` is ``"gelu"`` builds with the tanh approximation
    (``hidden_act="gelu_tanh"``), as bert4keras does; an explicit ``hidden_act=...`` argument wins. Every other
    argument, and the model built, are kerasbert's.

    Example:
    >>> from kerasbert.compat.backend import set_gelu
    >>> set_gelu("tanh")
    >>> from kerasbert import config_of
    >>> config_of(build_transformer_model("tiny", verbose=False)).activation
    'gelu_tanh'
    >>> set_gelu("erf")
    """
    if backend.gelu_version() == "tanh" and "hidden_act" not in kwargs:
        config = kwargs.get("config")
        if resolve_config(config if config is not None else config_path).activation == "gelu":
            kwargs["hidden_act"] = "gelu_tanh"
    return models.build_transformer_model(config_path, checkpoint_path, model, **kwargs)
