"""Small Chinese demo datasets, generated offline and deterministically from templates.

``kerasbert demo`` trains a tiny BERT from scratch on a CPU; it needs data that is small, free
of downloads, and learnable. This module builds it from word
lists and sentence templates with a local ``random.Random(seed)``, so the same seed always gives
the same bytes:

- sentiment: ``(text, label)`` pairs whose label (``pos``/``neg``) is fixed by the one sentiment
  word in the sentence; subjects, adverbs and neutral tails carry no sentiment.
- NER: ``(characters, BIO tags)`` with ``PER`` (surname + given name), ``LOC`` (cities and
  provinces) and ``ORG`` (universities, companies, banks, hospitals), and some sentences with none.
- titles: ``(paragraph, title)`` pairs for sequence to sequence, the title naming who did what where, as the
  paragraph's first sentence says it among others (:func:`title_examples`, :func:`write_title_data`).
- nested entities: texts whose organizations are mostly named after a city, the ``LOC`` inside the ``ORG``, for
  the span task (:func:`span_examples`, :func:`write_span_data`).

:func:`write_demo_data` writes both as files that :func:`kerasbert.text.readers.read_classification` and
:func:`kerasbert.text.ner_readers.read_conll` read, plus a character vocabulary for the tokenizer.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable

from kerasbert.files import write_text
from kerasbert.text.schemes import spans_to_tags

#: how ``kerasbert demo`` trains on this data (the tiny config from scratch); tests and the benchmark reuse it
DEMO_TRAINING = {"epochs": 8, "batch_size": 32, "lr": 2e-3, "maxlen": 64}  # maxlen: the tiny config's positions
DEMO_OPTIONS = {"seq2seq": {"target_maxlen": 16, "epochs": 30, "lr": 3e-3},  # a title needs longer to learn
                "ner": {"stride": 16, "batch_size": 16},  # texts of many windows tag best in more, smaller batches
                "span": {"stride": 16},
                "qa": {"epochs": 12, "lr": 3e-3},  # one start and one end a question: sparse targets, more epochs
                "multilabel": {"epochs": 20, "batch_size": 16},  # four keyword detectors take longer to form
                "relation": {"lr": 1e-2, "batch_size": 16},
                "rerank": {"lr": 4e-3}}  # a question's words read against a passage's: slow to start at 2e-3
# the most sentences of a demo text of the tasks read with ``--stride`` (texts of 1 to that many): many are longer than
# maxlen, so that windows of every position are learnt and a long text's windows are read well
DEMO_SENTENCES = {"ner": 6, "span": 8}
# a paragraph's room in word pieces (one a character): ``[CLS] paragraph [SEP]`` within maxlen - target_maxlen, so
# that no demo paragraph is cut, in training (with its title, at most 15 pieces) or in generation
TITLE_SOURCE_ROOM = DEMO_TRAINING["maxlen"] - DEMO_OPTIONS["seq2seq"]["target_maxlen"] - 2

SUBJECTS = ("这部电影", "这家餐厅", "服务", "这本书", "酒店的房间", "手机", "这款耳机", "快递", "这个景点", "老师的课",
            "这双鞋", "菜的味道", "前台的态度", "这台电脑", "这次旅行")
ADVERBS = ("非常", "很", "特别", "真的", "有点", "十分", "相当", "挺", "实在")
POSITIVE = ("好", "棒", "喜欢", "满意", "精彩", "值得推荐", "舒服", "好吃", "干净", "好看", "出色", "贴心", "划算")
NEGATIVE = ("差", "失望", "难吃", "糟糕", "后悔", "不满意", "脏", "无聊", "难看", "吵", "敷衍", "不值")
OPENERS = ("我觉得", "说实话", "总的来说", "老实讲", "大家都说")
TAILS = ("我们上周去的", "价格一般", "朋友带我来的", "周末人比较多", "排队等了半小时", "第二次来了", "位置在市中心",
         "是网上买的", "昨天刚到货", "用了三个月")

SURNAMES = ("张", "王", "李", "赵", "刘", "陈", "杨", "黄", "周", "吴", "徐", "孙", "马", "朱", "胡", "郭", "何", "林")
GIVEN = ("伟", "芳", "娜", "敏", "静", "丽", "强", "磊", "军", "洋", "勇", "艳", "杰", "涛", "明", "超", "秀", "霞",
         "平", "刚", "华", "玲", "婷", "鹏", "浩", "宇", "欣", "晨")
LOCATIONS = ("北京", "上海", "广州", "深圳", "杭州", "南京", "成都", "武汉", "西安", "重庆", "天津", "苏州", "长沙",
             "四川", "江苏", "浙江", "广东", "山东", "湖南", "云南")
ORGANIZATIONS = ("清华大学", "北京大学", "复旦大学", "浙江大学", "华为公司", "腾讯公司", "中国银行", "工商银行",
                 "人民医院", "协和医院", "中央电视台", "新华社", "中国移动", "小米公司")
TIMES = ("今天", "明天", "昨天", "周末", "上午", "晚上", "下周一", "前天", "春节", "中午", "月底", "假期")
ENTITY_TEMPLATES = ("{PER}在{LOC}工作", "{PER}去年加入了{ORG}", "{ORG}位于{LOC}", "我和{PER}昨天去了{LOC}",
                    "{PER}毕业于{ORG}", "{PER}是{LOC}人", "{ORG}的{PER}明天来{LOC}开会", "{LOC}的天气越来越热了",
                    "{PER}给{PER}打了电话", "下个月{PER}要去{LOC}出差", "{ORG}在{LOC}开了一家分店",
                    "听说{PER}在{ORG}上班", "{TIME}{PER}从{LOC}回来了", "{ORG}{TIME}发布了新消息")
EMPTY_TEMPLATES = ("{TIME}大家都在家休息", "{TIME}我去超市买了水果", "{TIME}的会议推迟了", "他说{TIME}会下雨")
ENTITY_TYPES = ("PER", "LOC", "ORG")
Labelled = tuple[str, list[tuple[int, int, str]]]  # a text and its entities' (start, end, label), in characters
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
TYPABLE = "0123456789abcdefghijklmnopqrstuvwxyz，。！？,.!?"
SPLITS = ("train", "dev", "test")


def write_splits(folder: str, seed: int, sizes: tuple[int, int, int], lines, suffix: str,
                 vocab: list[str]) -> dict[str, str]:
    """Write ``{train,dev,test}{suffix}`` into ``folder`` (created if needed), each split the text of
    ``lines(size, split_seed)`` with a seed drawn from ``seed``, and ``vocab.txt``; returns the four paths."""
    master = random.Random(seed)
    os.makedirs(folder, exist_ok=True)
    paths = {}
    for split, size in zip(SPLITS, sizes, strict=True):
        paths[split] = os.path.join(folder, f"{split}{suffix}")
        write_text(paths[split], "".join(lines(size, master.getrandbits(32))))
    paths["vocab"] = os.path.join(folder, "vocab.txt")
    write_text(paths["vocab"], "".join(f"{token}\n" for token in vocab))
    return paths


def _sentiment_sentence(rng: random.Random, label: str) -> str:
    """One sentence of 8 to 30 characters whose only sentiment word is of ``label``'s polarity."""
    words = POSITIVE if label == "pos" else NEGATIVE
    while True:
        core = rng.choice(SUBJECTS) + rng.choice(ADVERBS + ("",)) + rng.choice(words)
        form = rng.randrange(4)
        if form == 1:
            core = f"{core}，{rng.choice(TAILS)}"
        elif form == 2:
            core = f"{rng.choice(TAILS)}，{core}"
        elif form == 3:
            core = rng.choice(OPENERS) + core
        if 8 <= len(core) <= 30:
            return core


