"""``--stride``: long texts split into windows for training, predict and evaluate (cls and ner), on tiny runs trained
on the demo data; long documents are its sentences joined."""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pytest

from kerasbert import ConfigError, evaluate, predict, train
from kerasbert.cli import main
from kerasbert.finetune.demo_data import ner_examples, sentiment_examples, write_demo_data
from kerasbert.finetune.metrics import entity_metrics
from kerasbert.finetune.runs import open_run
from kerasbert.finetune.tasks import task_of
from kerasbert.text.ner_readers import NerExample, span_example, write_span_jsonl
from kerasbert.text.pipeline import decode_ner, encode_ner, text_example
from kerasbert.text.schemes import tags_to_spans
from kerasbert.text.tokenizer import pad_ids

MAXLEN = 24  # 22 pieces a window; the demo's characters are one piece each
STRIDE = 8
EPOCHS = 10
FAST = {"batch_size": 16, "lr": 3e-3, "warmup": 0.0, "schedule": "constant", "maxlen": MAXLEN, "verbose": 0}


def sentences(n: int, seed: int) -> list[NerExample]:
    """Demo sentences, each ended by "。", their entities as character spans."""
    return [span_example("".join(chars) + "。", tags_to_spans(tags)) for chars, tags in ner_examples(n, seed)]


def joined(parts: list[NerExample]) -> NerExample:
    """One document of ``parts``, their entities moved to where each part starts."""
    text, spans = "", []
    for part in parts:
        spans += [(len(text) + start, len(text) + end, label) for start, end, label in part.spans]
        text += part.text
    return span_example(text, spans)


def documents(parts: list[NerExample], per: int) -> list[NerExample]:
    """Documents of ``per`` consecutive parts each."""
    return [joined(parts[i:i + per]) for i in range(0, len(parts) - per + 1, per)]


def window_sized(parts: list[NerExample], size: int) -> list[NerExample]:
    """Pairs of sentences of ``size`` characters together, each pair joined: a hand split at sentence ends."""
    waiting: dict[int, NerExample] = {}
    out = []
    for part in parts:
        other = waiting.pop(size - len(part.text), None)
        if other is not None:
            out.append(joined([other, part]))
        else:
            waiting.setdefault(len(part.text), part)
    return out


def by_hand(length: int, maxlen: int, stride: int) -> list[tuple[int, int]]:
    """The windows' piece ranges, counted out one window at a time."""
    ranges, start = [], 0
    while True:
        ranges.append((start, min(start + maxlen - 2, length)))
        if start + maxlen - 2 >= length:
            return ranges
        start += maxlen - 2 - stride


def spans_of(prediction: dict) -> set:
    return {(e["start"], e["end"], e["label"]) for e in prediction["entities"]}


def cut_at_maxlen(run: str, texts: list[str]) -> list[dict]:
    """What the run predicts with its texts cut at maxlen, as without --stride."""
    loaded = open_run(run)
    task = task_of(dataclasses.replace(loaded.args, stride=None))
    examples = task.examples_of_texts(loaded.tokenizer, [{"text": text} for text in texts])
    features = task.encode(loaded.tokenizer, examples, None, loaded.args.maxlen, "input")
    return task.predict(loaded.model, features, examples, loaded.labels, 16)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, str]:
    folder = str(tmp_path_factory.mktemp("data"))
    paths = write_demo_data(folder, n_train=300, n_dev=16, n_test=16)
    for name, examples in (("long_train", documents(sentences(800, 11), per=5)),
                           ("long_dev", documents(sentences(100, 12), per=5))):
        paths[name] = os.path.join(folder, f"{name}.jsonl")
        write_span_jsonl(paths[name], examples)
    return paths


@pytest.fixture(scope="module")
def ner_run(data, tmp_path_factory) -> tuple[str, dict]:
    """NER trained with --stride on documents of five sentences (each longer than a window), scored per document."""
    run = str(tmp_path_factory.mktemp("ner"))
    result = train("ner", data["long_train"], run, dev=data["long_dev"], vocab=data["vocab"], epochs=EPOCHS,
                   stride=STRIDE, **FAST)
    return run, result


@pytest.fixture(scope="module")
def cls_run(data, tmp_path_factory) -> str:
    run = str(tmp_path_factory.mktemp("cls"))
    train("cls", data["cls_train"], run, dev=data["cls_dev"], vocab=data["vocab"], epochs=2, **{**FAST, "maxlen": 16})
    return run


