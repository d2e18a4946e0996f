"""bert4keras 0.11.5's training-hack examples, ported, give bert4keras's numbers: adversarial training
(task_iflytek_adversarial_training), the gradient penalty (task_iflytek_gradient_penalty), virtual adversarial
training (task_sentiment_virtual_adversarial_training) and integrated gradients
(task_sentiment_integrated_gradients).

The scripts are run by tests/oracle_examples.py under both packages, from the same random Google checkpoint
(dropout 0) and the same files written here, with NumPy's global generator seeded the same way before each script.
bert4keras's side runs in tf-keras's graph mode, where the examples' ``K.gradients`` and ``train_function`` rewrites
work; kerasbert's imports `kerasbert.compat.training` and `kerasbert.finetune.explain` at those places.
"""

from __future__ import annotations

import json
import os

import numpy as np
import oracle_examples
import pytest
from oracle_examples import CHARS, close, same

pytestmark = pytest.mark.slow

# train_on_batch steps before fit: one traces the step once (a second batch length would trace it again);
# the updates' parity shows in what follows it (fit's losses, the outputs after training)
STEPS = 1
SCRIPTS = ("task_iflytek_adversarial_training", "task_iflytek_gradient_penalty",
           "task_sentiment_virtual_adversarial_training", "task_sentiment_integrated_gradients")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("examples_training"))
    rng = np.random.default_rng(0)

    def text(low, high):
        return "".join(CHARS[i] for i in rng.integers(0, len(CHARS), int(rng.integers(low, high))))

    def write(name, rows, jsonl):
        path = os.path.join(work, name)
        with open(path, "w", encoding="utf-8") as f:
            for sentence, label in rows:
                f.write(json.dumps({"sentence": sentence, "label": str(label)}, ensure_ascii=False) + "\n"
                        if jsonl else f"{sentence}\t{label}\n")
        return path

    iflytek = {"train": write("iflytek-train.json", [(text(4, 14), i % 3) for i in range(12)], True),
               "valid": write("iflytek-dev.json", [(text(4, 14), i % 3) for i in range(8)], True)}
    sentiment = {name: write(f"sentiment.{name}.data", [(text(4, 14), i % 2) for i in range(count)], False)
                 for name, count in (("train", 40), ("valid", 8), ("test", 8))}
    paths = oracle_examples.write_bert(os.path.join(work, "bert"))
    data = {
        "task_iflytek_adversarial_training": iflytek,
        "task_iflytek_gradient_penalty": iflytek,
        "task_sentiment_virtual_adversarial_training": sentiment,
        "task_sentiment_integrated_gradients": {**sentiment, "texts": [text(5, 10), text(5, 10)]},
    }
    return oracle_examples.run_examples(data, paths, work, STEPS)


@pytest.mark.parametrize("name", SCRIPTS[:3])
def test_training_hacks(results, name):
    ours, theirs = (r[name] for r in results)
    close(ours["step_losses"], theirs["step_losses"])
    close(ours["epoch_loss"], theirs["epoch_loss"])
    same(ours["reports"], theirs["reports"])
    close(ours["probas"], theirs["probas"], rtol=0, atol=1e-4)


def test_vat_steps(results):
    ours, theirs = (r["task_sentiment_virtual_adversarial_training"] for r in results)
    assert len(ours["vat_losses"]) == 4  # a VAT step after each of the fit's batches
    close(ours["vat_losses"], theirs["vat_losses"])


def test_integrated_gradients(results):
    ours, theirs = (r["task_sentiment_integrated_gradients"] for r in results)
    close(ours["step_losses"], theirs["step_losses"])
    same(ours["labels"], theirs["labels"])
    same(ours["tokens"], theirs["tokens"])
    close(ours["norm"], theirs["norm"], rtol=0, atol=1e-5)
    close(ours["max"], theirs["max"], rtol=0, atol=1e-5)
