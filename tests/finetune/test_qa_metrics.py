"""SQuAD's and CMRC 2018's scores against numbers worked out by hand from the official scripts' rules
(``evaluate-v2.0.py``: normalize, EM, bag-of-tokens F1, best over the gold answers, "" for no answer;
``cmrc2018_evaluate.py``: mixed segmentation, punctuation removed, F1 over the longest common run)."""

from __future__ import annotations

import pytest

from kerasbert.finetune.qa_metrics import (
    choose_metric,
    cmrc_exact,
    cmrc_f1,
    mixed_segmentation,
    normalize_answer,
    qa_scores,
    squad_exact,
    squad_f1,
)


@pytest.mark.parametrize("gold, prediction, exact, f1", [
    ("the Eiffel Tower", "Eiffel tower!", 1, 1.0),  # case, punctuation and the article go
    ("Denver Broncos", "Broncos of Denver won", 0, 2 / 3),  # 2 shared of 4 predicted and 2 gold: P 1/2, R 1
    ("cat cat dog", "cat dog dog", 0, 2 / 3),  # as bags: cat once and dog once shared, P = R = 2/3
    ("an apple", "apple", 1, 1.0),
    ("Paris", "London", 0, 0.0),
    ("", "", 1, 1.0),  # no answer, none given
    ("", "Paris", 0, 0.0),
])
def test_squad_exact_and_f1(gold, prediction, exact, f1):
    assert squad_exact(gold, prediction) == exact
    assert squad_f1(gold, prediction) == pytest.approx(f1)


def test_squad_normalizes_as_the_official_script():
    assert normalize_answer("  The   quick, brown fox's  ") == "quick brown foxs"
    assert normalize_answer("theater and a then") == "theater and then"  # whole words only


def test_squad_scores_take_the_best_gold_answer_and_split_by_answerability():
    golds = [["Paris", "the city of Paris"], ["Denver Broncos"], [], [], ["the"]]
    predictions = ["city of Paris", "Broncos of Denver won", "", "Paris", ""]
    scores = qa_scores(golds, predictions)
    # per question EM 1, 0, 1, 0, 1 ("the" normalizes to nothing: gold ""); F1 1, 2/3, 1, 0, 1; the last has an
    # answer in its file, so it counts as answerable, as evaluate-v2.0.py counts it
    assert scores["metric"] == "squad" and scores["total"] == 5
    assert scores["exact"] == pytest.approx(3 / 5) and scores["f1"] == pytest.approx((1 + 2 / 3 + 1 + 0 + 1) / 5)
    assert (scores["HasAns_exact"], scores["HasAns_total"]) == (pytest.approx(2 / 3), 3)
    assert scores["HasAns_f1"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert (scores["NoAns_exact"], scores["NoAns_f1"], scores["NoAns_total"]) == (0.5, 0.5, 2)
    assert "HasAns_exact" not in qa_scores([["Paris"]], ["Paris"])  # v1.1: every question has an answer


@pytest.mark.parametrize("text, remove, tokens", [
    ("华为P40手机，售价4988元", False, ["华", "为", "p40", "手", "机", "，", "售", "价", "4988", "元"]),
    ("《红楼梦》的作者", True, ["红", "楼", "梦", "的", "作", "者"]),
    ("iPhone 12 Pro", True, ["iphone", "12", "pro"]),
    ("state-of-the-art模型", True, ["stateoftheart", "模", "型"]),  # marks of the list dropped inside a word
])
def test_cmrc_mixed_segmentation(text, remove, tokens):
    assert mixed_segmentation(text, remove) == tokens


@pytest.mark.parametrize("gold, prediction, exact, f1", [
    ("北京大学", "北京大学医学部", 0, 8 / 11),  # run of 4: P 4/7, R 1
    ("杭州西湖", "西湖杭州", 0, 0.5),  # the longest common run is 2 (a bag of tokens would give 1)
    ("华为P40手机", "P40手机", 0, 0.75),  # run p40 手 机: P 1, R 3/5
    ("《红楼梦》", "红楼梦", 1, 1.0),
    ("Hello World", "hello world", 1, 1.0),
    ("张伟", "李娜", 0, 0.0),
])
def test_cmrc_exact_and_f1(gold, prediction, exact, f1):
    assert cmrc_exact(gold, prediction) == exact
    assert cmrc_f1(gold, prediction) == pytest.approx(f1)


def test_the_metric_follows_the_contexts_and_is_recorded():
    assert choose_metric(["张伟在杭州工作", "李娜是南京人", "Paris"]) == "cmrc2018"
    assert choose_metric(["Paris is in France", "张伟"]) == "squad"
    scores = qa_scores([["北京大学"], ["杭州西湖"]], ["北京大学医学部", "杭州西湖"], "cmrc2018")
    assert scores == {"metric": "cmrc2018", "exact": 0.5, "f1": pytest.approx((8 / 11 + 1) / 2), "total": 2}
