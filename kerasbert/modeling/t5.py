"""T5: the encoder-decoder of bert4keras's ``model="t5"`` (``"t5.1.0"``), ``"t5.1.1"`` and ``"mt5.1.1"``, and of
their ``_encoder`` and ``_decoder`` alone, with bert4keras 0.11.5's layer names.

T5 (Raffel et al. 2020) is pre-norm: each sublayer is ``x + Dropout(f(Norm(x)))`` with RMS norms, and each stack
ends in a norm. The encoder's blocks are self-attention then feed-forward; the decoder's are causal self-attention,
cross-attention over the encoder's output, then feed-forward. Attention has no ``1/√d`` and adds a bias per head
and relative position bucket (`kerasbert.modeling.t5_layers`), one table per stack, shared by its blocks. The
token embedding is shared by both stacks; T5.1.0 ties it to the output too, T5.1.1 and mT5 have their own
``Decoder-Output-LM`` and gate the feed-forward (`kerasbert.modeling.blocks.GatedFeedForward`). As bert4keras
does, the decoder's output is scaled by ``H^-0.5`` before the output layer (``Decoder-Output-Scale``).

The whole model takes ``[Encoder-Input-Token, Decoder-Input-Token]`` and gives the decoder's next-token
probabilities ``[B, T, V]``; the encoder alone takes ``[Encoder-Input-Token]`` and gives its output ``[B, S, H]``;
the decoder alone takes ``[Input-Context, Decoder-Input-Token]`` (an encoder's output, whose every position it
reads, as bert4keras's decoder does). Id 0 is padding, except in the first position (the decoder's start).

Example:
>>> from kerasbert import build_transformer_model
>>> config = {"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
...           "attention_head_size": 4, "intermediate_size": 32, "hidden_act": ["gelu", "linear"],
...           "relative_attention_num_buckets": 32}
>>> t5 = build_transformer_model(config=config, model="t5.1.1", verbose=False)
>>> [t.name for t in t5.inputs], tuple(t5.output.shape)
(['Encoder-Input-Token', 'Decoder-Input-Token'], (None, None, 100))
>>> decoder = build_transformer_model(config=config, model="t5.1.1_decoder", verbose=False)
>>> T5.of(decoder).family.name, [t.name for t in decoder.inputs]
('t5.1.1_decoder', ['Input-Context', 'Decoder-Input-Token'])
"""

from __future__ import annotations

import dataclasses

import keras

from kerasbert import layer_names as names
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling import families
from kerasbert.modeling.blocks import FeedForward, GatedFeedForward, visible
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.families import Family
from kerasbert.modeling.layers import Dropout
from kerasbert.modeling.t5_layers import (
    MAX_DISTANCE,
    NORM_EPSILON,
    OutputLM,
    RelativePositionBuckets,
    RMSNorm,
    Scale,
    T5CrossAttention,
    T5PaddingMask,
    T5SelfAttention,
    T5TokenEmbedding,
)
from kerasbert.modeling.wiring import Wiring

ENCODER, DECODER = names.ENCODER, names.DECODER
EMBEDDING_DROPOUT, RELATIVE_POSITION = names.STACK_EMBEDDING_DROPOUT, names.STACK_RELATIVE_POSITION
OUTPUT_NORM, OUTPUT_DROPOUT = names.STACK_OUTPUT_NORM, names.STACK_OUTPUT_DROPOUT
OUTPUT_SCALE, OUTPUT_LM, OUTPUT_LM_ACTIVATION = (names.DECODER_OUTPUT_SCALE, names.DECODER_OUTPUT_LM,
                                                 names.DECODER_OUTPUT_LM_ACTIVATION)


@dataclasses.dataclass(frozen=True)
class Context:
    """What the decoder's cross-attention reads: the encoder's output ``states`` ``[B, K, H]``, the bias of the
    decoder's positions over them ``bias`` ``[A, Q, K]``, and which of them are real tokens ``mask`` ``[B, K]``
    (None: all, as for bert4keras's decoder alone). A cached decoder gives one block's ``keys`` and ``values``
    ``[B, A, K, d]`` instead of the states: their projections, computed once a source."""

    states: object
    bias: object
    mask: object = None
    keys: object = None
    values: object = None

    def inputs(self) -> list:
        """The cross-attention's inputs after its queries."""
        return [self.states] + ([] if self.bias is None else [self.bias]) + ([] if self.mask is None else [self.mask])

    def attend(self, layer: T5CrossAttention, y):
        """The cross-attention ``layer`` of the decoder's normalized ``y`` ``[B, Q, H]`` over this context."""
        if self.keys is None:
            return layer([y, *self.inputs()])
        return layer.attend(layer.query(y), self.keys, self.values, None if self.mask is None else visible(self.mask),
                            self.bias if layer.position_bias else None)


