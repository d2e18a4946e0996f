"""What each position's attention may see: bert4keras's ``application`` argument.

``"encoder"``: every real token (`kerasbert.modeling.layers.PaddingMask`, ``[B, S]``: the ids other than 0, and the
first position whatever its id, as bert4keras keeps it). ``"lm"``: the tokens up to its own position, a language
model's causal mask (Radford et al. 2018). ``"unilm"``: the source (segment 0) both ways and the target (segment 1)
causally, UniLM's sequence-to-sequence mask (Dong et al. 2019, §2.3): position i sees position j where
``cumsum(s)[j] <= cumsum(s)[i]`` over the segment ids s. Both give ``[B, S, S]`` masks that also hide the same
padding keys, in one layer named as bert4keras names it.

Example:
>>> from keras import ops
>>> mask = AttentionMask("unilm")([ops.array([[2, 5, 6, 7, 0]]), ops.array([[0, 0, 1, 1, 0]])])
>>> ops.convert_to_numpy(mask)[0].astype(int).tolist()
[[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0]]
"""

from __future__ import annotations

import keras
from keras import ops

from kerasbert import layer_names as names
from kerasbert.annotated.formulas import Formula
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.modeling import families
from kerasbert.modeling.layers import PaddingMask, first_kept
from kerasbert.modeling.registry import register

APPLICATIONS = ("encoder", "lm", "unilm")  # bert4keras's application argument
MASK_LAYERS = {"encoder": names.ATTENTION_MASK, "lm": names.LM_MASK, "unilm": names.UNILM_MASK}  # by application


@register
class AttentionMask(keras.layers.Layer):
    """``[token_ids, segment_ids] -> [B, S, S]`` bool: whether query i may attend to key j, for ``"lm"`` or
    ``"unilm"``; padding keys (id 0 after the first position, `kerasbert.modeling.layers.first_kept`) are hidden in
    both.

    Args:
        application: str. ``"lm"`` (causal: j <= i) or ``"unilm"`` (by segment: cumsum(s)[j] <= cumsum(s)[i]).
        pad_id: int. the id that pads a row (`kerasbert.modeling.layers.first_kept`): 0, or the config's
            ``pad_token_id``.

    Example:
    >>> ops.convert_to_numpy(AttentionMask("lm")([ops.array([[0, 4, 0]]), ops.zeros((1, 3), "int32")]))[0].tolist()
    [[True, False, False], [True, True, False], [True, True, False]]
    """

    def __init__(self, application: str, pad_id: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = pad_id
        if application not in ("lm", "unilm"):
            raise fail(ModelError, "AttentionMask: application", '"lm" or "unilm"', repr(application))
        self.application = application

    def call(self, inputs):
        token_ids, segment_ids = inputs
        if self.application == "lm":
            order = ops.arange(ops.shape(token_ids)[1])[None]  # (1, S)
        else:
            order = ops.cumsum(ops.cast(segment_ids, "int32"), axis=1)  # (B, S): 0 on the source, then 1, 2, ...
        seen = order[:, None, :] <= order[:, :, None]  # (B or 1, S, S): query i, key j
        return ops.logical_and(seen, first_kept(token_ids, self.pad_id)[:, None, :])

    def compute_output_spec(self, inputs):
        token_ids = inputs[0]
        return keras.KerasTensor((token_ids.shape[0], token_ids.shape[1], token_ids.shape[1]), dtype="bool")

    def compute_mask(self, inputs, mask=None):
        return None

    def param_formula(self) -> Formula:
        return Formula.of("0")

    def get_config(self):
        padding = {"pad_id": self.pad_id} if self.pad_id else {}
        return {**super().get_config(), "application": self.application, **padding}


def attention_mask(application: str, token_ids, segment_ids, pad_id: int = 0):
    """The mask every attention layer of an ``application`` reads: ``[B, S]`` padding keys (``pad_id`` after the
    first position) for ``"encoder"``, `AttentionMask`'s ``[B, S, S]`` for ``"lm"`` and ``"unilm"``."""
    if application == "encoder":
        return PaddingMask(pad_id, name=names.ATTENTION_MASK)(token_ids)
    if application == "unilm" and segment_ids is None:
        raise fail(ConfigError, "application", 'a model with segment ids (type_vocab_size > 0) for "unilm"',
                   "type_vocab_size 0", 'UniLM tells source from target by segment; use application="lm"')
    segments = token_ids if segment_ids is None else segment_ids  # "lm" reads only the length of the second
    return AttentionMask(application, pad_id, name=MASK_LAYERS[application])([token_ids, segments])


def application_of(model: keras.Model) -> str:
    """The application a model was built as: its own (`TransformerModel`), else the one its mask layer names.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> lm = build_transformer_model("tiny", application="lm", verbose=False)
    >>> application_of(lm), application_of(keras.Model(lm.inputs, lm.outputs))
    ('lm', 'lm')
    """
    if getattr(model, "application", None) in APPLICATIONS:
        return model.application
    layers = {layer.name for layer in model.layers}
    return next((application for application, name in MASK_LAYERS.items() if name in layers), "encoder")


def check_application(application, family: str) -> str:
    """The application to build: ``application`` when it is one of `APPLICATIONS` and ``family`` can be it;
    ``"lm"`` for a causal family (GPT), which bert4keras builds causal whatever the application; else a ModelError.

    ELECTRA is an encoder only, as in bert4keras: its discriminator tells replaced tokens, it has no
    next-token output to generate with. A GPT has no segments to tell a source from a target by: no ``"unilm"``.

    Example:
    >>> check_application("encoder", "gpt2"), check_application("encoder", "bert")
    ('lm', 'encoder')
    """
    if application not in APPLICATIONS:
        raise fail(ModelError, "application", " or ".join(map(repr, APPLICATIONS)), repr(application),
                   "bert4keras's applications; a family is chosen with model=")
    if families.get(family).causal:
        if application == "unilm":
            raise fail(ModelError, "application", f'"lm" (or "encoder", the same) for model={family!r}',
                       repr(application), f"{family} is a causal language model; UniLM's sequence to sequence needs "
                       'a BERT, NEZHA or RoFormer: model="bert", application="unilm"')
        return "lm"
    if application != "encoder" and families.get(family).architecture == "t5":
        raise fail(ModelError, "application", f'"encoder" for model={family!r}', repr(application),
                   "T5's decoder is causal and reads its encoder through cross-attention; build the whole model "
                   "(model='t5.1.1') or its decoder (model='t5.1.1_decoder') with the default application")
    if application != "encoder" and families.get(family).architecture == "deberta":
        raise fail(ModelError, "application", f'"encoder" for model={family!r}', repr(application),
                   "DeBERTa is an encoder only, pre-trained with a masked LM; generate with a BERT, NEZHA or RoFormer")
    if application != "encoder" and family == "electra":
        raise fail(ModelError, "application", f'"encoder" for model={family!r}', repr(application),
                   "ELECTRA's discriminator has no next-token output; generate with a BERT, NEZHA or RoFormer")
    return application
