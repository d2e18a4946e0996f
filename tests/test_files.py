"""Atomic writes: a failed write leaves the old file and no temporary; the temporary keeps the extension."""

from __future__ import annotations

import os

import pytest

from kerasbert.files import atomic_path, write_text


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "labels.json"
    write_text(path, "old\n")
    with pytest.raises(RuntimeError, match="killed"), atomic_path(path) as tmp:
        with open(tmp, "w") as out:
            out.write("half")
        raise RuntimeError("killed")
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["labels.json"]


def test_the_temporary_sits_beside_the_target_and_ends_with_its_name(tmp_path):
    with atomic_path(tmp_path / "model.keras") as tmp:
        assert os.path.dirname(tmp) == str(tmp_path) and tmp.endswith("-model.keras")
        with open(tmp, "w") as out:
            out.write("x")
    assert os.listdir(tmp_path) == ["model.keras"]
