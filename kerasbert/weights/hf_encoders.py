"""Hugging Face folders of the encoders that are BERT's graph under transformers' names of their own: RoBERTa,
XLM-R and DistilBERT. Their format (`hf_format`) and the ``config.json`` written for them (`hf_config`); they have
no Google TF1 form (`kerasbert.modeling.families.Family.checkpoint` is ``""``).

    roberta, xlm-roberta   BERT's names under ``roberta.`` (XLM-R's transformers model uses the same prefix), the
                           position table whole (``[P, H]``, its first pad_token_id + 1 rows never read),
                           ``roberta.pooler.dense`` where the folder has one, no NSP; the masked LM
                           ``lm_head.{dense, layer_norm, bias}`` (``lm_head.decoder`` is the tied word embeddings)
    distilbert             ``distilbert.embeddings.{word_embeddings, position_embeddings, LayerNorm}`` (no token
                           types), ``distilbert.transformer.layer.{i}.attention.{q,k,v,out}_lin``, ``sa_layer_norm``,
                           ``ffn.lin1``, ``ffn.lin2``, ``output_layer_norm``; the masked LM ``vocab_transform``,
                           ``vocab_layer_norm``, ``vocab_projector.bias``; no pooler, no NSP

A bare model's file (``RobertaModel``, ``DistilBertModel``: a sentence-transformers folder) lacks the prefix; the
reader adds it (`kerasbert.weights.hf.canonical_name`).

Example:
>>> from kerasbert.modeling.families import get
>>> names = hf_names(get("distilbert"))
>>> names[(ln.block(ln.BLOCK_KEY, ln.ATTENTION), "qkv_kernel")][0]
'distilbert.transformer.layer.{i}.attention.q_lin.weight'
>>> hf_names(get("xlm_roberta"))[(ln.MLM_NORM, "gamma")], (ln.NSP_PROBA, "kernel") in hf_names(get("roberta_en"))
('lm_head.layer_norm.weight', False)
"""

from __future__ import annotations

import dataclasses
import re

from kerasbert import layer_names as ln
from kerasbert.errors import CheckpointError, fail
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.families import Family, model_type, pad_id
from kerasbert.modeling.hf_configs import HF_ACTIVATIONS
from kerasbert.weights.names import HF_NAMES, each, with_one_block
from kerasbert.weights.table import Format

_ROBERTA_MLM = {(ln.MLM_DENSE, "kernel"): "lm_head.dense.weight", (ln.MLM_DENSE, "bias"): "lm_head.dense.bias",
                (ln.MLM_NORM, "gamma"): "lm_head.layer_norm.weight", (ln.MLM_NORM, "beta"): "lm_head.layer_norm.bias",
                (ln.MLM_BIAS, "bias"): "lm_head.bias"}
_DISTILBERT = {  # every row outside the blocks
    (ln.EMBEDDING_TOKEN, "embeddings"): "distilbert.embeddings.word_embeddings.weight",
    (ln.EMBEDDING_POSITION, "embeddings"): "distilbert.embeddings.position_embeddings.weight",
    # DistilBERT has no token types: a model built with segments finds no such weight in a folder
    (ln.EMBEDDING_SEGMENT, "embeddings"): "distilbert.embeddings.token_type_embeddings.weight",
    (ln.EMBEDDING_NORM, "gamma"): "distilbert.embeddings.LayerNorm.weight",
    (ln.EMBEDDING_NORM, "beta"): "distilbert.embeddings.LayerNorm.bias",
    (ln.MLM_DENSE, "kernel"): "vocab_transform.weight", (ln.MLM_DENSE, "bias"): "vocab_transform.bias",
    (ln.MLM_NORM, "gamma"): "vocab_layer_norm.weight", (ln.MLM_NORM, "beta"): "vocab_layer_norm.bias",
    (ln.MLM_BIAS, "bias"): "vocab_projector.bias",
}
_LINS = ("q_lin", "k_lin", "v_lin")
_DISTILBERT_BLOCK = {  # the layer in block {i}, weight -> its name after distilbert.transformer.layer.{i}.
    (ln.ATTENTION, "qkv_kernel"): tuple(f"attention.{p}.weight" for p in _LINS),
    (ln.ATTENTION, "qkv_bias"): tuple(f"attention.{p}.bias" for p in _LINS),
    (ln.ATTENTION, "output_kernel"): "attention.out_lin.weight",
    (ln.ATTENTION, "output_bias"): "attention.out_lin.bias",
    (ln.ATTENTION_NORM, "gamma"): "sa_layer_norm.weight",
    (ln.ATTENTION_NORM, "beta"): "sa_layer_norm.bias",
    (ln.FEED_FORWARD, "intermediate_kernel"): "ffn.lin1.weight",
    (ln.FEED_FORWARD, "intermediate_bias"): "ffn.lin1.bias",
    (ln.FEED_FORWARD, "output_kernel"): "ffn.lin2.weight",
    (ln.FEED_FORWARD, "output_bias"): "ffn.lin2.bias",
    (ln.FEED_FORWARD_NORM, "gamma"): "output_layer_norm.weight",
    (ln.FEED_FORWARD_NORM, "beta"): "output_layer_norm.bias",
}
# BERT's layers these transformers models have no weights for
_ABSENT = {"roberta": {ln.NSP_PROBA, ln.EMBEDDING_MAPPING}}
# the tied copies of the word embeddings and the MLM bias a folder may hold beside them
_TIED = r"|^lm_head\.decoder\.(weight|bias)$|^vocab_projector\.weight$"
_HINTS = {"lm_head.bias": "vocab_size", "vocab_projector.bias": "vocab_size", "ffn.lin1": "intermediate_size",
          "ffn.lin2.weight": "intermediate_size"}


