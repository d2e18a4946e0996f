"""bert4keras 0.11.5's masked-language-model and tagging examples, ported by renaming imports, give bert4keras's
numbers: Gibbs sampling through the MLM, reading comprehension by MLM and word segmentation by a CRF.

The scripts are run by tests/oracle_examples.py under both packages, from the same random Google checkpoint
(dropout 0) and the same files written here in each dataset's own format (WebQA's and SogouQA's JSON, ICWB's
segmented and unsegmented text), with NumPy's global generator seeded the same way before each script: the
samplers' draws, the random orders and the passages the generators draw are then the same in both. Each training
set is three full batches, so ``fit``'s epoch loss means the same in tf-keras and Keras 3.
"""

from __future__ import annotations

import numpy as np
import oracle_examples
import pytest
from example_files import write_qa, writer
from oracle_examples import CFG, PUNCTUATION, SPECIAL, close, same

pytestmark = pytest.mark.slow

TOKENS = [*SPECIAL, *PUNCTUATION, ","]
CHARS = oracle_examples.CHARS[:CFG["vocab_size"] - len(TOKENS)]
TOKENS += CHARS
# train_on_batch steps before fit: one traces the step once (a second batch length would trace it again);
# the updates' parity shows in what follows it (fit's losses, the outputs after training)
STEPS = 1


def write_icwb(folder: str, rng: np.random.Generator) -> dict:
    """ICWB's training text (words of one to four characters between two spaces, 14 sentences: 12 to train, 2 to
    validate) and its unsegmented test text (with an empty line, which ``predict_to_file`` keeps)."""
    write = writer(folder)

    def sentence():
        words = ["".join(rng.choice(CHARS[:30], int(rng.integers(1, 5)))) for _ in range(int(rng.integers(3, 7)))]
        return words + ["。"]

    training = "".join("  ".join(sentence()) + "\n" for _ in range(14))
    testing = "".join("".join(sentence()) + "\n" for _ in range(2)) + "\n" + "".join(sentence()) + "\n"
    return {"training": write("icwb2-data/training/pku_training.utf8", training),
            "testing": write("icwb2-data/testing/pku_test.utf8", testing)}


def write_all(work: str) -> tuple[list[str], dict]:
    """The checkpoint's paths and each script's ``data``, its files written under ``work``."""
    paths = oracle_examples.write_bert(work, tokens=TOKENS)
    rng = np.random.default_rng(1)
    init_sent = "".join(rng.choice(CHARS, 10)) + "。"
    return paths, {
        "basic_gibbs_sampling_via_mlm": {"init_sent": init_sent, "minlen": 8, "maxlen": 32, "steps": 24,
                                         "converged_steps": 8},
        "task_reading_comprehension_by_mlm": write_qa(work, rng, CHARS),
        "task_sequence_labeling_cws_crf": write_icwb(work, rng),
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(kerasbert's results, bert4keras's results) per script; bert4keras runs alongside in a subprocess."""
    work = str(tmp_path_factory.mktemp("examples_mlm"))
    paths, data = write_all(work)
    return oracle_examples.run_examples(data, paths, work, STEPS)


def _pair(results, name):
    return results[0][name], results[1][name]


def test_gibbs_sampling_via_mlm(results):
    """Gibbs sampling: the same positions masked, tokens drawn from the MLM and sentences shown after one seed, and
    the same MLM probabilities for the last sentence."""
    ours, theirs = _pair(results, "basic_gibbs_sampling_via_mlm")
    for key in ("sentences", "shown", "token_ids"):
        same(ours[key], theirs[key])
    assert len(ours["sentences"]) == 24 and len(set(ours["sentences"])) > 1
    close(ours["probas"], theirs["probas"], rtol=0, atol=1e-5)


def test_reading_comprehension_by_mlm(results):
    """Answers in the masked slots, decoded among the passages' n-grams: the same samples and labels, losses
    (a loss function of the script's own under ``compile``), probabilities, answer scores and answers."""
    ours, theirs = _pair(results, "task_reading_comprehension_by_mlm")
    for key in ("random_order", "keep_tokens", "token_ids", "labels", "answers", "scored"):
        same(ours[key], theirs[key])
    assert ours["labels"].shape == (4, 4) and ours["labels"].any()
    assert len(ours["step_losses"]) == STEPS
    for key in ("step_losses", "epoch_loss", "lowest", "probas", "scores"):
        close(ours[key], theirs[key])


def test_sequence_labeling_cws_crf(results):
    """Word segmentation by a CRF: the same labels, losses, transitions, emissions, the Evaluator's accuracy and
    the segmented test file."""
    ours, theirs = _pair(results, "task_sequence_labeling_cws_crf")
    for key in ("random_order", "token_ids", "labels", "segmented"):
        same(ours[key], theirs[key])
    assert set(np.unique(ours["labels"])) == {0, 1, 2, 3}
    assert len(ours["step_losses"]) == STEPS
    for key in ("step_losses", "epoch_loss", "trans", "emissions", "printed"):
        close(ours[key], theirs[key])