def _parts(stack: str) -> tuple[str, ...]:
    """The sublayers of one block of ``stack``, in order."""
    return (names.ATTENTION, names.CROSS_ATTENTION, names.FEED_FORWARD) if stack == DECODER else (
        names.ATTENTION, names.FEED_FORWARD)


@dataclasses.dataclass(frozen=True)
class T5Options:
    """Where T5 computes transformers' numbers instead of bert4keras's: those of a Hugging Face config
    (`kerasbert.BertConfig.hugging_face`), bert4keras's for any other.

    Args:
        cross_position_bias: bool. the cross-attention adds the decoder's relative position bias (bert4keras's);
            transformers' adds none.
        output_scale: float. the factor before the output layer: H^-0.5 (bert4keras's, and transformers' for
            T5.1.0's tied output); 1 for transformers' untied output (T5.1.1, mT5).
        decoder_padding: bool. the decoder hides its id-0 keys after the first position (bert4keras's);
            transformers' decoder is causal only.
        epsilon: float. ε of every RMS norm: bert4keras's 1e-6, or the config's ``layer_norm_eps``.
        max_distance: int. the distance from which keys share the last bucket (128 unless the config gives
            ``relative_attention_max_distance``).

    Example:
    >>> from kerasbert import BertConfig
    >>> config = BertConfig.from_dict({"model_type": "t5", "vocab_size": 100, "d_model": 16, "num_layers": 2})
    >>> options = T5Options.of(config, families.get("t5"))
    >>> options.cross_position_bias, options.output_scale, options.decoder_padding
    (False, 0.25, False)
    """

    cross_position_bias: bool = True
    output_scale: float | None = None
    decoder_padding: bool = True
    epsilon: float = NORM_EPSILON
    max_distance: int = MAX_DISTANCE

    @classmethod
    def of(cls, config: BertConfig, family: Family) -> T5Options:
        """The options of ``config`` for ``family``."""
        distance = config.relative_attention_max_distance or MAX_DISTANCE
        scale = config.hidden_size ** -0.5
        if not config.hugging_face:
            return cls(output_scale=scale, max_distance=distance)
        return cls(False, scale if family.checkpoint == "t5" else 1.0, False, config.layer_norm_eps, distance)


def _sublayer(part: str, name: str, cfg: BertConfig, init, dtype) -> keras.layers.Layer:
    """The attention (heads ``attention_head_size`` wide, no biases) or the feed-forward (gated where the config
    says) of one block."""
    if part == names.FEED_FORWARD:
        kind = GatedFeedForward if cfg.gated else FeedForward
        return kind(cfg.intermediate_size, activation=cfg.activation, kernel_initializer=init, use_bias=False,
                    dtype=dtype, name=name)
    options = {"position_bias": not cfg.hugging_face} if part == names.CROSS_ATTENTION else {}
    kind = T5CrossAttention if part == names.CROSS_ATTENTION else T5SelfAttention
    return kind(cfg.num_attention_heads, cfg.head_size, dropout=cfg.attention_probs_dropout_prob,
                kernel_initializer=init, dtype=dtype, name=name, **options)


