"""build_transformer_model(): the functional graph of BERT and its families, with bert4keras's layer names.

The graph reads top to bottom in three steps, as in bert4keras: embeddings, one transformer block per layer
index, then the optional pre-training layers. A family (`kerasbert.modeling.families`) changes single steps:
ALBERT shares one block, NEZHA and RoFormer read positions in attention, RoFormer-V2 drops biases and norm
weights, ELECTRA ends in its discriminator.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

import keras

from kerasbert import layer_names as names
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling import families, heads
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention
from kerasbert.modeling.config import BertConfig, config_of, resolve_config
from kerasbert.modeling.families import Family
from kerasbert.modeling.layers import (
    Add,
    Dropout,
    LayerNorm,
    PositionEmbedding,
    ScaleFreeNorm,
    SegmentEmbedding,
    TokenEmbedding,
)
from kerasbert.modeling.masks import attention_mask, check_application
from kerasbert.modeling.positions import RelativePositions, RotaryPositions
from kerasbert.perf.xla import xla_pays
from kerasbert.weights.checkpoint import load_checkpoint

# bert4keras keyword arguments that name a BertConfig field differently.
_BERT4KERAS_ALIASES = {
    "max_position": "max_position_embeddings",
    "segment_vocab_size": "type_vocab_size",
    "attention_dropout_rate": "attention_probs_dropout_prob",
}


def _norm(name: str, cfg: BertConfig, family: Family, dtype, width_symbol: str = "H"):
    """The family's norm: LayerNorm (γ, β; 2·H, or 2·E over an E-wide embedding), or RoFormer-V2's
    `ScaleFreeNorm`."""
    if family.norm == "scale_free":
        return ScaleFreeNorm(epsilon=cfg.layer_norm_eps, dtype=dtype, name=name)
    return LayerNorm(epsilon=cfg.layer_norm_eps, width_symbol=width_symbol, dtype=dtype, name=name)


def _embeddings(token_ids, segment_ids, cfg: BertConfig, family: Family, init, dropout_rate: float, dtype,
                hierarchical: float | None):
    """Token + segment (+ absolute position) embeddings, normalized, mapped from E to H: ``[B, S] -> [B, S, H]``.

    Returns the output and the token embedding layer (the MLM head reuses its weights).
    """
    width = cfg.embedding_width  # E
    symbol = "H" if width == cfg.hidden_size else "E"  # the width in the layers' formulas: V·H, or V·E
    layers = {names.EMBEDDING_TOKEN: TokenEmbedding(cfg.vocab_size, width, embeddings_initializer=init,
                                                    width_symbol=symbol, dtype=dtype, name=names.EMBEDDING_TOKEN)}
    if segment_ids is not None:
        layers[names.EMBEDDING_SEGMENT] = SegmentEmbedding(cfg.type_vocab_size, width, embeddings_initializer=init,
                                                           width_symbol=symbol, dtype=dtype,
                                                           name=names.EMBEDDING_SEGMENT)
        layers[names.EMBEDDING_TOKEN_SEGMENT] = Add(dtype=dtype, name=names.EMBEDDING_TOKEN_SEGMENT)
    if family.positions == "absolute":
        layers[names.EMBEDDING_POSITION] = PositionEmbedding(
            cfg.max_position_embeddings, width, embeddings_initializer=init, dtype=dtype, hierarchical=hierarchical,
            width_symbol=symbol, name=names.EMBEDDING_POSITION)
    layers[names.EMBEDDING_NORM] = _norm(names.EMBEDDING_NORM, cfg, family, dtype, symbol)
    layers[names.EMBEDDING_DROPOUT] = Dropout(dropout_rate, dtype=dtype, name=names.EMBEDDING_DROPOUT)
    if width != cfg.hidden_size:
        layers[names.EMBEDDING_MAPPING] = keras.layers.Dense(cfg.hidden_size, use_bias=family.bias,
                                                             kernel_initializer=init, dtype=dtype,
                                                             name=names.EMBEDDING_MAPPING)
    return embed(layers, family, token_ids, segment_ids), layers[names.EMBEDDING_TOKEN]


def embed(layers: Mapping[str, keras.layers.Layer], family: Family, token_ids, segment_ids, positions=None):
    """The embedding step over its layers by name (``Embedding-*``): the graph's, and a decoder's on the
    positions it feeds (`kerasbert.generation`).

    Args:
        layers: dict. the embedding layers by name: a model's, or those `build_transformer_model` is wiring.
        family: Family. whose order of norm and dropout, and whose positions.
        token_ids: ``[B, S]`` token ids.
        segment_ids: ``[B, S]`` segment ids; None for a model without segments.
        positions: ``[B, S]`` each token's position in a position table; None: 0..S-1.

    Returns:
        ``[B, S, H]``.

    Example:
    >>> from keras import ops
    >>> bert = build_transformer_model("tiny", verbose=False)
    >>> layers, ids = {layer.name: layer for layer in bert.layers}, ops.array([[5, 6]])
    >>> x = embed(layers, families.get("bert"), ids[:, 1:], ops.zeros((1, 1), "int32"), positions=ops.array([[1]]))
    >>> full = embed(layers, families.get("bert"), ids, ops.zeros((1, 2), "int32"))
    >>> bool(ops.all(ops.abs(x[:, 0] - full[:, 1]) < 1e-6))
    True
    """
    x = layers[names.EMBEDDING_TOKEN](token_ids)
    if segment_ids is not None:  # keeps the token embedding's Keras mask
        x = layers[names.EMBEDDING_TOKEN_SEGMENT]([x, layers[names.EMBEDDING_SEGMENT](segment_ids)])
    if family.positions == "absolute":
        position = layers[names.EMBEDDING_POSITION]
        x = position(x) if positions is None else position(x, positions=positions)
    norm, dropout = layers[names.EMBEDDING_NORM], layers[names.EMBEDDING_DROPOUT]
    x = dropout(norm(x)) if family.norm == "layer" else norm(dropout(x))  # RoFormer-V2 normalizes last
    return layers[names.EMBEDDING_MAPPING](x) if names.EMBEDDING_MAPPING in layers else x


def _positions(x, cfg: BertConfig, family: Family, dtype):
    """The positions every attention layer reads, where the family has no position table: NEZHA's relative
    ``[S, S, d]`` or RoFormer's rotary ``[1, S, d]``; None for absolute positions."""
    if family.positions == "relative":
        return RelativePositions(cfg.head_size, cfg.max_relative_position, dtype=dtype,
                                 name=names.RELATIVE_POSITION)(x)
    if family.positions == "rotary":
        return RotaryPositions(cfg.head_size, dtype=dtype, name=names.ROTARY_POSITION)(x)
    return None


