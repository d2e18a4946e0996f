"""bert4keras's model classes, ``BERT`` to ``GPT2_ML``, each running its steps through kerasbert's architecture.

The classes derive as bert4keras's do (``RoFormerV2`` from ``RoFormer`` from ``NEZHA`` from ``BERT``; ``GPT`` is
``BERT`` under `LM_Mask`), so a script's subclass finds the methods it overrides where bert4keras has them. Each
names its kerasbert family; `BERT` holds what every one shares: the kerasbert config its arguments make, the
architecture's layers (`kerasbert.modeling.architecture.create`, every name prefixed), the default steps over them
(``embed``, one ``block`` per layer, ``final``), and the checkpoint names of the family's table.

Example:
>>> from kerasbert.compat.models import build_transformer_model
>>> albert = build_transformer_model(config={"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2,
...     "num_attention_heads": 2, "intermediate_size": 32, "embedding_size": 8}, model="albert",
...     return_keras_model=False, verbose=False)
>>> type(albert).__name__, albert.model.family, albert.variable_mapping()["Transformer-FeedForward-Norm"][0]
('ALBERT', 'albert', 'bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/beta')
"""

from __future__ import annotations

import dataclasses
import functools

import keras

from kerasbert import layer_names as names
from kerasbert.compat._model_classes import LM_Mask, Transformer
from kerasbert.compat._model_classes_weights import bert4keras_mapping
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling import architecture, families
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.conditional_norm import ConditionalLayerNorm, Conditioned
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.encoder import checked_flags
from kerasbert.modeling.final_layers import FLAGS
from kerasbert.modeling.layers import LayerNorm, PaddingMask
from kerasbert.modeling.masks import MASK_LAYERS, AttentionMask
from kerasbert.modeling.positions import RelativePositions, RotaryPositions
from kerasbert.perf.xla import xla_pays
from kerasbert.weights.table import Format, vocab_axis

_FIELDS = {field.name for field in dataclasses.fields(BertConfig)} - {"extra", "source"}


def config_from(model: Transformer, **changes) -> BertConfig:
    """The `kerasbert.BertConfig` a model object's arguments make (over the ``config`` given, if one was): the
    config fields among its options, its sizes, then ``changes``."""
    fields = {key: value for key, value in model.options.items() if key in _FIELDS and value is not None}
    fields.update(vocab_size=model.vocab_size, hidden_size=model.hidden_size, hidden_act=model.hidden_act,
                  num_hidden_layers=model.num_hidden_layers, num_attention_heads=model.num_attention_heads,
                  intermediate_size=model.intermediate_size, hidden_dropout_prob=model.dropout_rate,
                  attention_probs_dropout_prob=model.attention_dropout_rate, **changes)
    base = model.options.get("config")
    return BertConfig(**fields) if base is None else base.replace(**fields)


class GoogleCheckpoint:
    """The checkpoint steps of a model object that runs a kerasbert family (``self.family``): the names of the
    family's Google format as bert4keras's ``variable_mapping``, and each variable as its layer holds it."""

    def checkpoint_format(self) -> Format:
        """The family's Google format (`kerasbert.weights.google.google_format`)."""
        from kerasbert.weights.google import google_format

        return google_format(self.family)

    def checkpoint_table(self) -> dict:
        """(layer, weight) -> the checkpoint's names, from the family's table."""
        return self.checkpoint_format().names

    def variable_mapping(self) -> dict[str, list[str]]:
        """Every layer the family's table knows -> its checkpoint names, in bert4keras's order."""
        return bert4keras_mapping(self.checkpoint_table(), self.num_hidden_layers)

    def load_variable(self, checkpoint, name: str):
        """The variable as the layer holds it: its vocabulary rows (or T5.1.1's output columns) through
        `load_embeddings`, transposed where the format stores it so (NSP's kernel, T5's position tables)."""
        value = super().load_variable(checkpoint, name)
        fmt = self.checkpoint_format()
        axis = vocab_axis(name, fmt)
        if axis == 0:
            value = self.load_embeddings(value)
        elif axis == -1:
            value = self.load_embeddings(value.T).T
        return value.T if fmt.transposed(name) else value

    def create_variable(self, name: str, value, dtype=None):
        """The variable as the checkpoint stores it (transposed where the format says)."""
        return super().create_variable(name, value.T if self.checkpoint_format().transposed(name) else value, dtype)


