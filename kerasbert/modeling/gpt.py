"""GPT: bert4keras's GPT language models (``gpt``, ``gpt2``, ``gpt2_ml``), the one place that wires their layers.

Each is a causal language model whose output is the tied token embedding (``x·Eᵀ``) and ``LM-Activation``
(softmax). The three differ in their embeddings and in where each block normalizes (`LAYOUTS`):

    gpt       token + segment + position embeddings, Embedding-Dropout; BERT's post-norm blocks (ε 1e-12)
              ``Norm(x + Dropout(f(x)))`` (Radford et al. 2018)
    gpt2      token + position embeddings; pre-norm blocks ``x + Dropout(f(Norm(x)))`` (ε 1e-5), then
              ``Output-Norm`` and ``Output-Dropout`` (Radford et al. 2019, §2.3)
    gpt2_ml   token + position embeddings, ``Embedding-Norm``; attention ``x + Dropout(Attention(x))``, then
              ``FeedForward-Norm-1(y + Dropout(FeedForward(FeedForward-Norm-0(y))))`` (ε 1e-5)

The builder (`kerasbert.modeling.models.build_transformer_model`) wires a new graph with `GPT`, and the cached
decoder (`kerasbert.generation.cache`) runs its blocks one new position at a time over kept keys and values,
through the same `GPT.block` over the model's own layers (`GPT.of`).

Example:
>>> from kerasbert import build_transformer_model
>>> gpt2 = GPT.of(build_transformer_model("tiny", model="gpt2", verbose=False))
>>> [layer.name for layer in gpt2.blocks[0][0].layers()]
['Transformer-0-MultiHeadSelfAttention-Norm', 'Transformer-0-MultiHeadSelfAttention', \
'Transformer-0-MultiHeadSelfAttention-Dropout', 'Transformer-0-MultiHeadSelfAttention-Add']
"""

from __future__ import annotations

import dataclasses
import functools

import keras

from kerasbert import layer_names as names
from kerasbert.errors import ModelError, fail
from kerasbert.modeling.blocks import FeedForward, MultiHeadSelfAttention
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.encoder import CacheWrite
from kerasbert.modeling.families import Family
from kerasbert.modeling.layers import Add, Dropout, LayerNorm, PositionEmbedding, SegmentEmbedding, TokenEmbedding
from kerasbert.modeling.masks import AttentionMask
from kerasbert.modeling.wiring import Wiring


@dataclasses.dataclass(frozen=True)
class Layout:
    """How one GPT family wires its layers.

    Args:
        segments: bool. an ``Input-Segment`` and ``Embedding-Segment`` (where the config has segments).
        after_positions: tuple of str. the layers after the position embedding, in order.
        norms: dict. sublayer part -> (the suffix of its norm before it, of its norm after its add), None: none.
        final: tuple of str. the layers between the last block and the tied output.
        epsilon: float. ε of every norm, as bert4keras fixes it.
    """

    segments: bool
    after_positions: tuple[str, ...]
    norms: dict[str, tuple[str | None, str | None]]
    final: tuple[str, ...]
    epsilon: float


LAYOUTS = {
    "gpt": Layout(True, (names.EMBEDDING_DROPOUT,),
                  {names.ATTENTION: (None, "Norm"), names.FEED_FORWARD: (None, "Norm")}, (), 1e-12),
    "gpt2": Layout(False, (), {names.ATTENTION: ("Norm", None), names.FEED_FORWARD: ("Norm", None)},
                   (names.OUTPUT_NORM, names.OUTPUT_DROPOUT), 1e-5),
    "gpt2_ml": Layout(False, (names.EMBEDDING_NORM,), {names.ATTENTION: (None, None),
                                                        names.FEED_FORWARD: ("Norm-0", "Norm-1")}, (), 1e-5),
}


@dataclasses.dataclass(frozen=True)
class Sublayer:
    """A sublayer with its residual: ``After(x + Dropout(f(Before(x))))``, each norm where the family has it."""

    before: keras.layers.Layer | None
    layer: keras.layers.Layer
    dropout: keras.layers.Layer
    add: keras.layers.Layer
    after: keras.layers.Layer | None

    @classmethod
    def of(cls, layers: dict, name: str, norms: tuple[str | None, str | None]) -> Sublayer:
        """The sublayer ``name`` among ``layers``, with its residual's dropout, add and the ``norms``."""
        before, after = (None if suffix is None else layers[names.residual(name, suffix)] for suffix in norms)
        return cls(before, layers[name], layers[names.residual(name, "Dropout")], layers[names.residual(name, "Add")],
                   after)

    def run(self, x, f):
        """The residual around ``f`` (the sublayer's call on its normalized input) at ``x``."""
        y = f(x if self.before is None else self.before(x))
        x = self.add([x, self.dropout(y)])
        return x if self.after is None else self.after(x)

    def layers(self) -> list[keras.layers.Layer]:
        """Its layers in graph order."""
        return [layer for layer in (self.before, self.layer, self.dropout, self.add, self.after) if layer is not None]


