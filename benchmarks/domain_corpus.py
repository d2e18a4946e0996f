"""Generated corpora for `pretrain_domain.py`: everyday Chinese text, a medical domain's raw text, and a labelled
task on that domain that unlabelled domain text can help with.

- **general** text: the sentiment reviews, news paragraphs and paraphrase questions of `kerasbert.finetune.demo_data`
  and `kerasbert.finetune.paraphrase_data`, four sentences a document;
- **domain** text: documents about made-up drugs, each drug of one of four kinds (`KINDS`: heart, lungs, stomach,
  skin), each document about one drug, most of its sentences in its kind's contexts (``舒泰能降低血压``,
  ``高血压患者需要长期服用舒泰``), some neutral (``医生给我开了舒泰``). Every drug of `drugs` appears in it;
- the **task**: a sentence that names one drug in a neutral context only (``请问舒泰需要处方吗``), labelled with
  the drug's kind. A drug's name is two characters written nowhere else (not in the general text, not in any
  context, not in another drug's name), so a sentence's label is the drug's identity and nothing else. The
  labelled training set names `TRAIN_DRUGS` drugs of each kind; dev and test each name other drugs of each kind
  (`DEV_DRUGS`, the rest for test), which the domain text uses but the labelled training set never names.

Fine-tuning alone cannot tell a dev or test drug's kind: its characters are new to the classifier, their embeddings
never trained on text that shows the kind. Masked-LM training on the domain text can: predicting ``降低血压`` after
a drug's name (and the name before it) gives the name's characters a representation near the other heart drugs'.

Deterministic: the same seed gives the same bytes.
"""

from __future__ import annotations

import os
import random

from kerasbert.finetune import demo_data, paraphrase_data

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
KINDS = {  # a kind (the label) -> the sentences its drugs appear in ({T}: the drug)
    "heart": ("{T}能降低血压", "{T}常用于治疗冠心病", "服用{T}可以缓解胸闷心悸", "{T}能改善心律不齐",
              "高血压患者需要长期服用{T}", "{T}有助于扩张血管", "心绞痛发作时舌下含服{T}", "{T}能减慢心率"),
    "lungs": ("{T}能止咳化痰", "{T}常用于治疗支气管炎", "服用{T}可以缓解哮喘发作", "{T}对肺部感染有效",
              "感冒咳嗽时可以服用{T}", "{T}能减轻鼻塞流涕", "{T}能缓解咽喉肿痛", "{T}有助于改善呼吸困难"),
    "stomach": ("{T}能保护胃黏膜", "{T}常用于治疗胃溃疡", "服用{T}可以缓解腹泻腹痛", "{T}能促进消化",
                "胃胀反酸时可以服用{T}", "{T}对慢性肠炎有效", "{T}能减轻恶心呕吐", "{T}有助于改善便秘"),
    "skin": ("外涂{T}可以止痒", "{T}常用于治疗湿疹", "{T}能消除皮疹红肿", "{T}对痤疮有效",
             "皮肤过敏时可以涂抹{T}", "{T}能促进伤口愈合", "{T}能缓解蚊虫叮咬", "{T}有助于改善皮肤干燥"),
}
NEUTRAL = ("医生给我开了{T}", "{T}每天用两次", "药店里买不到{T}", "这盒{T}快过期了", "请问{T}需要处方吗",
           "我妈妈一直在用{T}", "{T}的价格又涨了", "{T}要放在阴凉的地方", "朋友推荐我试试{T}", "家里还剩半盒{T}",
           "{T}是进口的还是国产的", "用了{T}以后要多喝水", "我在网上买了{T}", "{T}的说明书写得很清楚")
