"""Hugging Face folders of DeBERTa-v3 (transformers' ``model_type`` ``"deberta-v2"``): the names of its weights
(`hf_format`) and the ``config.json`` written for it (`hf_config`).

transformers' ``DebertaV2ForMaskedLM`` keeps the encoder under ``deberta.`` (a bare ``DebertaV2Model`` without it):

    deberta.embeddings.word_embeddings, token_type_embeddings (type_vocab_size > 0), embed_proj (E ≠ H, no bias),
        LayerNorm                                                  Embedding-Token, -Segment, -Mapping, -Norm
    deberta.encoder.rel_embeddings, deberta.encoder.LayerNorm      Embedding-Relative-Buckets[-Norm]
    deberta.encoder.layer.{i}.attention.self.{query,key,value}_proj, attention.output.{dense,LayerNorm},
        intermediate.dense, output.{dense,LayerNorm}               block i, BERT's layout
    cls.predictions.transform.{dense,LayerNorm}, cls.predictions.bias   MLM-Dense, MLM-Norm, MLM-Bias
    classifier                                                     a DebertaV2ForTokenClassification's Tagging-Dense

The released v3 files name their masked LM ``lm_predictions.lm_head.{dense,LayerNorm,bias}`` (transformers'
``legacy=False`` head, the same layers): those are read as ``cls.predictions.*`` (`RENAMES`), and written back under
the ``cls.predictions`` names. Their replaced-token head (``mask_predictions.*``) has no kerasbert layer and is
skipped. Linear weights are stored ``[out, in]``, the tables as the model has them.

Example:
>>> from kerasbert.modeling.families import get
>>> from kerasbert.weights.hf import HF
>>> fmt = hf_format(get("deberta_v3"), HF)
>>> fmt.names[("Transformer-{i}-MultiHeadSelfAttention", "qkv_kernel")][1].format(i=0)
'deberta.encoder.layer.0.attention.self.key_proj.weight'
>>> fmt.transposed("deberta.encoder.rel_embeddings.weight"), fmt.transposed("deberta.embeddings.embed_proj.weight")
(False, True)
"""

from __future__ import annotations

import dataclasses
import re

from kerasbert import layer_names as ln
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.deberta_config import MODEL_TYPE, DebertaOptions
from kerasbert.modeling.families import Family
from kerasbert.modeling.hf_configs import HF_ACTIVATIONS
from kerasbert.weights.family_names import ARCHITECTURES
from kerasbert.weights.names import HF_NAMES, each
from kerasbert.weights.table import Format

PREFIX = "deberta"
# another spelling of a name in a file -> the table's: the released v3 files' masked LM
RENAMES = ((re.compile(r"^lm_predictions\.lm_head\.(dense|LayerNorm)\."), r"cls.predictions.transform.\1."),
           (re.compile(r"^lm_predictions\.lm_head\.bias$"), "cls.predictions.bias"))
# BERT's rows DeBERTa has under its own names (no position table, pooler, NSP or sequence classifier of BERT's)
_KEPT = {ln.EMBEDDING_TOKEN, ln.EMBEDDING_SEGMENT, ln.EMBEDDING_NORM, ln.MLM_DENSE, ln.MLM_NORM, ln.MLM_BIAS,
         ln.TAGGING_DENSE}
_OWN = {(ln.EMBEDDING_MAPPING, "kernel"): f"{PREFIX}.embeddings.embed_proj.weight",
        (ln.RELATIVE_BUCKETS, "embeddings"): f"{PREFIX}.encoder.rel_embeddings.weight",
        (ln.RELATIVE_BUCKETS_NORM, "gamma"): f"{PREFIX}.encoder.LayerNorm.weight",
        (ln.RELATIVE_BUCKETS_NORM, "beta"): f"{PREFIX}.encoder.LayerNorm.bias"}


def _deberta_name(name: str) -> str:
    """BERT's Hugging Face name as DeBERTa's: ``deberta.`` for ``bert.``, ``query_proj`` for ``self.query``."""
    name = PREFIX + name[len("bert"):] if name.startswith("bert.") else name
    return re.sub(r"\.self\.(query|key|value)\.", r".self.\1_proj.", name)


def hf_names() -> dict:
    """The (layer, weight) -> Hugging Face name table of DeBERTa-v3.

    Example:
    >>> hf_names()[("Embedding-Relative-Buckets-Norm", "gamma")]
    'deberta.encoder.LayerNorm.weight'
    """
    table = {key: each(name, _deberta_name) for key, name in HF_NAMES.items()
             if key[0] in _KEPT or key[0].startswith(ln.BLOCK_PREFIX)}
    return {**table, **_OWN}


def hf_format(family: Family, hf: Format) -> Format:
    """DeBERTa-v3's Hugging Face format: ``hf`` (`kerasbert.weights.hf.HF`) with its names, its vocabulary rows, its
    fine-tuned token classifier optional, and the replaced-token head of the released files skipped."""
    return dataclasses.replace(
        hf, names=hf_names(), family=family.name, optional=frozenset({ln.TAGGING_DENSE}),
        vocab_rows=frozenset({f"{PREFIX}.embeddings.word_embeddings.weight", "cls.predictions.bias"}),
        skip=re.compile(rf"{hf.skip.pattern}|^mask_predictions\."),
        hints={**hf.hints, "rel_embeddings": "position_buckets", "embed_proj": "embedding_size"})


def hf_config(config: BertConfig, family: Family) -> dict:
    """The ``config.json`` of a DeBERTa-v3 folder: the config's keys, the attention kerasbert builds stated in
    transformers' keys (`kerasbert.modeling.deberta_config.DebertaOptions.hf_keys`: a preset's too, where transformers'
    defaults are DeBERTa-v2's), ``model_type`` ``"deberta-v2"`` and ``architectures`` ``DebertaV2ForMaskedLM``.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> values = hf_config(BertConfig.from_preset("tiny"), get("deberta_v3"))
    >>> values["model_type"], values["position_buckets"], values["position_biased_input"], values["architectures"]
    ('deberta-v2', 32, False, ['DebertaV2ForMaskedLM'])
    """
    values = {"pad_token_id": 0, **DebertaOptions.of(config).hf_keys(), **config.to_dict()}
    values["hidden_act"] = HF_ACTIVATIONS[config.activation]
    return {**values, "model_type": MODEL_TYPE, "architectures": [ARCHITECTURES[MODEL_TYPE]]}
