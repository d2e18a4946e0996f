"""Hugging Face's T5, mT5, GPT-2 and DistilBERT ``config.json`` keys, read as `kerasbert.BertConfig`'s and written
back.

Hugging Face names these configs' sizes its own way; `from_hf` renames them to BertConfig's keys and `to_hf` back,
so a config read from a folder is written (`BertConfig.to_json`, ``.keras`` files, `kerasbert.save_hf_checkpoint`)
as a ``config.json`` transformers and keras-hub read:

    t5, mt5   d_model H, d_kv d (attention_head_size), d_ff I, num_layers L (num_decoder_layers must equal it),
              num_heads A, dropout_rate, layer_norm_epsilon, feed_forward_proj ("relu", "gated-gelu", ...) the
              activation, tie_word_embeddings (T5.1.0's tied output, ungated; T5.1.1's and mT5's untied, gated);
              relative_attention_num_buckets and relative_attention_max_distance as they are
    gpt2      n_embd H, n_layer L, n_head A, n_inner I (None: 4·H), n_positions P, activation_function,
              layer_norm_epsilon, resid_pdrop and attn_pdrop the dropouts
    distilbert  dim H, n_layers L, n_heads A, hidden_dim I, activation, dropout, attention_dropout (its norms' ε
              is transformers' fixed 1e-12, BertConfig's default); no segments
    modernbert  hidden_activation, norm_eps, embedding_dropout, attention_dropout (`modernbert_config`); no segments

Keys kerasbert does not read stay as they are (``decoder_start_token_id``, ``eos_token_id``, ...). A config with one
of these ``model_type`` values also says the model computes Hugging Face's numbers where they differ from
bert4keras's (`kerasbert.modeling.t5.T5Options`).

Example:
>>> values = from_hf({"model_type": "t5", "vocab_size": 100, "d_model": 16, "d_kv": 4, "d_ff": 32,
...                   "num_layers": 2, "num_heads": 2, "feed_forward_proj": "gated-gelu",
...                   "tie_word_embeddings": False}, "config.json")
>>> values["hidden_size"], values["hidden_act"], values["attention_head_size"]
(16, ['gelu_new', 'linear'], 4)
>>> to_hf(values, "gelu_tanh")["feed_forward_proj"], to_hf(values, "gelu_tanh")["d_model"]
('gated-gelu', 16)
"""

from __future__ import annotations

from typing import Any

from kerasbert.errors import ConfigError, fail
from kerasbert.modeling import modernbert_config

HF_MODEL_TYPES = ("t5", "mt5", "gpt2", "distilbert", "modernbert")  # the model_type values whose keys are renamed here
# Hugging Face's key -> BertConfig's, per model_type
_T5_KEYS = {"d_model": "hidden_size", "d_kv": "attention_head_size", "d_ff": "intermediate_size",
            "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
            "dropout_rate": "hidden_dropout_prob", "layer_norm_epsilon": "layer_norm_eps"}
KEYS = {"t5": _T5_KEYS, "mt5": _T5_KEYS,
        "gpt2": {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
                 "n_inner": "intermediate_size", "n_positions": "max_position_embeddings",
                 "activation_function": "hidden_act", "layer_norm_epsilon": "layer_norm_eps",
                 "resid_pdrop": "hidden_dropout_prob", "attn_pdrop": "attention_probs_dropout_prob"},
        "distilbert": {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
                       "hidden_dim": "intermediate_size", "activation": "hidden_act", "dropout": "hidden_dropout_prob",
                       "attention_dropout": "attention_probs_dropout_prob"},
        "modernbert": modernbert_config.KEYS}
_T5_DEFAULTS = {"d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_heads": 8, "dropout_rate": 0.1, "d_model": 512,
                "layer_norm_epsilon": 1e-6, "feed_forward_proj": "relu", "relative_attention_num_buckets": 32,
                "relative_attention_max_distance": 128}  # transformers' T5Config defaults
