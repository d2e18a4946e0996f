"""Task heads on a kerasbert backbone: ``cls``, ``tagging`` (softmax | CRF), ``spans``, ``embedding``, ``mlm``,
``nsp``.

Each head is built the bert4keras way: new layers on the backbone's own graph, then
``keras.Model(backbone.inputs, output)`` (a `TransformerModel`, which also carries the backbone's
config); the layer list stays flat, and the same layers written by hand give the same graph. Head layers
have fixed names (``CLS-Dense``, ``Tagging-CRF``, ..., from `kerasbert.layer_names`); ``Pooler``/``Pooler-Dense``,
``NSP-Proba`` and ``MLM-*`` are the checkpoint's final layers (`kerasbert.modeling.final_layers`, which
``build_transformer_model(with_pool=, with_nsp=, with_mlm=)`` adds too), so ``load_google_checkpoint`` fills them
from ``bert/pooler`` and ``cls/``. A head reads the backbone through its architecture
(`kerasbert.modeling.architecture`): its sequence output, and its last block run for ``[CLS]`` alone.

`loss_and_metrics(model)` (from `kerasbert.modeling.losses`, re-exported here) gives the matching
``compile`` arguments.
"""

from __future__ import annotations

import dataclasses

import keras

from kerasbert import layer_names as names
from kerasbert.choices import CRF_LR_MULTIPLIER
from kerasbert.errors import ModelError, fail
from kerasbert.modeling import architecture, families
from kerasbert.modeling.architecture import Architecture
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.config import config_of
from kerasbert.modeling.crf import ConditionalRandomField, crf_layers
from kerasbert.modeling.final_layers import MLM_HEADS, mlm_output, nsp_output, output_mlm, pooler_output
from kerasbert.modeling.global_pointer import EfficientGlobalPointer, GlobalPointer
from kerasbert.modeling.layers import Dropout, KerasMask, PaddingMask, TakeToken
from kerasbert.modeling.losses import loss_and_metrics  # noqa: F401 (the compile idiom heads.loss_and_metrics)
from kerasbert.modeling.masks import application_of
from kerasbert.modeling.pooling import MaskedMean, TakePositions

__all__ = ["EMBEDDING_POOLINGS", "cls", "crf_decoder", "embedding", "loss_and_metrics", "mlm", "nsp", "pretraining",
           "qa", "relations", "spans", "tagging"]


