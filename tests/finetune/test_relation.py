"""``--task relation``: GPLinker against bert4keras 0.11.5's example (the same checkpoint, heads and rows give the same
labels, logits, loss and triples), a tiny run that learns the demo's triples, its predictions, scores and report, and
bad inputs named by file and line."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest

from kerasbert import DataError, evaluate, predict, train
from kerasbert.finetune.relation import stacked_logits
from kerasbert.finetune.relation_demo_data import PREDICATES, write_relation_data
from kerasbert.finetune.tasks import get_task
from kerasbert.modeling.heads import relations
from kerasbert.text.readers import LabelSet
from kerasbert.text.relation_data import RelationExample, encode_relations, pointer_labels, string_triples
from kerasbert.text.tokenizer import Tokenizer, pad_ids

import helpers

ROWS = [  # DuIE-style rows; entities found at their first occurrence, as the example searches them
    {"text": "张伟出生于北京，后来在华为公司工作",
     "spo_list": [["张伟", "出生地", "北京"], ["张伟", "工作单位", "华为公司"]]},
    {"text": "北京大学位于北京", "spo_list": [["北京大学", "位于", "北京"]]},  # 北京: at 0, inside the subject
    {"text": "李娜和王芳都在中国银行工作",
     "spo_list": [["李娜", "工作单位", "中国银行"], ["王芳", "工作单位", "中国银行"]]},
    {"text": "今天大家都在家休息", "spo_list": []},
    {"text": "王芳出生于上海，" * 3 + "李娜毕业于复旦大学", "spo_list": [["李娜", "毕业院校", "复旦大学"],
                                                               ["王芳", "出生地", "上海"]]},  # cut by maxlen
]
MAXLEN, HEAD_SIZE = 32, 16
LABELS = LabelSet(sorted(PREDICATES))


def examples_of(rows: list[dict]) -> list[RelationExample]:
    """kerasbert's examples of ``ROWS``, read from a file as `--task relation` reads them (no offsets given)."""
    return [RelationExample(row["text"], sorted(
        (row["text"].find(s), row["text"].find(s) + len(s), p, row["text"].find(o), row["text"].find(o) + len(o))
        for s, p, o in row["spo_list"])) for row in rows]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """The same random checkpoint and pointers in kerasbert and in bert4keras's example, and ROWS through both."""
    folder = str(tmp_path_factory.mktemp("oracle"))
    cfg = {**helpers.TINY, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    helpers.write_checkpoint(folder, helpers.random_google_weights(cfg, seed=5, heads=False), cfg)
    chars = sorted({c for row in ROWS for c in row["text"]} | {c for p in PREDICATES for c in p})
    vocab = helpers.write_vocab(folder, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *chars])
    model = relations(helpers.build_from(folder), len(LABELS), head_size=HEAD_SIZE)
    rng, weights = np.random.default_rng(7), {}
    for name, layer in zip(("entity", "head", "tail"), model.layers[-3:], strict=True):
        layer.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in layer.get_weights()])
        weights.update({f"{name}/{i}": w for i, w in enumerate(layer.get_weights())})
    np.savez(os.path.join(folder, "weights.npz"), **weights)
    job = {"config": os.path.join(folder, "bert_config.json"), "checkpoint": os.path.join(folder, "bert_model.ckpt"),
           "vocab": vocab, "maxlen": MAXLEN, "head_size": HEAD_SIZE, "predicates": LABELS.labels, "rows": ROWS,
           "weights": os.path.join(folder, "weights.npz")}
    theirs = helpers.run_bert4keras("oracle_relation.py", job, folder)
    features = encode_relations(Tokenizer(vocab), examples_of(ROWS), LABELS, MAXLEN, "rows")
    return model, features, theirs


def test_the_pair_codes_are_the_examples_labels(oracle):
    _, features, theirs = oracle
    np.testing.assert_array_equal(pad_ids(features.token_ids), theirs["token_ids"])
    for b, codes in enumerate(features.labels):
        for ours, name in zip(pointer_labels(codes, len(LABELS)), ("entity", "head", "tail"), strict=True):
            example = [{tuple(pair) for pair in head if tuple(pair) != (0, 0)} for head in theirs[f"{name}_labels"][b]]
            assert ours == example, (b, name)
    assert features.dropped == {"maxlen": 1, "boundaries": 0}  # the last row's 复旦大学 lies past maxlen in both


def test_the_three_pointers_logits_equal_the_examples(oracle):
    model, features, theirs = oracle
    ids = pad_ids(features.token_ids)
    for ours, name in zip(model([ids, np.zeros_like(ids)], training=False), ("entity", "head", "tail"), strict=True):
        ours, example = np.asarray(ours), theirs[name]
        assert ours.shape == example.shape
        np.testing.assert_array_equal(np.isfinite(ours), example > -1e11)  # bert4keras masks with -1e12
        np.testing.assert_allclose(ours[np.isfinite(ours)], example[example > -1e11], atol=1e-5, rtol=1e-5)