def _norm(name: str, cfg: BertConfig, layout: Layout, dtype) -> LayerNorm:
    """A LayerNorm of the family's ε, or of the config's where it is a Hugging Face GPT-2 config."""
    return LayerNorm(epsilon=cfg.layer_norm_eps if cfg.hugging_face else layout.epsilon, dtype=dtype, name=name)


def _embedding_layers(cfg: BertConfig, layout: Layout, init, dtype, hierarchical: float | None) -> list:
    """Token (and segment) and position embeddings, what the family runs after them, the causal mask and the
    tied output's activation."""
    width = cfg.hidden_size
    layers = [TokenEmbedding(cfg.vocab_size, width, embeddings_initializer=init, dtype=dtype,
                             name=names.EMBEDDING_TOKEN),
              PositionEmbedding(cfg.max_position_embeddings, width, embeddings_initializer=init, dtype=dtype,
                                hierarchical=hierarchical, name=names.EMBEDDING_POSITION),
              AttentionMask("lm", dtype=dtype, name=names.LM_MASK),
              keras.layers.Activation("softmax", dtype=dtype, name=names.LM_ACTIVATION)]
    if layout.segments and cfg.type_vocab_size:
        layers += [SegmentEmbedding(cfg.type_vocab_size, width, embeddings_initializer=init, dtype=dtype,
                                    name=names.EMBEDDING_SEGMENT),
                   Add(dtype=dtype, name=names.EMBEDDING_TOKEN_SEGMENT)]
    for name in (*layout.after_positions, *layout.final):
        norm = name in (names.EMBEDDING_NORM, names.OUTPUT_NORM)
        layers.append(_norm(name, cfg, layout, dtype) if norm
                      else Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=name))
    return layers


def _block_layers(index: int, cfg: BertConfig, layout: Layout, init, dtype) -> list:
    """The layers of block ``index``: attention and feed-forward, each with its residual's norms, dropout and add."""
    attention = MultiHeadSelfAttention(cfg.num_attention_heads, dropout=cfg.attention_probs_dropout_prob,
                                       kernel_initializer=init, dtype=dtype, name=names.block(index, names.ATTENTION))
    feed_forward = FeedForward(cfg.intermediate_size, activation=cfg.activation, kernel_initializer=init, dtype=dtype,
                               name=names.block(index, names.FEED_FORWARD))
    layers = []
    for part, sublayer in ((names.ATTENTION, attention), (names.FEED_FORWARD, feed_forward)):
        norms = [_norm(names.residual(sublayer.name, suffix), cfg, layout, dtype) for suffix in layout.norms[part]
                 if suffix]
        layers += [sublayer, *norms, Dropout(cfg.hidden_dropout_prob, dtype=dtype,
                                             name=names.residual(sublayer.name, "Dropout")),
                   keras.layers.Add(dtype=dtype, name=names.residual(sublayer.name, "Add"))]
    return layers


