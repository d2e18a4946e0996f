"""Hugging Face folders of RoBERTa, XLM-R and DistilBERT written by the tests: random weights in transformers'
names and shapes (``RobertaForMaskedLM`` with a pooler, ``XLMRobertaForMaskedLM``, ``DistilBertForMaskedLM``),
batches padded with each family's padding id, and NumPy forms of transformers' masked-LM heads.

The names here are spelled by the test from transformers' modules, not read from kerasbert's tables, so a wrong row
in `kerasbert.weights.hf_encoders` shows up as a missing name or a difference.
"""

from __future__ import annotations

import json
import os

import numpy as np
from safetensors.numpy import save_file
from scipy.special import erf

# RoBERTa's and XLM-R's: pad 1, 20 positions after the two reserved rows; ε 1e-5 (keras-hub's, fixed)
ROBERTA = {"vocab_size": 60, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
           "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 22, "type_vocab_size": 1,
           "initializer_range": 0.02, "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0,
           "eos_token_id": 2, "position_embedding_type": "absolute"}
DISTILBERT = {"vocab_size": 60, "dim": 16, "n_layers": 2, "n_heads": 2, "hidden_dim": 32, "activation": "gelu",
              "dropout": 0.1, "attention_dropout": 0.1, "max_position_embeddings": 20, "sinusoidal_pos_embds": False,
              "initializer_range": 0.02, "pad_token_id": 0, "qa_dropout": 0.1, "seq_classif_dropout": 0.2,
              "tie_weights_": True}
MODEL_TYPES = {"roberta_en": "roberta", "xlm_roberta": "xlm-roberta", "distilbert": "distilbert"}
PREFIX = {"roberta_en": "roberta", "xlm_roberta": "roberta", "distilbert": "distilbert"}
# the buffers and tied copies a transformers folder holds beside the weights
TIED = ("lm_head.decoder.weight", "lm_head.decoder.bias", "vocab_projector.weight")


def config(family: str) -> dict:
    return {"model_type": MODEL_TYPES[family], **(DISTILBERT if family == "distilbert" else ROBERTA)}


def _random(shapes: dict, seed: int) -> dict[str, np.ndarray]:
    """Random float32 values; norm weights near 1."""
    rng = np.random.default_rng(seed)
    return {name: (rng.normal(0.0, 0.2, shape) + (1.0 if name.endswith(("LayerNorm.weight", "layer_norm.weight"))
                                                  else 0.0)).astype(np.float32) for name, shape in shapes.items()}


def _roberta_block(prefix: str, h: int, inner: int) -> dict:
    shapes = {f"{prefix}.attention.self.{p}.{w}": (h, h) if w == "weight" else (h,)
              for p in ("query", "key", "value") for w in ("weight", "bias")}
    shapes.update({f"{prefix}.attention.output.dense.weight": (h, h), f"{prefix}.attention.output.dense.bias": (h,),
                   f"{prefix}.intermediate.dense.weight": (inner, h), f"{prefix}.intermediate.dense.bias": (inner,),
                   f"{prefix}.output.dense.weight": (h, inner), f"{prefix}.output.dense.bias": (h,)})
    shapes.update({f"{prefix}.{norm}.{w}": (h,) for norm in ("attention.output.LayerNorm", "output.LayerNorm")
                   for w in ("weight", "bias")})
    return shapes


def _distilbert_block(prefix: str, h: int, inner: int) -> dict:
    shapes = {f"{prefix}.attention.{p}.{w}": (h, h) if w == "weight" else (h,)
              for p in ("q_lin", "k_lin", "v_lin", "out_lin") for w in ("weight", "bias")}
    shapes.update({f"{prefix}.ffn.lin1.weight": (inner, h), f"{prefix}.ffn.lin1.bias": (inner,),
                   f"{prefix}.ffn.lin2.weight": (h, inner), f"{prefix}.ffn.lin2.bias": (h,)})
    shapes.update({f"{prefix}.{norm}.{w}": (h,) for norm in ("sa_layer_norm", "output_layer_norm")
                   for w in ("weight", "bias")})
    return shapes


