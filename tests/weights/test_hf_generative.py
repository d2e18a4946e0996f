"""Hugging Face T5, mT5 and GPT-2 folders: T5's numbers against a NumPy forward pass of transformers' T5 equations,
GPT-2's against keras-hub's loader, folders saved and converted both ways with the same weights, and what is refused.

The folders are written by the test in transformers' names and shapes (`t5_tensors`, `gpt2_tensors`), so a wrong
name, a missing transpose or a bert4keras-only step in the T5 graph shows up as a difference.
"""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
from safetensors.numpy import save_file

from kerasbert import CheckpointError, ConfigError, build_transformer_model, save_google_checkpoint
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.t5 import T5
from kerasbert.weights.checkpoint import load_checkpoint
from kerasbert.weights.convert import convert_checkpoint
from kerasbert.weights.hf import save_hf_checkpoint

from bad_inputs_weights import torch_zip

ATOL = 1e-5
# d_kv 5 x 3 heads != d_model 12; max_distance 20 below the encoder's length, so the far buckets are used; an ε
# far from bert4keras's 1e-6, so a norm that ignores the config shows
T5_CONFIG = {"vocab_size": 40, "d_model": 12, "d_kv": 5, "d_ff": 20, "num_layers": 2, "num_heads": 3,
             "relative_attention_num_buckets": 16, "relative_attention_max_distance": 20, "dropout_rate": 0.1,
             "layer_norm_epsilon": 1e-3, "decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0}
KINDS = {"t5": ("t5", {"feed_forward_proj": "relu"}), "t5.1.1": ("t5", {"feed_forward_proj": "gated-gelu",
                                                                       "tie_word_embeddings": False}),
         "mt5.1.1": ("mt5", {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False})}
GPT2_CONFIG = {"model_type": "gpt2", "vocab_size": 50, "n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 24,
               "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.1}


def write_folder(folder, config: dict, tensors: dict, pickle: bool = False) -> str:
    """A Hugging Face folder: ``config.json`` and the tensors as ``model.safetensors``, or as a ``pytorch_model.bin``
    written opcode by opcode as torch does (one storage per tensor)."""
    os.makedirs(folder, exist_ok=True)
    if pickle:
        storages = {str(k): np.ascontiguousarray(v, "<f4").tobytes() for k, v in enumerate(tensors.values())}
        layout = {name: (str(k), value.size, 0, value.shape, tuple(s // 4 for s in np.zeros(value.shape, "f4").strides))
                  for k, (name, value) in enumerate(tensors.items())}
        torch_zip(folder / "pytorch_model.bin", layout, storages)
    else:
        save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return str(folder)


# ------------------------------------------------------------------------------------------------ T5's equations
def t5_config(kind: str) -> dict:
    model_type, extra = KINDS[kind]
    return {"model_type": model_type, **T5_CONFIG, **extra}


def t5_tensors(config: dict, seed: int) -> dict[str, np.ndarray]:
    """T5ForConditionalGeneration's tensors for ``config``: projections ``[out, in]``, relative tables ``[N, A]``."""
    h, inner, n, heads = config["d_model"], config["d_ff"], config["relative_attention_num_buckets"], config[
        "num_heads"]
    width, gated = heads * config["d_kv"], config["feed_forward_proj"].startswith("gated")
    shapes = {"shared.weight": (config["vocab_size"], h)}
    for stack in ("encoder", "decoder"):
        shapes[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = (n, heads)
        shapes[f"{stack}.final_layer_norm.weight"] = (h,)
        attentions = ("SelfAttention", "EncDecAttention") if stack == "decoder" else ("SelfAttention",)
        for i in range(config["num_layers"]):
            for layer, attention in enumerate(attentions):
                p = f"{stack}.block.{i}.layer.{layer}."
                shapes.update({p + f"{attention}.{x}.weight": (width, h) for x in "qkv"})
                shapes.update({p + f"{attention}.o.weight": (h, width), p + "layer_norm.weight": (h,)})
            p = f"{stack}.block.{i}.layer.{len(attentions)}."
            shapes.update({p + f"DenseReluDense.{w}.weight": (inner, h) for w in (("wi_0", "wi_1") if gated
                                                                                   else ("wi",))})
            shapes.update({p + "DenseReluDense.wo.weight": (h, inner), p + "layer_norm.weight": (h,)})
    if gated:
        shapes["lm_head.weight"] = (config["vocab_size"], h)
    rng = np.random.default_rng(seed)
    return {name: (rng.normal(0, 0.3, shape) + name.endswith("norm.weight")).astype("float32")
            for name, shape in shapes.items()}


def buckets(relative: np.ndarray, num_buckets: int, max_distance: int, bidirectional: bool) -> np.ndarray:
    """transformers' ``T5Attention._relative_position_bucket`` of ``relative`` = key - query."""
    out = np.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        out += (relative > 0) * num_buckets
        n = np.abs(relative)
    else:
        n = -np.minimum(relative, 0)
    exact = num_buckets // 2
    large = exact + (np.log(np.maximum(n, 1) / exact) / np.log(max_distance / exact) * (num_buckets - exact)).astype(
        int)
    return out + np.where(n < exact, n, np.minimum(large, num_buckets - 1))


def rms(x, weight, eps):
    return x / np.sqrt(np.mean(x ** 2, -1, keepdims=True) + eps) * weight


def attention(t, prefix, x, memory, bias, allowed, config):
    """Multi-head attention without 1/√d, ``bias`` [A, Q, K] added, keys hidden where ``allowed`` is False."""
    heads, d = config["num_heads"], config["d_kv"]

    def split(y):
        return y.reshape(*y.shape[:2], heads, d).transpose(0, 2, 1, 3)  # (batch, heads, S, d)

    q, k, v = (split(y @ t[f"{prefix}.{p}.weight"].T) for p, y in (("q", x), ("k", memory), ("v", memory)))
    scores = q @ k.transpose(0, 1, 3, 2) + bias + np.where(allowed, 0.0, -1e9)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return (probs @ v).transpose(0, 2, 1, 3).reshape(*x.shape[:2], heads * d) @ t[f"{prefix}.o.weight"].T


def feed_forward(t, prefix, x, gated):
    if not gated:
        return np.maximum(x @ t[f"{prefix}.wi.weight"].T, 0) @ t[f"{prefix}.wo.weight"].T
    a = x @ t[f"{prefix}.wi_0.weight"].T
    gelu_new = 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))
    return (gelu_new * (x @ t[f"{prefix}.wi_1.weight"].T)) @ t[f"{prefix}.wo.weight"].T


def position_bias(t, stack, q_len, k_len, config, bidirectional):
    relative = np.arange(k_len)[None, :] - np.arange(q_len)[:, None]
    ids = buckets(relative, config["relative_attention_num_buckets"], config["relative_attention_max_distance"],
                  bidirectional)
    table = t[f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    return table[ids].transpose(2, 0, 1)  # (heads, Q, K)


def t5_forward(t, config, encoder_ids, decoder_ids):
    """transformers' T5ForConditionalGeneration on ``attention_mask = encoder_ids != 0`` and no decoder mask (a
    causal one alone): the next-token probabilities."""
    eps, gated = config["layer_norm_epsilon"], config["feed_forward_proj"].startswith("gated")
    keys = (encoder_ids != 0)[:, None, None, :]
    x, bias = t["shared.weight"][encoder_ids], position_bias(t, "encoder", *encoder_ids.shape[1:] * 2, config, True)
    for i in range(config["num_layers"]):
        p = f"encoder.block.{i}.layer."
        x = x + attention(t, p + "0.SelfAttention", *[rms(x, t[p + "0.layer_norm.weight"], eps)] * 2, bias, keys,
                          config)
        x = x + feed_forward(t, p + "1.DenseReluDense", rms(x, t[p + "1.layer_norm.weight"], eps), gated)
    states = rms(x, t["encoder.final_layer_norm.weight"], eps)
    length = decoder_ids.shape[1]
    y, bias = t["shared.weight"][decoder_ids], position_bias(t, "decoder", length, length, config, False)
    causal = np.tril(np.ones((length, length), bool))[None, None]
    for i in range(config["num_layers"]):
        p = f"decoder.block.{i}.layer."
        y = y + attention(t, p + "0.SelfAttention", *[rms(y, t[p + "0.layer_norm.weight"], eps)] * 2, bias, causal,
                          config)
        y = y + attention(t, p + "1.EncDecAttention", rms(y, t[p + "1.layer_norm.weight"], eps), states, 0.0, keys,
                          config)
        y = y + feed_forward(t, p + "2.DenseReluDense", rms(y, t[p + "2.layer_norm.weight"], eps), gated)
    y = rms(y, t["decoder.final_layer_norm.weight"], eps)
    logits = y @ t["lm_head.weight"].T if gated else (y * config["d_model"] ** -0.5) @ t["shared.weight"].T
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return probs / probs.sum(-1, keepdims=True)


def padded(lengths, width, seed, start=False):
    rng, ids = np.random.default_rng(seed), np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(2, T5_CONFIG["vocab_size"], length)
    if start:
        ids[:, 0] = 0  # T5's decoder starts with id 0
    return ids


ENCODER_IDS, DECODER_IDS = padded([30, 9, 17], 30, 1), padded([12, 1, 6], 12, 2, start=True)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_t5_folder_gives_transformers_numbers(kind, tmp_path):
    config = t5_config(kind)
    tensors = t5_tensors(config, seed=len(kind))
    folder = write_folder(tmp_path / kind, config, tensors)
    model = build_transformer_model(folder, folder, verbose=False)  # the family from model_type and the gating
    assert model.family == kind
    expected = t5_forward(tensors, config, ENCODER_IDS, DECODER_IDS)
    np.testing.assert_allclose(model.predict([ENCODER_IDS, DECODER_IDS], verbose=0), expected, atol=ATOL)
    bert4keras = build_transformer_model(config=BertConfig.from_json(folder).replace(extra={}), model=kind,
                                         verbose=False)  # the same sizes and weights as a bert4keras config
    load_checkpoint(bert4keras, folder, verbose=False)
    assert np.abs(bert4keras.predict([ENCODER_IDS, DECODER_IDS], verbose=0) - expected).max() > 1e-3


def test_a_pytorch_model_bin_with_its_tied_copies_gives_the_same_numbers(tmp_path):
    config = t5_config("t5.1.1")
    tensors = t5_tensors(config, seed=5)
    copies = {f"{stack}.embed_tokens.weight": tensors["shared.weight"] for stack in ("encoder", "decoder")}
    folder = write_folder(tmp_path / "bin", config, {**tensors, **copies}, pickle=True)
    assert sorted(os.listdir(folder)) == ["config.json", "pytorch_model.bin"]
    model = build_transformer_model(folder, verbose=False)
    report = load_checkpoint(model, folder, verbose=False)
    assert (report.new, report.unused) == ([], [])
    assert sorted(report.skipped) == sorted(copies)
    np.testing.assert_allclose(model.predict([ENCODER_IDS, DECODER_IDS], verbose=0),
                               t5_forward(tensors, config, ENCODER_IDS, DECODER_IDS), atol=ATOL)


def test_a_t5_folder_saves_back_and_keeps_its_options_in_a_keras_file(tmp_path):
    config = t5_config("mt5.1.1")
    folder = write_folder(tmp_path / "mt5", config, t5_tensors(config, seed=3))
    model = build_transformer_model(folder, folder, verbose=False)
    options = T5.of(model).options
    assert (options.cross_position_bias, options.decoder_padding, options.output_scale) == (False, False, 1.0)
    assert (options.epsilon, options.max_distance) == (1e-3, 20)
    saved = save_hf_checkpoint(model, tmp_path / "saved")
    written = json.load(open(os.path.join(saved, "config.json")))
    assert {key: written[key] for key in config} == config
    assert written["architectures"] == ["MT5ForConditionalGeneration"] and "hidden_size" not in written
    expected = model.predict([ENCODER_IDS, DECODER_IDS], verbose=0)
    again = build_transformer_model(saved, saved, verbose=False)
    np.testing.assert_array_equal(again.predict([ENCODER_IDS, DECODER_IDS], verbose=0), expected)
    model.save(tmp_path / "mt5.keras")
    loaded = keras.saving.load_model(tmp_path / "mt5.keras")
    assert T5.of(loaded).options == options
    np.testing.assert_allclose(loaded.predict([ENCODER_IDS, DECODER_IDS], verbose=0), expected, atol=1e-6)


# ------------------------------------------------------------------------------------------------ GPT-2
def gpt2_tensors(config: dict, seed: int) -> dict[str, np.ndarray]:
    """GPT2Model's tensors as transformers publishes them: bare names, Conv1D weights ``[in, out]``, and the causal
    mask buffers."""
    h, p, layers = config["n_embd"], config["n_positions"], config["n_layer"]
    shapes = {"wte.weight": (config["vocab_size"], h), "wpe.weight": (p, h), "ln_f.weight": (h,), "ln_f.bias": (h,)}
    for i in range(layers):
        shapes.update({f"h.{i}.attn.c_attn.weight": (h, 3 * h), f"h.{i}.attn.c_attn.bias": (3 * h,),
                       f"h.{i}.attn.c_proj.weight": (h, h), f"h.{i}.mlp.c_fc.weight": (h, 4 * h),
                       f"h.{i}.mlp.c_fc.bias": (4 * h,), f"h.{i}.mlp.c_proj.weight": (4 * h, h)})
        shapes.update({f"h.{i}.{name}": (h,) for name in ("attn.c_proj.bias", "mlp.c_proj.bias", "ln_1.weight",
                                                           "ln_1.bias", "ln_2.weight", "ln_2.bias")})
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.normal(0, 0.3, shape) + name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")))
               .astype("float32") for name, shape in shapes.items()}
    tensors.update({f"h.{i}.attn.bias": np.tril(np.ones((p, p), "float32"))[None, None] for i in range(layers)})
    return tensors


def test_a_gpt2_folder_gives_keras_hub_numbers(tmp_path):
    import keras_hub

    folder = write_folder(tmp_path / "gpt2", GPT2_CONFIG, gpt2_tensors(GPT2_CONFIG, seed=7))
    model = build_transformer_model(folder, folder, verbose=False)
    assert model.family == "gpt2"
    ids = padded([24, 10, 3], 24, 4)
    hub = keras_hub.models.GPT2Backbone.from_preset(folder)
    hidden = keras.ops.convert_to_numpy(hub({"token_ids": ids, "padding_mask": ids != 0}))
    mine = keras.Model(model.inputs, model.get_layer("Output-Norm").output).predict(ids, verbose=0)
    real = (ids != 0)[..., None]
    np.testing.assert_allclose(mine * real, hidden * real, atol=ATOL)
    logits = hidden @ keras.ops.convert_to_numpy(hub.token_embedding.embeddings).T
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(model.predict(ids, verbose=0) * real, probs / probs.sum(-1, keepdims=True) * real,
                               atol=ATOL)
    report = load_checkpoint(model, folder, verbose=False)
    assert (report.new, report.unused) == ([], []) and len(report.skipped) == GPT2_CONFIG["n_layer"]


def test_a_bert4keras_config_is_saved_with_the_epsilon_its_model_uses(tmp_path):
    from kerasbert.modeling.gpt import LAYOUTS
    from kerasbert.modeling.t5_layers import NORM_EPSILON
    from kerasbert.weights.hf_generative import BERT4KERAS_EPSILON

    assert BERT4KERAS_EPSILON == {"t5": NORM_EPSILON, "gpt": LAYOUTS["gpt2"].epsilon}
    gpt2 = random_model("gpt2", {"vocab_size": 40, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                                 "intermediate_size": 16, "layer_norm_eps": 1e-12}, seed=0)
    folder = save_hf_checkpoint(gpt2, tmp_path / "gpt2")
    assert json.load(open(os.path.join(folder, "config.json")))["layer_norm_epsilon"] == 1e-5
    assert build_transformer_model(folder, verbose=False).get_layer("Output-Norm").epsilon == 1e-5


def test_gpt2_reads_the_norm_epsilon_of_its_config(tmp_path):
    config = {**GPT2_CONFIG, "layer_norm_epsilon": 1e-3, "n_inner": 40}
    model = build_transformer_model(config=BertConfig.from_dict(config), verbose=False)
    assert model.get_layer("Output-Norm").epsilon == 1e-3
    assert tuple(model.get_layer("Transformer-0-FeedForward").weights[0].shape) == (16, 40)
    written = BertConfig.from_dict(config).to_dict()
    assert {key: written[key] for key in config} == config


# ------------------------------------------------------------------------------------------------ convert
def random_model(kind: str, config: dict, seed: int):
    model = build_transformer_model(config=config, model=kind, verbose=False)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") + ("gamma" in w.path) for w in model.weights])
    return model


BERT4KERAS = {"t5": {"hidden_act": "relu"}, "t5.1.1": {"hidden_act": ["gelu", "linear"]},
              "mt5.1.1": {"hidden_act": ["gelu", "linear"]}, "gpt2": {"hidden_act": "gelu"}}


@pytest.mark.parametrize("kind", sorted(BERT4KERAS))
def test_a_bert4keras_checkpoint_converts_to_a_folder_and_back_with_the_same_weights(kind, tmp_path):
    import tensorflow as tf

    config = {"vocab_size": 40, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
              "intermediate_size": 20, "max_position_embeddings": 16, **BERT4KERAS[kind]}
    if kind != "gpt2":
        config.update(attention_head_size=5, relative_attention_num_buckets=32)
    model = random_model(kind, config, seed=len(kind))
    google = str(tmp_path / "google")
    save_google_checkpoint(model, google)
    with open(os.path.join(google, "bert_config.json"), "w") as f:
        json.dump(config, f)
    convert_checkpoint(google, tmp_path / "hf", model=kind)
    written = json.load(open(tmp_path / "hf" / "config.json"))
    assert written["model_type"] == {"t5.1.1": "t5", "mt5.1.1": "mt5"}.get(kind, kind)
    loaded = build_transformer_model(str(tmp_path / "hf"), str(tmp_path / "hf"), verbose=False)
    assert loaded.family == kind
    mine, theirs = ({w.path: keras.ops.convert_to_numpy(w) for w in m.weights} for m in (loaded, model))
    assert sorted(mine) == sorted(theirs)
    for path, value in theirs.items():
        np.testing.assert_array_equal(mine[path], value, err_msg=path)
    back = convert_checkpoint(tmp_path / "hf", tmp_path / "back")
    before, after = tf.train.load_checkpoint(os.path.join(google, "bert_model.ckpt")), tf.train.load_checkpoint(back)
    names = sorted(before.get_variable_to_shape_map())
    assert names == sorted(after.get_variable_to_shape_map())
    for name in names:
        np.testing.assert_array_equal(before.get_tensor(name), after.get_tensor(name), err_msg=name)
    again = BertConfig.from_json(tmp_path / "back" / "bert_config.json")
    assert (again.model_type, again.gated, again.hidden_size) == (None, kind in ("t5.1.1", "mt5.1.1"), 12)


# ------------------------------------------------------------------------------------------------ refused
@pytest.mark.parametrize("change, message", [
    ({"model_type": "llama"}, "model_type: expected one of 'bert', .*'t5', 'mt5', 'gpt2', .*found 'llama'"),
    ({"num_decoder_layers": 3}, "num_decoder_layers: expected num_layers 2, found 3. kerasbert's T5 has as many"),
    ({"feed_forward_proj": "gated-gelu", "tie_word_embeddings": True},
     "tie_word_embeddings: expected False with feed_forward_proj 'gated-gelu', found True"),
])
def test_a_config_kerasbert_cannot_build_is_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        BertConfig.from_dict({**t5_config("t5"), **change}, source="config.json")


def test_a_folder_given_another_family_is_refused(tmp_path):
    gpt2 = write_folder(tmp_path / "gpt2", GPT2_CONFIG, gpt2_tensors(GPT2_CONFIG, seed=1))
    with pytest.raises(ConfigError, match="model_type: expected a t5.1.1 config for model='t5.1.1', found 'gpt2'"):
        build_transformer_model(gpt2, gpt2, "t5.1.1", verbose=False)
    gated = write_folder(tmp_path / "t5", t5_config("t5.1.1"), t5_tensors(t5_config("t5.1.1"), seed=1))
    with pytest.raises(ConfigError, match=r"found 't5' \(t5.1.1\). build with model='t5.1.1'"):
        build_transformer_model(gated, gated, "t5", verbose=False)
    t5 = build_transformer_model(config=BertConfig.from_json(gated), verbose=False)
    with pytest.raises(CheckpointError, match="its names are those of model='gpt2', not model='t5.1.1'"):
        load_checkpoint(t5, gpt2, verbose=False)
    with pytest.raises(CheckpointError, match="model: expected a family with a Hugging Face format .*found 'gpt2_ml'"):
        save_hf_checkpoint(random_model("gpt2_ml", {**BertConfig.from_dict(GPT2_CONFIG).replace(extra={}).to_dict()},
                                        seed=0), tmp_path / "ml")