def hf_names(family: Family) -> dict:
    """The Hugging Face table of RoBERTa, XLM-R or DistilBERT: (layer, weight) -> transformers' name(s).

    Example:
    >>> from kerasbert.modeling.families import get
    >>> hf_names(get("roberta_en"))[(ln.EMBEDDING_POSITION, "embeddings")]
    'roberta.embeddings.position_embeddings.weight'
    """
    if family.name == "distilbert":
        classifiers = {key: name for key, name in HF_NAMES.items() if key[0] in (ln.CLS_DENSE, ln.TAGGING_DENSE)}
        return with_one_block({**_DISTILBERT, **classifiers}, family, _DISTILBERT_BLOCK,
                              "distilbert.transformer.layer.{{i}}.{}")
    table = {key: each(names, _under_roberta) for key, names in HF_NAMES.items() if key[0] not in _ABSENT["roberta"]}
    return {**table, **_ROBERTA_MLM}


def _under_roberta(name: str) -> str:
    """BERT's name of an encoder weight under ``roberta.`` (``bert.pooler.dense.weight`` -> ``roberta.pooler...``)."""
    return "roberta" + name[len("bert"):] if name.startswith("bert.") else name


def hf_format(family: Family, hf: Format) -> Format:
    """The Hugging Face format of RoBERTa, XLM-R or DistilBERT: ``hf`` (`kerasbert.weights.hf.HF`, its transposes
    and buffers) with the family's names, vocabulary rows and the tied copies a folder may hold skipped.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> from kerasbert.weights.hf import HF
    >>> fmt = hf_format(get("roberta_en"), HF)
    >>> sorted(fmt.vocab_rows), bool(fmt.skip.search("lm_head.decoder.weight"))
    (['lm_head.bias', 'roberta.embeddings.word_embeddings.weight'], True)
    """
    names = hf_names(family)
    rows = frozenset({names[(ln.EMBEDDING_TOKEN, "embeddings")], names[(ln.MLM_BIAS, "bias")]})
    return dataclasses.replace(hf, names=names, family=family.name, vocab_rows=rows,
                               skip=re.compile(hf.skip.pattern + _TIED), hints={**hf.hints, **_HINTS})


def hf_config(config: BertConfig, family: Family) -> dict:
    """The ``config.json`` of a RoBERTa, XLM-R or DistilBERT folder: the config's keys (DistilBERT's own,
    `kerasbert.modeling.hf_configs`), transformers' activation name, ``pad_token_id``, ``model_type`` and
    ``architectures`` (``RobertaForMaskedLM``, ``XLMRobertaForMaskedLM``, ``DistilBertForMaskedLM``). A
    CheckpointError for a DistilBERT config with segments, which transformers' DistilBERT has no table for.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> cfg = BertConfig.from_dict({"vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1,
    ...                             "num_attention_heads": 2, "intermediate_size": 16, "type_vocab_size": 0})
    >>> values = hf_config(cfg, get("distilbert"))
    >>> values["model_type"], values["dim"], values["activation"], values["architectures"]
    ('distilbert', 8, 'gelu', ['DistilBertForMaskedLM'])
    """
    from kerasbert.weights.family_names import ARCHITECTURES

    kind = model_type(family)
    if kind == "distilbert" and config.type_vocab_size:
        raise fail(CheckpointError, "model", "a DistilBERT without segments (type_vocab_size 0), as transformers' "
                   "DistilBERT", f"type_vocab_size {config.type_vocab_size}", "build it from a DistilBERT "
                   "config.json, or with type_vocab_size=0")
    values = {"pad_token_id": pad_id(family, config),
              **config.replace(extra={**config.extra, "model_type": kind}).to_dict()}
    if kind != "distilbert":  # DistilBERT's own keys name it "activation" (`to_dict`)
        values["hidden_act"] = HF_ACTIVATIONS[config.activation]
    return {**values, "model_type": kind, "architectures": [ARCHITECTURES[kind]]}
