"""Encoder: BERT's post-norm Transformer encoder with one family's changes, the one place that wires its layers.

The graph reads top to bottom in three steps, as in bert4keras: `Encoder.embed`, one `Encoder.block` per layer
index, then `Encoder.final` (the checkpoint's pre-training layers, `kerasbert.modeling.final_layers`). The builder
(`kerasbert.modeling.models.build_transformer_model`) wires a new graph with it, the task heads
(`kerasbert.modeling.heads`) run its last block again for ``[CLS]`` alone, and the cached decoder
(`kerasbert.generation.cache`) runs its blocks one new position at a time over kept keys and values: each through
the same `Encoder` over the model's own layers (`Encoder.of`). A family (`kerasbert.modeling.families`) changes
single steps: ALBERT shares one block, NEZHA and RoFormer read positions in attention, RoFormer-V2 drops biases
and norm weights and normalizes its embeddings last, ELECTRA ends in its discriminator; Hugging Face's RoBERTa and
XLM-R pad with their ``<pad>`` id and read their positions from the row after it, DistilBERT has no segments and
no pooler (`kerasbert.modeling.families`).

Example:
>>> from kerasbert import build_transformer_model
>>> encoder = Encoder.of(build_transformer_model("tiny", model="albert", embedding_size=16, verbose=False))
>>> len(encoder.blocks), encoder.blocks[1][0].layer.name, encoder.blocks[1][1].norm.name
(2, 'Transformer-MultiHeadSelfAttention', 'Transformer-FeedForward-Norm')
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import keras

from kerasbert import layer_names as names
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.families import Family, pad_id, position_offset
from kerasbert.modeling.final_layers import FLAGS, final_outputs
from kerasbert.modeling.layers import (
    Add,
    Dropout,
    LayerNorm,
    PositionEmbedding,
    ScaleFreeNorm,
    SegmentEmbedding,
    TakeToken,
    TokenEmbedding,
)
from kerasbert.modeling.masks import attention_mask
from kerasbert.modeling.positions import RelativePositions, RotaryPositions, rotate
from kerasbert.modeling.wiring import Wiring


def _norm(name: str, cfg: BertConfig, family: Family, dtype, width_symbol: str = "H"):
    """The family's norm: LayerNorm (γ, β; 2·H, or 2·E over an E-wide embedding), or RoFormer-V2's
    `ScaleFreeNorm`."""
    if family.norm == "scale_free":
        return ScaleFreeNorm(epsilon=cfg.layer_norm_eps, dtype=dtype, name=name)
    return LayerNorm(epsilon=cfg.layer_norm_eps, width_symbol=width_symbol, dtype=dtype, name=name)


def _embedding_layers(cfg: BertConfig, family: Family, init, dtype, hierarchical: float | None) -> list:
    """Token, segment (and absolute position) embeddings, their norm and dropout, the E -> H mapping where E
    differs, and the positions attention reads (NEZHA's, RoFormer's)."""
    width = cfg.embedding_width  # E
    symbol = "H" if width == cfg.hidden_size else "E"  # the width in the layers' formulas: V·H, or V·E
    layers = [TokenEmbedding(cfg.vocab_size, width, embeddings_initializer=init, width_symbol=symbol, dtype=dtype,
                             pad_id=pad_id(family, cfg), name=names.EMBEDDING_TOKEN)]
    if cfg.type_vocab_size:
        layers += [SegmentEmbedding(cfg.type_vocab_size, width, embeddings_initializer=init, width_symbol=symbol,
                                    dtype=dtype, name=names.EMBEDDING_SEGMENT),
                   Add(dtype=dtype, name=names.EMBEDDING_TOKEN_SEGMENT)]
    if family.positions == "absolute":
        layers.append(PositionEmbedding(cfg.max_position_embeddings, width, embeddings_initializer=init, dtype=dtype,
                                        hierarchical=hierarchical, width_symbol=symbol,
                                        offset=position_offset(family, cfg), name=names.EMBEDDING_POSITION))
    layers += [_norm(names.EMBEDDING_NORM, cfg, family, dtype, symbol),
               Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=names.EMBEDDING_DROPOUT)]
    if width != cfg.hidden_size:
        layers.append(keras.layers.Dense(cfg.hidden_size, use_bias=family.bias, kernel_initializer=init, dtype=dtype,
                                         name=names.EMBEDDING_MAPPING))
    if family.positions == "relative":
        layers.append(RelativePositions(cfg.head_size, cfg.max_relative_position, dtype=dtype,
                                        name=names.RELATIVE_POSITION))
    if family.positions == "rotary":
        layers.append(RotaryPositions(cfg.head_size, dtype=dtype, name=names.ROTARY_POSITION))
    return layers


def _block_layers(index: int | None, cfg: BertConfig, family: Family, init, dtype) -> list:
    """The layers of block ``index`` (None: ALBERT's shared block): attention and feed-forward, each with its
    residual's dropout, add and norm."""
    attention = MultiHeadSelfAttention(cfg.num_attention_heads, dropout=cfg.attention_probs_dropout_prob,
                                       kernel_initializer=init, positions=None if family.positions == "absolute"
                                       else family.positions, use_bias=family.bias, dtype=dtype,
                                       name=names.block(index, names.ATTENTION))
    feed_forward = FeedForward(cfg.intermediate_size, activation=cfg.activation, kernel_initializer=init,
                               use_bias=family.bias, dtype=dtype, name=names.block(index, names.FEED_FORWARD))
    return [layer for sublayer in (attention, feed_forward) for layer in (
        sublayer, Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=names.residual(sublayer.name, "Dropout")),
        keras.layers.Add(dtype=dtype, name=names.residual(sublayer.name, "Add")),
        _norm(names.residual(sublayer.name, "Norm"), cfg, family, dtype))]


