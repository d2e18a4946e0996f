"""Run folders (`kerasbert.finetune.runs`): their inputs are found from any working directory and after the folders
were moved together; ``--overwrite`` replaces a run whole; epochs are counted ``Epoch k/N``."""

from __future__ import annotations

import json
import os
import shutil

import keras
import pytest

from kerasbert import evaluate, train
from kerasbert.cli import main
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.finetune.runs import Run, open_run

SMALL = {"epochs": 2, "batch_size": 16, "maxlen": 16, "lr": 1e-3}


class _Killed(Exception):
    pass


class _KillAt(keras.callbacks.Callback):
    """Stops `train` with an exception after ``step`` batches (their state saved: ``save_every=1``)."""

    def __init__(self, step: int):
        super().__init__()
        self.step, self.seen = step, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            raise _Killed


@pytest.fixture()
def tree(tmp_path, monkeypatch):
    """A folder with demo data and a run trained from it with relative paths, stopped in its second epoch."""
    tree = tmp_path / "tree"
    write_demo_data(str(tree / "data"), n_train=48, n_dev=8, n_test=8)
    monkeypatch.chdir(tree)
    with pytest.raises(_Killed):
        train("cls", "data/cls/train.tsv", "run", dev="data/cls/dev.tsv", vocab="data/vocab.txt", save_every=1,
              verbose=0, callbacks=[_KillAt(4)], **SMALL)
    return tree


@pytest.mark.slow  # trains
def test_a_run_resumes_and_evaluates_from_another_folder_and_after_a_move(tree, tmp_path, monkeypatch, capsys):
    saved = json.loads((tree / "run" / "args.json").read_text(encoding="utf-8"))
    assert saved["train"] == str(tree / "data" / "cls" / "train.tsv") and saved["config"] == "tiny"
    assert saved["relative_to_run"] == {"train": "../data/cls/train.tsv", "dev": "../data/cls/dev.tsv",
                                        "vocab": "../data/vocab.txt"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    result = train(None, None, str(tree / "run"), resume=True)  # 3 batches an epoch: killed in epoch 2
    progress = capsys.readouterr().out
    assert "Epoch 2/2" in progress and "Epoch 1/2" not in progress and "Epoch 2/3" not in progress
    assert result["steps"] == 6 and result["best_epoch"] in (1, 2)
    assert evaluate(str(tree / "run"), verbose=0) == result["dev"]  # the saved dev file, found from elsewhere
    assert main(["evaluate", str(tree / "run")]) == 0 and (tree / "run" / "eval-dev.json").is_file()

    shutil.move(str(tree), str(tmp_path / "moved"))
    moved = tmp_path / "moved"
    args = open_run(str(moved / "run")).args
    data = moved / "data" / "cls"
    assert (args.train, args.dev) == (str(data / "train.tsv"), str(data / "dev.tsv"))
    assert evaluate(str(moved / "run"), verbose=0) == result["dev"]
    assert train(None, None, "../moved/run", resume=True, verbose=0)["dev"] == result["dev"]


@pytest.mark.slow  # trains
def test_overwrite_replaces_a_run_whole(tree, capsys):
    (tree / "run" / "eval-dev.json").write_text("{}", encoding="utf-8")
    (tree / ".tmp-k1lled_0-run").mkdir()  # the staging folder of a run killed before it was swapped in
    capsys.readouterr()
    assert main(["train", "--task", "cls", "--train", "data/cls/train.tsv", "--vocab", "data/vocab.txt",
                 "--out", "run", "--overwrite", "--epochs", "2", "--maxlen", "16", "--batch-size", "16"]) == 0
    progress = capsys.readouterr().out
    assert progress.count("Epoch 1/2") == 1 and progress.count("Epoch 2/2") == 1 and "Epoch 2/3" not in progress
    files = sorted(os.listdir(tree / "run"))
    assert files == ["args.json", "bert_config.json", "curves.png", "history.csv", "labels.json", "metrics.json",
                     "model.keras", "state", "vocab.txt"]  # no dev now: no confusion.png; eval-dev.json gone
    assert sorted(os.listdir(tree)) == ["data", "run"]  # nothing left beside it
    assert json.loads((tree / "run" / "args.json").read_text(encoding="utf-8"))["dev"] is None


def _old_run(folder) -> Run:
    for name, content in (("args.json", "{}"), ("model.keras", "old"), ("eval-test.json", "{}"),
                          ("state/state.json", "{}")):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content, encoding="utf-8")
    return Run(str(folder))


def _first_files(staging: Run) -> None:
    staging.write_json("labels.json", ["neg", "pos"])
    staging.write_json("args.json", {"task": "cls"})


def test_create_swaps_the_new_run_in_for_the_old_one(tmp_path):
    run = _old_run(tmp_path / "run")
    inode = os.stat(run.path).st_ino
    seen = []
    run.create(lambda staging: (seen.append(sorted(os.listdir(run.path))), _first_files(staging)))
    assert seen == [["args.json", "eval-test.json", "model.keras", "state"]]  # the old run whole while writing
    assert sorted(os.listdir(run.path)) == ["args.json", "labels.json"] and os.stat(run.path).st_ino != inode
    assert sorted(os.listdir(tmp_path)) == ["run"]


@pytest.mark.parametrize("where", ["mount point", "working directory"])
def test_create_fills_a_folder_that_cannot_be_renamed_in_place(tmp_path, monkeypatch, where):
    run = _old_run(tmp_path / "run")
    inode = os.stat(run.path).st_ino
    if where == "mount point":
        monkeypatch.setattr(os.path, "ismount", lambda path: path == run.path)  # as a volume mounted at --out
    else:
        monkeypatch.chdir(tmp_path / "run")  # --out .
    run.create(_first_files)
    assert sorted(os.listdir(run.path)) == ["args.json", "labels.json"] and os.stat(run.path).st_ino == inode
    assert json.loads((tmp_path / "run" / "args.json").read_text(encoding="utf-8")) == {"task": "cls"}
