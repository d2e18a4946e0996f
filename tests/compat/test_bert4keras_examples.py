"""bert4keras 0.11.5's common example scripts, ported by renaming imports, give bert4keras's numbers.

Each script in fixtures/bert4keras_examples mirrors one bert4keras example (its docstring says which) and
defines ``run(pkg, config_path, checkpoint_path, vocab_path, data, steps)``; its body imports from
``pkg + ".models"`` and so on, so the same body runs as ``bert4keras`` (on tf-keras, in one subprocess: this
file is also its launcher) and as ``kerasbert.compat`` (in the test process). Both start from the same random
Google checkpoint (dropout 0), the same head weights (set from a NumPy seed in the script) and the same
batches in order, with bert4keras's own ``Adam`` in both (the oracle points tf-keras's
``keras.optimizers.Optimizer`` back at the legacy OptimizerV2 it was written for, as oracle_optimizers.py does).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(os.path.dirname(HERE), "fixtures", "bert4keras_examples")

# What a bert4keras 0.11.5 script needed beyond ``bert4keras.X`` -> ``kerasbert.compat.X`` to run on Keras 3
# (each edit also runs on bert4keras/tf-keras, so one script body serves both). The migration guide's list.
KERAS3_EDITS = [
    "`from keras.layers import Dense` / `from keras.models import Model`: take them from the package's `keras` "
    "(`from kerasbert.compat.backend import keras`; plain `import keras` is Keras 3 too)",
    "`model.fit_generator(gen.forfit(), steps_per_epoch=len(gen), ...)` -> `model.fit(gen.forfit(), "
    "steps_per_epoch=len(gen), ...)` (Keras 3 has no fit_generator/predict_generator/evaluate_generator)",
    "`model.save('test.model')` / `model.save_weights('best_model.weights')` -> a `.keras` file name for save, "
    "a `.weights.h5` one for save_weights; `keras.models.load_model` reads the `.keras` file back",
    "`build_transformer_model(..., return_keras_model=False)` then `bert.model` / `bert.initializer`: "
    "kerasbert returns the keras.Model (use it for `bert.model`) and takes no return_keras_model; "
    "drop `kernel_initializer=bert.initializer` or pass `keras.initializers.TruncatedNormal(stddev=0.02)`",
    "`K.learning_phase()` / `K.set_learning_phase`: gone in Keras 3; pass `training=` to the layer call",
    "a metric function of its own (`global_pointer_f1_score`): Keras 3 passes it `y_true` in the data's dtype "
    "(float64 from `np.zeros`), tf-keras cast it to floatx first: `y_true = K.cast(y_true, K.floatx())` in it",
    "`train_on_batch` with metrics returns `[loss, metric...]` in both; `model.predict(x)` prints a progress "
    "bar per call in Keras 3: pass `verbose=0` in loops",
]

CFG = {"vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
       "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
       "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 64, "type_vocab_size": 2,
       "initializer_range": 0.02}
CHARS = [chr(0x4E00 + i) for i in range(CFG["vocab_size"] - 5)]
STEPS = 3


def load_script(name: str):
    """A fixture script, imported by path (tests/fixtures is not collected)."""
    spec = importlib.util.spec_from_file_location(f"bert4keras_example_{name}", os.path.join(SCRIPTS, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_data(seed: int = 0) -> dict:
    """Small generated data for each script: NER spans, sentence pairs, two sentences, nested NER spans."""
    rng = np.random.default_rng(seed)

    def text(n):
        return "".join(CHARS[i] for i in rng.integers(0, len(CHARS), n))

    ner = []
    for i in range(10):
        t = text(int(rng.integers(6, 14)))
        start = int(rng.integers(0, len(t) - 3))
        ner.append([t, [start, start + int(rng.integers(0, 3)), ["LOC", "PER"][i % 2]]])
    pairs = [[text(int(rng.integers(3, 8))), text(int(rng.integers(3, 8))), int(i % 2)] for i in range(10)]
    rng = np.random.default_rng(seed + 1)  # its own stream: the entries above stay as they were
    spans = []  # one to three entities a text, of three types, nested or overlapping at times (GlobalPointer's case)
    for _ in range(10):
        t = text(int(rng.integers(6, 14)))
        starts = rng.integers(0, len(t) - 3, int(rng.integers(1, 4)))
        spans.append([t, *([int(s), int(s + rng.integers(0, 3)), ["LOC", "ORG", "PER"][int(rng.integers(0, 3))]]
                           for s in starts)])
    return {"ner_crf": ner, "similarity_lcqmc": pairs, "extract_features": text(8), "masked_lm": text(10),
            "ner_global_pointer": spans}


def oracle_main(job_path: str) -> None:
    """Subprocess entry (TF_KERAS=1, TF_USE_LEGACY_KERAS=1): run every script as bert4keras, save one npz."""
    from bert4keras.backend import keras

    keras.optimizers.Optimizer = keras.optimizers.legacy.Optimizer  # before bert4keras.optimizers is imported
    with open(job_path) as f:
        job = json.load(f)
    out = {}
    for name, data in job["data"].items():
        result = load_script(name).run("bert4keras", *job["paths"], data, job["steps"])
        out.update({f"{name}/{key}": np.asarray(value) for key, value in result.items()})
    np.savez(job["out"], **out)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(kerasbert's results, bert4keras's results) per script; bert4keras runs alongside in a subprocess."""
    import helpers

    work = str(tmp_path_factory.mktemp("bert4keras_examples"))
    helpers.write_checkpoint(work, helpers.random_google_weights(CFG, seed=5), CFG)
    vocab = os.path.join(work, "vocab.txt")
    with open(vocab, "w", encoding="utf-8") as f:
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *CHARS]) + "\n")
    paths = [os.path.join(work, "bert_config.json"), os.path.join(work, "bert_model.ckpt"), vocab]
    data = make_data()
    job, out = os.path.join(work, "job.json"), os.path.join(work, "oracle.npz")
    with open(job, "w") as f:
        json.dump({"out": out, "paths": paths, "data": data, "steps": STEPS}, f)
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), job], env={**os.environ, **helpers.LEGACY_ENV},
                            cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ours = {name: load_script(name).run("kerasbert.compat", *paths, value, STEPS) for name, value in data.items()}
    finally:
        _, stderr = proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"bert4keras oracle failed:\n{stderr[-4000:]}")
    with np.load(out) as saved:
        theirs = {name: {key.split("/", 1)[1]: saved[key] for key in saved.files if key.startswith(name + "/")}
                  for name in data}
    return ours, theirs


