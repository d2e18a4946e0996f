"""bert4keras's T5 classes, ``T5_Base``, ``T5_Encoder``, ``T5_Decoder`` and the whole ``T5``, each running its steps
through kerasbert's T5 wiring (`kerasbert.modeling.t5.T5`).

``version`` (bert4keras's ``"t5.1.0"``, ``"t5.1.1"``, ``"mt5.1.1"``) picks the family: T5.1.0's ReLU feed-forward and
tied output, T5.1.1's gated feed-forward and own output, mT5's checkpoint names. `T5_Encoder` and `T5_Decoder` are
one stack each (``model="mt5.1.1_encoder"``); `T5` builds both over one set of layers, then the whole model, the
decoder's steps over the encoder's output, as bert4keras does: ``.model``, ``.encoder`` and ``.decoder`` share every
weight, so a seq2seq script trains the one and decodes with the others. A subclass of a stack overrides its steps
(``apply_embeddings``, ``apply_main_layers``, ``apply_final_layers``, ``compute_position_bias``) as in bert4keras.

Example:
>>> from kerasbert.compat.models import build_transformer_model
>>> config = {"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
...           "attention_head_size": 4, "intermediate_size": 32, "hidden_act": ["gelu", "linear"],
...           "relative_attention_num_buckets": 32}
>>> t5 = build_transformer_model(config=config, model="mt5.1.1", return_keras_model=False, name="T5",
...                              verbose=False)
>>> type(t5).__name__, t5.encoder.name, [t.name for t in t5.decoder.inputs], t5.decoder.family
('T5', 'T5_Encoder', ['Input-Context', 'Decoder-Input-Token'], 'mt5.1.1_decoder')
>>> t5.variable_mapping()["Decoder-Transformer-0-FeedForward"][1]
'decoder/block_000/layer_002/DenseReluDense/wi_1/kernel'
"""

from __future__ import annotations

import functools

import keras

from kerasbert import layer_names as names
from kerasbert.compat._model_classes import LM_Mask, Transformer
from kerasbert.compat._model_classes_families import GoogleCheckpoint, config_from
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling import architecture, families
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.t5 import DECODER, ENCODER, Context
from kerasbert.modeling.t5_layers import T5PaddingMask
from kerasbert.perf.xla import xla_pays

VERSIONS = {"t5.1.0": "t5", "t5.1.1": "t5.1.1", "mt5.1.1": "mt5.1.1"}  # bert4keras's version -> kerasbert's family


class T5_Base(GoogleCheckpoint, Transformer):  # noqa: N801 (bert4keras's name)
    """bert4keras's ``T5_Base``: what both stacks share, the version, the kerasbert wiring of its family, the
    checkpoint names of its table (both stacks', whatever the part, as bert4keras maps them).

    Args:
        version: str. ``"t5.1.0"``, ``"t5.1.1"`` or ``"mt5.1.1"``.
        **kwargs: `Transformer`'s arguments (``attention_head_size`` the heads' width, ``hidden_act`` gated as
            ``["gelu", "linear"]`` for T5.1.1), and the rest of a T5 config (``relative_attention_num_buckets``).
    """

    kerasbert_family = "t5"  # the application check's family; ``version`` picks among T5's
    part = ""  # the stack the class builds: "encoder", "decoder", or "" for both

    def __init__(self, version="t5.1.0", **kwargs):
        if version not in VERSIONS:
            raise fail(ConfigError, "version", f"one of {', '.join(VERSIONS)}", repr(version),
                       "bert4keras's T5 versions; build_transformer_model sets it from model=")
        super().__init__(**kwargs)
        self.version, self.wiring, self._mask = version, None, None

    @property
    def family(self) -> families.Family:
        """The kerasbert family of the version and part (``mt5.1.1_encoder``)."""
        return families.get(VERSIONS[self.version] + (f"_{self.part}" if self.part else ""))

    @functools.cached_property
    def bert_config(self):
        """The `kerasbert.BertConfig` the arguments make (over the ``config`` given, if one was)."""
        return config_from(self)

    @property
    def architecture(self):
        """kerasbert's T5 wiring (`kerasbert.modeling.t5.T5`) over new layers, each name prefixed, or over those
        a whole `T5` gave its stack."""
        if self.wiring is None:
            self.wiring = architecture.create(self.bert_config, self.family, dtype=self.options.get("dtype"))
            for layer in self.wiring.layers.values():
                layer.name = self.prefixed(layer.name)
        return self.wiring

    def build(self, layer_norm_cond=None, **kwargs) -> None:
        """`Transformer.build`; T5's RMS norms take no condition."""
        if layer_norm_cond is not None:
            raise fail(ModelError, "layer_norm_cond", f"None for {type(self).__name__}", "a tensor",
                       "kerasbert's T5 norms are RMS norms without a condition")
        super().build(**kwargs)

    def keras_model(self) -> TransformerModel:
        """A `kerasbert.modeling.backbone.TransformerModel` carrying the config and the family."""
        model = TransformerModel(self.inputs, self.output, name=self.name or self.family.name,
                                 bert_config=self.bert_config, family=self.family.name, application="encoder")
        model.jit_compile = xla_pays(model)
        return model

    def attention_mask(self):
        """The mask kerasbert's self-attention reads, of this graph's token ids (`apply_embeddings` makes it):
        the encoder's real tokens ``[B, S]``, the decoder's causal ``[B, T, T]``."""
        return self._mask

    def _tokens(self, name: str):
        return self.apply(layer=keras.Input, shape=(self.sequence_length,), dtype="int32", name=name)


