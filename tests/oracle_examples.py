"""Runs bert4keras 0.11.5's example scripts, ported, under both packages: the shared runner of
tests/compat/test_examples_*.py, and (as ``python oracle_examples.py JOB.json``) bert4keras's side of them.

Each script in tests/fixtures/bert4keras_examples is named as bert4keras names its example and defines
``run(pkg, config_path, checkpoint_path, vocab_path, data, steps)``; its body imports from ``pkg + ".models"`` and
so on, so the same body runs as ``bert4keras`` (on tf-keras, in one subprocess) and as ``kerasbert.compat`` (in the
test process). `run_examples` starts both from the same files, NumPy's global generator seeded the same way
before each script, and returns each side's results.

The oracle patches three places where tf-keras 2.x departs from the Keras 2.3 these examples were written for:
``keras.optimizers.Optimizer`` points back at the legacy OptimizerV2 bert4keras's optimizers subclass; its
``fit`` misreads a generator's ``[x1, x2], None`` (``forfit`` then hands over a tuple); its ``K.eye`` cannot take a
batch size as a tensor (``tf.eye`` stands in).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "fixtures", "bert4keras_examples")
CFG = {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
       "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
       "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 64, "type_vocab_size": 2,
       "initializer_range": 0.02}
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCTUATION = ["。", "，", "？"]
CHARS = [chr(0x4E00 + i) for i in range(CFG["vocab_size"] - len(SPECIAL) - len(PUNCTUATION))]  # all in GBK
SEED = 0  # NumPy's global seed before each script


def load_script(name: str):
    """A fixture script, imported by path (tests/fixtures is not collected)."""
    spec = importlib.util.spec_from_file_location(f"bert4keras_example_{name}", os.path.join(SCRIPTS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seeded(pkg: str) -> None:
    """Import ``pkg``'s modules (a first import of TensorFlow draws from NumPy's generator), then seed NumPy."""
    for module in ("backend", "layers", "models", "optimizers", "snippets", "tokenizers"):
        importlib.import_module(f"{pkg}.{module}")
    np.random.seed(SEED)


def write_bert(work: str, cfg: dict | None = None, tokens: list[str] | None = None, seed: int = 5) -> list[str]:
    """A random Google BERT checkpoint of ``cfg`` (default `CFG`, dropout 0) and a vocab.txt of ``tokens``
    (default: the special tokens, Chinese punctuation, then `CHARS`) in ``work``: ``[config, checkpoint, vocab]``."""
    import helpers

    cfg = cfg or CFG
    helpers.write_checkpoint(work, helpers.random_google_weights(cfg, seed=seed), cfg)
    vocab = helpers.write_vocab(work, tokens or [*SPECIAL, *PUNCTUATION, *CHARS])
    return [os.path.join(work, "bert_config.json"), os.path.join(work, "bert_model.ckpt"), vocab]


def _run_all(pkg: str, job: dict) -> dict[str, dict]:
    """Every script of ``job`` under ``pkg``: its results by script name (a script's ``data``, where a dict, may
    carry its own ``"paths"``)."""
    results = {}
    for name, data in job["data"].items():
        seeded(pkg)
        paths = data.get("paths", job["paths"]) if isinstance(data, dict) else job["paths"]
        results[name] = load_script(name).run(pkg, *paths, data, job["steps"])
    return results


def run_examples(data: dict[str, dict], paths: list[str], work: str, steps: int = 3) -> tuple[dict, dict]:
    """(kerasbert's results, bert4keras's results) of each script named in ``data`` (its ``data`` argument);
    bert4keras runs alongside in a subprocess with ``work`` as its folder."""
    import helpers

    job_path, out = os.path.join(work, "examples_job.json"), os.path.join(work, "examples_oracle.npz")
    job = {"out": out, "paths": paths, "data": data, "steps": steps}
    with open(job_path, "w") as f:
        json.dump(job, f)
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), job_path],
                            env={**os.environ, **helpers.LEGACY_ENV}, cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        ours = _run_all("kerasbert.compat", job)
    finally:
        _, stderr = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"bert4keras oracle failed:\n{stderr[-4000:]}")
    with np.load(out) as saved:
        theirs = {name: {key.split("/", 1)[1]: saved[key] for key in saved.files if key.startswith(name + "/")}
                  for name in data}
    return ours, theirs


def close(ours, theirs, rtol: float = 1e-4, atol: float = 1e-4) -> None:
    """Equal within bert4keras parity's float32 bounds."""
    np.testing.assert_allclose(np.asarray(ours, np.float64), np.asarray(theirs, np.float64), rtol=rtol, atol=atol)


def same(ours, theirs) -> None:
    """Exactly equal (ids, texts, shapes)."""
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def _patch_tf_keras() -> None:
    """The oracle's three patches (the module docstring)."""
    from bert4keras.backend import keras

    keras.optimizers.Optimizer = keras.optimizers.legacy.Optimizer  # before bert4keras.optimizers is imported
    import tensorflow as tf
    from bert4keras.backend import K
    from bert4keras.snippets import DataGenerator

    def forfit(self, random=True, _forfit=DataGenerator.forfit):
        """tf-keras's ``fit`` reads ``[x1, x2], None`` as inputs x1 and labels x2 (its pack_x_y_sample_weight
        tests ``isinstance(x, tuple or list)``); Keras 2.3 did not."""
        for inputs, *rest in _forfit(self, random):
            yield (tuple(inputs) if isinstance(inputs, list) else inputs, *rest)

    def eye(size, dtype=None, name=None):
        """tf-keras's K.eye makes a variable, which cannot hold a batch-sized identity inside a tf.function."""
        return tf.eye(size, dtype=dtype or K.floatx(), name=name)

    DataGenerator.forfit, K.eye = forfit, eye


def oracle_main(job_path: str) -> None:
    """Subprocess entry (TF_KERAS=1, TF_USE_LEGACY_KERAS=1): run every script as bert4keras, save one npz."""
    _patch_tf_keras()
    with open(job_path) as f:
        job = json.load(f)
    results = _run_all("bert4keras", job)
    np.savez(job["out"], **{f"{name}/{key}": np.asarray(value) for name, result in results.items()
                            for key, value in result.items()})


if __name__ == "__main__":
    sys.path.insert(0, HERE)  # helpers
    oracle_main(sys.argv[1])
