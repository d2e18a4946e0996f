"""A generated Chinese NER corpus that is hard the way real text is, for `ner_recipe.py`.

Sentences of two to four clauses (about 25-80 characters, some past a maxlen of 64), six entity
types, and the situations that make real NER hard:

- nested-looking spans: an ``ORG``, ``EVENT`` or ``PRODUCT`` that starts with a city or a brand which
  elsewhere is a ``LOC`` or an ``ORG`` of its own (``杭州银行`` is one ``ORG``; ``杭州`` alone a ``LOC``);
- adjacent spans: ``ORG`` then ``PER`` with nothing between, lists of people, a ``LOC`` before an ``ORG``;
- unseen names at test time: dev and test draw people, cities and brands from pools that training never
  saw, so a model has to read the context, not remember names (and dev picks the epoch that does so best).

Tags are BMES, one character a line, as the People's Daily corpus is written. Deterministic: the same
seed gives the same bytes.
"""

from __future__ import annotations

import os
import random
import re

TYPES = ("PER", "LOC", "ORG", "TIME", "PRODUCT", "EVENT")
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# (seen in training, unseen until dev and test)
SURNAMES = ("张王李赵刘陈杨黄周吴徐孙马朱胡郭何林高罗郑梁谢宋唐许韩冯邓曹彭曾", "欧司诸葛尉迟闻宫")
GIVEN = ("伟芳娜敏静丽强磊军洋勇艳杰涛明超秀霞平刚华玲婷鹏浩宇欣晨博文斌建国红梅飞鑫辉波宁",
         "翊珩琬琰骞翀湛霏璟珞")
CITIES = (("北京", "上海", "广州", "深圳", "杭州", "南京", "成都", "武汉", "西安", "重庆", "天津", "苏州", "长沙",
           "郑州", "青岛", "大连", "厦门", "宁波", "济南", "合肥", "福州", "昆明", "沈阳", "哈尔滨", "无锡", "东莞"),
          ("襄阳", "绵阳", "赣州", "柳州", "潍坊", "漳州", "宜宾", "湛江"))
BRANDS = (("星河", "蓝海", "天成", "华信", "中科", "东方", "远航", "金鼎", "瑞丰", "安达", "宏图", "新元", "恒通",
           "万达"),
          ("翎越", "霁川", "澄岚", "曜石", "栖梧"))
ORG_SUFFIXES = ("银行", "大学", "医院", "科技", "集团", "研究所", "证券", "航空", "电视台", "出版社")
PRODUCTS = ("手机", "汽车", "平板", "耳机", "手表", "电视", "冰箱", "相机")
EVENTS = ("国际电影节", "马拉松", "车展", "博览会", "音乐节", "峰会", "运动会", "书展")
NUMERALS = "一二三四五六七八九十"
TIME_FORMS = ("{y}年{m}月", "{y}年{m}月{d}日", "去年{m}月", "今年{m}月", "上周{w}", "下周{w}上午", "{m}月{d}日晚上",
              "周{w}下午", "{y}年底", "{y}年春节")
CLAUSES = ("{PER}在{ORG}工作了{n}年", "{ORG}{PER}表示{TOPIC}", "{PER}、{PER}和{PER}一起去了{LOC}",
           "{TIME}{ORG}在{LOC}发布了{PRODUCT}", "{LOC}{ORG}的{PER}参加了{EVENT}", "{PER}毕业于{ORG}",
           "{EVENT}于{TIME}在{LOC}举行", "{PER}对记者说{PRODUCT}的销量不错", "据{ORG}消息{TOPIC}",
           "{PER}从{LOC}来到{LOC}", "{ORG}和{ORG}签署了合作协议", "{TIME}{PER}买了一台{PRODUCT}",
           "{PER}是{LOC}人", "{LOC}的{ORG}{TIME}宣布{TOPIC}", "来自{LOC}的{PER}获得了{EVENT}冠军",
           "{PER}{PER}夫妇{TIME}到{LOC}旅游")
FILLERS = ("天气越来越冷了", "大家都很关心这件事", "现场来了很多观众", "具体情况还在调查中", "价格比去年有所下降",
           "很多人在网上讨论", "这个消息让人意外", "会议持续了两个小时", "他们对结果很满意", "相关部门正在处理")
TOPICS = ("明年将扩大招聘", "新产品很快上市", "业绩好于预期", "项目进展顺利", "会加大研发投入", "服务还要改进")


def _pool(pools: tuple, unseen: bool):
    return pools[1] if unseen else pools[0]


def _person(rng: random.Random, unseen: bool) -> str:
    surnames, given = _pool(SURNAMES, unseen), _pool(GIVEN, unseen)
    surname = surnames[rng.randrange(len(surnames))]
    if unseen and rng.random() < 0.3:  # a two-character surname (欧阳, 诸葛, ...)
        surname += rng.choice("阳马葛迟")
    return surname + "".join(rng.choice(given) for _ in range(rng.randint(1, 2)))


