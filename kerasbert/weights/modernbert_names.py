"""ModernBERT's Hugging Face folders: transformers' names of ``ModernBertForMaskedLM`` (`MODERNBERT_HF_NAMES`), their
format (`hf_format`) and the ``config.json`` written for them (`hf_config`).

    model.embeddings.tok_embeddings, model.embeddings.norm       Embedding-Token, Embedding-Norm
    model.layers.{i}.attn_norm (none for layer 0)                 Transformer-{i}-MultiHeadSelfAttention-Norm
    model.layers.{i}.attn.Wqkv [3H, H], attn.Wo                  Transformer-{i}-MultiHeadSelfAttention
    model.layers.{i}.mlp_norm                                     Transformer-{i}-FeedForward-Norm
    model.layers.{i}.mlp.Wi [2I, H] (input, gate), mlp.Wo         Transformer-{i}-FeedForward
    model.final_norm                                              Encoder-Output-Norm
    head.dense, head.norm, decoder.bias                          MLM-Dense, MLM-Norm, MLM-Bias

Linear weights are stored ``[out, in]``; ``decoder.weight``, where a file holds it, is the token embedding again and
is skipped. A bare ``ModernBertModel`` file's names lack ``model.`` (`kerasbert.weights.hf.canonical_name`). Biases
are read where the config gives the model some (``norm_bias``, ``attention_bias``, ``mlp_bias``,
``classifier_bias``, ``decoder_bias``). ModernBERT has no Google TF1 form.

Example:
>>> from kerasbert.modeling.families import get
>>> from kerasbert.weights.hf import HF
>>> fmt = hf_format(get("modernbert"), HF)
>>> fmt.transposed("model.layers.1.attn.Wqkv.weight"), fmt.transposed("model.layers.1.mlp_norm.weight")
(True, False)
"""

from __future__ import annotations

import dataclasses
import re

from kerasbert import layer_names as ln
from kerasbert.modeling.config import ACTIVATIONS, BertConfig
from kerasbert.modeling.families import Family
from kerasbert.modeling.hf_configs import HF_ACTIVATIONS
from kerasbert.modeling.modernbert_config import options
from kerasbert.weights.family_names import ARCHITECTURES
from kerasbert.weights.table import Format

_LAYER = "model.layers.{i}."
_BLOCK = {  # (part of block {i}, weight) -> its name after model.layers.{i}., less .weight / .bias
    (ln.ATTENTION_NORM, "gamma"): "attn_norm", (ln.ATTENTION, "qkv_kernel"): "attn.Wqkv",
    (ln.ATTENTION, "output_kernel"): "attn.Wo", (ln.FEED_FORWARD_NORM, "gamma"): "mlp_norm",
    (ln.FEED_FORWARD, "intermediate_kernel"): "mlp.Wi", (ln.FEED_FORWARD, "output_kernel"): "mlp.Wo",
}
_OTHER = {(ln.EMBEDDING_TOKEN, "embeddings"): "model.embeddings.tok_embeddings",
          (ln.EMBEDDING_NORM, "gamma"): "model.embeddings.norm", (ln.FINAL_NORM, "gamma"): "model.final_norm",
          (ln.MLM_DENSE, "kernel"): "head.dense", (ln.MLM_NORM, "gamma"): "head.norm"}
_BIAS = {"gamma": "beta", "qkv_kernel": "qkv_bias", "output_kernel": "output_bias",
         "intermediate_kernel": "intermediate_bias", "kernel": "bias"}  # a weight's key -> its bias's


def _rows(table: dict) -> dict:
    """Each weight's row and its bias's row (``.weight`` and ``.bias``)."""
    rows = {}
    for (layer, weight), name in table.items():
        rows[(layer, weight)] = f"{name}.weight"
        if weight in _BIAS:
            rows[(layer, _BIAS[weight])] = f"{name}.bias"
    return rows


MODERNBERT_HF_NAMES = {**_rows({(ln.block(ln.BLOCK_KEY, part), weight): _LAYER + name
                                for (part, weight), name in _BLOCK.items()}),
                       **_rows({key: name for key, name in _OTHER.items() if key[1] != "embeddings"}),
                       (ln.EMBEDDING_TOKEN, "embeddings"): "model.embeddings.tok_embeddings.weight",
                       (ln.MLM_BIAS, "bias"): "decoder.bias"}
_LINEAR = re.compile(r"\.(Wqkv|Wo|Wi|dense)\.weight$")


def hf_format(family: Family, hf: Format) -> Format:
    """ModernBERT's format: ``hf`` (`kerasbert.weights.hf.HF`) with its names, its linear weights transposed, its
    vocabulary rows, and the tied ``decoder.weight`` skipped.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> from kerasbert.weights.hf import HF
    >>> sorted(hf_format(get("modernbert"), HF).vocab_rows)
    ['decoder.bias', 'model.embeddings.tok_embeddings.weight']
    """
    return dataclasses.replace(
        hf, names=dict(MODERNBERT_HF_NAMES), family=family.name, transposed=lambda name: bool(_LINEAR.search(name)),
        vocab_rows=frozenset({"model.embeddings.tok_embeddings.weight", "decoder.bias"}), optional=frozenset(),
        skip=re.compile(r"^decoder\.weight$"),
        hints={"tok_embeddings": "vocab_size", "decoder.bias": "vocab_size", "mlp.Wi": "intermediate_size",
               "mlp.Wo": "intermediate_size"})


def hf_config(config: BertConfig, family: Family) -> dict:
    """The ``config.json`` of a ModernBERT folder: transformers' keys (`kerasbert.modeling.modernbert_config`), the
    options the model was built with written out (a preset's defaults too), ``model_type`` ``"modernbert"`` and
    ``architectures`` ``["ModernBertForMaskedLM"]``.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> cfg = BertConfig.from_dict({"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1,
    ...                             "num_attention_heads": 2, "intermediate_size": 16})
    >>> values = hf_config(cfg, get("modernbert"))
    >>> values["model_type"], values["norm_eps"], values["local_attention"], "type_vocab_size" in values
    ('modernbert', 1e-12, 128, False)
    """
    opts = options(config.extra, config.num_hidden_layers, config.source)
    values = config.replace(extra={**config.extra, "model_type": "modernbert"}).to_dict()
    values.pop("type_vocab_size", None)  # no segments
    written = {"local_attention": opts.local_attention, "global_rope_theta": opts.global_rope_theta,
               "local_rope_theta": opts.local_rope_theta, "norm_bias": opts.norm_bias,
               "attention_bias": opts.attention_bias, "mlp_bias": opts.mlp_bias,
               "classifier_bias": opts.classifier_bias, "decoder_bias": opts.decoder_bias,
               "classifier_activation": HF_ACTIVATIONS[ACTIVATIONS[opts.classifier_activation]],
               "global_attn_every_n_layers": config.extra.get("global_attn_every_n_layers", 3),
               "pad_token_id": config.pad_id, "tie_word_embeddings": True}
    return {**values, **written, "architectures": [ARCHITECTURES["modernbert"]]}
