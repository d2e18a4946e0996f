"""A generated Chinese paraphrase corpus for sentence-pair similarity, offline and deterministic, as LCQMC pairs.

Each pair is two questions and a label: 1 when they ask the same thing, 0 when not. A question is an intent (a
route, the weather, a price, opening hours, an account chore, ...) with its slots filled (cities, a time, a
product, a place). A positive pair writes one meaning twice: two of the intent's wordings, synonyms drawn anew
(``怎么`` / ``如何`` / ``怎样``), a polite opening or a final particle or none. A negative pair is a hard one: the
second question keeps the first's words but changes its meaning, by one slot filled with another value, by two
slots swapped (from A to B against from B to A: the same characters), or by a neighbouring intent over the same
slots (opening against closing hours, a price against a quality), so counting shared characters cannot tell the
labels apart. Half the pairs are positive. The same seed gives the same bytes (a local ``random.Random``).

`write_paraphrase_data` writes ``{train,dev,test}.tsv`` (``text_a<TAB>text_b<TAB>label``, no header, as LCQMC)
and a character ``vocab.txt``; ``kerasbert demo --task sim`` trains on it.

Example:
>>> a, b, label = paraphrase_pairs(1, seed=4)[0]
>>> a != b, label in (0, 1)
(True, True)
"""

from __future__ import annotations

import random
import re

from kerasbert.finetune.demo_data import LOCATIONS, SPECIAL_TOKENS, write_splits

__all__ = ["INTENTS", "paraphrase_pairs", "paraphrase_vocabulary", "write_paraphrase_data"]

SLOTS = {  # slot kind -> its values
    "CITY": LOCATIONS[:14],
    "TIME": ("今天", "明天", "后天", "周末", "下周一", "晚上"),
    "ITEM": ("这款手机", "这台电脑", "这双鞋", "这件衣服", "这个耳机", "这本书", "这张门票", "这辆自行车"),
    "PLACE": ("图书馆", "银行", "超市", "博物馆", "医院", "健身房", "游泳馆", "邮局"),
    "ACT": ("注册", "注销", "修改", "找回", "绑定", "解绑"),
    "THING": ("账号", "密码", "手机号", "邮箱", "银行卡", "会员卡"),
}
SYNONYMS = {  # {NAME} in a wording -> words of the same meaning, drawn anew each time
    "HOW": ("怎么", "如何", "怎样"),
    "GOOD": ("怎么样", "如何", "好不好"),
    "WHAT": ("什么", "啥"),
    "COST": ("多少钱", "什么价格", "什么价钱"),
}
OPENINGS = ("", "", "请问", "我想问一下", "有人知道", "想知道")  # carry no meaning
ENDINGS = ("", "", "呢", "啊")

# intent -> (its slots (name: kind), its wordings); the wordings of one intent mean the same
INTENTS = {
    "route": ({"A": "CITY", "B": "CITY"},
              ("从{A}到{B}{HOW}走", "{A}到{B}{HOW}去", "{HOW}从{A}去{B}", "我在{A}，{HOW}去{B}",
               "去{B}的话，从{A}{HOW}走")),
    "weather": ({"C": "CITY", "T": "TIME"},
                ("{T}{C}的天气{GOOD}", "{C}{T}天气{GOOD}", "{T}{C}是{WHAT}天气", "{C}{T}的天气会{GOOD}")),
    "temperature": ({"C": "CITY", "T": "TIME"},
                    ("{T}{C}多少度", "{C}{T}的气温是多少", "{T}{C}有多热", "{C}{T}温度有多高")),
    "price": ({"P": "ITEM"}, ("{P}{COST}", "{P}的价格是多少", "买{P}要花多少钱", "{P}卖{COST}")),
    "quality": ({"P": "ITEM"}, ("{P}质量{GOOD}", "{P}的质量好吗", "{P}用起来{GOOD}", "{P}耐不耐用")),
    "open": ({"L": "PLACE"}, ("{L}几点开门", "{L}早上{WHAT}时候开门", "{L}每天几点开始营业", "{L}的开门时间是几点")),
    "close": ({"L": "PLACE"}, ("{L}几点关门", "{L}晚上{WHAT}时候关门", "{L}每天几点停止营业", "{L}的关门时间是几点")),
    "account": ({"V": "ACT", "N": "THING"},
                ("{HOW}{V}{N}", "{N}要{HOW}{V}", "{V}{N}的方法是{WHAT}", "想{V}{N}该{HOW}做", "{N}{HOW}{V}")),
}
NEIGHBOURS = {"weather": "temperature", "temperature": "weather", "price": "quality", "quality": "price",
              "open": "close", "close": "open"}  # intents over the same slots that mean something else


def _meaning(rng: random.Random, intent: str, pools: dict) -> dict[str, str]:
    """Values for the slots of ``intent`` from ``pools``; slots of one kind get different values (no route from A
    to A)."""
    slots, _ = INTENTS[intent]
    values: dict[str, str] = {}
    for name, kind in slots.items():
        values[name] = rng.choice([v for v in pools[kind] if v not in values.values()])
    return values


