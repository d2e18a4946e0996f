"""Hugging Face DeBERTa-v3 folders: keras-hub's DebertaV3Backbone on the same weights, a NumPy forward pass of
transformers' DebertaV2 equations, its masked LM, ``pytorch_model.bin``, the folder saved back, and the configs
kerasbert refuses.

The folders are written by the test in transformers' names and shapes (`deberta_tensors`, spelled here from
transformers' modules), so a wrong row or a missing transpose in `kerasbert.weights.deberta_names` shows up as a
missing name or a difference. keras-hub has no Hugging Face loader for DeBERTa: `hub_deberta` ports the weights by
hand. The sequences (40 tokens) run past the exact buckets (N/2 = 4) and past the table (N = 8), so the log buckets
and their clipping are read.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file
from scipy.special import softmax
from test_hf_generative import write_folder

from kerasbert import ConfigError, build_transformer_model
from kerasbert.weights.checkpoint import load_checkpoint
from kerasbert.weights.hf import save_hf_checkpoint

import helpers
from deberta_folders import CONFIG, deberta_tensors
from hf_encoder_folders import gelu, layer_norm

ATOL = 1e-5
# the variants keras-hub does not build, held to the NumPy forward pass: distances unbucketed, token types, E ≠ H
VARIANTS = {"unbucketed": {"position_buckets": -1, "max_relative_positions": 24},
            "token_types": {"type_vocab_size": 2}, "embedding_size": {"embedding_size": 8},
            "string_attention_types": {"pos_att_type": "c2p|p2c"}}


def batch(cfg: dict, seed: int = 3) -> dict[str, np.ndarray]:
    """Four rows of 40 ids (``[CLS]`` 1 first), padded with 0 after 40, 32, 24 and 16 real tokens; two segments."""
    data = helpers.random_batch(cfg["vocab_size"], batch=4, length=40, seed=seed)
    data["token_ids"][:, 0] = 1
    return {**data, "real": data["token_ids"] != 0}


def inputs(model, data: dict) -> list:
    return [data["token_ids"], data["segment_ids"]][:len(model.inputs)]


# ------------------------------------------------------------------------------------ transformers' equations
def hf_buckets(relative: np.ndarray, buckets: int, max_position: int) -> np.ndarray:
    """transformers' ``make_log_bucket_position``, in float32 as it computes it."""
    mid = buckets // 2
    absolute = np.where((relative < mid) & (relative > -mid), mid - 1, np.abs(relative)).astype(np.float32)
    far = np.ceil(np.log(absolute / np.float32(mid)) / np.float32(np.log((max_position - 1) / mid))
                  * np.float32(mid - 1)) + mid
    return np.where(absolute <= mid, relative, far * np.sign(relative)).astype(np.int64)


def disentangled_scores(q, k, q_r, k_r, relative: np.ndarray, span: int) -> np.ndarray:
    """``DisentangledSelfAttention``'s scores ``[B, A, S, S]``: c2c, c2p gathered at ``clamp(δ + span)``, p2c
    gathered at ``clamp(-δ + span)`` per key and transposed, each over ``√(3·d)``."""
    scale = np.sqrt(q.shape[-1] * 3)
    c2p_pos = np.clip(relative + span, 0, 2 * span - 1)
    p2c_pos = np.clip(-relative + span, 0, 2 * span - 1)
    c2p = np.take_along_axis(np.einsum("bhqd,hrd->bhqr", q, k_r), c2p_pos[None, None], axis=-1)
    p2c = np.take_along_axis(np.einsum("bhkd,hrd->bhkr", k, q_r), p2c_pos[None, None], axis=-1)
    return (np.einsum("bhqd,bhkd->bhqk", q, k) + c2p + np.swapaxes(p2c, -1, -2)) / scale


