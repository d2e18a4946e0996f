"""bert4keras 0.11.5's examples that use backend's and snippets' functions, ported by renaming imports, give
bert4keras's answers: basic_simple_web_serving_simbert.py (WebServing's route answered in-process) and
task_relation_extraction_gplinker.py (sparse_multilabel_categorical_crossentropy, EfficientGlobalPointer).

tests/oracle_examples.py runs each script under both packages from the same random Google checkpoint (dropout 0),
NumPy's global generator seeded the same way: the sampled synonyms are then the same.
"""

from __future__ import annotations

import json
import os

import numpy as np
import oracle_examples
import pytest
from oracle_examples import CHARS, close, same

pytestmark = pytest.mark.slow


PREDICATES = ["作者", "出生地", "导演"]


def write_triples(folder: str, rng) -> dict:
    """SKED-like files: JSON lines of {"text", "spo_list": [{"subject", "predicate", "object"}]} and the schema."""
    def word(low, high):
        return "".join(CHARS[i] for i in rng.integers(0, len(CHARS), int(rng.integers(low, high))))

    def sample():
        spos, parts = [], []
        for _ in range(int(rng.integers(1, 3))):
            subject, obj = word(2, 4), word(2, 4)
            spos.append({"subject": subject, "predicate": PREDICATES[int(rng.integers(0, 3))], "object": obj})
            parts += [word(1, 3), subject, word(1, 3), obj]
        return {"text": "".join(parts) + "。", "spo_list": spos}

    paths = {}
    for name, count in (("train", 10), ("valid", 4)):
        paths[name] = os.path.join(folder, f"{name}_data.json")
        with open(paths[name], "w", encoding="utf-8") as f:
            f.writelines(json.dumps(sample(), ensure_ascii=False) + "\n" for _ in range(count))
    paths["schema"] = os.path.join(folder, "all_50_schemas")
    with open(paths["schema"], "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"predicate": p}, ensure_ascii=False) + "\n" for p in PREDICATES)
    return paths


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("examples_backend"))
    rng = np.random.default_rng(3)
    query = "".join(CHARS[i] for i in rng.integers(0, len(CHARS), 6))
    data = {"basic_simple_web_serving_simbert": {"query": query, "n": 6, "k": 4, "seed": 1},
            "task_relation_extraction_gplinker": write_triples(work, rng)}
    ours, theirs = oracle_examples.run_examples(data, oracle_examples.write_bert(work), work)
    return ours, theirs


def test_basic_simple_web_serving_simbert(results):
    """The route's JSON answer is bert4keras's text: code 0, "succeeded", the same synonyms ranked the same."""
    ours, theirs = (side["basic_simple_web_serving_simbert"] for side in results)
    same(ours["answer"], theirs["answer"])
    answer = json.loads(str(ours["answer"]))
    assert answer["code"] == 0 and answer["desc"] == "succeeded" and 0 < len(answer["data"]) <= 4
    close(ours["vector"], theirs["vector"], rtol=1e-5, atol=1e-5)


def test_task_relation_extraction_gplinker(results):
    """GPLinker: the same label tensors, scores, losses (three sparse multi-label losses) and EMA-weighted
    evaluation, and the same triples extracted."""
    ours, theirs = (side["task_relation_extraction_gplinker"] for side in results)
    for key in ("token_ids", "entity_labels", "head_labels", "tail_labels", "spoes"):
        same(ours[key], theirs[key])
    close(ours["scores_before"], theirs["scores_before"], rtol=1e-5, atol=1e-5)
    close(ours["step_losses"], theirs["step_losses"])
    close(ours["epoch_loss"], theirs["epoch_loss"])
    close(ours["scores"], theirs["scores"])
    assert ours["step_losses"].shape == (3, 4)  # the total and each head's loss, a step
