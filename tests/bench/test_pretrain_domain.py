"""The continued-pretraining benchmark: its generated domain corpus keeps dev and test drugs out of the labelled
training set and their names out of every other text, and its quick mode writes both arms and the throughput."""

from __future__ import annotations

import csv
import os
import re
import sys

import pytest

from kerasbert.text.tokenizer import Tokenizer

import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import domain_corpus  # noqa: E402
import pretrain_domain  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return domain_corpus.write_corpus(str(tmp_path_factory.mktemp("domain-corpus")), quick=True)


def rows(path: str) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as f:
        return [(row["text"], row["label"]) for row in csv.DictReader(f, delimiter="\t")]


def test_drug_names_use_characters_written_nowhere_else():
    names = domain_corpus.drugs()
    characters = [char for kind in names.values() for name in kind for char in name]
    assert len(characters) == len(set(characters)) == 2 * domain_corpus.DRUGS_PER_KIND * len(domain_corpus.KINDS)
    general = "".join(domain_corpus.general_sentences(3000))
    contexts = "".join(domain_corpus.NEUTRAL + domain_corpus.INTRODUCTIONS) + "".join(
        "".join(sentences) for sentences in domain_corpus.KINDS.values())
    assert not set(characters) & (set(general) | set(contexts))


def test_dev_and_test_name_drugs_the_domain_text_uses_and_training_never_names(corpus):
    splits = domain_corpus.split_drugs(domain_corpus.drugs())
    domain = open(corpus["domain"], encoding="utf-8").read()
    named = {split: {name for text, _ in rows(corpus[split]) for kind in splits[split].values() for name in kind
                     if name in text} for split in ("train", "dev", "test")}
    assert named["train"] and named["dev"] and named["test"]
    assert not named["train"] & (named["dev"] | named["test"]) and not named["dev"] & named["test"]
    assert all(name in domain for name in named["dev"] | named["test"])
    for split in ("train", "dev", "test"):  # each sentence's label is its drug's kind; the kinds balanced
        labelled = rows(corpus[split])
        kind_of = {name: kind for kind, kind_names in splits[split].items() for name in kind_names}
        assert all(kind_of[next(name for name in kind_of if name in text)] == label for text, label in labelled)
        counts = [label for _, label in labelled].count
        assert {counts(kind) for kind in domain_corpus.KINDS} == {len(labelled) // len(domain_corpus.KINDS)}


def test_corpus_is_deterministic_and_in_its_vocabulary(corpus, tmp_path):
    again = domain_corpus.write_corpus(str(tmp_path), quick=True)
    assert all(open(again[key], "rb").read() == open(corpus[key], "rb").read() for key in corpus)
    tokenizer = Tokenizer(corpus["vocab"])
    texts = [line for key in ("general", "domain", "held_out") for line in open(corpus[key], encoding="utf-8")
             if line.strip()] + [text for split in ("train", "dev", "test") for text, _ in rows(corpus[split])]
    ids, _ = tokenizer.encode_batch(texts)
    assert not any(tokenizer.token_to_id("[UNK]") in row for row in ids)
    documents = open(corpus["domain"], encoding="utf-8").read().strip().split("\n\n")
    assert len(documents) == domain_corpus.SIZES[True]["domain"] // 4
    assert all(len(document.split("\n")) == 4 for document in documents)


@pytest.mark.slow
def test_quick_benchmark_writes_both_arms_and_the_throughput(tmp_path):
    text = helpers.run_quick_benchmark("pretrain_domain.py", tmp_path)
    assert "<!-- pretrain-domain -->" in text and "<!-- /pretrain-domain -->" in text
    for arm in pretrain_domain.ARMS:
        row = re.search(rf"^\| {arm} \| .*$", text, re.M)
        assert row, arm
        cells = row.group(0).strip("| ").split(" | ")  # arm, loss, MLM accuracy, dev, test, per seed, stages
        assert 0 < float(cells[1]) < 20 and all(0 <= float(cells[i]) <= 1 for i in (2, 3, 4)), cells
        assert (cells[6] == "none") == (arm == "general") and re.fullmatch(r"\d+ steps, \d+ s", cells[7]), cells
    rates = re.search(r"pretraining step ([\d,]+) tokens/s, fine-tuning step ([\d,]+) tokens/s", text)
    share = re.search(r"\*\*([\d.]+) %\*\* of it", text)
    assert rates and all(int(rate.replace(",", "")) > 0 for rate in rates.groups()), text
    assert share and 0 < float(share.group(1)) < 100, text