def sentiment_examples(n: int = 600, seed: int = 0) -> list[tuple[str, str]]:
    """Generate balanced sentiment examples: half ``pos``, half ``neg`` (one more ``neg`` when ``n`` is odd).

    Args:
        n: int. how many examples.
        seed: int. the random seed; the same seed gives the same examples.

    Returns:
        list of ``(text, label)``, label ``"pos"`` or ``"neg"``, in shuffled order.

    Example:
    >>> examples = sentiment_examples(10, seed=1)
    >>> len(examples), [label for _, label in examples].count("pos")
    (10, 5)
    """
    rng = random.Random(seed)
    labels = ["pos"] * (n // 2) + ["neg"] * (n - n // 2)
    rng.shuffle(labels)
    return [(_sentiment_sentence(rng, label), label) for label in labels]


def _person(rng: random.Random) -> str:
    """A surname and one or two given-name characters."""
    return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.randint(1, 2)))


def _joined_texts(n: int, seed: int, sentences: int,
                  sentence: Callable[[random.Random, str], Labelled]) -> list[Labelled]:
    """``n`` texts of 1 to ``sentences`` sentences of ``sentence(rng, template)`` (uniformly; exactly one, with the
    random draws of one, when ``sentences`` is 1), joined with "。", their spans moved to the joined text's offsets."""
    rng, texts = random.Random(seed), []
    for _ in range(n):
        text, spans = "", []
        for _ in range(rng.randint(1, sentences) if sentences > 1 else 1):
            part, found = sentence(rng, rng.choice(ENTITY_TEMPLATES + EMPTY_TEMPLATES))
            offset = len(text) + 1 if text else 0
            text = f"{text}。{part}" if text else part
            spans += [(start + offset, end + offset, label) for start, end, label in found]
        texts.append((text, spans))
    return texts


