"""The mesh-TensorFlow checkpoint names of bert4keras's T5 families, as its ``T5_Base.variable_mapping`` gives them.

    t5 (t5.1.0)   ``shared/embedding``, ``encoder/block_{i:03d}/layer_000/SelfAttention/q`` ..., the feed-forward's
                  ``DenseReluDense/wi``, ``wo``; the output tied to ``shared/embedding``
    t5.1.1        the gated feed-forward's ``wi_0`` (activated) and ``wi_1`` (linear), and ``decoder/logits/kernel``
    mt5.1.1       T5.1.1's, each ``layer_norm`` named ``rms_norm`` (``encoder/rms_norm/scale`` the final one)

Hugging Face's names (`t5_hf_names`, transformers' ``T5ForConditionalGeneration``, T5's and mT5's alike) are the
same with dots: ``shared.weight``, ``encoder.block.{i}.layer.0.SelfAttention.q.weight``, ``layer_norm.weight``,
``lm_head.weight`` the untied output; each projection stored ``[out, in]``, the relative position tables ``[N, A]``
as the model has them.

In the decoder, ``layer_000`` is self-attention, ``layer_001`` cross-attention (``EncDecAttention``) and
``layer_002`` the feed-forward. Each stack's relative position table is stored ``[A, N]`` under its first block's
self-attention (``relative_attention_bias``), transposed from the model's ``[N, A]``. ``keep_tokens`` slices the
rows of ``shared/embedding`` and the columns of ``decoder/logits/kernel``. A model of one part (``t5.1.1_encoder``)
reads and writes that part's names alone.

Example:
>>> from kerasbert.modeling.families import get
>>> names = t5_names(get("mt5.1.1"))
>>> names[("Decoder-Transformer-{i}-FeedForward", "gate_kernel")].format(i=3)
'decoder/block_003/layer_002/DenseReluDense/wi_1/kernel'
>>> names[("Encoder-Transformer-{i}-MultiHeadSelfAttention-Norm", "gamma")].format(i=0)
'encoder/block_000/layer_000/rms_norm/scale'
"""

from __future__ import annotations

import dataclasses
import re

from kerasbert import layer_names as ln
from kerasbert.modeling.families import Family
from kerasbert.weights.table import Format

_ATTENTIONS = {ln.ATTENTION: "SelfAttention", ln.CROSS_ATTENTION: "EncDecAttention"}


@dataclasses.dataclass(frozen=True)
class _Style:
    """How one format spells T5's names: a block's sublayer (``{stack}``, ``{layer}``, ``{i}`` left for the table),
    the separator, and the suffixes of a norm, an attention projection and a feed-forward kernel."""

    block: str
    sep: str
    norm: str
    projection: str
    dense: str
    embedding: str
    relative: str  # the relative position table of a stack, after its first block's self-attention
    final_norm: str
    output: str


_GOOGLE = _Style("{stack}/block_{{i:03d}}/layer_{layer:03d}", "/", "layer_norm/scale", "", "/kernel",
                 "shared/embedding", "relative_attention_bias", "final_layer_norm/scale", "decoder/logits/kernel")
_HF = _Style("{stack}.block.{{i}}.layer.{layer}", ".", "layer_norm.weight", ".weight", ".weight", "shared.weight",
             "relative_attention_bias.weight", "final_layer_norm.weight", "lm_head.weight")


