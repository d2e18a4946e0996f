"""Where every weight of the bert4keras-named graph is stored: its Google name and its Hugging Face name.

One row per (layer, weight); ``Transformer-{i}-...`` rows stand for every encoder layer ``i``. A tuple of names
is concatenated on the last axis: kerasbert's attention keeps Q, K and V in one kernel, both formats store three.
Google stores kernels ``[in, out]`` (except ``cls/seq_relationship/output_weights``), Hugging Face stores every
linear weight ``[out, in]``: each format's `kerasbert.weights.table.Format` says which names it transposes.

Example:
>>> from kerasbert.layer_names import BLOCK_KEY, FEED_FORWARD_NORM, block
>>> GOOGLE_NAMES[(block(BLOCK_KEY, FEED_FORWARD_NORM), "gamma")].format(i=3)
'bert/encoder/layer_3/output/LayerNorm/gamma'
>>> HF_NAMES[(block(BLOCK_KEY, FEED_FORWARD_NORM), "gamma")].format(i=3)
'bert.encoder.layer.3.output.LayerNorm.weight'
"""

from __future__ import annotations

from kerasbert import layer_names as ln
from kerasbert.modeling.families import Family

_G, _H = "bert/encoder/layer_{i}", "bert.encoder.layer.{i}"
_QKV = ("query", "key", "value")
_ATTENTION, _FEED_FORWARD = ln.block(ln.BLOCK_KEY, ln.ATTENTION), ln.block(ln.BLOCK_KEY, ln.FEED_FORWARD)
_BLOCK = {  # the layer in block {i}, weight -> (Google path after layer_{i}/, HF path after layer.{i}.)
    (ln.ATTENTION, "output_kernel"): ("attention/output/dense/kernel", "attention.output.dense.weight"),
    (ln.ATTENTION, "output_bias"): ("attention/output/dense/bias", "attention.output.dense.bias"),
    (ln.ATTENTION_NORM, "gamma"): ("attention/output/LayerNorm/gamma", "attention.output.LayerNorm.weight"),
    (ln.ATTENTION_NORM, "beta"): ("attention/output/LayerNorm/beta", "attention.output.LayerNorm.bias"),
    (ln.FEED_FORWARD, "intermediate_kernel"): ("intermediate/dense/kernel", "intermediate.dense.weight"),
    (ln.FEED_FORWARD, "intermediate_bias"): ("intermediate/dense/bias", "intermediate.dense.bias"),
    (ln.FEED_FORWARD, "output_kernel"): ("output/dense/kernel", "output.dense.weight"),
    (ln.FEED_FORWARD, "output_bias"): ("output/dense/bias", "output.dense.bias"),
    (ln.FEED_FORWARD_NORM, "gamma"): ("output/LayerNorm/gamma", "output.LayerNorm.weight"),
    (ln.FEED_FORWARD_NORM, "beta"): ("output/LayerNorm/beta", "output.LayerNorm.bias"),
}
NAMES: dict[tuple[str, str], tuple] = {  # (layer, weight) -> (Google name(s) or None, HF name(s))
    (ln.EMBEDDING_TOKEN, "embeddings"): ("bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight"),
    (ln.EMBEDDING_SEGMENT, "embeddings"): ("bert/embeddings/token_type_embeddings",
                                           "bert.embeddings.token_type_embeddings.weight"),
    (ln.EMBEDDING_POSITION, "embeddings"): ("bert/embeddings/position_embeddings",
                                            "bert.embeddings.position_embeddings.weight"),
    (ln.EMBEDDING_NORM, "gamma"): ("bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight"),
    (ln.EMBEDDING_NORM, "beta"): ("bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias"),
    (ln.EMBEDDING_MAPPING, "kernel"): ("bert/encoder/embedding_hidden_mapping_in/kernel",
                                       "bert.encoder.embedding_hidden_mapping_in.weight"),
    (ln.EMBEDDING_MAPPING, "bias"): ("bert/encoder/embedding_hidden_mapping_in/bias",
                                     "bert.encoder.embedding_hidden_mapping_in.bias"),
    (_ATTENTION, "qkv_kernel"): (
        tuple(f"{_G}/attention/self/{p}/kernel" for p in _QKV), tuple(f"{_H}.attention.self.{p}.weight" for p in _QKV)),
    (_ATTENTION, "qkv_bias"): (
        tuple(f"{_G}/attention/self/{p}/bias" for p in _QKV), tuple(f"{_H}.attention.self.{p}.bias" for p in _QKV)),
    **{(ln.block(ln.BLOCK_KEY, layer), weight): (f"{_G}/{google}", f"{_H}.{hf}")
       for (layer, weight), (google, hf) in _BLOCK.items()},
    (ln.POOLER_DENSE, "kernel"): ("bert/pooler/dense/kernel", "bert.pooler.dense.weight"),
    (ln.POOLER_DENSE, "bias"): ("bert/pooler/dense/bias", "bert.pooler.dense.bias"),
    (ln.NSP_PROBA, "kernel"): ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight"),
    (ln.NSP_PROBA, "bias"): ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias"),
    (ln.MLM_DENSE, "kernel"): ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight"),
    (ln.MLM_DENSE, "bias"): ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias"),
    (ln.MLM_NORM, "gamma"): ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight"),
    (ln.MLM_NORM, "beta"): ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias"),
    (ln.MLM_BIAS, "bias"): ("cls/predictions/output_bias", "cls.predictions.bias"),
    # a fine-tuned BertForSequenceClassification / BertForTokenClassification head; Google's release has none
    (ln.CLS_DENSE, "kernel"): (None, "classifier.weight"),
    (ln.CLS_DENSE, "bias"): (None, "classifier.bias"),
    (ln.TAGGING_DENSE, "kernel"): (None, "classifier.weight"),
    (ln.TAGGING_DENSE, "bias"): (None, "classifier.bias"),
}
GOOGLE_NAMES = {key: google for key, (google, _) in NAMES.items() if google is not None}
HF_NAMES = {key: hf for key, (_, hf) in NAMES.items()}