def test_a_text_that_fits_gives_exactly_what_it_gives_without_a_stride(ner_run, cls_run):
    run, _ = ner_run
    texts = ["张伟去年加入了华为公司", "李娜和王芳昨天去了北京", "王", ""]
    assert [{"text": text, **row} for text, row in zip(texts, cut_at_maxlen(run, texts), strict=True)] == predict(
        run, texts)
    assert predict(cls_run, texts[:3], stride=3) == predict(cls_run, texts[:3])


def test_a_3000_character_document_keeps_its_entities_with_stride_and_loses_them_without(ner_run):
    run, _ = ner_run
    document = joined(sentences(400, seed=5))
    assert len(document.text) > 3000 and max(start for start, _, _ in document.spans) > len(document.text) - 30
    gold = set(document.spans)
    cut = spans_of(cut_at_maxlen(run, [document.text])[0])
    assert all(end <= MAXLEN - 2 for _, end, _ in cut) and len(cut & gold) < 0.02 * len(gold)  # past the window: lost
    found = spans_of(predict(run, [document.text])[0])
    assert len(found & gold) >= 0.85 * len(gold)  # a tiny model's recall, over every window of the document

    # the same entities from the model's own windows, merged by the rule in words: each piece from the window
    # holding it furthest from an edge (the earlier on a tie), then entities read over the whole document
    loaded = open_run(run)
    example = text_example(loaded.tokenizer, document.text)
    whole = encode_ner(loaded.tokenizer, [example], None)
    ids, ranges = whole.token_ids[0], by_hand(len(whole.token_ids[0]) - 2, MAXLEN, STRIDE)
    rows = [[ids[0], *ids[1 + start:1 + end], ids[-1]] for start, end in ranges]
    scores = loaded.model.predict([pad_ids(rows), np.zeros_like(pad_ids(rows))], verbose=0)
    tags = [0]
    for piece in range(len(ids) - 2):
        holding = [k for k, (start, end) in enumerate(ranges) if start <= piece < end]
        distance = {k: min(piece - ranges[k][0], ranges[k][1] - 1 - piece) for k in holding}
        best = min(k for k in holding if distance[k] == max(distance.values()))
        tags.append(int(np.argmax(scores[best, 1 + piece - ranges[best][0]])))
    expected = set(decode_ner(tags + [0], whole.first_pieces[0], example.offsets, loaded.labels))
    assert found == expected
    edges = {end for _, end in ranges[:-1]} | {start for start, _ in ranges[1:]}
    assert any(any(start < edge < end for edge in edges) for start, end, _ in found)  # some cross a window edge


def test_f1_with_stride_equals_f1_of_the_documents_split_by_hand(ner_run, tmp_path):
    run, _ = ner_run
    # the hand split: two sentences of one window's pieces together; --stride 0 windows the documents just so
    parts = window_sized(sentences(600, seed=21), MAXLEN - 2)
    paths = {name: str(tmp_path / f"{name}.jsonl") for name in ("documents", "parts")}
    write_span_jsonl(paths["documents"], documents(parts, per=6))
    write_span_jsonl(paths["parts"], parts[:len(parts) - len(parts) % 6])
    whole, split = evaluate(run, paths["documents"], stride=0, verbose=0), evaluate(run, paths["parts"], verbose=0)
    assert whole["f1"] == split["f1"] and whole["precision"] == split["precision"] and 0.8 < whole["f1"]
    assert whole["per_type"] == split["per_type"]
    overlapping = evaluate(run, paths["documents"], verbose=0)  # the run's stride: other context, a close score
    assert abs(overlapping["f1"] - split["f1"]) < 0.05


def test_a_classifiers_probabilities_are_the_mean_of_its_windows(cls_run):
    loaded = open_run(cls_run)
    text = "，".join(text for text, _ in sentiment_examples(6, seed=3))
    ids, _ = loaded.tokenizer.encode(text)
    ranges = by_hand(len(ids) - 2, 16, 4)
    assert len(ranges) >= 4
    rows = [[ids[0], *ids[1 + start:1 + end], ids[-1]] for start, end in ranges]
    windows = loaded.model.predict([pad_ids(rows), np.zeros_like(pad_ids(rows))], verbose=0)
    mean = windows.astype(np.float64).mean(axis=0)
    row = predict(cls_run, [text], stride=4)[0]
    np.testing.assert_allclose([row["probabilities"][label] for label in loaded.labels.labels], mean, atol=2e-6)
    assert row["label"] == loaded.labels.labels[int(np.argmax(mean))]
    assert predict(cls_run, [text]) != [row]  # cut at maxlen, it reads only the start


