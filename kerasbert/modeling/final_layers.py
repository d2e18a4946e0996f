"""The final layers of a checkpoint: BERT's pooler, NSP and masked LM, RoFormer-V2's MLM, ELECTRA's discriminator.

These are the layers a pre-training checkpoint holds after its encoder, with the names of the checkpoint tables
(``Pooler-Dense`` from ``bert/pooler/dense``, ``MLM-*`` from ``cls/predictions``, ...). The encoder
(`kerasbert.modeling.encoder.Encoder.final`) adds them for ``build_transformer_model(with_pool=, with_nsp=,
with_mlm=, with_discriminator=)``; the heads ``mlm``, ``nsp`` and the ``"pooler"`` poolings of
`kerasbert.modeling.heads` add the same layers to a backbone built without them.

Example:
>>> import keras
>>> x = keras.Input((None, 8))
>>> tuple(nsp_output(pooler_output(x, 8)).shape)
(None, 2)
"""

from __future__ import annotations

import keras

from kerasbert import layer_names as names
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.layers import Bias, Dropout, LayerNorm, TakeToken, get_activation

# the head flags each family's final layers take (bert4keras's ELECTRA takes neither with_pool nor with_mlm, its GPT
# neither: its output is its language model's; Hugging Face's RoBERTa has no NSP, DistilBERT neither pooler nor NSP)
FLAGS = {"bert": ("with_pool", "with_nsp", "with_mlm"), "electra": ("with_discriminator",),
         "roformer_v2": ("with_mlm",), "gpt": (), "t5": (), "roberta": ("with_pool", "with_mlm"),
         "distilbert": ("with_mlm",), "deberta": ("with_mlm",), "modernbert": ("with_mlm",)}
MLM_HEADS = tuple(kind for kind, flags in FLAGS.items() if "with_mlm" in flags)  # the `Family.heads` with a masked LM


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
               output_activation="softmax", norm=None, *, biases: tuple[bool, bool, bool] = (True, True, True)):
    """``MLM-Dense (H -> E) -> MLM-Norm -> x·Eᵀ (tied to Embedding-Token) -> MLM-Bias -> MLM-Activation``
    (``norm``: the ``MLM-Norm`` an architecture holds, a conditional one; None: a new LayerNorm; ``biases``: whether
    ``MLM-Dense`` has a bias, ``MLM-Norm`` a β, and ``MLM-Bias`` is there, all but ModernBERT's)."""
    dense_bias, norm_bias, output_bias = biases
    y = keras.layers.Dense(embedding.output_dim, activation=get_activation(activation), use_bias=dense_bias,
                           kernel_initializer=init, dtype=dtype, name=names.MLM_DENSE)(x)
    if norm is None:
        norm = LayerNorm(epsilon=epsilon, center=norm_bias, width_symbol=embedding.width_symbol, dtype=dtype,
                         name=names.MLM_NORM)
    y = norm(y)
    y = embedding(y, reverse=True)  # [B, S, H] -> [B, S, V]
    if output_bias:
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


def final_outputs(x, embedding, config: BertConfig, heads: str, init, flags: dict, dtype, mlm_norm=None) -> list:
    """The final layers the flags ask for, in bert4keras's order: BERT's pooled/NSP then MLM, ELECTRA's
    discriminator, RoFormer-V2's MLM (``heads``: the family's kind of final layers; ``mlm_norm``: an ``MLM-Norm``
    made before, as `mlm_output` takes it)."""
    if heads == "electra":
        activation = flags["with_discriminator"]
        return [discriminator_output(x, config, init, dtype, activation)] if activation else []
    if heads == "roformer_v2":
        return [output_mlm(x, embedding, init, flags["with_mlm"], config.hidden_dropout_prob, dtype)] \
            if flags["with_mlm"] else []
    outputs, with_pool, with_nsp, with_mlm = [], flags["with_pool"], flags["with_nsp"], flags["with_mlm"]
    if with_pool or with_nsp:
        activation = "tanh" if with_pool in (True, False) else with_pool
        pooled = pooler_output(x, config.hidden_size, activation, init, dtype)
        outputs.append(nsp_output(pooled, init, dtype) if with_nsp else pooled)
    if with_mlm:
        activation = "softmax" if with_mlm is True else with_mlm
        outputs.append(mlm_output(x, embedding, config.activation, config.layer_norm_eps, init, dtype, activation,
                                  mlm_norm))
    return outputs
