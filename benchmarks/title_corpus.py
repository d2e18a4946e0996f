"""A generated Chinese title corpus (news paragraph -> title) for `seq2seq_recipe.py`.

Built on the demo's title data (`kerasbert.finetune.demo_data`: its four news templates, its details, events
and times, its vocabulary function) and on `ner_corpus`'s word lists (surnames, given names, cities, brands,
organisation suffixes, products, topics), with what makes it harder than the demo's:

- fourteen news templates, each a first sentence and the title that restates its who, what and where in fewer
  words (some titles name two people or two organisations, or reword the sentence: ``离开 ... 正式加入`` ->
  ``离开 ... 加入``);
- the news sentence is not always first: one paragraph in three opens with a detail, and details may name
  other people, organisations and places, which the title must leave out;
- unseen names at test time: a fixed quarter of the person, organisation and place names (by a checksum of
  the name) appears only in dev and test, so a model has to copy names from the paragraph, not remember them.
  Their characters all occur in training, in other names: a title can only be written from characters the
  model has learnt to write.

Writes ``{train,dev,test}.jsonl`` (``{"source", "target"}`` a line, as `kerasbert train --task seq2seq` reads)
and ``vocab.txt``. Deterministic: the same seed gives the same bytes.
"""

from __future__ import annotations

import json
import os
import random
import zlib

from ner_corpus import BRANDS, CITIES, FILLERS, GIVEN, ORG_SUFFIXES, PRODUCTS, SURNAMES, TIME_FORMS, TOPICS

from kerasbert.finetune import demo_data

TEMPLATES = (*demo_data.NEWS_TEMPLATES,  # (first sentence, title); slots below
             ("{ORG}{TIME}在{LOC}发布了新款{P}", "{ORG}发布新款{P}"),
             ("{TIME}，{PER}当选为{ORG}的新任{R}", "{PER}当选{ORG}{R}"),
             ("{LOC}的{ORG}{TIME}宣布与{ORG2}达成合作", "{ORG}与{ORG2}达成合作"),
             ("{PER}在{LOC}举行的{E}上获得了{A}", "{PER}获{E}{A}"),
             ("{ORG}的{PER}{TIME}接受采访时表示{T}", "{PER}：{T}"),
             ("据{ORG}消息，{LOC}将于{TIME}举行{E}", "{LOC}将举行{E}"),
             ("{TIME}，{PER}离开{ORG}，正式加入{ORG2}", "{PER}离开{ORG}加入{ORG2}"),
             ("{TIME}{LOC}发生了{X}，{ORG}已派人处理", "{LOC}发生{X}"),
             ("{ORG}{TIME}公布年度报告，称{T}", "{ORG}称{T}"),
             ("{PER}和{PER2}{TIME}在{LOC}共同出席了{E}", "{PER}{PER2}出席{LOC}{E}"))
ROLES = ("院长", "总经理", "董事长", "主任", "校长", "秘书长")
AWARDS = ("金奖", "一等奖", "冠军", "最佳新人奖", "银奖")
INCIDENTS = ("交通事故", "火灾", "大面积停电", "暴雨", "地震")
DETAILS = (*demo_data.NEWS_DETAILS, *FILLERS)
#: details that name someone else: the title leaves them out
DISTRACTORS = ("{PER}也到场表示祝贺", "{ORG}的代表也参加了", "{LOC}的市民也很关注", "此前{ORG}曾在{LOC}举办过类似活动",
               "{PER}对此没有回应")
HELD_OUT = 4  # one name in HELD_OUT is kept for dev and test


def held_out(name: str) -> bool:
    """Whether ``name`` is one of the names kept out of training (a checksum, the same on every machine).

    Example:
    >>> [held_out(name) for name in ("张伟", "杭州银行")]
    [False, False]
    """
    return zlib.crc32(name.encode("utf-8")) % HELD_OUT == 0


def _name(rng: random.Random, kind: str, unseen: bool) -> str:
    """A person, organisation or place name, drawn until it is held out (``unseen``) or not."""
    while True:
        if kind == "PER":
            name = rng.choice(SURNAMES[0]) + "".join(rng.choice(GIVEN[0]) for _ in range(rng.randint(1, 2)))
        elif kind == "ORG":
            name = rng.choice((*CITIES[0], *BRANDS[0])) + rng.choice(ORG_SUFFIXES)
        else:
            name = rng.choice(CITIES[0]) + rng.choice(("", "", "市", "新区"))
        if held_out(name) == unseen:
            return name


