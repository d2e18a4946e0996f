"""Bad inputs of the qa task, rows of ``tests/test_bad_inputs.py``'s table: each file fails training before anything
is written, naming its file and line, what was expected and what was found."""

from __future__ import annotations

import json
from pathlib import Path

from kerasbert.errors import ConfigError, DataError

from bad_input_kit import Case, cls_data, text, train_cli

GOOD = {"question": "谁很好?", "context": "张三很好", "answers": [{"text": "张三", "answer_start": 0}]}


def _jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _write(content: str, name: str = "train.jsonl"):
    def write(tmp: Path, _shared) -> None:
        cls_data(tmp, "", "unused.tsv")  # the vocabulary
        text(tmp / name, content)
    return write


def _train(name: str = "train.jsonl", **options):
    def call(tmp: Path):
        from kerasbert import train

        return train("qa", str(tmp / name), str(tmp / "out"), vocab=str(tmp / "vocab.txt"), verbose=0, **options)
    return call


def _case(id: str, content: str, words: tuple[str, ...], name: str = "train.jsonl", error=DataError) -> Case:
    return Case(id, _write(content, name), _train(name), error, words, ("out",),
                lambda tmp: train_cli(tmp, task="qa", data=name))


def _squad(question: dict) -> str:
    data = {"data": [{"paragraphs": [{"context": "张三很好", "qas": [GOOD | {"id": "a"}, question]}]}]}
    return json.dumps(data, ensure_ascii=False, indent=1)


def rows() -> list[Case]:
    return [
        _case("qa-answer-not-in-its-context", _jsonl(GOOD, {**GOOD, "answers": [{"text": "李四", "answer_start": 0}]}),
              ("train.jsonl:2", "expected an answer that is in its context: '李四' at answer_start 0",
               "'张三' there, and the text is nowhere in the context")),
        _case("qa-answer-past-the-context", _jsonl(GOOD, {**GOOD, "answers": [{"text": "很好", "answer_start": 3}]}),
              ("train.jsonl:2", "an answer within its context of 4 characters", "ending at 5")),
        _case("qa-answer-start-not-an-int", _jsonl({**GOOD, "answers": [{"text": "张三", "answer_start": "0"}]}),
              ("train.jsonl:1", '{"text": a string, "answer_start": an int >= 0}')),
        _case("qa-answer-empty", _jsonl({**GOOD, "answers": [{"text": "", "answer_start": 0}]}),
              ("train.jsonl:1", "an answer text", "an empty one", '"answers": []')),
        _case("qa-without-context", _jsonl(GOOD, {"question": "谁?", "answers": []}),
              ("train.jsonl:2", "field 'context'", "keys ['answers', 'question']")),
        _case("qa-without-question", _jsonl({"context": "张三很好", "answers": []}),
              ("train.jsonl:1", "field 'question'")),
        _case("qa-question-blank", _jsonl({**GOOD, "question": "  "}), ("train.jsonl:1", "a question", "an empty one")),
        _case("qa-answers-mismatched-lists", _jsonl({**GOOD, "answers": {"text": ["张三"], "answer_start": []}}),
              ("train.jsonl:1", '{"text": [...], "answer_start": [...]} of equal lengths')),
        _case("qa-empty-file", "", ("train.jsonl", "at least one example", "an empty file")),
        _case("qa-squad-answer-not-in-its-context", _squad({"id": "b", "question": "谁?",
                                                            "answers": [{"text": "王五", "answer_start": 1}]}),
              ("train.json:20", "an answer that is in its context: '王五' at answer_start 1"), name="train.json"),
        _case("qa-squad-without-paragraphs", json.dumps({"data": [{"title": "x"}]}),
              ("train.json", 'each article with "paragraphs": a list'), name="train.json"),
        _case("qa-a-tsv-file", "谁\t张三\n", ("train.tsv", "a SQuAD .json file or a .jsonl file of questions",
                                               "extension '.tsv'"), name="train.tsv"),
        Case("qa-stride-leaves-no-room", _write(_jsonl(GOOD)), _train(maxlen=16, stride=12), ConfigError,
             ("--stride", "expected at most maxlen - 5 = 11 for qa", "found 12"), ("out",),
             lambda tmp: train_cli(tmp, "--maxlen", "16", "--stride", "12", task="qa", data="train.jsonl")),
    ]
