"""tf.distribute: two logical CPUs under MirroredStrategy and two local workers under
MultiWorkerMirroredStrategy train to the weights of one device with the same global batch; only the
chief writes the run folder; a killed worker's run resumes to the uninterrupted result."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.errors import ConfigError
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.finetune.distribute import make_strategy

from helpers import kill_mid_epoch

pytestmark = pytest.mark.slow  # trains, spawns workers or runs a benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TWO_CPUS = """
import sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from kerasbert.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("distribute"))
    paths = write_demo_data(folder, n_train=64, n_dev=16, n_test=16)
    # no dropout, so one device and several replicas draw no different random numbers
    config = json.load(open(os.path.join(ROOT, "configs", "tiny.json")))
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    paths["config"] = os.path.join(folder, "bert_config.json")
    json.dump(config, open(paths["config"], "w"))
    return paths


def _args(data, out, strategy, batch_size, *more):
    return ["train", "--task", "cls", "--train", data["cls_train"], "--dev", data["cls_dev"], "--vocab", data["vocab"],
            "--config", data["config"], "--out", out, "--epochs", "2", "--batch-size", str(batch_size), "--lr", "2e-3",
            "--maxlen", "32", "--dropout", "0", "--strategy", strategy, "--quiet", *more]


def _env(**more):
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **more}


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _workers(args, tmp_path, tag="first"):
    """Two `kerasbert train` processes on 127.0.0.1, configured by TF_CONFIG; each with its own TMPDIR."""
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    processes = []
    for index in range(2):
        tmp = tmp_path / f"{tag}-tmp{index}"
        tmp.mkdir(exist_ok=True)
        env = _env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
                   TMPDIR=str(tmp))
        processes.append(subprocess.Popen([sys.executable, "-m", "kerasbert", *args], cwd=ROOT, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return processes


def _wait(processes, timeout=600):
    outputs = [p.communicate(timeout=timeout)[0] for p in processes]
    failed = [f"worker {i} (exit {p.returncode}):\n{output[-3000:]}" for i, (p, output) in
              enumerate(zip(processes, outputs, strict=True)) if p.returncode != 0]
    assert not failed, "\n".join(failed)  # every worker's end: one that crashes fails the others' collectives
    return outputs


def _weights(run):
    import keras

    import kerasbert.modeling.heads  # noqa: F401  (registers the layers)

    return keras.saving.load_model(os.path.join(run, "model.keras"), compile=False).get_weights()


def _assert_same_weights(a, b):
    for x, y in zip(_weights(a), _weights(b), strict=True):
        np.testing.assert_allclose(x, y, atol=2e-5)


@pytest.fixture(scope="module")
def single(data, tmp_path_factory):
    """The reference: one device, global batch 8."""
    out = str(tmp_path_factory.mktemp("single") / "run")
    done = subprocess.run([sys.executable, "-m", "kerasbert", *_args(data, out, "one", 8)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_mirrored_on_two_logical_cpus_equals_one_device(data, single, tmp_path):
    out = str(tmp_path / "mirrored")
    done = subprocess.run([sys.executable, "-c", TWO_CPUS, *_args(data, out, "mirrored", 4)], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MirroredStrategy: 2 replica(s) x 4 rows = global batch 8" in done.stderr
    _assert_same_weights(single, out)
    history = [open(os.path.join(run, "history.csv")).read().splitlines()[1:] for run in (single, out)]
    assert [row.split(",")[:2] for row in history[0]] == [row.split(",")[:2] for row in history[1]]  # epoch, loss


def test_two_workers_killed_and_resumed_end_with_one_devices_weights(data, single, tmp_path):
    out = str(tmp_path / "killed")
    processes = _workers(_args(data, out, "multiworker", 4, "--save-every", "3"), tmp_path)
    state = kill_mid_epoch(processes[1], out)  # worker 1, in the middle of the second epoch
    try:  # the chief cannot go on without its peer: it fails or hangs in the next all-reduce
        processes[0].wait(timeout=20)
    except subprocess.TimeoutExpired:
        processes[0].kill()
        processes[0].wait()
    state = json.load(open(os.path.join(out, "state", "state.json")))  # what the chief saved last
    assert state["epoch"] == 1 and 0 < state["step"] < 8, state
    outputs = _wait(_workers(["train", "--out", out, "--resume", "--quiet"], tmp_path, "resumed"))
    assert "MultiWorkerMirroredStrategy: 2 replica(s) x 4 rows = global batch 8" in outputs[0]
    assert json.load(open(os.path.join(out, "metrics.json")))["steps"] == 16  # 64 rows / 8, 2 epochs
    _assert_same_weights(single, out)  # two workers end with one device's weights
    left = [name for name in os.listdir(tmp_path / "resumed-tmp1") if name.startswith("kerasbert-worker-")]
    assert left == []  # the non-chief wrote only a temporary run folder, removed at its end
    assert "best epoch" in outputs[0] and "best epoch" not in outputs[1]  # only the chief reports


def test_strategy_errors():
    with pytest.raises(ConfigError, match="--strategy: expected auto or one or mirrored or multiworker, found 'tpu'"):
        make_strategy("tpu")
    os.environ.pop("TF_CONFIG", None)
    with pytest.raises(ConfigError, match="TF_CONFIG naming the cluster"):
        make_strategy("multiworker")


def test_two_workers_pretrain_and_only_the_chief_writes_the_checkpoints(data, tmp_path):
    """``kerasbert pretrain --strategy multiworker``: two local workers mask their own rows and train; the chief
    alone writes the run folder with its Google and Hugging Face copies and reports."""
    corpus = tmp_path / "corpus.txt"
    texts = [line.split("\t")[0] for line in open(data["cls_train"], encoding="utf-8").read().splitlines()[1:]]
    corpus.write_text("\n\n".join("\n".join(texts[i:i + 3]) for i in range(0, len(texts), 3)) + "\n", "utf-8")
    out = str(tmp_path / "pt")
    outputs = _wait(_workers(["pretrain", "--data", str(corpus), "--dev", str(corpus), "--vocab", data["vocab"],
                              "--config", data["config"], "--out", out, "--epochs", "1", "--batch-size", "4",
                              "--maxlen", "32", "--lr", "2e-3", "--nsp", "--strategy", "multiworker", "--quiet"],
                             tmp_path))
    assert "MultiWorkerMirroredStrategy: 2 replica(s) x 4 rows = global batch 8" in outputs[0]
    assert f"Google checkpoint: {out}/google" in outputs[0] and "Google checkpoint" not in outputs[1]
    assert os.path.isfile(os.path.join(out, "google", "bert_model.ckpt.index"))
    assert os.path.isfile(os.path.join(out, "hf", "model.safetensors"))
    assert json.load(open(os.path.join(out, "metrics.json")))["dev"]["nsp_accuracy"] >= 0
