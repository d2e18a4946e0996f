"""DeBERTa-v3 (He et al. 2021): BERT's post-norm encoder with disentangled attention, the one place that wires it.

Its embeddings are the word embeddings (and segment embeddings where ``type_vocab_size`` > 0) mapped from E to H
where E differs (``Embedding-Mapping``, no bias), then ``Embedding-Norm`` and ``Embedding-Dropout``: no position
table. Its positions are one table of relative embeddings, ``Embedding-Relative-Buckets`` ``[2N, H]`` and its norm,
which every block's `kerasbert.modeling.deberta_layers.DisentangledSelfAttention` reads through its own query and key
projections. The blocks are BERT's otherwise (`kerasbert.modeling.encoder.Encoder`, whose steps `DeBERTa` keeps:
the heads run its last block for ``[CLS]`` alone the same way), and so is the masked LM (``MLM-*``, transformers'
``cls.predictions``). It is an encoder only: no ``application="lm"`` or ``"unilm"``.

A Hugging Face ``config.json`` (``model_type`` ``"deberta-v2"``) says which attention it is
(`kerasbert.modeling.deberta_config.DebertaOptions`); kerasbert builds DeBERTa-v3's (microsoft/deberta-v3-*,
mdeberta-v3-base) and refuses the others by key.

Example:
>>> from kerasbert import build_transformer_model
>>> deberta = DeBERTa.of(build_transformer_model("tiny", model="deberta_v3", verbose=False))
>>> deberta.options, deberta.blocks[0][0].layer.name
(DebertaOptions(position_buckets=32, max_relative_positions=64), 'Transformer-0-MultiHeadSelfAttention')
"""

from __future__ import annotations

import dataclasses
import functools

import keras

from kerasbert import layer_names as names
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.blocks import FeedForward
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.deberta_config import DebertaOptions
from kerasbert.modeling.deberta_layers import DisentangledSelfAttention, RelativeEmbedding
from kerasbert.modeling.encoder import Encoder
from kerasbert.modeling.families import Family
from kerasbert.modeling.layers import Add, Dropout, LayerNorm, SegmentEmbedding, TokenEmbedding


def _embedding_layers(cfg: BertConfig, options: DebertaOptions, init, dtype) -> list:
    """Word (and segment) embeddings, the E -> H mapping without bias where E differs, the norm and dropout, and the
    relative table with its norm."""
    width = cfg.embedding_width
    symbol = "H" if width == cfg.hidden_size else "E"
    layers = [TokenEmbedding(cfg.vocab_size, width, embeddings_initializer=init, width_symbol=symbol,
                             pad_id=cfg.pad_id, dtype=dtype, name=names.EMBEDDING_TOKEN)]
    if cfg.type_vocab_size:
        layers += [SegmentEmbedding(cfg.type_vocab_size, width, embeddings_initializer=init, width_symbol=symbol,
                                    dtype=dtype, name=names.EMBEDDING_SEGMENT),
                   Add(dtype=dtype, name=names.EMBEDDING_TOKEN_SEGMENT)]
    if width != cfg.hidden_size:
        layers.append(keras.layers.Dense(cfg.hidden_size, use_bias=False, kernel_initializer=init, dtype=dtype,
                                         name=names.EMBEDDING_MAPPING))
    return layers + [
        LayerNorm(epsilon=cfg.layer_norm_eps, dtype=dtype, name=names.EMBEDDING_NORM),
        Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=names.EMBEDDING_DROPOUT),
        RelativeEmbedding(options.rows, cfg.hidden_size, embeddings_initializer=init, dtype=dtype,
                          name=names.RELATIVE_BUCKETS),
        LayerNorm(epsilon=cfg.layer_norm_eps, dtype=dtype, name=names.RELATIVE_BUCKETS_NORM)]


def _block_layers(index: int, cfg: BertConfig, options: DebertaOptions, init, dtype) -> list:
    """Block ``index``: disentangled attention and feed-forward, each with its post-norm residual's dropout, add
    and norm (`kerasbert.modeling.encoder.Residual`)."""
    attention = DisentangledSelfAttention(
        cfg.num_attention_heads, options.position_buckets, options.max_relative_positions,
        position_dropout=cfg.hidden_dropout_prob, dropout=cfg.attention_probs_dropout_prob, kernel_initializer=init,
        dtype=dtype, name=names.block(index, names.ATTENTION))
    feed_forward = FeedForward(cfg.intermediate_size, activation=cfg.activation, kernel_initializer=init, dtype=dtype,
                               name=names.block(index, names.FEED_FORWARD))
    return [layer for sublayer in (attention, feed_forward) for layer in (
        sublayer, Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=names.residual(sublayer.name, "Dropout")),
        keras.layers.Add(dtype=dtype, name=names.residual(sublayer.name, "Add")),
        LayerNorm(epsilon=cfg.layer_norm_eps, dtype=dtype, name=names.residual(sublayer.name, "Norm")))]


@dataclasses.dataclass
class DeBERTa(Encoder):
    """DeBERTa-v3's encoder over its layers by name: new ones (`create`) or a built model's (`of`). Its blocks,
    heads and final layers are `Encoder`'s; its embeddings and positions are its own.

    Args:
        config: BertConfig. the sizes, and the relative positions (`DebertaOptions`).
        family: Family. ``deberta_v3``.
        layers: dict. every layer by name.
    """

    @classmethod
    def create(cls, config: BertConfig, family: Family, *, dtype=None, hierarchical: float | None = None) -> DeBERTa:
        """New layers for ``config``, not yet wired, every kernel and table from a truncated normal of the config's
        ``initializer_range`` (``hierarchical`` has no position table to act on)."""
        options = DebertaOptions.of(config)
        init = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        layers = _embedding_layers(config, options, init, dtype)
        for index in range(config.num_hidden_layers):
            layers += _block_layers(index, config, options, init, dtype)
        return cls(config, family, {layer.name: layer for layer in layers})

    @functools.cached_property
    def options(self) -> DebertaOptions:
        """Its relative positions, from its config."""
        return DebertaOptions.of(self.config)

    def embed(self, token_ids, segment_ids, positions=None):
        """Word (+ segment) embeddings, mapped from E to H, normalized: ``[B, S] -> [B, S, H]`` (``positions``: none
        are embedded; a decoder's are refused)."""
        if positions is not None:
            raise self._encoder_only("positions")
        layers = self.layers
        x = layers[names.EMBEDDING_TOKEN](token_ids)
        if segment_ids is not None and self.segments:
            x = layers[names.EMBEDDING_TOKEN_SEGMENT]([x, layers[names.EMBEDDING_SEGMENT](segment_ids)])
        if names.EMBEDDING_MAPPING in layers:
            x = layers[names.EMBEDDING_MAPPING](x)
        return layers[names.EMBEDDING_DROPOUT](layers[names.EMBEDDING_NORM](x))

    def positions(self, x):
        """The normalized relative table every attention reads, ``[2N, H]`` (``x`` places it in the graph)."""
        return self.layers[names.RELATIVE_BUCKETS_NORM](self.layers[names.RELATIVE_BUCKETS](x))

    def positions_at(self, queries, keys):
        """Refused: DeBERTa is an encoder, with no decoder to run over a cache."""
        raise self._encoder_only("a decoder's positions")

    def _cached_attention(self, layer, x, seen, positions, cache):
        raise self._encoder_only("a decoder's cache")

    def _encoder_only(self, what: str) -> ModelError:
        return fail(ModelError, f"{self.family.name} {what}", "an encoder's graph", what,
                    "DeBERTa is an encoder: fine-tune it with a head, generate with a GPT or T5 family")