def numpy_deberta(t: dict, cfg: dict, data: dict) -> np.ndarray:
    """DebertaV2Model's sequence output in NumPy (float64): embeddings, relative table and its norm, L blocks."""
    def linear(x, name):
        return x @ t[f"{name}.weight"].T.astype(np.float64) + t[f"{name}.bias"]

    def norm(x, name):
        return layer_norm(x, t[f"{name}.weight"], t[f"{name}.bias"], cfg["layer_norm_eps"])

    ids, (heads, h) = data["token_ids"], (cfg["num_attention_heads"], cfg["hidden_size"])
    x = t["deberta.embeddings.word_embeddings.weight"][ids].astype(np.float64)
    if cfg["type_vocab_size"]:
        x = x + t["deberta.embeddings.token_type_embeddings.weight"][data["segment_ids"]]
    if "deberta.embeddings.embed_proj.weight" in t:
        x = x @ t["deberta.embeddings.embed_proj.weight"].T
    x = norm(x, "deberta.embeddings.LayerNorm")
    rel = norm(t["deberta.encoder.rel_embeddings.weight"].astype(np.float64), "deberta.encoder.LayerNorm")
    buckets, length = cfg["position_buckets"], ids.shape[1]
    max_position = cfg["max_relative_positions"] if cfg["max_relative_positions"] > 0 else \
        cfg["max_position_embeddings"]
    relative = np.arange(length)[:, None] - np.arange(length)[None, :]
    relative = hf_buckets(relative, buckets, max_position) if buckets > 0 else relative
    keys = (ids != 0)[:, None, None, :]
    for i in range(cfg["num_hidden_layers"]):
        p = f"deberta.encoder.layer.{i}."

        def split(y):
            return y.reshape(*y.shape[:-1], heads, h // heads)

        q, k, v = (np.moveaxis(split(linear(x, f"{p}attention.self.{n}_proj")), -2, 1) for n in ("query", "key",
                                                                                                  "value"))
        q_r, k_r = (np.moveaxis(split(linear(rel, f"{p}attention.self.{n}_proj")), -2, 0) for n in ("query", "key"))
        scores = disentangled_scores(q, k, q_r, k_r, relative, buckets if buckets > 0 else max_position)
        probs = softmax(np.where(keys, scores, -np.inf), axis=-1)
        context = np.moveaxis(probs @ v, 1, -2).reshape(x.shape)
        x = norm(linear(context, f"{p}attention.output.dense") + x, f"{p}attention.output.LayerNorm")
        inner = gelu(linear(x, f"{p}intermediate.dense"))
        x = norm(linear(inner, f"{p}output.dense") + x, f"{p}output.LayerNorm")
    return x


def numpy_mlm(t: dict, cfg: dict, sequence: np.ndarray, prefix: str = "cls.predictions.transform.") -> np.ndarray:
    """transformers' DeBERTa masked LM on a sequence output: dense, GELU, LayerNorm, the word embeddings, bias."""
    x = gelu(sequence @ t[f"{prefix}dense.weight"].T + t[f"{prefix}dense.bias"])
    x = layer_norm(x, t[f"{prefix}LayerNorm.weight"], t[f"{prefix}LayerNorm.bias"], cfg["layer_norm_eps"])
    bias = t["cls.predictions.bias"] if prefix.startswith("cls.") else t["lm_predictions.lm_head.bias"]
    return x @ t["deberta.embeddings.word_embeddings.weight"].T + bias


# ------------------------------------------------------------------------------------ keras-hub
# the sublayers of keras-hub's DisentangledAttentionEncoder -> transformers' names in DebertaV2Layer
HUB_SUBLAYERS = {"_self_attention_layer_norm": "attention.output.LayerNorm",
                 "_feedforward_intermediate_dense": "intermediate.dense", "_feedforward_output_dense": "output.dense",
                 "_feedforward_layer_norm": "output.LayerNorm"}


def hub_deberta(cfg: dict, t: dict):
    """keras-hub's DebertaV3Backbone with the folder's weights, ported by the test: its ``max_sequence_length`` is
    transformers' ``max_relative_positions`` (P where -1), its ``bucket_size`` the ``position_buckets``."""
    import keras_hub

    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    hub = keras_hub.models.DebertaV3Backbone(
        vocabulary_size=cfg["vocab_size"], num_layers=cfg["num_hidden_layers"], num_heads=heads, hidden_dim=h,
        intermediate_dim=cfg["intermediate_size"], dropout=0.0, bucket_size=cfg["position_buckets"],
        max_sequence_length=cfg["max_relative_positions"] if cfg["max_relative_positions"] > 0
        else cfg["max_position_embeddings"])
    pairs = [(hub.token_embedding.embeddings, "deberta.embeddings.word_embeddings.weight"),
             (hub.embeddings_layer_norm.gamma, "deberta.embeddings.LayerNorm.weight"),
             (hub.embeddings_layer_norm.beta, "deberta.embeddings.LayerNorm.bias"),
             (hub.relative_embeddings.rel_embeddings, "deberta.encoder.rel_embeddings.weight"),
             (hub.relative_embeddings.layer_norm.gamma, "deberta.encoder.LayerNorm.weight"),
             (hub.relative_embeddings.layer_norm.beta, "deberta.encoder.LayerNorm.bias")]
    for i in range(cfg["num_hidden_layers"]):
        block, p = hub.get_layer(f"disentangled_attention_encoder_layer_{i}"), f"deberta.encoder.layer.{i}."
        attention = block._self_attention_layer
        for part in ("query", "key", "value"):
            dense = getattr(attention, f"_{part}_dense")
            pairs += [(dense.kernel, f"{p}attention.self.{part}_proj.weight"),
                      (dense.bias, f"{p}attention.self.{part}_proj.bias")]
        pairs += [(attention._output_dense.kernel, f"{p}attention.output.dense.weight"),
                  (attention._output_dense.bias, f"{p}attention.output.dense.bias")]
        for sublayer, name in HUB_SUBLAYERS.items():
            layer = getattr(block, sublayer)
            weights = ("gamma", "beta") if name.endswith("LayerNorm") else ("kernel", "bias")
            pairs += [(getattr(layer, w), f"{p}{name}.{hf}") for w, hf in zip(weights, ("weight", "bias"), strict=True)]
    for variable, name in pairs:
        linear = name.endswith(".weight") and "embeddings" not in name and "LayerNorm" not in name
        variable.assign((t[name].T if linear else t[name]).reshape(variable.shape))
    return hub


def test_an_hf_folder_gives_keras_hub_numbers(tmp_path):
    t = deberta_tensors(CONFIG, seed=1)
    folder = write_folder(tmp_path / "deberta", CONFIG, t)
    data = batch(CONFIG)
    model = build_transformer_model(folder, folder, verbose=False)  # the family from model_type
    assert model.family == "deberta_v3" and [x.name for x in model.inputs] == ["Input-Token"]
    ours = model.predict(inputs(model, data), verbose=0)
    hub = hub_deberta(CONFIG, t).predict({"token_ids": data["token_ids"], "padding_mask": data["real"]}, verbose=0)
    real = data["real"]
    assert real.sum(1).tolist() == [40, 32, 24, 16]  # rows with padding, all longer than the 8 buckets
    np.testing.assert_allclose(ours[real], hub[real], atol=ATOL)
    np.testing.assert_allclose(ours[real], numpy_deberta(t, CONFIG, data)[real], atol=ATOL)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variants_give_transformers_numbers(variant, tmp_path):
    cfg = {**CONFIG, **VARIANTS[variant]}
    t = deberta_tensors(cfg, seed=2)
    model = build_transformer_model(write_folder(tmp_path / variant, cfg, t), tmp_path / variant, verbose=False)
    data = batch(cfg)
    expected = numpy_deberta(t, cfg, data)
    np.testing.assert_allclose(model.predict(inputs(model, data), verbose=0)[data["real"]],
                               expected[data["real"]], atol=ATOL)


@pytest.mark.parametrize("head, pickle", [("cls", False), ("lm_predictions", True)])
def test_the_masked_lm_gives_transformers_logits(head, pickle, tmp_path):
    """transformers' legacy ``cls.predictions`` and the released files' ``lm_predictions.lm_head`` (with their
    replaced-token head, skipped), from ``model.safetensors`` or ``pytorch_model.bin``."""
    t = deberta_tensors(CONFIG, seed=3, head=head)
    folder = write_folder(tmp_path / head, CONFIG, t, pickle=pickle)
    model = build_transformer_model(folder, with_mlm="linear", verbose=False)
    report = load_checkpoint(model, folder, verbose=False)
    assert report.unused == [] and report.new == []  # the replaced-token head skipped, every other name read
    assert report.skipped == (["mask_predictions.classifier.weight", "mask_predictions.dense.weight"]
                              if head == "lm_predictions" else [])
    data = batch(CONFIG)
    prefix = "cls.predictions.transform." if head == "cls" else "lm_predictions.lm_head."
    expected = numpy_mlm(t, CONFIG, numpy_deberta(t, CONFIG, data), prefix)
    np.testing.assert_allclose(model.predict(inputs(model, data), verbose=0)[data["real"]],
                               expected[data["real"]], atol=ATOL)


def test_a_folder_is_saved_back_bit_for_bit(tmp_path):
    t = deberta_tensors(CONFIG, seed=4)
    folder = write_folder(tmp_path / "in", CONFIG, t)
    model = build_transformer_model(folder, folder, with_mlm=True, verbose=False)
    out = save_hf_checkpoint(model, tmp_path / "out")
    written = {name: value.tobytes() for name, value in load_file(os.path.join(out, "model.safetensors")).items()}
    assert written == {name: value.tobytes() for name, value in t.items()}  # the same names, bit for bit
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    assert (config["model_type"], config["architectures"]) == ("deberta-v2", ["DebertaV2ForMaskedLM"])
    assert {key: config[key] for key in CONFIG} == CONFIG  # every key as read, transformers' spelling
    again = build_transformer_model(out, out, with_mlm=True, verbose=False)
    data = batch(CONFIG)
    np.testing.assert_array_equal(again.predict(inputs(again, data), verbose=0),
                                  model.predict(inputs(model, data), verbose=0))


def test_a_preset_model_is_saved_with_the_attention_it_computes(tmp_path):
    """A model built from a preset says DeBERTa-v3's attention in transformers' keys (whose defaults are another
    model's), and its folder builds the same model."""
    model = build_transformer_model("tiny", model="deberta_v3", verbose=False)
    out = save_hf_checkpoint(model, tmp_path / "out")
    config = json.load(open(os.path.join(out, "config.json")))
    assert {key: config[key] for key in ("relative_attention", "share_att_key", "position_biased_input",
                                         "norm_rel_ebd", "position_buckets", "pos_att_type")} == {
        "relative_attention": True, "share_att_key": True, "position_biased_input": False,
        "norm_rel_ebd": "layer_norm", "position_buckets": 32, "pos_att_type": ["p2c", "c2p"]}
    again = build_transformer_model(out, out, verbose=False)
    data = batch({"vocab_size": 128})
    np.testing.assert_array_equal(again.predict(inputs(again, data), verbose=0),
                                  model.predict(inputs(model, data), verbose=0))


@pytest.mark.parametrize("key, value, found", [
    ("pos_att_type", ["p2c", "c2p", "p2p"], r"\['p2c', 'c2p', 'p2p'\]"), ("pos_att_type", None, "None"),
    ("relative_attention", False, "False"), ("share_att_key", False, "False"), ("share_att_key", None, "False"),
    ("position_biased_input", True, "True"), ("norm_rel_ebd", "none", "'none'"), ("conv_kernel_size", 3, "3")])
def test_an_attention_kerasbert_does_not_build_is_refused_by_key(key, value, found, tmp_path):
    cfg = {**CONFIG, key: value}
    if value is None:
        del cfg[key]  # transformers' default for the key
    folder = write_folder(tmp_path / "bad", cfg, deberta_tensors(CONFIG, seed=5))
    with pytest.raises(ConfigError, match=rf"config.json: {key}: expected .* \(kerasbert builds DeBERTa-v3's "
                                          rf"attention\), found {found}\. kerasbert builds DeBERTa-v3's"):
        build_transformer_model(folder, folder, verbose=False)
