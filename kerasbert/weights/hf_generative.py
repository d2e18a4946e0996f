"""Hugging Face folders of the generative families: the formats of T5's, mT5's and GPT-2's weights
(`hf_format`), the ``config.json`` written for them (`hf_config`) and bert4keras's config written back
(`google_config`), and the shapes of their weights from a config (`generative_shapes`), which
`kerasbert.weights.convert` checks a file against.

The names are transformers' (`kerasbert.weights.t5_names.t5_hf_names`, `kerasbert.weights.gpt_names.GPT2_HF_NAMES`).
The weights cross unchanged; which numbers a model computes is its config's: a Hugging Face config gives
transformers' (`kerasbert.modeling.t5.T5Options`), a bert4keras config bert4keras's. GPT and GPT2-ML have no
transformers model, and so no Hugging Face folder.

Example:
>>> from kerasbert.modeling.families import get
>>> from kerasbert.weights.hf import HF
>>> fmt = hf_format(get("t5.1.1"), HF)
>>> fmt.transposed("lm_head.weight"), fmt.transposed("shared.weight"), sorted(fmt.vocab_rows)
(True, False, ['lm_head.weight', 'shared.weight'])
"""

from __future__ import annotations

import dataclasses
import re

from kerasbert import layer_names as ln
from kerasbert.errors import CheckpointError, fail
from kerasbert.log import logger
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.families import MODEL_TYPES, Family, model_type
from kerasbert.weights.gpt_names import GPT2_HF_NAMES
from kerasbert.weights.names import variable_shapes
from kerasbert.weights.t5_names import t5_hf_names
from kerasbert.weights.table import Format