@dataclasses.dataclass(frozen=True)
class Residual:
    """A sublayer with its post-norm residual, ``Norm(x + Dropout(f(x)))`` (Devlin et al. 2019, §3): four layers
    that ALBERT's blocks share."""

    layer: keras.layers.Layer
    dropout: keras.layers.Layer
    add: keras.layers.Layer
    norm: keras.layers.Layer

    @classmethod
    def around(cls, layer, cfg: BertConfig, family: Family, dropout_rate: float, dtype) -> "Residual":
        return cls(layer, Dropout(dropout_rate, dtype=dtype, name=names.residual(layer.name, "Dropout")),
                   keras.layers.Add(dtype=dtype, name=names.residual(layer.name, "Add")),
                   _norm(names.residual(layer.name, "Norm"), cfg, family, dtype))

    @classmethod
    def of(cls, model: keras.Model, name: str) -> "Residual":
        """The built sublayer ``name`` of ``model`` with its residual layers."""
        return cls(*(model.get_layer(n) for n in (name, *(names.residual(name, s) for s in ("Dropout", "Add",
                                                                                               "Norm")))))

    def __call__(self, x, *inputs):
        return self.finish(x, self.layer([x, *inputs]) if inputs else self.layer(x))

    def finish(self, x, y):
        """``Norm(x + Dropout(y))``: the residual around the sublayer's output ``y``."""
        return self.norm(self.add([x, self.dropout(y)]))


