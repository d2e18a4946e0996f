"""What `kerasbert export` prints (`kerasbert.serving.commands`), from the ``kerasbert-export.json`` it wrote: what
the export computes in, and the export's and the run's dev scores for every format and task."""

from __future__ import annotations

import pytest

from kerasbert.cli import build_parser
from kerasbert.serving import commands

SEQ2SEQ = {"task": "seq2seq", "labels": [], "maxlen": 40, "stride": None, "format": "saved_model", "int8": False,
           "precision": "f32", "precision_choice": {"asked": "auto", "why": "auto: a SavedModel is served wherever "
                                                                             "TensorFlow runs"},
           "dev": {"rouge-l": 0.41234, "bleu": 0.1, "count": 8}, "dev_run": {"rouge-l": 0.41234, "bleu": 0.1,
                                                                              "count": 8}}
INT8 = {**SEQ2SEQ, "task": "cls", "labels": ["neg", "pos"], "format": "onnx", "int8": True,
        "precision_choice": {"asked": "auto", "why": "auto: ONNX Runtime's CPU kernels multiply floats in float32"},
        "dev": {"accuracy": 0.875, "per_label": {}}, "dev_run": {"accuracy": 0.9}}


def printed(monkeypatch, capsys, info: dict, *options: str) -> list[str]:
    import kerasbert.serving.export

    monkeypatch.setattr(kerasbert.serving.export, "export", lambda *args, **kwargs: info)
    assert commands.run_export(build_parser().parse_args(["export", "runs/x", "out", *options])) == 0
    return capsys.readouterr().out.splitlines()


def test_a_seq2seq_savedmodel_prints_its_dev_score(monkeypatch, capsys):
    assert printed(monkeypatch, capsys, SEQ2SEQ) == [
        "out: seq2seq model, maxlen 40, saved_model",
        "precision f32: auto: a SavedModel is served wherever TensorFlow runs",
        "dev score of the export: bleu 0.1000, rouge-l 0.4123",
        "dev score of the run: bleu 0.1000, rouge-l 0.4123"]


def test_an_int8_export_says_it_computes_in_int8(monkeypatch, capsys):
    assert printed(monkeypatch, capsys, INT8, "--format", "onnx", "--int8") == [
        "out: cls model, 2 labels, maxlen 40, onnx int8",
        "precision int8 (f32 elsewhere): auto: ONNX Runtime's CPU kernels multiply floats in float32",
        "dev score of the export: accuracy 0.8750",
        "dev score of the run: accuracy 0.9000"]


@pytest.mark.parametrize("info, words", [({"int8": True, "precision": "bf16"}, "int8 (bf16 elsewhere)"),
                                         ({"int8": False, "precision": "f32"}, "f32")])
def test_computes_in_reads_the_export_json(info, words):
    assert commands.computes_in(info) == words