def _stack_layers(stack: str, cfg: BertConfig, options: T5Options, init, dtype) -> list:
    """One stack's layers: its embedding dropout and relative position table, L blocks of pre-norm sublayers, its
    output norm and dropout."""
    def named(name):
        return names.stacked(stack, name)

    layers = [Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=named(EMBEDDING_DROPOUT)),
              RelativePositionBuckets(cfg.relative_attention_num_buckets or 32, cfg.num_attention_heads,
                                      bidirectional=stack == ENCODER, max_distance=options.max_distance,
                                      embeddings_initializer=init, dtype=dtype,
                                      name=named(RELATIVE_POSITION))]
    for index in range(cfg.num_hidden_layers):
        for part in _parts(stack):
            name = named(names.block(index, part))
            layers += [RMSNorm(epsilon=options.epsilon, dtype=dtype, name=names.residual(name, "Norm")),
                       _sublayer(part, name, cfg, init, dtype),
                       Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=names.residual(name, "Dropout")),
                       keras.layers.Add(dtype=dtype, name=names.residual(name, "Add"))]
    return layers + [RMSNorm(epsilon=options.epsilon, dtype=dtype, name=named(OUTPUT_NORM)),
                     Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=named(OUTPUT_DROPOUT))]


def _output_layers(cfg: BertConfig, family: Family, options: T5Options, init, dtype) -> list:
    """The decoder's scale and output: T5.1.0's tied embedding then softmax, T5.1.1's own ``[H, V]`` softmax."""
    layers = [Scale(options.output_scale, dtype=dtype, name=OUTPUT_SCALE)]
    if family.checkpoint == "t5":
        return layers + [keras.layers.Activation("softmax", dtype=dtype, name=OUTPUT_LM_ACTIVATION)]
    return layers + [OutputLM(cfg.vocab_size, activation="softmax", use_bias=False, kernel_initializer=init,
                              dtype=dtype, name=OUTPUT_LM)]


def _check(config: BertConfig, family: Family, hierarchical) -> None:
    """What T5 cannot take: an embedding size of its own, hierarchical positions (it has no position table)."""
    if config.embedding_size not in (None, config.hidden_size):
        raise fail(ConfigError, f"{config.source}: embedding_size", f"none (T5's embeddings are hidden_size "
                   f"{config.hidden_size} wide)", str(config.embedding_size), "leave embedding_size out")
    if hierarchical:
        raise fail(ModelError, "hierarchical_position", f"None for model={family.name!r}", repr(hierarchical),
                   "T5's relative position buckets take any length")