def blocks_of(model: keras.Model) -> list[tuple[Residual, Residual]]:
    """The attention and feed-forward `Residual` of each of a built model's L blocks, in order (ALBERT's one shared
    block L times), for a decoder that runs them itself (`kerasbert.generation`).

    Example:
    >>> blocks = blocks_of(build_transformer_model("tiny", model="albert", embedding_size=16, verbose=False))
    >>> len(blocks), blocks[0][0].layer.name, blocks[1][1].norm.name
    (2, 'Transformer-MultiHeadSelfAttention', 'Transformer-FeedForward-Norm')
    """
    cfg, shared = config_of(model), families.of_model(model).shared_block
    return [tuple(Residual.of(model, names.block(None if shared else i, part))
                  for part in (names.ATTENTION, names.FEED_FORWARD)) for i in range(cfg.num_hidden_layers)]


def _block_layers(index: int | None, cfg: BertConfig, family: Family, init, dropout_rate: float, dtype) -> tuple:
    """The layers of block ``index`` (None: ALBERT's shared block): attention, then feed-forward."""
    attention = MultiHeadSelfAttention(cfg.num_attention_heads, dropout=cfg.attention_probs_dropout_prob,
                                       kernel_initializer=init, positions=None if family.positions == "absolute"
                                       else family.positions, use_bias=family.bias, dtype=dtype,
                                       name=names.block(index, names.ATTENTION))
    feed_forward = FeedForward(cfg.intermediate_size, activation=cfg.activation, kernel_initializer=init,
                               use_bias=family.bias, dtype=dtype, name=names.block(index, names.FEED_FORWARD))
    return tuple(Residual.around(layer, cfg, family, dropout_rate, dtype) for layer in (attention, feed_forward))


def _transformer_block(x, mask, positions, block: tuple):
    """Attention -> Dropout -> Add -> Norm -> FeedForward -> Dropout -> Add -> Norm."""
    attention, feed_forward = block
    x = attention(x, mask) if positions is None else attention(x, mask, positions)
    return feed_forward(x)


def _final_layers(x, embedding, cfg: BertConfig, family: Family, init, flags: dict, dtype) -> list:
    """The family's pre-training outputs, in bert4keras's order: BERT's pooled/NSP then MLM (built by
    `kerasbert.modeling.heads`), ELECTRA's discriminator, RoFormer-V2's MLM."""
    if family.heads == "electra":
        return [heads.discriminator_output(x, cfg, init, dtype, flags["with_discriminator"])] \
            if flags["with_discriminator"] else []
    if family.heads == "roformer_v2":
        return [heads.output_mlm(x, embedding, init, flags["with_mlm"], cfg.hidden_dropout_prob, dtype)] \
            if flags["with_mlm"] else []
    outputs, with_pool, with_nsp, with_mlm = [], flags["with_pool"], flags["with_nsp"], flags["with_mlm"]
    if with_pool or with_nsp:
        activation = "tanh" if with_pool in (True, False) else with_pool
        pooled = heads.pooler_output(x, cfg.hidden_size, activation, init, dtype)
        outputs.append(heads.nsp_output(pooled, init, dtype) if with_nsp else pooled)
    if with_mlm:
        activation = "softmax" if with_mlm is True else with_mlm
        outputs.append(heads.mlm_output(x, embedding, cfg.activation, cfg.layer_norm_eps, init, dtype,
                                           activation))
    return outputs


def _resolve(config_path, config, keep_tokens, dropout_rate, overrides) -> tuple[BertConfig, float]:
    """Merge config file, overrides (bert4keras aliases allowed) and keep_tokens into one BertConfig."""
    if config is not None and config_path is not None:
        raise fail(ConfigError, "build_transformer_model", "config_path or config, not both", "both")
    cfg = resolve_config(config if config is not None else config_path)
    changes = {_BERT4KERAS_ALIASES.get(k, k): v for k, v in overrides.items()}
    if keep_tokens is not None:
        keep_tokens = [int(t) for t in keep_tokens]
        bad = [t for t in keep_tokens if not 0 <= t < cfg.vocab_size]
        if bad or not keep_tokens:
            raise fail(ModelError, "keep_tokens", f"a non-empty list of ids in [0, {cfg.vocab_size})",
                       f"{len(bad)} ids out of range, e.g. {bad[:5]}" if bad else "an empty list",
                       "keep_tokens indexes the vocabulary of the checkpoint's config")
        changes["vocab_size"] = len(keep_tokens)
    cfg = cfg.replace(**changes) if changes else cfg
    return cfg, cfg.hidden_dropout_prob if dropout_rate is None else dropout_rate


