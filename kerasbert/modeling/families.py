"""The model families kerasbert builds (bert4keras's ``model=`` values), as data: what each changes in the graph.

bert4keras's encoder families are BERT's post-norm encoder, each changing single steps of it
(`kerasbert.modeling.encoder`):

    bert, roberta     learned absolute positions; pooler, NSP and MLM heads (RoBERTa checkpoints are BERT's)
    albert            one block shared by every layer (index-free names), the embedding size E ≠ H
    albert_unshared   ALBERT's weights in L separate blocks, fine-tuned apart
    nezha             no position table: attention adds clipped sinusoidal relative positions (Wei et al. 2019)
    electra           ELECTRA's discriminator: an E-wide embedding mapped to H, a replaced-token head
    roformer          no position table: rotary positions rotate q and k (Su et al. 2021)
    roformer_v2       RoFormer without biases, and a norm without weights (x / rms(x))

Hugging Face's encoders of the same graph, read from their folders alone (no Google checkpoint form):

    roberta_en        RoBERTa: pads with <pad> (1), positions from the table's row pad_id + 1; pooler, MLM, no NSP
    xlm_roberta       XLM-R: RoBERTa's graph with a SentencePiece vocabulary
    distilbert        DistilBERT: no segments, MLM alone

Its generative families are architectures of their own (`kerasbert.modeling.architecture`):

    gpt               GPT: BERT's blocks under a causal mask, no embedding norm, the token embedding as output
    gpt2, gpt2_ml     GPT-2's pre-norm blocks and final norm; GPT2-ML's norm after the embeddings and each add
    t5 (t5.1.0)       T5's encoder-decoder: RMS norms, relative position buckets, no biases (Raffel et al. 2020)
    t5.1.1, mt5.1.1   T5.1.1's gated-GELU feed-forward and untied output; mT5's checkpoint names

Example:
>>> get("albert").shared_block, get("RoBERTa").name, get("nezha").positions
(True, 'bert', 'relative')
"""

from __future__ import annotations

import dataclasses
import difflib

from kerasbert.choices import MODEL_FAMILIES
from kerasbert.errors import ConfigError, ModelError, fail


@dataclasses.dataclass(frozen=True)
class Family:
    """What one family changes in BERT's graph.

    Args:
        name: str. the family, one of `NAMES` (``roberta`` is ``bert``).
        positions: str. ``"absolute"``: ``Embedding-Position`` ``[P, E]`` added to the embeddings;
            ``"relative"``: NEZHA's ``Embedding-Relative-Position`` in every attention; ``"rotary"``:
            RoFormer's ``Embedding-Rotary-Position`` on every attention's q and k; ``"deberta_relative"``: DeBERTa's
            table of log-bucketed relative positions, ``Embedding-Relative-Buckets``, in every attention.
        shared_block: bool. one set of block layers (``Transformer-MultiHeadSelfAttention``, ...) used L times.
        bias: bool. whether the block projections and the embedding mapping have biases.
        norm: str. ``"layer"``: LayerNorm with γ and β; ``"scale_free"``: ``x / rms(x)``, no weights.
        heads: str. the final layers ``with_*`` builds: ``"bert"`` (pooler, NSP, MLM), ``"electra"`` (the
            discriminator), ``"roformer_v2"`` (an MLM of ``Output-*`` layers), ``"roberta"`` (BERT's pooler and
            MLM, no NSP), ``"distilbert"`` (BERT's MLM alone), ``"deberta"`` (BERT's MLM alone).
        checkpoint: str. whose variable names its Google checkpoint uses: ``"bert"``, ``"albert"``, ``"electra"``;
            ``""`` for a family with no Google TF1 form (its checkpoints are Hugging Face folders alone).
        required: tuple of str. config keys the family's checkpoints always give.
        architecture: str. the kind of model it is, a key of `kerasbert.modeling.architecture.ARCHITECTURES`:
            ``"encoder"``, BERT's post-norm encoder, for every bert4keras encoder family; ``"gpt"`` for the
            GPT language models; ``"t5"`` for T5's encoder-decoder.
        causal: bool. always a language model, as bert4keras builds it: ``application="encoder"`` builds the
            causal ``"lm"`` model too, and ``"unilm"`` is refused (GPT).
        part: str. which part of an encoder-decoder the model is: ``""`` the whole model, ``"encoder"`` or
            ``"decoder"`` (bert4keras's ``model="t5.1.1_encoder"``, ``"t5.1.1_decoder"``).
        tokenizer: str. the model of its tokenizer: ``"wordpiece"`` (BERT's ``vocab.txt``), ``"bpe"`` (byte-level
            BPE: RoBERTa, ModernBERT), ``"unigram"`` (SentencePiece Unigram: XLM-R, DeBERTa-v3, T5).
        padded_positions: bool. the position table's first ``pad_id + 1`` rows are never read: a row's positions
            start at ``pad_id + 1`` (RoBERTa's and XLM-R's, `position_offset`).
    """

    name: str
    positions: str = "absolute"
    shared_block: bool = False
    bias: bool = True
    norm: str = "layer"
    heads: str = "bert"
    checkpoint: str = "bert"
    required: tuple[str, ...] = ()
    architecture: str = "encoder"
    causal: bool = False
    part: str = ""
    tokenizer: str = "wordpiece"
    padded_positions: bool = False


