"""Demo data generator: determinism, learnable labels, valid BIO tags, files the readers accept, vocabulary."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from kerasbert.finetune import demo_data
from kerasbert.finetune.demo_data import ner_examples, sentiment_examples, write_demo_data
from kerasbert.text.ner_readers import read_conll
from kerasbert.text.readers import read_classification
from kerasbert.text.schemes import tags_to_spans

SIZES = {"n_train": 120, "n_dev": 30, "n_test": 30}
POLARITY = {**{word: "pos" for word in demo_data.POSITIVE}, **{word: "neg" for word in demo_data.NEGATIVE}}


def sentiment_words(text: str) -> list[str]:
    """The sentiment words in ``text``, longest match first at each position (so 不满意 is not read as 满意)."""
    found, i = [], 0
    while i < len(text):
        word = max((w for w in POLARITY if text.startswith(w, i)), key=len, default="")
        if word:
            found.append(word)
        i += max(len(word), 1)
    return found


def file_bytes(paths: dict[str, str]) -> dict[str, bytes]:
    with_bytes = {}
    for key, path in paths.items():
        with open(path, "rb") as handle:
            with_bytes[key] = handle.read()
    return with_bytes


def test_same_seed_same_bytes_and_other_seed_differs(tmp_path):
    first = file_bytes(write_demo_data(str(tmp_path / "a"), seed=3, **SIZES))
    again = file_bytes(write_demo_data(str(tmp_path / "b"), seed=3, **SIZES))
    other = file_bytes(write_demo_data(str(tmp_path / "c"), seed=4, **SIZES))
    assert first == again
    assert all(first[key] != other[key] for key in first if key != "vocab")
    assert sentiment_examples(50, seed=1) == sentiment_examples(50, seed=1) != sentiment_examples(50, seed=2)
    assert ner_examples(50, seed=1) == ner_examples(50, seed=1) != ner_examples(50, seed=2)


@pytest.mark.parametrize("n", [600, 151, 40])
def test_sentiment_labels_are_balanced(n):
    counts = Counter(label for _, label in sentiment_examples(n, seed=5))
    assert set(counts) == {"pos", "neg"}
    assert 0.45 <= counts["pos"] / n <= 0.55


def test_sentiment_label_follows_its_sentiment_word():
    for text, label in sentiment_examples(600, seed=0):
        words = sentiment_words(text)
        assert len(words) == 1, (text, words)
        assert POLARITY[words[0]] == label, (text, label)
        assert 8 <= len(text) <= 30, text


def test_sentiment_words_are_read_by_longest_match():
    assert sentiment_words("服务很不满意") == ["不满意"]
    assert sentiment_words("服务很满意，价格一般") == ["满意"]


@pytest.mark.parametrize("sentences", [1, 6])
def test_ner_tags_are_bio_and_entities_come_from_the_lists(sentences):
    surfaces = {"LOC": set(demo_data.LOCATIONS), "ORG": set(demo_data.ORGANIZATIONS)}
    types = Counter()
    texts = ner_examples(600, seed=0, sentences=sentences)
    assert set(Counter(chars.count("。") + 1 for chars, _ in texts)) == set(range(1, sentences + 1))  # each drawn
    for chars, tags in texts:
        assert len(chars) == len(tags) and all(len(char) == 1 for char in chars)
        assert all(tag == "O" for char, tag in zip(chars, tags, strict=True) if char == "。")  # between sentences
        assert all(tag == "O" or tag[:2] in ("B-", "I-") and tag[2:] in demo_data.ENTITY_TYPES for tag in tags)
        for i, tag in enumerate(tags):
            if tag.startswith("I-"):
                assert i > 0 and tags[i - 1][2:] == tag[2:], (chars, tags)
        for start, end, label in tags_to_spans(tags, strict=True):
            surface = "".join(chars[start:end])
            types[label] += 1
            if label == "PER":
                assert surface[0] in demo_data.SURNAMES and 2 <= len(surface) <= 3, surface
                assert all(char in demo_data.GIVEN for char in surface[1:]), surface
            else:
                assert surface in surfaces[label], (surface, label)
    assert set(types) == set(demo_data.ENTITY_TYPES)


def test_files_read_back_with_the_readers(tmp_path):
    paths = write_demo_data(str(tmp_path / "demo"), seed=0, **SIZES)
    assert sorted(paths) == ["cls_dev", "cls_test", "cls_train", "ner_dev", "ner_test", "ner_train", "vocab"]
    for split, n in zip(("train", "dev", "test"), SIZES.values(), strict=True):
        rows = read_classification(paths[f"cls_{split}"])
        assert len(rows) == n and {row.label for row in rows} == {"pos", "neg"}
        sentences = read_conll(paths[f"ner_{split}"], strict=True)
        assert len(sentences) == n
        assert all(example.text == "".join(example.tokens) for example in sentences)
    train = read_conll(paths["ner_train"])
    assert {label for example in train for _, label in example.entities()} == {"PER", "LOC", "ORG"}


def test_splits_are_separate_draws(tmp_path):
    paths = write_demo_data(str(tmp_path), seed=0, **SIZES)
    train = {example.text for example in read_conll(paths["ner_train"]) if example.spans}
    test = [example.text for example in read_conll(paths["ner_test"]) if example.spans]
    assert sum(text in train for text in test) < 0.1 * len(test)
    cls_train = {row.text for row in read_classification(paths["cls_train"])}
    assert sum(row.text in cls_train for row in read_classification(paths["cls_test"])) < 0.1 * SIZES["n_test"]


def test_vocab_has_special_tokens_first_and_every_character(tmp_path):
    paths = write_demo_data(str(tmp_path), seed=1, **SIZES)
    with open(paths["vocab"], encoding="utf-8") as handle:
        vocab = handle.read().splitlines()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(vocab) == len(set(vocab))
    seen = set()
    for split in ("train", "dev", "test"):
        seen.update(char for row in read_classification(paths[f"cls_{split}"]) for char in row.text)
        seen.update(char for example in read_conll(paths[f"ner_{split}"]) for char in example.tokens)
    assert seen <= set(vocab)
    assert set("0123456789abcz，。！？,.!?") <= set(vocab)
    assert os.path.isfile(os.path.join(str(tmp_path), "cls", "dev.tsv"))


@pytest.mark.slow  # imports TensorFlow (the tasks' encoders)
def test_every_demo_task_has_data_that_fits_the_demos_maxlen(tmp_path):
    from kerasbert.cli import build_parser
    from kerasbert.finetune.demo import DEMO_COMMANDS, DEMO_TEXTS, demo_files
    from kerasbert.finetune.demo_data import DEMO_OPTIONS, DEMO_TRAINING
    from kerasbert.finetune.tasks import get_task
    from kerasbert.text.tokenizer import Tokenizer

    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    offered = next(action.choices for action in demo._actions if action.dest == "task")
    assert list(offered) == [*DEMO_TEXTS, *DEMO_COMMANDS, "all"]  # mlm has no bundled data: not offered
    for name in DEMO_TEXTS:
        files = demo_files(name, str(tmp_path), seed=0)
        task = get_task(name, **{key: value for key, value in DEMO_OPTIONS.get(name, {}).items()
                                 if key in ("target_maxlen", "stride")})  # ner, span: windows, none cut
        tokenizer = Tokenizer(files["vocab"])
        for split in ("train", "dev", "test"):
            examples = task.read(files[split])
            labels = task.label_set(examples)
            encoded = task.encode(tokenizer, examples, labels, DEMO_TRAINING["maxlen"], files[split])
            assert (name, split, encoded.truncated) == (name, split, 0)
            prompts = task.encode(tokenizer, examples, None, DEMO_TRAINING["maxlen"], files[split])
            assert (name, split, prompts.truncated) == (name, split, 0)


def test_ner_texts_of_several_sentences_are_single_sentences_joined():
    texts = ner_examples(300, seed=4, sentences=demo_data.DEMO_SENTENCES["ner"])
    assert sum(len(chars) > demo_data.DEMO_TRAINING["maxlen"] - 2 for chars, _ in texts) > 20  # texts for windows
    for chars, tags in texts:
        parts = "".join(chars).split("。")
        starts = [sum(len(part) + 1 for part in parts[:k]) for k in range(len(parts))]
        for part, start in zip(parts, starts, strict=True):  # each sentence tagged as it would be alone
            assert tags_to_spans(tags[start:start + len(part)], strict=True) == [
                (a - start, b - start, label) for a, b, label in tags_to_spans(tags) if start <= a < start + len(part)]


def test_span_texts_of_several_sentences_keep_each_entity_where_it_is():
    texts = demo_data.span_examples(300, seed=4, sentences=8)
    counts = Counter(text.count("。") + 1 for text, _ in texts)
    assert set(counts) == set(range(1, 9))  # 1 to 8 sentences, each count drawn
    assert sum(len(text) > demo_data.DEMO_TRAINING["maxlen"] - 2 for text, _ in texts) > 50  # texts for windows
    organizations = {*demo_data.NAMED_ORGANIZATIONS, *(city + kind for city in demo_data.LOCATIONS
                                                      for kind in demo_data.ORG_KINDS)}
    for text, spans in texts:
        for start, end, label in spans:
            name = text[start:end]
            assert "。" not in name
            assert {"PER": name[0] in demo_data.SURNAMES and len(name) <= 3, "LOC": name in demo_data.LOCATIONS,
                    "ORG": name in organizations}[label], (text, name, label)
