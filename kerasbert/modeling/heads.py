"""Task heads on a kerasbert backbone: ``cls``, ``tagging`` (softmax | CRF), ``spans``, ``embedding``, ``mlm``,
``nsp``.

Each head is built the bert4keras way: new layers on the backbone's own graph, then
``keras.Model(backbone.inputs, output)`` (a `TransformerModel`, which also carries the backbone's
config); the layer list stays flat, and the same layers written by hand give the same graph. Head layers
have fixed names (``CLS-Dense``, ``Tagging-CRF``, ..., from `kerasbert.layer_names`); ``Pooler``/``Pooler-Dense``,
``NSP-Proba`` and ``MLM-*`` are the names of the checkpoint table, so ``load_google_checkpoint`` fills them from
``bert/pooler`` and ``cls/``.
``build_transformer_model(with_pool=, with_nsp=, with_mlm=)`` builds its heads with the
same functions (`pooler_output`, `nsp_output`, `mlm_output`).

`loss_and_metrics(model)` (from `kerasbert.modeling.losses`, re-exported here) gives the matching
``compile`` arguments.
"""

from __future__ import annotations

import dataclasses

import keras

from kerasbert import layer_names as names
from kerasbert.choices import CRF_LR_MULTIPLIER
from kerasbert.errors import ModelError, fail
from kerasbert.modeling import families
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.config import BertConfig, config_of
from kerasbert.modeling.crf import ConditionalRandomField, crf_layers
from kerasbert.modeling.families import Family
from kerasbert.modeling.global_pointer import EfficientGlobalPointer, GlobalPointer
from kerasbert.modeling.layers import (
    Bias,
    Dropout,
    KerasMask,
    LayerNorm,
    MaskedMean,
    PaddingMask,
    TakeToken,
    get_activation,
)
from kerasbert.modeling.losses import loss_and_metrics  # noqa: F401 (the compile idiom heads.loss_and_metrics)
from kerasbert.modeling.masks import application_of

__all__ = ["EMBEDDING_POOLINGS", "cls", "crf_decoder", "embedding", "loss_and_metrics", "mlm", "nsp", "spans",
           "tagging"]


def pooler_output(x, hidden_size: int, activation="tanh", init="glorot_uniform", dtype=None):
    """``Pooler`` (``x[:, 0]``) then ``Pooler-Dense`` (``bert/pooler/dense``): ``[B, S, H] -> [B, H]``
    (``x`` of ``[B, H]``: ``Pooler-Dense`` alone, on ``[CLS]`` taken before)."""
    pooled = TakeToken(0, dtype=dtype, name=names.POOLER)(x) if len(x.shape) == 3 else x
    return keras.layers.Dense(hidden_size, activation=activation, kernel_initializer=init, dtype=dtype,
                              name=names.POOLER_DENSE)(pooled)


def nsp_output(pooled, init="glorot_uniform", dtype=None):
    """``NSP-Proba``: softmax over (is next, is random), kernel from ``cls/seq_relationship`` (transposed)."""
    return keras.layers.Dense(2, activation="softmax", kernel_initializer=init, dtype=dtype,
                              name=names.NSP_PROBA)(pooled)


def mlm_output(x, embedding, activation: str, epsilon: float, init="glorot_uniform", dtype=None,
               output_activation="softmax"):
    """``MLM-Dense (H -> E) -> MLM-Norm -> x·Eᵀ (tied to Embedding-Token) -> MLM-Bias -> MLM-Activation``."""
    y = keras.layers.Dense(embedding.output_dim, activation=get_activation(activation), kernel_initializer=init,
                           dtype=dtype, name=names.MLM_DENSE)(x)
    y = LayerNorm(epsilon=epsilon, width_symbol=embedding.width_symbol, dtype=dtype, name=names.MLM_NORM)(y)
    y = embedding(y, reverse=True)  # [B, S, H] -> [B, S, V]
    y = Bias(dtype=dtype, name=names.MLM_BIAS)(y)
    return keras.layers.Activation(output_activation, dtype=dtype, name=names.MLM_ACTIVATION)(y)