def _time(rng: random.Random) -> str:
    return rng.choice(TIME_FORMS).format(y=rng.randint(2008, 2025), m=rng.randint(1, 12), d=rng.randint(1, 28),
                                         w=rng.choice("一二三四五六日"))


def _entity(rng: random.Random, kind: str, unseen: bool) -> str:
    city, brand = rng.choice(_pool(CITIES, unseen)), rng.choice(_pool(BRANDS, unseen))
    if kind == "PER":
        return _person(rng, unseen)
    if kind == "LOC":
        return city + rng.choice(("", "", "市", "新区"))
    if kind == "ORG":  # a city or a brand inside, nested-looking
        return rng.choice((city, brand, brand)) + rng.choice(ORG_SUFFIXES)
    if kind == "PRODUCT":
        return brand + rng.choice(PRODUCTS) + rng.choice(("", "", rng.choice(NUMERALS) + "代"))
    if kind == "EVENT":
        return rng.choice((city, f"{rng.randint(2010, 2025)}{city}", "")) + rng.choice(EVENTS)
    return _time(rng)


def _tags(kind: str, length: int) -> list[str]:
    if length == 1:
        return [f"S-{kind}"]
    return [f"B-{kind}"] + [f"M-{kind}"] * (length - 2) + [f"E-{kind}"]


def _clause(rng: random.Random, template: str, unseen: bool) -> tuple[str, list[str]]:
    text, tags = "", []
    for i, piece in enumerate(re.split(r"\{(\w+)\}", template)):
        if i % 2 == 0:
            surface, piece_tags = piece, ["O"] * len(piece)
        elif piece in TYPES:
            surface = _entity(rng, piece, unseen)
            piece_tags = _tags(piece, len(surface))
        else:  # n, TOPIC: plain words
            surface = str(rng.randint(2, 15)) if piece == "n" else rng.choice(TOPICS)
            piece_tags = ["O"] * len(surface)
        text += surface
        tags += piece_tags
    return text, tags


def sentence(rng: random.Random, unseen: bool = False) -> tuple[str, list[str]]:
    """One sentence of 2-4 clauses (one in five without an entity), and its BMES tag per character."""
    text, tags = "", []
    for index in range(rng.randint(2, 4)):
        template = rng.choice(CLAUSES) if rng.random() < 0.8 else rng.choice(FILLERS)
        part, part_tags = _clause(rng, template, unseen)
        if index:
            text, tags = text + "，", tags + ["O"]
        text, tags = text + part, tags + part_tags
    return text + "。", tags + ["O"]


def characters() -> str:
    """Every character any split can contain (the vocabulary's rows after the special tokens)."""
    parts = [*SURNAMES, *GIVEN, "阳马葛迟", *CITIES[0], *CITIES[1], *BRANDS[0], *BRANDS[1], *ORG_SUFFIXES, *PRODUCTS,
             *EVENTS, NUMERALS, "0123456789年月日周上下午晚底去今春节，。、市新区代", *CLAUSES, *FILLERS, *TOPICS]
    return "".join(sorted(set("".join(parts)) - set("{}" + "".join(TYPES) + "n")))


def write_corpus(folder: str, n_train: int = 4000, n_dev: int = 500, n_test: int = 1000, seed: int = 0) -> dict:
    """Write ``train.txt``, ``dev.txt``, ``test.txt`` (CoNLL, a character and its BMES tag a line) and
    ``vocab.txt`` into ``folder``; returns their paths. Dev and test names come from unseen pools.

    Example:
    >>> import tempfile
    >>> paths = write_corpus(tempfile.mkdtemp(), n_train=5, n_dev=2, n_test=2)
    >>> sorted(paths)
    ['dev', 'test', 'train', 'vocab']
    """
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for offset, (split, count) in enumerate((("train", n_train), ("dev", n_dev), ("test", n_test))):
        rng = random.Random(f"{seed}-{offset}")
        lines = []
        for _ in range(count):
            text, tags = sentence(rng, unseen=split != "train")
            lines += [f"{char} {tag}" for char, tag in zip(text, tags, strict=True)] + [""]
        paths[split] = _write(os.path.join(folder, f"{split}.txt"), "\n".join(lines) + "\n")
    digits = [f"##{d}" for d in "0123456789"]  # so that years and counts split into digits, not [UNK]
    paths["vocab"] = _write(os.path.join(folder, "vocab.txt"), "\n".join([*SPECIAL, *characters(), *digits]) + "\n")
    return paths


def _write(path: str, text: str) -> str:
    from kerasbert.files import write_text

    write_text(path, text)
    return path
