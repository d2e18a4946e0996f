"""ModernBERT folders for the tests: random weights in transformers' names and shapes (`modernbert_tensors`), and a
NumPy forward pass of the paper's and transformers' equations (`numpy_modernbert`, `numpy_mlm`), float64.

Written from ``modeling_modernbert.py`` (ModernBertEmbeddings, ModernBertAttention, ModernBertMLP,
ModernBertEncoderLayer, ModernBertPredictionHead, ModernBertForMaskedLM) and Warner et al. 2024: embeddings
``Norm(E[ids])``; pre-norm layers, no ``attn_norm`` on layer 0; ``Wqkv`` viewed ``[B, S, 3, A, d]``; q and k turned
by ``rotate_half`` with ``inv_freq = 1 / θ^(2i/d)``; a layer i with ``i % global_attn_every_n_layers`` ≠ 0 sees
the keys with ``|i - j| <= local_attention // 2`` (θ ``local_rope_theta``), the others every key (θ
``global_rope_theta``); padding keys hidden; ``Wo(act(input)·gate)`` of ``Wi``'s two halves; ``final_norm``; the
masked LM ``norm(act(dense(x)))·Eᵀ + decoder.bias``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf, softmax

# a tiny ModernBERT: 4 layers, global at 0 and 3, local (a window of ±2) at 1 and 2
CONFIG = {"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"], "vocab_size": 64,
          "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 4, "num_attention_heads": 2,
          "hidden_activation": "gelu", "max_position_embeddings": 32, "initializer_range": 0.02, "norm_eps": 1e-5,
          "norm_bias": False, "pad_token_id": 62, "bos_token_id": 60, "eos_token_id": 61, "cls_token_id": 60,
          "sep_token_id": 61, "attention_bias": False, "attention_dropout": 0.0, "global_attn_every_n_layers": 3,
          "local_attention": 4, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
          "embedding_dropout": 0.0, "mlp_bias": False, "mlp_dropout": 0.0, "decoder_bias": True,
          "classifier_pooling": "mean", "classifier_dropout": 0.0, "classifier_bias": False,
          "classifier_activation": "gelu", "tie_word_embeddings": True}
BIASES = {"norm_bias": True, "attention_bias": True, "mlp_bias": True, "classifier_bias": True}  # every bias there


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def layer_norm(x, t: dict, name: str, eps: float):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * t[f"{name}.weight"]
    return y + t[f"{name}.bias"] if f"{name}.bias" in t else y


def modernbert_tensors(cfg: dict, seed: int = 0, decoder_weight: bool = False) -> dict[str, np.ndarray]:
    """ModernBertForMaskedLM's tensors for ``cfg``: linear weights ``[out, in]``, ``Wqkv`` ``[3H, H]``, ``Wi``
    ``[2I, H]``; biases where the config gives them; ``decoder.weight`` (the tied embedding) where asked."""
    v, h, i = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]
    norm = {"weight": (h,), **({"bias": (h,)} if cfg["norm_bias"] else {})}

    def linear(name, out, inp, bias):
        return {f"{name}.weight": (out, inp), **({f"{name}.bias": (out,)} if bias else {})}

    shapes = {"model.embeddings.tok_embeddings.weight": (v, h),
              **{f"model.embeddings.norm.{w}": s for w, s in norm.items()},
              **{f"model.final_norm.{w}": s for w, s in norm.items()},
              **linear("head.dense", h, h, cfg["classifier_bias"]), **{f"head.norm.{w}": s for w, s in norm.items()},
              **({"decoder.bias": (v,)} if cfg["decoder_bias"] else {})}
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes.update({**linear(p + "attn.Wqkv", 3 * h, h, cfg["attention_bias"]),
                       **linear(p + "attn.Wo", h, h, cfg["attention_bias"]),
                       **linear(p + "mlp.Wi", 2 * i, h, cfg["mlp_bias"]), **linear(p + "mlp.Wo", h, i, cfg["mlp_bias"]),
                       **{f"{p}mlp_norm.{w}": s for w, s in norm.items()}})
        if layer:
            shapes.update({f"{p}attn_norm.{w}": s for w, s in norm.items()})
    rng = np.random.default_rng(seed)
    tensors = {name: (1.0 + 0.1 * rng.standard_normal(shape) if name.endswith("norm.weight")
                      else 0.3 * rng.standard_normal(shape)).astype("float32") for name, shape in shapes.items()}
    if decoder_weight:
        tensors["decoder.weight"] = tensors["model.embeddings.tok_embeddings.weight"].copy()
    return tensors


def batch(cfg: dict, length: int = 13, seed: int = 1) -> dict[str, np.ndarray]:
    """Three rows of ``length`` ids, longer than the window, two of them padded at the end with ``pad_token_id``."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg["pad_token_id"], (3, length))
    ids[:, 0] = cfg["cls_token_id"]
    ids[1, length - 4:], ids[2, 5:] = cfg["pad_token_id"], cfg["pad_token_id"]
    return {"ids": ids.astype("int32"), "real": ids != cfg["pad_token_id"]}