@dataclasses.dataclass(frozen=True)
class _Backbone:
    """What a head needs to know about a backbone: its architecture (config, family, layers by name)."""

    model: keras.Model
    encoder: Architecture

    @classmethod
    def of(cls, model: keras.Model, head: str) -> _Backbone:
        """The backbone ``heads.{head}`` reads: a model of an encoder family; a ModelError for a GPT's or a T5's,
        whose outputs are next-token probabilities."""
        family = families.of_model(model)
        if family.causal or family.architecture == "t5":  # every other architecture is an encoder (DeBERTa's too)
            encoders = [name for name in families.FAMILY_NAMES if not families.get(name).causal
                        and families.get(name).architecture != "t5"]
            raise fail(ModelError, f"heads.{head}", f"a backbone of an encoder family ({', '.join(encoders)})",
                       f"model={family.name!r}", "GPT and T5 are language "
                       "models: generate with kerasbert.generate, fine-tune with kerasbert train --task lm (GPT) or "
                       "--task seq2seq (T5)")
        return cls(model, architecture.of(model))

    config = property(lambda self: self.encoder.config)
    family = property(lambda self: self.encoder.family)
    layers = property(lambda self: self.encoder.layers)
    init = property(lambda self: self.encoder.initializer)
    dtype = property(lambda self: self.encoder.dtype)

    def model_of(self, output, head: str, extra_inputs: tuple = ()) -> TransformerModel:
        """``keras.Model(backbone.inputs + extra_inputs, output)``, named ``{backbone}-{head}``, carrying the
        backbone's config."""
        return TransformerModel([*self.model.inputs, *extra_inputs], output, name=f"{self.model.name}-{head}",
                                bert_config=self.config, family=self.family.name,
                                application=application_of(self.model))

    def sequence_output(self, head: str):
        """The encoder's ``[B, S, H]`` output, which must be the backbone's output."""
        found = self.encoder.sequence_output(self.model.outputs)
        if found is None:
            shapes = ", ".join(str(tuple(o.shape)) for o in self.model.outputs)
            raise fail(ModelError, f"{head} head", "a backbone whose output is the sequence output [batch, seq, H]",
                       f"outputs {shapes}", "build the backbone without with_pool / with_nsp / with_mlm / "
                       "with_discriminator")
        return found

    def first_token_output(self, head: str, name: str):
        """The sequence output at ``[CLS]``, ``[B, H]``, the last block run for ``[CLS]`` alone
        (`kerasbert.modeling.encoder.Encoder.first_token_output`, ``name`` its `TakeToken`): for BERT-base at
        128 tokens 6.9 % less work in the forward and backward passes, the same numbers."""
        return self.encoder.first_token_output(self.sequence_output(head), name)

    def padding_mask(self):
        """``Input-Token != 0``, the first position kept: the backbone's ``Attention-Mask`` output (or a new
        `PaddingMask`)."""
        if names.ATTENTION_MASK in self.layers:
            return self.layers[names.ATTENTION_MASK].output
        return PaddingMask(name=names.HEAD_PADDING_MASK)(self.model.inputs[0])

    def pooled_output(self, head: str, first_token: bool, activation: str = "tanh"):
        """The backbone's ``Pooler-Dense`` output, or a new ``Pooler``/``Pooler-Dense`` (``activation``), on
        `first_token_output` where ``first_token``; a backbone's pooler of another activation is a ModelError."""
        if names.POOLER_DENSE in self.layers:
            layer = self.layers[names.POOLER_DENSE]
            found = keras.activations.serialize(layer.activation)
            if found != keras.activations.serialize(keras.activations.get(activation)):
                raise fail(ModelError, f"{head} head", f"a Pooler-Dense of activation {activation!r}",
                           f"one of {found!r}", f'build the backbone with with_pool="{activation}" or without a pooler')
            return layer.output
        x = self.first_token_output(head, names.POOLER) if first_token else self.sequence_output(head)
        return pooler_output(x, int(x.shape[-1]), activation, self.init, self.dtype)

    def first_block_output(self):
        """The first Transformer block's ``[B, S, H]`` output (ALBERT's shared block: its first call's)."""
        return self.encoder.block_output(0)