# Layers a converted checkpoint may lack: the pre-training heads and a fine-tuned classifier. The embeddings and
# every encoder block are required.
CLASSIFIERS = frozenset({ln.CLS_DENSE, ln.TAGGING_DENSE})  # a fine-tuned head, sized by its labels, not the config
OPTIONAL_LAYERS = frozenset({ln.POOLER_DENSE, ln.NSP_PROBA, ln.MLM_DENSE, ln.MLM_NORM, ln.MLM_BIAS, *CLASSIFIERS,
                             ln.DISCRIMINATOR_DENSE, ln.DISCRIMINATOR_PREDICTION})

# ALBERT's one block: the layer in the block, weight -> its Google path after the group's prefix
_ALBERT_GROUP = "bert/encoder/transformer/group_0/inner_group_0"
_ALBERT_BLOCK = {
    (ln.ATTENTION, "qkv_kernel"): tuple(f"attention_1/self/{p}/kernel" for p in _QKV),
    (ln.ATTENTION, "qkv_bias"): tuple(f"attention_1/self/{p}/bias" for p in _QKV),
    (ln.ATTENTION, "output_kernel"): "attention_1/output/dense/kernel",
    (ln.ATTENTION, "output_bias"): "attention_1/output/dense/bias",
    (ln.ATTENTION_NORM, "gamma"): "LayerNorm/gamma",
    (ln.ATTENTION_NORM, "beta"): "LayerNorm/beta",
    (ln.FEED_FORWARD, "intermediate_kernel"): "ffn_1/intermediate/dense/kernel",
    (ln.FEED_FORWARD, "intermediate_bias"): "ffn_1/intermediate/dense/bias",
    (ln.FEED_FORWARD, "output_kernel"): "ffn_1/intermediate/output/dense/kernel",
    (ln.FEED_FORWARD, "output_bias"): "ffn_1/intermediate/output/dense/bias",
    (ln.FEED_FORWARD_NORM, "gamma"): "LayerNorm_1/gamma",
    (ln.FEED_FORWARD_NORM, "beta"): "LayerNorm_1/beta",
}
_ELECTRA = {  # ELECTRA's own names; the rest is BERT's with electra/ for bert/
    (ln.EMBEDDING_MAPPING, "kernel"): "electra/embeddings_project/kernel",
    (ln.EMBEDDING_MAPPING, "bias"): "electra/embeddings_project/bias",
    (ln.DISCRIMINATOR_DENSE, "kernel"): "discriminator_predictions/dense/kernel",
    (ln.DISCRIMINATOR_DENSE, "bias"): "discriminator_predictions/dense/bias",
    (ln.DISCRIMINATOR_PREDICTION, "kernel"): "discriminator_predictions/dense_1/kernel",
    (ln.DISCRIMINATOR_PREDICTION, "bias"): "discriminator_predictions/dense_1/bias",
}


