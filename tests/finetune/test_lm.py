"""``--task lm``: a GPT-2 continued on plain text from the command line, its run folder reloaded, its dev loss and
perplexity against NumPy, its first batch's loss shifted and masked as bert4keras's language-model loss, and a
prompt continued greedily."""

from __future__ import annotations

import json
import math
import os
import random

import numpy as np
import pytest

from kerasbert import DataError, build_transformer_model, generate, save_google_checkpoint
from kerasbert.cli import main
from kerasbert.finetune.lm import LanguageModelTask, next_token_labels
from kerasbert.finetune.runs import open_run
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.readers import LabelSet

import helpers

CHARACTERS = "我们今天去北京大学看看天气很好中华人民共和国成立了自然语言处理是人工智能的一个方向"
TARGET_MAXLEN = 5


def _texts(path: str, count: int, seed: int, jsonl: bool = False) -> str:
    rng = random.Random(seed)
    texts = ["".join(rng.choice(CHARACTERS) for _ in range(rng.randint(3, 14))) for _ in range(count)]
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):  # a blank line after every third text, skipped
            blank = "\n" if i % 3 == 0 else ""
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n" if jsonl else text + "\n" + blank)
    return path


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory):
    """A GPT-2 of random weights saved as a Google checkpoint, continued one epoch from the command line."""
    work = str(tmp_path_factory.mktemp("gpt2"))
    vocab = helpers.write_vocab(work, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(CHARACTERS))])
    config = os.path.join(work, "bert_config.json")
    with open(vocab, encoding="utf-8") as f:
        size = len(f.read().splitlines())
    with open(config, "w") as f:
        json.dump({**helpers.TINY, "vocab_size": size}, f)
    save_google_checkpoint(build_transformer_model(config, model="gpt2", verbose=False),
                           os.path.join(work, "bert_model.ckpt"))
    paths = {"train": _texts(os.path.join(work, "train.txt"), 40, 1),
             "dev": _texts(os.path.join(work, "dev.jsonl"), 12, 2, jsonl=True), "vocab": vocab, "config": config,
             "checkpoint": os.path.join(work, "bert_model.ckpt"), "out": os.path.join(work, "run")}
    code = main(["train", "--task", "lm", "--model", "gpt2", "--config", config, "--checkpoint", paths["checkpoint"],
                 "--vocab", vocab, "--train", paths["train"], "--dev", paths["dev"], "--out", paths["out"],
                 "--epochs", "1", "--batch-size", "8", "--lr", "1e-3", "--target-maxlen", str(TARGET_MAXLEN),
                 "--quiet"])
    assert code == 0
    return paths


def _by_hand(model, rows: list[list[int]]) -> float:
    """The mean next-token cross-entropy over the rows' tokens after the first, each row run alone (no padding)."""
    losses = []
    for row in rows:
        probs = np.asarray(model.predict(np.array([row]), verbose=0))[0]
        losses += [-math.log(probs[t, row[t + 1]]) for t in range(len(row) - 1)]
    return float(np.mean(losses))


@pytest.mark.slow
def test_the_run_folder_reloads_as_a_gpt2_language_model(gpt2_run):
    loaded = open_run(gpt2_run["out"])
    assert json.load(open(os.path.join(gpt2_run["out"], "args.json")))["model"] == "gpt2"
    assert loaded.model.family == "gpt2" and isinstance(loaded.task, LanguageModelTask)
    assert loaded.tokenizer.encode("北京")[0] == [loaded.tokenizer.token_to_id(c) for c in "北京"]  # no [CLS], [SEP]


@pytest.mark.slow
def test_evaluate_prints_the_dev_loss_and_perplexity_numpy_gives(gpt2_run, capsys):
    assert main(["evaluate", gpt2_run["out"]]) == 0
    printed = capsys.readouterr().out
    loaded = open_run(gpt2_run["out"])
    scores = json.load(open(os.path.join(gpt2_run["out"], "eval-dev.json")))
    texts = list(loaded.task.stream(gpt2_run["dev"]))
    expected = _by_hand(loaded.model, [loaded.tokenizer.encode(text)[0] for text in texts])
    assert scores["loss"] == pytest.approx(expected, rel=1e-4)
    assert scores["perplexity"] == pytest.approx(math.exp(expected), rel=1e-4)
    assert scores["count"] == sum(len(loaded.tokenizer.encode(text)[0]) - 1 for text in texts)
    assert f"perplexity {scores['perplexity']:.4f}" in printed and f"loss {scores['loss']:.4f}" in printed


