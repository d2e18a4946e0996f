"""Each family's Hugging Face names, and the shapes of a family's weights, beside `kerasbert.weights.names`.

Hugging Face names a family's weights after its transformers model: ``AlbertForPreTraining``,
``ElectraForPreTraining``, ``NezhaForPreTraining`` (transformers up to 4.39), ``RoFormerForMaskedLM``. The encoder
sits under the ``model_type`` (``albert.``, ``electra.``, ``nezha.``, ``roformer.``), and the heads beside it:

    albert     one layer group, albert.encoder.albert_layer_groups.0.albert_layers.0.{attention.query, ffn, ...},
               read by every block; albert.pooler; predictions.*; sop_classifier.classifier
    electra    BERT's blocks; electra.embeddings_project (E -> H); discriminator_predictions.{dense,
               dense_prediction}; no pooler, no MLM
    nezha      BERT's names without a position table; its relative_positions_encoding buffers are skipped
    roformer   BERT's names without a position table; roformer.embeddings_project (E -> H); cls.predictions.*;
               no pooler; its encoder.embed_positions sinusoid buffer is skipped

RoFormer-V2 has no transformers model: its folder holds RoFormer's names without biases and norm weights.

Example:
>>> from kerasbert.modeling.families import get
>>> hf_names(get("albert"))[(ln.block(None, ln.FEED_FORWARD_NORM), "gamma")]
'albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.weight'
>>> ARCHITECTURES["electra"]
'ElectraForPreTraining'
"""

from __future__ import annotations

from kerasbert import layer_names as ln
from kerasbert.modeling.families import Family, model_type
from kerasbert.weights.names import HF_NAMES, each, variable_shapes, with_one_block, without_biases

# model_type -> the transformers class whose names save_hf_checkpoint and convert write
ARCHITECTURES = {"bert": "BertForPreTraining", "albert": "AlbertForPreTraining", "nezha": "NezhaForPreTraining",
                 "electra": "ElectraForPreTraining", "roformer": "RoFormerForMaskedLM",
                 "t5": "T5ForConditionalGeneration", "mt5": "MT5ForConditionalGeneration", "gpt2": "GPT2LMHeadModel",
                 "deberta-v2": "DebertaV2ForMaskedLM",
                 "roberta": "RobertaForMaskedLM", "xlm-roberta": "XLMRobertaForMaskedLM",
                 "distilbert": "DistilBertForMaskedLM", "modernbert": "ModernBertForMaskedLM"}

_QKV = ("query", "key", "value")
_ALBERT_LAYER = "albert.encoder.albert_layer_groups.0.albert_layers.0"
_ALBERT_BLOCK = {  # the layer in ALBERT's block, weight -> its name after the layer group's prefix
    (ln.ATTENTION, "qkv_kernel"): tuple(f"attention.{p}.weight" for p in _QKV),
    (ln.ATTENTION, "qkv_bias"): tuple(f"attention.{p}.bias" for p in _QKV),
    (ln.ATTENTION, "output_kernel"): "attention.dense.weight",
    (ln.ATTENTION, "output_bias"): "attention.dense.bias",
    (ln.ATTENTION_NORM, "gamma"): "attention.LayerNorm.weight",
    (ln.ATTENTION_NORM, "beta"): "attention.LayerNorm.bias",
    (ln.FEED_FORWARD, "intermediate_kernel"): "ffn.weight",
    (ln.FEED_FORWARD, "intermediate_bias"): "ffn.bias",
    (ln.FEED_FORWARD, "output_kernel"): "ffn_output.weight",
    (ln.FEED_FORWARD, "output_bias"): "ffn_output.bias",
    (ln.FEED_FORWARD_NORM, "gamma"): "full_layer_layer_norm.weight",
    (ln.FEED_FORWARD_NORM, "beta"): "full_layer_layer_norm.bias",
}
_OWN = {  # model_type -> the rows where its names are not BERT's under its prefix
    "albert": {
        (ln.EMBEDDING_MAPPING, "kernel"): "albert.encoder.embedding_hidden_mapping_in.weight",
        (ln.EMBEDDING_MAPPING, "bias"): "albert.encoder.embedding_hidden_mapping_in.bias",
        (ln.POOLER_DENSE, "kernel"): "albert.pooler.weight",
        (ln.POOLER_DENSE, "bias"): "albert.pooler.bias",
        (ln.NSP_PROBA, "kernel"): "sop_classifier.classifier.weight",
        (ln.NSP_PROBA, "bias"): "sop_classifier.classifier.bias",
        (ln.MLM_DENSE, "kernel"): "predictions.dense.weight",
        (ln.MLM_DENSE, "bias"): "predictions.dense.bias",
        (ln.MLM_NORM, "gamma"): "predictions.LayerNorm.weight",
        (ln.MLM_NORM, "beta"): "predictions.LayerNorm.bias",
        (ln.MLM_BIAS, "bias"): "predictions.bias",
    },
    "electra": {
        (ln.EMBEDDING_MAPPING, "kernel"): "electra.embeddings_project.weight",
        (ln.EMBEDDING_MAPPING, "bias"): "electra.embeddings_project.bias",
        (ln.DISCRIMINATOR_DENSE, "kernel"): "discriminator_predictions.dense.weight",
        (ln.DISCRIMINATOR_DENSE, "bias"): "discriminator_predictions.dense.bias",
        (ln.DISCRIMINATOR_PREDICTION, "kernel"): "discriminator_predictions.dense_prediction.weight",
        (ln.DISCRIMINATOR_PREDICTION, "bias"): "discriminator_predictions.dense_prediction.bias",
    },
    "roformer": {
        (ln.EMBEDDING_MAPPING, "kernel"): "roformer.embeddings_project.weight",
        (ln.EMBEDDING_MAPPING, "bias"): "roformer.embeddings_project.bias",
    },
}
# model_type -> BERT's layers its transformers model has no weights for
_ABSENT = {"electra": {ln.POOLER_DENSE, ln.NSP_PROBA, ln.MLM_DENSE, ln.MLM_NORM, ln.MLM_BIAS},
           "roformer": {ln.POOLER_DENSE, ln.NSP_PROBA}}