class BERT(GoogleCheckpoint, Transformer):
    """bert4keras's ``BERT``, and the kerasbert architecture every family below runs.

    Args:
        max_position: int. P, the position table's rows.
        segment_vocab_size: int. T, segment ids (0: no ``Input-Segment``).
        with_pool: bool or str. ``Pooler-Dense`` (tanh, or this activation) on ``[CLS]``.
        with_nsp: bool. ``NSP-Proba`` after it.
        with_mlm: bool or str. the masked LM, softmax or this activation.
        hierarchical_position: bool or float. positions past P from the same table (True: α = 0.4).
        custom_position_ids: bool. an ``Input-Position`` of each token's position (absolute positions only).
        shared_segment_embeddings: bool. not taken: segments have their own table.
        **kwargs: `Transformer`'s arguments.
    """

    kerasbert_family = "bert"

    def __init__(self, max_position, segment_vocab_size=2, with_pool=False, with_nsp=False, with_mlm=False,
                 hierarchical_position=None, custom_position_ids=False, shared_segment_embeddings=False, **kwargs):
        super().__init__(**kwargs)
        self.max_position, self.segment_vocab_size = max_position, segment_vocab_size
        self.with_pool, self.with_nsp, self.with_mlm = with_pool or with_nsp, with_nsp, with_mlm
        self.hierarchical_position, self.custom_position_ids = hierarchical_position, custom_position_ids
        if shared_segment_embeddings:
            raise fail(ConfigError, "shared_segment_embeddings", "False", "True",
                       f"kerasbert's segments have their own {names.EMBEDDING_SEGMENT} table")
        self._mask = self._biased = None

    # ------------------------------------------------------------------------------------ kerasbert's model
    @property
    def family(self) -> families.Family:
        """The kerasbert family whose architecture the steps run."""
        return families.get(self.kerasbert_family)

    @functools.cached_property
    def bert_config(self):
        """The `kerasbert.BertConfig` the arguments make (over the ``config`` given, if one was)."""
        return config_from(self, max_position_embeddings=self.max_position, type_vocab_size=self.segment_vocab_size)

    @functools.cached_property
    def architecture(self):
        """The family's architecture over new layers (`kerasbert.modeling.architecture.create`), each name
        prefixed; its dict keys stay the names the architecture reads."""
        hierarchical = 0.4 if self.hierarchical_position is True else self.hierarchical_position or None
        built = architecture.create(self.bert_config, self.family, dtype=self.options.get("dtype"),
                                    hierarchical=hierarchical)
        for layer in built.layers.values():
            layer.name = self.prefixed(layer.name)
        if self.layer_norm_conds[0] is not None:
            condition_norms(built, self.layer_norm_conds, self.initializer, self.prefixed(names.MLM_NORM),
                            self.with_mlm and self.family.heads == "bert")
        return built

    def keras_model(self) -> TransformerModel:
        """A `kerasbert.modeling.backbone.TransformerModel` carrying the config, family and application."""
        application = "lm" if self.family.causal else self.application
        try:
            model = TransformerModel(self.inputs, self.output, name=self.name or self.family.name,
                                     bert_config=self.bert_config, family=self.family.name, application=application)
        except ValueError as error:  # Keras: an output that needs a tensor which is not among the inputs
            if self.layer_norm_conds[0] is None:
                raise
            raise fail(ModelError, "layer_norm_cond", "a tensor computed from the model's inputs (give its Input as "
                       "additional_input_layers)", f"one the inputs {[t.name for t in self.inputs]} do not reach",
                       "build(layer_norm_cond=c, additional_input_layers=c_input)") from error
        model.jit_compile = xla_pays(model)
        return model

    # ------------------------------------------------------------------------------------ the steps
    def get_inputs(self):
        """``Input-Token``, ``Input-Segment`` where the model reads segments, ``Input-Position`` with custom
        position ids: ``[B, S]`` int32 each."""
        shape = (self.sequence_length,)
        inputs = [self.apply(layer=keras.Input, shape=shape, dtype="int32", name=names.TOKEN_INPUT)]
        if self.segment_vocab_size > 0 and self._reads_segments:
            inputs.append(self.apply(layer=keras.Input, shape=shape, dtype="int32", name=names.SEGMENT_INPUT))
        if self.custom_position_ids:
            if self.family.positions != "absolute":
                raise fail(ConfigError, "custom_position_ids", "a family with a position table", self.family.name,
                           "NEZHA's and RoFormer's positions are computed from the length")
            inputs.append(self.apply(layer=keras.Input, shape=shape, dtype="int32", name="Input-Position"))
        return inputs

    _reads_segments = True  # GPT-2 and GPT2-ML take token ids alone

    def apply_embeddings(self, inputs):
        """The architecture's embedding step (`kerasbert.modeling.encoder.Encoder.embed`)."""
        inputs = list(inputs) if isinstance(inputs, list) else [inputs]
        token = inputs.pop(0)
        segment = inputs.pop(0) if self.segment_vocab_size > 0 and self._reads_segments else None
        position = inputs.pop(0) if self.custom_position_ids else None
        self.position_bias = None  # this graph's: the steps may run again on other inputs (BERT-of-Theseus)
        self.attention_mask(token, segment)  # before the embeddings, where kerasbert's graph computes it
        return self.architecture.embed(token, segment, position)

    def apply_main_layers(self, inputs, index):
        """The architecture's block ``index`` (`kerasbert.modeling.encoder.Encoder.block`)."""
        if self.attention_key_size != self.attention_head_size:
            raise fail(ConfigError, "attention_key_size", f"the head size {self.attention_head_size} for "
                       f"{type(self).__name__}'s own blocks", str(self.attention_key_size),
                       "override apply_main_layers to build attention of another key size")
        if self.residual_attention_scores:
            raise fail(ConfigError, "residual_attention_scores", f"False for {type(self).__name__}'s own blocks",
                       "True", "kerasbert's attention keeps no scores between blocks; override apply_main_layers "
                       "with kerasbert.compat.layers.MultiHeadAttention for RealFormer")
        return self.architecture.block(index, inputs, self.block_mask(index), self.compute_position_bias(inputs))

    def block_mask(self, index: int):
        """The mask block ``index`` reads: `attention_mask`, and with it the bool bias a subclass's own
        ``compute_attention_bias`` gives (bert4keras hides a key the padding or the bias hides)."""
        if type(self).compute_attention_bias is BERT.compute_attention_bias:
            return self.attention_mask()
        bias = self.compute_attention_bias(index)
        if bias is None:
            return self.attention_mask()
        if self._biased is None or self._biased[0] is not bias:
            mask = self.apply(inputs=[self.attention_mask(), bias], layer=BiasMask, name="Attention-Bias-Mask")
            self._biased = (bias, mask)
        return self._biased[1]

    def apply_final_layers(self, inputs):
        """The architecture's final layers the ``with_*`` arguments ask for; the sequence output without any."""
        outputs = self.architecture.final(inputs, self.flags()) or [inputs]
        return outputs[0] if len(outputs) == 1 else outputs

    def flags(self) -> dict:
        """The ``with_*`` arguments of the family's final layers (`kerasbert.modeling.final_layers.FLAGS`)."""
        flags = checked_flags(self.family, **{flag: getattr(self, flag, False) for flag in FLAGS[self.family.heads]})
        return flags

    def attention_mask(self, token=None, segment=None):
        """The mask kerasbert's attention reads (`kerasbert.modeling.masks`): ``Attention-Mask`` ``[B, S]`` of
        the real tokens, or ``[B, S, S]`` under `LM_Mask` and `UniLM_Mask` (and a GPT's own causal mask); of
        ``token`` (and ``segment``) ids when given, which it keeps for the steps after, else of ``self.inputs``."""
        if token is None and self._mask is not None:
            return self._mask
        if token is None:
            token = self.inputs[0]
            segment = self.inputs[1] if self.segment_vocab_size > 0 and self._reads_segments else None
        if self.family.architecture == "gpt":
            self._mask = self.architecture.layers[names.LM_MASK]([token, token])
        elif self.application == "encoder":
            self._mask = self.apply(inputs=token, layer=PaddingMask, name=names.ATTENTION_MASK)
        else:
            if self.application == "unilm" and segment is None:
                raise fail(ConfigError, "segment_vocab_size", "> 0 for UniLM_Mask", "0",
                           "UniLM tells source from target by segment")
            self._mask = self.apply(inputs=[token, token if segment is None else segment], layer=AttentionMask,
                                    application=self.application, name=MASK_LAYERS[self.application])
        return self._mask

    def compute_attention_bias(self, inputs=None):
        """bert4keras's attention bias: None for an encoder (padding keys hidden through the Keras mask), the
        ``[B, S, S]`` bool mask of `LM_Mask` and `UniLM_Mask`."""
        return None if self.application == "encoder" and not self.family.causal else self.attention_mask()

    def compute_position_bias(self, inputs=None):
        """What every attention reads of the positions: NEZHA's relative ``[S, S, d]``, RoFormer's rotary sinusoids
        ``[1, S, d]``, d the attention's key size; None for a position table."""
        if self.position_bias is None and inputs is not None:
            if self.attention_key_size == self.bert_config.head_size or self.family.positions not in POSITIONS:
                self.position_bias = self.architecture.positions(inputs)
            else:  # a subclass's attention of another key size (GAU): the same positions, d wide
                layer, name, options = POSITIONS[self.family.positions]
                self.position_bias = self.apply(inputs=inputs, layer=layer, name=name, **options(self))
        return self.position_bias


