"""build_transformer_model(): the functional BERT graph, with bert4keras's layer names.

The graph reads top to bottom in three steps, as in bert4keras: embeddings, one transformer
block per layer index, then the optional pooler / NSP / MLM layers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import keras

from kerasbert import layer_names as names
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling import heads
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention
from kerasbert.modeling.config import BertConfig, resolve_config
from kerasbert.modeling.layers import (
    Add,
    Dropout,
    LayerNorm,
    PaddingMask,
    PositionEmbedding,
    SegmentEmbedding,
    TokenEmbedding,
)
from kerasbert.perf.xla import xla_pays
from kerasbert.weights.checkpoint import load_checkpoint

# bert4keras keyword arguments that name a BertConfig field differently.
_BERT4KERAS_ALIASES = {
    "max_position": "max_position_embeddings",
    "segment_vocab_size": "type_vocab_size",
    "attention_dropout_rate": "attention_probs_dropout_prob",
}


def _embeddings(token_ids, segment_ids, cfg: BertConfig, init, dropout_rate: float, dtype):
    """Token + segment + position embeddings, normalized: ``[B, S] -> [B, S, H]``.

    Returns the output and the token embedding layer (the MLM head reuses its weights).
    """
    embedding = TokenEmbedding(cfg.vocab_size, cfg.hidden_size, embeddings_initializer=init, dtype=dtype,
                               name=names.EMBEDDING_TOKEN)
    x = embedding(token_ids)
    if segment_ids is not None:
        s = SegmentEmbedding(cfg.type_vocab_size, cfg.hidden_size, embeddings_initializer=init, dtype=dtype,
                             name=names.EMBEDDING_SEGMENT)(segment_ids)
        x = Add(dtype=dtype, name=names.EMBEDDING_TOKEN_SEGMENT)([x, s])  # keeps the token embedding's Keras mask
    x = PositionEmbedding(cfg.max_position_embeddings, cfg.hidden_size, embeddings_initializer=init, dtype=dtype,
                          name=names.EMBEDDING_POSITION)(x)
    x = LayerNorm(epsilon=cfg.layer_norm_eps, dtype=dtype, name=names.EMBEDDING_NORM)(x)
    return Dropout(dropout_rate, dtype=dtype, name=names.EMBEDDING_DROPOUT)(x), embedding


def _residual(x, y, name: str, cfg: BertConfig, dropout_rate: float, dtype):
    """``Norm(x + Dropout(y))``, the post-norm residual of BERT (Devlin et al. 2019, §3)."""
    y = Dropout(dropout_rate, dtype=dtype, name=names.residual(name, "Dropout"))(y)
    x = keras.layers.Add(dtype=dtype, name=names.residual(name, "Add"))([x, y])
    return LayerNorm(epsilon=cfg.layer_norm_eps, dtype=dtype, name=names.residual(name, "Norm"))(x)


def _transformer_block(x, mask, index: int, cfg: BertConfig, init, dropout_rate: float, dtype):
    """Attention -> Dropout -> Add -> Norm -> FeedForward -> Dropout -> Add -> Norm."""
    name = names.block(index, names.ATTENTION)
    y = MultiHeadSelfAttention(cfg.num_attention_heads, dropout=cfg.attention_probs_dropout_prob,
                               kernel_initializer=init, dtype=dtype, name=name)([x, mask])
    x = _residual(x, y, name, cfg, dropout_rate, dtype)
    name = names.block(index, names.FEED_FORWARD)
    y = FeedForward(cfg.intermediate_size, activation=cfg.activation, kernel_initializer=init, dtype=dtype,
                    name=name)(x)
    return _residual(x, y, name, cfg, dropout_rate, dtype)


def _final_layers(x, embedding, cfg: BertConfig, init, with_pool, with_nsp, with_mlm, dtype) -> list:
    """Pooler (+ NSP) and MLM outputs, built by `kerasbert.modeling.heads`; bert4keras's order: pooled/NSP, then MLM."""
    outputs = []
    if with_pool or with_nsp:
        activation = "tanh" if with_pool in (True, False) else with_pool
        pooled = heads.pooler_output(x, cfg.hidden_size, activation, init, dtype)
        outputs.append(heads.nsp_output(pooled, init, dtype) if with_nsp else pooled)
    if with_mlm:
        activation = "softmax" if with_mlm is True else with_mlm
        outputs.append(heads.mlm_output(x, embedding, cfg.activation, cfg.layer_norm_eps, init, dtype, activation))
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
    model: str = "bert",
    *,
    config: BertConfig | dict | None = None,
    with_pool: bool | str = False,
    with_nsp: bool = False,
    with_mlm: bool | str = False,
    sequence_length: int | None = None,
    keep_tokens: Sequence[int] | None = None,
    dropout_rate: float | None = None,
    name: str | None = None,
    allow_missing: bool = False,
    verbose: bool = True,
    dtype: str | None = None,
    **overrides,
) -> TransformerModel:
    """Build a functional Keras BERT from a config, optionally loading a Google or Hugging Face checkpoint.

    Same arguments and meaning as bert4keras's ``build_transformer_model``.

    Args:
        config_path: str. a ``bert_config.json`` or Hugging Face ``config.json`` path, a folder holding one, or a
            preset name.
        checkpoint_path: str. a Google TF1 checkpoint (prefix, folder, ``.index`` or ``.data-*``), or Hugging Face
            weights (a folder, ``model.safetensors``, ``pytorch_model.bin`` or a sharded ``*.index.json``).
        model: str. the architecture; only ``"bert"`` is available.
        config: BertConfig or dict. instead of ``config_path``.
        with_pool: bool or str. add ``Pooler``/``Pooler-Dense`` (tanh, or the activation given).
        with_nsp: bool. add ``NSP-Proba`` (implies the pooler).
        with_mlm: bool or str. add the masked-LM head tied to ``Embedding-Token`` (softmax or the activation).
        sequence_length: int. fix the input length; ``None`` accepts any length up to P.
        keep_tokens: list of int. keep only these vocabulary rows (word embeddings and MLM bias).
        dropout_rate: float. overrides ``hidden_dropout_prob``.
        name: str. the model's name.
        allow_missing: bool. load even when the checkpoint lacks some variables (they stay *NEW*).
        verbose: bool. print the per-variable load log.
        dtype: str. a Keras dtype policy for every layer, e.g. ``"mixed_float16"``.
        **overrides: BertConfig fields to change (bert4keras's ``max_position``,
            ``segment_vocab_size``, ``attention_dropout_rate`` are accepted too).

    Returns:
        A functional `TransformerModel` that carries its `BertConfig` (`kerasbert.config_of`), with inputs
        ``[Input-Token, Input-Segment]``. Its output is the sequence
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
    """
    if model.lower() != "bert":
        raise fail(ModelError, "model", '"bert"', repr(model), "kerasbert builds BERT encoders")
    cfg, dropout_rate = _resolve(config_path, config, keep_tokens, dropout_rate, overrides)
    if sequence_length is not None and not 0 < sequence_length <= cfg.max_position_embeddings:
        raise fail(ModelError, "sequence_length", f"1 to {cfg.max_position_embeddings} (max_position_embeddings)",
                   str(sequence_length))
    init = keras.initializers.TruncatedNormal(stddev=cfg.initializer_range)

    inputs = [keras.Input((sequence_length,), dtype="int32", name=names.TOKEN_INPUT)]
    if cfg.type_vocab_size:
        inputs.append(keras.Input((sequence_length,), dtype="int32", name=names.SEGMENT_INPUT))
    mask = PaddingMask(name=names.ATTENTION_MASK)(inputs[0])  # [B, S] bool, shared by every attention layer
    segment_ids = inputs[1] if cfg.type_vocab_size else None
    x, embedding = _embeddings(inputs[0], segment_ids, cfg, init, dropout_rate, dtype)
    for index in range(cfg.num_hidden_layers):
        x = _transformer_block(x, mask, index, cfg, init, dropout_rate, dtype)
    outputs = _final_layers(x, embedding, cfg, init, with_pool, with_nsp, with_mlm, dtype) or [x]
    bert = TransformerModel(inputs, outputs[0] if len(outputs) == 1 else outputs, name=name or "bert",
                            bert_config=cfg.replace(hidden_dropout_prob=dropout_rate))
    bert.jit_compile = xla_pays(bert)  # predict with XLA on a GPU for BERT-small and up (see xla_pays)
    if checkpoint_path is not None:
        load_checkpoint(bert, checkpoint_path, keep_tokens=keep_tokens, allow_missing=allow_missing, verbose=verbose)
    return bert
