"""A generated Chinese paraphrase corpus (LCQMC-style question pairs) for `sim_recipe.py`, with names unseen in
training.

Built on `kerasbert.finetune.paraphrase_data` (its intents, wordings, synonyms and hard negatives: one slot
refilled, two slots swapped, a neighbouring intent), with larger pools of names for its open slots and up to a
quarter of each pool kept for dev and test:

- cities (``CITY``): 75 Chinese cities;
- products (``ITEM``): a brand and a product, ``星河手机``;
- places (``PLACE``): a name and a kind of place, ``人民图书馆``.

Dev and test pairs name only held-out cities, products and places, so a model has to compare what two questions
ask, not remember which names it has seen; their characters all occur in training, in other names. Times,
account actions and account things (``TIME``, ``ACT``, ``THING``) are closed classes, the same in every split.

Writes ``{train,dev,test}.tsv`` (``text_a<TAB>text_b<TAB>label``, as `kerasbert train --task sim` reads) and
``vocab.txt``. Deterministic: the same seed gives the same bytes.
"""

from __future__ import annotations

import os
import zlib

from ner_corpus import BRANDS, PRODUCTS

from kerasbert.finetune import paraphrase_data
from kerasbert.finetune.demo_data import SPECIAL_TOKENS

CITIES = tuple("北京 上海 广州 深圳 杭州 南京 成都 武汉 西安 重庆 天津 苏州 长沙 郑州 青岛 大连 厦门 宁波 "
               "济南 合肥 福州 昆明 沈阳 无锡 南宁 南昌 贵阳 兰州 太原 长春 海口 温州 泉州 常州 扬州 徐州 "
               "台州 洛阳 襄阳 绵阳 宜昌 珠海 佛山 中山 惠州 三亚 大理 西宁 烟台 威海 唐山 南通 江门 湖州 "
               "金华 九江 南阳 安阳 德阳 德州 东营 北海 海宁 天水 大同 安庆 长治 黄山 黄石 江阴 宁德 新乡 "
               "上饶 金昌 白山".split())  # many share a character
ITEMS = tuple(brand + product for brand in BRANDS[0] for product in PRODUCTS)
PLACE_NAMES = ("人民", "解放", "建设", "和平", "新华", "胜利", "友谊", "光明", "文化", "青年")  # no city, no brand
PLACES = tuple(name + kind for name in PLACE_NAMES for kind in paraphrase_data.SLOTS["PLACE"])
OPEN = {"CITY": CITIES, "ITEM": ITEMS, "PLACE": PLACES}
HELD_OUT = 4  # up to one value in HELD_OUT of each open pool is kept for dev and test


def split_pool(values: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """``(seen, unseen)``: up to a quarter of ``values`` for dev and test, picked in checksum order (the same on every
    machine) among those whose characters all occur in the values left for training.

    Example:
    >>> seen, unseen = split_pool(("北京", "南京", "济南", "南宁", "宁波", "波士顿", "北海", "海口"))
    >>> unseen, set("".join(unseen)) <= set("".join(seen))
    (['宁波', '北海'], True)
    """
    seen, unseen = list(values), []
    for value in sorted(values, key=lambda v: zlib.crc32(v.encode("utf-8"))):
        rest = {char for other in seen if other != value for char in other}
        if len(unseen) < len(values) // HELD_OUT and set(value) <= rest:
            seen.remove(value)
            unseen.append(value)
    return seen, unseen


def pools(unseen: bool) -> dict[str, list[str]]:
    """The slot values of training (``unseen`` False) or of dev and test (True), for every slot kind."""
    split = {kind: split_pool(values)[unseen] for kind, values in OPEN.items()}
    return {kind: list(values) for kind, values in paraphrase_data.SLOTS.items()} | split


def vocabulary() -> list[str]:
    """The paraphrase vocabulary with every character of the open pools, sorted after the special tokens."""
    characters = set(paraphrase_data.paraphrase_vocabulary()[len(SPECIAL_TOKENS):])
    characters |= {char for values in OPEN.values() for value in values for char in value}
    return list(SPECIAL_TOKENS) + sorted(characters)


def write_corpus(folder: str, n_train: int = 3000, n_dev: int = 300, n_test: int = 1000, seed: int = 0) -> dict:
    """Write ``{train,dev,test}.tsv`` and ``vocab.txt`` into ``folder``; returns their paths. Dev and test name only
    held-out cities, products and places; half the pairs of each split are positive.

    Example:
    >>> import tempfile
    >>> paths = write_corpus(tempfile.mkdtemp(), n_train=4, n_dev=2, n_test=2)
    >>> sorted(paths)
    ['dev', 'test', 'train', 'vocab']
    """
    from kerasbert.files import write_text

    os.makedirs(folder, exist_ok=True)
    paths = {}
    for offset, (split, count) in enumerate((("train", n_train), ("dev", n_dev), ("test", n_test))):
        pairs = paraphrase_data.paraphrase_pairs(count, seed=1000 * seed + offset,
                                                 pools=pools(unseen=split != "train"))
        paths[split] = os.path.join(folder, f"{split}.tsv")
        write_text(paths[split], "".join(f"{a}\t{b}\t{label}\n" for a, b, label in pairs))
    paths["vocab"] = os.path.join(folder, "vocab.txt")
    write_text(paths["vocab"], "".join(f"{token}\n" for token in vocabulary()))
    return paths