def _ner_sentence(rng: random.Random, template: str) -> Labelled:
    """Fill ``template``'s slots; each entity slot's character span (``TIME`` is no entity)."""
    fillers = {"PER": lambda: _person(rng), "LOC": lambda: rng.choice(LOCATIONS),
               "ORG": lambda: rng.choice(ORGANIZATIONS), "TIME": lambda: rng.choice(TIMES)}
    text, spans = "", []
    for i, piece in enumerate(re.split(r"\{(\w+)\}", template)):
        start = len(text)
        text += fillers[piece]() if i % 2 else piece  # odd pieces are slot names
        if i % 2 and piece in ENTITY_TYPES:
            spans.append((start, len(text), piece))
    return text, spans


def ner_examples(n: int = 600, seed: int = 0, sentences: int = 1) -> list[tuple[list[str], list[str]]]:
    """Generate character-level NER texts with BIO tags for ``PER``, ``LOC`` and ``ORG``.

    About one sentence in five has no entity.

    Args:
        n: int. how many texts.
        seed: int. the random seed; the same seed gives the same texts.
        sentences: int. each text is 1 to ``sentences`` sentences, joined with "。" (as `span_examples`).

    Returns:
        list of ``(chars, tags)``: single characters and one tag per character.

    Example:
    >>> chars, tags = ner_examples(3, seed=2)[0]
    >>> len(chars) == len(tags), all(len(char) == 1 for char in chars)
    (True, True)
    """
    return [(list(text), spans_to_tags(spans, len(text)))
            for text, spans in _joined_texts(n, seed, sentences, _ner_sentence)]


def write_demo_data(folder: str, seed: int = 0, n_train: int = 600, n_dev: int = 150,
                    n_test: int = 150, sentences: int = 1) -> dict[str, str]:
    """Write the sentiment and NER splits and their vocabulary into ``folder`` (created if needed).

    Each split is drawn with its own seed, derived from ``seed``, so dev and test follow the
    training distribution without being copies of it (short template sentences may still repeat).
    Files: ``cls/{train,dev,test}.tsv`` (``text<TAB>label``, no header), ``ner/{train,dev,test}.txt``
    (CoNLL, ``char tag`` a line, a blank line between sentences) and ``vocab.txt`` (the special
    tokens, every character of the data sorted, then digits, lowercase letters and punctuation).

    Args:
        folder: str. where to write; created with its parents.
        seed: int. the random seed; the same seed writes the same bytes.
        n_train: int. examples in each training split.
        n_dev: int. examples in each dev split.
        n_test: int. examples in each test split.
        sentences: int. each NER text is 1 to ``sentences`` sentences (`ner_examples`); the sentiment texts are one.

    Returns:
        dict from ``cls_train``, ``cls_dev``, ``cls_test``, ``ner_train``, ``ner_dev``, ``ner_test``
        and ``vocab`` to the file paths.

    Example:
    >>> import tempfile
    >>> paths = write_demo_data(tempfile.mkdtemp(), n_train=20, n_dev=5, n_test=5)
    >>> open(paths["vocab"], encoding="utf-8").read().split()[:5]
    ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    """
    master = random.Random(seed)
    sizes = dict(zip(SPLITS, (n_train, n_dev, n_test), strict=True))
    seeds = {split: master.getrandbits(32) for split in SPLITS}
    os.makedirs(os.path.join(folder, "cls"), exist_ok=True)
    os.makedirs(os.path.join(folder, "ner"), exist_ok=True)
    paths: dict[str, str] = {}
    characters: set[str] = set()
    for split in SPLITS:
        sentiment = sentiment_examples(sizes[split], seeds[split])
        ner = ner_examples(sizes[split], seeds[split] + 1, sentences)
        characters.update(char for text, _ in sentiment for char in text)
        characters.update(char for chars, _ in ner for char in chars)
        paths[f"cls_{split}"] = os.path.join(folder, "cls", f"{split}.tsv")
        write_text(paths[f"cls_{split}"], "".join(f"{text}\t{label}\n" for text, label in sentiment))
        paths[f"ner_{split}"] = os.path.join(folder, "ner", f"{split}.txt")
        blocks = ("".join(f"{char} {tag}\n" for char, tag in zip(chars, tags, strict=True)) for chars, tags in ner)
        write_text(paths[f"ner_{split}"], "\n".join(blocks))
    # the "。" that joins NER sentences keeps its place among TYPABLE's: the same vocabulary for any ``sentences``
    ordered = sorted(characters - {"。"})
    vocab = list(SPECIAL_TOKENS) + ordered + [char for char in TYPABLE if char not in ordered]
    paths["vocab"] = os.path.join(folder, "vocab.txt")
    write_text(paths["vocab"], "".join(f"{token}\n" for token in vocab))
    return paths


