"""Session fixtures: random Google checkpoints and one bert4keras oracle run for the parity tests."""

from __future__ import annotations

import ctypes
import gc
import io
import logging
import os
import sys

# oneDNN's own pool keeps the peak of every model a worker ever built; the system allocator gives it back, so two
# long-lived workers stay within the machine's memory (set before TensorFlow loads, and inherited by the workers)
os.environ.setdefault("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import helpers  # noqa: E402
from generation.conftest import end_token, language_model, sources  # noqa: F401 - fixtures, shared with serving

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# scripts that wrote the fixtures (some with torch, which the tests do not have): not tests, nor doctests
collect_ignore_glob = ["fixtures/*", "oracle_*.py"]  # the oracles run in bert4keras's subprocess only

BASE2 = dict(helpers.TINY, vocab_size=21128, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
             max_position_embeddings=512)
HEAD_FLAGS = [{}, {"with_pool": True}, {"with_pool": "linear"}, {"with_nsp": True}, {"with_mlm": True},
              {"with_pool": True, "with_mlm": True}, {"with_nsp": True, "with_mlm": True}]
KEEP_TOKENS = [0, 100, 101, 102, 7, 9, 11, 13, 50, 51, 52, 53, 120, 127]


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory) -> str:
    """A random Google-format checkpoint (with cls/ heads) for the tiny config; returns its folder."""
    folder = str(tmp_path_factory.mktemp("tiny_ckpt"))
    helpers.write_checkpoint(folder, helpers.random_google_weights(helpers.TINY, seed=1), helpers.TINY)
    return folder


@pytest.fixture(scope="session")
def base2_ckpt(tmp_path_factory) -> str:
    """BERT-base Chinese shapes with 2 layers; returns its folder."""
    folder = str(tmp_path_factory.mktemp("base2_ckpt"))
    helpers.write_checkpoint(folder, helpers.random_google_weights(BASE2, seed=2, std=0.02), BASE2)
    return folder


def parity_cases(tiny_ckpt: str, base2_ckpt: str, saved_ckpt: str) -> dict[str, dict]:
    """Every (checkpoint, build arguments) pair compared with bert4keras."""
    cases = {f"tiny-{i}": {"folder": tiny_ckpt, "kwargs": flags, "vocab": 128} for i, flags in enumerate(HEAD_FLAGS)}
    for i, flags in enumerate([{}, {"with_pool": True}, {"with_nsp": True, "with_mlm": True}]):
        cases[f"base2-{i}"] = {"folder": base2_ckpt, "kwargs": flags, "vocab": 21128}
    cases["tiny-keep_tokens"] = {"folder": tiny_ckpt, "kwargs": {"keep_tokens": KEEP_TOKENS, "with_mlm": True},
                                 "vocab": len(KEEP_TOKENS)}
    cases["saved-by-kerasbert"] = {"folder": saved_ckpt, "kwargs": {"with_nsp": True, "with_mlm": True}, "vocab": 128}
    return cases


@pytest.fixture(scope="session")
def saved_ckpt(tmp_path_factory, tiny_ckpt) -> str:
    """A checkpoint written by save_google_checkpoint from a model with other weights."""
    import kerasbert

    folder = str(tmp_path_factory.mktemp("saved_ckpt"))
    model = kerasbert.build_transformer_model(os.path.join(tiny_ckpt, "bert_config.json"), with_nsp=True,
                                              with_mlm=True, verbose=False)
    rng = np.random.default_rng(3)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.3, weight.shape).astype("float32") + (weight.name == "gamma"))
    kerasbert.save_google_checkpoint(model, os.path.join(folder, "bert_model.ckpt"))
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        f.write(open(os.path.join(tiny_ckpt, "bert_config.json")).read())
    return folder


@pytest.fixture(scope="session")
def oracle(tmp_path_factory, tiny_ckpt, base2_ckpt, saved_ckpt):
    """bert4keras's outputs and layer names for every parity case, from one subprocess."""
    work = str(tmp_path_factory.mktemp("oracle"))
    cases = parity_cases(tiny_ckpt, base2_ckpt, saved_ckpt)
    tasks = []
    for index, case in enumerate(cases.values()):
        inputs = os.path.join(work, f"inputs-{index}.npz")
        np.savez(inputs, **helpers.random_batch(case["vocab"], seed=index))
        case.update(index=index, inputs=inputs)
        tasks.append({"kind": "bert", "config": os.path.join(case["folder"], "bert_config.json"),
                      "checkpoint": os.path.join(case["folder"], "bert_model.ckpt"), "kwargs": case["kwargs"],
                      "inputs": inputs})
    return cases, helpers.run_oracle(tasks, work)


def _drop_traced_gradients() -> None:
    """TensorFlow keeps every custom gradient a graph traced (``tf.custom_gradient``: kerasbert's dense lookup, the
    all_reduce in each of Keras's train steps) in its gradient registry for good, and with it the traced step's
    graph: tens of MB a trained model. The files before have finished their traces (a step's gradients are taken
    when it is traced), so their entries go; a step traced again registers its own."""
    ops = sys.modules.get("tensorflow.python.framework.ops")
    if ops is None:
        return
    registry = ops._gradient_registry._registry
    for name in [name for name in registry if name.startswith("CustomGradient-")]:
        del registry[name]


@pytest.fixture(autouse=True, scope="module")
def _free_models_between_modules():
    """Before each test file, collect what the files before it left and hand the freed pages back, so that a
    long-lived worker does not pile up every model; then freeze what survives (`gc.freeze`). A worker holds millions
    of long-lived objects by its last files, and every full collection walked them all: this one, Python's own and
    the one Keras runs for each variable a layer drops (``Layer.__delattr__``, e.g. in ``quantize``). Frozen, they
    are left out, and a collection walks only what was made since. The collection runs here rather than after the
    file, because pytest drops the file's last test's arguments (its fixtures' models) only after its teardown.
    After each file, Keras's global state is dropped."""
    _drop_traced_gradients()
    gc.collect()
    if sys.platform == "linux":
        ctypes.CDLL(None).malloc_trim(0)  # glibc's: free pages back to the system
    gc.freeze()
    yield
    import keras

    keras.backend.clear_session(free_memory=False)  # collected before the next file


@pytest.fixture
def log_lines():
    """Lines the kerasbert logger prints during the test."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger("kerasbert").addHandler(handler)
    yield lambda: stream.getvalue().splitlines()
    logging.getLogger("kerasbert").removeHandler(handler)
