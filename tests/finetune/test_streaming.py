"""Streaming: prepared TFRecord shards give the in-memory batches; globs, shuffling, errors, bounded memory."""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.cli import main
from kerasbert.errors import ConfigError, DataError
from kerasbert.finetune import streaming
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.finetune.tasks import get_task
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.readers import LabelSet, iter_classification
from kerasbert.text.tokenizer import Tokenizer

MAXLEN = 16  # short enough that some demo rows are cut


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict[str, str]:
    return write_demo_data(str(tmp_path_factory.mktemp("demo")), n_train=60, n_dev=4, n_test=2)


@pytest.fixture(scope="module")
def tokenizer(demo) -> Tokenizer:
    return Tokenizer(demo["vocab"])


def in_memory(task, paths: list[str], tokenizer: Tokenizer, labels: LabelSet | None = None):
    """What training does without streaming: each file read whole, concatenated, encoded at once."""
    examples = [example for path in paths for example in task.read(path)]
    labels = labels or task.label_set(examples)
    return task.encode(tokenizer, examples, labels, MAXLEN, "data"), labels


def batches(dataset) -> list:
    return [tf.nest.map_structure(lambda tensor: tensor.numpy(), batch) for batch in dataset]


def assert_same_batches(got, expected) -> None:
    assert got.element_spec == expected.element_spec
    assert int(got.cardinality()) == int(expected.cardinality())
    got, expected = batches(got), batches(expected)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        tf.nest.assert_same_structure(a, b)
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b), strict=True):
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def split_file(path: str, folder: str, blank_line: bool) -> list[str]:
    """Two files with the first and the second half of ``path`` (cut at a blank line for CoNLL)."""
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    cut = len(lines) // 2
    while blank_line and lines[cut].strip():
        cut += 1
    os.makedirs(folder, exist_ok=True)
    parts = [os.path.join(folder, f"part-{i}" + os.path.splitext(path)[1]) for i in range(2)]
    for part, rows in zip(parts, (lines[:cut], lines[cut:]), strict=True):
        open(part, "w", encoding="utf-8").write("".join(rows))
    return parts


@pytest.mark.parametrize("name,options", [("cls", {}), ("ner", {}), ("ner", {"crf": True})])
def test_prepared_batches_equal_the_in_memory_ones(demo, tokenizer, tmp_path, name, options):
    task = get_task(name, **options)
    out = str(tmp_path / "prepared")
    meta = streaming.prepare(task, demo[f"{name}_train"], tokenizer, MAXLEN, out, chunk=7, verbose=0, shard_size=16)
    features, labels = in_memory(task, [demo[f"{name}_train"]], tokenizer)
    assert meta["labels"] == labels.labels and meta["count"] == len(features) == 60
    assert meta["truncated"] == features.truncated > 0
    assert [shard["count"] for shard in meta["shards"]] == [16, 16, 16, 12]
    assert streaming.read_prepared(out) == meta
    assert_same_batches(streaming.prepared_dataset(out, 8), to_dataset(features, 8))
    assert_same_batches(streaming.prepared_dataset(out, 8, labels=False), to_dataset(features, 8, labels=False))


@pytest.mark.parametrize("name", ["cls", "ner"])
def test_a_glob_of_two_files_is_their_concatenation(demo, tokenizer, tmp_path, name):
    task = get_task(name)
    parts = split_file(demo[f"{name}_train"], str(tmp_path / "data"), blank_line=name == "ner")
    out = str(tmp_path / "prepared")
    meta = streaming.prepare(task, str(tmp_path / "data" / "part-*"), tokenizer, MAXLEN, out, verbose=0)
    features, labels = in_memory(task, parts, tokenizer)
    assert meta["files"] == parts and [shard["source"] for shard in meta["shards"]] == parts
    assert meta["labels"] == labels.labels
    assert_same_batches(streaming.prepared_dataset(out, 8), to_dataset(features, 8))


