"""Ctrl-C during training: the signal becomes a request (`StopRequest`), the step under way ends, its resume state
is saved, the CLI prints one line and exits 130; the resumed run ends with the uninterrupted run's weights."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from kerasbert.finetune.interrupt import TrainingInterrupted

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# in a process of its own: a signal sent to the test's own process would end it if anything went wrong
FIRST_AND_SECOND = """
import signal
from kerasbert.finetune.interrupt import StopRequest

before = signal.getsignal(signal.SIGINT)
with StopRequest() as stop:
    assert stop.signal is None
    signal.raise_signal(signal.SIGTERM)  # delivered to this thread; the handler has run when it returns
    assert stop.signal == signal.SIGTERM
    try:
        signal.raise_signal(signal.SIGINT)
        raise SystemExit("the second signal did not abort")
    except KeyboardInterrupt:
        pass
    assert signal.getsignal(signal.SIGINT) is before  # the second restored the handlers at once
assert signal.getsignal(signal.SIGINT) is before and stop.signal == signal.SIGTERM
print("ok")
"""


def test_the_first_signal_is_a_request_and_the_second_aborts():
    done = subprocess.run([sys.executable, "-c", FIRST_AND_SECOND], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr[-3000:]


def test_the_interrupted_line_and_exit_status():
    stop = TrainingInterrupted("runs/my run", 2, 17, signal.SIGINT)
    assert str(stop) == ("interrupted at epoch 2 step 17; kerasbert train --out 'runs/my run' --resume goes on from "
                         "there")
    assert stop.line("kerasbert pretrain").startswith("interrupted at epoch 2 step 17; kerasbert pretrain --out")
    assert stop.exit_status == 130 and TrainingInterrupted("r", 1, 1, signal.SIGTERM).exit_status == 143
    assert isinstance(stop, KeyboardInterrupt)


# `kerasbert train` whose fourth batch waits until the test has sent its signal: the signal comes mid-epoch
# whatever the machine's speed
PAUSED = """
import functools, os, sys, time
import keras
import kerasbert.finetune.training as training
from kerasbert.cli import main

class Pause(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 2 and not os.path.exists(sys.argv[1]):
            open(sys.argv[1], "w").close()
            while not os.path.exists(sys.argv[2]):
                time.sleep(0.01)

training.train = functools.partial(training.train, callbacks=[Pause()])
sys.exit(main(sys.argv[3:]))
"""


def _train_args(data: dict, out: str) -> list[str]:
    return ["train", "--task", "cls", "--train", data["cls_train"], "--dev", data["cls_dev"], "--vocab", data["vocab"],
            "--out", out, "--epochs", "2", "--batch-size", "8", "--lr", "2e-3", "--maxlen", "32", "--dropout", "0.1",
            "--quiet"]


def _wait_for(path: str, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[1][-3000:]
        time.sleep(0.01)


@pytest.mark.slow  # trains three times
def test_ctrl_c_saves_the_step_and_resume_ends_as_the_uninterrupted_run(tmp_path):
    from kerasbert.finetune.demo_data import write_demo_data
    from kerasbert.finetune.runs import Run

    data = write_demo_data(str(tmp_path / "data"), n_train=64, n_dev=16, n_test=16)  # 8 batches an epoch
    whole, stopped = str(tmp_path / "whole"), str(tmp_path / "stopped")
    paused, sent = str(tmp_path / "paused"), str(tmp_path / "sent")
    reference = subprocess.Popen([sys.executable, "-m", "kerasbert", *_train_args(data, whole)], cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    process = subprocess.Popen([sys.executable, "-c", PAUSED, paused, sent, *_train_args(data, stopped)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(paused, process)
    process.send_signal(signal.SIGINT)
    open(sent, "w").close()
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == (f"interrupted at epoch 1 step 4; kerasbert train --out {stopped} --resume "
                                            "goes on from there")
    state = json.load(open(os.path.join(stopped, "state", "state.json")))
    assert (state["epoch"], state["step"], state["global_step"], state["finished"]) == (0, 4, 4, False)
    resumed = subprocess.run([sys.executable, "-m", "kerasbert", "train", "--out", stopped, "--resume", "--quiet"],
                             cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming {stopped} at epoch 1, step 4" in resumed.stderr
    assert "training from scratch" not in resumed.stderr  # the run's own config, already of the vocabulary's size
    assert reference.wait(timeout=600) == 0, reference.stderr.read()[-3000:]
    for run in (whole, stopped):
        assert json.load(open(os.path.join(run, "metrics.json")))["steps"] == 16
    for x, y in zip(Run(whole).load_model().get_weights(), Run(stopped).load_model().get_weights(), strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5)