def build_transformer_model(
    config_path: str | os.PathLike | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    model: str | None = None,
    application: str = "encoder",
    *,
    config: BertConfig | dict | None = None,
    with_pool: bool | str = False,
    with_nsp: bool = False,
    with_mlm: bool | str = False,
    with_discriminator: bool | str = False,
    sequence_length: int | None = None,
    keep_tokens: Sequence[int] | None = None,
    dropout_rate: float | None = None,
    hierarchical_position: bool | float | None = None,
    name: str | None = None,
    allow_missing: bool = False,
    verbose: bool = True,
    dtype: str | None = None,
    **overrides,
) -> TransformerModel:
    """Build a functional Keras encoder of a bert4keras family from a config, optionally loading a Google or
    Hugging Face checkpoint.

    Same arguments and meaning as bert4keras's ``build_transformer_model``.

    Args:
        config_path: str. a ``bert_config.json`` or Hugging Face ``config.json`` path, a folder holding one, or a
            preset name.
        checkpoint_path: str. a Google TF1 checkpoint (prefix, folder, ``.index`` or ``.data-*``), or Hugging Face
            weights (a folder, ``model.safetensors``, ``pytorch_model.bin`` or a sharded ``*.index.json``).
        model: str. the family: ``bert`` (``roberta``), ``albert``, ``albert_unshared``, ``nezha``, ``electra``,
            ``roformer``, ``roformer_v2`` (`kerasbert.modeling.families`); None: the ``model_type`` of a Hugging
            Face config, else ``bert``.
        application: str. what each position attends to (`kerasbert.modeling.masks`): ``"encoder"`` every real
            token, ``"lm"`` those up to itself (a language model), ``"unilm"`` the source (segment 0) both ways and
            the target (segment 1) causally (sequence to sequence). Both imply ``with_mlm``, as in bert4keras:
            the MLM output then gives next-token probabilities at each position.
        config: BertConfig or dict. instead of ``config_path``.
        with_pool: bool or str. add ``Pooler``/``Pooler-Dense`` (tanh, or the activation given).
        with_nsp: bool. add ``NSP-Proba`` (implies the pooler).
        with_mlm: bool or str. add the masked-LM head tied to ``Embedding-Token`` (softmax or the activation).
        with_discriminator: bool or str. ELECTRA: add ``Discriminator-Dense``/``-Prediction`` (sigmoid or the
            activation).
        sequence_length: int. fix the input length; ``None`` accepts any length the positions allow.
        keep_tokens: list of int. keep only these vocabulary rows (word embeddings and MLM bias).
        dropout_rate: float. overrides ``hidden_dropout_prob``.
        hierarchical_position: bool or float. absolute positions beyond P, up to P², from the same table
            (`kerasbert.modeling.layers.PositionEmbedding`; True is α = 0.4).
        name: str. the model's name.
        allow_missing: bool. load even when the checkpoint lacks some variables (they stay *NEW*).
        verbose: bool. print the per-variable load log.
        dtype: str. a Keras dtype policy for every layer, e.g. ``"mixed_float16"``.
        **overrides: BertConfig fields to change (bert4keras's ``max_position``,
            ``segment_vocab_size``, ``attention_dropout_rate`` are accepted too).

    Returns:
        A functional `TransformerModel` that carries its `BertConfig` (`kerasbert.config_of`) and family, with
        inputs ``[Input-Token, Input-Segment]``. Its output is the sequence
        output ``[B, S, H]`` when no head flag is set; otherwise the pooled (or NSP) output and/or
        the MLM probabilities, in that order, as bert4keras returns them. Every sequence output (embeddings,
        ``Transformer-{i}-*``) carries ``Input-Token != 0`` as its Keras mask, as in bert4keras, for layers
        wired on it (a CRF, a masked pooling); attention reads ``Attention-Mask``. Its ``predict`` compiles
        with XLA when `xla_pays` (on a GPU, models of `XLA_MIN_PARAMS` parameters and more): once per input shape, so
        pad inputs to one length (or a few), or set ``model.jit_compile = False``; ``compile`` sets it anew.

    Example:
    >>> bert = build_transformer_model("tiny", with_pool=True, verbose=False)
    >>> [t.name for t in bert.inputs], tuple(bert.output.shape)
    (['Input-Token', 'Input-Segment'], (None, 32))
    >>> albert = build_transformer_model("tiny", model="albert", embedding_size=16, verbose=False)
    >>> albert.family, tuple(albert.get_layer("Embedding-Mapping").kernel.shape)
    ('albert', (16, 32))
    """
    cfg, dropout_rate = _resolve(config_path, config, keep_tokens, dropout_rate, overrides)
    family = families.resolve(model, cfg)
    application = check_application(application, family.name)
    with_mlm = with_mlm or application != "encoder"  # a language model's output is its next-token probabilities
    flags = _checked_flags(family, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                           with_discriminator=with_discriminator)
    hierarchical = 0.4 if hierarchical_position is True else hierarchical_position or None
    _check_length(sequence_length, cfg, family, hierarchical)
    init = keras.initializers.TruncatedNormal(stddev=cfg.initializer_range)
    cfg = cfg.replace(hidden_dropout_prob=dropout_rate)

    inputs = [keras.Input((sequence_length,), dtype="int32", name=names.TOKEN_INPUT)]
    if cfg.type_vocab_size:
        inputs.append(keras.Input((sequence_length,), dtype="int32", name=names.SEGMENT_INPUT))
    segment_ids = inputs[1] if cfg.type_vocab_size else None
    mask = attention_mask(application, inputs[0], segment_ids)  # [B, S] or [B, S, S] bool, for every attention
    x, embedding = _embeddings(inputs[0], segment_ids, cfg, family, init, dropout_rate, dtype, hierarchical)
    positions = _positions(x, cfg, family, dtype)
    shared = _block_layers(None, cfg, family, init, dropout_rate, dtype) if family.shared_block else None
    for index in range(cfg.num_hidden_layers):
        x = _transformer_block(x, mask, positions, shared or _block_layers(index, cfg, family, init, dropout_rate,
                                                                           dtype))
    outputs = _final_layers(x, embedding, cfg, family, init, flags, dtype) or [x]
    bert = TransformerModel(inputs, outputs[0] if len(outputs) == 1 else outputs, name=name or family.name,
                            bert_config=cfg, family=family.name, application=application)
    bert.jit_compile = xla_pays(bert)  # predict with XLA on a GPU for BERT-small and up (see xla_pays)
    if checkpoint_path is not None:
        load_checkpoint(bert, checkpoint_path, keep_tokens=keep_tokens, allow_missing=allow_missing, verbose=verbose)
    return bert