def test_training_splits_long_documents_and_scores_dev_per_document(ner_run, data):
    run, result = ner_run
    assert json.load(open(os.path.join(run, "args.json")))["stride"] == STRIDE
    loaded = open_run(run)
    windows = sum(len(by_hand(len(example.text), MAXLEN, STRIDE)) for example in loaded.task.read(data["long_train"]))
    assert result["steps"] == EPOCHS * math.ceil(windows / FAST["batch_size"])  # each window a training example
    dev = loaded.task.read(data["long_dev"])
    assert all(len(example.text) > MAXLEN for example in dev)
    predictions = predict(run, [example.text for example in dev])  # the run's stride
    assert predictions == predict(run, [example.text for example in dev], stride=STRIDE)
    by_document = entity_metrics([example.spans for example in dev], [sorted(spans_of(p)) for p in predictions])
    assert result["dev"]["f1"] == by_document["f1"] == evaluate(run, verbose=0)["f1"]


def test_the_command_line_takes_stride(ner_run, capsys):
    run, _ = ner_run
    text = joined(sentences(12, seed=9)).text
    assert main(["predict", run, "--text", text, "--stride", "5"]) == 0
    assert json.loads(capsys.readouterr().out) == predict(run, [text], stride=5)[0] != predict(run, [text])[0]
    assert main(["evaluate", run, "--stride", "3"]) == 0
    assert json.load(open(os.path.join(run, "eval-long_dev.json")))["f1"] == evaluate(run, stride=3, verbose=0)["f1"]
    assert main(["predict", run, "--text", text, "--stride", str(MAXLEN - 2)]) == 2
    message = capsys.readouterr().err
    assert f"--stride: expected less than maxlen - 2 = {MAXLEN - 2} (the word pieces of a window)" in message
    assert "found 22" in message
    assert main(["predict", "--model", run, "--text", text, "--stride", "3"]) == 2
    assert "--stride: expected a run folder" in capsys.readouterr().err


def test_a_stride_a_window_cannot_hold_or_a_task_that_cannot_merge_is_refused(data, tmp_path, capsys):
    common = {"vocab": data["vocab"], "epochs": 1, "verbose": 0}
    for stride, found in ((MAXLEN - 2, "found 22"), (-1, "found -1")):
        with pytest.raises(ConfigError, match="--stride: expected") as error:
            train("ner", data["long_train"], str(tmp_path / f"run{stride}"), maxlen=MAXLEN, stride=stride, **common)
        assert found in str(error.value)
    assert not os.path.exists(tmp_path / "run22" / "args.json")  # refused before anything was written
    with pytest.raises(ConfigError, match="--stride: expected --task cls, ner, span, qa or multilabel, found "
                                          "--task seq2seq"):
        train("seq2seq", data["cls_train"], str(tmp_path / "s2s"), stride=4, **common)
    with pytest.raises(ConfigError, match="found --task sim. a sentence vector is of one window, as "
                                          "sentence-transformers truncates at max_seq_length: leave --stride out"):
        train("sim", data["cls_train"], str(tmp_path / "sim"), stride=4, **common)
    with pytest.raises(ConfigError, match=r"--stride: expected single texts, found text pairs"):
        train("cls", data["cls_train"], str(tmp_path / "pairs"), text_b=1, stride=4, **common)
    with pytest.raises(ConfigError, match="--stride: expected a --train file, read in memory"):
        train("cls", os.path.join(os.path.dirname(data["cls_train"]), "*.tsv"), str(tmp_path / "glob"), stride=4,
              **common)
    assert main(["train", "--task", "seq2seq", "--train", data["cls_train"], "--out", str(tmp_path / "cli"),
                 "--vocab", data["vocab"], "--stride", "4"]) == 2
    assert "--stride: expected --task cls, ner, span, qa or multilabel, found --task seq2seq" in capsys.readouterr().err


@pytest.mark.slow  # trains the NER demo as `kerasbert demo --task ner` does
def test_the_ner_demo_reads_a_long_text_through_its_windows(tmp_path, capsys):
    assert main(["demo", "--task", "ner", "--out", str(tmp_path), "--quiet"]) == 0
    assert json.load(open(tmp_path / "ner" / "args.json", encoding="utf-8"))["stride"] == 16
    document = joined(sentences(300, seed=123))
    gold = set(document.spans)
    assert len(document.text) > 3200 and max(start for start, _, _ in gold) > len(document.text) - 30
    found = spans_of(predict(str(tmp_path / "ner"), [document.text], stride=16)[0])
    assert max(end - start for start, end, _ in found) <= max(end - start for start, end, _ in gold)  # 5: 中央电视台
    right = len(found & gold)
    assert right / len(found) >= 0.62 and right / len(gold) >= 0.75, (len(found), len(gold), right)  # 0.71, 0.82
