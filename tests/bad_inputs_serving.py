"""Bad inputs of exports, `predict --model` and `serve`: rows of the catalogue in ``tests/test_bad_inputs.py``."""

from __future__ import annotations

import functools
import json
import math
import shutil
from pathlib import Path

from kerasbert.errors import ConfigError

from bad_input_kit import Case, Shared, text


def _labels_changed(tmp: Path, shared: Shared) -> None:
    """The shared OpenVINO export (a 2-label classifier) whose kerasbert-export.json lists 3 labels."""
    shutil.copytree(shared.exported, tmp / "export")
    info = json.loads((tmp / "export" / "kerasbert-export.json").read_text(encoding="utf-8"))
    text(tmp / "export" / "kerasbert-export.json", json.dumps({**info, "labels": ["neg", "pos", "mid"]}))


def _serve_call(tmp: Path, **options):
    from kerasbert.serving.server import serve

    return serve(str(tmp / "export"), **options)


def _setting(option: str, value, words: tuple[str, ...]) -> Case:
    """``kerasbert serve --OPTION VALUE``: refused before the export is opened (there is none)."""
    flag = "--" + option.replace("_", "-")
    return Case(f"serve-{flag[2:]}-{value}", lambda tmp, _: None,
                functools.partial(_serve_call, **{option: value}), ConfigError, (option, *words), (),
                lambda tmp: ["serve", str(tmp / "export"), flag, str(value)])


def _output_check(tmp: Path, name: str):
    from kerasbert.cli import _check_output

    return _check_output(str(tmp / name))


def rows() -> list[Case]:
    from kerasbert.serving.exported import predict_export

    predict_cli = lambda tmp, *extra: ["predict", "--model", str(tmp / "export"), "--text", "很好", *extra]  # noqa: E731
    return [
        _setting("port", 70000, ("an integer from 0 to 65535", "70000")),
        _setting("port", -1, ("an integer from 0 to 65535", "-1")),
        _setting("timeout_s", math.nan, ("a finite number > 0", "nan")),
        _setting("timeout_s", math.inf, ("a finite number > 0", "inf")),
        _setting("max_wait_ms", math.nan, ("a finite number >= 0", "nan")),
        _setting("header_timeout_s", 0.0, ("a finite number > 0", "0.0")),
        _setting("body_timeout_s", math.inf, ("a finite number > 0", "inf")),
        _setting("grace_s", math.nan, ("a finite number > 0", "nan")),
        _setting("max_connections", 0, ("an integer > 0", "0")),
        Case("predict-model-labels-not-the-models", _labels_changed,
             lambda tmp: predict_export(str(tmp / "export"), ["很好"]), ConfigError,
             ("kerasbert-export.json labels", "2 labels", "found 3", "'mid'", "export the run again"), (),
             predict_cli),
        Case("serve-export-labels-not-the-models", _labels_changed, functools.partial(_serve_call, port=0),
             ConfigError, ("kerasbert-export.json labels", "2 labels", "found 3"), (),
             lambda tmp: ["serve", str(tmp / "export"), "--port", "0"]),
        Case("serve-stride-of-an-export", lambda tmp, shared: shutil.copytree(shared.exported, tmp / "export"),
             functools.partial(_serve_call, port=0, stride=3), ConfigError,
             ("--stride", "a run folder", "the export folder", "export the run again with --stride"), (),
             lambda tmp: ["serve", str(tmp / "export"), "--port", "0", "--stride", "3"]),
        Case("predict-output-is-a-folder", lambda tmp, _: (tmp / "out").mkdir(),
             functools.partial(_output_check, name="out"), ConfigError,
             ("--output", "out", "a file to write the predictions to", "a folder"), (),
             lambda tmp: predict_cli(tmp, "--output", str(tmp / "out"))),
        Case("predict-output-under-a-file", lambda tmp, _: text(tmp / "file.txt", "a file\n"),
             functools.partial(_output_check, name="file.txt/out.jsonl"), ConfigError,
             ("--output", "a path under a folder", "file.txt, a file, on the way"), (),
             lambda tmp: predict_cli(tmp, "--output", str(tmp / "file.txt" / "out.jsonl"))),
    ]
