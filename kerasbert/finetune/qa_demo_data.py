"""The qa demo's data: generated Chinese contexts of a few sentences about people, places and organizations, and
questions whose answer is a span of them (``谁在杭州工作？`` -> ``张伟``, ``张伟在哪里工作？`` -> ``杭州``).

Each context holds two to `MOST_FACTS` facts, each of its own kind (`FACTS`) and about its own person, place and
organization, so every question has one answer. Written as qa JSONL (`kerasbert.text.qa_data`) with a character
vocabulary, deterministic from the seed.

Example:
>>> example = qa_examples(1, seed=3)[0]
>>> example["context"][example["answers"][0]["answer_start"]:].startswith(example["answers"][0]["text"])
True
"""

from __future__ import annotations

import json
import random
import re

from kerasbert.finetune.demo_data import (
    GIVEN,
    LOCATIONS,
    ORGANIZATIONS,
    SPECIAL_TOKENS,
    SURNAMES,
    TYPABLE,
    _person,
    write_splits,
)

__all__ = ["FACTS", "qa_examples", "write_qa_data"]

# (a fact, then its questions: (question, the slot that answers it))
FACTS = (
    ("{PER}在{LOC}工作", (("{PER}在哪里工作？", "LOC"), ("谁在{LOC}工作？", "PER"))),
    ("{PER}毕业于{ORG}", (("{PER}毕业于哪里？", "ORG"), ("谁毕业于{ORG}？", "PER"))),
    ("{ORG}位于{LOC}", (("{ORG}位于哪里？", "LOC"), ("哪家机构位于{LOC}？", "ORG"))),
    ("{PER}是{LOC}人", (("{PER}是哪里人？", "LOC"), ("谁是{LOC}人？", "PER"))),
    ("{PER}去年加入了{ORG}", (("{PER}去年加入了哪里？", "ORG"), ("谁去年加入了{ORG}？", "PER"))),
)
MOST_FACTS = 3


def _fill(template: str, names: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: names[match.group(1)], template)


def _example(rng: random.Random) -> dict:
    """One context of facts about distinct names, and a question on one of them."""
    facts = rng.sample(FACTS, rng.randint(2, MOST_FACTS))
    people, places, orgs = set(), set(), set()
    for _ in facts:  # each fact its own person, place and organization: one answer a question
        for pool, draw in ((people, lambda: _person(rng)), (places, lambda: rng.choice(LOCATIONS)),
                           (orgs, lambda: rng.choice(ORGANIZATIONS))):
            value = draw()
            while value in pool:
                value = draw()
            pool.add(value)
    return _context(rng, facts, people, places, orgs)


def _context(rng: random.Random, facts, people: set, places: set, orgs: set) -> dict:
    """The context of ``facts`` filled with the names (each used once), and a question on one fact."""
    pools = {"PER": sorted(people), "LOC": sorted(places), "ORG": sorted(orgs)}
    for pool in pools.values():
        rng.shuffle(pool)
    sentences, filled = [], []
    for k, (fact, _) in enumerate(facts):
        names = {kind: pool[k] for kind, pool in pools.items()}
        sentences.append(_fill(fact, names))
        filled.append(names)
    context = "。".join(sentences) + "。"
    k = rng.randrange(len(facts))
    question, slot = rng.choice(facts[k][1])
    answer = filled[k][slot]
    before = facts[k][0][:facts[k][0].index("{" + slot + "}")]  # the fact's text before the answer's slot
    start = len("。".join(sentences[:k])) + (1 if k else 0) + len(_fill(before, filled[k]))
    return {"question": _fill(question, filled[k]), "context": context,
            "answers": [{"text": answer, "answer_start": start}]}


def qa_examples(n: int = 600, seed: int = 0) -> list[dict]:
    """``n`` qa JSONL rows ``{"question", "context", "answers": [{"text", "answer_start"}]}``.

    Example:
    >>> row = qa_examples(1, seed=0)[0]
    >>> sorted(row), len(row["answers"])
    (['answers', 'context', 'question'], 1)
    """
    rng = random.Random(seed)
    return [_example(rng) for _ in range(n)]


def write_qa_data(folder: str, seed: int = 0, n_train: int = 1200, n_dev: int = 100, n_test: int = 100) -> dict:
    """Write `qa_examples` splits as ``{train,dev,test}.jsonl`` and their character ``vocab.txt`` into ``folder``;
    returns ``train``, ``dev``, ``test`` and ``vocab`` to the paths.

    Example:
    >>> import tempfile
    >>> sorted(write_qa_data(tempfile.mkdtemp(), n_train=4, n_dev=2, n_test=2))
    ['dev', 'test', 'train', 'vocab']
    """
    def lines(size: int, split_seed: int):
        return (json.dumps(row, ensure_ascii=False) + "\n" for row in qa_examples(size, split_seed))

    words = (*SURNAMES, *GIVEN, *LOCATIONS, *ORGANIZATIONS, *(fact for fact, _ in FACTS),
             *(question for _, questions in FACTS for question, _ in questions))
    characters = sorted({char for word in words for char in re.sub(r"\{\w+\}", "", word)} | {"。"})
    vocab = [*SPECIAL_TOKENS, *characters, *(char for char in TYPABLE if char not in characters)]
    return write_splits(folder, seed, (n_train, n_dev, n_test), lines, ".jsonl", vocab)
