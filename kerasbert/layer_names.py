"""bert4keras's layer names, spelled once: every module that builds or reads a layer by name imports them here.

The names document the graph and are the keys users, checkpoint tables and ``.keras`` files rely on:

    Input-Token, Input-Segment, Attention-Mask          the inputs and the padding mask
    Attention-LM-Mask, Attention-UniLM-Mask             the masks of application="lm" and "unilm"
    Embedding-Token, -Segment, -Position, -Norm, ...    the embeddings
    Embedding-Mapping, Embedding-Relative-Position, Embedding-Rotary-Position
    Embedding-Relative-Buckets[-Norm]                  DeBERTa's relative table and its norm
    Transformer-{i}-MultiHeadSelfAttention[-Dropout|-Add|-Norm]
    Transformer-{i}-FeedForward[-Dropout|-Add|-Norm]    block i, 0 <= i < L
    Transformer-MultiHeadSelfAttention, ...              ALBERT's one shared block, no index
    Pooler, Pooler-Dense, NSP-Proba, MLM-*               the pre-training layers
    CLS-*, Tagging-*, Span-GlobalPointer                 the task heads of `kerasbert.modeling.heads`

Example:
>>> block(3, FEED_FORWARD_NORM)
'Transformer-3-FeedForward-Norm'
>>> parse_block("Transformer-3-FeedForward-Norm"), parse_block(EMBEDDING_NORM)
((3, 'FeedForward-Norm'), None)
>>> part_of(block(3, ATTENTION)), part_of(block(None, ATTENTION)), part_of(MLM_BIAS), part_of(CLS_DENSE)
(('encoder', 3), ('encoder', None), ('mlm', None), ('head', None))
"""

from __future__ import annotations

import re

# ------------------------------------------------------------------------------ inputs
INPUT_PREFIX = "Input-"
TOKEN_INPUT = INPUT_PREFIX + "Token"
SEGMENT_INPUT = INPUT_PREFIX + "Segment"
MLM_POSITIONS_INPUT = INPUT_PREFIX + "MLM-Positions"  # pretraining: where each row's masked LM predicts
ATTENTION_MASK = "Attention-Mask"  # Input-Token != 0 (the first position kept), shared by every attention layer
LM_MASK = "Attention-LM-Mask"  # application="lm": causal, and Input-Token != 0
UNILM_MASK = "Attention-UniLM-Mask"  # application="unilm": by segment, and Input-Token != 0

# ------------------------------------------------------------------------------ embeddings
EMBEDDING_PREFIX = "Embedding-"
EMBEDDING_TOKEN = EMBEDDING_PREFIX + "Token"
EMBEDDING_SEGMENT = EMBEDDING_PREFIX + "Segment"
EMBEDDING_TOKEN_SEGMENT = EMBEDDING_PREFIX + "Token-Segment"
EMBEDDING_POSITION = EMBEDDING_PREFIX + "Position"
EMBEDDING_NORM = EMBEDDING_PREFIX + "Norm"
EMBEDDING_DROPOUT = EMBEDDING_PREFIX + "Dropout"
EMBEDDING_MAPPING = EMBEDDING_PREFIX + "Mapping"  # E -> H where the embedding size E differs from H
RELATIVE_POSITION = EMBEDDING_PREFIX + "Relative-Position"  # NEZHA's clipped sinusoidal distances
ROTARY_POSITION = EMBEDDING_PREFIX + "Rotary-Position"  # RoFormer's sinusoids that rotate q and k
RELATIVE_BUCKETS = EMBEDDING_PREFIX + "Relative-Buckets"  # DeBERTa's relative table [2N, H], log buckets
RELATIVE_BUCKETS_NORM = RELATIVE_BUCKETS + "-Norm"

# ------------------------------------------------------------------------------ transformer blocks
BLOCK_PREFIX = "Transformer-"
ATTENTION = "MultiHeadSelfAttention"
FEED_FORWARD = "FeedForward"
# each sublayer is followed by its residual: <part>-Dropout, <part>-Add, <part>-Norm
ATTENTION_NORM = ATTENTION + "-Norm"
FEED_FORWARD_NORM = FEED_FORWARD + "-Norm"  # the block's output
BLOCK_PATTERN = re.compile(re.escape(BLOCK_PREFIX) + r"(\d+)-(.+)")  # block index, part
BLOCK_KEY = "{i}"  # the index in a name that stands for every block: block(BLOCK_KEY, part)


def block(index: int | str | None, part: str) -> str:
    """The name of ``part`` in block ``index``: ``Transformer-{index}-{part}``; ``Transformer-{part}`` for the
    block ALBERT shares between all its layers (``index`` None).

    Example:
    >>> block(0, ATTENTION), block(BLOCK_KEY, FEED_FORWARD), block(None, ATTENTION_NORM)
    ('Transformer-0-MultiHeadSelfAttention', 'Transformer-{i}-FeedForward', 'Transformer-MultiHeadSelfAttention-Norm')
    """
    return f"{BLOCK_PREFIX}{part}" if index is None else f"{BLOCK_PREFIX}{index}-{part}"


