"""The seq2seq benchmark: its generated title corpus is what it says, and its quick mode runs every recipe."""

from __future__ import annotations

import json
import os
import random
import re
import sys

import pytest

from kerasbert.text.tokenizer import Tokenizer

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import seq2seq_recipe  # noqa: E402
import title_corpus  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("title-corpus"))
    paths = title_corpus.write_corpus(folder, n_train=600, n_dev=100, n_test=100)
    rows = {split: [json.loads(line) for line in open(paths[split], encoding="utf-8")]
            for split in ("train", "dev", "test")}
    return paths, rows


def test_corpus_is_varied_deterministic_and_in_its_vocabulary(corpus, tmp_path):
    paths, rows = corpus
    train = rows["train"]
    assert len({row["target"] for row in train}) > 0.9 * len(train)
    assert all(0 < len(row["target"]) < len(row["source"]) for split in rows.values() for row in split)
    again = title_corpus.write_corpus(str(tmp_path), n_train=600, n_dev=100, n_test=100)
    assert open(again["train"], "rb").read() == open(paths["train"], "rb").read()
    tokenizer = Tokenizer(paths["vocab"])
    unknown = tokenizer.token_to_id("[UNK]")
    ids, _ = tokenizer.encode_batch([row[key] for split in rows.values() for row in split for key in row])
    assert not any(unknown in row for row in ids)
    # every character a test title needs is one training titles write
    written = {char for row in train for char in row["target"]}
    assert {char for row in rows["test"] for char in row["target"]} <= written


def test_dev_and_test_names_are_unseen_in_training():
    for kind in ("PER", "ORG", "LOC"):
        rng_seen, rng_unseen = random.Random(1), random.Random(2)
        seen = {title_corpus._name(rng_seen, kind, unseen=False) for _ in range(300)}
        unseen = {title_corpus._name(rng_unseen, kind, unseen=True) for _ in range(300)}
        assert len(unseen) > 20 and not seen & unseen, kind
        assert all(title_corpus.held_out(name) for name in unseen)


@pytest.mark.slow
def test_quick_benchmark_runs_every_recipe_and_writes_its_section(tmp_path):
    text = helpers.run_quick_benchmark("seq2seq_recipe.py", tmp_path)
    assert "<!-- seq2seq-recipe -->" in text
    for recipe in seq2seq_recipe.RECIPES:
        row = re.search(rf"^\| {recipe} \| (\d\.\d+) \|", text, re.M)
        assert row and 0.0 <= float(row.group(1)) <= 1.0, recipe