def _checked_flags(family: Family, **flags) -> dict:
    """The head flags, refused where the family has no such layers (bert4keras's ELECTRA takes neither
    ``with_pool`` nor ``with_mlm``)."""
    allowed = {"bert": ("with_pool", "with_nsp", "with_mlm"), "electra": ("with_discriminator",),
               "roformer_v2": ("with_mlm",)}[family.heads]
    wrong = next((flag for flag, value in flags.items() if value and flag not in allowed), None)
    if wrong is not None:
        raise fail(ModelError, wrong, f"one of {', '.join(allowed)} for model={family.name!r}", f"{wrong}="
                   f"{flags[wrong]!r}", f"{family.name} has no such pre-training layers; add a task head instead")
    return flags


def _check_length(sequence_length: int | None, cfg: BertConfig, family: Family, hierarchical) -> None:
    """A fixed ``sequence_length`` within what the positions allow: P (P² hierarchical) for a position table."""
    limit = families.max_length(family, cfg, hierarchical)
    if sequence_length is not None and not 0 < sequence_length <= (limit or sequence_length):
        where = "max_position_embeddings" + (" squared, hierarchical" if hierarchical else "")
        raise fail(ModelError, "sequence_length", f"1 to {limit} ({where})" if limit else "a positive length",
                   str(sequence_length))
