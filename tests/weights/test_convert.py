"""kerasbert.weights.convert: what crosses with the weights (the tokenizer's case), what must be there, what is
refused before anything is read, and the files a conversion leaves."""

from __future__ import annotations

import json
import logging
import os
import stat

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from kerasbert.errors import CheckpointError
from kerasbert.files import TEMPORARY
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.weights.convert import convert_checkpoint
from kerasbert.weights.torch_pickle import TorchFile

import helpers
from bad_input_kit import google, hf, text
from bad_inputs_weights import WORD, hostile_bin

CASED_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hello", "hello", "World", "world"]


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A tiny Hugging Face folder (model.safetensors, config.json), converted once from a Google checkpoint."""
    return hf(tmp_path_factory.mktemp("hf"))


def test_a_cased_model_stays_cased_both_ways(hf_folder, tmp_path):
    source = tmp_path / "cased-hf"
    source.mkdir()
    for name in ("model.safetensors", "config.json"):
        (source / name).write_bytes((hf_folder / name).read_bytes())
    text(source / "vocab.txt", "\n".join(CASED_VOCAB) + "\n")
    text(source / "tokenizer_config.json", json.dumps({"do_lower_case": False, "model_max_length": 64}))
    assert Tokenizer(str(source)).tokenize("Hello World") == ["[CLS]", "Hello", "World", "[SEP]"]

    convert_checkpoint(source, tmp_path / "google", to="google")
    carried = json.loads((tmp_path / "google" / "tokenizer_config.json").read_text())
    assert carried == {"do_lower_case": False, "model_max_length": 64}
    assert Tokenizer(str(tmp_path / "google")).tokenize("Hello World") == ["[CLS]", "Hello", "World", "[SEP]"]

    convert_checkpoint(tmp_path / "google", tmp_path / "back", to="hf")
    assert json.loads((tmp_path / "back" / "tokenizer_config.json").read_text())["do_lower_case"] is False
    assert Tokenizer(str(tmp_path / "back")).tokenize("Hello World") == ["[CLS]", "Hello", "World", "[SEP]"]


@pytest.mark.parametrize("folder, lower", [("cased_L-2_H-32_A-2", False), ("wwm_uncased_L-2_H-32_A-2", True),
                                           ("multi_cased_L-2", False), ("chinese_L-2_H-32_A-2", None)])
def test_a_google_folder_name_gives_the_case(tmp_path, folder, lower, caplog):
    source = google(tmp_path, name=folder)
    with caplog.at_level(logging.INFO, logger="kerasbert"):
        convert_checkpoint(source, tmp_path / "hf")
    written = tmp_path / "hf" / "tokenizer_config.json"
    if lower is None:  # Google's name says nothing: nothing is made up, and the log says so
        assert not written.exists() and "does not say the tokenizer's case" in caplog.text
    else:
        assert json.loads(written.read_text()) == {"do_lower_case": lower, "tokenizer_class": "BertTokenizer"}


def test_each_missing_encoder_variable_is_refused_and_heads_are_listed(hf_folder, tmp_path, caplog):
    tensors = load_file(str(hf_folder / "model.safetensors"))
    required = [name for name in tensors if not name.startswith(("bert.pooler", "cls."))]
    assert len(required) == 37  # 5 embedding variables and 16 per block, 2 blocks
    source = tmp_path / "src"
    source.mkdir()
    text(source / "config.json", (hf_folder / "config.json").read_text())
    for name in required:
        save_file({k: v for k, v in tensors.items() if k != name}, str(source / "model.safetensors"))
        with pytest.raises(CheckpointError, match=rf"found 1 missing: {name}\. the checkpoint is incomplete"):
            convert_checkpoint(source, tmp_path / "out", to="google")
        assert not (tmp_path / "out").exists()
    save_file({k: v for k, v in tensors.items() if k in required}, str(source / "model.safetensors"))
    with caplog.at_level(logging.INFO, logger="kerasbert"):
        convert_checkpoint(source, tmp_path / "out", to="google")
    assert "has no MLM-Bias, MLM-Dense, MLM-Norm, NSP-Proba, Pooler-Dense: not converted" in caplog.text


def test_an_extra_string_variable_is_listed_not_converted(tmp_path, caplog):
    values = helpers.random_google_weights(helpers.TINY, heads=False)
    values["notes"] = np.array([b"trained on news"])
    with caplog.at_level(logging.INFO, logger="kerasbert"):
        convert_checkpoint(google(tmp_path, values=values), tmp_path / "hf")
    assert "have no hf name and are not converted: notes" in caplog.text
    assert "notes" not in load_file(str(tmp_path / "hf" / "model.safetensors"))


def test_shapes_are_checked_before_any_tensor_is_read(tmp_path, monkeypatch):
    hostile_bin(tmp_path, (2048, 2048), (2048, 1), numel=2048 * 2048)
    read = []
    monkeypatch.setattr(TorchFile, "get", lambda self, name: read.append(name))
    with pytest.raises(CheckpointError, match=rf"{WORD} in .*: expected shape \[128, 32\] \(from config.json\), "
                                              r"found \[2048, 2048\]"):
        convert_checkpoint(tmp_path / "ckpt", tmp_path / "out")
    assert read == []


def test_files_get_the_mode_of_every_kerasbert_file(hf_folder, tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    for target, to in ((tmp_path / "google", "google"), (tmp_path / "hf", "hf")):
        source = hf_folder if to == "google" else tmp_path / "google"
        convert_checkpoint(source, target, to=to)
        modes = {name: stat.S_IMODE(os.stat(target / name).st_mode) for name in os.listdir(target)}
        assert set(modes.values()) == {0o666 & ~umask}, modes
    assert "model.safetensors" in os.listdir(tmp_path / "hf")


def test_a_killed_conversions_staging_folder_is_removed(hf_folder, tmp_path):
    stale = tmp_path / f"{TEMPORARY}k1ll3d-out"
    text(stale / "bert_model.ckpt.index", b"half")
    other = text(tmp_path / f"{TEMPORARY}k1ll3d-other" / "a", b"not this conversion's")
    convert_checkpoint(hf_folder, tmp_path / "out", to="google")
    assert not stale.exists() and other.exists()
    assert sorted(os.listdir(tmp_path)) == sorted([f"{TEMPORARY}k1ll3d-other", "out"])