class T5_Encoder(T5_Base):  # noqa: N801 (bert4keras's name)
    """bert4keras's ``T5_Encoder``: ``[Encoder-Input-Token]`` to the encoder's output ``[B, S, H]``."""

    part = "encoder"

    def get_inputs(self):
        """``Encoder-Input-Token`` ``[B, S]``."""
        return self._tokens(names.ENCODER_INPUT)

    def apply_embeddings(self, inputs):
        """``Embedding-Token`` then ``Encoder-Embedding-Dropout``; the mask of the real tokens before them."""
        self.position_bias = None  # this graph's
        self._mask = self.apply(inputs=inputs, layer=T5PaddingMask, name=names.ENCODER_MASK)
        return self.architecture.embed(inputs, stack=ENCODER)

    def apply_main_layers(self, inputs, index):
        """Encoder block ``index``: norm, self-attention, dropout, add; norm, feed-forward, dropout, add."""
        return self.architecture.block(index, inputs, self.attention_mask(), self.compute_position_bias(inputs))

    def apply_final_layers(self, inputs):
        """``Encoder-Output-Norm`` then ``Encoder-Output-Dropout``."""
        return self.architecture.stack_output(inputs, stack=ENCODER)

    def compute_position_bias(self, inputs=None):
        """``Encoder-Embedding-Relative-Position``'s bias ``[A, S, S]``, once a graph."""
        if self.position_bias is None and inputs is not None:
            self.position_bias = self.architecture.positions(inputs, stack=ENCODER)
        return self.position_bias


