"""The mesh-TensorFlow checkpoint names of bert4keras's T5 families, as its ``T5_Base.variable_mapping`` gives them.

    t5 (t5.1.0)   ``shared/embedding``, ``encoder/block_{i:03d}/layer_000/SelfAttention/q`` ..., the feed-forward's
                  ``DenseReluDense/wi``, ``wo``; the output tied to ``shared/embedding``
    t5.1.1        the gated feed-forward's ``wi_0`` (activated) and ``wi_1`` (linear), and ``decoder/logits/kernel``
    mt5.1.1       T5.1.1's, each ``layer_norm`` named ``rms_norm`` (``encoder/rms_norm/scale`` the final one)

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

_BLOCK = "{stack}/block_{{i:03d}}/layer_{layer:03d}"
_ATTENTIONS = {ln.ATTENTION: "SelfAttention", ln.CROSS_ATTENTION: "EncDecAttention"}


def _block_names(stack: str, gated: bool) -> dict:
    """One stack's block rows: (layer with ``{i}``, weight) -> name(s) with ``{i:03d}``."""
    lower = stack.lower()
    parts = (ln.ATTENTION, ln.CROSS_ATTENTION, ln.FEED_FORWARD) if stack == ln.DECODER else (ln.ATTENTION,
                                                                                               ln.FEED_FORWARD)
    table = {}
    for layer, part in enumerate(parts):
        where, name = _BLOCK.format(stack=lower, layer=layer), ln.stacked(stack, ln.block(ln.BLOCK_KEY, part))
        table[(ln.stacked(stack, ln.block(ln.BLOCK_KEY, f"{part}-Norm")), "gamma")] = f"{where}/layer_norm/scale"
        if part == ln.FEED_FORWARD:
            dense = f"{where}/DenseReluDense"
            table[(name, "intermediate_kernel")] = f"{dense}/wi_0/kernel" if gated else f"{dense}/wi/kernel"
            table[(name, "output_kernel")] = f"{dense}/wo/kernel"
            if gated:
                table[(name, "gate_kernel")] = f"{dense}/wi_1/kernel"
            continue
        attention = f"{where}/{_ATTENTIONS[part]}"
        if part == ln.ATTENTION:
            table[(name, "qkv_kernel")] = tuple(f"{attention}/{p}" for p in "qkv")
        else:
            table[(name, "q_kernel")], table[(name, "kv_kernel")] = f"{attention}/q", (f"{attention}/k",
                                                                                       f"{attention}/v")
        table[(name, "output_kernel")] = f"{attention}/o"
    return table


def t5_names(family: Family) -> dict:
    """The (layer, weight) -> checkpoint name table of a T5 family, as bert4keras's ``variable_mapping``; the
    rows of both stacks, whatever part the model is (`kerasbert.weights.table.name_table` takes those it has)."""
    gated = family.checkpoint != "t5"
    table = {(ln.EMBEDDING_TOKEN, "embeddings"): "shared/embedding"}
    for stack in (ln.ENCODER, ln.DECODER):
        lower = stack.lower()
        table[(ln.stacked(stack, ln.STACK_RELATIVE_POSITION), "embeddings")] = \
            f"{lower}/block_000/layer_000/SelfAttention/relative_attention_bias"
        table[(ln.stacked(stack, ln.STACK_OUTPUT_NORM), "gamma")] = f"{lower}/final_layer_norm/scale"
        table.update(_block_names(stack, gated))
    if gated:
        table[(ln.DECODER_OUTPUT_LM, "kernel")] = "decoder/logits/kernel"
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