_T5_KEYS = ("relative_attention_num_buckets",)  # the key a T5 config gives and a BERT config lacks
_FAMILIES = {
    "bert": Family("bert"),
    "albert": Family("albert", shared_block=True, checkpoint="albert", required=("embedding_size",)),
    "albert_unshared": Family("albert_unshared", checkpoint="albert", required=("embedding_size",)),
    "nezha": Family("nezha", positions="relative"),
    "electra": Family("electra", heads="electra", checkpoint="electra"),
    "roformer": Family("roformer", positions="rotary"),
    "roformer_v2": Family("roformer_v2", positions="rotary", bias=False, norm="scale_free", heads="roformer_v2"),
    "gpt": Family("gpt", heads="gpt", checkpoint="gpt", architecture="gpt", causal=True),
    "gpt2": Family("gpt2", heads="gpt", checkpoint="gpt2", architecture="gpt", causal=True),
    "gpt2_ml": Family("gpt2_ml", heads="gpt", checkpoint="gpt2_ml", architecture="gpt", causal=True),
    "t5": Family("t5", positions="t5_relative", bias=False, norm="rms", heads="t5", checkpoint="t5",
                 architecture="t5", required=_T5_KEYS),
    "t5.1.1": Family("t5.1.1", positions="t5_relative", bias=False, norm="rms", heads="t5", checkpoint="t5.1.1",
                     architecture="t5", required=_T5_KEYS),
    "mt5.1.1": Family("mt5.1.1", positions="t5_relative", bias=False, norm="rms", heads="t5", checkpoint="mt5.1.1",
                      architecture="t5", required=_T5_KEYS),
    # the Hugging Face encoders beyond bert4keras's families
    "roberta_en": Family("roberta_en", heads="roberta", checkpoint="", tokenizer="bpe", padded_positions=True),
    "xlm_roberta": Family("xlm_roberta", heads="roberta", checkpoint="", tokenizer="unigram", padded_positions=True),
    "distilbert": Family("distilbert", heads="distilbert", checkpoint=""),
    "deberta_v3": Family("deberta_v3", positions="deberta_relative", heads="deberta", checkpoint="",
                         architecture="deberta", tokenizer="unigram"),
    "modernbert": Family("modernbert", positions="rotary", heads="modernbert", checkpoint="",
                         architecture="modernbert", tokenizer="bpe"),
}
ALIASES = {"roberta": "bert", "t5.1.0": "t5"}  # bert4keras builds RoBERTa as BERT, and names T5's first version both
FAMILY_NAMES = tuple(_FAMILIES)  # the families, without their aliases
ENCODER_NAMES = tuple(name for name, family in _FAMILIES.items() if family.architecture == "encoder")
NAMES = MODEL_FAMILIES  # every model= value: the families, then their aliases
PARTS = ("encoder", "decoder")  # an encoder-decoder's parts built alone: model="t5.1.1_encoder", "t5.1.1_decoder"
PART_NAMES = tuple(f"{name}_{part}" for name, family in _FAMILIES.items() if family.architecture == "t5"
                   for part in PARTS)
# Hugging Face config.json model_type -> the family it describes (a gated "t5" is T5.1.1: `named`); `model_type`
# is the other way
MODEL_TYPES = {"bert": "bert", "albert": "albert", "electra": "electra", "nezha": "nezha",
               "roformer": "roformer", "t5": "t5", "mt5": "mt5.1.1", "gpt2": "gpt2", "roberta": "roberta_en",
               "xlm-roberta": "xlm_roberta", "distilbert": "distilbert", "deberta-v2": "deberta_v3",
               "modernbert": "modernbert"}


