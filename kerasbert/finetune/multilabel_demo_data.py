"""The ``multilabel`` demo's data: generated Chinese restaurant reviews tagged with the aspects they talk about.

A review is a few clauses joined by "，": one for each of its aspects (an aspect word, maybe an adverb, an opinion),
in any order, and maybe a clause that names none (`kerasbert.finetune.demo_data.TAILS` without an aspect word) or an
opener. Its tags are exactly the aspects whose words it holds (`ASPECTS`): ``服务``, ``价格``, ``环境``, ``味道``; a
review of no aspect has none. Deterministic from a seed, as the other demos (`kerasbert.finetune.demo_data`).
"""

from __future__ import annotations

import json
import random

from kerasbert.finetune.demo_data import ADVERBS, OPENERS, SPECIAL_TOKENS, TAILS, TYPABLE, write_splits

__all__ = ["ASPECTS", "review_examples", "write_multilabel_data"]

# each tag and the words that name its aspect: a review holds one of them exactly where it has the tag
ASPECTS = {"服务": ("服务", "服务员"), "价格": ("价格", "价钱"), "环境": ("环境", "装修"), "味道": ("味道", "口味")}
OPINIONS = ("不错", "好", "一般", "太差", "满意", "让人失望", "还行", "差", "没得说", "令人惊喜")
ASPECT_COUNTS = (0, 1, 1, 1, 2, 2, 2, 3, 3, 4)  # how many aspects a review talks about, drawn uniformly
NEUTRAL = tuple(tail for tail in TAILS if not any(word in tail for words in ASPECTS.values() for word in words))


def _review(rng: random.Random) -> tuple[str, list[str]]:
    """One review and its tags, in the order of `ASPECTS`."""
    tags = sorted(rng.sample(list(ASPECTS), rng.choice(ASPECT_COUNTS)), key=list(ASPECTS).index)
    clauses = [rng.choice(ASPECTS[tag]) + rng.choice(OPINIONS) for tag in tags] or [rng.choice(NEUTRAL)]
    rng.shuffle(clauses)
    return "，".join(clauses), tags


def review_examples(n: int = 600, seed: int = 0) -> list[tuple[str, list[str]]]:
    """``n`` generated reviews with their aspect tags.

    Example:
    >>> text, tags = review_examples(1, seed=4)[0]
    >>> all(any(word in text for word in ASPECTS[tag]) for tag in tags)
    True
    """
    rng = random.Random(seed)
    return [_review(rng) for _ in range(n)]


def write_multilabel_data(folder: str, seed: int = 0, n_train: int = 600, n_dev: int = 150,
                          n_test: int = 150) -> dict[str, str]:
    """Write `review_examples` splits as multilabel JSONL (``{"text", "labels": [...]}``, ``{train,dev,test}.jsonl``)
    and their character ``vocab.txt`` into ``folder``; returns ``train``, ``dev``, ``test`` and ``vocab`` to the
    paths.

    Example:
    >>> import tempfile
    >>> paths = write_multilabel_data(tempfile.mkdtemp(), n_train=4, n_dev=2, n_test=2)
    >>> sorted(paths)
    ['dev', 'test', 'train', 'vocab']
    """

    def lines(size: int, split_seed: int):
        return (json.dumps({"text": text, "labels": tags}, ensure_ascii=False) + "\n"
                for text, tags in review_examples(size, split_seed))

    words = (*(word for words in ASPECTS.values() for word in words), *ADVERBS, *OPINIONS, *NEUTRAL, *OPENERS, "，")
    characters = sorted({char for word in words for char in word})
    vocab = [*SPECIAL_TOKENS, *characters, *(char for char in TYPABLE if char not in characters)]
    return write_splits(folder, seed, (n_train, n_dev, n_test), lines, ".jsonl", vocab)