def test_shuffled_order_is_a_function_of_seed_and_epoch(demo, tokenizer, tmp_path):
    out = str(tmp_path / "prepared")
    streaming.prepare(get_task("cls"), demo["cls_train"], tokenizer, MAXLEN, out, verbose=0, shard_size=25)

    def rows(**options) -> list[tuple]:
        dataset = streaming.prepared_dataset(out, 8, shuffle_buffer=16, **options)
        return [(tuple(ids[ids > 0]), int(label)) for x, y in batches(dataset)
                for ids, label in zip(x["Input-Token"], y, strict=True)]

    tf.random.set_seed(1)
    first = rows(seed=3, epoch=0)
    tf.random.set_seed(2)  # TensorFlow's global seed plays no part
    assert rows(seed=3, epoch=0) == first
    assert rows(seed=3, epoch=1) != first and rows(seed=4, epoch=0) != first
    assert sorted(first) == sorted(rows()) and first != rows()
    assert rows(seed=3, epoch=0, skip_batches=3) == first[3 * 8:]


def test_iterates_under_a_distribution_strategy(demo, tokenizer, tmp_path):
    out = str(tmp_path / "prepared")
    streaming.prepare(get_task("ner"), demo["ner_train"], tokenizer, MAXLEN, out, verbose=0)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    dataset = strategy.experimental_distribute_dataset(streaming.prepared_dataset(out, 8, seed=0))
    assert sum(int(y.shape[0]) for _, y, _ in dataset) == 60


def test_given_labels_keep_their_ids_and_refuse_unseen_ones(demo, tokenizer, tmp_path):
    task, labels = get_task("cls"), LabelSet(["pos", "neg"])
    meta = streaming.prepare(task, demo["cls_train"], tokenizer, MAXLEN, str(tmp_path / "a"), labels, verbose=0)
    features, _ = in_memory(task, [demo["cls_train"]], tokenizer, labels)
    assert meta["labels"] == ["pos", "neg"]
    assert_same_batches(streaming.prepared_dataset(str(tmp_path / "a"), 8), to_dataset(features, 8))
    with pytest.raises(DataError, match=r"train.tsv:\d+: expected labels seen in training, \['neg'\], found unseen"):
        streaming.prepare(task, demo["cls_train"], tokenizer, MAXLEN, str(tmp_path / "b"), LabelSet(["neg"]))
    with pytest.raises(DataError, match=r"train.txt:\d+: expected entity types seen in training"):
        streaming.prepare(get_task("ner"), demo["ner_train"], tokenizer, MAXLEN, str(tmp_path / "c"),
                          LabelSet(["O", "B-PER", "I-PER"]))


def test_readers_stream_the_file(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("good\tpos\nbad\tneg\nno label here\n", encoding="utf-8")
    examples = iter_classification(str(path))
    assert next(examples).text == "good"  # read before the bad third row is reached
    with pytest.raises(DataError, match=r"train.tsv:3: expected 2 columns"):
        list(examples)


def test_errors(demo, tokenizer, tmp_path):
    task = get_task("cls")
    pattern = str(tmp_path / "nothing-*.tsv")
    message = f"^{re.escape(pattern)}: expected a file or a glob matching files, found no match$"
    with pytest.raises(DataError, match=message):
        streaming.prepare(task, pattern, tokenizer, MAXLEN, str(tmp_path / "out"))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ConfigError, match="expected a new or empty folder"):
        streaming.prepare(task, demo["cls_train"], tokenizer, MAXLEN, str(tmp_path / "full"))
    with pytest.raises(DataError, match=r"meta.json: expected the meta.json that `kerasbert prepare` writes"):
        streaming.prepared_dataset(str(tmp_path / "full"), 8)
    with pytest.raises(ConfigError, match="maxlen: expected an int >= 3"):
        streaming.prepare(task, demo["cls_train"], tokenizer, 2, str(tmp_path / "out"))


