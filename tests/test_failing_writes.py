"""A write that fails halfway (a full disk) leaves the previous version whole, no ``.tmp-*`` behind, and an
error that names the target, for every writer kerasbert has.

Each writer first writes a good version, then a different one whose n-th low-level write fails: half of the
bytes go out, then ``OSError(ENOSPC)``. Python-level writes (``open``: JSON, zip files, PNGs, Keras models,
numpy archives) fail at the middle one of those a good write makes; writers in C++ (TFRecord shards) fail on
their own write.
"""

from __future__ import annotations

import builtins
import errno
import io
import os

import numpy as np
import pytest

from kerasbert.files import TEMPORARY

REAL_OPEN = builtins.open


class _Disk:
    """The disk under ``root``: counts writes to files opened there for writing; the ``fail_at``-th writes half
    its data, then fails. (Files elsewhere, such as the sources autograph writes to /tmp once, are left alone.)"""

    def __init__(self, root, fail_at: int = 0):
        self.root, self.count, self.fail_at = os.path.abspath(root) + os.sep, 0, fail_at

    def open(self, file, mode="r", *args, **kwargs):
        handle = REAL_OPEN(file, mode, *args, **kwargs)
        mine = isinstance(file, (str, os.PathLike)) and os.path.abspath(file).startswith(self.root)
        return _FailingFile(handle, self) if mine and any(flag in mode for flag in "wax+") else handle

    def write(self, handle, data):
        self.count += 1
        if self.count == self.fail_at:
            handle.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return handle.write(data)