def rotary(length: int, head: int, theta: float):
    """cos and sin ``[S, d]``: transformers' ``inv_freq = 1 / θ^(2i/d)``, the angles twice (``cat(freqs, freqs)``)."""
    inv_freq = 1.0 / theta ** (np.arange(0, head, 2) / head)
    angles = np.arange(length)[:, None] * inv_freq[None]
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles), np.sin(angles)


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def linear(x, t: dict, name: str):
    y = x @ t[f"{name}.weight"].astype(np.float64).T
    return y + t[f"{name}.bias"] if f"{name}.bias" in t else y


def attention(x, t: dict, cfg: dict, layer: int, real):
    """ModernBertAttention (eager) of layer ``layer`` on its normed input ``x`` ``[B, S, H]``."""
    batch_size, length, h = x.shape
    heads = cfg["num_attention_heads"]
    d = h // heads
    qkv = linear(x, t, f"model.layers.{layer}.attn.Wqkv").reshape(batch_size, length, 3, heads, d)
    q, k, v = np.moveaxis(qkv, (2, 3), (0, 2))  # each [B, A, S, d]
    local = layer % cfg["global_attn_every_n_layers"] != 0
    cos, sin = rotary(length, d, cfg["local_rope_theta" if local else "global_rope_theta"])
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    seen = np.broadcast_to(real[:, None, None, :], (batch_size, 1, length, length))
    if local:
        positions = np.arange(length)
        seen = seen & (np.abs(positions[:, None] - positions[None]) <= cfg["local_attention"] // 2)
    # transformers masks with the dtype's least value, not -inf: a padding query whose window holds padding alone
    # attends to it evenly, and its value stays finite
    scores = np.where(seen, q @ np.swapaxes(k, -1, -2) / np.sqrt(d), np.finfo(np.float64).min)
    context = softmax(scores, axis=-1) @ v
    return linear(np.moveaxis(context, 1, 2).reshape(batch_size, length, h), t, f"model.layers.{layer}.attn.Wo")


def numpy_modernbert(t: dict, cfg: dict, data: dict) -> np.ndarray:
    """ModernBertModel's ``last_hidden_state`` ``[B, S, H]`` for ``data["ids"]``, float64."""
    t = {name: value.astype(np.float64) for name, value in t.items()}
    eps = cfg["norm_eps"]
    x = layer_norm(t["model.embeddings.tok_embeddings.weight"][data["ids"]], t, "model.embeddings.norm", eps)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        normed = layer_norm(x, t, p + "attn_norm", eps) if layer else x
        x = x + attention(normed, t, cfg, layer, data["real"])
        given, gate = np.split(linear(layer_norm(x, t, p + "mlp_norm", eps), t, p + "mlp.Wi"), 2, axis=-1)
        x = x + linear(gelu(given) * gate, t, p + "mlp.Wo")
    return layer_norm(x, t, "model.final_norm", eps)


def numpy_mlm(t: dict, cfg: dict, hidden: np.ndarray) -> np.ndarray:
    """ModernBertForMaskedLM's logits ``[B, S, V]`` on the final hidden states."""
    t = {name: value.astype(np.float64) for name, value in t.items()}
    y = layer_norm(gelu(linear(hidden, t, "head.dense")), t, "head.norm", cfg["norm_eps"])
    logits = y @ t["model.embeddings.tok_embeddings.weight"].T
    return logits + t["decoder.bias"] if "decoder.bias" in t else logits