# transformers' names of a T5 projection, stored [out, in]; its embeddings, position tables and norms are not
_T5_LINEAR = re.compile(r"\.(q|k|v|o|wi|wi_0|wi_1|wo)\.weight$|^lm_head\.weight$")
_T5_DEFAULTS = {"is_encoder_decoder": True, "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 1}
# the norm ε bert4keras fixes, which its configs do not give (`kerasbert.modeling.t5_layers.NORM_EPSILON`, GPT-2's
# `kerasbert.modeling.gpt.LAYOUTS`): written into the config.json of a model built from one
BERT4KERAS_EPSILON = {"t5": 1e-6, "gpt": 1e-5}


def hf_format(family: Family, hf: Format) -> Format:
    """The Hugging Face format of a T5 or GPT-2 family: ``hf`` (`kerasbert.weights.hf.HF`) with its names, transposes,
    vocabulary rows and the tied copies a file may hold (``encoder.embed_tokens``, GPT-2's ``lm_head``,
    GPT-2's causal-mask buffers) skipped; a CheckpointError for GPT and GPT2-ML, which transformers lacks."""
    if family.architecture == "t5":
        return dataclasses.replace(
            hf, names=t5_hf_names(family), family=family.name, transposed=lambda name: bool(_T5_LINEAR.search(name)),
            vocab_rows=frozenset({"shared.weight", "lm_head.weight"}), optional=frozenset(),
            skip=re.compile(r"\.embed_tokens\.weight$|^lm_head\.weight$"),
            hints={"shared.weight": "vocab_size", "lm_head": "vocab_size", "DenseReluDense.w": "intermediate_size",
                   "relative_attention_bias": "relative_attention_num_buckets"})
    if family.checkpoint != "gpt2":
        kinds = sorted({name for name in MODEL_TYPES.values()} | {"t5.1.1"})
        raise fail(CheckpointError, "model", f"a family with a Hugging Face format ({', '.join(kinds)})",
                   repr(family.name), "transformers has no such model: use its Google checkpoint "
                   "(kerasbert.save_google_checkpoint)")
    return dataclasses.replace(
        hf, names=dict(GPT2_HF_NAMES), family=family.name, transposed=lambda name: False, optional=frozenset(),
        vocab_rows=frozenset({"transformer.wte.weight"}), skip=re.compile(r"\.attn\.(masked_)?bias$|^lm_head\.weight$"),
        hints={"wte": "vocab_size", "wpe": "max_position_embeddings", "c_fc": "intermediate_size",
               "mlp.c_proj.weight": "intermediate_size"})


def hf_config(config: BertConfig, family: Family) -> dict:
    """The ``config.json`` of a T5, mT5 or GPT-2 family's folder: transformers' keys
    (`kerasbert.modeling.hf_configs.to_hf`), its ``model_type`` and ``architectures``; a bert4keras config's norm ε
    as bert4keras fixes it. A bert4keras T5 config is logged: transformers computes its decoder otherwise.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> cfg = BertConfig.from_dict({"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1,
    ...                             "num_attention_heads": 2, "intermediate_size": 16})
    >>> values = hf_config(cfg, get("gpt2"))
    >>> values["model_type"], values["n_embd"], values["layer_norm_epsilon"], values["architectures"]
    ('gpt2', 8, 1e-05, ['GPT2LMHeadModel'])
    """
    from kerasbert.weights.family_names import ARCHITECTURES

    kind = model_type(family)
    if not config.hugging_face:
        config = config.replace(layer_norm_eps=BERT4KERAS_EPSILON[family.architecture])
        if family.architecture == "t5":
            logger.info("%s is bert4keras's T5 config: transformers computes the decoder without the cross-attention's "
                        "position bias, its padding mask and (T5.1.1, mT5) the output scale", config.source)
    values = config.replace(extra={**config.extra, "model_type": kind}).to_dict()
    defaults = _T5_DEFAULTS if family.architecture == "t5" else {}
    return {**defaults, **values, "architectures": [ARCHITECTURES[kind]]}


def google_config(config: BertConfig) -> dict:
    """bert4keras's config of a T5, mT5 or GPT-2 family: BertConfig's keys (`kerasbert.BertConfig.to_dict`) without
    ``model_type`` and ``architectures``, the activation under bert4keras's name (``gelu_tanh`` for ``gelu_new``).

    Example:
    >>> cfg = BertConfig.from_dict({"model_type": "gpt2", "vocab_size": 50, "n_embd": 8, "n_layer": 1, "n_head": 2})
    >>> values = google_config(cfg)
    >>> values["hidden_size"], values["hidden_act"], "model_type" in values
    (8, 'gelu_tanh', False)
    """
    extra = {key: value for key, value in config.extra.items() if key not in ("model_type", "architectures")}
    act = [config.activation, "linear"] if config.gated else config.activation
    return config.replace(extra=extra, hidden_act=act).to_dict()


def _t5_shape(key: tuple[str, str], config: BertConfig) -> tuple[int, ...]:
    """The shape of one (layer, weight) of a T5 family, kernels ``[in, out]`` and Q/K/V fused."""
    layer, weight = key
    h, heads, i, v = config.hidden_size, config.num_attention_heads * config.head_size, config.intermediate_size, \
        config.vocab_size
    if weight == "embeddings":
        return (v, h) if layer == ln.EMBEDDING_TOKEN else (config.relative_attention_num_buckets or 32,
                                                           config.num_attention_heads)
    if weight == "output_kernel":
        return (i, h) if layer.endswith(ln.FEED_FORWARD) else (heads, h)
    return {"gamma": (h,), "qkv_kernel": (h, 3 * heads), "q_kernel": (h, heads), "kv_kernel": (h, 2 * heads),
            "intermediate_kernel": (h, i), "gate_kernel": (h, i), "kernel": (h, v)}[weight]


def generative_shapes(family: Family, config: BertConfig, names: dict) -> dict:
    """The shape of each (layer, weight) of ``names`` (a T5 or GPT-2 family's table) for ``config``, in kerasbert's
    layout.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> cfg = BertConfig.from_dict({"model_type": "t5", "vocab_size": 50, "d_model": 8, "d_kv": 3, "num_heads": 2,
    ...                             "d_ff": 16, "num_layers": 1})
    >>> shapes = generative_shapes(get("t5"), cfg, t5_hf_names(get("t5")))
    >>> shapes[("Decoder-Transformer-{i}-MultiHeadCrossAttention", "kv_kernel")]
    (8, 12)
    """
    if family.architecture == "t5":
        return {key: _t5_shape(key, config) for key in names}
    h = config.hidden_size
    shapes = variable_shapes(config.vocab_size, h, config.intermediate_size, config.max_position_embeddings, 0)
    return {key: shapes.get(key, (h,)) for key in names}
