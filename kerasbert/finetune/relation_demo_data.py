"""The relation demo's data: Chinese sentences about people, organizations and places with their (subject,
predicate, object) triples, generated from a seed, as DuIE-style JSONL with character offsets.

Four predicates: ``出生地`` (a person's birthplace), ``工作单位`` (a person's employer), ``位于`` (where an
organization is) and ``毕业院校`` (a person's university). Some sentences hold two triples that share an entity, some
name people and places with no triple between them (``张伟去了北京``), so the model must read the words between the
entities, not their kinds alone. The entities come from `kerasbert.finetune.demo_data`'s word lists.

Example:
>>> text, triples = relation_examples(1, seed=3)[0]
>>> all(text[spo["subject_start"]:].startswith(spo["subject"]) for spo in triples)
True
"""

from __future__ import annotations

import json
import random
import re

from kerasbert.finetune.demo_data import (
    LOCATIONS,
    NAMED_ORGANIZATIONS,
    ORG_KINDS,
    SPECIAL_TOKENS,
    TIMES,
    TYPABLE,
    _person,
    write_splits,
)

__all__ = ["PREDICATES", "RELATION_TEMPLATES", "relation_examples", "write_relation_data"]

PREDICATES = ("出生地", "工作单位", "位于", "毕业院校")
UNIVERSITIES = ("清华大学", "北京大学", "复旦大学", "浙江大学", "南京大学", "武汉大学")
# (template, its triples as (subject slot, predicate, object slot)); a slot's kind is its name without digits
RELATION_TEMPLATES = (
    ("{PER}出生于{LOC}", (("PER", "出生地", "LOC"),)),
    ("{PER}是在{LOC}出生的", (("PER", "出生地", "LOC"),)),
    ("{PER}在{ORG}工作", (("PER", "工作单位", "ORG"),)),
    ("{PER}去年加入了{ORG}", (("PER", "工作单位", "ORG"),)),
    ("{ORG}位于{LOC}", (("ORG", "位于", "LOC"),)),
    ("{ORG}的总部在{LOC}", (("ORG", "位于", "LOC"),)),
    ("{PER}毕业于{UNI}", (("PER", "毕业院校", "UNI"),)),
    ("{PER}出生于{LOC}，后来在{ORG}工作", (("PER", "出生地", "LOC"), ("PER", "工作单位", "ORG"))),
    ("{PER}和{PER2}都在{ORG}工作", (("PER", "工作单位", "ORG"), ("PER2", "工作单位", "ORG"))),
    ("{ORG}位于{LOC}，{PER}在那里工作", (("ORG", "位于", "LOC"), ("PER", "工作单位", "ORG"))),
    ("{PER}毕业于{UNI}，现在在{ORG}工作", (("PER", "毕业院校", "UNI"), ("PER", "工作单位", "ORG"))),
    ("{PER}{TIME}去了{LOC}", ()),
    ("{PER}给{PER2}打了电话", ()),
    ("{TIME}{PER}在{UNI}开会", ()),
    ("{ORG}{TIME}发布了新消息", ()),
    ("{TIME}大家都在家休息", ()),
)


def _fill(rng: random.Random, kind: str) -> str:
    """One entity of ``kind``: a person, a city, an organization (named after a city, or a named one) or a
    university."""
    if kind == "PER":
        return _person(rng)
    if kind == "ORG":
        return rng.choice(LOCATIONS) + rng.choice(ORG_KINDS) if rng.random() < 0.5 else rng.choice(NAMED_ORGANIZATIONS)
    return rng.choice({"LOC": LOCATIONS, "UNI": UNIVERSITIES, "TIME": TIMES}[kind])


def _sentence(rng: random.Random, template: str, relations: tuple) -> tuple[str, list[dict]]:
    """``template`` filled, and its triples with their entities' character offsets."""
    text, where = "", {}
    for i, piece in enumerate(re.split(r"\{(\w+)\}", template)):
        if i % 2:  # odd pieces are slot names
            value = _fill(rng, piece.rstrip("0123456789"))
            where[piece] = (value, len(text))
            text += value
        else:
            text += piece
    triples = [{"subject": where[s][0], "subject_start": where[s][1], "predicate": predicate,
                "object": where[o][0], "object_start": where[o][1]} for s, predicate, o in relations]
    return text, triples


def relation_examples(n: int = 600, seed: int = 0) -> list[tuple[str, list[dict]]]:
    """Generate ``n`` sentences of `RELATION_TEMPLATES` (uniformly) with their triples.

    Args:
        n: int. how many sentences.
        seed: int. the random seed; the same seed gives the same sentences.

    Returns:
        list of ``(text, spo_list)``, each spo ``{"subject", "subject_start", "predicate", "object",
        "object_start"}``.

    Example:
    >>> relation_examples(1, seed=1)
    [('清华大学位于西安', [{'subject': '清华大学', 'subject_start': 0, 'predicate': '位于', 'object': '西安', \
'object_start': 6}])]
    """
    rng = random.Random(seed)
    return [_sentence(rng, *rng.choice(RELATION_TEMPLATES)) for _ in range(n)]


def relation_vocabulary() -> list[str]:
    """The special tokens, every character the sentences can hold (sorted) and the typable ones."""
    from kerasbert.finetune.demo_data import GIVEN, SURNAMES

    words = (*SURNAMES, *GIVEN, *LOCATIONS, *ORG_KINDS, *NAMED_ORGANIZATIONS, *UNIVERSITIES, *TIMES,
             *(template for template, _ in RELATION_TEMPLATES))
    characters = sorted({char for word in words for char in re.sub(r"\{\w+\}", "", word)})
    return [*SPECIAL_TOKENS, *characters, *(char for char in TYPABLE if char not in characters)]


def write_relation_data(folder: str, seed: int = 0, n_train: int = 600, n_dev: int = 150,
                        n_test: int = 150) -> dict[str, str]:
    """Write `relation_examples` splits as DuIE-style JSONL (``{"text", "spo_list"}``, ``{train,dev,test}.jsonl``)
    and their ``vocab.txt`` into ``folder``; returns ``train``, ``dev``, ``test`` and ``vocab`` to the paths.

    Example:
    >>> import tempfile
    >>> paths = write_relation_data(tempfile.mkdtemp(), n_train=4, n_dev=2, n_test=2)
    >>> sorted(paths)
    ['dev', 'test', 'train', 'vocab']
    """
    def lines(size: int, split_seed: int):
        return (json.dumps({"text": text, "spo_list": spo_list}, ensure_ascii=False) + "\n"
                for text, spo_list in relation_examples(size, split_seed))

    return write_splits(folder, seed, (n_train, n_dev, n_test), lines, ".jsonl", relation_vocabulary())