INTRODUCTIONS = ("{T}是一种常用药", "{T}是医院常开的药", "很多人听说过{T}", "{T}已经上市多年")
# characters of transliterated drug names; those written in any other text are dropped (`name_characters`)
NAME_POOL = ("阿奥贝苄泊达氮丁厄恩伐芬酚氟戈胍桂哈核环磺吉钾碱康克喹拉兰雷联硫铝氯仑罗洛麦咪莫姆纳奈萘尼诺哌培喷"
             "匹泼普齐羟嗪氢曲炔噻塞瑞赛舍索泰坦碳替酮托妥烷韦维肟昔腺硝辛溴亚烟氧依乙异吲茚唑佐蒽苯吡啶嘧嘌胺酰"
             "肼醇醚酯脲腈巴柏铂钙镁锌铁钠锂铋硒碘磷砷锑钡铬钴镍铜锰钼钛钒汞铅锡锗镓铟铊铯铷锶镭铍硼硅氦氖氩氪"
             "氙氡钚铀钍镅锔锫锎锿镄钔锘铹釉萜苷芪芍苓菊蓟蒲芎归苡芷葛蔻茱萸艾莪蕲荷蔓荆藁檀楝槐榆椿楸梓柽橄榄"
             "枇杷芡菱茯姜薏")
SENTIMENT_WORDS = (demo_data.SUBJECTS, demo_data.ADVERBS, demo_data.POSITIVE, demo_data.NEGATIVE, demo_data.OPENERS,
                   demo_data.TAILS)  # what `demo_data.sentiment_examples` writes
DRUGS_PER_KIND, TRAIN_DRUGS, DEV_DRUGS = 20, 6, 7  # of each kind: named in training, in dev (the rest: in test)
#: sentences of the full benchmark's files, and of ``--quick``'s
SIZES = {False: {"general": 3000, "domain": 3000, "held_out": 400, "train": 240, "dev": 280, "test": 560},
         True: {"general": 200, "domain": 800, "held_out": 40, "train": 32, "dev": 28, "test": 28}}