class ALBERT(BERT):
    """bert4keras's ``ALBERT``: one block shared by every layer (``Transformer-MultiHeadSelfAttention``, ...)."""

    kerasbert_family = "albert"


class ALBERT_Unshared(BERT):  # noqa: N801 (bert4keras's name)
    """bert4keras's ``ALBERT_Unshared``: ALBERT's checkpoint in L blocks of their own."""

    kerasbert_family = "albert_unshared"


class NEZHA(BERT):
    """bert4keras's ``NEZHA``: relative positions in every attention, no position table."""

    kerasbert_family = "nezha"


class RoFormer(NEZHA):
    """bert4keras's ``RoFormer``: rotary positions on every attention's queries and keys."""

    kerasbert_family = "roformer"


class RoFormerV2(RoFormer):
    """bert4keras's ``RoFormerV2``: RoFormer without biases, its norms without weights."""

    kerasbert_family = "roformer_v2"

    def initializer(self, shape, dtype=None, order=2, gain=1.0):
        """bert4keras's RoFormer-V2 initializer: a truncated normal of ``1.13684723 / √d · gain · L^(-1/order)``,
        ``d`` the shape's input width (its output width for an embedding table or a tiny input)."""
        width = shape[1] if shape[0] > 10000 or shape[0] < 10 else shape[0]
        stddev = 1.13684723 / width**0.5 * gain * self.num_hidden_layers ** (-1.0 / order)
        return keras.random.truncated_normal(shape, stddev=stddev, dtype=dtype or keras.config.floatx())