_GPT2_DEFAULTS = {"n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "activation_function": "gelu_new",
                  "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1, "attn_pdrop": 0.1}  # GPT2Config's
_DISTILBERT_DEFAULTS = {"dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072, "activation": "gelu",
                        "dropout": 0.1, "attention_dropout": 0.1}  # DistilBertConfig's
# GPT-2 options transformers reads whose other values kerasbert's GPT-2 does not compute: key -> the value it needs
_GPT2_FIXED = {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "add_cross_attention": False}
# kerasbert's activation (`kerasbert.BertConfig.activation`) -> transformers' name of the same function
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


def _renamed(values: dict, keys: dict) -> dict:
    """``values`` with Hugging Face's keys renamed by ``keys``; a renamed key wins over one already so named."""
    return {**{key: value for key, value in values.items() if key not in keys},
            **{keys[key]: value for key, value in values.items() if key in keys}}


def _defaults(values: dict, defaults: dict, keys: dict) -> dict:
    """transformers' ``defaults`` for the keys ``values`` gives under neither name (``n_embd`` nor ``hidden_size``,
    which transformers' configs also take)."""
    return {**{key: value for key, value in defaults.items() if key not in values and keys.get(key) not in values},
            **values}


def _t5_activation(values: dict, source: str) -> list | str:
    """``feed_forward_proj`` as ``hidden_act``: ``"relu"``, or ``[act, "linear"]`` for ``"gated-act"`` (``gated-gelu``
    is the tanh GELU, transformers' ``gelu_new``), checked against ``tie_word_embeddings``."""
    proj = values.pop("feed_forward_proj")
    gated = isinstance(proj, str) and proj.startswith("gated-")
    act = proj[len("gated-"):] if gated else proj
    tied = values.pop("tie_word_embeddings", True)
    if tied is gated:  # T5.1.0 ties its output to the embedding, T5.1.1 and mT5 gate and untie
        raise fail(ConfigError, f"{source}: tie_word_embeddings", f"{not gated} with feed_forward_proj {proj!r}",
                   repr(tied), "kerasbert builds T5.1.0 (relu, tied output) and T5.1.1 / mT5 (gated, untied)")
    if gated:
        return ["gelu_new" if act == "gelu" else act, "linear"]
    return act


def _t5(values: dict, source: str) -> dict:
    values = _renamed(_defaults(values, _T5_DEFAULTS, _T5_KEYS), _T5_KEYS)
    decoder_layers = values.pop("num_decoder_layers", None)
    if decoder_layers is not None and decoder_layers != values["num_hidden_layers"]:
        raise fail(ConfigError, f"{source}: num_decoder_layers", f"num_layers {values['num_hidden_layers']}",
                   repr(decoder_layers), "kerasbert's T5 has as many decoder blocks as encoder blocks")
    values["hidden_act"] = _t5_activation(values, source)
    values.setdefault("attention_probs_dropout_prob", values["hidden_dropout_prob"])  # T5's one dropout rate
    return values


def _gpt2(values: dict, source: str) -> dict:
    keys = KEYS["gpt2"]
    values = _renamed(_defaults(values, _GPT2_DEFAULTS, keys), keys)
    for key, needed in _GPT2_FIXED.items():
        if values.get(key, needed) != needed:
            raise fail(ConfigError, f"{source}: {key}", repr(needed), repr(values[key]),
                       "kerasbert's GPT-2 computes transformers' default attention only")
    if values.get("intermediate_size") is None:  # n_inner None: 4·H
        width = values["hidden_size"]
        values["intermediate_size"] = 4 * width if isinstance(width, int) and not isinstance(width, bool) else width
    return values


def from_hf(values: dict[str, Any], source: str) -> dict[str, Any]:
    """A Hugging Face T5, mT5, GPT-2 or DistilBERT config's keys as BertConfig's (`KEYS`), transformers' defaults
    filled in; a ConfigError for what kerasbert cannot build (``num_decoder_layers`` ≠ ``num_layers``, a gated T5
    with a tied output, GPT-2's attention scaled by layer). T5, GPT-2 and DistilBERT have no segments:
    ``type_vocab_size`` 0 unless given.

    Example:
    >>> from_hf({"model_type": "gpt2", "vocab_size": 50, "n_embd": 8}, "config.json")["intermediate_size"]
    32
    """
    kind = values["model_type"]
    if kind == "distilbert":
        values = _renamed(_defaults(dict(values), _DISTILBERT_DEFAULTS, KEYS[kind]), KEYS[kind])
    elif kind == "modernbert":  # its options checked as the file is read (`modernbert_config.options`)
        values = _renamed(_defaults(dict(values), modernbert_config.DEFAULTS, KEYS[kind]), KEYS[kind])
        modernbert_config.options(values, values.get("num_hidden_layers"), source)
    else:
        values = _t5(dict(values), source) if kind in ("t5", "mt5") else _gpt2(dict(values), source)
    values.setdefault("type_vocab_size", 0)
    return values


def _gated_name(activation: str) -> str:
    """transformers' ``feed_forward_proj`` of a gated activation: ``gated-gelu`` is its tanh GELU, and the exact
    (erf) one is ``gated-gelu_python``."""
    return {"gelu_tanh": "gated-gelu", "gelu": "gated-gelu_python"}.get(activation,
                                                                        f"gated-{HF_ACTIVATIONS[activation]}")


def to_hf(values: dict[str, Any], activation: str) -> dict[str, Any]:
    """BertConfig's keys (`kerasbert.BertConfig.to_dict` of a T5, mT5, GPT-2 or DistilBERT config, ``activation`` its
    `kerasbert.BertConfig.activation`) as Hugging Face's: the inverse of `from_hf`.

    Example:
    >>> to_hf({"model_type": "gpt2", "hidden_size": 8, "hidden_act": "gelu_new", "type_vocab_size": 0}, "gelu_tanh")
    {'model_type': 'gpt2', 'n_embd': 8, 'activation_function': 'gelu_new'}
    """
    kind = values["model_type"]
    back = {ours: theirs for theirs, ours in KEYS[kind].items()}
    values = dict(values)
    if values.get("type_vocab_size") == 0:
        del values["type_vocab_size"]
    gated = not isinstance(values["hidden_act"], str)
    values["hidden_act"] = _gated_name(activation) if gated else HF_ACTIVATIONS[activation]
    if kind in ("t5", "mt5"):
        values["feed_forward_proj"] = values.pop("hidden_act")
        values.update(tie_word_embeddings=not gated, num_decoder_layers=values["num_hidden_layers"])
    return _renamed(values, back)