class T5_Decoder(LM_Mask, T5_Base):  # noqa: N801 (bert4keras's name)
    """bert4keras's ``T5_Decoder``: ``[Input-Context, Decoder-Input-Token]`` to the next-token probabilities
    ``[B, T, V]``, every position of the context read (in a whole `T5`, the encoder's real tokens).

    Args:
        with_lm: bool or str. the output layer (True or ``"softmax"``); False: the scaled output ``[B, T, H]``.
        cross_position_bias: bool. the cross-attention adds the decoder's position bias (bert4keras's configs;
            a Hugging Face config's cross-attention has none).
        **kwargs: `T5_Base`'s arguments.
    """

    part = "decoder"

    def __init__(self, with_lm=True, cross_position_bias=True, **kwargs):
        super().__init__(**kwargs)
        if with_lm not in (True, False, "softmax"):
            raise fail(ConfigError, "with_lm", 'True, "softmax" or False', repr(with_lm),
                       "kerasbert's T5 output is a softmax")
        self.with_lm, self.cross_position_bias = with_lm, cross_position_bias
        self.context_mask = None  # the context's real tokens [B, K]: the encoder's, in a whole T5; None: all

    def get_inputs(self):
        """``Input-Context`` ``[B, K, H]`` and ``Decoder-Input-Token`` ``[B, T]``."""
        context = self.apply(layer=keras.Input, shape=(self.sequence_length, self.hidden_size),
                             name=names.CONTEXT_INPUT)
        return [context, self._tokens(names.DECODER_INPUT)]

    def build(self, **kwargs) -> None:
        """`T5_Base.build`; ``cross_position_bias`` as the config's cross-attention layers take it."""
        if self.cross_position_bias != self.architecture.options.cross_position_bias:
            raise fail(ConfigError, "cross_position_bias", str(self.architecture.options.cross_position_bias),
                       str(self.cross_position_bias), "a bert4keras config's cross-attention adds the position "
                       "bias, a Hugging Face config's does not")
        super().build(**kwargs)

    def apply_embeddings(self, inputs):
        """``Embedding-Token`` then ``Decoder-Embedding-Dropout`` on the ids; the causal mask before them."""
        context, token = inputs
        self.position_bias = None  # this graph's: a whole T5 runs the steps again over the encoder's output
        self._mask = self.apply(inputs=token, layer=T5PaddingMask, causal=True,
                                padding=self.architecture.options.decoder_padding, name=names.LM_MASK)
        return [context, self.architecture.embed(token, stack=DECODER)]

    def apply_main_layers(self, inputs, index):
        """Decoder block ``index``: causal self-attention, cross-attention over the context, feed-forward, each
        pre-normed with its dropout and add."""
        context, x = inputs
        own, cross = self.compute_position_bias([x, context])
        x = self.architecture.block(index, x, self.attention_mask(), own,
                                    context=Context(context, cross, self.context_mask))
        return [context, x]

    def apply_final_layers(self, inputs):
        """``Decoder-Output-Norm``, ``-Dropout`` and ``-Scale``, then the output layer (``with_lm``)."""
        _, x = inputs
        return self.architecture.probabilities(x) if self.with_lm else self.architecture.scaled(x)

    def compute_attention_bias(self, inputs=None):
        """The decoder's causal mask ``[B, T, T]`` (its id-0 keys after the first hidden)."""
        return self.attention_mask()

    def compute_position_bias(self, inputs=None):
        """``Decoder-Embedding-Relative-Position``'s bias of the ids over themselves ``[A, T, T]`` and over the
        context ``[A, T, K]`` (None without ``cross_position_bias``), once a graph."""
        if self.position_bias is None and inputs is not None:
            x, context = inputs
            cross = self.architecture.positions(x, context, stack=DECODER) if self.cross_position_bias else None
            self.position_bias = (self.architecture.positions(x, stack=DECODER), cross)
        return self.position_bias


class T5(T5_Base):
    """bert4keras's ``T5``: its encoder and decoder over one set of layers, and the whole model.

    After ``build``: ``encoder`` (``{name}_Encoder``, or ``Encoder``), ``decoder`` (``{name}_Decoder``) and
    ``model`` (``[Encoder-Input-Token, Decoder-Input-Token]`` to the next-token probabilities, the encoder's padding
    hidden from the cross-attention), three Keras models sharing their weights.

    Args:
        **kwargs: `T5_Base`'s arguments, given to both stacks (``name``: the parts' prefix).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        kwargs["layers"] = self.layers
        name = kwargs.pop("name", None)
        self._encoder = T5_Encoder(name=f"{name}_Encoder" if name else "Encoder", **kwargs)
        self._decoder = T5_Decoder(name=f"{name}_Decoder" if name else "Decoder", **kwargs)

    def build(self, **kwargs) -> None:
        """Build the encoder, the decoder, then the whole model: the decoder's steps on the encoder's output."""
        if self.built:
            return
        for stack in (self._encoder, self._decoder):
            stack.wiring = self.architecture.alone(stack.part)
            stack.build(**kwargs)
        self.encoder, self.decoder = self._encoder.model, self._decoder.model
        self.set_inputs(self.encoder.inputs + self.decoder.inputs[1:])
        self._decoder.context_mask = self._encoder.attention_mask()
        self.set_outputs(self._decoder.call(self.encoder.outputs + self.decoder.inputs[1:]))
        self.model = self.keras_model()
        self.built = True


T5_CLASSES = {"": T5, "encoder": T5_Encoder, "decoder": T5_Decoder}  # Family.part -> its class

__all__ = ["T5", "T5_Base", "T5_Decoder", "T5_Encoder"]