# families that read their kin's checkpoints, and T5's versions, whose Hugging Face model_type is T5's or mT5's
_KIN = {"albert_unshared": "albert", "roformer_v2": "roformer", "t5.1.1": "t5", "mt5.1.1": "mt5",
        "roberta_en": "roberta", "xlm_roberta": "xlm-roberta", "deberta_v3": "deberta-v2"}


def model_type(family: Family) -> str:
    """The ``model_type`` of the family's Hugging Face config, also the prefix of its encoder's Hugging Face names:
    that of the family whose checkpoints it reads (``albert`` for ``albert_unshared``, ``roformer`` for
    ``roformer_v2``, which transformers lacks).

    Example:
    >>> model_type(get("albert_unshared")), model_type(get("nezha")), model_type(get("t5.1.1_encoder"))
    ('albert', 'nezha', 't5')
    """
    name = family.name[:-len(family.part) - 1] if family.part else family.name
    return _KIN.get(name, name)


def named(config) -> str | None:
    """The family a Hugging Face config's ``model_type`` names, None for a Google config: ``"t5"`` for an ungated
    T5 config, ``"t5.1.1"`` for a gated one (``feed_forward_proj`` ``"gated-gelu"``)."""
    family = MODEL_TYPES.get(config.model_type) if config.model_type else None
    return "t5.1.1" if family == "t5" and config.gated else family


def get(name: str) -> Family:
    """The family named ``name`` (any case; ``roberta`` is ``bert``); a ModelError listing those that exist. An
    encoder-decoder's name with ``_encoder`` or ``_decoder`` is that part alone (`Family.part`).

    Example:
    >>> get("roformer_v2").bias, get("T5.1.0_decoder").name, get("t5.1.0_decoder").part
    (False, 't5_decoder', 'decoder')
    """
    key = name.lower() if isinstance(name, str) else name
    key = ALIASES.get(key, key)
    base, _, part = key.rpartition("_") if isinstance(key, str) else ("", "", "")
    base = ALIASES.get(base, base)
    if key not in _FAMILIES and part in PARTS and base in _FAMILIES and _FAMILIES[base].architecture == "t5":
        return dataclasses.replace(_FAMILIES[base], name=f"{base}_{part}", part=part)
    if key not in _FAMILIES:
        close = difflib.get_close_matches(str(key), NAMES, n=1)
        hint = f"did you mean model={close[0]!r}?" if close else "model= names one of bert4keras's encoder families"
        raise fail(ModelError, "model", f"one of {', '.join(NAMES)}", repr(name), hint)
    return _FAMILIES[key]


# what a model that carries no config or family is told
WRAP_HINT = ("build it with kerasbert.build_transformer_model or a kerasbert.modeling.heads function; copy one with "
             "kerasbert.modeling.backbone.clone (keras.models.clone_model keeps no config)")


def of_model(model) -> Family:
    """The family of a kerasbert model: its ``family``, or that of a model nested in it; a ModelError for a
    model that records none (a plain ``keras.Model``), which says how to get one.

    Example:
    >>> import keras
    >>> of_model(keras.Sequential(name="plain"))
    Traceback (most recent call last):
    ...
    kerasbert.errors.ModelError: model 'plain': expected a kerasbert model that records its family, found a \
keras.Model without one. build it with kerasbert.build_transformer_model or a kerasbert.modeling.heads function; \
copy one with kerasbert.modeling.backbone.clone (keras.models.clone_model keeps no config)
    """
    for candidate in (model, *getattr(model, "layers", ())):
        if isinstance(getattr(candidate, "family", None), str):
            return get(candidate.family)
    raise fail(ModelError, f"model {getattr(model, 'name', model)!r}", "a kerasbert model that records its family",
               "a keras.Model without one", WRAP_HINT)


