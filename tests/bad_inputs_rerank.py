"""Bad inputs of the rerank task, rows of ``tests/test_bad_inputs.py``'s table: its data files through ``train`` (the
run folder never written), and ``kerasbert rerank``'s query, passages and model."""

from __future__ import annotations

import json
from pathlib import Path

from kerasbert.errors import ConfigError, DataError

from bad_input_kit import Case, cls_data, fake_run, text


def _jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


GOOD = ({"query": "张三", "passage": "很好", "label": 1}, {"query": "张三", "passage": "很差", "label": 0})


def _data(content: str, name: str = "train.jsonl", dev: str | None = None):
    def write(tmp: Path, _shared) -> None:
        cls_data(tmp, content, name)
        if dev is not None:
            text(tmp / "dev.jsonl", dev)

    return write


def _train(name: str = "train.jsonl", dev: bool = False):
    def call(tmp: Path):
        from kerasbert import train

        extra = {"dev": str(tmp / "dev.jsonl")} if dev else {}
        return train("rerank", str(tmp / name), str(tmp / "out"), vocab=str(tmp / "vocab.txt"), verbose=0, **extra)

    return call


def _train_cli(name: str = "train.jsonl", dev: bool = False):
    return lambda tmp: ["train", "--task", "rerank", "--train", str(tmp / name), "--vocab", str(tmp / "vocab.txt"),
                        "--out", str(tmp / "out"), "--quiet", *(["--dev", str(tmp / "dev.jsonl")] if dev else [])]


def _data_rows() -> list[Case]:
    cases = [("negative-label", _jsonl(GOOD[0], {**GOOD[1], "label": -1}), ("train.jsonl:2", "a number >= 0", "'-1'")),
             ("label-not-a-number", _jsonl({**GOOD[0], "label": "relevant"}, GOOD[1]),
              ("train.jsonl:1", "a number >= 0", "'relevant'")),
             ("file-row-missing-query", _jsonl(GOOD[0], {"passage": "很差", "label": 0}),
              ("train.jsonl:2", "field 'query'", "keys ['label', 'passage']")),
             ("empty-passage", _jsonl(GOOD[0], {**GOOD[1], "passage": "  "}),
              ("train.jsonl:2", "expected a passage", "an empty one")),
             ("every-label-zero", _jsonl({**GOOD[0], "label": 0}, GOOD[1]),
              ("training data", "at least one relevant pair", "every label 0"))]
    rows = [Case(f"rerank-{name}", _data(content), _train(), DataError, words, ("out",), _train_cli())
            for name, content, words in cases]
    return rows + [
        Case("rerank-empty-file", _data("", "train.tsv"), _train("train.tsv"), DataError,
             ("train.tsv", "at least one example", "an empty file"), ("out",), _train_cli("train.tsv")),
        Case("rerank-tsv-missing-label", _data("张三\t很好\t1\n张三\t很差\n", "train.tsv"), _train("train.tsv"),
             DataError, ("train.tsv:2", "3 columns", "2 columns"), ("out",), _train_cli("train.tsv")),
        Case("rerank-dev-without-a-relevant-pair", _data(_jsonl(*GOOD), dev=_jsonl({**GOOD[0], "label": 0})),
             _train(dev=True), DataError, ("dev.jsonl", "at least one relevant pair (a label > 0) to rank",
                                           "every label 0"), ("out",), _train_cli(dev=True)),
    ]


def _rerank_call(query: str | None, passages: str = "passages.txt"):
    def call(tmp: Path):
        from kerasbert import rerank
        from kerasbert.serving.rerank_command import read_passages

        return rerank(str(tmp / "run"), query, read_passages(str(tmp / passages)))

    return call


def _rerank_cli(query: str | None, passages: str = "passages.txt"):
    return lambda tmp: ["rerank", str(tmp / "run"), *(["--query", query] if query is not None else []),
                        "--input", str(tmp / passages)]


def _run(task: str, passages: str = "很好\n很差\n"):
    def write(tmp: Path, _shared) -> None:
        fake_run(tmp, task=task, model=b"not read: the checks come first")
        text(tmp / "passages.txt", passages)

    return write


def _command_rows() -> list[Case]:
    return [
        Case("rerank-no-passages", _run("rerank", ""), _rerank_call("张三"), DataError,
             ("passages.txt", "at least one passage to rank", "an empty file"), (), _rerank_cli("张三")),
        Case("rerank-blank-passages", _run("rerank", "\n  \n"), _rerank_call("张三"), DataError,
             ("passages.txt", "at least one passage to rank", "only blank lines"), (), _rerank_cli("张三")),
        Case("rerank-command-missing-query", _run("rerank"), _rerank_call(None), ConfigError,
             ("query", "a query to rank the passages for", "none"), (), _rerank_cli(None)),
        Case("rerank-blank-query", _run("rerank"), _rerank_call(" "), ConfigError,
             ("query", "a query to rank the passages for", "a blank one"), (), _rerank_cli(" ")),
        Case("rerank-a-cls-run", _run("cls"), _rerank_call("张三"), ConfigError,
             ("run", "a run of --task rerank", "a run of --task cls"), (), _rerank_cli("张三")),
    ]


def rows() -> list[Case]:
    return _data_rows() + _command_rows()
