"""DeBERTa-v3's Hugging Face folders for the tests: a tiny ``deberta-v2`` config and DebertaV2ForMaskedLM's tensors
with random weights in the published names and shapes."""

from __future__ import annotations

import numpy as np

CONFIG = {"model_type": "deberta-v2", "vocab_size": 96, "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 64, "type_vocab_size": 0,
          "initializer_range": 0.02, "layer_norm_eps": 1e-7, "relative_attention": True, "max_relative_positions": -1,
          "position_buckets": 8, "pos_att_type": ["p2c", "c2p"], "share_att_key": True, "norm_rel_ebd": "layer_norm",
          "position_biased_input": False, "pad_token_id": 0, "pooler_hidden_size": 16, "pooler_hidden_act": "gelu"}


def deberta_tensors(cfg: dict, seed: int, head: str | None = "cls") -> dict[str, np.ndarray]:
    """DebertaV2ForMaskedLM's tensors for ``cfg``: linear weights ``[out, in]``, the relative table ``[2N, H]``;
    the masked LM under ``cls.predictions`` (transformers' legacy head), ``lm_predictions.lm_head`` (the released
    v3 files'), or none; the released files' replaced-token head beside it."""
    v, h, inner = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    e = cfg.get("embedding_size", h)
    rows = 2 * (cfg["position_buckets"] if cfg["position_buckets"] > 0 else cfg["max_relative_positions"])
    shapes = {"deberta.embeddings.word_embeddings.weight": (v, e), "deberta.embeddings.LayerNorm.weight": (h,),
              "deberta.embeddings.LayerNorm.bias": (h,), "deberta.encoder.rel_embeddings.weight": (rows, h),
              "deberta.encoder.LayerNorm.weight": (h,), "deberta.encoder.LayerNorm.bias": (h,)}
    if cfg["type_vocab_size"]:
        shapes["deberta.embeddings.token_type_embeddings.weight"] = (cfg["type_vocab_size"], e)
    if e != h:
        shapes["deberta.embeddings.embed_proj.weight"] = (h, e)
    for i in range(cfg["num_hidden_layers"]):
        p = f"deberta.encoder.layer.{i}."
        shapes.update({f"{p}attention.self.{x}_proj.{w}": (h, h) if w == "weight" else (h,)
                       for x in ("query", "key", "value") for w in ("weight", "bias")})
        shapes.update({f"{p}attention.output.dense.weight": (h, h), f"{p}intermediate.dense.weight": (inner, h),
                       f"{p}intermediate.dense.bias": (inner,), f"{p}output.dense.weight": (h, inner)})
        shapes.update({f"{p}{name}": (h,) for name in ("attention.output.dense.bias", "output.dense.bias",
                                                       "attention.output.LayerNorm.weight", "output.LayerNorm.weight",
                                                       "attention.output.LayerNorm.bias", "output.LayerNorm.bias")})
    if head == "cls":
        shapes.update({"cls.predictions.transform.dense.weight": (e, h), "cls.predictions.transform.dense.bias": (e,),
                       "cls.predictions.transform.LayerNorm.weight": (e,),
                       "cls.predictions.transform.LayerNorm.bias": (e,), "cls.predictions.bias": (v,)})
    if head == "lm_predictions":
        shapes.update({"lm_predictions.lm_head.dense.weight": (h, h), "lm_predictions.lm_head.dense.bias": (h,),
                       "lm_predictions.lm_head.LayerNorm.weight": (h,), "lm_predictions.lm_head.LayerNorm.bias": (h,),
                       "lm_predictions.lm_head.bias": (v,), "mask_predictions.dense.weight": (h, h),
                       "mask_predictions.classifier.weight": (1, h)})
    rng = np.random.default_rng(seed)
    return {name: (rng.normal(0.0, 0.2, shape) + (1.0 if name.endswith("LayerNorm.weight") else 0.0)).astype(
        np.float32) for name, shape in shapes.items()}