_BIAS_WEIGHTS = ("bias", "qkv_bias", "output_bias", "intermediate_bias", "gamma", "beta")


def each(names, change):
    """``change`` applied to a name or to each of a tuple of names."""
    return tuple(map(change, names)) if isinstance(names, tuple) else change(names)


def google_names(family: Family) -> dict:
    """The Google table of a family: BERT's, with ALBERT's shared-group block (every block reads the one group;
    ALBERT's own block has index-free layer names), ELECTRA's ``electra/`` names and discriminator, and without
    the biases and norm weights a family has none of (RoFormer-V2).

    Example:
    >>> from kerasbert.modeling.families import get
    >>> google_names(get("albert"))[(ln.block(None, ln.FEED_FORWARD_NORM), "gamma")]
    'bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/gamma'
    >>> google_names(get("electra"))[(ln.EMBEDDING_TOKEN, "embeddings")]
    'electra/embeddings/word_embeddings'
    """
    table = dict(GOOGLE_NAMES)
    if family.checkpoint == "albert":
        table = with_one_block(table, family, _ALBERT_BLOCK, f"{_ALBERT_GROUP}/{{}}")
    if family.checkpoint == "electra":
        table = {key: each(names, lambda n: n.replace("bert/", "electra/", 1)) for key, names in table.items()}
        table.update(_ELECTRA)
    return table if family.bias else without_biases(table)


def with_one_block(table: dict, family: Family, block: dict, name: str) -> dict:
    """``table`` with its per-layer block rows replaced by one block's, whose file names are ``name`` formatted
    with ``block``'s paths: ALBERT's group, read by every layer (``Transformer-{i}-...``), or by its shared block's
    index-free layers where the family shares it.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> one = with_one_block(GOOGLE_NAMES, get("albert_unshared"), {(ln.ATTENTION_NORM, "gamma"): "g"}, "group/{}")
    >>> one[(ln.block(ln.BLOCK_KEY, ln.ATTENTION_NORM), "gamma")], (_ATTENTION, "qkv_kernel") in one
    ('group/g', False)
    """
    index = None if family.shared_block else ln.BLOCK_KEY
    table = {key: names for key, names in table.items() if ln.BLOCK_KEY not in key[0]}
    table.update({(ln.block(index, part), weight): each(path, name.format) for (part, weight), path in block.items()})
    return table


def without_biases(table: dict) -> dict:
    """The rows of ``table`` left for a family without biases, which then has no norm weights either
    (RoFormer-V2).

    Example:
    >>> sorted(without_biases({("Pooler-Dense", "kernel"): "k", ("Pooler-Dense", "bias"): "b"}).values())
    ['k']
    """
    return {key: names for key, names in table.items() if key[1] not in _BIAS_WEIGHTS}


