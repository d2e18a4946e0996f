"""kerasbert on Keras's JAX backend: its layers use keras.ops only, so the same Google checkpoint gives
bert4keras's numbers there too, and a classifier compiled as ``kerasbert train`` compiles it trains.

Keras picks its backend once, at import: the JAX side runs in a subprocess (``KERAS_BACKEND=jax``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # trains, spawns workers or runs a benchmark

JAX_CASES = ["tiny-0", "tiny-4", "tiny-keep_tokens", "base2-1"]

JOB = r"""
import json, sys
import numpy as np
import keras
from kerasbert import build_transformer_model
from kerasbert.text.readers import LabelSet
from kerasbert.finetune.tasks import task_of
from kerasbert.finetune.training import TrainArgs, compile_model

job = json.load(open(sys.argv[1]))
keras.utils.set_random_seed(0)  # the classifier's initial weights and dropout: one curve, run after run
out = {"backend": np.array(keras.config.backend())}
for name, case in job["cases"].items():
    model = build_transformer_model(case["config"], case["checkpoint"], verbose=False, **case["kwargs"])
    out[f"{name}/jit"] = np.array(model.jit_compile)
    data = np.load(case["inputs"])
    outputs = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
    for j, output in enumerate(outputs if isinstance(outputs, list) else [outputs]):
        out[f"{name}/{j}"] = output

# the classifier `kerasbert train` builds, compiled as it compiles it; 8 examples, 30 epochs
args = TrainArgs(task="cls", train="-", out="-", batch_size=4, lr=3e-3, warmup=0.0)
task = task_of(args)
model = task.head(build_transformer_model(job["config"], verbose=False), LabelSet(["0", "1"]))
compile_model(model, task, args, 60, 2)
rng = np.random.default_rng(0)
ids = rng.integers(5, 100, size=(8, 16)).astype("int32")
x = {"Input-Token": ids, "Input-Segment": np.zeros_like(ids)}
y = (ids[:, 1] > 50).astype("int32")
history = model.fit(x, y, batch_size=4, epochs=30, verbose=0, shuffle=False)
out["train/loss"] = np.array(history.history["loss"])
out["train/jit"] = np.array(model.jit_compile)
np.savez(job["out"], **out)
"""


def test_the_jax_backend_gives_bert4keras_numbers_and_trains(oracle, tmp_path):
    cases, theirs = oracle
    job = {"cases": {name: {"config": os.path.join(cases[name]["folder"], "bert_config.json"),
                            "checkpoint": os.path.join(cases[name]["folder"], "bert_model.ckpt"),
                            "kwargs": cases[name]["kwargs"], "inputs": cases[name]["inputs"]} for name in JAX_CASES},
           "config": os.path.join(cases["tiny-0"]["folder"], "bert_config.json"), "out": str(tmp_path / "jax.npz")}
    (tmp_path / "job.json").write_text(json.dumps(job))
    (tmp_path / "job.py").write_text(JOB)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(tmp_path / "job.py"), str(tmp_path / "job.json")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    jax = np.load(job["out"])
    assert str(jax["backend"]) == "jax"
    for name in JAX_CASES:
        index = cases[name]["index"]
        expected = [theirs[f"{index}/{j}"] for j in range(3) if f"{index}/{j}" in theirs]
        found = [jax[f"{name}/{j}"] for j in range(3) if f"{name}/{j}" in jax]
        assert len(found) == len(expected), name
        for mine, ref in zip(found, expected, strict=True):
            assert mine.shape == ref.shape
            np.testing.assert_allclose(mine, ref, atol=1e-5, rtol=0, err_msg=name)
        assert bool(jax[f"{name}/jit"])  # compiled on JAX whatever the size (kerasbert.perf.xla.xla_pays)
    loss = jax["train/loss"]
    assert bool(jax["train/jit"]) and np.isfinite(loss).all()
    # a label read off one token: 0.71-0.76 -> 0.03-0.04 over six seeds (at lr 1e-3 and 20 epochs it ended anywhere
    # from 0.61 to 0.77 of the first loss, and a fresh clone's run failed the 0.7 this test held it to then)
    assert loss[-1] < 0.2 * loss[0], loss