def residual(name: str, step: str) -> str:
    """A residual layer after the sublayer ``name``: ``step`` is ``Dropout``, ``Add`` or ``Norm``.

    Example:
    >>> residual(block(1, FEED_FORWARD), "Norm")
    'Transformer-1-FeedForward-Norm'
    """
    return f"{name}-{step}"


def parse_block(name: str) -> tuple[int, str] | None:
    """``(index, part)`` of a block layer's name (a variable path after it is allowed), None for any other name.

    Example:
    >>> parse_block("Transformer-11-FeedForward/kernel"), parse_block("Pooler-Dense")
    ((11, 'FeedForward/kernel'), None)
    """
    match = BLOCK_PATTERN.match(name)
    return (int(match.group(1)), match.group(2)) if match else None


# ------------------------------------------------------------------------------ T5's encoder-decoder
# T5's layers carry their stack's name first: Encoder-Transformer-{i}-..., Decoder-Embedding-Relative-Position
ENCODER, DECODER = "Encoder", "Decoder"
CROSS_ATTENTION = "MultiHeadCrossAttention"  # the decoder's attention over the encoder's output
ENCODER_INPUT = "Encoder-Input-Token"
DECODER_INPUT = "Decoder-Input-Token"
CONTEXT_INPUT = "Input-Context"  # the decoder alone: the encoder's output, given
ENCODER_MASK = "Encoder-Attention-Mask"  # the encoder's real tokens (the decoder's mask is LM_MASK)
# each stack's own layers, after its name: Encoder-Embedding-Dropout, Decoder-Output-Norm, ...
STACK_EMBEDDING_DROPOUT = EMBEDDING_PREFIX + "Dropout"
STACK_RELATIVE_POSITION = RELATIVE_POSITION  # a table of relative position buckets per stack
STACK_OUTPUT_NORM, STACK_OUTPUT_DROPOUT = "Output-Norm", "Output-Dropout"
DECODER_OUTPUT_SCALE = "Decoder-Output-Scale"  # x·H^-0.5 before the output layer
DECODER_OUTPUT_LM = "Decoder-Output-LM"  # T5.1.1's and mT5's own output layer
DECODER_OUTPUT_LM_ACTIVATION = "Decoder-Output-LM-Activation"  # T5.1.0's softmax, after the tied embedding
FINAL_NORM = f"{ENCODER}-{STACK_OUTPUT_NORM}"  # ModernBERT's norm after its last block, named as T5's encoder's
ROTARY_POSITION_LOCAL = ROTARY_POSITION + "-Local"  # ModernBERT's rotary positions of its local layers (their own θ)
STACK_PATTERN = re.compile(r"((?:Encoder-|Decoder-)?" + re.escape(BLOCK_PREFIX) + r")(\d+)-(.+)")


def stacked(stack: str, name: str) -> str:
    """A layer of T5's ``stack`` (`ENCODER` or `DECODER`): ``Encoder-Transformer-0-FeedForward``.

    Example:
    >>> stacked(DECODER, block(1, CROSS_ATTENTION)), stacked(ENCODER, "Output-Norm")
    ('Decoder-Transformer-1-MultiHeadCrossAttention', 'Encoder-Output-Norm')
    """
    return f"{stack}-{name}"


def block_key(name: str) -> tuple[str, int] | None:
    """The name of a block layer with its index as `BLOCK_KEY`, and the index; T5's stacked names too. None for
    any other name.

    Example:
    >>> block_key("Transformer-2-FeedForward"), block_key("Decoder-Transformer-11-FeedForward-Norm")
    (('Transformer-{i}-FeedForward', 2), ('Decoder-Transformer-{i}-FeedForward-Norm', 11))
    """
    match = STACK_PATTERN.fullmatch(name)
    return (f"{match.group(1)}{BLOCK_KEY}-{match.group(3)}", int(match.group(2))) if match else None


# ------------------------------------------------------------------------------ pre-training layers
POOLER = "Pooler"
POOLER_DENSE = "Pooler-Dense"
NSP_PREFIX = "NSP-"
NSP_PROBA = NSP_PREFIX + "Proba"
MLM_PREFIX = "MLM-"
MLM_DENSE = MLM_PREFIX + "Dense"
MLM_NORM = MLM_PREFIX + "Norm"
MLM_BIAS = MLM_PREFIX + "Bias"
MLM_ACTIVATION = MLM_PREFIX + "Activation"
MLM_GATHER = MLM_PREFIX + "Gather"  # pretraining: the sequence output at Input-MLM-Positions, before MLM-Dense
# RoFormer-V2's MLM: E-wide mapping, dropout, x·Eᵀ, activation (no dense, norm or bias)
OUTPUT_MAPPING = "Output-Mapping"
OUTPUT_MLM_DROPOUT = "Output-MLM-Dropout"
OUTPUT_MLM_ACTIVATION = "Output-MLM-Activation"
# GPT's language model: GPT-2's final norm and dropout, then x·Eᵀ (tied to Embedding-Token) and its softmax
OUTPUT_NORM = "Output-Norm"
OUTPUT_DROPOUT = "Output-Dropout"
LM_ACTIVATION = "LM-Activation"
# ELECTRA's replaced-token discriminator
DISCRIMINATOR_DENSE = "Discriminator-Dense"
DISCRIMINATOR_PREDICTION = "Discriminator-Prediction"

