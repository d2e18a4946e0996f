"""The official scores of extractive question answering: SQuAD's (``evaluate-v2.0.py``, which scores v1.1 as its own
script does) and CMRC 2018's (``cmrc2018_evaluate.py``), as fractions in [0, 1] where the scripts print percentages.

SQuAD: an answer is normalized (lower case, punctuation removed, the articles a/an/the removed, whitespace runs made
one space); exact match (EM) is 1 where the normalized prediction equals a normalized gold answer, and F1 is that of
their tokens (split on whitespace) as bags, each the best over the gold answers. A question without an answer has
the gold answer ``""``: EM and F1 are then 1 for an empty prediction and 0 otherwise. With unanswerable questions the
scores are also given over the answerable ones (``HasAns_*``) and the others (``NoAns_*``), as ``evaluate-v2.0.py``
gives them.

CMRC 2018: an answer is lower-cased and cut by mixed segmentation: each Chinese character (U+4E00 to U+9FA5) and each
mark of the script's punctuation list is a token of its own, and the text between them is cut as English words
(runs of letters and digits, each other mark alone; the script's ``nltk.word_tokenize`` cuts plain words and marks
so). F1 takes the longest common substring of the prediction's and the answer's tokens (both without the
punctuation list's marks) as the overlap; EM compares the texts without those marks. An unanswerable question
scores as SQuAD's does (CMRC 2018 has none).

The metric follows the data: ``cmrc2018`` where most contexts hold Chinese characters, else ``squad``
(`choose_metric`); the scores say which under ``"metric"``.

Example:
>>> scores = qa_scores([["the Eiffel Tower"], ["Paris, France"]], ["Eiffel tower!", "in Paris"])
>>> scores["exact"], scores["f1"], scores["metric"]
(0.5, 0.75, 'squad')
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Sequence

from kerasbert.errors import DataError, fail

__all__ = ["CMRC_PUNCTUATION", "choose_metric", "cmrc_exact", "cmrc_f1", "mixed_segmentation", "normalize_answer",
           "qa_scores", "squad_exact", "squad_f1"]

# cmrc2018_evaluate.py's sp_char: the marks its segmentation keeps alone and its scores remove
CMRC_PUNCTUATION = frozenset(["-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=", "，", "。", "：", "？", "！", "“",
                              "”", "；", "’", "《", "》", "……", "·", "、", "「", "」", "（", "）", "－", "～", "『",
                              "』"])
_CHINESE = re.compile("[\u4e00-\u9fa5]")
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)
_ENGLISH_TOKENS = re.compile(r"\w+|[^\w\s]")  # nltk.word_tokenize on plain words and marks


def normalize_answer(text: str) -> str:
    """SQuAD's ``normalize_answer``: lower case, no punctuation, no articles, single spaces.

    Example:
    >>> normalize_answer("The  Eiffel-Tower, (Paris)!")
    'eiffeltower paris'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_exact(gold: str, prediction: str) -> int:
    """SQuAD's ``compute_exact``: 1 where the normalized texts are equal.

    Example:
    >>> squad_exact("the Eiffel Tower", "Eiffel tower!"), squad_exact("Paris", "paris, France")
    (1, 0)
    """
    return int(normalize_answer(gold) == normalize_answer(prediction))


def _overlap_f1(same: int, gold: list[str], prediction: list[str]) -> float:
    """F1 of ``same`` shared tokens of a gold and a predicted token list; 1 where both are empty, 0 where one is."""
    if not gold or not prediction:
        return float(gold == prediction)
    if not same:
        return 0.0
    precision, recall = same / len(prediction), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _bag_f1(gold: list[str], prediction: list[str]) -> float:
    """F1 of two token lists as bags (SQuAD's)."""
    return _overlap_f1(sum((collections.Counter(gold) & collections.Counter(prediction)).values()), gold, prediction)


def squad_f1(gold: str, prediction: str) -> float:
    """SQuAD's ``compute_f1``: F1 of the normalized texts' words as bags.

    Example:
    >>> round(squad_f1("Denver Broncos", "the Broncos won"), 4)  # P 1/2, R 1/2
    0.5
    """
    return _bag_f1(normalize_answer(gold).split(), normalize_answer(prediction).split())