@pytest.mark.slow
def test_predict_continues_the_prompt_greedily(gpt2_run, capsys):
    assert main(["predict", gpt2_run["out"], "--text", "北京大学"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    loaded = open_run(gpt2_run["out"])
    ids = generate(loaded.model, [loaded.tokenizer.encode("北京大学")[0]], max_length=TARGET_MAXLEN)[0].ids[0]
    assert row == {"text": "北京大学", "continuation": loaded.tokenizer.decode(ids)} and len(ids) == TARGET_MAXLEN


@pytest.mark.slow
def test_the_first_batch_loss_is_the_shifted_masked_cross_entropy(gpt2_run):
    """The compiled loss on a padded batch is bert4keras's: y_pred[:, :-1] against y_true[:, 1:], padding masked."""
    loaded = open_run(gpt2_run["out"])
    task = loaded.task
    examples = task.read(gpt2_run["train"])
    features = task.encode(loaded.tokenizer, examples, LabelSet([]), 64, "train")
    inputs, labels = next(iter(task.batches(to_dataset(features, 8, seed=0), loaded.tokenizer, 0, 0)))
    probs = np.asarray(loaded.model(inputs, training=False))
    ids = np.asarray(inputs["Input-Token"])
    assert (ids == 0).any()  # rows of several lengths: some padding to mask
    mask = (ids[:, 1:] != 0).astype("float64")
    picked = np.take_along_axis(probs[:, :-1], ids[:, 1:, None], axis=-1)[..., 0]
    expected = float(np.sum(-np.log(picked) * mask) / np.sum(mask))
    loaded.model.compile("adam", **task.compile_arguments(loaded.model))  # Keras's path, as fit computes it
    got = loaded.model.test_on_batch(inputs, labels, return_dict=True)
    right = float(np.sum((probs[:, :-1].argmax(-1) == ids[:, 1:]) * mask) / np.sum(mask))
    assert got["loss"] == pytest.approx(expected, rel=1e-5) and got["masked_accuracy"] == pytest.approx(right)


def test_next_token_labels_by_hand():
    assert next_token_labels([7, 8, 9]) == [8, 9, 0] and next_token_labels([4]) == [0]


def test_texts_a_line_skip_blank_lines_and_jsonl_refuses_an_empty_text(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("北京\n\n  \n大学\n", encoding="utf-8")
    assert LanguageModelTask().read(str(path)) == ["北京", "大学"]
    path = tmp_path / "texts.jsonl"
    path.write_text('{"text": "北京"}\n{"text": ""}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"texts.jsonl: text 2: expected a non-empty text, found ''"):
        LanguageModelTask().read(str(path))


@pytest.mark.slow
def test_streamed_data_is_refused_before_anything_is_written(gpt2_run, tmp_path, capsys):
    out = str(tmp_path / "streamed")
    glob = os.path.join(os.path.dirname(gpt2_run["train"]), "*.txt")
    code = main(["train", "--task", "lm", "--model", "gpt2", "--config", gpt2_run["config"], "--checkpoint",
                 gpt2_run["checkpoint"], "--vocab", gpt2_run["vocab"], "--train", glob, "--out", out, "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "--train: expected one file, read in memory, for --task lm with --model gpt2" in err
    assert not os.path.exists(os.path.join(out, "args.json"))
    code = main(["prepare", "--task", "lm", "--data", gpt2_run["train"], "--vocab", gpt2_run["vocab"], "--out", out])
    err = capsys.readouterr().err
    assert code == 2 and "--task: expected a task whose rows stream from prepared shards, found 'lm'" in err
    assert not os.path.exists(out) or not os.listdir(out)
