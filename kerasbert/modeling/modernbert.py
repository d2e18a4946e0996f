"""ModernBERT (Warner et al. 2024): a pre-norm encoder with rotary positions, gated GELU and alternating global and
local attention, up to 8,192 tokens; the one place that wires its layers.

    embeddings   Embedding-Token (no position table, no segments) -> Embedding-Norm -> Embedding-Dropout
    block i      x + Dropout(Attention(Norm(x)))   (no norm before layer 0's attention: the embeddings are normed)
                 x + Dropout(FeedForward(Norm(x)))
    attention    fused Wqkv, rotary positions turning q and k by halves; global where i % n == 0
                 (``global_attn_every_n_layers``, θ ``global_rope_theta``), else within ±``local_attention``/2 of
                 each token (θ ``local_rope_theta``), `kerasbert.modeling.modernbert_layers.WindowedSelfAttention`
    feed-forward Wi [H, 2I] split into input and gate, act(input)·gate, Wo (`FusedGatedFeedForward`)
    final        Encoder-Output-Norm after the last block: the sequence output; with_mlm: MLM-Dense (the
                 classifier activation), MLM-Norm, x·Eᵀ tied to Embedding-Token, MLM-Bias (transformers' ``head``,
                 ``decoder``)

Its names are bert4keras's where one fits, so the heads (`kerasbert.modeling.heads`) read it as they read BERT:
``Transformer-{i}-MultiHeadSelfAttention-Norm`` is transformers' ``attn_norm``, ``Transformer-{i}-FeedForward-Norm``
its ``mlp_norm`` (both before their sublayer, as GPT-2's), ``Attention-Mask`` the ids other than ``pad_token_id``.
It is an encoder alone: ``application="lm"`` and ``"unilm"`` are refused. Its options are read from the config
(`kerasbert.modeling.modernbert_config.options`).

Example:
>>> from kerasbert import build_transformer_model
>>> model = build_transformer_model("tiny", model="modernbert", num_hidden_layers=3, verbose=False)
>>> [layer.window for layer in ModernBert.of(model).attentions]
[None, 64, 64]
"""

from __future__ import annotations

import dataclasses

import keras

from kerasbert import layer_names as names
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling.config import ACTIVATIONS, BertConfig
from kerasbert.modeling.encoder import CacheWrite
from kerasbert.modeling.families import Family
from kerasbert.modeling.final_layers import mlm_output
from kerasbert.modeling.layers import Dropout, LayerNorm, PaddingMask, TakeToken, TokenEmbedding
from kerasbert.modeling.modernbert_config import ModernBertOptions, options
from kerasbert.modeling.modernbert_layers import FusedGatedFeedForward, ThetaRotaryPositions, WindowedSelfAttention
from kerasbert.modeling.wiring import Wiring

SUBLAYER_STEPS = ("Norm", "", "Dropout", "Add")  # a sublayer's layers: its norm, itself, its residual's dropout, add


def options_of(config: BertConfig) -> ModernBertOptions:
    """The ModernBERT options of ``config`` (`kerasbert.modeling.modernbert_config.options`); a ConfigError for a
    ``classifier_activation`` kerasbert lacks."""
    opts = options(config.extra, config.num_hidden_layers, config.source)
    if opts.classifier_activation not in ACTIVATIONS:
        raise fail(ConfigError, f"{config.source}: classifier_activation", f"one of {sorted(ACTIVATIONS)}",
                   repr(opts.classifier_activation))
    return opts


def _refuse(config: BertConfig, family: Family, hierarchical) -> None:
    """A ModelError for what ModernBERT has no place for: an E ≠ H embedding, hierarchical positions."""
    if config.embedding_width != config.hidden_size:
        raise fail(ModelError, "embedding_size", f"the hidden size {config.hidden_size} for model={family.name!r}",
                   str(config.embedding_size), "ModernBERT's embeddings are H wide; leave embedding_size out")
    if hierarchical:
        raise fail(ModelError, "hierarchical_position", f"none for model={family.name!r}", str(hierarchical),
                   "ModernBERT's rotary positions reach max_position_embeddings (8,192) without a table")


