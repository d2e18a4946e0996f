"""Atomic writes: a failed write leaves the old file and no temporary; the temporary keeps the extension. JSON read
from users' files: one named error, however deep the nesting."""

from __future__ import annotations

import os

import pytest

from kerasbert.errors import ConfigError, DataError
from kerasbert.files import JSON_DEPTH, atomic_path, json_value, write_text


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


@pytest.mark.parametrize("text", ['{"text": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"a": ' * 50_000 + "1" + "}" * 50_000, "[" * 990 + "]" * 990,
                                  "[" * (JSON_DEPTH + 1) + "]" * (JSON_DEPTH + 1)],
                         ids=["list-100000", "object-50000", "list-990", "list-101"])
def test_json_nested_past_the_depth_is_one_named_error(text):
    with pytest.raises(DataError, match=r"^in\.jsonl:7: expected one JSON object, found a value nested more than 100 "
                                        r"deep\. one document a line$"):
        json_value(text, "in.jsonl:7", "one JSON object", hint="one document a line")
    with pytest.raises(ConfigError, match="^modules.json: expected a list, found a value nested"):
        json_value(text.encode(), "modules.json", "a list", ConfigError)


def test_json_within_the_depth_and_bad_json_read_as_before():
    deep = "[" * JSON_DEPTH + "1" + "]" * JSON_DEPTH
    value = json_value(deep, "a.json", "a list")
    for _ in range(JSON_DEPTH):
        value = value[0]
    assert value == 1
    assert json_value('{"a": "[[[[", "b": [1, {"c": []}]}', "a.json", "x") == {"a": "[[[[", "b": [1, {"c": []}]}
    with pytest.raises(DataError, match=r"^a.json:2: expected one JSON object, found invalid JSON \(JSONDecodeError: "):
        json_value('{"text": ', "a.json:2", "one JSON object")