def roberta_tensors(cfg: dict, seed: int, pooler: bool = True, token_types: bool = True) -> dict[str, np.ndarray]:
    """RobertaForMaskedLM's (XLMRobertaForMaskedLM's) tensors, with ``roberta.pooler`` where ``pooler``; the token
    type row zero unless ``token_types`` (keras-hub's RoBERTa has no token types; its XLM-R adds the row)."""
    v, h, p = cfg["vocab_size"], cfg["hidden_size"], cfg["max_position_embeddings"]
    shapes = {"roberta.embeddings.word_embeddings.weight": (v, h), "roberta.embeddings.position_embeddings.weight":
              (p, h), "roberta.embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], h),
              "roberta.embeddings.LayerNorm.weight": (h,), "roberta.embeddings.LayerNorm.bias": (h,),
              "lm_head.dense.weight": (h, h), "lm_head.dense.bias": (h,), "lm_head.layer_norm.weight": (h,),
              "lm_head.layer_norm.bias": (h,), "lm_head.bias": (v,)}
    if pooler:
        shapes.update({"roberta.pooler.dense.weight": (h, h), "roberta.pooler.dense.bias": (h,)})
    for i in range(cfg["num_hidden_layers"]):
        shapes.update(_roberta_block(f"roberta.encoder.layer.{i}", h, cfg["intermediate_size"]))
    values = _random(shapes, seed)
    if not token_types:
        values["roberta.embeddings.token_type_embeddings.weight"][:] = 0.0
    values["lm_head.decoder.weight"] = values["roberta.embeddings.word_embeddings.weight"]
    values["lm_head.decoder.bias"] = values["lm_head.bias"]
    values["roberta.embeddings.position_ids"] = np.arange(p, dtype=np.int64)[None]
    return values


def distilbert_tensors(cfg: dict, seed: int) -> dict[str, np.ndarray]:
    """DistilBertForMaskedLM's tensors."""
    v, h, p = cfg["vocab_size"], cfg["dim"], cfg["max_position_embeddings"]
    shapes = {"distilbert.embeddings.word_embeddings.weight": (v, h),
              "distilbert.embeddings.position_embeddings.weight": (p, h),
              "distilbert.embeddings.LayerNorm.weight": (h,), "distilbert.embeddings.LayerNorm.bias": (h,),
              "vocab_transform.weight": (h, h), "vocab_transform.bias": (h,), "vocab_layer_norm.weight": (h,),
              "vocab_layer_norm.bias": (h,), "vocab_projector.bias": (v,)}
    for i in range(cfg["n_layers"]):
        shapes.update(_distilbert_block(f"distilbert.transformer.layer.{i}", h, cfg["hidden_dim"]))
    values = _random(shapes, seed)
    values["vocab_projector.weight"] = values["distilbert.embeddings.word_embeddings.weight"]
    return values


def tensors(family: str, seed: int = 0, **options) -> dict[str, np.ndarray]:
    cfg = config(family)
    return distilbert_tensors(cfg, seed) if family == "distilbert" else roberta_tensors(cfg, seed, **options)


def write(folder, cfg: dict, values: dict[str, np.ndarray]) -> str:
    """``config.json`` and ``model.safetensors`` in ``folder``."""
    os.makedirs(folder, exist_ok=True)
    save_file(values, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    return str(folder)


def folder(path, family: str, seed: int = 0, **options) -> str:
    return write(path, config(family), tensors(family, seed, **options))


def batch(family: str, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids with ``<s>`` / ``[CLS]`` first, rows of 12, 9 and 4 real tokens padded with the family's padding id
    (1 for RoBERTa and XLM-R, 0 for DistilBERT), never the padding id among the real tokens; segment ids 0."""
    pad, start = (0, 2) if family == "distilbert" else (1, 0)
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, config(family)["vocab_size"], (3, 12)).astype(np.int32)
    ids[:, 0] = start
    for row, length in enumerate((12, 9, 4)):
        ids[row, length:] = pad
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "real": ids != pad}


def inputs(model, data: dict) -> list:
    """A kerasbert model's inputs: token ids, and segment ids where it takes them."""
    return [data["token_ids"], data["segment_ids"]][:len(model.inputs)]


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps) * gamma + beta


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def mlm_logits(family: str, values: dict[str, np.ndarray], sequence: np.ndarray) -> np.ndarray:
    """transformers' masked-LM head on a sequence output, in NumPy: RobertaLMHead (dense, exact GELU, layer_norm
    of the config's ε, the word embeddings, bias) or DistilBERT's (vocab_transform, its activation, vocab_layer_norm
    of ε 1e-12, vocab_projector)."""
    x = sequence.astype(np.float64)
    if family == "distilbert":
        x = gelu(x @ values["vocab_transform.weight"].T + values["vocab_transform.bias"])
        x = layer_norm(x, values["vocab_layer_norm.weight"], values["vocab_layer_norm.bias"], 1e-12)
        return x @ values["distilbert.embeddings.word_embeddings.weight"].T + values["vocab_projector.bias"]
    x = gelu(x @ values["lm_head.dense.weight"].T + values["lm_head.dense.bias"])
    x = layer_norm(x, values["lm_head.layer_norm.weight"], values["lm_head.layer_norm.bias"], ROBERTA["layer_norm_eps"])
    return x @ values["roberta.embeddings.word_embeddings.weight"].T + values["lm_head.bias"]
