"""bert4keras 0.11.5's encoder example scripts, ported by renaming imports, give bert4keras's numbers.

The scripts are run by tests/oracle_examples.py under both packages: the same random Google checkpoint (dropout
0), the same head weights (set from a NumPy seed in the script) and the same batches in order, with bert4keras's
own ``Adam`` in both.
"""

from __future__ import annotations

import numpy as np
import oracle_examples
import pytest
from oracle_examples import close

pytestmark = pytest.mark.slow

# What a bert4keras 0.11.5 script needed beyond ``bert4keras.X`` -> ``kerasbert.compat.X`` to run on Keras 3
# (each edit also runs on bert4keras/tf-keras, so one script body serves both). The migration guide's list.
KERAS3_EDITS = [
    "`from keras.layers import Dense` / `from keras.models import Model`: take them from the package's `keras` "
    "(`from kerasbert.compat.backend import keras`; plain `import keras` is Keras 3 too)",
    "`model.fit_generator(gen.forfit(), steps_per_epoch=len(gen), ...)` -> `model.fit(gen.forfit(), "
    "steps_per_epoch=len(gen), ...)` (Keras 3 has no fit_generator/predict_generator/evaluate_generator)",
    "`model.save('test.model')` / `model.save_weights('best_model.weights')` -> a `.keras` file name for save, "
    "a `.weights.h5` one for save_weights; `keras.models.load_model` reads the `.keras` file back",
    "`K.learning_phase()` / `K.set_learning_phase`: gone in Keras 3; pass `training=` to the layer call",
    "`layer.trainable = False` after `compile`: tf-keras keeps what compile saw, Keras 3 reads the flags at the "
    "first train step; freeze once the model that must still train has trained (BERT-of-Theseus)",
    "`K.in_train_phase(a, b)` / `K.random_binomial(shape, p)`: `call(self, inputs, training=None)` with "
    "`a if training else b`; `K.cast(tf.random.uniform(shape) < p, K.floatx())`",
    "a metric function of its own (`global_pointer_f1_score`): Keras 3 passes it `y_true` in the data's dtype "
    "(float64 from `np.zeros`), tf-keras cast it to floatx first: `y_true = K.cast(y_true, K.floatx())` in it",
    "`train_on_batch` with metrics returns `[loss, metric...]` in both; `model.predict(x)` prints a progress "
    "bar per call in Keras 3: pass `verbose=0` in loops",
]

CFG = oracle_examples.CFG
CHARS = [chr(0x4E00 + i) for i in range(CFG["vocab_size"] - 5)]
# train_on_batch steps before fit: one traces the step once (a second batch length would trace it again);
# the updates' parity shows in what follows it (fit's losses, the outputs after training)
STEPS = 1


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
    return {"task_sequence_labeling_ner_crf": ner, "task_sentence_similarity_lcqmc": pairs,
            "basic_extract_features": text(8), "basic_masked_language_model": text(10), "ner_global_pointer": spans}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(kerasbert's results, bert4keras's results) per script; bert4keras runs alongside in a subprocess."""
    work = str(tmp_path_factory.mktemp("bert4keras_examples"))
    paths = oracle_examples.write_bert(work, tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *CHARS])
    return oracle_examples.run_examples(make_data(), paths, work, STEPS)


def test_ner_crf(results):
    ours, theirs = results[0]["task_sequence_labeling_ner_crf"], results[1]["task_sequence_labeling_ner_crf"]
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
    ours, theirs = results[0]["task_sentence_similarity_lcqmc"], results[1]["task_sentence_similarity_lcqmc"]
    close(ours["step_losses"], theirs["step_losses"], atol=0)
    close(ours["epoch_loss"], theirs["epoch_loss"], atol=0)
    close(ours["probas"], theirs["probas"], rtol=0)
    np.testing.assert_array_equal(ours["argmax"], theirs["argmax"])
    assert float(ours["accuracy"]) == float(theirs["accuracy"])


def test_extract_features(results):
    ours, theirs = results[0]["basic_extract_features"], results[1]["basic_extract_features"]
    np.testing.assert_array_equal(ours["token_ids"], theirs["token_ids"])
    close(ours["features"], theirs["features"], rtol=0)
    close(ours["reloaded"], theirs["reloaded"], rtol=0)
    np.testing.assert_array_equal(ours["reloaded"], ours["features"])


def test_masked_lm(results):
    ours, theirs = results[0]["basic_masked_language_model"], results[1]["basic_masked_language_model"]
    close(ours["probas"], theirs["probas"], rtol=0)
    np.testing.assert_array_equal(ours["predicted"], theirs["predicted"])
    assert ours["decoded"] == str(theirs["decoded"])