def test_a_failure_midway_leaves_no_folder(demo, tokenizer, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.tsv").write_text(open(demo["cls_train"], encoding="utf-8").read(), encoding="utf-8")
    (tmp_path / "data" / "b.tsv").write_text("good\tpos\nbad\n", encoding="utf-8")
    out = tmp_path / "prepared"
    expected = r"b.tsv:2: expected 2 columns \(the label in column 1, counting from 0\), found 1 column"
    with pytest.raises(DataError, match=expected):
        streaming.prepare(get_task("cls"), str(tmp_path / "data" / "*.tsv"), tokenizer, MAXLEN, str(out),
                          LabelSet(["neg", "pos"]), verbose=0)  # given labels: the failure is in pass 2, writing
    assert sorted(os.listdir(tmp_path)) == ["data"]


def test_cli_prepare(demo, tmp_path, capsys):
    out = str(tmp_path / "prepared")
    argv = ["prepare", "--task", "ner", "--data", demo["ner_train"], "--vocab", demo["vocab"], "--out", out,
            "--maxlen", "32", "--quiet"]
    assert main(argv) == 0
    assert "60 examples" in capsys.readouterr().out
    meta = streaming.read_prepared(out)
    assert (meta["task"], meta["maxlen"], meta["count"]) == ("ner", 32, 60)
    assert main(argv[:4] + ["nothing-*.txt"] + argv[5:]) == 2
    assert "kerasbert prepare: error: nothing-*.txt: expected a file or a glob" in capsys.readouterr().err


# ---------------------------------------------------------------------------- bounded memory

CAP_MB = 10  # the most peak RSS may grow from streaming the big file instead of the small one
BIG_MB, SMALL_MB = 20, 1
# Measured by hand on a 2-core machine, peak RSS in MB (MALLOC_ARENA_MAX=2, as below): the small file
# 665-666 and the big one 671 (+5); the big one read whole by `_rows` (`read_text(...).splitlines()`,
# what this replaced) 698 (+32); the list reader alone (`read_classification`, no tokenizing) 701 (+35).
# The in-memory training input (read, `Task.encode`, `to_dataset`, one pass) costs ~20x the file:
# +125 MB for a 6 MB file.
CHILD = """
import json, resource, sys
from kerasbert.finetune import streaming
from kerasbert.finetune.tasks import get_task
from kerasbert.text.tokenizer import Tokenizer
data, vocab, out, repeat = sys.argv[1:]
streaming.prepare(get_task("cls"), data, Tokenizer(vocab), 64, out, chunk=2000, verbose=0)
rows = sum(int(y.shape[0]) for _, y in streaming.prepared_dataset(out, 64, seed=1).repeat(int(repeat)))
print(json.dumps({"rows": rows, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_rows(path: str, vocab: str, megabytes: float) -> None:
    """A classification TSV of short Chinese rows: one random block of 2,000 rows written over and over."""
    rng = random.Random(0)
    chars = [token for token in open(vocab, encoding="utf-8").read().split() if "\u4e00" <= token <= "\u9fff"]
    block = "".join("".join(rng.choices(chars, k=rng.randint(20, 60))) + "\t" + rng.choice(("pos", "neg")) + "\n"
                    for _ in range(2000)).encode("utf-8")
    with open(path, "wb") as out:
        for _ in range(max(1, round(megabytes * 2**20 / len(block)))):
            out.write(block)


def peak_rss(data: str, vocab: str, out: str, repeat: int = 1) -> dict:
    # at most two malloc arenas: with glibc's default (one per thread, up to 8 per core) TensorFlow's
    # threads add fragmentation that grows with the run's length, not with the data
    env = dict(os.environ, MALLOC_ARENA_MAX="2", TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-c", CHILD, data, vocab, out, str(repeat)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_streaming_a_file_larger_than_the_cap_keeps_rss_bounded(demo, tmp_path):
    small, big = str(tmp_path / "small.tsv"), str(tmp_path / "big.tsv")
    write_rows(small, demo["vocab"], SMALL_MB)
    write_rows(big, demo["vocab"], BIG_MB)
    assert os.path.getsize(big) > 1.5 * CAP_MB * 2**20  # the file is larger than the cap
    # the small file is read as many times as fits in the big one: both runs take as many steps, so
    # tf.data's autotuned buffers (which grow with the steps taken, ~8 MB here) are alike in both
    baseline = peak_rss(small, demo["vocab"], str(tmp_path / "small"), repeat=round(BIG_MB / SMALL_MB))
    streamed = peak_rss(big, demo["vocab"], str(tmp_path / "big"))
    assert abs(streamed["rows"] - baseline["rows"]) < 0.1 * streamed["rows"]
    assert streamed["peak_mb"] - baseline["peak_mb"] < CAP_MB, (baseline, streamed)


def _train(*args):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return [sys.executable, "-m", "kerasbert", "train", *args], env


@pytest.mark.slow
def test_train_streams_a_prepared_folder_or_a_glob_and_resumes(demo, tmp_path):
    """`kerasbert train --train FOLDER` (from `kerasbert prepare`) and `--train 'GLOB'` (prepared on the fly)
    train the same model; a run on the folder killed mid-epoch resumes to the uninterrupted weights."""
    import keras

    from helpers import kill_mid_epoch

    prepared = str(tmp_path / "prepared")
    assert main(["prepare", "--task", "cls", "--data", demo["cls_train"], "--vocab", demo["vocab"], "--out", prepared,
                 "--maxlen", "48", "--quiet"]) == 0
    common = ["--task", "cls", "--vocab", demo["vocab"], "--epochs", "2", "--batch-size", "16", "--lr", "2e-3",
              "--save-every", "2", "--quiet"]
    runs = {name: str(tmp_path / name) for name in ("folder", "glob", "killed")}
    glob_pattern = os.path.join(os.path.dirname(demo["cls_train"]), "tr*.tsv")
    # every run in a process of its own, as the resumed one is, side by side: such runs are equal bit for bit,
    # while one inside the test process, after other tests, was not always (Adam turns a rounding difference in a
    # near-zero gradient into a step of up to the learning rate)
    whole = []
    for name, source in (("folder", prepared), ("glob", glob_pattern)):
        command, env = _train(*common, "--train", source, "--out", runs[name], "--maxlen", "48")
        whole.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    command, env = _train(*common, "--train", prepared, "--out", runs["killed"])
    state = kill_mid_epoch(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                           runs["killed"])
    for process in whole:
        assert process.wait(timeout=600) == 0, process.stderr.read()[-3000:]
    assert state["epoch"] == 1 and state["step"] > 0
    command, env = _train("--out", runs["killed"], "--resume", "--quiet")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    import kerasbert.modeling.heads  # noqa: F401  (registers the layers)

    weights = {name: keras.saving.load_model(os.path.join(run, "model.keras"), compile=False).get_weights()
               for name, run in runs.items()}
    for name in ("glob", "killed"):
        for x, y in zip(weights["folder"], weights[name], strict=True):
            np.testing.assert_allclose(x, y, atol=1e-5)
    assert json.load(open(os.path.join(runs["folder"], "args.json")))["maxlen"] == 48
    assert json.load(open(os.path.join(runs["killed"], "metrics.json")))["steps"] == 2 * math.ceil(
        streaming.read_prepared(prepared)["count"] / 16)


def test_train_refuses_data_prepared_for_other_options(demo, tmp_path, capsys):
    prepared = str(tmp_path / "ner")
    assert main(["prepare", "--task", "ner", "--data", demo["ner_train"], "--vocab", demo["vocab"], "--out", prepared,
                 "--maxlen", "32", "--quiet"]) == 0
    base = ["train", "--train", prepared, "--vocab", demo["vocab"], "--quiet"]
    assert main([*base, "--task", "ner", "--crf", "--out", str(tmp_path / "a")]) == 2
    assert "expected data prepared with crf True, found False" in capsys.readouterr().err
    assert main([*base, "--task", "ner", "--maxlen", "64", "--out", str(tmp_path / "b")]) == 2
    assert "--maxlen: expected 32, the maxlen" in capsys.readouterr().err
    assert main([*base, "--task", "cls", "--out", str(tmp_path / "c")]) == 2
    assert "expected data prepared with task cls, found ner" in capsys.readouterr().err
    assert not any(os.path.exists(tmp_path / name) for name in "abc")  # nothing written
