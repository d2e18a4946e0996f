"""The reference parameter counts of BERT-base and BERT-large, in total and per layer."""

from __future__ import annotations

import pytest

from kerasbert import build_transformer_model


def count(model, prefix: str) -> int:
    return sum(layer.count_params() for layer in model.layers if layer.name.startswith(prefix))


@pytest.fixture(scope="module")
def base_chinese():
    return build_transformer_model("bert_base_chinese", verbose=False)


def test_bert_base_chinese_rows(base_chinese):
    rows = {layer.name: layer.count_params() for layer in base_chinese.layers}
    assert rows["Embedding-Token"] == 16226304  # V·H
    assert rows["Embedding-Segment"] == 1536  # T·H
    assert rows["Embedding-Position"] == 393216  # P·H
    assert rows["Embedding-Norm"] == 1536  # 2·H
    for i in range(12):
        assert rows[f"Transformer-{i}-MultiHeadSelfAttention"] == 2362368  # 4·(H·H+H)
        assert rows[f"Transformer-{i}-FeedForward"] == 4722432  # H·I+I+I·H+H
        assert rows[f"Transformer-{i}-MultiHeadSelfAttention-Norm"] == rows[f"Transformer-{i}-FeedForward-Norm"] == 1536
    assert base_chinese.count_params() == 101677056


def test_bert_base_chinese_with_pooler():
    assert build_transformer_model("bert_base_chinese", with_pool=True, verbose=False).count_params() == 102267648


def test_bert_base_uncased_split():
    model = build_transformer_model("bert_base_uncased", with_pool=True, verbose=False)
    assert count(model, "Embedding-") == 23837184
    assert count(model, "Transformer-") == 85054464
    assert count(model, "Pooler") == 590592
    assert model.count_params() == 109482240
