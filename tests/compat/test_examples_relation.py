"""bert4keras 0.11.5's examples/task_relation_extraction.py, ported by renaming imports, gives bert4keras's
answers: subject pointers, then object pointers given a subject (``batch_gather``, a conditional
``LayerNormalization``), a ``Loss`` layer, ``return_keras_model=False`` and EMA-weighted evaluation.

tests/oracle_examples.py runs the script under both packages from the same random Google checkpoint (dropout 0),
NumPy's global generator seeded the same way: the subjects the generator draws are then the same.
"""

from __future__ import annotations

import json

import numpy as np
import oracle_examples
import pytest
from oracle_examples import close, same
from test_examples_backend import write_triples

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("examples_relation"))
    data = {"task_relation_extraction": write_triples(work, np.random.default_rng(4))}
    ours, theirs = oracle_examples.run_examples(data, oracle_examples.write_bert(work), work)
    return ours["task_relation_extraction"], theirs["task_relation_extraction"]


def test_batches(results):
    """The generator's batches: token ids, subject labels, the drawn subject and its object labels."""
    ours, theirs = results
    for key in ("token_ids", "subject_labels", "subject_ids", "object_labels"):
        same(ours[key], theirs[key])
    assert ours["subject_labels"].sum() > 0 and ours["object_labels"].sum() > 0


def test_predictions_before_training(results):
    """The subject model's and the subject-conditioned object model's pointers, and the triples read from them."""
    ours, theirs = results
    close(ours["subject_preds"], theirs["subject_preds"], rtol=1e-5, atol=1e-5)
    close(ours["object_preds"], theirs["object_preds"], rtol=1e-5, atol=1e-5)
    same(ours["spoes_before"], theirs["spoes_before"])
    assert any(json.loads(str(spoes)) for spoes in ours["spoes_before"])  # the thresholds pick some triples


def test_training_and_evaluation(results):
    """The Loss layer's losses for each step and the epoch, f1, precision, recall and the triples with the EMA
    weights (none extracted after these few steps), then both models' pointers with the trained weights back."""
    ours, theirs = results
    close(ours["step_losses"], theirs["step_losses"])
    close(ours["epoch_loss"], theirs["epoch_loss"])
    close(ours["scores"], theirs["scores"])
    same(ours["spoes"], theirs["spoes"])
    close(ours["subject_preds_after"], theirs["subject_preds_after"])
    close(ours["object_preds_after"], theirs["object_preds_after"])
    assert ours["step_losses"].shape == (3,) and ours["scores"].shape == (1, 3)
