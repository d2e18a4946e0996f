"""``kerasbert.explain`` and ``kerasbert predict --explain``: each word piece's integrated gradients score.

The attributions equal bert4keras's task_sentiment_integrated_gradients.py on the same model within 1e-5 in
tests/compat/test_compat_training.py (its oracle run); here the run-level API, the CLI rows and the errors.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import kerasbert
from kerasbert.cli import main
from kerasbert.errors import ConfigError
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.finetune.explain import integrated_gradients, scores
from kerasbert.finetune.runs import open_run

pytestmark = pytest.mark.slow  # trains

TEXTS = ["这家店的服务很好", "质量太差了"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    data = write_demo_data(str(tmp_path_factory.mktemp("demo-data")), n_train=48, n_dev=16, n_test=16)
    out = str(tmp_path_factory.mktemp("cls") / "run")
    assert main(["train", "--task", "cls", "--train", data["cls_train"], "--dev", data["cls_dev"], "--vocab",
                 data["vocab"], "--out", out, "--epochs", "1", "--batch-size", "16", "--maxlen", "32", "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def ner_run(run, tmp_path_factory):
    """A run folder whose args.json says ner: what the checks read before any model loads."""
    out = str(tmp_path_factory.mktemp("ner") / "run")
    shutil.copytree(run, out)
    path = os.path.join(out, "args.json")
    args = json.load(open(path))
    json.dump({**args, "task": "ner"}, open(path, "w"))
    return out


def test_explain_a_run(run):
    found = kerasbert.explain(run, TEXTS[0])
    loaded = open_run(run)
    assert found["tokens"] == loaded.tokenizer.tokenize(TEXTS[0])[1:-1]
    assert len(found["scores"]) == len(found["tokens"]) and all(0.0 <= s <= 1.0 for s in found["scores"])
    assert found["label"] in loaded.labels.labels and found["target"] == found["label"]
    # the same numbers as the function underneath, on the row with [CLS] and [SEP]
    ids, segments = loaded.tokenizer.encode(TEXTS[0], maxlen=loaded.args.maxlen)
    expected = scores(integrated_gradients(loaded.model, ids, segments).gradients)[1:-1]
    np.testing.assert_allclose(found["scores"], expected, atol=1e-6)
    other = next(label for label in loaded.labels.labels if label != found["label"])
    assert kerasbert.explain(run, TEXTS[0], target=other)["target"] == other


def test_predict_explain_rows(run, tmp_path, capsys):
    rows = kerasbert.predict(run, TEXTS, explain=True)
    assert [row["text"] for row in rows] == TEXTS
    for row in rows:
        assert {"label", "probabilities", "tokens", "scores"} <= set(row)
        assert len(row["tokens"]) == len(row["scores"]) and 0.0 <= min(row["scores"]) <= max(row["scores"]) <= 1.0
        assert row["scores"] == kerasbert.explain(run, row["text"])["scores"]
    output = str(tmp_path / "rows.jsonl")
    assert main(["predict", run, "--text", TEXTS[1], "--explain", "--output", output]) == 0
    printed = json.loads(open(output).read())
    assert printed["tokens"] == rows[1]["tokens"] and printed["scores"] == rows[1]["scores"]


def test_bad_uses_are_one_clear_error(run, ner_run, capsys):
    with pytest.raises(ConfigError, match="expected a run of --task cls .a classifier., found --task ner"):
        kerasbert.explain(ner_run, TEXTS[0])
    assert main(["predict", ner_run, "--text", TEXTS[0], "--explain"]) == 2
    err = capsys.readouterr().err
    assert "--explain: expected a run of --task cls" in err and "Traceback" not in err
    assert main(["predict", "--model", run, "--text", TEXTS[0], "--explain"]) == 2
    assert "--explain: expected a run folder" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="target"):
        kerasbert.explain(run, TEXTS[0], target="no such label")
    with pytest.raises(ConfigError, match="steps: expected an int >= 2"):
        kerasbert.explain(run, TEXTS[0], steps=1)