def _block_names(stack: str, gated: bool, style: _Style) -> dict:
    """One stack's block rows: (layer with ``{i}``, weight) -> name(s) with ``{i}`` in the style's format."""
    lower, sep = stack.lower(), style.sep
    parts = (ln.ATTENTION, ln.CROSS_ATTENTION, ln.FEED_FORWARD) if stack == ln.DECODER else (ln.ATTENTION,
                                                                                               ln.FEED_FORWARD)
    table = {}
    for layer, part in enumerate(parts):
        where, name = style.block.format(stack=lower, layer=layer), ln.stacked(stack, ln.block(ln.BLOCK_KEY, part))
        table[(ln.stacked(stack, ln.block(ln.BLOCK_KEY, f"{part}-Norm")), "gamma")] = f"{where}{sep}{style.norm}"
        if part == ln.FEED_FORWARD:
            dense = f"{where}{sep}DenseReluDense{sep}"
            table[(name, "intermediate_kernel")] = f"{dense}{'wi_0' if gated else 'wi'}{style.dense}"
            table[(name, "output_kernel")] = f"{dense}wo{style.dense}"
            if gated:
                table[(name, "gate_kernel")] = f"{dense}wi_1{style.dense}"
            continue
        attention = f"{where}{sep}{_ATTENTIONS[part]}{sep}"
        if part == ln.ATTENTION:
            table[(name, "qkv_kernel")] = tuple(f"{attention}{p}{style.projection}" for p in "qkv")
        else:
            table[(name, "q_kernel")] = f"{attention}q{style.projection}"
            table[(name, "kv_kernel")] = (f"{attention}k{style.projection}", f"{attention}v{style.projection}")
        table[(name, "output_kernel")] = f"{attention}o{style.projection}"
    return table


def _names(family: Family, style: _Style) -> dict:
    """The table of both stacks in ``style``, with the untied output of a gated family."""
    gated = family.checkpoint != "t5"
    table = {(ln.EMBEDDING_TOKEN, "embeddings"): style.embedding}
    for stack in (ln.ENCODER, ln.DECODER):
        first = style.block.format(stack=stack.lower(), layer=0).replace("{i:03d}", "000").replace("{i}", "0")
        table[(ln.stacked(stack, ln.STACK_RELATIVE_POSITION), "embeddings")] = \
            f"{first}{style.sep}SelfAttention{style.sep}{style.relative}"
        table[(ln.stacked(stack, ln.STACK_OUTPUT_NORM), "gamma")] = f"{stack.lower()}{style.sep}{style.final_norm}"
        table.update(_block_names(stack, gated, style))
    if gated:
        table[(ln.DECODER_OUTPUT_LM, "kernel")] = style.output
    return table


def t5_hf_names(family: Family) -> dict:
    """The (layer, weight) -> Hugging Face name table of a T5 family (transformers' ``T5ForConditionalGeneration``;
    mT5's names are T5's).

    Example:
    >>> from kerasbert.modeling.families import get
    >>> t5_hf_names(get("mt5.1.1"))[("Decoder-Transformer-{i}-MultiHeadCrossAttention", "kv_kernel")][1]
    'decoder.block.{i}.layer.1.EncDecAttention.v.weight'
    """
    return _names(family, _HF)


def t5_names(family: Family) -> dict:
    """The (layer, weight) -> checkpoint name table of a T5 family, as bert4keras's ``variable_mapping``; the
    rows of both stacks, whatever part the model is (`kerasbert.weights.table.name_table` takes those it has)."""
    table = _names(family, _GOOGLE)
    if family.checkpoint == "mt5.1.1":
        table = {key: name.replace("final_layer_norm", "rms_norm").replace("layer_norm", "rms_norm")
                 if isinstance(name, str) else name for key, name in table.items()}
    return table


def t5_format(family: Family, google: Format) -> Format:
    """The format of a T5 family's checkpoints (`t5_names`): ``google``'s (`kerasbert.weights.google.GOOGLE`) with
    T5's names, transposes, vocabulary axes and Adafactor's slots skipped.

    Example:
    >>> from kerasbert.modeling.families import get
    >>> from kerasbert.weights.google import GOOGLE
    >>> fmt = t5_format(get("t5.1.1_decoder"), GOOGLE)
    >>> sorted(fmt.vocab_rows), sorted(fmt.vocab_columns), fmt.transposed("decoder/logits/kernel")
    (['shared/embedding'], ['decoder/logits/kernel'], False)
    """
    return dataclasses.replace(
        google, names=t5_names(family), family=family.name, transposed=lambda name: "relative_attention_bias" in name,
        vocab_rows=frozenset({"shared/embedding"}), vocab_columns=frozenset({"decoder/logits/kernel"}),
        # Adafactor's slots in mesh-TensorFlow checkpoints, besides Google's training state
        skip=re.compile(f"{google.skip.pattern}|_slot_v[cr]?$"),
        hints={"shared/embedding": "vocab_size", "logits": "vocab_size", "DenseReluDense/w": "intermediate_size",
               "relative_attention_bias": "relative_attention_num_buckets"})
