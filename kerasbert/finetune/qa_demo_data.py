"""The qa demo's data: generated Chinese contexts of a few sentences about people, places and organizations, and
questions whose answer is a span of them (``谁在杭州工作？`` -> ``张伟``, ``张伟在哪里工作？`` -> ``杭州``).

Each context holds two to `MOST_FACTS` facts, each of its own kind (`FACTS`) and about its own person, place and
organization, so every question has one answer. Every fact holds a name of the kind the question asks for, and the
names of one kind in a context are of one length, so that only the question's words (its relation and its name) tell
which fact it is about. Written as qa JSONL (`kerasbert.text.qa_data`) with a character vocabulary, deterministic
from the seed.

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
KINDS = ("PER", "LOC", "ORG")


def _fill(template: str, names: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda match: names[match.group(1)], template)


def _names(rng: random.Random, kind: str, n: int) -> list[str]:
    """``n`` distinct names of ``kind``, all of one length: a name's length must not tell which fact a question
    is about (a question on a three-character name would otherwise find its fact by length alone)."""
    if kind == "PER":
        given, names = rng.randint(1, 2), []
        while len(names) < n:
            name = rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(given))
            names += [name] if name not in names else []
        return names
    pool = LOCATIONS if kind == "LOC" else ORGANIZATIONS
    first = rng.choice([name for name in pool if sum(len(other) == len(name) for other in pool) >= n])
    return [first, *rng.sample([name for name in pool if len(name) == len(first) and name != first], n - 1)]


def _example(rng: random.Random) -> dict:
    """A question on one fact, among facts that each hold a name of the kind it asks for: the kind of the answer
    never tells the fact, only the question's words do."""
    asked = rng.choice(FACTS)
    question, slot = rng.choice(asked[1])
    others = [fact for fact in FACTS if fact is not asked and "{" + slot + "}" in fact[0]]
    facts = [asked, *rng.sample(others, rng.randint(2, MOST_FACTS) - 1)]
    rng.shuffle(facts)
    names = {kind: _names(rng, kind, len(facts)) for kind in KINDS}  # each fact its own: one answer a question
    filled = [{kind: names[kind][k] for kind in KINDS} for k in range(len(facts))]
    return _context(facts, filled, facts.index(asked), question, slot)


def _context(facts, filled: list[dict], k: int, question: str, slot: str) -> dict:
    """The qa row of ``facts`` filled with ``filled`` and ``question`` on fact ``k``, answered by its ``slot``."""
    sentences = [_fill(fact, names) for (fact, _), names in zip(facts, filled, strict=True)]
    context = "。".join(sentences) + "。"
    before = facts[k][0][:facts[k][0].index("{" + slot + "}")]  # the fact's text before the answer's slot
    start = len("。".join(sentences[:k])) + (1 if k else 0) + len(_fill(before, filled[k]))
    return {"question": _fill(question, filled[k]), "context": context,
            "answers": [{"text": filled[k][slot], "answer_start": start}]}


def qa_examples(n: int = 600, seed: int = 0) -> list[dict]:
    """``n`` qa JSONL rows ``{"question", "context", "answers": [{"text", "answer_start"}]}``.

    Example:
    >>> row = qa_examples(1, seed=0)[0]
    >>> sorted(row), len(row["answers"])
    (['answers', 'context', 'question'], 1)
    """
    rng = random.Random(seed)
    return [_example(rng) for _ in range(n)]


def write_qa_data(folder: str, seed: int = 0, n_train: int = 4800, n_dev: int = 100, n_test: int = 100) -> dict:
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