EVENTS = ("发布会", "研讨会", "招聘会", "运动会", "音乐会", "年会", "展览", "座谈会")
NEWS_TEMPLATES = (  # (first sentence, title); {E} an event
    ("{TIME}，{ORG}在{LOC}举办了{E}", "{ORG}在{LOC}举办{E}"),
    ("{PER}{TIME}在{LOC}参加了{ORG}的{E}", "{PER}参加{ORG}{E}"),
    ("{ORG}宣布{TIME}将在{LOC}召开{E}", "{ORG}将在{LOC}召开{E}"),
    ("{TIME}，{PER}代表{ORG}出席了{LOC}的{E}", "{PER}出席{LOC}{E}"),
)
NEWS_DETAILS = ("现场来了很多人", "活动持续了一整天", "不少媒体进行了报道", "大家都觉得很有收获", "天气不错",
                "主办方准备得很充分", "很多市民前来参观", "气氛非常热烈")


def title_examples(n: int = 600, seed: int = 0) -> list[tuple[str, str]]:
    """Generate ``(paragraph, title)`` pairs: a paragraph of a news sentence and two to four details (those that
    fit in `TITLE_SOURCE_ROOM` characters), and a title that restates the news sentence's who, what and where in
    fewer words.

    Example:
    >>> paragraph, title = title_examples(1, seed=3)[0]
    >>> paragraph.endswith("。"), 0 < len(title) < len(paragraph)
    (True, True)
    """
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        first, title = rng.choice(NEWS_TEMPLATES)
        values = {"PER": _person(rng), "LOC": rng.choice(LOCATIONS), "ORG": rng.choice(ORGANIZATIONS),
                  "TIME": rng.choice(TIMES), "E": rng.choice(EVENTS)}
        paragraph = first.format(**values)
        for detail in rng.sample(NEWS_DETAILS, rng.randint(2, 4)):
            if len(paragraph) + len(detail) + 2 > TITLE_SOURCE_ROOM:  # with its "，" and the closing "。"
                break
            paragraph += "，" + detail
        examples.append((paragraph + "。", title.format(**values)))
    return examples


def title_vocabulary(extra: tuple[str, ...] = ()) -> list[str]:
    """The special tokens and every character `title_examples` can write, sorted: the same list for every seed.

    Args:
        extra: tuple of str. more texts or templates whose characters join the list (``{SLOT}`` names dropped),
            for a corpus built on these templates with words of its own.

    Example:
    >>> vocabulary = title_vocabulary()
    >>> vocabulary[:5], len(title_vocabulary(("{PER}发布了新款手表",))) > len(vocabulary)
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
    """
    texts = (*SURNAMES, *GIVEN, *LOCATIONS, *ORGANIZATIONS, *TIMES, *EVENTS, *NEWS_DETAILS, "，。",
             *(part for template in NEWS_TEMPLATES for part in template), *extra)
    characters = {char for text in texts for char in re.sub(r"\{\w+\}", "", text)}
    return list(SPECIAL_TOKENS) + sorted(characters)


