"""The similarity benchmark: its generated paraphrase corpus holds dev and test names out of training, and its quick
mode runs every recipe."""

from __future__ import annotations

import os
import re
import sys

import pytest

from kerasbert.finetune.paraphrase_data import SLOTS, paraphrase_pairs
from kerasbert.text.tokenizer import Tokenizer

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import paraphrase_corpus  # noqa: E402
import sim_recipe  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    paths = paraphrase_corpus.write_corpus(str(tmp_path_factory.mktemp("paraphrase-corpus")), n_train=600,
                                           n_dev=100, n_test=200)
    return paths, {split: sim_recipe.read_pairs(paths[split]) for split in ("train", "dev", "test")}


def test_split_pool_keeps_a_quarter_whose_characters_training_writes():
    for values in paraphrase_corpus.OPEN.values():
        seen, unseen = paraphrase_corpus.split_pool(values)
        assert sorted(seen + unseen) == sorted(values) and not set(seen) & set(unseen)
        assert len(values) // 6 <= len(unseen) <= len(values) // 4
        assert {char for value in unseen for char in value} <= {char for value in seen for char in value}
    cities = ("北京", "南京", "济南", "南宁", "宁波", "波士顿", "北海", "海口")
    assert paraphrase_corpus.split_pool(cities)[1] == ["宁波", "北海"]


def test_pools_replace_the_slot_values():
    pools = {kind: list(values) for kind, values in SLOTS.items()} | {"CITY": ["襄阳", "绵阳", "宜宾"]}
    pairs = paraphrase_pairs(200, seed=3, pools=pools)
    texts = [text for a, b, _ in pairs for text in (a, b)]
    assert not any(city in text for city in SLOTS["CITY"] for text in texts)
    assert all(any(city in text for text in texts) for city in pools["CITY"])
    assert paraphrase_pairs(50, seed=3, pools=dict(SLOTS)) == paraphrase_pairs(50, seed=3)


def test_dev_and_test_name_only_held_out_values(corpus):
    _, splits = corpus
    for split in ("dev", "test"):
        texts = [text for a, b, _ in splits[split] for text in (a, b)]
        for kind, values in paraphrase_corpus.OPEN.items():
            seen, unseen = paraphrase_corpus.split_pool(values)
            assert not [value for value in seen if any(value in text for text in texts)], (split, kind)
            assert sum(any(value in text for text in texts) for value in unseen) > len(unseen) // 2, (split, kind)


def test_corpus_is_balanced_deterministic_and_in_its_vocabulary(corpus, tmp_path):
    paths, splits = corpus
    assert [sum(label for *_, label in pairs) for pairs in splits.values()] == [300, 50, 100]
    assert all(a != b for pairs in splits.values() for a, b, _ in pairs)
    again = paraphrase_corpus.write_corpus(str(tmp_path), n_train=600, n_dev=100, n_test=200)
    assert all(open(again[key], "rb").read() == open(paths[key], "rb").read() for key in paths)
    texts = [text for pairs in splits.values() for a, b, _ in pairs for text in (a, b)]
    ids, _ = Tokenizer(paths["vocab"]).encode_batch(texts)
    assert not any(Tokenizer(paths["vocab"]).token_to_id("[UNK]") in row for row in ids)
    # every character of a test question is one training writes
    written = {char for a, b, _ in splits["train"] for char in a + b}
    assert {char for a, b, _ in splits["test"] for char in a + b} <= written


@pytest.mark.slow
def test_quick_benchmark_runs_every_recipe_and_writes_its_section(tmp_path):
    text = helpers.run_quick_benchmark("sim_recipe.py", tmp_path)
    assert "<!-- sim-recipe -->" in text
    for recipe in sim_recipe.RECIPES:
        row = re.search(rf"^\| {recipe} \| .*$", text, re.M)
        assert row, recipe
        cells = row.group(0).split(" | ")  # recipe, Spearman mean, spread, per seed, accuracy mean, ...
        # balanced labels: calling every pair similar is right half the time, the best threshold at least that
        assert -1.0 <= float(cells[1]) <= 1.0 and 0.5 <= float(cells[4]) <= 1.0, recipe