def output_mlm(x, embedding, init="glorot_uniform", output_activation="softmax", dropout: float = 0.0, dtype=None):
    """RoFormer-V2's masked LM: ``Output-Mapping`` (H -> E, no bias, where E differs) -> ``Output-MLM-Dropout``
    -> ``x·Eᵀ`` (tied to Embedding-Token) -> ``Output-MLM-Activation``."""
    if embedding.output_dim != x.shape[-1]:
        x = keras.layers.Dense(embedding.output_dim, use_bias=False, kernel_initializer=init, dtype=dtype,
                               name=names.OUTPUT_MAPPING)(x)
    x = embedding(Dropout(dropout, dtype=dtype, name=names.OUTPUT_MLM_DROPOUT)(x), reverse=True)
    activation = "softmax" if output_activation is True else output_activation
    return keras.layers.Activation(activation, dtype=dtype, name=names.OUTPUT_MLM_ACTIVATION)(x)


def discriminator_output(x, config: BertConfig, init="glorot_uniform", dtype=None, activation="sigmoid"):
    """ELECTRA's replaced-token discriminator: ``Discriminator-Dense`` (H, the config's activation) ->
    ``Discriminator-Prediction`` (1 per token, sigmoid or ``activation``)."""
    x = keras.layers.Dense(config.hidden_size, activation=get_activation(config.activation), kernel_initializer=init,
                           dtype=dtype, name=names.DISCRIMINATOR_DENSE)(x)
    return keras.layers.Dense(1, activation="sigmoid" if activation is True else activation, kernel_initializer=init,
                              dtype=dtype, name=names.DISCRIMINATOR_PREDICTION)(x)


