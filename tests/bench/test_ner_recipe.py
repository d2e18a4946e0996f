"""The NER benchmark: its generated corpus is what it says, and its quick mode runs every recipe."""

from __future__ import annotations

import os
import re
import sys

import pytest

from kerasbert.text.ner_readers import read_conll

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import ner_corpus  # noqa: E402
import ner_recipe  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("ner-corpus"))
    paths = ner_corpus.write_corpus(folder, n_train=600, n_dev=100, n_test=200)
    return paths, {split: read_conll(paths[split], strict=True) for split in ("train", "dev", "test")}


def entities(examples, kind=None) -> set[str]:
    return {example.text[a:b] for example in examples for a, b, label in example.spans if kind in (None, label)}


def test_corpus_is_long_varied_and_deterministic(corpus, tmp_path):
    paths, splits = corpus
    train = splits["train"]
    assert {label for example in train for *_, label in example.spans} == set(ner_corpus.TYPES)
    lengths = [len(example.text) for example in train]
    assert sum(lengths) / len(lengths) > 40 and sum(n > 62 for n in lengths) > 0.05 * len(lengths)
    again = ner_corpus.write_corpus(str(tmp_path), n_train=600, n_dev=100, n_test=200)
    assert open(again["train"], "rb").read() == open(paths["train"], "rb").read()


def test_corpus_has_unseen_names_nested_looking_and_adjacent_spans(corpus):
    _, splits = corpus
    train, test = splits["train"], splits["test"]
    for kind in ("PER", "ORG"):
        assert not entities(test, kind) & entities(train, kind)  # names never seen in training
    # an ORG that starts with a city which is a LOC elsewhere (杭州银行 / 杭州)
    cities = entities(train, "LOC")
    assert any(org[:len(city)] == city for org in entities(train, "ORG") for city in cities)
    # two entities with nothing between them
    assert any(b == c for example in train
               for (_, b, _), (c, _, _) in zip(example.spans, example.spans[1:], strict=False))


def test_bert4keras_span_reader_matches_kerasbert(corpus):
    paths, splits = corpus
    ours = [(example.text, sorted(example.spans)) for example in splits["dev"]]
    assert [(text, sorted(spans)) for text, spans in ner_recipe.read_spans(paths["dev"])] == ours
    assert ner_recipe.entity_f1([[(0, 2, "PER")], [(1, 3, "LOC")]], [[(0, 2, "PER")], [(1, 4, "LOC")]]) == 0.5


@pytest.mark.slow
def test_quick_benchmark_runs_every_recipe_and_writes_its_section(tmp_path):
    text = helpers.run_quick_benchmark("ner_recipe.py", tmp_path)
    assert "<!-- ner-recipe -->" in text
    for recipe in ner_recipe.RECIPES:
        row = re.search(rf"^\| {recipe} \| (\d\.\d+) \|", text, re.M)
        assert row and 0.0 <= float(row.group(1)) <= 1.0, recipe
