"""bert4keras 0.11.5's examples on an optimizer wrapper or a distribution strategy, ported by renaming imports, give
bert4keras's losses, predictions and titles: ALBERT sentiment with ``extend_with_piecewise_linear_lr``, and the
IFLYTEK classifier and the UniLM title writer under ``tf.distribute.MirroredStrategy`` (over this machine's
devices), built with ``return_keras_model=False`` and loaded by ``bert.load_weights_from_checkpoint``.

The scripts are run by tests/oracle_examples.py under both packages, from the same random checkpoints (dropout 0)
and the same files written here, NumPy's global generator seeded the same way before each script. Every batch is
full, so ``fit``'s epoch loss means the same in tf-keras and Keras 3; under the strategy a batch is the whole
training set, in whatever order the shuffle gives.
"""

from __future__ import annotations

import json
import os

import numpy as np
import oracle_examples
import pytest
from oracle_examples import CFG, CHARS, close, same

pytestmark = pytest.mark.slow

STEPS = 3
ALBERT = {**CFG, "embedding_size": 16}


def write_albert(folder: str, seed: int = 6) -> list[str]:
    """A random ALBERT checkpoint of `ALBERT` in Google's names (kerasbert's `save_google_checkpoint`, which
    bert4keras reads) and its ``albert_config.json``: ``[config, checkpoint]``."""
    from kerasbert import build_transformer_model, save_google_checkpoint

    model = build_transformer_model(config=ALBERT, model="albert", verbose=False)
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0.0, 0.2, w.shape).astype("float32") + ("gamma" in w.path) for w in model.weights])
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "albert_config.json"), "w") as f:
        json.dump(ALBERT, f)
    return [os.path.join(folder, "albert_config.json"), save_google_checkpoint(model, folder)]


def write_data(folder: str, seed: int = 0) -> dict:
    """Each script's files under ``folder`` and its ``data`` argument: sentiment TSVs, IFLYTEK's JSON lines (12
    training rows, 4 validation) and news files with a title line."""
    rng = np.random.default_rng(seed)

    def text(low, high):
        return "".join(CHARS[i] for i in rng.integers(0, len(CHARS), int(rng.integers(low, high))))

    def write(name, lines):
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    sentiment = {name: write(f"sentiment/sentiment.{name}.data", [f"{text(4, 14)}\t{rng.integers(0, 2)}"
                                                                     for _ in range(rows)])
                 for name, rows in (("train", 12), ("valid", 8), ("test", 8))}
    iflytek = {name: write(f"iflytek/{name}.json", [json.dumps({"id": i, "sentence": text(6, 18),
                                                                "label": str(rng.integers(0, 2))},
                                                               ensure_ascii=False) for i in range(rows)])
               for name, rows in (("train", 12), ("valid", 4))}
    for i in range(12):  # the example's THUCNews files: the title, then the content
        write(f"news/{i}.txt", [text(3, 6), text(10, 20) + "，" + text(5, 12) + "。"])
    return {
        "task_iflytek_multigpu": iflytek,
        "task_seq2seq_autotitle_multigpu": {"txts": os.path.join(folder, "news", "*.txt"),
                                            "show": [text(10, 20), text(10, 20) + "，" + text(4, 8)]},
        "task_sentiment_albert": sentiment,  # last: it calls set_gelu('tanh'), which lasts for the process
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from kerasbert.compat.backend import set_gelu

    work = str(tmp_path_factory.mktemp("optimizer_examples"))
    paths = oracle_examples.write_bert(work)
    data = write_data(work)
    albert_config, albert_checkpoint = write_albert(os.path.join(work, "albert"))
    data["task_sentiment_albert"]["paths"] = [albert_config, albert_checkpoint, paths[2]]
    try:
        return oracle_examples.run_examples(data, paths, work, steps=STEPS)
    finally:
        set_gelu("erf")  # the sentiment script's set_gelu('tanh') would outlast it in this process


def test_sentiment_albert_with_a_piecewise_linear_rate(results):
    ours, theirs = (r["task_sentiment_albert"] for r in results)
    close(ours["step_losses"], theirs["step_losses"])
    assert ours["step_losses"][0] != ours["step_losses"][2]  # the rate rises from 0: the steps move the model
    close(ours["epoch_loss"], theirs["epoch_loss"])
    close(ours["reports"], theirs["reports"])
    close(ours["final"], theirs["final"])
    close(ours["probas"], theirs["probas"])


def test_iflytek_under_a_mirrored_strategy(results):
    ours, theirs = (r["task_iflytek_multigpu"] for r in results)
    close(ours["batch_losses"], theirs["batch_losses"])
    close(ours["epoch_loss"], theirs["epoch_loss"])
    close(ours["val_loss"], theirs["val_loss"])
    close(ours["best_val_acc"], theirs["best_val_acc"])
    same(ours["ids"], theirs["ids"])
    same(ours["labels"], theirs["labels"])
    close(ours["probas"], theirs["probas"])


def test_autotitle_under_a_mirrored_strategy(results):
    ours, theirs = (r["task_seq2seq_autotitle_multigpu"] for r in results)
    same(ours["keep_tokens"], theirs["keep_tokens"])
    close(ours["batch_losses"], theirs["batch_losses"])
    close(ours["epoch_loss"], theirs["epoch_loss"])
    close(ours["lowest"], theirs["lowest"])
    same(ours["shown"], theirs["shown"])
    same(ours["beams"], theirs["beams"])
    close(ours["probas"], theirs["probas"])