@dataclasses.dataclass(frozen=True)
class _Backbone:
    """What a head needs to know about a backbone: its config (`config_of`), family and layers by name."""

    model: keras.Model
    config: BertConfig
    family: Family
    layers: dict
    init: object
    dtype: object

    @classmethod
    def of(cls, model: keras.Model) -> "_Backbone":
        layers = {layer.name: layer for layer in model.layers}
        config, family = config_of(model), families.of_model(model)
        first = names.block(None if family.shared_block else 0, names.FEED_FORWARD)
        init = layers[first].kernel_initializer  # the encoder's, shared by its layers
        return cls(model, config, family, layers, init, layers[names.EMBEDDING_TOKEN].dtype_policy.name)

    def last_block(self, part: str) -> keras.layers.Layer:
        """The layer ``part`` of the last block, ``L - 1`` (ALBERT's shared block: its one layer)."""
        index = None if self.family.shared_block else self.config.num_hidden_layers - 1
        return self.layers[names.block(index, part)]

    def model_of(self, output, head: str) -> TransformerModel:
        """``keras.Model(backbone.inputs, output)``, named ``{backbone}-{head}``, carrying the backbone's config."""
        return TransformerModel(self.model.inputs, output, name=f"{self.model.name}-{head}", bert_config=self.config,
                                family=self.family.name, application=application_of(self.model))

    def sequence_output(self, head: str):
        """The encoder's ``[B, S, H]`` output, which must be the backbone's output.

        ALBERT's shared ``Transformer-FeedForward-Norm`` is called L times and its ``.output`` is its first call's,
        so there the backbone's one output is taken, where the backbone has no layer past the encoder."""
        outputs = self.model.outputs
        if self.family.shared_block:
            past = [name for name in self.layers if names.part_of(name)[0] not in ("inputs", "embeddings", "encoder")]
            found = outputs[0] if len(outputs) == 1 and len(outputs[0].shape) == 3 and not past else None
        else:
            sequence = self.last_block(names.FEED_FORWARD_NORM).output
            found = sequence if any(output is sequence for output in outputs) else None
        if found is None:
            shapes = ", ".join(str(tuple(o.shape)) for o in outputs)
            raise fail(ModelError, f"{head} head", "a backbone whose output is the sequence output [batch, seq, H]",
                       f"outputs {shapes}", "build the backbone without with_pool / with_nsp / with_mlm / "
                       "with_discriminator")
        return found

    def first_token_output(self, head: str, name: str):
        """The sequence output at ``[CLS]``, ``[B, H]``, with the last block run for ``[CLS]`` alone.

        A head that reads only ``x[:, 0]`` never reads the last block's other positions, so they need no
        query, attention output, residual, norm or feed-forward there: `TakeToken` (``name``) takes position 0
        of the block's input, and the block's own layers run again on it, the attention with
        ``first_token=True`` (keys and values still from every position, and NEZHA's or RoFormer's positions).
        Same weights, names and checkpoint map; equal to ``sequence_output[:, 0]`` within float32 rounding; the
        block's work less its keys and values, (S-1)/S of it: for BERT-base at 128 tokens 6.9 % of the forward
        and backward passes.

        ALBERT's shared block is one set of layers called L times, and Keras names no call but the first: the
        input of its last call is not at hand, so there the head takes ``x[:, 0]`` of the sequence output
        (bert4keras's graph, the same numbers).
        """
        sequence = self.sequence_output(head)  # the backbone's output must be the last block's
        if self.family.shared_block:
            return TakeToken(0, dtype=self.dtype, name=name)(sequence)

        def block(part: str, step: str | None = None) -> keras.layers.Layer:
            return self.last_block(names.residual(part, step) if step else part)

        attention, feed_forward = names.ATTENTION, names.FEED_FORWARD
        inputs = list(block(attention).input)  # [x, mask], and the positions of NEZHA and RoFormer
        first = TakeToken(0, dtype=self.dtype, name=name)(inputs[0])
        y = block(attention, "Dropout")(block(attention)(inputs, first_token=True))
        x = block(attention, "Norm")(block(attention, "Add")([first, y]))
        y = block(feed_forward, "Dropout")(block(feed_forward)(x))
        return block(feed_forward, "Norm")(block(feed_forward, "Add")([x, y]))

    def padding_mask(self):
        """``Input-Token != 0``: the backbone's ``Attention-Mask`` output (or a new `PaddingMask`)."""
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
        return self.layers[names.block(None if self.family.shared_block else 0, names.FEED_FORWARD_NORM)].output


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
    bb = _Backbone.of(backbone)
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
    bb = _Backbone.of(backbone)
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
    bb = _Backbone.of(backbone)
    _check_pretraining_head(bb, "mlm", ("bert", "roformer_v2"), "with_discriminator=True for ELECTRA's "
                            "replaced-token head, or a task head (cls, tagging, spans)")
    x, embedding = bb.sequence_output("mlm"), bb.layers[names.EMBEDDING_TOKEN]
    if bb.family.heads == "roformer_v2":
        return bb.model_of(output_mlm(x, embedding, bb.init, "softmax", bb.config.hidden_dropout_prob, bb.dtype),
                           "mlm")
    y = mlm_output(x, embedding, bb.config.activation, bb.config.layer_norm_eps, bb.init, bb.dtype)
    return bb.model_of(y, "mlm")


def nsp(backbone: keras.Model) -> keras.Model:
    """Next-sentence head, as ``with_nsp=True``: ``Pooler``/``Pooler-Dense`` then ``NSP-Proba`` ``[B, 2]``.

    The families whose checkpoints hold BERT's pre-training layers have one (BERT, ALBERT, NEZHA, RoFormer);
    ELECTRA and RoFormer-V2 have none (bert4keras refuses ``with_nsp`` for them): a `ModelError`.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> tuple(nsp(build_transformer_model("tiny", verbose=False)).output.shape)
    (None, 2)
    """
    bb = _Backbone.of(backbone)
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
    bb = _Backbone.of(backbone)
    x = layer(_check_count("num_types", num_types), _check_count("head_size", head_size), RoPE=rope,
              dtype=bb.dtype, name=names.SPAN_POINTER)([bb.sequence_output("spans"), bb.padding_mask()])
    return bb.model_of(x, "spans")


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
    bb = _Backbone.of(backbone)
    x = EMBEDDING_POOLINGS[pooling](bb)
    if normalize:
        x = keras.layers.UnitNormalization(dtype=bb.dtype, name=names.VECTOR_NORMALIZE)(x)
    return bb.model_of(x, "embedding")