def resolve(model: str | None, config) -> Family:
    """The family to build: ``model``, else the one a Hugging Face config's ``model_type`` names, else BERT.

    A ConfigError where ``model`` contradicts the config's ``model_type`` (``model="bert"`` on an ALBERT
    config), where the config lacks a key the family needs (ALBERT's ``embedding_size``, T5's
    ``relative_attention_num_buckets``), or where a family other than T5's gets T5's config.

    Example:
    >>> from kerasbert.modeling.config import BertConfig
    >>> cfg = BertConfig.from_dict({"model_type": "albert", "vocab_size": 100, "hidden_size": 8, "embedding_size": 4,
    ...                             "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16})
    >>> resolve(None, cfg).name, resolve("albert_unshared", cfg).name
    ('albert', 'albert_unshared')
    """
    kind = named(config)
    family = get(model if model is not None else kind or "bert")
    whole = family.name[:-len(family.part) - 1] if family.part else family.name
    if kind not in (None, "bert") and (model_type(family) != config.model_type or (
            family.architecture == "t5" and whole != kind)):
        raise fail(ConfigError, f"{config.source}: model_type", f"a {family.name} config for model={model!r}",
                   repr(config.model_type) + (f" ({kind})" if kind != config.model_type else ""),
                   f"build with model={kind!r}, or leave model out")
    missing = [key for key in family.required if getattr(config, key) is None]
    if missing:
        raise fail(ConfigError, f"{config.source}: {missing[0]}", f"the key every {family.name} config gives",
                   f"no {', '.join(missing)}", "use the config file that came with the checkpoint")
    _refuse_t5_config(family, config)
    return family


def _refuse_t5_config(family: Family, config) -> None:
    """A ConfigError where a family other than T5's gets a T5 config: one with T5's relative position buckets
    (``relative_attention_num_buckets``) or a gated feed-forward (``hidden_act`` ``[act, "linear"]``)."""
    if family.architecture == "t5":
        return
    key = "relative_attention_num_buckets" if config.relative_attention_num_buckets is not None else (
        "hidden_act" if config.gated else None)
    if key is not None:
        raise fail(ConfigError, f"{config.source}: {key}", f"a {family.name} config, without T5's {key}",
                   repr(getattr(config, key)), "it is a T5 config: build it with model='t5', 't5.1.1' or 'mt5.1.1'")


def pad_id(family: Family, config) -> int:
    """The id a model of ``family`` masks as padding: 0, ``[PAD]`` of a word-piece vocabulary (BERT's families),
    else the config's ``pad_token_id`` (`kerasbert.BertConfig.pad_id`: RoBERTa's and XLM-R's ``<pad>`` is 1).

    Example:
    >>> from kerasbert.modeling.config import BertConfig
    >>> cfg = BertConfig.from_preset("tiny").replace(extra={"pad_token_id": 1})
    >>> pad_id(get("bert"), cfg), pad_id(get("roberta_en"), cfg)
    (0, 1)
    """
    return 0 if family.tokenizer == "wordpiece" else config.pad_id


def position_offset(family: Family, config) -> int:
    """The position table's row of a row's first token: ``pad_id + 1`` for RoBERTa's and XLM-R's tables, whose
    first rows are never read (Hugging Face's position ids count from the padding id on), else 0. A ConfigError
    where the table has no row left for a token.

    Example:
    >>> from kerasbert.modeling.config import BertConfig
    >>> cfg = BertConfig.from_preset("tiny").replace(extra={"pad_token_id": 1})
    >>> position_offset(get("xlm_roberta"), cfg), position_offset(get("bert"), cfg)
    (2, 0)
    """
    if not family.padded_positions:
        return 0
    offset = pad_id(family, config) + 1
    if config.max_position_embeddings <= offset:
        raise fail(ConfigError, f"{config.source}: max_position_embeddings", f"more than {offset} rows: a "
                   f"{family.name} position table reads its positions from row pad_token_id + 1 = {offset} on",
                   str(config.max_position_embeddings), "use the config.json that came with the checkpoint")
    return offset


def max_length(family: Family | str, config, hierarchical: float | bool | None = None) -> int | None:
    """The most tokens a model of ``family`` and ``config`` takes: P (``max_position_embeddings``) for a position
    table (less its first `position_offset` rows: 512 of RoBERTa's 514), P² with ``hierarchical_position``, None
    (any length) for NEZHA's and RoFormer's positions, which are computed from the input's length; P for
    ModernBERT's rotary positions, trained up to P (8,192). The cap for ``maxlen`` when encoding.

    Example:
    >>> from kerasbert.modeling.config import BertConfig
    >>> cfg = BertConfig.from_dict({"vocab_size": 100, "hidden_size": 8, "num_hidden_layers": 2,
    ...                             "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 512})
    >>> max_length("bert", cfg), max_length("bert", cfg, hierarchical=True), max_length("roformer", cfg)
    (512, 262144, None)
    """
    family = get(family) if isinstance(family, str) else family
    if family.architecture == "modernbert":  # rotary positions, trained up to P: at most P
        return config.max_position_embeddings
    if family.positions != "absolute":
        return None
    if family.padded_positions:
        return config.max_position_embeddings - position_offset(family, config)
    return config.max_position_embeddings ** (2 if hierarchical else 1)