def write_title_data(folder: str, seed: int = 0, n_train: int = 600, n_dev: int = 50,
                     n_test: int = 100) -> dict[str, str]:
    """Write :func:`title_examples` splits as ``{"source", "target"}`` JSONL (``{train,dev,test}.jsonl``) and
    their ``vocab.txt`` into ``folder``; returns ``train``, ``dev``, ``test`` and ``vocab`` to the paths.

    Example:
    >>> import tempfile
    >>> paths = write_title_data(tempfile.mkdtemp(), n_train=4, n_dev=2, n_test=2)
    >>> sorted(paths)
    ['dev', 'test', 'train', 'vocab']
    """
    import json

    def lines(size: int, split_seed: int):
        return (json.dumps({"source": paragraph, "target": title}, ensure_ascii=False) + "\n"
                for paragraph, title in title_examples(size, split_seed))

    return write_splits(folder, seed, (n_train, n_dev, n_test), lines, ".jsonl", title_vocabulary())


# span data: an ORG is mostly a LOC and a kind of organization, the LOC nested in it, or one of these
ORG_KINDS = ("大学", "银行", "医院", "电视台")
NAMED_ORGANIZATIONS = ("清华大学", "华为公司", "腾讯公司", "新华社", "中国移动", "小米公司")


def _span_sentence(rng: random.Random, template: str) -> Labelled:
    """Fill ``template``'s slots; each entity slot's character span, and a city's inside an ORG named after it."""
    fillers = {"PER": lambda: _person(rng), "LOC": lambda: rng.choice(LOCATIONS), "TIME": lambda: rng.choice(TIMES),
               "ORG": lambda: rng.choice(NAMED_ORGANIZATIONS)}
    text, spans = "", []
    for i, piece in enumerate(re.split(r"\{(\w+)\}", template)):
        start = len(text)
        if i % 2 and piece == "ORG" and rng.random() < 0.75:
            city = rng.choice(LOCATIONS)
            text += city + rng.choice(ORG_KINDS)
            spans.append((start, start + len(city), "LOC"))
        else:
            text += fillers[piece]() if i % 2 else piece  # odd pieces are slot names
        if i % 2 and piece in ENTITY_TYPES:
            spans.append((start, len(text), piece))
    return text, sorted(spans)


def span_examples(n: int = 600, seed: int = 0, sentences: int = 1) -> list[Labelled]:
    """Generate texts with ``PER``, ``LOC`` and ``ORG`` entities that nest: most organizations are named after a
    city (``北京银行``), whose ``LOC`` lies inside the ``ORG``. About one sentence in five has no entity.

    Args:
        n: int. how many texts.
        seed: int. the random seed.
        sentences: int. each text is 1 to ``sentences`` sentences (uniformly), joined with "。": above about 4,
            many are longer than the demo's maxlen, for training with ``--stride``.

    Returns:
        list of ``(text, spans)``, each span ``(start, end, label)`` in characters, ``end`` exclusive, sorted.

    Example:
    >>> span_examples(1, seed=10)[0]
    ('朱平伟去年加入了浙江医院', [(0, 3, 'PER'), (8, 10, 'LOC'), (8, 12, 'ORG')])
    """
    return _joined_texts(n, seed, sentences, _span_sentence)


def write_span_data(folder: str, seed: int = 0, n_train: int = 600, n_dev: int = 150,
                    n_test: int = 150, sentences: int = 1) -> dict[str, str]:
    """Write :func:`span_examples` splits (texts of 1 to ``sentences`` sentences) as span JSONL (``{"text",
    "entities": [{"start", "end", "label"}]}``, ``{train,dev,test}.jsonl``) and their ``vocab.txt`` into
    ``folder``; returns ``train``, ``dev``, ``test`` and ``vocab`` to the paths.

    Example:
    >>> import tempfile
    >>> paths = write_span_data(tempfile.mkdtemp(), n_train=4, n_dev=2, n_test=2)
    >>> sorted(paths)
    ['dev', 'test', 'train', 'vocab']
    """
    import json

    def lines(size: int, split_seed: int):
        return (json.dumps({"text": text, "entities": [{"start": a, "end": b, "label": label}
                                                       for a, b, label in spans]}, ensure_ascii=False) + "\n"
                for text, spans in span_examples(size, split_seed, sentences))

    words = (*SURNAMES, *GIVEN, *LOCATIONS, *ORG_KINDS, *NAMED_ORGANIZATIONS, *TIMES,
             *ENTITY_TEMPLATES, *EMPTY_TEMPLATES)
    characters = sorted({char for word in words for char in re.sub(r"\{\w+\}", "", word)})
    vocab = [*SPECIAL_TOKENS, *characters, *(char for char in TYPABLE if char not in characters)]
    return write_splits(folder, seed, (n_train, n_dev, n_test), lines, ".jsonl", vocab)
