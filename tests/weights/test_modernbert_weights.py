"""Hugging Face ModernBERT folders: the model read from them gives a NumPy forward pass of transformers' equations
(`modernbert_folders`), its masked LM too, from ``model.safetensors`` or ``pytorch_model.bin``, a bare
``ModernBertModel``'s names, and the folder saved back bit for bit.

The folders are written by the test in transformers' names and shapes, with 4 layers (global at 0 and 3, local at 1
and 2, a window of ±2) and rows of 13 tokens, some padded, so the sliding window, both rotary θ and the padding are
read; a wrong row or a missing transpose in `kerasbert.weights.modernbert_names` shows up as a missing name or a
difference.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file
from test_hf_generative import write_folder

from kerasbert import CheckpointError, build_transformer_model
from kerasbert.weights.checkpoint import load_checkpoint
from kerasbert.weights.hf import save_hf_checkpoint

from modernbert_folders import BIASES, CONFIG, batch, modernbert_tensors, numpy_mlm, numpy_modernbert

ATOL = 1e-5


@pytest.mark.parametrize("variant", ["published", "biases"])
def test_the_sequence_output_is_transformers(variant, tmp_path):
    cfg = {**CONFIG, **(BIASES if variant == "biases" else {})}
    t = modernbert_tensors(cfg, seed=2)
    folder = write_folder(tmp_path / variant, cfg, t)
    model = build_transformer_model(folder, verbose=False)
    report = load_checkpoint(model, folder, verbose=False)
    assert report.new == [] and sorted(report.unused) == sorted(n for n in t if n.startswith(("head.", "decoder.")))
    data = batch(cfg)
    expected = numpy_modernbert(t, cfg, data)
    np.testing.assert_allclose(model.predict(data["ids"], verbose=0)[data["real"]], expected[data["real"]],
                               atol=ATOL)


@pytest.mark.parametrize("variant, pickle", [("published", False), ("published", True), ("biases", True)])
def test_the_masked_lm_gives_transformers_logits(variant, pickle, tmp_path):
    """``with_mlm`` reads ``head.dense``, ``head.norm`` and ``decoder.bias``; a file's tied ``decoder.weight`` is
    skipped."""
    cfg = {**CONFIG, **(BIASES if variant == "biases" else {})}
    t = modernbert_tensors(cfg, seed=3, decoder_weight=pickle)
    folder = write_folder(tmp_path / variant, cfg, t, pickle=pickle)
    model = build_transformer_model(folder, with_mlm="linear", verbose=False)
    report = load_checkpoint(model, folder, verbose=False)
    assert report.unused == [] and report.new == [] and report.skipped == (["decoder.weight"] if pickle else [])
    data = batch(cfg)
    expected = numpy_mlm(t, cfg, numpy_modernbert(t, cfg, data))
    np.testing.assert_allclose(model.predict(data["ids"], verbose=0)[data["real"]], expected[data["real"]],
                               atol=ATOL)


def test_a_bare_models_names_and_a_missing_layer(tmp_path):
    """A ``ModernBertModel`` file names its weights without ``model.``; a file without a layer's norm is a
    CheckpointError naming it."""
    t = modernbert_tensors(CONFIG, seed=4)
    bare = {name[len("model."):]: value for name, value in t.items() if name.startswith("model.")}
    folder = write_folder(tmp_path / "bare", CONFIG, bare)
    model = build_transformer_model(folder, folder, verbose=False)
    data = batch(CONFIG)
    np.testing.assert_allclose(model.predict(data["ids"], verbose=0)[data["real"]],
                               numpy_modernbert(t, CONFIG, data)[data["real"]], atol=ATOL)
    del bare["layers.2.attn_norm.weight"]
    folder = write_folder(tmp_path / "short", CONFIG, bare)
    with pytest.raises(CheckpointError, match=r"1 missing: model.layers.2.attn_norm.weight"):
        build_transformer_model(folder, folder, verbose=False)


def test_a_folder_is_saved_back_bit_for_bit(tmp_path):
    t = modernbert_tensors(CONFIG, seed=5)
    folder = write_folder(tmp_path / "in", CONFIG, t)
    model = build_transformer_model(folder, folder, with_mlm=True, verbose=False)
    out = save_hf_checkpoint(model, tmp_path / "out")
    saved = load_file(os.path.join(out, "model.safetensors"))
    assert sorted(saved) == sorted(t) and all(np.array_equal(saved[name], t[name]) for name in t)
    config = json.load(open(os.path.join(out, "config.json")))
    assert {key: config[key] for key in CONFIG} == CONFIG  # every key as read, transformers' spelling
    assert "type_vocab_size" not in config and "hidden_act" not in config
    again = build_transformer_model(out, out, with_mlm=True, verbose=False)
    data = batch(CONFIG)
    np.testing.assert_array_equal(again.predict(data["ids"], verbose=0), model.predict(data["ids"], verbose=0))


def test_a_preset_model_is_saved_with_the_options_it_was_built_with(tmp_path):
    """A model built from a BERT preset with ``model="modernbert"`` (ModernBERT-base's options) writes them into its
    config.json, so the folder builds the same model again."""
    model = build_transformer_model("tiny", model="modernbert", num_hidden_layers=3, with_mlm="linear",
                                    verbose=False)
    out = save_hf_checkpoint(model, tmp_path / "out")
    config = json.load(open(os.path.join(out, "config.json")))
    assert (config["model_type"], config["architectures"]) == ("modernbert", ["ModernBertForMaskedLM"])
    assert {key: config[key] for key in ("local_attention", "global_attn_every_n_layers", "global_rope_theta",
                                         "local_rope_theta", "norm_bias", "decoder_bias")} == {
        "local_attention": 128, "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0, "norm_bias": False, "decoder_bias": True}
    again = build_transformer_model(out, out, with_mlm="linear", verbose=False)
    ids = np.array([[2, 9, 17, 3, 0, 0]], "int32")
    np.testing.assert_array_equal(again.predict(ids, verbose=0), model.predict(ids, verbose=0))