def _write(rng: random.Random, intent: str, values: dict[str, str], wording: str | None = None) -> str:
    """One question of ``intent`` with ``values``: a wording (``wording``, or drawn), synonyms, opening, ending."""
    wording = wording or rng.choice(INTENTS[intent][1])
    text = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1)) or rng.choice(SYNONYMS[m.group(1)]), wording)
    return rng.choice(OPENINGS) + text + rng.choice(ENDINGS) + "？"


def _changed(rng: random.Random, intent: str, values: dict[str, str], pools: dict) -> tuple[str, dict[str, str]]:
    """Another meaning close to ``(intent, values)``: one slot refilled, two slots swapped, or a neighbour intent."""
    slots, _ = INTENTS[intent]
    ways = ["refill"] + (["swap"] * 2 if len(set(slots.values())) < len(slots) else []) + (
        ["neighbour"] * 2 if intent in NEIGHBOURS else [])
    way = rng.choice(ways)
    if way == "neighbour":
        return NEIGHBOURS[intent], dict(values)
    if way == "swap":
        a, b = list(values)[:2]
        return intent, {**values, a: values[b], b: values[a]}
    name = rng.choice(list(slots))
    others = [v for v in pools[slots[name]] if v not in values.values()]
    return intent, {**values, name: rng.choice(others)}


def _pair(rng: random.Random, label: int, pools: dict) -> tuple[str, str, int]:
    """A pair of ``label``: the same meaning written twice (1), or a meaning and a close other one (0)."""
    intent = rng.choice(list(INTENTS))
    values = _meaning(rng, intent, pools)
    while True:
        if label:
            first, second = rng.sample(INTENTS[intent][1], 2)
            a, b = _write(rng, intent, values, first), _write(rng, intent, values, second)
        else:
            a, b = _write(rng, intent, values), _write(rng, *_changed(rng, intent, values, pools))
        if a != b:
            return (a, b, label) if rng.random() < 0.5 else (b, a, label)


def paraphrase_pairs(n: int = 1000, seed: int = 0, pools: dict | None = None) -> list[tuple[str, str, int]]:
    """Generate ``n`` question pairs, half positive (one more negative when ``n`` is odd), in shuffled order.

    Args:
        n: int. how many pairs.
        seed: int. the random seed; the same seed gives the same pairs.
        pools: dict | None. slot kind -> the values its slots take, for every kind of `SLOTS` (default `SLOTS`):
            other values, such as names kept out of a training split.

    Returns:
        list of ``(text_a, text_b, label)``, label 1 (the same question) or 0.

    Example:
    >>> pairs = paraphrase_pairs(10, seed=1)
    >>> len(pairs), sum(label for _, _, label in pairs)
    (10, 5)
    """
    rng = random.Random(seed)
    labels = [1] * (n // 2) + [0] * (n - n // 2)
    rng.shuffle(labels)
    return [_pair(rng, label, pools or SLOTS) for label in labels]


def paraphrase_vocabulary() -> list[str]:
    """The special tokens and every character `paraphrase_pairs` can write, sorted: the same for every seed.

    Example:
    >>> vocabulary = paraphrase_vocabulary()
    >>> vocabulary[:5], "北" in vocabulary and "？" in vocabulary
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
    """
    texts = [*(v for values in SLOTS.values() for v in values), *(w for words in SYNONYMS.values() for w in words),
             *OPENINGS, *ENDINGS, "？", *(wording for _, wordings in INTENTS.values() for wording in wordings)]
    characters = {char for text in texts for char in re.sub(r"\{\w+\}", "", text)}
    return list(SPECIAL_TOKENS) + sorted(characters)


def write_paraphrase_data(folder: str, seed: int = 0, n_train: int = 1000, n_dev: int = 200,
                          n_test: int = 200) -> dict[str, str]:
    """Write `paraphrase_pairs` splits as LCQMC-style TSV (``{train,dev,test}.tsv``: ``text_a<TAB>text_b<TAB>label``,
    no header) and their ``vocab.txt`` into ``folder`` (created if needed); each split drawn with its own seed,
    derived from ``seed``.

    Args:
        folder: str. where to write.
        seed: int. the random seed; the same seed writes the same bytes.
        n_train: int. pairs in the training split.
        n_dev: int. pairs in the dev split.
        n_test: int. pairs in the test split.

    Returns:
        dict from ``train``, ``dev``, ``test`` and ``vocab`` to the paths.

    Example:
    >>> import tempfile
    >>> paths = write_paraphrase_data(tempfile.mkdtemp(), n_train=4, n_dev=2, n_test=2)
    >>> sorted(paths), open(paths["dev"], encoding="utf-8").read().count("\\t")
    (['dev', 'test', 'train', 'vocab'], 4)
    """
    def lines(size: int, split_seed: int):
        return (f"{a}\t{b}\t{label}\n" for a, b, label in paraphrase_pairs(size, split_seed))

    return write_splits(folder, seed, (n_train, n_dev, n_test), lines, ".tsv", paraphrase_vocabulary())
