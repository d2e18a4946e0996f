"""bert4keras 0.11.5's examples that use its model objects and model arguments, ported by renaming imports, give
bert4keras's numbers: compound tokens (basic_make_uncased_model_cased), two prefixed models in one graph
(task_iflytek_bert_of_theseus), conditional layer norm on a label (task_conditional_language_model) and on an
image (task_image_caption).

The scripts are run by tests/oracle_examples.py under both packages, from the same random Google checkpoints
(dropout 0) and the same data, with NumPy's global generator seeded the same way before each script.
"""

from __future__ import annotations

import os

import numpy as np
import oracle_examples
import pytest
from oracle_examples import CFG, CHARS, close, same

pytestmark = pytest.mark.slow

# train_on_batch steps before fit: one traces the step once (a second batch length would trace it again);
# the updates' parity shows in what follows it (fit's losses, the outputs after training)
STEPS = 1
ENGLISH = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "welcome", "to", "be", "##i", "##jing", "the", "a",
           "##s", "1", "city"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("examples_models"))
    rng = np.random.default_rng(0)

    def text(low, high):
        return "".join(CHARS[i] for i in rng.integers(0, len(CHARS), int(rng.integers(low, high))))

    paths = oracle_examples.write_bert(os.path.join(work, "bert"))
    english = oracle_examples.write_bert(os.path.join(work, "english"), {**CFG, "vocab_size": len(ENGLISH)},
                                         ENGLISH)
    deeper = oracle_examples.write_bert(os.path.join(work, "deeper"), {**CFG, "num_hidden_layers": 4})
    data = {
        "basic_make_uncased_model_cased": {"paths": english, "text": "Welcome to BEIJING."},
        "task_iflytek_bert_of_theseus": {"paths": deeper, "num_classes": 3, "successor_layers": 2,
                                         "train": [[text(4, 12), i % 3] for i in range(12)]},
        "task_conditional_language_model": {"lines": [f"{text(6, 14)}，{text(3, 8)}。\t{i % 2}" for i in range(8)],
                                            "seed": 1},
        "task_image_caption": {"images": rng.uniform(0, 255, (4, 16, 16, 3)).tolist(), "seed": 2,
                               "captions": [[text(4, 9), text(4, 9)] for _ in range(4)]},
    }
    return oracle_examples.run_examples(data, paths, work, STEPS)


def test_make_uncased_model_cased(results):
    ours, theirs = (r["basic_make_uncased_model_cased"] for r in results)
    for key in ("tokens", "token_ids", "count"):
        same(ours[key], theirs[key])
    close(ours["features"], theirs["features"], rtol=0, atol=1e-5)


def test_bert_of_theseus(results):
    ours, theirs = (r["task_iflytek_bert_of_theseus"] for r in results)
    for key in ("predecessor_losses", "theseus_probas", "successor_probas"):
        close(ours[key], theirs[key])
    for key in ("finite", "prefixed", "trainable"):
        same(ours[key], theirs[key])
    assert ours["finite"] and ours["prefixed"]


def test_conditional_language_model(results):
    ours, theirs = (r["task_conditional_language_model"] for r in results)
    close(ours["probas"], theirs["probas"], rtol=0, atol=1e-5)
    close(ours["step_losses"], theirs["step_losses"])
    same(ours["shown"], theirs["shown"])


def test_image_caption(results):
    ours, theirs = (r["task_image_caption"] for r in results)
    close(ours["step_losses"], theirs["step_losses"])
    same(ours["shown"], theirs["shown"])
