"""The Google TF checkpoint names of bert4keras's GPT families, as its ``variable_mapping`` gives them.

    gpt       BERT's names with ``gpt/`` for ``bert/`` and ``transformer`` for ``encoder``
    gpt2      GPT's, each block's norms read from ``.../input/LayerNorm`` (they come before their sublayer), and
              ``gpt/output/LayerNorm`` for ``Output-Norm``
    gpt2_ml   GPT2-ML's own ``newslm/`` names (imcaspar/gpt2-ml), ``layer{i:02d}``: ``newslm/layer03/query_layer``

GPT-2's Hugging Face names (`GPT2_HF_NAMES`) are transformers' ``GPT2LMHeadModel``'s: ``transformer.wte``,
``transformer.h.{i}.attn.c_attn`` (Q, K and V side by side, as kerasbert's fused projection), ``ln_1`` before the
attention, ``ln_2`` before the MLP, ``transformer.ln_f``; its ``Conv1D`` weights are stored ``[in, out]``, so no
name is transposed. A bare ``GPT2Model`` file has the same names without ``transformer.``.

Each is a `kerasbert.weights.table.Format`: the loader checks every name and shape and logs each variable as for
the encoder families, ``keep_tokens`` slices the word embeddings' rows, and `save_google_checkpoint` writes these
names, which bert4keras's ``load_weights_from_checkpoint`` reads back. No variable is stored transposed.

Example:
>>> from kerasbert.modeling.families import get
>>> gpt_names(get("gpt2_ml"))[(ln.block(ln.BLOCK_KEY, ln.FEED_FORWARD + "-Norm-1"), "gamma")].format(i=3)
'newslm/layer03/LayerNorm_mlp_ln1/gamma'
>>> gpt_names(get("gpt2"))[(ln.block(ln.BLOCK_KEY, ln.ATTENTION_NORM), "beta")].format(i=0)
'gpt/transformer/layer_0/attention/input/LayerNorm/beta'
"""

from __future__ import annotations

import dataclasses

from kerasbert import layer_names as ln
from kerasbert.modeling.families import Family
from kerasbert.weights.names import GOOGLE_NAMES, each
from kerasbert.weights.table import Format

_GPT_LAYERS = (ln.EMBEDDING_TOKEN, ln.EMBEDDING_SEGMENT, ln.EMBEDDING_POSITION)  # besides the blocks
_QKV = ("query", "key", "value")
_ML = "newslm/layer{i:02d}"
_ML_FEED_FORWARD_NORMS = tuple(ln.block(ln.BLOCK_KEY, f"{ln.FEED_FORWARD}-Norm-{n}") for n in (0, 1))
_WEIGHTS = {ln.ATTENTION: ("qkv_kernel", "qkv_bias", "output_kernel", "output_bias"),
            ln.FEED_FORWARD: ("intermediate_kernel", "intermediate_bias", "output_kernel", "output_bias")}


def _projections(attention: tuple, feed_forward: tuple) -> dict:
    """A block's projection rows: the names of the attention's and the feed-forward's weights, in `_WEIGHTS`'s
    order."""
    return {(ln.block(ln.BLOCK_KEY, part), weight): name for part, names in ((ln.ATTENTION, attention),
                                                                            (ln.FEED_FORWARD, feed_forward))
            for weight, name in zip(_WEIGHTS[part], names, strict=True)}


GPT2_ML_NAMES = {
    (ln.EMBEDDING_TOKEN, "embeddings"): "newslm/embeddings/word_embed",
    (ln.EMBEDDING_POSITION, "embeddings"): "newslm/embeddings/pos_embed",
    (ln.EMBEDDING_NORM, "gamma"): "newslm/embeddings/LayerNorm_embed_norm/gamma",
    (ln.EMBEDDING_NORM, "beta"): "newslm/embeddings/LayerNorm_embed_norm/beta",
    **_projections((tuple(f"{_ML}/{p}_layer/kernel" for p in _QKV), tuple(f"{_ML}/{p}_layer/bias" for p in _QKV),
                    f"{_ML}/context_projection_layer/kernel", f"{_ML}/context_projection_layer/bias"),
                   tuple(f"{_ML}/{p}" for p in ("intermediate/kernel", "intermediate/bias", "output/kernel",
                                                "output/bias"))),
    **{(norm, weight): f"{_ML}/LayerNorm_mlp_ln{n}/{weight}" for n, norm in enumerate(_ML_FEED_FORWARD_NORMS)
       for weight in ("gamma", "beta")},
}


_H = "transformer.h.{i}"
GPT2_HF_NAMES = {
    (ln.EMBEDDING_TOKEN, "embeddings"): "transformer.wte.weight",
    (ln.EMBEDDING_POSITION, "embeddings"): "transformer.wpe.weight",
    **_projections(tuple(f"{_H}.attn.{p}" for p in ("c_attn.weight", "c_attn.bias", "c_proj.weight", "c_proj.bias")),
                   tuple(f"{_H}.mlp.{p}" for p in ("c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias"))),
    **{(ln.block(ln.BLOCK_KEY, norm), weight): f"{_H}.{hf}.{hf_weight}"
       for norm, hf in ((ln.ATTENTION_NORM, "ln_1"), (ln.FEED_FORWARD_NORM, "ln_2"))
       for weight, hf_weight in (("gamma", "weight"), ("beta", "bias"))},
    (ln.OUTPUT_NORM, "gamma"): "transformer.ln_f.weight",
    (ln.OUTPUT_NORM, "beta"): "transformer.ln_f.bias",
}


def gpt_names(family: Family) -> dict:
    """The (layer, weight) -> checkpoint name table of a GPT family, as bert4keras's ``variable_mapping``.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> gpt_names(get("gpt"))[(ln.EMBEDDING_TOKEN, "embeddings")]
    'gpt/embeddings/word_embeddings'
    """
    if family.checkpoint == "gpt2_ml":
        return dict(GPT2_ML_NAMES)
    table = {key: each(names, lambda n: n.replace("bert/", "gpt/").replace("encoder", "transformer"))
             for key, names in GOOGLE_NAMES.items() if key[0] in _GPT_LAYERS or ln.BLOCK_KEY in key[0]}
    if family.checkpoint == "gpt2":  # the norms before each sublayer, and the one after the last block
        table = {key: each(names, lambda n: n.replace("output/LayerNorm", "input/LayerNorm"))
                 for key, names in table.items()}
        table.update({(ln.OUTPUT_NORM, weight): f"gpt/output/LayerNorm/{weight}" for weight in ("gamma", "beta")})
    return table


def gpt_format(family: Family, google: Format) -> Format:
    """The format of a GPT family's checkpoints (`gpt_names`): ``google``'s (`kerasbert.weights.google.GOOGLE`) with
    the family's names, its word embeddings the vocabulary rows.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> from kerasbert.weights.google import GOOGLE
    >>> sorted(gpt_format(get("gpt2_ml"), GOOGLE).vocab_rows)
    ['newslm/embeddings/word_embed']
    """
    names = gpt_names(family)
    word_embeddings = names[(ln.EMBEDDING_TOKEN, "embeddings")]
    hints = {word_embeddings: "vocab_size", names[(ln.EMBEDDING_POSITION, "embeddings")]: "max_position_embeddings",
             "token_type_embeddings": "type_vocab_size", "intermediate/": "intermediate_size",
             "/output/dense/kernel": "intermediate_size", "/output/kernel": "intermediate_size"}
    return dataclasses.replace(google, names=names, family=family.name, vocab_rows=frozenset({word_embeddings}),
                               hints=hints)
