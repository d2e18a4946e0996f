"""`kerasbert.serving.folder`: the export folder's information file read with named errors, and an export published
whole, or kept aside past its bound."""

from __future__ import annotations

import json
import os

import pytest

from kerasbert.errors import ConfigError, ModelError
from kerasbert.serving.folder import EXPORT_INFO, publish_export, read_info, vocab_checksum

INFO = {"task": "cls", "labels": ["neg", "pos"], "pairs": False, "format": "onnx", "int8": True, "precision": "f32",
        "precision_choice": {"asked": "f32", "why": "asked for"}}


def _write(lost: str | None, accept_loss: bool, out: str) -> dict:
    info = dict(INFO)

    def write(staging: str) -> None:
        with open(os.path.join(staging, "model.onnx"), "w") as f:
            f.write("model")

    publish_export(out, info, write, lambda _: lost, "the run's dev score", accept_loss)
    return info


def test_an_export_within_its_bound_appears_whole_with_its_info(tmp_path):
    out = str(tmp_path / "export")
    _write(None, False, out)
    assert sorted(os.listdir(out)) == [EXPORT_INFO, "model.onnx"]
    assert read_info(out, "cls") == INFO


def test_an_export_past_its_bound_is_kept_aside_each_time_under_a_new_name(tmp_path):
    out = str(tmp_path / "export")
    for kept in ("export.rejected", "export.rejected-2"):
        with pytest.raises(ModelError, match=f"onnx int8 export within the bound .* dev -0.2.* kept at .*{kept}:"):
            _write("dev -0.2", False, out)
        assert sorted(os.listdir(tmp_path / kept)) == [EXPORT_INFO, "model.onnx"]
    assert not os.path.exists(out)
    _write("dev -0.2", True, out)  # accepted: published with its loss
    assert json.loads((tmp_path / "export" / EXPORT_INFO).read_text()) == INFO


def test_read_info_names_what_is_wrong(tmp_path):
    with pytest.raises(ConfigError, match="expected an export folder with kerasbert-export.json .*found no such file"):
        read_info(str(tmp_path))
    (tmp_path / EXPORT_INFO).write_text('{"task": "cls"}')
    with pytest.raises(ConfigError, match="expected the JSON `kerasbert export` writes, found something else"):
        read_info(str(tmp_path))
    (tmp_path / EXPORT_INFO).write_text(json.dumps(INFO))
    with pytest.raises(ConfigError, match="expected an export of a ner model, found one of a cls model"):
        read_info(str(tmp_path), "ner")


def test_the_vocab_checksum_is_the_files_sha256(tmp_path):
    (tmp_path / "vocab.txt").write_bytes(b"abc")  # SHA-256 of "abc", FIPS 180-2 appendix B.1
    assert vocab_checksum(str(tmp_path / "vocab.txt")) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