class ELECTRA(BERT):
    """bert4keras's ``ELECTRA``: the discriminator (``with_discriminator``) instead of the pooler and MLM.

    Args:
        max_position: int. P.
        with_discriminator: bool or str. ``Discriminator-Dense`` and ``-Prediction`` (sigmoid, or this activation).
        **kwargs: `BERT`'s other arguments.
    """

    kerasbert_family = "electra"

    def __init__(self, max_position, with_discriminator=False, **kwargs):
        for refused in ("with_pool", "with_mlm"):
            if kwargs.pop(refused, False):
                raise fail(ModelError, refused, "no such argument for ELECTRA", f"{refused}=True",
                           "ELECTRA ends in its discriminator: with_discriminator=True")
        super().__init__(max_position, **kwargs)
        self.with_discriminator = with_discriminator


class GPT(LM_Mask, BERT):
    """bert4keras's ``GPT``: BERT's blocks under a causal mask, the token embedding as output (``LM-Activation``).

    Args:
        final_activation: str. the output's activation; softmax only.
        **kwargs: `BERT`'s arguments (without ``with_pool`` and ``with_mlm``).
    """

    kerasbert_family = "gpt"

    def __init__(self, final_activation="softmax", **kwargs):
        for refused in ("with_pool", "with_mlm"):
            if kwargs.pop(refused, False):
                raise fail(ModelError, refused, f"no such argument for {type(self).__name__}", f"{refused}=True",
                           "a GPT's output is its language model's")
        if final_activation != "softmax":
            raise fail(ConfigError, "final_activation", '"softmax"', repr(final_activation),
                       "kerasbert's LM-Activation is a softmax")
        super().__init__(**kwargs)
        self.final_activation = final_activation