@dataclasses.dataclass(frozen=True)
class Residual:
    """A sublayer with its post-norm residual, ``Norm(x + Dropout(f(x)))`` (Devlin et al. 2019, §3)."""

    layer: keras.layers.Layer
    dropout: keras.layers.Layer
    add: keras.layers.Layer
    norm: keras.layers.Layer

    @classmethod
    def of(cls, layers: dict, name: str) -> Residual:
        """The sublayer ``name`` among ``layers`` with its residual layers."""
        return cls(*(layers[n] for n in (name, *(names.residual(name, s) for s in ("Dropout", "Add", "Norm")))))

    def finish(self, x, y):
        """``Norm(x + Dropout(y))``: the residual around the sublayer's output ``y``."""
        return self.norm(self.add([x, self.dropout(y)]))


# what a decoder hands a block to keep keys and values: (new k, new v) -> the k, v to attend over
CacheWrite = Callable[[object, object], tuple[object, object]]


@dataclasses.dataclass
class Encoder(Wiring):
    """BERT's post-norm encoder of one family over its layers by name: new ones (`create`) or a built model's
    (`of`).

    Args:
        config: BertConfig. the sizes.
        family: Family. what the family changes.
        layers: dict. every layer by name: the embeddings, the positions, the blocks (and, for a built model,
            the rest of its graph).
    """

    @classmethod
    def create(cls, config: BertConfig, family: Family, *, dtype=None, hierarchical: float | None = None) -> Encoder:
        """New layers for ``config`` and ``family``, not yet wired: embeddings, positions and L blocks (one for
        ALBERT), every kernel from a truncated normal of the config's ``initializer_range``."""
        init = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        layers = _embedding_layers(config, family, init, dtype, hierarchical)
        for index in [None] if family.shared_block else range(config.num_hidden_layers):
            layers += _block_layers(index, config, family, init, dtype)
        return cls(config, family, {layer.name: layer for layer in layers})


    # ------------------------------------------------------------------------------------ what it holds
    @functools.cached_property
    def blocks(self) -> list[tuple[Residual, Residual]]:
        """The attention and feed-forward `Residual` of each of the L blocks, in order (ALBERT's one block L
        times)."""
        index = (lambda i: None) if self.family.shared_block else (lambda i: i)
        return [tuple(Residual.of(self.layers, names.block(index(i), part)) for part in (names.ATTENTION,
                                                                                         names.FEED_FORWARD))
                for i in range(self.config.num_hidden_layers)]

    @property
    def segments(self) -> bool:
        """Whether `embed` reads segment ids (``Input-Segment``: a config with segments)."""
        return bool(self.config.type_vocab_size)

    @property
    def initializer(self):
        """The kernel initializer its layers share (a head's new layers start from it too)."""
        return self.blocks[0][1].layer.kernel_initializer


    @property
    def max_length(self) -> int | None:
        """The most positions it embeds (P, P² hierarchical); None for NEZHA's and RoFormer's positions."""
        position = self.layers.get(names.EMBEDDING_POSITION)
        return None if position is None else position.max_length

    # ------------------------------------------------------------------------------------ the graph
    def inputs(self, sequence_length: int | None) -> list:
        """``Input-Token``, and ``Input-Segment`` where the config has segments: ``[B, S]`` int32 each."""
        inputs = [keras.Input((sequence_length,), dtype="int32", name=names.TOKEN_INPUT)]
        if self.config.type_vocab_size:
            inputs.append(keras.Input((sequence_length,), dtype="int32", name=names.SEGMENT_INPUT))
        return inputs

    def outputs(self, inputs: list, application: str, flags: dict) -> list:
        """The encoder on `inputs` under ``application``'s mask (`kerasbert.modeling.masks.attention_mask`), then
        the final layers ``flags`` asks for; the sequence output where it asks for none."""
        segment_ids = inputs[1] if len(inputs) > 1 else None
        mask = attention_mask(application, inputs[0], segment_ids, pad_id(self.family, self.config))  # every attention
        x = self.encode(inputs[0], segment_ids, mask)
        return self.final(x, flags) or [x]

    def encode(self, token_ids, segment_ids, mask):
        """Embeddings, then every block: ``[B, S]`` ids (``segment_ids`` None without segments) and the
        attention mask ``[B, S]`` or ``[B, S, S]`` to the sequence output ``[B, S, H]``."""
        x = self.embed(token_ids, segment_ids)
        positions = self.positions(x)
        for index in range(self.config.num_hidden_layers):
            x = self.block(index, x, mask, positions)
        return x

    def embed(self, token_ids, segment_ids, positions=None):
        """Token + segment (+ absolute position) embeddings, normalized, mapped from E to H: ``[B, S] -> [B, S, H]``.

        Args:
            token_ids: ``[B, S]`` token ids.
            segment_ids: ``[B, S]`` segment ids; None for a model without segments.
            positions: ``[B, S]`` each token's position in a position table; None: 0..S-1.
        """
        layers = self.layers
        x = layers[names.EMBEDDING_TOKEN](token_ids)
        if segment_ids is not None:  # keeps the token embedding's Keras mask
            x = layers[names.EMBEDDING_TOKEN_SEGMENT]([x, layers[names.EMBEDDING_SEGMENT](segment_ids)])
        if self.family.positions == "absolute":
            position = layers[names.EMBEDDING_POSITION]
            x = position(x) if positions is None else position(x, positions=positions)
        norm, dropout = layers[names.EMBEDDING_NORM], layers[names.EMBEDDING_DROPOUT]
        x = dropout(norm(x)) if self.family.norm == "layer" else norm(dropout(x))  # RoFormer-V2 normalizes last
        return layers[names.EMBEDDING_MAPPING](x) if names.EMBEDDING_MAPPING in layers else x

    def positions(self, x):
        """The positions every attention reads over ``x`` ``[B, S, H]``: NEZHA's relative ``[S, S, d]``, RoFormer's
        rotary ``[1, S, d]``; None for absolute positions (added in `embed`)."""
        if self.family.positions == "relative":
            return self.layers[names.RELATIVE_POSITION](x)
        if self.family.positions == "rotary":
            return self.layers[names.ROTARY_POSITION](x)
        return None

    def positions_at(self, queries, keys):
        """The positions of queries at their own rows' positions ``[N, Q]`` over keys at ``[N, K]``, for a
        decoder: NEZHA's ``[N, Q, K, d]``, RoFormer's ``[N, 1, Q, d]``; None for absolute positions."""
        if self.family.positions == "relative":
            return self.layers[names.RELATIVE_POSITION].between(queries, keys)
        if self.family.positions == "rotary":
            return self.layers[names.ROTARY_POSITION].at(queries)[:, None]
        return None

    def block(self, index: int, x, mask, positions=None, *, cache: CacheWrite | None = None,
              first: keras.layers.Layer | None = None):
        """Block ``index``: attention -> Dropout -> Add -> Norm -> FeedForward -> Dropout -> Add -> Norm.

        Args:
            index: int. the layer, 0 <= index < L.
            x: ``[B, S, H]`` the block's input.
            mask: the attention mask: ``[B, S]`` or ``[B, S, S]`` in a graph; with ``cache``, bool ``[B, 1, Q, K]``,
                False where a query may not see a key.
            positions: what `positions` (in a graph) or `positions_at` (with ``cache``) gave.
            cache: where a decoder keeps keys and values: called with the block's new keys and values
                ``[B, A, Q, d]``, it gives those to attend over.
            first: a layer that takes ``[CLS]`` out of ``x``: the block then computes ``[B, H]`` for ``[CLS]``
                alone, its keys and values still from every position.
        """
        attention, feed_forward = self.blocks[index]
        if cache is not None:
            y, x_query = self._cached_attention(attention.layer, x, mask, positions, cache), x
        else:
            inputs = [x, mask] if positions is None else [x, mask, positions]
            y = attention.layer(inputs, first_token=True) if first is not None else attention.layer(inputs)
            x_query = first(x) if first is not None else x
        x = attention.finish(x_query, y)
        return feed_forward.finish(x, feed_forward.layer(x))

    def _cached_attention(self, layer: MultiHeadSelfAttention, x, seen, positions, cache: CacheWrite):
        """The attention of ``x``'s positions over the keys and values ``cache`` gives: ``[B, Q, H]``."""
        q, k, v = layer.qkv(x)  # each (batch, heads, Q, d)
        if self.family.positions == "rotary":
            q, k = rotate(q, positions), rotate(k, positions)
        k, v = cache(k, v)
        return layer.merge(layer.attend(q, k, v, seen, positions if self.family.positions == "relative" else None))

    def final(self, x, flags: dict) -> list:
        """The final layers the ``with_*`` flags ask for (`kerasbert.modeling.final_layers`), on ``x``."""
        return final_outputs(x, self.layers[names.EMBEDDING_TOKEN], self.config, self.family.heads, self.initializer,
                             flags, self.dtype, self.layers.get(names.MLM_NORM))  # a conditional MLM-Norm, if made

    def logits(self, x):
        """The masked LM's logits at ``x`` ``[N, H]``: ``[N, V]`` (its final activation not run)."""
        layers, embedding = self.layers, self.layers[names.EMBEDDING_TOKEN]
        if self.family.heads == "roformer_v2":
            x = layers[names.OUTPUT_MAPPING](x) if names.OUTPUT_MAPPING in layers else x
            return embedding(layers[names.OUTPUT_MLM_DROPOUT](x), reverse=True)
        return layers[names.MLM_BIAS](embedding(layers[names.MLM_NORM](layers[names.MLM_DENSE](x)), reverse=True))

    @property
    def logits_activation(self) -> keras.layers.Layer:
        """The layer that turns `logits` into the model's output (``MLM-Activation``, RoFormer-V2's
        ``Output-MLM-Activation``)."""
        name = names.OUTPUT_MLM_ACTIVATION if self.family.heads == "roformer_v2" else names.MLM_ACTIVATION
        if name not in self.layers:
            raise fail(ModelError, name, "a model built with_mlm (or application='lm' / 'unilm')", "no such layer")
        return self.layers[name]

    # ------------------------------------------------------------------------------------ a built graph
    def block_output(self, index: int):
        """Block ``index``'s ``[B, S, H]`` output in the built graph (ALBERT's shared block: its first call's)."""
        return self.blocks[index][1].norm.output

    def first_token_output(self, sequence, name: str):
        """``sequence[:, 0]``, ``[B, H]``, with the last block of the built graph run for ``[CLS]`` alone.

        A head that reads only ``x[:, 0]`` never reads the last block's other positions, so they need no query,
        attention output, residual, norm or feed-forward there: `TakeToken` (``name``) takes position 0 of the
        block's input and the block's own layers run again on it (`block` with ``first``). Same weights, names
        and checkpoint map; equal to ``sequence[:, 0]`` within float32 rounding. ALBERT's shared block is one
        set of layers called L times, and Keras names no call but the first: the input of its last call is not at
        hand, so there it is ``x[:, 0]`` of ``sequence`` (bert4keras's graph, the same numbers).
        """
        first = TakeToken(0, dtype=self.dtype, name=name)
        if self.family.shared_block:
            return first(sequence)
        last = self.config.num_hidden_layers - 1
        inputs = list(self.blocks[last][0].layer.input)  # [x, mask], and the positions of NEZHA and RoFormer
        return self.block(last, inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None, first=first)

    def sequence_output(self, outputs: list):
        """The last block's output among a built model's ``outputs``, None where it is not one of them (ALBERT's
        shared block: ``outputs``' one ``[B, S, H]`` output, where the graph has no layer past the encoder)."""
        if self.family.shared_block:
            past = [name for name in self.layers if names.part_of(name)[0] not in ("inputs", "embeddings", "encoder")]
            return outputs[0] if len(outputs) == 1 and len(outputs[0].shape) == 3 and not past else None
        sequence = self.block_output(self.config.num_hidden_layers - 1)
        return sequence if any(output is sequence for output in outputs) else None


def checked_flags(family: Family, **flags) -> dict:
    """The ``with_*`` flags, refused where the family has no such final layers (bert4keras's ELECTRA takes neither
    ``with_pool`` nor ``with_mlm``)."""
    allowed = FLAGS[family.heads]
    wrong = next((flag for flag, value in flags.items() if value and flag not in allowed), None)
    if wrong is not None:
        expected = f"one of {', '.join(allowed)}" if allowed else "no with_* flag"
        raise fail(ModelError, wrong, f"{expected} for model={family.name!r}", f"{wrong}="
                   f"{flags[wrong]!r}", f"{family.name} has no such pre-training layers; add a task head instead")
    return flags