@dataclasses.dataclass
class GPT(Wiring):
    """A GPT family's causal language model over its layers by name: new ones (`create`) or a built model's (`of`).

    Args:
        config: BertConfig. the sizes.
        family: Family. ``gpt``, ``gpt2`` or ``gpt2_ml`` (its `Layout`).
        layers: dict. every layer by name.
    """

    @classmethod
    def create(cls, config: BertConfig, family: Family, *, dtype=None, hierarchical: float | None = None) -> GPT:
        """New layers for ``config`` and ``family``, not yet wired, every kernel from a truncated normal of the
        config's ``initializer_range``."""
        if config.embedding_width != config.hidden_size:  # x·Eᵀ reads the last block's H-wide output
            raise fail(ModelError, "embedding_size", f"the hidden size {config.hidden_size} for model="
                       f"{family.name!r}", str(config.embedding_size),
                       f"its output is tied to {names.EMBEDDING_TOKEN}; leave embedding_size out")
        init = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        layout = LAYOUTS[family.name]
        layers = _embedding_layers(config, layout, init, dtype, hierarchical)
        for index in range(config.num_hidden_layers):
            layers += _block_layers(index, config, layout, init, dtype)
        return cls(config, family, {layer.name: layer for layer in layers})


    # ------------------------------------------------------------------------------------ what it holds
    @property
    def layout(self) -> Layout:
        return LAYOUTS[self.family.name]

    @functools.cached_property
    def blocks(self) -> list[tuple[Sublayer, Sublayer]]:
        """The attention and feed-forward `Sublayer` of each of the L blocks, in order."""
        return [tuple(Sublayer.of(self.layers, names.block(i, part), self.layout.norms[part])
                      for part in (names.ATTENTION, names.FEED_FORWARD)) for i in range(self.config.num_hidden_layers)]

    @property
    def segments(self) -> bool:
        """Whether `embed` reads segment ids (GPT's ``Input-Segment``; GPT-2 and GPT2-ML take token ids alone)."""
        return self.layout.segments and bool(self.config.type_vocab_size)


    @property
    def max_length(self) -> int:
        """The most positions it embeds (P, P² hierarchical)."""
        return self.layers[names.EMBEDDING_POSITION].max_length

    # ------------------------------------------------------------------------------------ the graph
    def inputs(self, sequence_length: int | None) -> list:
        """``Input-Token``, and ``Input-Segment`` for GPT where the config has segments: ``[B, S]`` int32 each."""
        inputs = [keras.Input((sequence_length,), dtype="int32", name=names.TOKEN_INPUT)]
        if self.segments:
            inputs.append(keras.Input((sequence_length,), dtype="int32", name=names.SEGMENT_INPUT))
        return inputs

    def outputs(self, inputs: list, application: str, flags: dict) -> list:
        """The causal language model on ``inputs``: ``[B, S, V]`` next-token probabilities. ``application`` is
        ``"lm"`` (bert4keras's GPT is always causal) and ``flags`` none (it has no other final layers)."""
        segment_ids = inputs[1] if len(inputs) > 1 else None
        mask = self.layers[names.LM_MASK]([inputs[0], inputs[0]])  # [B, S, S]: causal, padding keys hidden
        return self.final(self.encode(inputs[0], segment_ids, mask), flags)

    def encode(self, token_ids, segment_ids, mask):
        """Embeddings, then every block: ``[B, S]`` ids and the ``[B, S, S]`` causal mask to ``[B, S, H]``."""
        x = self.embed(token_ids, segment_ids)
        for index in range(self.config.num_hidden_layers):
            x = self.block(index, x, mask)
        return x

    def embed(self, token_ids, segment_ids, positions=None):
        """Token (+ segment) + position embeddings, then the family's dropout or norm: ``[B, S] -> [B, S, H]``
        (``positions``: ``[B, S]`` each token's position; None: 0..S-1)."""
        layers = self.layers
        x = layers[names.EMBEDDING_TOKEN](token_ids)
        if self.segments and segment_ids is not None:
            x = layers[names.EMBEDDING_TOKEN_SEGMENT]([x, layers[names.EMBEDDING_SEGMENT](segment_ids)])
        position = layers[names.EMBEDDING_POSITION]
        x = position(x) if positions is None else position(x, positions=positions)
        for name in self.layout.after_positions:
            x = layers[name](x)
        return x

    def positions(self, x):
        """None: the position embeddings are added in `embed`."""
        return None

    def positions_at(self, queries, keys):
        """None: the position embeddings are added in `embed`."""
        return None

    def block(self, index: int, x, mask, positions=None, *, cache: CacheWrite | None = None, first=None):
        """Block ``index``: attention then feed-forward, each in its family's residual (`Sublayer.run`).

        Args:
            index: int. the layer, 0 <= index < L.
            x: ``[B, S, H]`` the block's input.
            mask: ``[B, S, S]`` in a graph; with ``cache``, bool ``[B, 1, Q, K]``, False where a query may not see
                a key.
            positions: None (absolute positions are embedded).
            cache: where a decoder keeps keys and values: called with the block's new keys and values
                ``[B, A, Q, d]``, it gives those to attend over.
            first: not taken: a language model reads every position.
        """
        if first is not None:
            raise fail(ModelError, f"{self.family.name} block", "every position (a language model)",
                       "a first-token call", "a GPT has no [CLS] head")
        attention, feed_forward = self.blocks[index]
        if cache is None:
            x = attention.run(x, lambda y: attention.layer([y, mask]))
        else:
            x = attention.run(x, lambda y: self._cached_attention(attention.layer, y, mask, cache))
        return feed_forward.run(x, feed_forward.layer)

    @staticmethod
    def _cached_attention(layer: MultiHeadSelfAttention, x, seen, cache: CacheWrite):
        """The attention of ``x``'s positions over the keys and values ``cache`` gives: ``[B, Q, H]``."""
        q, k, v = layer.qkv(x)  # each (batch, heads, Q, d)
        k, v = cache(k, v)
        return layer.merge(layer.attend(q, k, v, seen))

    def final(self, x, flags: dict) -> list:
        """The language model's output on the last block's ``x``: ``LM-Activation(logits(x))``, ``[B, S, V]``."""
        return [self.logits_activation(self.logits(x))]

    def logits(self, x):
        """Next-token logits at ``x`` ``[..., H]``: the family's final layers, then ``x·Eᵀ`` (tied to
        ``Embedding-Token``), ``[..., V]`` (its activation not run)."""
        for name in self.layout.final:
            x = self.layers[name](x)
        return self.layers[names.EMBEDDING_TOKEN](x, reverse=True)

    @property
    def logits_activation(self) -> keras.layers.Layer:
        """``LM-Activation``: the softmax that turns `logits` into the model's output."""
        return self.layers[names.LM_ACTIVATION]