class _FailingFile:
    """A file whose ``write`` goes through `_Disk`; everything else is the real file's."""

    def __init__(self, handle, disk: _Disk):
        self._handle, self._disk = handle, disk

    def write(self, data):
        return self._disk.write(self._handle, data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __iter__(self):
        return iter(self._handle)


def _install(monkeypatch, disk: _Disk) -> None:
    monkeypatch.setattr(builtins, "open", disk.open)
    monkeypatch.setattr(io, "open", disk.open)


def _snapshot(folder) -> dict:
    """Every file under ``folder``: relative path -> bytes."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with REAL_OPEN(path, "rb") as handle:
                out[os.path.relpath(path, folder)] = handle.read()
    return out


def _temporaries(folder) -> list[str]:
    return [os.path.join(root, name) for root, dirs, files in os.walk(folder) for name in dirs + files
            if name.startswith(TEMPORARY)]


def _check_fails_halfway(monkeypatch, folder, target, write_good, write_new) -> None:
    """``write_new()`` once to count its writes, ``write_good()``, then ``write_new()`` failing at the middle one."""
    counter = _Disk(folder)
    with monkeypatch.context() as patch:
        _install(patch, counter)
        write_new()
    assert counter.count >= 1, "the writer made no write through open"
    new = _snapshot(folder)
    write_good()
    before = _snapshot(folder)
    disk = _Disk(folder, fail_at=max(1, (counter.count + 1) // 2))
    with monkeypatch.context() as patch, pytest.raises(OSError) as raised:
        _install(patch, disk)
        write_new()
    assert disk.count == disk.fail_at
    assert str(target) in str(raised.value), raised.value
    assert _snapshot(folder) == before != new
    assert _temporaries(folder) == []


def _tiny(seed: int):
    import keras

    from kerasbert import build_transformer_model

    keras.utils.set_random_seed(seed)
    return build_transformer_model("tiny", verbose=False)


@pytest.fixture(scope="module")
def models():
    return _tiny(0), _tiny(1)


def test_google_checkpoint(monkeypatch, tmp_path, models):
    from kerasbert.weights.google import save_google_checkpoint

    folder = tmp_path / "google"
    folder.mkdir()
    _check_fails_halfway(monkeypatch, tmp_path, folder, lambda: save_google_checkpoint(models[0], folder),
                         lambda: save_google_checkpoint(models[1], folder))


def test_hf_checkpoint(monkeypatch, tmp_path, models):
    from kerasbert.weights.hf import save_hf_checkpoint

    folder = tmp_path / "hf"
    _check_fails_halfway(monkeypatch, tmp_path, folder, lambda: save_hf_checkpoint(models[0], folder),
                         lambda: save_hf_checkpoint(models[1], folder, config={"hidden_dropout_prob": 0.2}))


def test_config(monkeypatch, tmp_path):
    from kerasbert.modeling.config import BertConfig

    path = tmp_path / "bert_config.json"
    config = BertConfig.from_preset("tiny")
    _check_fails_halfway(monkeypatch, tmp_path, path, lambda: config.to_json(path),
                         lambda: config.replace(num_hidden_layers=3).to_json(path))


def test_run_state(monkeypatch, tmp_path, models):
    import keras

    from kerasbert.finetune.runs import Run, State

    run = Run(str(tmp_path))
    optimizer = keras.optimizers.Adam()
    optimizer.build(models[0].trainable_variables)
    _check_fails_halfway(monkeypatch, tmp_path, tmp_path / "state",
                         lambda: run.save_state(State(epoch=1), models[0], optimizer),
                         lambda: run.save_state(State(epoch=2), models[1], optimizer))
    assert sorted(os.listdir(tmp_path)) == ["state"]
    assert run.load_state(models[1], optimizer).epoch == 1


def test_best_model(monkeypatch, tmp_path, models):
    from kerasbert.finetune.runs import Run

    run = Run(str(tmp_path))
    _check_fails_halfway(monkeypatch, tmp_path, tmp_path / "model.keras", lambda: run.save_model(models[0]),
                         lambda: run.save_model(models[1]))
    np.testing.assert_array_equal(run.load_model().get_weights()[0], models[0].get_weights()[0])


@pytest.mark.parametrize("name", ["history.csv", "metrics.json"])
def test_history_and_metrics(monkeypatch, tmp_path, name):
    from kerasbert.finetune.runs import Run

    run = Run(str(tmp_path))
    rows = [{"epoch": i, "loss": 1.0 / i, "val_accuracy": 0.1 * i} for i in range(1, 200)]
    write = run.write_history if name == "history.csv" else lambda value: run.write_json("metrics.json", value)
    _check_fails_halfway(monkeypatch, tmp_path, tmp_path / name, lambda: write(rows[:1]), lambda: write(rows))


@pytest.mark.parametrize("name", ["curves.png", "confusion.png"])
def test_plots(monkeypatch, tmp_path, name):
    from kerasbert.finetune import plots

    path = tmp_path / name
    if name == "curves.png":
        good, new = (lambda: plots.plot_curves([{"epoch": 1, "loss": 0.9}], str(path)),
                     lambda: plots.plot_curves([{"epoch": 1, "loss": 0.9}, {"epoch": 2, "loss": 0.5}], str(path)))
    else:
        good, new = (lambda: plots.plot_confusion([[5, 1], [2, 7]], ["neg", "pos"], str(path)),
                     lambda: plots.plot_confusion([[6, 0], [1, 8]], ["neg", "pos"], str(path)))
    _check_fails_halfway(monkeypatch, tmp_path, path, good, new)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from kerasbert.finetune.demo_data import write_demo_data

    return write_demo_data(str(tmp_path_factory.mktemp("data")), n_train=40, n_dev=8, n_test=8)


def test_prepare_shards(monkeypatch, tmp_path, demo):
    """The shards are TFRecords written in C++: the third record fails; the folder never appears."""
    import tensorflow as tf

    from kerasbert.finetune.streaming import prepare, read_prepared
    from kerasbert.finetune.tasks import get_task
    from kerasbert.text.tokenizer import Tokenizer

    real = tf.io.TFRecordWriter
    written = [0]

    class FullDisk(real):
        def write(self, record):
            written[0] += 1
            if written[0] == 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            super().write(record)

    task, tokenizer = get_task("cls"), Tokenizer(demo["vocab"])
    good = str(tmp_path / "good")
    prepare(task, demo["cls_train"], tokenizer, 32, good, verbose=0, shard_size=10)
    before = _snapshot(tmp_path)
    out = str(tmp_path / "prepared")
    monkeypatch.setattr(tf.io, "TFRecordWriter", FullDisk)
    with pytest.raises(OSError) as raised:
        prepare(task, demo["cls_train"], tokenizer, 32, out, verbose=0, shard_size=10)
    assert out in str(raised.value) and written[0] == 3
    assert _snapshot(tmp_path) == before and _temporaries(tmp_path) == [] and not os.path.exists(out)
    assert read_prepared(good)["count"] == 40


def test_prepare_meta(monkeypatch, tmp_path, demo):
    """Into an existing empty folder the shards move in first and ``meta.json`` last: a failed meta write
    leaves the folder empty."""
    from kerasbert.finetune.streaming import prepare
    from kerasbert.finetune.tasks import get_task
    from kerasbert.text.tokenizer import Tokenizer

    out = tmp_path / "prepared"
    out.mkdir()
    disk = _Disk(tmp_path, fail_at=1)
    _install(monkeypatch, disk)
    with pytest.raises(OSError) as raised:
        prepare(get_task("cls"), demo["cls_train"], Tokenizer(demo["vocab"]), 32, str(out), verbose=0)
    assert str(out) in str(raised.value)
    assert os.listdir(tmp_path) == ["prepared"] and os.listdir(out) == []


@pytest.fixture(scope="module")
def run(tmp_path_factory, demo):
    from kerasbert import train

    folder = str(tmp_path_factory.mktemp("run"))
    train("cls", demo["cls_train"], folder, vocab=demo["vocab"], epochs=1, batch_size=8, maxlen=24, verbose=0)
    return folder


@pytest.mark.parametrize("format", ["saved_model", "openvino"])
def test_export(monkeypatch, tmp_path, run, format):
    """An export folder must be new: the failed one never appears, the good one beside it stays whole."""
    from kerasbert.serving.export import export

    good, out = tmp_path / "good", tmp_path / "export"
    counter = _Disk(tmp_path)
    with monkeypatch.context() as patch:
        _install(patch, counter)
        export(run, good, format=format)
    before = _snapshot(tmp_path)
    disk = _Disk(tmp_path, fail_at=max(1, (counter.count + 1) // 2))
    with monkeypatch.context() as patch, pytest.raises(OSError) as raised:
        _install(patch, disk)
        export(run, out, format=format)
    assert disk.count == disk.fail_at and str(out) in str(raised.value)
    assert _snapshot(tmp_path) == before and _temporaries(tmp_path) == [] and not out.exists()