class GPT2(GPT):
    """bert4keras's ``GPT2``: pre-norm blocks and ``Output-Norm``, token ids alone."""

    kerasbert_family = "gpt2"
    _reads_segments = False


class GPT2_ML(GPT):  # noqa: N801 (bert4keras's name)
    """bert4keras's ``GPT2_ML``: ``Embedding-Norm``, a norm before and after each feed-forward, token ids alone."""

    kerasbert_family = "gpt2_ml"
    _reads_segments = False


def condition_norms(built, conds: list, initializer, mlm_norm: str, with_mlm: bool) -> None:
    """Every LayerNorm of ``built`` replaced by a `ConditionalLayerNorm` of the same name and ε, bound to the
    condition (`kerasbert.modeling.conditional_norm.Conditioned`), and a conditional ``MLM-Norm`` where the model
    has one; RoFormer-V2's weightless norms stay."""
    condition, hidden_units, hidden_activation = conds
    def conditional(name: str, epsilon: float):
        return Conditioned(ConditionalLayerNorm(epsilon=epsilon, conditional=True, hidden_units=hidden_units,
                                                hidden_activation=hidden_activation, hidden_initializer=initializer,
                                                dtype=built.dtype, name=name), condition)

    for key, layer in list(built.layers.items()):
        if isinstance(layer, LayerNorm):
            built.layers[key] = conditional(layer.name, layer.epsilon)
    if with_mlm:
        built.layers[names.MLM_NORM] = conditional(mlm_norm, built.config.layer_norm_eps)


@keras.saving.register_keras_serializable(package="kerasbert")
class BiasMask(keras.layers.Layer):
    """``[mask, bias] -> [B, S, S]`` bool: the attention mask (``[B, S]`` keys or ``[B, S, S]``) and a bool bias
    (``[S, S]`` or ``[B or 1, S, S]``, True where query i may see key j) both allow the pair.

    Example:
    >>> from keras import ops
    >>> keys, bias = ops.array([[True, True, False]]), ops.eye(3, dtype="bool")[None]
    >>> ops.convert_to_numpy(BiasMask()([keys, bias]))[0].astype(int).tolist()
    [[1, 0, 0], [0, 1, 0], [0, 0, 0]]
    """

    def call(self, inputs):
        mask, bias = inputs
        if bias.dtype != "bool" or len(bias.shape) not in (2, 3):
            raise fail(ModelError, "compute_attention_bias", "a bool [S, S] or [B, S, S] mask for kerasbert's "
                       "own blocks", f"{bias.dtype} of rank {len(bias.shape)}", "an additive bias needs a "
                       "subclass's own attention (override apply_main_layers)")
        mask = mask[:, None, :] if len(mask.shape) == 2 else mask
        return keras.ops.logical_and(mask, bias[None] if len(bias.shape) == 2 else bias)

    def compute_output_spec(self, inputs):
        shape = inputs[0].shape
        return keras.KerasTensor((shape[0], shape[1], shape[1]), dtype="bool")

    def compute_mask(self, inputs, mask=None):
        return None


# the positions attention reads, made d = attention_key_size wide for a subclass's attention: layer, name, options
POSITIONS = {"rotary": (RotaryPositions, names.ROTARY_POSITION, lambda model: {"head_size": model.attention_key_size}),
             "relative": (RelativePositions, names.RELATIVE_POSITION,
                          lambda model: {"head_size": model.attention_key_size,
                                         "max_distance": model.bert_config.max_relative_position})}

CLASSES = {cls.kerasbert_family: cls for cls in (BERT, ALBERT, ALBERT_Unshared, NEZHA, RoFormer, RoFormerV2, ELECTRA,
                                                 GPT, GPT2, GPT2_ML)}
