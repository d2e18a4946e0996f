"""Bad inputs of the relation task, rows of ``tests/test_bad_inputs.py``'s table: each a DataError naming the file,
line and field, before a run folder is written."""

from __future__ import annotations

import json
from pathlib import Path

from kerasbert.errors import DataError

from bad_input_kit import Case, text, train_cli, vocab

GOOD = {"text": "张三在北京", "spo_list": [{"subject": "张三", "predicate": "位于", "object": "北京"}]}


def _lines(*rows, name: str = "train.jsonl"):
    """A writer of the vocabulary, a good training file and ``name`` holding ``rows`` (a good one first)."""
    def write(tmp: Path, _shared) -> None:
        vocab(tmp)
        text(tmp / "train.jsonl", json.dumps(GOOD, ensure_ascii=False) + "\n")
        text(tmp / name, "".join((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n"
                                 for row in rows))

    return write


def _train(dev: bool = False):
    def call(tmp: Path):
        from kerasbert import train

        return train("relation", str(tmp / "train.jsonl"), str(tmp / "out"), vocab=str(tmp / "vocab.txt"), epochs=1,
                     verbose=0, **({"dev": str(tmp / "dev.jsonl")} if dev else {}))

    return call


def _cli(dev: bool = False):
    return lambda tmp: train_cli(tmp, *(["--dev", str(tmp / "dev.jsonl")] if dev else []), task="relation",
                                 data="train.jsonl")


def _spo(**changes) -> dict:
    return {"text": "张三在北京", "spo_list": [{**GOOD["spo_list"][0], **changes}]}


def rows() -> list[Case]:
    missing = {"text": "张三在北京", "spo_list": [{"subject": "李四", "predicate": "位于", "object": "北京"}]}
    lacking = {"text": "张三在北京", "spo_list": [{"subject": "张三", "object": "北京"}]}
    return [
        Case("relation-entity-missing", _lines(GOOD, missing), _train(), DataError,
             ("train.jsonl:2 subject", "an entity the text holds", "'李四'"), ("out",), _cli()),
        Case("relation-predicate-unseen-dev", _lines(GOOD, _spo(predicate="居住地"), name="dev.jsonl"), _train(True),
             DataError, ("dev.jsonl:2", "predicates seen in training, ['位于']", "'居住地'"), ("out",), _cli(True)),
        Case("relation-spo-not-an-object", _lines(GOOD, {"text": "张三在北京", "spo_list": [["张三", "位于", "北京"]]}),
             _train(), DataError, ("train.jsonl:2", 'an spo {"subject", "predicate", "object"}', "['张三'"), ("out",),
             _cli()),
        Case("relation-spo-lacks-a-key", _lines(lacking), _train(), DataError,
             ("train.jsonl:1", 'an spo {"subject", "predicate", "object"}', "{'subject'"),
             ("out",), _cli()),
        Case("relation-offset-past-the-text", _lines(_spo(object_start=9)), _train(), DataError,
             ("train.jsonl:1 object_start", "an offset from 0 to 3", "found 9"), ("out",), _cli()),
        Case("relation-empty-file", _lines(), _train(), DataError, ("train.jsonl", "found an empty file"), ("out",),
             _cli()),
    ]
