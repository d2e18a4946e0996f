"""Bad inputs of sentence vectors (`kerasbert.embed`, ``kerasbert embed``, vector exports): rows of the catalogue in
``tests/test_bad_inputs.py``. Each fails before a model loads, so the folders hold only what is read first: a
sentence-transformers folder its JSON files and the encoder's ``config.json``."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

from kerasbert.errors import CheckpointError, ConfigError

import helpers
from bad_input_kit import Case, fake_run, text

MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
MEAN = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False}


def _sentence_transformers(tmp: Path, _shared=None, modules: list | None = None, pooling: dict | None = None) -> None:
    """A sentence-transformers folder ``st`` (its encoder's config, no weights) and an input file."""
    text(tmp / "st" / "modules.json", json.dumps(modules or MODULES))
    text(tmp / "st" / "config.json", json.dumps({"model_type": "bert", **helpers.TINY}))
    text(tmp / "st" / "1_Pooling" / "config.json", json.dumps(pooling or MEAN))
    text(tmp / "in.txt", "很好\n")


def _input(tmp: Path, _shared) -> None:
    text(tmp / "in.txt", "很好\n")


def _embed(folder: str, **options):
    def call(tmp: Path):
        from kerasbert import embed

        return embed(str(tmp / folder), ["很好"], **options)

    return call


def _embed_cli(folder: str, *extra: str, output: str = "vectors.npy"):
    return lambda tmp: ["embed", str(tmp / folder), "--input", str(tmp / "in.txt"), "--output", str(tmp / output),
                        *extra]


def _embed_file(tmp: Path):
    from kerasbert.serving.embed import embed_file

    return embed_file(str(tmp / "st"), str(tmp / "in.txt"), str(tmp / "vectors.csv"))


def _cls_export(tmp: Path, shared) -> None:
    shutil.copytree(shared.exported, tmp / "export")
    _input(tmp, shared)


def _export_cls_run(tmp: Path):
    from kerasbert.serving.export import export

    return export(str(tmp / "run"), str(tmp / "out"), pooling="mean")


def _embed_output(tmp: Path):
    from kerasbert.serving.embed import embed_file

    return embed_file(str(tmp / "st"), str(tmp / "in.txt"), str(tmp / "missing" / "sub" / ".." / ".." / "v.npy"))


def _export_st(out: str, **options):
    def call(tmp: Path):
        from kerasbert.serving.export import export

        return export(str(tmp / "st"), str(tmp / out), **options)

    return call


def rows() -> list[Case]:
    nul = [MODULES[0], {**MODULES[1], "path": "1_Pooling\x00/../../etc"}, MODULES[2]]
    dense = [*MODULES[:2], {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    return [
        Case("embed-pooling-unknown", _input, _embed("st", pooling="max"), ConfigError,
             ("--pooling", "'max'", "mean", "first_last_avg", "linear"), (),
             _embed_cli("st", "--pooling", "max")),
        Case("embed-output-suffix", _sentence_transformers, _embed_file, ConfigError,
             ("--output", "vectors.csv", ".npy or .jsonl", "'.csv'"), ("vectors.csv",),
             _embed_cli("st", output="vectors.csv")),
        Case("sentence-transformers-pooling-max",
             functools.partial(_sentence_transformers, pooling={**MEAN, "pooling_mode_mean_tokens": False,
                                                                "pooling_mode_max_tokens": True}),
             _embed("st"), ConfigError, ("1_Pooling", "config.json", "found pooling_mode_max_tokens",
                                         "pooling_mode_cls_token or pooling_mode_mean_tokens"), ("vectors.npy",),
             _embed_cli("st")),
        Case("sentence-transformers-dense-module", functools.partial(_sentence_transformers, modules=dense),
             _embed("st"), ConfigError, ("modules.json", "Dense module at '2_Dense'",
                                         "Transformer, Pooling and optionally Normalize"), ("vectors.npy",),
             _embed_cli("st")),
        Case("sentence-transformers-dimension",
             functools.partial(_sentence_transformers, pooling={**MEAN, "word_embedding_dimension": 768}),
             _embed("st"), ConfigError, ("word_embedding_dimension", "hidden_size, 32", "found 768"),
             ("vectors.npy",), _embed_cli("st")),
        Case("sentence-transformers-pooling-contradicted", _sentence_transformers, _embed("st", pooling="cls"),
             ConfigError, ("--pooling cls", "sentence-transformers folder", "'mean'"), ("vectors.npy",),
             _embed_cli("st", "--pooling", "cls")),
        Case("embed-an-export-of-labels", _cls_export, _embed("export"), ConfigError,
             ("export", "a sentence-vector model", "a cls model"), ("vectors.npy",), _embed_cli("export")),
        Case("export-pooling-of-a-cls-run", lambda tmp, _: fake_run(tmp), _export_cls_run, ConfigError,
             ("--pooling", "sentence vectors", "a cls run"), ("out",),
             lambda tmp: ["export", str(tmp / "run"), str(tmp / "out"), "--pooling", "mean"]),
        Case("sentence-transformers-modules-path-nul", functools.partial(_sentence_transformers, modules=nul),
             _embed("st"), CheckpointError, ("modules.json", "Pooling", "NUL"), ("vectors.npy",), _embed_cli("st")),
        Case("embed-output-through-a-missing-folder", _sentence_transformers, _embed_output, ConfigError,
             ("--output", "'..' after", "missing, which does not exist"), ("v.npy", "missing"),
             _embed_cli("st", output="missing/sub/../../v.npy")),
        Case("embed-a-run-that-saved-no-model", lambda tmp, _: (fake_run(tmp), _input(tmp, _)), _embed("run"),
             ConfigError, ("run", "a kerasbert run folder with model.keras", "no model.keras", "--resume"),
             ("vectors.npy",), _embed_cli("run")),
        Case("export-out-under-a-file", _sentence_transformers, _export_st("in.txt/out"), ConfigError,
             ("out", "in.txt/out", "a path under a folder", "a file, on the way"), (),
             lambda tmp: ["export", str(tmp / "st"), str(tmp / "in.txt" / "out")]),
        Case("export-bf16-onnx", _sentence_transformers, _export_st("out", format="onnx", precision="bf16"),
             ConfigError, ("--precision bf16", "--format openvino or saved_model", "--format onnx"), ("out",),
             lambda tmp: ["export", str(tmp / "st"), str(tmp / "out"), "--format", "onnx", "--precision", "bf16"]),
    ]