# ------------------------------------------------------------------------------ task heads
CLS_TOKEN = "CLS-token"
CLS_MEAN = "CLS-Mean"
CLS_DROPOUT = "CLS-Dropout"
CLS_DENSE = "CLS-Dense"
TAGGING_BILSTM = "Tagging-BiLSTM"
TAGGING_MASK = "Tagging-Mask"
TAGGING_DROPOUT = "Tagging-Dropout"
TAGGING_DENSE = "Tagging-Dense"
TAGGING_CRF = "Tagging-CRF"
SPAN_POINTER = "Span-GlobalPointer"
RELATION_PREFIX = "Relation-"  # GPLinker: its entity, head and tail pointers, and the three stacked
RELATION_ENTITY = RELATION_PREFIX + "Entity-Pointer"
RELATION_HEAD = RELATION_PREFIX + "Head-Pointer"
RELATION_TAIL = RELATION_PREFIX + "Tail-Pointer"
RELATION_LOGITS = RELATION_PREFIX + "Logits"
QA_DENSE = "QA-Dense"  # extractive question answering: each position's start and end logits
VECTOR_PREFIX = "Vector-"  # the sentence-vector head: pooling, then the optional unit normalization
VECTOR_CLS = VECTOR_PREFIX + "CLS"
VECTOR_MEAN = VECTOR_PREFIX + "Mean"
VECTOR_FIRST_LAST = VECTOR_PREFIX + "First-Last"
VECTOR_NORMALIZE = VECTOR_PREFIX + "Normalize"
HEAD_PADDING_MASK = "Head-Padding-Mask"
# the layers whose output is a head model's output, in the order a loss looks for them
HEAD_OUTPUTS = (TAGGING_CRF, SPAN_POINTER, MLM_ACTIVATION, OUTPUT_MLM_ACTIVATION, LM_ACTIVATION, CLS_DENSE,
                TAGGING_DENSE, NSP_PROBA, DISCRIMINATOR_PREDICTION)

# ------------------------------------------------------------------------------ parts of the model
PARTS = ("inputs", "embeddings", "encoder", "decoder", "pooler", "nsp", "mlm", "head")  # in graph order; decoder: T5's


def part_of(name: str) -> tuple[str, int | None]:
    """The part of the model a layer name belongs to (one of `PARTS`), and its block index in the encoder (or in
    T5's decoder). T5's encoder ends with its own final norm; the decoder's final norm feeds the output layer and is
    counted with it, as GPT-2's ``Output-Norm``.

    Example:
    >>> part_of(TOKEN_INPUT), part_of(POOLER_DENSE), part_of(block(0, FEED_FORWARD))
    (('inputs', None), ('pooler', None), ('encoder', 0))
    >>> part_of(stacked(DECODER, block(1, CROSS_ATTENTION))), part_of(ENCODER_MASK), part_of("Decoder-Output-LM")
    (('decoder', 1), ('inputs', None), ('mlm', None))
    >>> part_of("Encoder-Output-Norm"), part_of("Decoder-Output-Norm"), part_of("Decoder-Embedding-Relative-Position")
    (('encoder', None), ('mlm', None), ('embeddings', None))
    """
    stack = re.match(f"({ENCODER}|{DECODER})-", name)  # T5's stacks: their other layers are grouped as BERT's
    if stack:
        rest, decoder = name[stack.end():], stack.group(1) == DECODER
        if rest.startswith("Output-"):
            return ("mlm" if decoder else "encoder"), None
        part, index = part_of(rest)
        return ("decoder" if decoder and part == "encoder" else part), index
    found = parse_block(name)
    if found is not None or name.startswith(BLOCK_PREFIX):
        return "encoder", found[0] if found else None
    if name.startswith(INPUT_PREFIX) or name in (ATTENTION_MASK, LM_MASK, UNILM_MASK):
        return "inputs", None
    prefixes = ((EMBEDDING_PREFIX, "embeddings"), (POOLER, "pooler"), (NSP_PREFIX, "nsp"), (MLM_PREFIX, "mlm"),
                (OUTPUT_MAPPING, "mlm"), (OUTPUT_MLM_DROPOUT, "mlm"), (OUTPUT_MLM_ACTIVATION, "mlm"),
                (OUTPUT_NORM, "mlm"), (OUTPUT_DROPOUT, "mlm"), (LM_ACTIVATION, "mlm"))
    return next(((part, None) for prefix, part in prefixes if name.startswith(prefix)), ("head", None))