def _norm(name: str, cfg: BertConfig, opts: ModernBertOptions, dtype) -> LayerNorm:
    """A LayerNorm of the config's ε, with β where ``norm_bias``."""
    return LayerNorm(epsilon=cfg.layer_norm_eps, center=opts.norm_bias, dtype=dtype, name=name)


def _embedding_layers(cfg: BertConfig, opts: ModernBertOptions, init, dtype) -> list:
    """The token embedding, its norm and dropout, the padding mask and each kind of layer's rotary positions."""
    layers = [TokenEmbedding(cfg.vocab_size, cfg.hidden_size, embeddings_initializer=init, pad_id=cfg.pad_id,
                             dtype=dtype, name=names.EMBEDDING_TOKEN),
              _norm(names.EMBEDDING_NORM, cfg, opts, dtype),
              Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=names.EMBEDDING_DROPOUT),
              PaddingMask(pad_id=cfg.pad_id, dtype=dtype, name=names.ATTENTION_MASK),
              ThetaRotaryPositions(cfg.head_size, base=opts.global_rope_theta, max_length=cfg.max_position_embeddings,
                                   dtype=dtype, name=names.ROTARY_POSITION)]
    if not all(opts.global_layers):
        layers.append(ThetaRotaryPositions(cfg.head_size, base=opts.local_rope_theta,
                                           max_length=cfg.max_position_embeddings, dtype=dtype,
                                           name=names.ROTARY_POSITION_LOCAL))
    return layers


def _block_layers(index: int, cfg: BertConfig, opts: ModernBertOptions, init, dtype) -> list:
    """Block ``index``: each sublayer with its norm before it (none before layer 0's attention), its residual's
    dropout and add."""
    attention = WindowedSelfAttention(cfg.num_attention_heads, window=None if opts.global_layers[index] else
                                      opts.half_window, dropout=cfg.attention_probs_dropout_prob,
                                      kernel_initializer=init, use_bias=opts.attention_bias, dtype=dtype,
                                      name=names.block(index, names.ATTENTION))
    feed_forward = FusedGatedFeedForward(cfg.intermediate_size, activation=cfg.activation, kernel_initializer=init,
                                         use_bias=opts.mlp_bias, dtype=dtype,
                                         name=names.block(index, names.FEED_FORWARD))
    layers = []
    for sublayer in (attention, feed_forward):
        if index or sublayer is feed_forward:
            layers.append(_norm(names.residual(sublayer.name, "Norm"), cfg, opts, dtype))
        layers += [sublayer, Dropout(cfg.hidden_dropout_prob, dtype=dtype, name=names.residual(sublayer.name,
                                                                                               "Dropout")),
                   keras.layers.Add(dtype=dtype, name=names.residual(sublayer.name, "Add"))]
    return layers