@dataclasses.dataclass
class T5(Wiring):
    """T5's encoder-decoder, or one of its parts (``family.part``), over its layers by name: new ones (`create`) or
    a built model's (`of`).

    Args:
        config: BertConfig. the sizes (``attention_head_size`` the heads' width, ``hidden_act`` gated for T5.1.1).
        family: Family. ``t5``, ``t5.1.1`` or ``mt5.1.1``, whole or one part.
        layers: dict. every layer by name.
    """

    @classmethod
    def create(cls, config: BertConfig, family: Family, *, dtype=None, hierarchical: float | None = None) -> T5:
        """New layers for ``family``'s part, not yet wired, every kernel from a truncated normal of the config's
        ``initializer_range``."""
        _check(config, family, hierarchical)
        init = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        options = T5Options.of(config, family)
        layers = [T5TokenEmbedding(config.vocab_size, config.hidden_size, embeddings_initializer=init, dtype=dtype,
                                   name=names.EMBEDDING_TOKEN)]
        if family.part != "decoder":
            layers += _stack_layers(ENCODER, config, options, init, dtype)
        if family.part != "encoder":
            layers += _stack_layers(DECODER, config, options, init, dtype) + _output_layers(config, family, options,
                                                                                               init, dtype)
        return cls(config, family, {layer.name: layer for layer in layers})


    def alone(self, part: str) -> T5:
        """This whole T5's ``part`` (``"encoder"`` or ``"decoder"``) over the same layers: the graph it wires shares
        every weight with the whole model's, as bert4keras's ``T5`` builds its ``encoder`` and ``decoder``."""
        if self.family.part or part not in families.PARTS:
            raise fail(ModelError, "part", f"one of {families.PARTS} of a whole T5",
                       f"{part!r} of model={self.family.name!r}", "build the whole model (model='mt5.1.1')")
        return dataclasses.replace(self, family=families.get(f"{self.family.name}_{part}"))

    @property
    def options(self) -> T5Options:
        """Where it computes transformers' numbers instead of bert4keras's (`T5Options`), from its config."""
        return T5Options.of(self.config, self.family)

    @property
    def segments(self) -> bool:
        """T5 reads no segment ids."""
        return False


    # ------------------------------------------------------------------------------------ the graph
    def inputs(self, sequence_length: int | None) -> list:
        """``[Encoder-Input-Token, Decoder-Input-Token]``; the encoder alone ``[Encoder-Input-Token]``; the decoder
        alone ``[Input-Context, Decoder-Input-Token]`` (``[B, S, H]`` float, then ``[B, T]`` int32)."""
        def tokens(name):
            return keras.Input((sequence_length,), dtype="int32", name=name)

        if self.family.part == "encoder":
            return [tokens(names.ENCODER_INPUT)]
        first = keras.Input((sequence_length, self.config.hidden_size), name=names.CONTEXT_INPUT) \
            if self.family.part == "decoder" else tokens(names.ENCODER_INPUT)
        return [first, tokens(names.DECODER_INPUT)]

    def outputs(self, inputs: list, application: str, flags: dict) -> list:
        """The encoder's output (the encoder alone) or the decoder's next-token probabilities ``[B, T, V]``."""
        if application != "encoder" or any(flags.values()):
            raise fail(ModelError, "application" if application != "encoder" else "with_*",
                       f'application="encoder" and no with_* flag for model={self.family.name!r}',
                       repr(application) if application != "encoder" else repr(flags),
                       "T5's outputs are fixed: the encoder's states or the decoder's next-token probabilities")
        if self.family.part == "decoder":
            return [self.decode(inputs[1], Context(inputs[0], None))]
        mask = T5PaddingMask(name=names.ENCODER_MASK)(inputs[0])  # [B, S]: the encoder's real tokens
        states = self.encode(inputs[0], None, mask)
        return [states] if self.family.part == "encoder" else [self.decode(inputs[1], Context(states, None, mask))]

    def encode(self, token_ids, segment_ids, mask):
        """The encoder: ``[B, S]`` ids and their ``[B, S]`` mask to its output ``[B, S, H]``, after its output
        norm and dropout (``segment_ids``: None, T5 has none)."""
        x = self.embed(token_ids, None, stack=ENCODER)
        bias = self.positions(x, stack=ENCODER)
        for index in range(self.config.num_hidden_layers):
            x = self.block(index, x, mask, bias)
        return self.stack_output(x, stack=ENCODER)

    def decode(self, token_ids, context: Context):
        """The decoder: ``[B, T]`` ids over the encoder's ``context`` (its bias filled in here) to the next-token
        probabilities ``[B, T, V]``."""
        mask = T5PaddingMask(causal=True, padding=self.options.decoder_padding, name=names.LM_MASK)(token_ids)
        x = self.embed(token_ids, None, stack=DECODER)
        bias = self.positions(x, stack=DECODER)
        if self.options.cross_position_bias:
            context = dataclasses.replace(context, bias=self.positions(x, context.states, stack=DECODER))
        for index in range(self.config.num_hidden_layers):
            x = self.block(index, x, mask, bias, context=context)
        return self.probabilities(x)

    def embed(self, token_ids, segment_ids=None, positions=None, *, stack: str = DECODER):
        """``Embedding-Token`` then the stack's embedding dropout: ``[B, S] -> [B, S, H]``."""
        dropout = self.layers[names.stacked(stack, EMBEDDING_DROPOUT)]
        return dropout(self.layers[names.EMBEDDING_TOKEN](token_ids))

    def positions(self, x, keys=None, *, stack: str = DECODER):
        """The stack's relative position bias of ``x`` ``[B, S, H]`` over itself, or over ``keys`` ``[B, K, H]``
        (the decoder's over the encoder's output): ``[A, S, S]`` or ``[A, S, K]``."""
        return self.layers[names.stacked(stack, RELATIVE_POSITION)]([x, x if keys is None else keys])

    def positions_at(self, queries, keys, *, stack: str = DECODER):
        """The stack's bias of queries at positions ``[Q]`` over keys at ``[K]``: ``[A, Q, K]`` (a cached decoder's
        new position over its kept keys, or over the encoder's output)."""
        return self.layers[names.stacked(stack, RELATIVE_POSITION)].between(queries, keys)

    def cross_keys_values(self, states) -> tuple[list, list]:
        """Each decoder block's cross-attention keys and values of the encoder's output ``states`` ``[B, K, H]``,
        each ``[B, A, K, d]``: what a cached decoder computes once a source (`Context`'s ``keys``, ``values``)."""
        pairs = [self.layers[names.stacked(DECODER, names.block(index, names.CROSS_ATTENTION))].keys_values(states)
                 for index in range(self.config.num_hidden_layers)]
        return [k for k, _ in pairs], [v for _, v in pairs]

    def block(self, index: int, x, mask, positions=None, *, cache=None, first=None, context: Context | None = None):
        """Block ``index`` of the decoder where ``context`` is given (its cross-attention reads it), else of the
        encoder: ``x + Dropout(f(Norm(x)))`` for each sublayer f.

        Args:
            index: int. the layer, 0 <= index < L.
            x: ``[B, S, H]`` the block's input.
            mask: the self-attention's mask: ``[B, S]`` keys (the encoder) or ``[B, S, S]`` (the decoder's causal);
                with ``cache``, bool ``[B, 1, Q, K]``, False where a query may not see a key.
            positions: the stack's relative position bias ``[A, Q, K]``.
            cache: a decoder's kept self-attention keys and values: called with the block's new keys and values
                ``[B, A, Q, d]``, it gives those to attend over (the decoder's blocks only).
            first: not taken by T5 (``[CLS]`` alone); a ModelError.
            context: Context. the encoder's output the decoder reads; None for an encoder block.
        """
        if first is not None or (cache is not None and context is None):
            raise fail(ModelError, f"model={self.family.name!r}", "an encoder block run over its whole input",
                       "cache=" if cache is not None else "first=", "T5's encoder blocks run in a graph only")
        stack = ENCODER if context is None else DECODER
        for part in _parts(stack):
            name = names.stacked(stack, names.block(index, part))
            x = self._residual(name, x, self._sublayer_call(self.layers[name], part, mask, positions, cache, context))
        return x

    @staticmethod
    def _sublayer_call(layer, part: str, mask, positions, cache, context: Context | None):
        """The sublayer ``layer`` as a function of its normalized input: the feed-forward; the cross-attention
        over ``context``; the self-attention in a graph, or of new positions over the keys ``cache`` keeps."""
        if part == names.FEED_FORWARD:
            return layer
        if part == names.CROSS_ATTENTION:
            return lambda y: context.attend(layer, y)
        if cache is None:
            return lambda y: layer([y, mask, positions])

        def cached(y):
            q, k, v = layer.qkv(y)  # each (batch, heads, Q, d)
            return layer.attend(q, *cache(k, v), mask, positions)
        return cached

    def _residual(self, name: str, x, sublayer):
        """``x + Dropout(f(Norm(x)))``, f the ``sublayer`` called on the normalized input."""
        y = sublayer(self.layers[names.residual(name, "Norm")](x))
        return self.layers[names.residual(name, "Add")]([x, self.layers[names.residual(name, "Dropout")](y)])

    def final(self, x, flags: dict) -> list:
        """T5 has no ``with_*`` layers."""
        return []

    def logits(self, x):
        """The decoder's next-token logits at its last block's output ``x`` ``[..., H]``: its output norm, dropout
        and scale, then the output layer without its softmax: ``[..., V]``."""
        x = self.scaled(x)
        if self.family.checkpoint == "t5":
            return self.layers[names.EMBEDDING_TOKEN](x, reverse=True)
        return self.layers[OUTPUT_LM].logits(x)

    def probabilities(self, x):
        """The decoder's output layers in a graph: ``[B, T, H]`` -> ``[B, T, V]`` softmax probabilities."""
        x = self.scaled(x)
        if self.family.checkpoint == "t5":
            return self.layers[OUTPUT_LM_ACTIVATION](self.layers[names.EMBEDDING_TOKEN](x, reverse=True))
        return self.layers[OUTPUT_LM](x)

    def scaled(self, x):
        """The decoder's output norm, dropout and scale: what its output layer reads."""
        return self.layers[OUTPUT_SCALE](self.stack_output(x, stack=DECODER))

    def stack_output(self, x, *, stack: str = ENCODER):
        """The stack's output norm then dropout, after its last block: ``[B, S, H]``."""
        return self.layers[names.stacked(stack, OUTPUT_DROPOUT)](self.layers[names.stacked(stack, OUTPUT_NORM)](x))