def _check_count(argument: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(ModelError, argument, "an integer >= 1", repr(value))
    return value


def _check_dropout(argument: str, rate) -> float | None:
    if rate is not None and not (isinstance(rate, (int, float)) and 0 <= rate < 1):
        raise fail(ModelError, argument, "None or a rate in [0, 1)", repr(rate))
    return rate or None


def _check_activation(activation):
    try:
        keras.activations.get(activation)
    except (ValueError, TypeError):
        raise fail(ModelError, "activation", "a Keras activation name (softmax, sigmoid, linear, ...)",
                   repr(activation)) from None
    return activation


_POOLINGS = {  # backbone, first_token -> [B, H]
    "first": lambda b, first: b.first_token_output("cls", names.CLS_TOKEN) if first else TakeToken(
        0, dtype=b.dtype, name=names.CLS_TOKEN)(b.sequence_output("cls")),
    "pooler": lambda b, first: b.pooled_output("cls", first),
    "mean": lambda b, _: MaskedMean(dtype=b.dtype, name=names.CLS_MEAN)([b.sequence_output("cls"),
                                                                         b.padding_mask()]),
}


def cls(backbone: keras.Model, num_classes: int, *, pooling: str = "first", dropout: float | None = None,
        activation: str = "softmax", first_token_only: bool = True) -> keras.Model:
    """Sentence classification: pooled ``[CLS]`` -> optional ``CLS-Dropout`` -> ``CLS-Dense``.

    Args:
        backbone: keras.Model. from `build_transformer_model` (sequence output; ``"pooler"`` also
            accepts a ``with_pool`` backbone).
        num_classes: int. C, the width of ``CLS-Dense`` (H·C+C parameters).
        pooling: str. ``"first"``: ``CLS-token`` (``x[:, 0]``, bert4keras's Lambda); ``"pooler"``: the
            backbone's ``Pooler-Dense`` or a new one (filled from ``bert/pooler/dense`` by the loader);
            ``"mean"``: ``CLS-Mean``, the mean over non-padding tokens.
        dropout: float. rate of ``CLS-Dropout``; None for no dropout layer.
        activation: str. of ``CLS-Dense``: softmax, sigmoid (multi-label), linear (logits), ...
        first_token_only: bool. with ``"first"`` or a new pooler, run the last Transformer block for
            ``[CLS]`` alone (`_Backbone.first_token_output`): the same outputs, 6.9 % less work for BERT-base
            at 128 tokens. False: the last block for every position, bert4keras's graph.

    Returns:
        ``keras.Model(backbone.inputs, probabilities [B, C])``.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> model = cls(build_transformer_model("tiny", verbose=False), 3, dropout=0.1)
    >>> tuple(model.output.shape), model.layers[-1].name
    ((None, 3), 'CLS-Dense')
    """
    _check_count("num_classes", num_classes)
    dropout, activation = _check_dropout("dropout", dropout), _check_activation(activation)
    if pooling not in _POOLINGS:
        raise fail(ModelError, "pooling", " or ".join(map(repr, _POOLINGS)), repr(pooling))
    bb = _Backbone.of(backbone, "cls")
    x = _POOLINGS[pooling](bb, first_token_only)
    if dropout:
        x = keras.layers.Dropout(dropout, dtype=bb.dtype, name=names.CLS_DROPOUT)(x)  # [B, H]: too small for XLA's
    x = keras.layers.Dense(num_classes, activation=activation, kernel_initializer=bb.init, dtype=bb.dtype,
                           name=names.CLS_DENSE)(x)
    return bb.model_of(x, "cls")


def tagging(backbone: keras.Model, num_labels: int, *, crf: bool = False, bilstm_units: int | None = None,
            dropout: float | None = None, crf_lr_multiplier: float = CRF_LR_MULTIPLIER) -> keras.Model:
    """Token tagging (NER): optional ``Tagging-BiLSTM`` -> ``Tagging-Dropout`` -> ``Tagging-Dense`` -> ``Tagging-CRF``.

    The CRF gets the padding mask explicitly, ``[Tagging-Dense, Attention-Mask]`` (the mask the
    sequence output also carries as its Keras mask, which a custom layer could drop), and outputs the
    emissions with padded steps set to ``-inf`` as bert4keras's CRF does; the BiLSTM gets the same mask.
    Without a CRF, ``Tagging-Mask`` gives the softmax output that mask as its Keras mask, so ``compile``'s
    loss and metrics skip padding as on bert4keras's masked output. Under a CRF, ``Tagging-Dense`` starts
    from ``glorot_uniform`` (as the Dense of bert4keras's NER scripts), otherwise from the encoder's
    initializer. Decode with `crf_decoder` (in the graph) or `kerasbert.modeling.crf.ViterbiDecoder` (NumPy,
    per sequence).

    Args:
        backbone: keras.Model. from `build_transformer_model`, whose output is the sequence output.
        num_labels: int. K, the width of ``Tagging-Dense`` (H·K+K parameters; the CRF adds K·K).
        crf: bool. add the ``Tagging-CRF`` layer (``Tagging-Dense`` is then linear, else softmax).
        bilstm_units: int. units per direction of a ``Tagging-BiLSTM`` before the Dense; None for none.
        dropout: float. rate of ``Tagging-Dropout``; None for no dropout layer.
        crf_lr_multiplier: float. the CRF's ``lr_multiplier``: its transitions learn this many times faster
            than the encoder (`kerasbert.choices.CRF_LR_MULTIPLIER`; bert4keras's NER scripts use 100-1000).

    Returns:
        ``keras.Model(backbone.inputs, [B, S, K])``: probabilities, or CRF emissions.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> model = tagging(build_transformer_model("tiny", verbose=False), 5, crf=True)
    >>> tuple(model.output.shape), tuple(model.get_layer("Tagging-CRF").trans.shape)
    ((None, None, 5), (5, 5))
    """
    _check_count("num_labels", num_labels)
    dropout = _check_dropout("dropout", dropout)
    bb = _Backbone.of(backbone, "tagging")
    x, mask = bb.sequence_output("tagging"), bb.padding_mask()
    if bilstm_units is not None:
        lstm = keras.layers.LSTM(_check_count("bilstm_units", bilstm_units), return_sequences=True, dtype=bb.dtype)
        x = keras.layers.Bidirectional(lstm, dtype=bb.dtype, name=names.TAGGING_BILSTM)(x, mask=mask)
    if not crf:  # the softmax output carries the padding mask, for compile's loss and metrics
        x = KerasMask(dtype=bb.dtype, name=names.TAGGING_MASK)([x, mask])
    if dropout:
        x = Dropout(dropout, dtype=bb.dtype, name=names.TAGGING_DROPOUT)(x)  # [B, S, H]: kerasbert's, as the encoder's
    # under a CRF, Keras's default initializer (as bert4keras's NER scripts): the emissions start at the scale of
    # the CRF's glorot transitions, not at the encoder's 0.02, which learned a lower entity F1 from the same steps
    init = "glorot_uniform" if crf else bb.init
    x = keras.layers.Dense(num_labels, activation=None if crf else "softmax", kernel_initializer=init, dtype=bb.dtype,
                           name=names.TAGGING_DENSE)(x)
    if crf:
        x = ConditionalRandomField(crf_lr_multiplier, dtype=bb.dtype, name=names.TAGGING_CRF)([x, mask])
    return bb.model_of(x, "tagging")


def crf_decoder(model: keras.Model) -> keras.Model:
    """The Viterbi paths of a CRF tagging model, in the graph: ``keras.Model(inputs, [B, S] int32)``.

    Shares every layer (and weight) with ``model``; padded steps get the label -1.

    Example:
    >>> import numpy as np
    >>> from kerasbert import build_transformer_model
    >>> decoder = crf_decoder(tagging(build_transformer_model("tiny", verbose=False), 5, crf=True))
    >>> int(decoder.predict([np.array([[2, 9, 3, 0]]), np.zeros((1, 4))], verbose=0)[0, -1])
    -1
    """
    crfs = crf_layers(model)
    if len(crfs) != 1:
        raise fail(ModelError, "crf_decoder", "a model with one ConditionalRandomField layer",
                   f"{len(crfs)} in {model.name}", "build it with heads.tagging(..., crf=True)")
    crf = crfs[0]
    return TransformerModel(model.inputs, crf(crf.input, decode=True), name=f"{model.name}-decoder",
                            bert_config=config_of(model), family=families.of_model(model).name,
                            application=application_of(model))


def mlm(backbone: keras.Model) -> keras.Model:
    """Masked-LM head, as ``with_mlm=True``: probabilities over the vocabulary ``[B, S, V]``.

    Output weights tied to ``Embedding-Token``; ``MLM-Dense``/``MLM-Norm`` from
    ``cls/predictions/transform``, ``MLM-Bias`` from ``cls/predictions/output_bias``. On RoFormer-V2 it is that
    family's own MLM, the ``Output-*`` layers (`output_mlm`). ELECTRA's discriminator has none (bert4keras
    refuses ``with_mlm`` for it): a `ModelError`.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> tuple(mlm(build_transformer_model("tiny", verbose=False)).output.shape)
    (None, None, 128)
    """
    bb = _Backbone.of(backbone, "mlm")
    _check_pretraining_head(bb, "mlm", MLM_HEADS, "with_discriminator=True for ELECTRA's "
                            "replaced-token head, or a task head (cls, tagging, spans)")
    return bb.model_of(_mlm_output(bb, bb.sequence_output("mlm")), "mlm")


def _mlm_output(bb: _Backbone, x):
    """New masked-LM layers on ``x`` ``[..., H]``: BERT's ``MLM-*`` (`mlm_output`), RoFormer-V2's ``Output-*``
    (`output_mlm`), both tied to the backbone's ``Embedding-Token``; an architecture's own (ModernBERT's
    ``mlm_output``) where it has one."""
    if hasattr(bb.encoder, "mlm_output"):
        return bb.encoder.mlm_output(x)
    embedding = bb.layers[names.EMBEDDING_TOKEN]
    if bb.family.heads == "roformer_v2":
        return output_mlm(x, embedding, bb.init, "softmax", bb.config.hidden_dropout_prob, bb.dtype)
    return mlm_output(x, embedding, bb.config.activation, bb.config.layer_norm_eps, bb.init, bb.dtype)


def pretraining(backbone: keras.Model) -> keras.Model:
    """Google ``run_pretraining``'s model: the masked LM run only at the positions it is given, ``[B, P, V]``.

    ``backbone`` is built ``with_mlm`` (and ``with_nsp`` where wanted), so that its checkpoint's masked-LM weights
    are loaded with it. The model takes one more input, ``Input-MLM-Positions`` ``[B, P]``: each row's predicted
    positions padded with 0 (`kerasbert.text.masking.predicted_positions`). ``MLM-Gather`` takes the sequence output
    there, and the masked LM (`_mlm_output`: new layers of the backbone's names, holding its weights, tied to its
    ``Embedding-Token``) runs on those P rows alone: the V-wide product and the transform cost P/S of the
    ``with_mlm`` head's, the same numbers at those positions. Its output takes the place of the backbone's
    masked-LM output (after ``NSP-Proba`` with ``with_nsp``); the weights keep their ``with_mlm`` names, so a
    checkpoint written from it loads into ``build_transformer_model(with_mlm=True)``.

    Example:
    >>> import numpy as np
    >>> from kerasbert import build_transformer_model
    >>> model = pretraining(build_transformer_model("tiny", with_mlm=True, verbose=False))
    >>> probs = model.predict([np.array([[2, 9, 4, 3]]), np.zeros((1, 4)), np.array([[2, 0]])], verbose=0)
    >>> [x.name for x in model.inputs], probs.shape
    (['Input-Token', 'Input-Segment', 'Input-MLM-Positions'], (1, 2, 128))
    """
    bb = _Backbone.of(backbone, "pretraining")
    _check_pretraining_head(bb, "pretraining", MLM_HEADS, "with_discriminator=True for ELECTRA")
    full = bb.encoder.logits_activation.output  # the with_mlm head's [B, S, V] output
    if not any(output is full for output in backbone.outputs):
        raise fail(ModelError, "heads.pretraining", "a backbone built with_mlm=True, its masked LM an output",
                   f"outputs {[tuple(o.shape) for o in backbone.outputs]}", "build it with with_mlm=True")
    positions = keras.Input((None,), dtype="int32", name=names.MLM_POSITIONS_INPUT)
    x = TakePositions(dtype=bb.dtype, name=names.MLM_GATHER)([_mlm_input(bb), positions])
    outputs = [_mlm_output(bb, x) if output is full else output for output in backbone.outputs]
    model = bb.model_of(outputs if len(outputs) > 1 else outputs[0], "pretraining", (positions,))
    for layer in model.layers:  # the new masked-LM layers take the loaded ones' weights
        loaded = bb.layers.get(layer.name)
        if loaded is not None and loaded is not layer:
            layer.set_weights(loaded.get_weights())
    return model


def _mlm_input(bb: _Backbone):
    """The sequence output the backbone's masked LM reads: the input of its first layer (ALBERT's shared block
    names only its first call's output, so the last block's output is found there)."""
    first = names.OUTPUT_MAPPING if bb.family.heads == "roformer_v2" else names.MLM_DENSE
    return bb.layers[first if first in bb.layers else names.OUTPUT_MLM_DROPOUT].input


def nsp(backbone: keras.Model) -> keras.Model:
    """Next-sentence head, as ``with_nsp=True``: ``Pooler``/``Pooler-Dense`` then ``NSP-Proba`` ``[B, 2]``.

    The families whose checkpoints hold BERT's pre-training layers have one (BERT, ALBERT, NEZHA, RoFormer);
    ELECTRA and RoFormer-V2 have none (bert4keras refuses ``with_nsp`` for them): a `ModelError`.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> tuple(nsp(build_transformer_model("tiny", verbose=False)).output.shape)
    (None, 2)
    """
    bb = _Backbone.of(backbone, "nsp")
    _check_pretraining_head(bb, "nsp", ("bert",), "heads.cls for a sentence-pair classifier")
    return bb.model_of(nsp_output(bb.pooled_output("nsp", False), bb.init, bb.dtype), "nsp")


def _check_pretraining_head(bb: _Backbone, head: str, kinds: tuple[str, ...], hint: str) -> None:
    """A ModelError where the backbone's family has no such pre-training layers (its ``heads`` not in ``kinds``)."""
    if bb.family.heads not in kinds:
        having = [name for name in families.FAMILY_NAMES if families.get(name).heads in kinds]
        raise fail(ModelError, f"heads.{head}", f"a backbone of a family with {head.upper()} layers "
                   f"({', '.join(having)})", f"model={bb.family.name!r}, whose checkpoints hold none", hint)


def spans(backbone: keras.Model, num_types: int, *, head_size: int = 64, efficient: bool = False,
          rope: bool = True) -> keras.Model:
    """Span extraction (nested NER): ``Span-GlobalPointer``, logits ``[B, K, S, S]`` per entity type.

    ``[b, k, i, j] > 0`` predicts an entity of type ``k`` from token ``i`` to token ``j``; spans that start or end
    on padding, or end before they start, are -inf. `loss_and_metrics` gives bert4keras's multilabel
    categorical cross-entropy and span F1 (`kerasbert.modeling.global_pointer`).

    Args:
        backbone: keras.Model. from `build_transformer_model`, whose output is the sequence output.
        num_types: int. K, the number of entity types (the pointer's heads).
        head_size: int. D, the size of each span query and key.
        efficient: bool. bert4keras's ``EfficientGlobalPointer`` (one shared query/key, per-type biases).
        rope: bool. rotate queries and keys by their positions.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> tuple(spans(build_transformer_model("tiny", verbose=False), 3, head_size=8).output.shape)
    (None, 3, None, None)
    """
    layer = EfficientGlobalPointer if efficient else GlobalPointer
    bb = _Backbone.of(backbone, "spans")
    x = layer(_check_count("num_types", num_types), _check_count("head_size", head_size), RoPE=rope,
              dtype=bb.dtype, name=names.SPAN_POINTER)([bb.sequence_output("spans"), bb.padding_mask()])
    return bb.model_of(x, "spans")


def qa(backbone: keras.Model) -> keras.Model:
    """Extractive question answering: ``QA-Dense`` (2 units) over the sequence output, each position's start and end
    logits ``[B, S, 2]`` (`kerasbert.finetune.qa`).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> tuple(qa(build_transformer_model("tiny", verbose=False)).output.shape)
    (None, None, 2)
    """
    bb = _Backbone.of(backbone, "qa")
    x = keras.layers.Dense(2, kernel_initializer=bb.init, dtype=bb.dtype, name=names.QA_DENSE)(bb.sequence_output("qa"))
    return bb.model_of(x, "qa")


def relations(backbone: keras.Model, predicates: int, head_size: int = 64) -> keras.Model:
    """GPLinker (`kerasbert.finetune.relation`): the entity pointer ``[B, 2, S, S]`` (subjects, objects), and the head
    and the tail pointers ``[B, P, S, S]`` of each predicate (``EfficientGlobalPointer``s; the last two without
    rotary positions or the lower-triangle mask, as bert4keras's GPLinker example).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> model = relations(build_transformer_model("tiny", verbose=False), 3, head_size=8)
    >>> [tuple(output.shape) for output in model.outputs]
    [(None, 2, None, None), (None, 3, None, None), (None, 3, None, None)]
    """
    bb = _Backbone.of(backbone, "relations")
    x = [bb.sequence_output("relations"), bb.padding_mask()]
    entity = EfficientGlobalPointer(2, _check_count("head_size", head_size), dtype=bb.dtype,
                                    name=names.RELATION_ENTITY)(x)
    pointers = [EfficientGlobalPointer(_check_count("predicates", predicates), head_size, RoPE=False, tril_mask=False,
                                       dtype=bb.dtype, name=name)(x)
                for name in (names.RELATION_HEAD, names.RELATION_TAIL)]
    return bb.model_of([entity, *pointers], "relations")


def _masked_mean(bb: _Backbone, x, name: str):
    return MaskedMean(dtype=bb.dtype, name=name)([x, bb.padding_mask()])


EMBEDDING_POOLINGS = {  # backbone -> [B, H]
    "cls": lambda b: b.first_token_output("embedding", names.VECTOR_CLS),
    "mean": lambda b: _masked_mean(b, b.sequence_output("embedding"), names.VECTOR_MEAN),
    "first_last_avg": lambda b: _masked_mean(b, keras.layers.Average(dtype=b.dtype, name=names.VECTOR_FIRST_LAST)(
        [b.first_block_output(), b.sequence_output("embedding")]), names.VECTOR_MEAN),
    "pooler": lambda b: b.pooled_output("embedding", True),
    "linear": lambda b: b.pooled_output("embedding", True, "linear"),
}


def embedding(backbone: keras.Model, pooling: str = "cls", *, normalize: bool = True) -> keras.Model:
    """Sentence vectors: the backbone's output pooled to one ``[B, H]`` vector per text, optionally of unit length.

    The poolings are those of sentence-transformers and of bert4keras's similarity scripts:

    - ``"cls"``: the ``[CLS]`` token's output (``Vector-CLS``);
    - ``"mean"``: the mean over non-padding tokens (``Vector-Mean``);
    - ``"first_last_avg"``: the mean over non-padding tokens of the average of the first and the last Transformer
      blocks' outputs (``Vector-First-Last``, then ``Vector-Mean``), as BERT-whitening and CoSENT define it;
    - ``"pooler"``: BERT's ``Pooler-Dense`` on ``[CLS]`` (tanh; the backbone's, or a new one the loader fills
      from ``bert/pooler/dense``);
    - ``"linear"``: a linear ``Pooler-Dense`` on ``[CLS]``, bert4keras's ``with_pool="linear"`` (SimBERT).

    ``normalize`` adds ``Vector-Normalize`` (L2, no weights), so the dot product of two vectors is their cosine.

    Args:
        backbone: keras.Model. from `build_transformer_model` (its output the sequence output; ``"pooler"`` and
            ``"linear"`` also accept a backbone built ``with_pool`` of that activation).
        pooling: str. one of `EMBEDDING_POOLINGS`.
        normalize: bool. scale each vector to unit L2 norm.

    Returns:
        ``keras.Model(backbone.inputs, vectors [B, H])``.

    Example:
    >>> import numpy as np
    >>> from kerasbert import build_transformer_model
    >>> model = embedding(build_transformer_model("tiny", verbose=False), "mean")
    >>> vectors = model.predict([np.array([[2, 9, 3, 0]]), np.zeros((1, 4))], verbose=0)
    >>> vectors.shape, round(float(np.linalg.norm(vectors[0])), 5)
    ((1, 32), 1.0)
    """
    if pooling not in EMBEDDING_POOLINGS:
        raise fail(ModelError, "pooling", " or ".join(map(repr, EMBEDDING_POOLINGS)), repr(pooling))
    bb = _Backbone.of(backbone, "embedding")
    x = EMBEDDING_POOLINGS[pooling](bb)
    if normalize:
        x = keras.layers.UnitNormalization(dtype=bb.dtype, name=names.VECTOR_NORMALIZE)(x)
    return bb.model_of(x, "embedding")
