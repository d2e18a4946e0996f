"""build_transformer_model(): the functional graph of BERT and its families, with bert4keras's layer names.

The family's architecture (`kerasbert.modeling.architecture`) creates the layers and wires them, top to bottom
as in bert4keras: embeddings, one transformer block per layer index, then the optional pre-training layers. Here
are the arguments: the config, its checks, the inputs and the model that carries the config.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling import architecture, families
from kerasbert.modeling.backbone import TransformerModel
from kerasbert.modeling.config import BertConfig, resolve_config
from kerasbert.modeling.encoder import checked_flags
from kerasbert.modeling.families import Family
from kerasbert.modeling.masks import check_application
from kerasbert.perf.xla import xla_pays
from kerasbert.weights.checkpoint import load_checkpoint

# bert4keras keyword arguments that name a BertConfig field differently.
_BERT4KERAS_ALIASES = {
    "max_position": "max_position_embeddings",
    "segment_vocab_size": "type_vocab_size",
    "attention_dropout_rate": "attention_probs_dropout_prob",
}


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
    model: str | None = None,
    application: str = "encoder",
    *,
    config: BertConfig | dict | None = None,
    with_pool: bool | str = False,
    with_nsp: bool = False,
    with_mlm: bool | str = False,
    with_discriminator: bool | str = False,
    sequence_length: int | None = None,
    keep_tokens: Sequence[int] | None = None,
    dropout_rate: float | None = None,
    hierarchical_position: bool | float | None = None,
    name: str | None = None,
    allow_missing: bool = False,
    verbose: bool = True,
    dtype: str | None = None,
    **overrides,
) -> TransformerModel:
    """Build a functional Keras encoder of a bert4keras family from a config, optionally loading a Google or
    Hugging Face checkpoint.

    Same arguments and meaning as bert4keras's ``build_transformer_model``.

    Args:
        config_path: str. a ``bert_config.json`` or Hugging Face ``config.json`` path, a folder holding one, or a
            preset name.
        checkpoint_path: str. a Google TF1 checkpoint (prefix, folder, ``.index`` or ``.data-*``), or Hugging Face
            weights (a folder, ``model.safetensors``, ``pytorch_model.bin`` or a sharded ``*.index.json``).
        model: str. the family: ``bert`` (``roberta``), ``albert``, ``albert_unshared``, ``nezha``, ``electra``,
            ``roformer``, ``roformer_v2`` (`kerasbert.modeling.families`); None: the ``model_type`` of a Hugging
            Face config, else ``bert``.
        application: str. what each position attends to (`kerasbert.modeling.masks`): ``"encoder"`` every real
            token, ``"lm"`` those up to itself (a language model), ``"unilm"`` the source (segment 0) both ways and
            the target (segment 1) causally (sequence to sequence). Both imply ``with_mlm``, as in bert4keras:
            the MLM output then gives next-token probabilities at each position.
        config: BertConfig or dict. instead of ``config_path``.
        with_pool: bool or str. add ``Pooler``/``Pooler-Dense`` (tanh, or the activation given).
        with_nsp: bool. add ``NSP-Proba`` (implies the pooler).
        with_mlm: bool or str. add the masked-LM head tied to ``Embedding-Token`` (softmax or the activation).
        with_discriminator: bool or str. ELECTRA: add ``Discriminator-Dense``/``-Prediction`` (sigmoid or the
            activation).
        sequence_length: int. fix the input length; ``None`` accepts any length the positions allow.
        keep_tokens: list of int. keep only these vocabulary rows (word embeddings and MLM bias).
        dropout_rate: float. overrides ``hidden_dropout_prob``.
        hierarchical_position: bool or float. absolute positions beyond P, up to P², from the same table
            (`kerasbert.modeling.layers.PositionEmbedding`; True is α = 0.4).
        name: str. the model's name.
        allow_missing: bool. load even when the checkpoint lacks some variables (they stay *NEW*).
        verbose: bool. print the per-variable load log.
        dtype: str. a Keras dtype policy for every layer, e.g. ``"mixed_float16"``.
        **overrides: BertConfig fields to change (bert4keras's ``max_position``,
            ``segment_vocab_size``, ``attention_dropout_rate`` are accepted too).

    Returns:
        A functional `TransformerModel` that carries its `BertConfig` (`kerasbert.config_of`) and family, with
        inputs ``[Input-Token, Input-Segment]``. Its output is the sequence
        output ``[B, S, H]`` when no head flag is set; otherwise the pooled (or NSP) output and/or
        the MLM probabilities, in that order, as bert4keras returns them. Every sequence output (embeddings,
        ``Transformer-{i}-*``) carries ``Input-Token != 0`` (the first position kept) as its Keras mask, as in
        bert4keras, for layers wired on it (a CRF, a masked pooling); attention reads ``Attention-Mask``. Its
        ``predict`` compiles
        with XLA when `xla_pays` (on a GPU, models of `XLA_MIN_PARAMS` parameters and more): once per input shape, so
        pad inputs to one length (or a few), or set ``model.jit_compile = False``; ``compile`` sets it anew.

    Example:
    >>> bert = build_transformer_model("tiny", with_pool=True, verbose=False)
    >>> [t.name for t in bert.inputs], tuple(bert.output.shape)
    (['Input-Token', 'Input-Segment'], (None, 32))
    >>> albert = build_transformer_model("tiny", model="albert", embedding_size=16, verbose=False)
    >>> albert.family, tuple(albert.get_layer("Embedding-Mapping").kernel.shape)
    ('albert', (16, 32))
    """
    cfg, dropout_rate = _resolve(config_path, config, keep_tokens, dropout_rate, overrides)
    family = families.resolve(model, cfg)
    application = check_application(application, family.name)
    flags = checked_flags(family, with_pool=with_pool, with_nsp=with_nsp, with_mlm=with_mlm,
                          with_discriminator=with_discriminator)
    flags["with_mlm"] = with_mlm or application != "encoder"  # a language model's output: next-token probabilities
    hierarchical = 0.4 if hierarchical_position is True else hierarchical_position or None
    _check_length(sequence_length, cfg, family, hierarchical)
    cfg = cfg.replace(hidden_dropout_prob=dropout_rate)

    built = architecture.create(cfg, family, dtype=dtype, hierarchical=hierarchical)
    inputs = built.inputs(sequence_length)
    outputs = built.outputs(inputs, application, flags)
    bert = TransformerModel(inputs, outputs[0] if len(outputs) == 1 else outputs, name=name or family.name,
                            bert_config=cfg, family=family.name, application=application)
    bert.jit_compile = xla_pays(bert)  # predict with XLA on a GPU for BERT-small and up (see xla_pays)
    if checkpoint_path is not None:
        load_checkpoint(bert, checkpoint_path, keep_tokens=keep_tokens, allow_missing=allow_missing, verbose=verbose)
    return bert


def _check_length(sequence_length: int | None, cfg: BertConfig, family: Family, hierarchical) -> None:
    """A fixed ``sequence_length`` within what the positions allow: P (P² hierarchical) for a position table."""
    limit = families.max_length(family, cfg, hierarchical)
    if sequence_length is not None and not 0 < sequence_length <= (limit or sequence_length):
        where = "max_position_embeddings" + (" squared, hierarchical" if hierarchical else "")
        raise fail(ModelError, "sequence_length", f"1 to {limit} ({where})" if limit else "a positive length",
                   str(sequence_length))