def general_sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` everyday sentences: a third each sentiment reviews, news paragraphs and paraphrase questions."""
    rng = random.Random(seed)
    reviews = [text for text, _ in demo_data.sentiment_examples(n // 3 + 1, seed=seed)]
    news = [paragraph for paragraph, _ in demo_data.title_examples(n // 3 + 1, seed=seed)]
    questions = [text for a, b, _ in paraphrase_data.paraphrase_pairs(n // 6 + 1, seed=seed) for text in (a, b)]
    sentences = reviews[:n // 3] + news[:n // 3] + questions[:n - 2 * (n // 3)]
    rng.shuffle(sentences)
    return sentences


def _context_text() -> str:
    """Every character a domain sentence or a labelled sentence writes besides the drug's name."""
    templates = [*NEUTRAL, *INTRODUCTIONS, *(t for sentences in KINDS.values() for t in sentences), "。"]
    return "".join(template.replace("{T}", "") for template in templates)


def name_characters() -> list[str]:
    """`NAME_POOL`'s characters that no general sentence and no context can write, in the pool's order."""
    general = [*paraphrase_data.paraphrase_vocabulary(), *demo_data.title_vocabulary(),
               *(word for words in SENTIMENT_WORDS for word in words)]
    used = set(_context_text()) | set("".join(general))
    return [char for char in dict.fromkeys(NAME_POOL) if char not in used]


def drugs(seed: int = 0) -> dict[str, list[str]]:
    """Each kind's `DRUGS_PER_KIND` drug names, two characters each, no character in two names.

    Example:
    >>> names = drugs()
    >>> sorted(len(kind) for kind in names.values()), all(len(name) == 2 for kind in names.values() for name in kind)
    ([20, 20, 20, 20], True)
    """
    characters = name_characters()
    need = 2 * DRUGS_PER_KIND * len(KINDS)
    if len(characters) < need:
        raise ValueError(f"NAME_POOL: {need} characters written nowhere else needed, {len(characters)} found")
    random.Random(seed).shuffle(characters)
    names = ["".join(characters[i:i + 2]) for i in range(0, need, 2)]
    return {kind: names[k * DRUGS_PER_KIND:(k + 1) * DRUGS_PER_KIND] for k, kind in enumerate(KINDS)}


def split_drugs(names: dict[str, list[str]]) -> dict[str, dict[str, list[str]]]:
    """``{"train" | "dev" | "test": {kind: drugs}}``: each kind's first `TRAIN_DRUGS`, next `DEV_DRUGS`, the rest."""
    cuts = {"train": (0, TRAIN_DRUGS), "dev": (TRAIN_DRUGS, TRAIN_DRUGS + DEV_DRUGS),
            "test": (TRAIN_DRUGS + DEV_DRUGS, DRUGS_PER_KIND)}
    return {split: {kind: kind_names[a:b] for kind, kind_names in names.items()} for split, (a, b) in cuts.items()}


def domain_documents(n_sentences: int, names: dict[str, list[str]], seed: int) -> list[list[str]]:
    """Documents of four sentences about one drug, about ``n_sentences`` in all, every drug in turn: an
    introduction or a neutral sentence, then three of its kind's sentences, one of them neutral a time in four."""
    rng = random.Random(seed)
    pairs = [(kind, name) for kind, kind_names in names.items() for name in kind_names]
    documents = []
    while sum(map(len, documents)) < n_sentences:
        rng.shuffle(pairs)
        for kind, name in pairs:
            sentences = [rng.choice(INTRODUCTIONS + NEUTRAL)] + rng.sample(KINDS[kind], 3)
            if rng.random() < 0.25:
                sentences[rng.randrange(1, 4)] = rng.choice(NEUTRAL)
            documents.append([sentence.format(T=name) + "。" for sentence in sentences])
    return documents[:max(1, n_sentences // 4)]


def labelled(n: int, names: dict[str, list[str]], seed: int) -> list[tuple[str, str]]:
    """``n`` ``(sentence, kind)``: a neutral sentence naming a drug of ``names``, kinds in turn, drugs at random."""
    rng = random.Random(seed)
    kinds = list(names)
    return [(rng.choice(NEUTRAL).format(T=rng.choice(names[kinds[i % len(kinds)]])), kinds[i % len(kinds)])
            for i in range(n)]


def write_corpus(folder: str, quick: bool = False, seed: int = 0) -> dict[str, str]:
    """Write the corpora, the task and the vocabulary into ``folder``; returns their paths: ``general``,
    ``domain`` and ``held_out`` (plain text, a sentence a line, a blank line between documents), ``train``,
    ``dev`` and ``test`` (``text<TAB>label`` with a header), ``vocab`` (special tokens, then every character).

    Example:
    >>> import tempfile
    >>> sorted(write_corpus(tempfile.mkdtemp(), quick=True))
    ['dev', 'domain', 'general', 'held_out', 'test', 'train', 'vocab']
    """
    from kerasbert.files import write_text

    sizes, names = SIZES[quick], drugs(seed)
    splits = split_drugs(names)
    general = general_sentences(sizes["general"], seed)
    texts = {"general": [general[i:i + 4] for i in range(0, len(general), 4)],
             "domain": domain_documents(sizes["domain"], names, seed + 1),
             "held_out": domain_documents(sizes["held_out"], names, seed + 2)}
    rows = {split: labelled(sizes[split], splits[split], seed + 3 + k) for k, split in enumerate(splits)}
    os.makedirs(folder, exist_ok=True)
    paths = {name: os.path.join(folder, f"{name}.txt") for name in texts}
    for name, documents in texts.items():
        write_text(paths[name], "\n\n".join("\n".join(document) for document in documents) + "\n")
    for split, examples in rows.items():
        paths[split] = os.path.join(folder, f"{split}.tsv")
        write_text(paths[split], "text\tlabel\n" + "".join(f"{text}\t{kind}\n" for text, kind in examples))
    characters = {char for documents in texts.values() for document in documents for char in "".join(document)}
    characters |= {char for examples in rows.values() for text, _ in examples for char in text}
    paths["vocab"] = os.path.join(folder, "vocab.txt")
    write_text(paths["vocab"], "".join(f"{token}\n" for token in [*SPECIAL, *sorted(characters - set(SPECIAL))]))
    return paths
