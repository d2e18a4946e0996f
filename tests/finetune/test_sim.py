"""``--task sim``: reading pairs, batches that keep them together, the scores (Spearman, best-threshold accuracy),
the loss chosen from the data, training on the generated paraphrase corpus, prediction and the errors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import ConfigError, DataError
from kerasbert.finetune.args import TrainArgs
from kerasbert.finetune.metrics import best_threshold_accuracy, ranks, similarity_metrics, spearman
from kerasbert.finetune.paraphrase_data import paraphrase_pairs, write_paraphrase_data
from kerasbert.finetune.sim import SimilarityTask
from kerasbert.text.pipeline import Features, to_dataset
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer

TRAINING = {"epochs": 6, "batch_size": 16, "lr": 2e-3, "maxlen": 32, "verbose": 0}  # the tiny config, seconds


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    return write_paraphrase_data(str(tmp_path_factory.mktemp("paraphrases")), n_train=320, n_dev=80, n_test=80)


@pytest.fixture(scope="module")
def run(data, tmp_path_factory) -> tuple[str, dict]:
    from kerasbert import train

    out = str(tmp_path_factory.mktemp("sim-run"))
    return out, train("sim", data["train"], out, dev=data["dev"], vocab=data["vocab"], **TRAINING)


def write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------------------- reading and batches
def test_pairs_read_from_tsv_csv_and_jsonl(tmp_path):
    tsv = write(tmp_path / "pairs.tsv", "北京到上海怎么走\t怎么从北京去上海\t1\n今天热吗\t明天冷吗\t0\n")
    csv = write(tmp_path / "pairs.csv", "q1,q2,same\n北京,上海,0.5\n")
    jsonl = write(tmp_path / "pairs.jsonl", json.dumps({"text": "好", "text_b": "很好", "label": 4.2}) + "\n")
    read = [(e.text, e.text_b, float(e.label)) for e in SimilarityTask().read(tsv)]
    assert read == [("北京到上海怎么走", "怎么从北京去上海", 1.0), ("今天热吗", "明天冷吗", 0.0)]
    named = SimilarityTask(text="q1", text_b="q2", label="same").read(csv)
    assert [(e.text, e.text_b, float(e.label)) for e in named] == [("北京", "上海", 0.5)]
    assert [(e.text, e.text_b, float(e.label)) for e in SimilarityTask().read(jsonl)] == [("好", "很好", 4.2)]


@pytest.mark.parametrize("name, text, message", [
    ("two.tsv", "好\t很好\t1\n好\t1\n", r"two.tsv:2: expected 3 columns \(the label in column 2"),
    ("empty.tsv", "好\t很好\t1\n好\t \t1\n", "empty.tsv:2: expected a pair: a second text, found an empty one"),
    ("missing.jsonl", '{"text": "好", "text_b": "很好", "label": 1}\n{"text": "好", "label": 1}\n',
     r"missing.jsonl:2: expected field 'text_b', found keys \['label', 'text'\]"),
    ("word.tsv", "好\t很好\t1\n好\t不好\tsame\n",
     "word.tsv:2: expected a label that is a number .*, found 'same'"),
    ("nan.tsv", "好\t很好\tnan\n", "nan.tsv:1: expected a label that is a number .*, found 'nan'")])
def test_bad_pair_files_name_file_and_line(tmp_path, name, text, message):
    with pytest.raises(DataError, match=message):
        SimilarityTask().read(write(tmp_path / name, text))


def test_encode_puts_a_pair_on_two_rows_with_its_label(data):
    task, tokenizer = SimilarityTask(), Tokenizer(data["vocab"])
    examples = task.read(data["dev"])[:5]
    features = task.encode(tokenizer, examples, LabelSet([]), 32, "dev")
    assert features.group == 2 and len(features) == 10
    for i, example in enumerate(examples):
        assert features.token_ids[2 * i] == tokenizer.encode(example.text, maxlen=32)[0]
        assert features.token_ids[2 * i + 1] == tokenizer.encode(example.text_b, maxlen=32)[0]
        assert features.labels[2 * i] == features.labels[2 * i + 1] == float(example.label)
    rows = task.examples_of_texts(tokenizer, [{"text": "好"}, {"text": "a", "text_b": "b"}])
    unlabelled = task.encode(tokenizer, rows, None, 32, "input")
    assert (len(unlabelled), unlabelled.group, unlabelled.labels) == (3, 1, None)


def _pairs(count: int) -> Features:
    """Pair p: rows 2p (token 10 + 2p) and 2p + 1 (token 11 + 2p), label p as a float."""
    rows = [[2, 10 + i, 3] for i in range(2 * count)]
    return Features(rows, [[0, 0, 0]] * len(rows), [float(i // 2) for i in range(2 * count)], group=2)


def _batches(features: Features, **options) -> list[tuple[list[int], list[float]]]:
    return [(x["Input-Token"][:, 1].numpy().tolist(), y.numpy().tolist())
            for x, y in to_dataset(features, 4, **options)]


@pytest.mark.parametrize("seed, epoch", [(0, 0), (0, 1), (7, 3)])
def test_pairs_stay_together_when_shuffled_and_after_a_resume_skip(seed, epoch):
    batches = _batches(_pairs(21), seed=seed, epoch=epoch)
    assert [len(tokens) for tokens, _ in batches] == [8] * 5 + [2]  # --batch-size counts pairs
    seen = []
    for tokens, labels in batches:
        for first, second, a, b in zip(tokens[0::2], tokens[1::2], labels[0::2], labels[1::2], strict=True):
            assert (second, a, b) == (first + 1, (first - 10) // 2, (first - 10) // 2)  # one pair, in order
            seen.append(a)
    assert sorted(seen) == list(range(21)) and seen != list(range(21))  # every pair once, shuffled
    assert _batches(_pairs(21), seed=seed, epoch=epoch, skip_batches=2) == batches[2:]


def test_single_rows_keep_the_order_they_had():
    from kerasbert.text.pipeline import _order

    np.testing.assert_array_equal(_order(50, 3, 2), np.random.default_rng([3, 2]).permutation(50))


def test_a_pair_split_or_bucketed_is_refused():
    odd = _pairs(3)
    odd.token_ids, odd.segment_ids, odd.labels = odd.token_ids[:5], odd.segment_ids[:5], odd.labels[:5]
    with pytest.raises(ConfigError, match="whole groups of 2 rows"):
        to_dataset(odd, 2)
    with pytest.raises(ConfigError, match="bucket_boundaries"):
        to_dataset(_pairs(3), 2, bucket_boundaries=[8])


# ------------------------------------------------------------------------------------------- scores
@pytest.mark.parametrize("size", [5, 40])
def test_spearman_equals_scipy_with_ties(size):
    from scipy import stats  # comes with the test extra (seqeval -> scikit-learn -> scipy)

    rng = np.random.default_rng(size)
    x, y = rng.integers(0, 4, size).astype(float), rng.normal(size=size).round(1)
    np.testing.assert_allclose(ranks(x), stats.rankdata(x))
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_by_hand():
    # ranks of x: 1, 2.5, 2.5, 4; of y: 2, 1, 3, 4; centred: (-1.5, 0, 0, 1.5), (-0.5, -1.5, 0.5, 1.5)
    # Σ products 3, Σ squares 4.5 and 5: 3 / √22.5
    assert spearman([1, 2, 2, 3], [0.2, 0.1, 0.5, 0.9]) == pytest.approx(3 / np.sqrt(22.5))
    assert np.isnan(spearman([1, 1, 1], [0.2, 0.5, 0.1]))  # a constant: no ordering, NaN as scipy


def test_best_threshold_accuracy_by_hand_and_against_every_threshold():
    # sorted: 0.1 (0), 0.3 (0), 0.4 (1), 0.6 (1), 0.7 (0), 0.9 (1): from 0.35 up, all but 0.7 are right
    assert best_threshold_accuracy([0.9, 0.1, 0.7, 0.4, 0.6, 0.3], [1, 0, 0, 1, 1, 0]) == (5 / 6, pytest.approx(0.35))
    # 0.1 (0), 0.3 (1), 0.4 (0), 0.8 (1), 0.9 (1): 4 of 5 right from 0.2 (0.4 wrong) and from 0.6 (0.3 wrong): 0.2
    assert best_threshold_accuracy([0.9, 0.1, 0.4, 0.3, 0.8], [1, 0, 0, 1, 1]) == (0.8, pytest.approx(0.2))
    assert best_threshold_accuracy([0.5, 0.5], [1, 1]) == (1.0, 0.5)  # all similar: the lowest similarity
    rng = np.random.default_rng(0)
    for _ in range(20):
        s, y = rng.integers(0, 6, 12) / 5, rng.integers(0, 2, 12)
        accuracy, threshold = best_threshold_accuracy(s, y)
        assert accuracy == max(np.mean((s >= t) == y) for t in [*s, np.inf])
        assert np.mean((s >= threshold) == y) == accuracy


def test_similarity_metrics_give_accuracy_for_0_1_labels_only():
    assert set(similarity_metrics([0, 1, 1], [0.1, 0.5, 0.7])) == {"spearman", "count", "accuracy", "threshold"}
    assert set(similarity_metrics([0.5, 3.8, 5.0], [0.1, 0.5, 0.7])) == {"spearman", "count"}


# ------------------------------------------------------------------------------------------- the loss
def test_the_loss_is_chosen_from_the_training_labels(tmp_path):
    positives = write(tmp_path / "positives.tsv", "好\t很好\t1\n差\t很差\t1\n")
    assert SimilarityTask().label_set(SimilarityTask().read(positives)) == LabelSet([])
    chosen = SimilarityTask()
    chosen.label_set(chosen.read(positives))
    assert chosen.sim_loss == "in_batch"
    mixed = SimilarityTask()
    mixed.label_set(mixed.read(write(tmp_path / "mixed.tsv", "好\t很好\t1\n好\t差\t0\n")))
    assert mixed.sim_loss == "cosent"
    with pytest.raises(ConfigError, match="--sim-loss cosent: expected training pairs of at least two labels"):
        SimilarityTask(sim_loss="cosent").label_set(chosen.read(positives))


def test_a_positives_only_run_trains_with_in_batch_negatives(data, tmp_path):
    from kerasbert import train

    positives = write(tmp_path / "positives.tsv", "".join(f"{a}\t{b}\t1\n" for a, b, label in
                                                          paraphrase_pairs(64, seed=5) if label))
    train("sim", positives, str(tmp_path / "run"), vocab=data["vocab"], **{**TRAINING, "epochs": 1})
    saved = json.load(open(tmp_path / "run" / "args.json"))
    assert (saved["sim_loss"], saved["pooling"]) == ("in_batch", "first_last_avg")


@pytest.mark.parametrize("options, message", [
    ({"task": "cls", "pooling": "mean"}, "--pooling: expected --task sim"),
    ({"task": "sim", "sim_loss": "triplet"}, "--sim-loss: expected cosent or in_batch"),
    ({"task": "sim", "pooling": "max"}, "--pooling: expected first_last_avg or mean")])
def test_bad_sim_options(data, options, message):
    with pytest.raises(ConfigError, match=message):
        TrainArgs(train=data["train"], out="run", vocab=data["vocab"], **options).check()


def test_streamed_pairs_are_refused(data, tmp_path):
    from kerasbert.finetune import streaming

    with pytest.raises(ConfigError, match="--task sim: expected a task of one row per example to stream"):
        streaming.prepare(SimilarityTask(), data["train"], Tokenizer(data["vocab"]), 32, str(tmp_path / "out"))


# ------------------------------------------------------------------------------------------- a trained run
def test_a_tiny_run_learns_the_paraphrases(run):
    out, result = run
    assert result["monitor"] == "val_spearman" and result["dev"]["spearman"] >= 0.5  # chance: 0
    assert result["dev"]["accuracy"] >= 0.7 and -1 <= result["dev"]["threshold"] <= 1  # chance: 0.5
    saved = json.load(open(os.path.join(out, "args.json")))
    assert (saved["task"], saved["pooling"], saved["sim_loss"]) == ("sim", "first_last_avg", "cosent")
    assert open(os.path.join(out, "history.csv")).readline().strip().endswith("val_spearman,val_accuracy")
    assert open(os.path.join(out, "scores.txt")).read().startswith(f"spearman  {result['dev']['spearman']:.4f}")


def test_predict_gives_cosines_of_the_vectors(run, data):
    from kerasbert import evaluate, predict
    from kerasbert.finetune.runs import open_run

    out, result = run
    rows = predict(out, [{"text": "北京到上海怎么走", "text_b": "怎么从北京去上海"}, "上海到北京怎么走",
                         {"text": "北京到上海怎么走"}])
    assert set(rows[0]) == {"text", "text_b", "similarity"} and set(rows[1]) == set(rows[2]) == {"text", "vector"}
    loaded = open_run(out)
    vectors = [np.asarray(row["vector"]) for row in rows[1:]]
    assert len(vectors[0]) == loaded.model.outputs[0].shape[-1] == 32  # the tiny config's H
    np.testing.assert_allclose([np.linalg.norm(v) for v in vectors], 1.0, rtol=1e-5)
    pair = predict(out, ["北京到上海怎么走", "怎么从北京去上海"])
    a, b = (np.asarray(row["vector"]) for row in pair)
    assert rows[0]["similarity"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), abs=1e-5)
    assert evaluate(out, data["dev"], verbose=0) == pytest.approx(result["dev"])


def test_the_task_table_maps_each_name_to_its_task():
    from kerasbert.finetune.tasks import TASKS, get_task

    assert isinstance(get_task("sim"), SimilarityTask)
    assert all(task.name == name for name, task in TASKS.items())


def test_the_demo_trains_and_reports_spearman(tmp_path, capsys):
    from kerasbert.cli import main

    assert main(["demo", "--task", "sim", "--out", str(tmp_path), "--epochs", "1", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "== sim: test set" in printed and "Spearman" in printed and '"similarity"' in printed
    assert os.path.isfile(tmp_path / "data" / "sim" / "train.tsv")