def mixed_segmentation(text: str, remove_punctuation: bool = False) -> list[str]:
    """CMRC 2018's ``mixed_segmentation``: each Chinese character and punctuation mark alone, English words between.

    Example:
    >>> mixed_segmentation("张伟在Huawei工作，2019年")
    ['张', '伟', '在', 'huawei', '工', '作', '，', '2019', '年']
    >>> mixed_segmentation("《红楼梦》", remove_punctuation=True)
    ['红', '楼', '梦']
    """
    out, run = [], ""
    for ch in text.lower().strip():
        if remove_punctuation and ch in CMRC_PUNCTUATION:
            continue
        if _CHINESE.match(ch) or ch in CMRC_PUNCTUATION:
            out += _ENGLISH_TOKENS.findall(run) + [ch]
            run = ""
        else:
            run += ch
    return out + _ENGLISH_TOKENS.findall(run)


def _longest_common_run(a: list[str], b: list[str]) -> int:
    """The length of the longest run of tokens ``a`` and ``b`` share (CMRC 2018's ``find_lcs``)."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def cmrc_f1(gold: str, prediction: str) -> float:
    """CMRC 2018's F1 of one answer: the longest common run of the two texts' tokens (without punctuation) over each.

    Example:
    >>> round(cmrc_f1("杭州市", "在杭州"), 4)  # run 杭州: P 2/3, R 2/3
    0.6667
    """
    answer, predicted = (mixed_segmentation(text, remove_punctuation=True) for text in (gold, prediction))
    return _overlap_f1(_longest_common_run(answer, predicted), answer, predicted)


def cmrc_exact(gold: str, prediction: str) -> int:
    """CMRC 2018's EM of one answer: the lower-cased, stripped texts equal once its punctuation marks are removed.

    Example:
    >>> cmrc_exact("《红楼梦》", "红楼梦"), cmrc_exact("红楼梦", "红楼")
    (1, 0)
    """
    def bare(text: str) -> str:
        return "".join(ch for ch in text.lower().strip() if ch not in CMRC_PUNCTUATION)

    return int(bare(gold) == bare(prediction))


def choose_metric(contexts: Sequence[str]) -> str:
    """``"cmrc2018"`` where more than half the contexts hold a Chinese character, else ``"squad"``.

    Example:
    >>> choose_metric(["张伟在杭州工作", "Paris is in France"]), choose_metric(["张伟在杭州工作"])
    ('squad', 'cmrc2018')
    """
    chinese = sum(bool(_CHINESE.search(context)) for context in contexts)
    return "cmrc2018" if 2 * chinese > len(contexts) else "squad"


SCORERS = {"squad": (squad_exact, squad_f1), "cmrc2018": (cmrc_exact, cmrc_f1)}


def qa_scores(golds: Sequence[Sequence[str]], predictions: Sequence[str], metric: str = "squad") -> dict:
    """EM and F1 (the best over each question's gold answers) averaged over the questions.

    Args:
        golds: sequence of sequences of str. each question's gold answers; none: unanswerable (gold ``""``).
        predictions: sequence of str. each question's predicted answer (``""``: none).
        metric: str. ``"squad"`` or ``"cmrc2018"`` (`SCORERS`).

    Returns:
        dict. ``exact``, ``f1``, ``total`` and ``metric``; where some questions are unanswerable, also ``HasAns_exact``,
        ``HasAns_f1``, ``HasAns_total`` and ``NoAns_*`` for the others.

    Example:
    >>> scores = qa_scores([["张伟"], []], ["张伟", "杭州"], "cmrc2018")
    >>> scores["exact"], scores["HasAns_exact"], scores["NoAns_f1"]
    (0.5, 1.0, 0.0)
    """
    if len(golds) != len(predictions):
        raise fail(DataError, "qa scores", f"{len(golds)} predictions, one per question", str(len(predictions)))
    exact_of, f1_of = SCORERS[metric]
    exact, f1 = [], []
    for gold, prediction in zip(golds, predictions, strict=True):
        answers = [text for text in gold if normalize_answer(text)] if metric == "squad" else list(gold)
        answers = answers or [""]
        exact.append(max(exact_of(answer, prediction) for answer in answers))
        f1.append(max(f1_of(answer, prediction) for answer in answers))
    scores = {"metric": metric, **_means("", exact, f1, range(len(golds)))}
    answerable = [i for i, gold in enumerate(golds) if gold]
    if len(answerable) < len(golds):
        scores.update(_means("HasAns_", exact, f1, answerable))
        scores.update(_means("NoAns_", exact, f1, [i for i, gold in enumerate(golds) if not gold]))
    return scores


def _means(prefix: str, exact: list[int], f1: list[float], rows) -> dict:
    rows = list(rows)
    count = max(len(rows), 1)
    return {f"{prefix}exact": sum(exact[i] for i in rows) / count, f"{prefix}f1": sum(f1[i] for i in rows) / count,
            f"{prefix}total": len(rows)}
