"""The rerank task's data: pairs read from JSONL and TSV/CSV, their encoding, scores, and MRR@10 and nDCG@10 against
values worked out by hand from their definitions (and sklearn's nDCG where the gains agree, on 0/1 labels)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from kerasbert.errors import DataError
from kerasbert.text.rerank_data import (
    RerankExample,
    encode_pairs,
    examples_of_rows,
    iter_pairs,
    ranking_metrics,
    score_rows,
    scores_of,
)
from kerasbert.text.tokenizer import Tokenizer

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "谁", "在", "哪", "张", "伟", "工", "作"]


def write(tmp_path, name: str, content: str) -> str:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return str(path)


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


# ------------------------------------------------------------------------------------------- reading
def test_jsonl_pairs_with_graded_and_float_labels(tmp_path):
    path = write(tmp_path, "train.jsonl", jsonl({"query": "q", "passage": "a", "label": 2},
                                                {"query": "q", "passage": "b", "label": 0.5},
                                                {"query": "q", "passage": "c", "label": "0", "id": 7}))
    examples = list(iter_pairs(path))
    assert [(e.query, e.passage, e.label, e.line) for e in examples] == [("q", "a", 2.0, 1), ("q", "b", 0.5, 2),
                                                                         ("q", "c", 0.0, 3)]


@pytest.mark.parametrize("name, content", [("train.tsv", "q\ta\t1\nq\tb\t0\n"),
                                           ("train.tsv", "query\tpassage\tlabel\nq\ta\t1\nq\tb\t0\n"),
                                           ("train.csv", "q,a,1\nq,b,0\n")])
def test_tsv_and_csv_pairs_with_or_without_a_header(tmp_path, name, content):
    examples = list(iter_pairs(write(tmp_path, name, content)))
    assert [(e.query, e.passage, e.label) for e in examples] == [("q", "a", 1.0), ("q", "b", 0.0)]


def test_fields_by_name(tmp_path):
    path = write(tmp_path, "train.jsonl", jsonl({"question": "q", "doc": "a", "relevance": 3}))
    assert list(iter_pairs(path, "question", "doc", "relevance")) == [RerankExample("q", "a", 3.0)]


@pytest.mark.parametrize("content, words", [
    (jsonl({"query": "q", "passage": "a", "label": -1}), ("train.jsonl:1", "a number >= 0", "'-1'")),
    (jsonl({"query": "q", "passage": "a", "label": 1}, {"query": "q", "passage": "b", "label": "high"}),
     ("train.jsonl:2", "a number >= 0", "'high'")),
    (jsonl({"query": "q", "passage": "a", "label": "nan"}), ("train.jsonl:1", "'nan'")),
    (jsonl({"passage": "a", "label": 1}), ("train.jsonl:1", "field 'query'", "keys ['label', 'passage']")),
    (jsonl({"query": " ", "passage": "a", "label": 1}), ("train.jsonl:1", "expected a query", "an empty one")),
    (jsonl({"query": "q", "passage": None, "label": 1}), ("train.jsonl:1", "'passage'", "null")),
])
def test_bad_rows_are_one_error_naming_the_line(tmp_path, content, words):
    path = write(tmp_path, "train.jsonl", content)
    with pytest.raises(DataError) as caught:
        list(iter_pairs(path))
    for word in words:
        assert word in str(caught.value)


def test_an_empty_file_and_a_tsv_row_without_its_passage(tmp_path):
    with pytest.raises(DataError, match="empty file"):
        list(iter_pairs(write(tmp_path, "train.tsv", "")))
    with pytest.raises(DataError, match=r"train.tsv:2: expected 3 columns"):
        list(iter_pairs(write(tmp_path, "train.tsv", "q\ta\t1\nq\t0\n")))


def test_rows_for_prediction_keep_no_label():
    assert examples_of_rows(None, [{"query": "q", "passage": "a"}]) == [RerankExample("q", "a", None)]


# ------------------------------------------------------------------------------------------- encoding, scores
def test_a_pair_is_cls_query_sep_passage_sep_cut_longest_first():
    tokenizer = Tokenizer({token: i for i, token in enumerate(TOKENS)})
    features = encode_pairs(tokenizer, [RerankExample("谁在", "张伟工作"), RerankExample("谁在哪", "张伟工作")], 8)
    assert features.token_ids == [[2, 4, 5, 3, 7, 8, 9, 3], [2, 4, 5, 3, 7, 8, 9, 3]]
    assert features.segment_ids == [[0, 0, 0, 0, 1, 1, 1, 1]] * 2
    assert features.truncated == 2 and features.labels is None  # the passage lost its last piece, then the query


def test_scores_are_the_sigmoid_of_the_logits():
    logits = np.array([[-800.0], [-2.0], [0.0], [3.0], [800.0]])
    np.testing.assert_allclose(scores_of(logits), [0.0, 1 / (1 + math.e ** 2), 0.5, 1 / (1 + math.e ** -3), 1.0],
                               rtol=1e-12, atol=0)
    assert score_rows(None, None, {"score": np.array([0.75], np.float32)}) == [{"score": 0.75}]


# ------------------------------------------------------------------------------------------- MRR@10, nDCG@10
def test_relevant_at_rank_three_is_a_reciprocal_rank_of_a_third():
    scores = ranking_metrics(["q"] * 4, [0, 0, 1, 0], [0.9, 0.8, 0.7, 0.6])
    assert scores["mrr_at_10"] == pytest.approx(1 / 3)
    assert scores["ndcg_at_10"] == pytest.approx(1 / math.log2(4))  # the one gain, 2^1 - 1, at rank 3
    assert (scores["count"], scores["no_relevant"]) == (1, 0)


def test_graded_ndcg_worked_out_by_hand():
    # ranked by score: labels 0, 1, 2, 3; the best order is 3, 2, 1, 0; gains 2^rel - 1, discounts log2(rank + 1)
    scores = ranking_metrics(["q"] * 4, [0, 3, 2, 1], [0.9, 0.2, 0.5, 0.7])
    dcg = 0 / math.log2(2) + 1 / math.log2(3) + 3 / math.log2(4) + 7 / math.log2(5)
    ideal = 7 / math.log2(2) + 3 / math.log2(3) + 1 / math.log2(4) + 0 / math.log2(5)
    assert scores["ndcg_at_10"] == pytest.approx(dcg / ideal) and dcg / ideal == pytest.approx(0.547831, abs=1e-6)
    assert scores["mrr_at_10"] == pytest.approx(1 / 2)  # the first label > 0 at rank 2


def test_only_the_first_ten_ranks_count():
    labels, scores = [0] * 10 + [1, 1], [1 - i / 100 for i in range(12)]  # the relevant ones at ranks 11 and 12
    assert ranking_metrics(["q"] * 12, labels, scores) == {"mrr_at_10": 0.0, "ndcg_at_10": 0.0, "count": 1,
                                                           "no_relevant": 0}


def test_queries_are_averaged_and_one_without_relevant_passages_is_left_out():
    queries = ["a", "b", "a", "c", "b", "c"]  # grouped by text, wherever a pair is in the file
    scores = ranking_metrics(queries, [1, 0, 0, 0, 1, 0], [0.9, 0.8, 0.1, 0.5, 0.3, 0.4])
    assert scores["mrr_at_10"] == pytest.approx((1 + 1 / 2) / 2)  # a: rank 1; b: rank 2; c: none relevant
    assert scores["ndcg_at_10"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert (scores["count"], scores["no_relevant"]) == (2, 1)
    assert ranking_metrics(["c"], [0], [0.5]) == {"mrr_at_10": 0.0, "ndcg_at_10": 0.0, "count": 0, "no_relevant": 1}


def test_a_tie_keeps_the_files_order():
    assert ranking_metrics(["q"] * 3, [0, 1, 0], [0.5, 0.5, 0.5])["mrr_at_10"] == pytest.approx(1 / 2)


def test_binary_ndcg_is_sklearns():
    from sklearn.metrics import ndcg_score

    rng = np.random.default_rng(0)
    queries, labels, scores, ours = [], [], [], []
    for q in range(20):
        n = int(rng.integers(2, 16))
        gold, score = (rng.random(n) < 0.3).astype(float), rng.permutation(n) / n
        gold[rng.integers(n)] = 1.0
        queries += [str(q)] * n
        labels += gold.tolist()
        scores += score.tolist()
        ours.append(ndcg_score([gold], [score], k=10))
    assert ranking_metrics(queries, labels, scores)["ndcg_at_10"] == pytest.approx(np.mean(ours), abs=1e-12)