def _time(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(demo_data.TIMES)
    return rng.choice(TIME_FORMS).format(y=rng.randint(2008, 2025), m=rng.randint(1, 12), d=rng.randint(1, 28),
                                         w=rng.choice("一二三四五六日"))


def _values(rng: random.Random, unseen: bool) -> dict:
    """A value for every slot of the templates; the two people and two organisations differ."""
    people, orgs = set(), set()
    while len(people) < 2:
        people.add(_name(rng, "PER", unseen))
    while len(orgs) < 2:
        orgs.add(_name(rng, "ORG", unseen))
    (per, per2), (org, org2) = sorted(people, key=lambda _: rng.random()), sorted(orgs, key=lambda _: rng.random())
    return {"PER": per, "PER2": per2, "ORG": org, "ORG2": org2, "LOC": _name(rng, "LOC", unseen),
            "TIME": _time(rng), "E": rng.choice((*demo_data.EVENTS, "书展", "马拉松", "博览会")),
            "P": rng.choice(BRANDS[0]) + rng.choice(PRODUCTS), "R": rng.choice(ROLES), "A": rng.choice(AWARDS),
            "T": rng.choice(TOPICS), "X": rng.choice(INCIDENTS)}


def _detail(rng: random.Random, unseen: bool) -> str:
    if rng.random() < 0.3:
        return rng.choice(DISTRACTORS).format(**_values(rng, unseen))
    return rng.choice(DETAILS)


def example(rng: random.Random, unseen: bool = False) -> tuple[str, str]:
    """One ``(paragraph, title)``: the news sentence among one to four details, and its title."""
    first, title = rng.choice(TEMPLATES)
    values = _values(rng, unseen)
    details: list[str] = []
    count = rng.randint(1, 4)
    while len(details) < count:  # distinct details
        details = list(dict.fromkeys([*details, _detail(rng, unseen)]))
    before = 1 if rng.random() < 1 / 3 else 0
    sentences = [*details[:before], first.format(**values), *details[before:]]
    paragraph = sentences[0] + "".join(rng.choice("，，。") + sentence for sentence in sentences[1:]) + "。"
    return paragraph, title.format(**values)


def vocabulary() -> list[str]:
    """The demo's title vocabulary with every character this corpus adds, then ``##`` digits (years split into
    digits, not ``[UNK]``)."""
    extra = (*(part for template in TEMPLATES for part in template), *SURNAMES[0], *GIVEN[0], *CITIES[0],
             *BRANDS[0], *ORG_SUFFIXES, *PRODUCTS, *TIME_FORMS, *TOPICS, *ROLES, *AWARDS, *INCIDENTS, *DETAILS,
             *DISTRACTORS, "书展马拉松博览会市新区一二三四五六日", "0123456789")
    return demo_data.title_vocabulary(extra) + [f"##{digit}" for digit in "0123456789"]


def write_corpus(folder: str, n_train: int = 2000, n_dev: int = 200, n_test: int = 200, seed: int = 0) -> dict:
    """Write ``{train,dev,test}.jsonl`` and ``vocab.txt`` into ``folder``; returns their paths. Dev and test
    name only held-out people, organisations and places.

    Example:
    >>> import tempfile
    >>> paths = write_corpus(tempfile.mkdtemp(), n_train=5, n_dev=2, n_test=2)
    >>> sorted(paths)
    ['dev', 'test', 'train', 'vocab']
    """
    from kerasbert.files import write_text

    os.makedirs(folder, exist_ok=True)
    paths = {}
    for offset, (split, count) in enumerate((("train", n_train), ("dev", n_dev), ("test", n_test))):
        rng = random.Random(f"title-{seed}-{offset}")
        rows = [example(rng, unseen=split != "train") for _ in range(count)]
        paths[split] = os.path.join(folder, f"{split}.jsonl")
        write_text(paths[split], "".join(json.dumps({"source": source, "target": target}, ensure_ascii=False) + "\n"
                                         for source, target in rows))
    paths["vocab"] = os.path.join(folder, "vocab.txt")
    write_text(paths["vocab"], "".join(f"{token}\n" for token in vocabulary()))
    return paths