def variable_shapes(vocab: int, hidden: int, intermediate: int, positions: int, segments: int) -> dict:
    """The shape of each (layer, weight) of the bert4keras-named graph, in kerasbert's layout (kernels
    ``[in, out]``, Q/K/V fused), from the config's sizes; the classifier heads, whose size no config gives, and
    the embedding mapping of embeddings as wide as H, are left out.

    Example:
    >>> variable_shapes(128, 32, 64, 512, 2)[(ln.block(ln.BLOCK_KEY, ln.ATTENTION), "qkv_kernel")]
    (32, 96)
    """
    h = hidden
    shapes = {(ln.EMBEDDING_TOKEN, "embeddings"): (vocab, h), (ln.EMBEDDING_SEGMENT, "embeddings"): (segments, h),
              (ln.EMBEDDING_POSITION, "embeddings"): (positions, h),
              (_ATTENTION, "qkv_kernel"): (h, 3 * h), (_ATTENTION, "qkv_bias"): (3 * h,),
              (_ATTENTION, "output_kernel"): (h, h),
              (_FEED_FORWARD, "intermediate_kernel"): (h, intermediate),
              (_FEED_FORWARD, "intermediate_bias"): (intermediate,),
              (_FEED_FORWARD, "output_kernel"): (intermediate, h),
              (ln.POOLER_DENSE, "kernel"): (h, h), (ln.NSP_PROBA, "kernel"): (h, 2), (ln.NSP_PROBA, "bias"): (2,),
              (ln.MLM_DENSE, "kernel"): (h, h), (ln.MLM_BIAS, "bias"): (vocab,)}
    return {key: shapes.get(key, (h,)) for key in NAMES if key[0] not in (*CLASSIFIERS, ln.EMBEDDING_MAPPING)}


def looks_like(names) -> str:
    """The family whose Google or Hugging Face checkpoint ``names`` look like: ``"gpt"``, ``"gpt2"`` or
    ``"gpt2_ml"`` (bert4keras's GPT names; ``"gpt2"`` for transformers' too), ``"t5"``, ``"t5.1.1"`` or ``"mt5.1.1"``
    (``"t5.1.1 or mt5.1.1"`` for transformers' gated T5, whose names are mT5's), ``"albert"`` (a shared group),
    ``"electra"``, ``"roformer_v2"`` (blocks without norm weights), ``"roformer"`` or ``"nezha"`` (Hugging Face
    names say which), ``"nezha or roformer"`` (blocks, no position table), ``"distilbert"``, ``"roberta_en or
    xlm_roberta"`` (transformers' ``roberta.`` names, both families'), ``"modernbert"`` (its fused ``Wqkv``), else
    ``"bert"``.

    Example:
    >>> looks_like(["bert/encoder/transformer/group_0/inner_group_0/LayerNorm/gamma"])
    'albert'
    >>> looks_like(["bert/embeddings/word_embeddings", "bert/encoder/layer_0/output/LayerNorm/gamma"])
    'nezha or roformer'
    >>> looks_like(["roformer.embeddings.word_embeddings.weight", "roformer.encoder.layer.0.output.LayerNorm.weight"])
    'roformer'
    """
    names = list(names)
    if any(n.startswith("newslm/") for n in names):
        return "gpt2_ml"
    if any(".c_attn." in n or n.endswith("wte.weight") for n in names):
        return "gpt2"
    if any("SelfAttention" in n for n in names):  # T5's blocks: google's block_000/..., transformers' block.0....
        if not any("wi_0" in n for n in names):
            return "t5"
        return "mt5.1.1" if any("rms_norm" in n for n in names) else "t5.1.1" if any("/" in n for n in names) \
            else "t5.1.1 or mt5.1.1"
    if any(n.startswith("gpt/") for n in names):  # GPT-2's norms come before their sublayers: input/LayerNorm
        return "gpt2" if any("/input/LayerNorm/" in n for n in names) else "gpt"
    if any("/transformer/group_0/" in n or ".albert_layer_groups." in n for n in names):
        return "albert"
    if any(n.startswith(("electra/", "electra.")) for n in names):
        return "electra"
    if any(n.startswith("distilbert.") or ".attention.q_lin." in n for n in names):
        return "distilbert"
    if any(".rel_embeddings." in n or ".attention.self.query_proj." in n for n in names):
        return "deberta_v3"
    if any(".attn.Wqkv." in n or n.endswith("tok_embeddings.weight") for n in names):
        return "modernbert"
    if any(n.startswith(("roberta.", "lm_head.")) for n in names):
        return "roberta_en or xlm_roberta"
    blocks = [n for n in names if "layer_0/" in n or "layer.0." in n]
    if blocks and not any("LayerNorm" in n for n in blocks):
        return "roformer_v2"
    if any(n.startswith("roformer.") or ".embed_positions." in n for n in names):
        return "roformer"
    if any(n.startswith("nezha.") or ".relative_positions_encoding." in n for n in names):
        return "nezha"
    if blocks and not any("position_embeddings" in n for n in names):
        return "nezha or roformer"
    return "bert"