def hf_names(family: Family) -> dict:
    """The Hugging Face table of a family: BERT's with the encoder under the family's ``model_type``, ALBERT's
    one layer group for every block (index-free names for the shared block), each family's own embedding mapping
    and heads, and without the biases and norm weights a family has none of (RoFormer-V2).

    Example:
    >>> from kerasbert.modeling.families import get
    >>> hf_names(get("electra"))[(ln.block(ln.BLOCK_KEY, ln.ATTENTION), "qkv_kernel")][0]
    'electra.encoder.layer.{i}.attention.self.query.weight'
    >>> (ln.POOLER_DENSE, "kernel") in hf_names(get("roformer"))
    False
    """
    kind = model_type(family)
    table = {key: each(names, lambda n: kind + n[len("bert"):] if n.startswith("bert.") else n)
             for key, names in HF_NAMES.items() if key[0] not in _ABSENT.get(kind, ())}
    table.update(_OWN.get(kind, {}))
    if kind == "albert":
        table = with_one_block(table, family, _ALBERT_BLOCK, f"{_ALBERT_LAYER}.{{}}")
    return table if family.bias else without_biases(table)


def family_shapes(family: Family, config) -> dict:
    """The shape of each (layer, weight) of a family's graph for ``config`` (a `kerasbert.BertConfig`), in
    kerasbert's layout: BERT's (`kerasbert.weights.names.variable_shapes`), with E-wide embeddings, the
    ``Embedding-Mapping`` E -> H and an MLM back to E where E ≠ H, ELECTRA's discriminator and ALBERT's shared block,
    and without a position table where the family computes its positions.

    Example:
    >>> from kerasbert import BertConfig
    >>> from kerasbert.modeling.families import get
    >>> cfg = BertConfig.from_preset("tiny").replace(embedding_size=16)
    >>> shapes = family_shapes(get("albert"), cfg)
    >>> shapes[(ln.EMBEDDING_TOKEN, "embeddings")], shapes[(ln.EMBEDDING_MAPPING, "kernel")]
    ((128, 16), (16, 32))
    >>> shapes[(ln.block(None, ln.ATTENTION), "qkv_kernel")]
    (32, 96)
    """
    h, e = config.hidden_size, config.embedding_width
    shapes = variable_shapes(config.vocab_size, h, config.intermediate_size, config.max_position_embeddings,
                             config.type_vocab_size)
    shapes.update({(ln.EMBEDDING_TOKEN, "embeddings"): (config.vocab_size, e),
                   (ln.EMBEDDING_SEGMENT, "embeddings"): (config.type_vocab_size, e),
                   (ln.EMBEDDING_POSITION, "embeddings"): (config.max_position_embeddings, e),
                   (ln.EMBEDDING_NORM, "gamma"): (e,), (ln.EMBEDDING_NORM, "beta"): (e,),
                   (ln.MLM_DENSE, "kernel"): (h, e), (ln.MLM_DENSE, "bias"): (e,),
                   (ln.MLM_NORM, "gamma"): (e,), (ln.MLM_NORM, "beta"): (e,),
                   (ln.DISCRIMINATOR_DENSE, "kernel"): (h, h), (ln.DISCRIMINATOR_DENSE, "bias"): (h,),
                   (ln.DISCRIMINATOR_PREDICTION, "kernel"): (h, 1), (ln.DISCRIMINATOR_PREDICTION, "bias"): (1,)})
    if family.positions != "absolute":  # NEZHA and RoFormer compute their positions
        del shapes[(ln.EMBEDDING_POSITION, "embeddings")]
    if e != h:
        shapes.update({(ln.EMBEDDING_MAPPING, "kernel"): (e, h), (ln.EMBEDDING_MAPPING, "bias"): (h,)})
    if family.shared_block:
        every = ln.block(ln.BLOCK_KEY, "")  # "Transformer-{i}-"
        shapes.update({(ln.block(None, layer[len(every):]), weight): shape
                       for (layer, weight), shape in list(shapes.items()) if layer.startswith(every)})
    return shapes