def close(ours, theirs, rtol=1e-4, atol=1e-4):
    np.testing.assert_allclose(np.asarray(ours, np.float64), np.asarray(theirs, np.float64), rtol=rtol, atol=atol)


def test_ner_crf(results):
    ours, theirs = results[0]["ner_crf"], results[1]["ner_crf"]
    np.testing.assert_array_equal(ours["token_ids"], theirs["token_ids"])
    np.testing.assert_array_equal(ours["labels"], theirs["labels"])
    close(ours["emissions_before"], theirs["emissions_before"], rtol=0)
    close(ours["step_losses"], theirs["step_losses"], atol=0)
    close(ours["epoch_loss"], theirs["epoch_loss"], atol=0)
    close(ours["trans"], theirs["trans"], rtol=0)
    close(ours["emissions"], theirs["emissions"], rtol=0)
    np.testing.assert_array_equal(ours["entities"], theirs["entities"])


def test_ner_global_pointer(results):
    ours, theirs = results[0]["ner_global_pointer"], results[1]["ner_global_pointer"]
    np.testing.assert_array_equal(ours["token_ids"], theirs["token_ids"])
    np.testing.assert_array_equal(ours["labels_shape"], theirs["labels_shape"])
    np.testing.assert_array_equal(ours["labels"], theirs["labels"])
    np.testing.assert_array_equal(ours["head_kernel"], theirs["head_kernel"])
    close(ours["scores_before"], theirs["scores_before"], rtol=0)
    close(ours["step_losses"], theirs["step_losses"], atol=0)
    close(ours["step_f1"], theirs["step_f1"], rtol=0)
    close(ours["epoch_loss"], theirs["epoch_loss"], atol=0)
    close(ours["scores"], theirs["scores"], rtol=0)
    np.testing.assert_array_equal(ours["entities"], theirs["entities"])


def test_similarity_lcqmc(results):
    ours, theirs = results[0]["similarity_lcqmc"], results[1]["similarity_lcqmc"]
    close(ours["step_losses"], theirs["step_losses"], atol=0)
    close(ours["epoch_loss"], theirs["epoch_loss"], atol=0)
    close(ours["probas"], theirs["probas"], rtol=0)
    np.testing.assert_array_equal(ours["argmax"], theirs["argmax"])
    assert float(ours["accuracy"]) == float(theirs["accuracy"])


def test_extract_features(results):
    ours, theirs = results[0]["extract_features"], results[1]["extract_features"]
    np.testing.assert_array_equal(ours["token_ids"], theirs["token_ids"])
    close(ours["features"], theirs["features"], rtol=0)
    close(ours["reloaded"], theirs["reloaded"], rtol=0)
    np.testing.assert_array_equal(ours["reloaded"], ours["features"])


def test_masked_lm(results):
    ours, theirs = results[0]["masked_lm"], results[1]["masked_lm"]
    close(ours["probas"], theirs["probas"], rtol=0)
    np.testing.assert_array_equal(ours["predicted"], theirs["predicted"])
    assert ours["decoded"] == str(theirs["decoded"])


if __name__ == "__main__":
    oracle_main(sys.argv[1])
