"""An OpenVINO or ONNX export scores itself on the run's dev file and is published only within `LOSS_BOUND` of the
run's score: beyond it, export exits 2 and keeps the export aside at ``OUT.rejected``, unless ``--accept-loss``.
A run whose dev file is gone is exported with its score marked unmeasured."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from kerasbert import ModelError, train
from kerasbert.choices import LOSS_BOUND
from kerasbert.cli import main
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.serving.export import export, loss_over_bound
from kerasbert.serving.folder import EXPORT_INFO

pytestmark = pytest.mark.slow  # trains a small model and converts it


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> tuple[str, float]:
    """``(run folder, its ONNX export's dev accuracy)``: a tiny classifier trained one short epoch."""
    data = write_demo_data(str(tmp_path_factory.mktemp("data")), n_train=64, n_dev=24, n_test=4)
    run = str(tmp_path_factory.mktemp("run"))
    train("cls", data["cls_train"], run, dev=data["cls_dev"], vocab=data["vocab"], epochs=1, batch_size=16,
          maxlen=16, verbose=0)
    info = export(run, os.path.join(str(tmp_path_factory.mktemp("export")), "out"), "onnx")
    assert info["dev"]["accuracy"] == pytest.approx(info["dev_run"]["accuracy"], abs=1e-9)  # float32: the run's
    return run, info["dev"]["accuracy"]


def _claiming(run: str, folder, accuracy: float) -> str:
    """A copy of ``run`` whose recorded dev accuracy is ``accuracy``: an export of it then loses the difference."""
    copy = os.path.join(str(folder), "run")
    shutil.copytree(run, copy)
    with open(os.path.join(copy, "metrics.json"), encoding="utf-8") as f:
        metrics = json.load(f)
    metrics["dev"]["accuracy"] = accuracy
    with open(os.path.join(copy, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(metrics, f)
    return copy


def test_the_bound_is_half_a_point_of_accuracy_and_a_hundredth_of_f1():
    assert LOSS_BOUND == {"cls": ("accuracy", 0.005), "ner": ("f1", 0.01), "seq2seq": ("rouge_l", 0.01),
                          "span": ("f1", 0.01), "qa": ("f1", 0.01), "multilabel": ("micro_f1", 0.01),
                          "relation": ("f1", 0.01), "rerank": ("mrr_at_10", 0.01)}
    assert loss_over_bound({"task": "ner", "dev": {"f1": 0.90}, "dev_run": {"f1": 0.91}}) is None
    assert "f1 0.8990 against the run's 0.9100" in loss_over_bound({"task": "ner", "dev": {"f1": 0.899},
                                                                    "dev_run": {"f1": 0.91}})
    assert loss_over_bound({"task": "cls", "dev": {}, "dev_run": {"accuracy": 1.0}}) is None  # unscored


def test_an_export_over_the_bound_exits_2_and_is_kept_aside(scored, tmp_path, capsys, caplog):
    run, accuracy = scored
    claiming = _claiming(run, tmp_path, accuracy + 0.0051)
    out = str(tmp_path / "out")
    capsys.readouterr()
    assert main(["export", claiming, out, "--format", "onnx"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{out}: expected an onnx export within the bound" in err
    assert f"dev accuracy {accuracy:.4f} against the run's {accuracy + 0.0051:.4f}" in err
    assert f"kept at {out}.rejected: pass --accept-loss" in err
    assert not os.path.exists(out)
    assert sorted(os.listdir(out + ".rejected")) == [EXPORT_INFO, "model.onnx", "vocab.txt"]
    with open(os.path.join(out + ".rejected", EXPORT_INFO), encoding="utf-8") as f:
        assert json.load(f)["dev"]["accuracy"] == pytest.approx(accuracy)
    with pytest.raises(ModelError, match=f"kept at {out}.rejected-2: "):  # the first one stays as it was
        export(claiming, out, "onnx")
    assert not os.path.exists(out) and os.path.isdir(out + ".rejected")
    assert main(["export", claiming, out, "--format", "onnx", "--accept-loss"]) == 0
    assert os.path.isfile(os.path.join(out, "model.onnx"))
    assert "published with its loss (--accept-loss)" in caplog.text


def test_an_export_within_the_bound_is_published(scored, tmp_path):
    run, accuracy = scored
    info = export(_claiming(run, tmp_path, accuracy + 0.0049), tmp_path / "out", "onnx")
    assert info["dev_run"]["accuracy"] - info["dev"]["accuracy"] == pytest.approx(0.0049)
    assert os.path.isfile(tmp_path / "out" / "model.onnx") and not os.path.exists(str(tmp_path / "out") + ".rejected")


def test_a_missing_dev_file_is_said(scored, tmp_path, capsys, caplog):
    run, _ = scored
    copy = str(tmp_path / "run")
    shutil.copytree(run, copy)
    with open(os.path.join(copy, "args.json"), encoding="utf-8") as f:
        args = json.load(f)
    args["dev"] = str(tmp_path / "moved" / "dev.tsv")
    args.get("relative_to_run", {}).pop("dev", None)
    with open(os.path.join(copy, "args.json"), "w", encoding="utf-8") as f:
        json.dump(args, f)
    capsys.readouterr()
    assert main(["export", copy, str(tmp_path / "out"), "--format", "onnx"]) == 0
    assert "dev score of the export" not in capsys.readouterr().out
    assert "could not score the export: the run's dev file" in caplog.text and "dev.tsv" in caplog.text
    with open(tmp_path / "out" / EXPORT_INFO, encoding="utf-8") as f:
        info = json.load(f)
    assert info["dev"] == {} and "is not there" in info["dev_unscored"] and info["dev_run"]


def test_onnx_int8_keeps_its_preprocessing_advice_to_itself(scored, tmp_path, caplog):
    run, _ = scored
    with caplog.at_level(logging.WARNING):
        info = export(run, tmp_path / "out", "onnx", int8=True, accept_loss=True)
    assert info["int8"] and info["precision"] == "f32"
    assert not [r for r in caplog.records if "pre-processing" in r.getMessage()]
    logging.getLogger().warning("Please consider a coffee")  # only that advice is held back, and only inside
    assert "Please consider a coffee" in caplog.text