@dataclasses.dataclass
class ModernBert(Wiring):
    """ModernBERT's encoder over its layers by name: new ones (`create`) or a built model's (`of`).

    Args:
        config: BertConfig. the sizes, and ModernBERT's options in its ``extra`` (`options_of`).
        family: Family. ``modernbert``.
        layers: dict. every layer by name.
    """

    @classmethod
    def create(cls, config: BertConfig, family: Family, *, dtype=None, hierarchical: float | None = None) -> ModernBert:
        """New layers for ``config``, not yet wired, every kernel from a truncated normal of the config's
        ``initializer_range``."""
        _refuse(config, family, hierarchical)
        opts = options_of(config)
        init = keras.initializers.TruncatedNormal(stddev=config.initializer_range)
        layers = _embedding_layers(config, opts, init, dtype)
        for index in range(config.num_hidden_layers):
            layers += _block_layers(index, config, opts, init, dtype)
        layers.append(_norm(names.FINAL_NORM, config, opts, dtype))
        return cls(config, family, {layer.name: layer for layer in layers})

    # ------------------------------------------------------------------------------------ what it holds
    @property
    def options(self) -> ModernBertOptions:
        return options_of(self.config)

    @property
    def attentions(self) -> list[WindowedSelfAttention]:
        """Each block's attention, in order."""
        return [self.layers[names.block(i, names.ATTENTION)] for i in range(self.config.num_hidden_layers)]

    @property
    def segments(self) -> bool:
        """False: ModernBERT reads token ids alone."""
        return False

    @property
    def initializer(self):
        """The kernel initializer its layers share (a head's new layers start from it too)."""
        return self.attentions[0].kernel_initializer

    @property
    def max_length(self) -> int:
        """P, the most positions (``max_position_embeddings``)."""
        return self.config.max_position_embeddings

    def _sublayer(self, index: int, part: str) -> tuple:
        """Block ``index``'s ``part`` (attention or feed-forward): its norm (None before layer 0's attention), the
        sublayer, its dropout and add."""
        name = names.block(index, part)
        return tuple(self.layers.get(names.residual(name, step) if step else name) for step in SUBLAYER_STEPS)

    # ------------------------------------------------------------------------------------ the graph
    def inputs(self, sequence_length: int | None) -> list:
        """``Input-Token`` ``[B, S]`` int32."""
        return [keras.Input((sequence_length,), dtype="int32", name=names.TOKEN_INPUT)]

    def outputs(self, inputs: list, application: str, flags: dict) -> list:
        """The encoder on ``inputs`` (padding keys hidden), then the masked LM where ``flags`` asks for it; a
        ModelError for ``application`` other than ``"encoder"``."""
        if application != "encoder":
            raise fail(ModelError, "application", f'"encoder" for model={self.family.name!r}', repr(application),
                       "ModernBERT is an encoder: its masked LM fills masks (with_mlm=True, kerasbert fill-mask); "
                       "generate with a GPT-2 or T5 model")
        mask = self.layers[names.ATTENTION_MASK](inputs[0])  # [B, S]: every attention's keys
        x = self.encode(inputs[0], None, mask)
        return self.final(x, flags) or [x]

    def encode(self, token_ids, segment_ids, mask):
        """Embeddings, every block, ``Encoder-Output-Norm``: ``[B, S]`` ids and the ``[B, S]`` key mask to the
        sequence output ``[B, S, H]`` (``segment_ids`` not read)."""
        x = self.embed(token_ids, segment_ids)
        positions = self.positions(x)
        for index in range(self.config.num_hidden_layers):
            x = self.block(index, x, mask, positions)
        return self.layers[names.FINAL_NORM](x)

    def embed(self, token_ids, segment_ids=None, positions=None):
        """``Dropout(Norm(Embedding-Token(ids)))``: ``[B, S] -> [B, S, H]`` (no segments, no position table)."""
        x = self.layers[names.EMBEDDING_TOKEN](token_ids)
        return self.layers[names.EMBEDDING_DROPOUT](self.layers[names.EMBEDDING_NORM](x))

    def positions(self, x):
        """The sinusoids ``[1, S, d]`` of the global layers' θ and of the local layers' (None without local
        layers), over ``x`` ``[B, S, H]``."""
        local = self.layers.get(names.ROTARY_POSITION_LOCAL)
        return self.layers[names.ROTARY_POSITION](x), None if local is None else local(x)

    def positions_at(self, queries, keys):
        """Refused: ModernBERT has no decoder."""
        raise fail(ModelError, f"{self.family.name} positions", "a model with a decoder", "ModernBERT, an encoder")

    def block(self, index: int, x, mask, positions=None, *, cache: CacheWrite | None = None,
              first: keras.layers.Layer | None = None):
        """Block ``index``: ``x + Dropout(Attention(Norm(x)))``, then ``x + Dropout(FeedForward(Norm(x)))``.

        Args:
            index: int. the layer, 0 <= index < L.
            x: ``[B, S, H]`` the block's input.
            mask: ``[B, S]`` bool, the keys every query may see (padding hidden).
            positions: what `positions` gave: the global and the local layers' sinusoids.
            cache: not taken: ModernBERT is an encoder.
            first: a layer that takes ``[CLS]`` out of ``x``: the block then computes ``[B, H]`` for ``[CLS]``
                alone, its keys and values still from every position.
        """
        if cache is not None:
            raise fail(ModelError, f"{self.family.name} block", "a block run over its whole input",
                       "a decoder's cache", "ModernBERT is an encoder; it has no cached decoder")
        norm, attention, dropout, add = self._sublayer(index, names.ATTENTION)
        sinusoid = positions[0] if attention.window is None else positions[1]
        y = x if norm is None else norm(x)
        if first is not None:
            y, x = attention([y, mask, sinusoid], first_token=True), first(x)
        else:
            y = attention([y, mask, sinusoid])
        x = add([x, dropout(y)])
        norm, feed_forward, dropout, add = self._sublayer(index, names.FEED_FORWARD)
        return add([x, dropout(feed_forward(norm(x)))])

    def final(self, x, flags: dict) -> list:
        """The masked LM (`mlm_output`) where ``with_mlm`` asks for it, on the sequence output ``x``."""
        activation = flags.get("with_mlm")
        return [self.mlm_output(x, "softmax" if activation is True else activation)] if activation else []

    def mlm_output(self, x, output_activation="softmax"):
        """New masked-LM layers on ``x`` ``[..., H]``: ``MLM-Dense`` (``classifier_activation``, a bias where
        ``classifier_bias``), ``MLM-Norm``, ``x·Eᵀ`` tied to ``Embedding-Token``, ``MLM-Bias`` (where
        ``decoder_bias``), ``MLM-Activation``: transformers' ``head`` and ``decoder``."""
        opts = self.options
        return mlm_output(x, self.layers[names.EMBEDDING_TOKEN], ACTIVATIONS[opts.classifier_activation],
                          self.config.layer_norm_eps, self.initializer, self.dtype, output_activation,
                          biases=(opts.classifier_bias, opts.norm_bias, opts.decoder_bias))

    def logits(self, x):
        """The masked LM's logits at ``x`` ``[N, H]``: ``[N, V]`` (its activation not run)."""
        layers = self.layers
        y = layers[names.EMBEDDING_TOKEN](layers[names.MLM_NORM](layers[names.MLM_DENSE](x)), reverse=True)
        return layers[names.MLM_BIAS](y) if names.MLM_BIAS in layers else y

    @property
    def logits_activation(self) -> keras.layers.Layer:
        """``MLM-Activation``: the softmax that turns `logits` into the masked LM's output."""
        if names.MLM_ACTIVATION not in self.layers:
            raise fail(ModelError, names.MLM_ACTIVATION, "a model built with_mlm=True", "no such layer")
        return self.layers[names.MLM_ACTIVATION]

    # ------------------------------------------------------------------------------------ a built graph
    def block_output(self, index: int):
        """Block ``index``'s ``[B, S, H]`` output in the built graph."""
        return self._sublayer(index, names.FEED_FORWARD)[3].output

    def first_token_output(self, sequence, name: str):
        """``sequence[:, 0]``, ``[B, H]``, with the last block and ``Encoder-Output-Norm`` run for ``[CLS]`` alone
        (`TakeToken` ``name`` takes position 0 of the last block's input): the same weights and numbers."""
        last = self.config.num_hidden_layers - 1
        norm, attention = self._sublayer(last, names.ATTENTION)[:2]
        inputs = list(attention.input)  # [Norm(x) or x, mask, sinusoid]
        x = inputs[0] if norm is None else norm.input
        positions = (inputs[2], inputs[2])  # the last block reads its own kind's
        y = self.block(last, x, inputs[1], positions, first=TakeToken(0, dtype=self.dtype, name=name))
        return self.layers[names.FINAL_NORM](y)

    def sequence_output(self, outputs: list):
        """``Encoder-Output-Norm``'s output among a built model's ``outputs``, None where it is not one of them."""
        sequence = self.layers[names.FINAL_NORM].output
        return sequence if any(output is sequence for output in outputs) else None