def test_the_loss_on_the_batch_equals_the_examples(oracle):
    model, features, theirs = oracle
    ids = pad_ids(features.token_ids)
    codes = pad_ids(features.labels)
    outputs = model([ids, np.zeros_like(ids)], training=False)
    losses = get_task("relation").compile_arguments(model)["loss"]
    ours = [float(loss(codes, output)) for loss, output in zip(losses, outputs, strict=True)]
    for value, name in zip(ours, ("entity", "head", "tail"), strict=True):
        assert value == pytest.approx(float(theirs[f"loss/{name}"]), rel=1e-5)
    assert sum(ours) == pytest.approx(float(theirs["loss"]), rel=1e-5)


def test_the_decoded_triples_are_extract_spoes(oracle):
    model, features, theirs = oracle
    task, examples = get_task("relation"), examples_of(ROWS)
    rows = task.predict(model, features, examples, LABELS, batch_size=8)
    found = 0
    for row, example in zip(rows, theirs["spoes"], strict=True):
        ours = sorted({(spo["subject"], spo["predicate"], spo["object"]) for spo in row["spo_list"]})
        assert ours == [tuple(spo) for spo in json.loads(str(example))]
        found += len(ours)
    assert found > 20  # random pointers: many triples, each pair of spans looked at
    assert stacked_logits(model) is stacked_logits(model)  # one model a run, one graph traced


def test_scores_are_the_examples_triple_counts_by_hand():
    examples = [RelationExample("张伟在北京", [(0, 2, "工作地", 3, 5)]), RelationExample("李娜", [])]
    predictions = [{"spo_list": [{"subject": "张伟", "predicate": "工作地", "object": "北京"},
                                 {"subject": "张伟", "predicate": "出生地", "object": "北京"}]},
                   {"spo_list": [{"subject": "李娜", "predicate": "工作地", "object": "李娜"}]}]
    scores = get_task("relation").score(examples, predictions, LabelSet(["出生地", "工作地"]))
    right, predicted, gold = 1, 3, 1  # the example's X, Y, Z
    assert scores["precision"] == pytest.approx(right / predicted) and scores["recall"] == right / gold
    assert scores["f1"] == pytest.approx(2 * right / (predicted + gold))
    assert scores["per_type"]["工作地"]["f1"] == pytest.approx(2 / 3)
    assert string_triples(examples[0]) == [("张伟", "北京", "工作地")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny model trained from scratch on the demo's generated triples, and its data."""
    data = write_relation_data(str(tmp_path_factory.mktemp("data")), n_train=480, n_dev=60, n_test=60)
    folder = str(tmp_path_factory.mktemp("run"))
    keras.utils.set_random_seed(0)
    result = train("relation", data["train"], folder, dev=data["dev"], vocab=data["vocab"], epochs=6, batch_size=16,
                   lr=1e-2, maxlen=48, verbose=0)
    return folder, data, result


@pytest.mark.slow
def test_a_tiny_run_learns_the_triples(run):
    folder, _, result = run
    assert result["monitor"] == "val_f1" and result["dev"]["f1"] >= 0.7  # chance: ~0
    assert set(result["dev"]["per_type"]) == set(PREDICATES)
    assert json.load(open(os.path.join(folder, "labels.json")))["labels"] == sorted(PREDICATES)
    assert open(os.path.join(folder, "per_predicate.txt")).read().split()[:2] == ["type", "precision"]
    assert {"loss", "Relation-Entity-Pointer_loss", "val_f1"} <= set(result["history"])


@pytest.mark.slow
def test_predict_and_evaluate_rows(run):
    folder, data, result = run
    rows = predict(folder, ["张伟出生于北京，后来在华为公司工作", {"text": ""}])
    assert rows[1] == {"text": "", "spo_list": []}
    spo = {(s["subject"], s["predicate"], s["object"]): s for s in rows[0]["spo_list"]}
    assert spo and set(spo) <= {("张伟", "出生地", "北京"), ("张伟", "工作单位", "华为公司")}
    assert all(rows[0]["text"][s["subject_start"]:s["subject_end"]] == s["subject"] and
               rows[0]["text"][s["object_start"]:s["object_end"]] == s["object"] for s in spo.values())
    scores = evaluate(folder, data["test"], verbose=0)
    assert scores["f1"] >= 0.7 and os.path.isfile(os.path.join(folder, "eval-test.json"))
    assert evaluate(folder, verbose=0)["f1"] == pytest.approx(result["dev"]["f1"])


@pytest.mark.slow
def test_a_predicate_unseen_in_training_names_file_and_line(run, tmp_path):
    _, data, _ = run
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"text": "张伟在北京", "spo_list": []}, ensure_ascii=False) + "\n" + json.dumps(
        {"text": "张伟在北京", "spo_list": [{"subject": "张伟", "predicate": "居住地", "object": "北京"}]},
        ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"dev.jsonl:2: expected predicates seen in training, .* found '居住地'"):
        train("relation", data["train"], str(tmp_path / "run"), dev=str(dev), vocab=data["vocab"], epochs=1,
              verbose=0)
    assert not os.path.exists(tmp_path / "run" / "args.json")
