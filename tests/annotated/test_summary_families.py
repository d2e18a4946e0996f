"""kerasbert.summary on every model family: formulas in the family's symbols, totals, ALBERT's shared block, and
pinned figures for one published configuration of each family."""

from __future__ import annotations

import json
import os
import re

import pytest

from kerasbert import build_transformer_model
from kerasbert.annotated.collect import summary
from kerasbert.cli import main
from kerasbert.modeling import families

QUIET = {"print_fn": lambda text: None}
FAMILIES_PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                             "families.md")
WITH_E = {"albert", "albert_unshared", "electra", "roformer_v2"}  # families built here with embedding_size 16 ≠ H 32
# the pre-training layers each family has, built one at a time
FLAGS = {"bert": ({"with_pool": True}, {"with_nsp": True, "with_mlm": True}),
         "electra": ({"with_discriminator": True},), "roformer_v2": ({"with_mlm": True},)}
# row name -> formula symbols, per family (tiny config; E 16 where the family has one)
EMBEDDING_ROWS = {"Embedding-Token": "V·E", "Embedding-Segment": "T·E", "Embedding-Position": "P·E",
                  "Embedding-Norm": "2·E", "Embedding-Mapping": "E·H+H"}
SYMBOLS = {
    "albert": {**EMBEDDING_ROWS, "Transformer-MultiHeadSelfAttention": "4·(H·H+H)",
               "Transformer-FeedForward": "H·I+I+I·H+H", "Transformer-FeedForward-Norm": "2·H", "MLM-Dense": "H·E+E",
               "MLM-Bias": "V"},
    "electra": {**EMBEDDING_ROWS, "Transformer-1-MultiHeadSelfAttention": "4·(H·H+H)",
                "Discriminator-Dense": "H·H+H", "Discriminator-Prediction": "H·K+K"},
    "nezha": {"Embedding-Token": "V·H", "Embedding-Segment": "T·H", "Embedding-Norm": "2·H",
              "Transformer-0-MultiHeadSelfAttention": "4·(H·H+H)", "MLM-Dense": "H·H+H"},
    "roformer": {"Embedding-Token": "V·H", "Embedding-Norm": "2·H", "Transformer-0-FeedForward": "H·I+I+I·H+H"},
    "roformer_v2": {"Embedding-Token": "V·E", "Embedding-Segment": "T·E", "Embedding-Mapping": "E·H",
                    "Transformer-0-MultiHeadSelfAttention": "4·H·H", "Transformer-0-FeedForward": "H·I+I·H",
                    "Output-Mapping": "H·E"},
}
# the total line of one published configuration per family (the backbone, as build_transformer_model returns it)
PINNED = {
    ("albert_tiny_zh", None): "Total 3,982,864 = embeddings 2,810,680 + encoder 1,172,184 (1 block shared by 4 layers)",
    ("albert_tiny_zh", "albert_unshared"): "Total 7,499,416 = embeddings 2,810,680 + 4 × 1,172,184 (encoder)",
    ("albert_base_zh", None): "Total 9,957,376 = embeddings 2,869,504 + encoder 7,087,872 (1 block shared by 12 "
                              "layers)",
    ("electra_small_zh", None): "Total 12,280,576 = embeddings 2,803,456 + 12 × 789,760 (encoder)",
    ("electra_base_zh", None): "Total 101,677,056 = embeddings 16,622,592 + 12 × 7,087,872 (encoder)",
    ("nezha_base_zh", None): "Total 101,283,840 = embeddings 16,229,376 + 12 × 7,087,872 (encoder)",
    ("roformer_base_zh", None): "Total 123,457,536 = embeddings 38,403,072 + 12 × 7,087,872 (encoder)",
    ("roformer_v2_base_zh", "roformer_v2"): "Total 94,152,192 = embeddings 9,217,536 + 12 × 7,077,888 (encoder)",
}


def _family_models(name: str):
    """The backbone of ``name`` on the tiny config (E 16 where the family has one), then with each of its
    pre-training layers."""
    extra = {"embedding_size": 16} if name in WITH_E else {}
    yield "backbone", build_transformer_model("tiny", model=name, verbose=False, **extra)
    for flags in FLAGS[families.get(name).heads]:
        yield str(flags), build_transformer_model("tiny", model=name, verbose=False, **extra, **flags)


@pytest.mark.parametrize("name", families.ENCODER_NAMES)
def test_every_family_adds_up(name):
    for what, model in _family_models(name):
        s = summary(model, **QUIET)
        assert s.mismatches == [] and s.params == model.count_params() == s.formula_params, (name, what)
        assert sum(g.params for g in s.groups) == model.count_params(), (name, what)
        assert [r.name for r in s.rows if r.source == "generic" and r.params] == [], (name, what)
        for row in s.rows:
            assert row.formula.value == row.params == sum(w.params for w in row.weights), (name, what, row.name)


@pytest.mark.parametrize("name", sorted(SYMBOLS))
def test_rows_read_in_the_family_symbols(name):
    flags = {"electra": {"with_discriminator": True}}.get(name, {"with_mlm": True})
    extra = {"embedding_size": 16} if name in WITH_E else {}
    s = summary(build_transformer_model("tiny", model=name, verbose=False, **extra, **flags), **QUIET)
    symbols = {row.name: row.formula.symbols for row in s.rows}
    assert {key: symbols.get(key) for key in SYMBOLS[name]} == SYMBOLS[name]
    if families.get(name).positions != "absolute":  # NEZHA and RoFormer: no position table, no P row
        assert "Embedding-Position" not in symbols and not any("P" in text for text in symbols.values())


def test_albert_shared_block_is_one_set_of_rows_marked_shared():
    model = build_transformer_model("tiny", model="albert", embedding_size=16, num_hidden_layers=3, verbose=False)
    s = summary(model, **QUIET)
    encoder = [row for row in s.rows if row.group == "encoder"]
    assert [row.name for row in encoder] == [
        "Transformer-MultiHeadSelfAttention", "Transformer-MultiHeadSelfAttention-Dropout",
        "Transformer-MultiHeadSelfAttention-Add", "Transformer-MultiHeadSelfAttention-Norm",
        "Transformer-FeedForward", "Transformer-FeedForward-Dropout", "Transformer-FeedForward-Add",
        "Transformer-FeedForward-Norm"]
    weightless = {"Transformer-MultiHeadSelfAttention-Dropout", "Transformer-MultiHeadSelfAttention-Add",
                  "Transformer-FeedForward-Dropout", "Transformer-FeedForward-Add"}
    assert all(row.calls == 3 for row in encoder)
    assert {row.name: row.notes for row in encoder} == {
        row.name: ["called in 3 layers; no weights"] if row.name in weightless
        else ["shared by 3 layers; weights counted once"] for row in encoder}
    assert all(bool(row.weights) == (row.name not in weightless) for row in encoder)
    group = next(g for g in s.groups if g.name == "encoder")
    assert (group.params, group.blocks, group.per_block, group.shared_by) == (8_544, 0, None, 3)
    assert s.total_line() == "Total 12,224 = embeddings 3,680 + encoder 8,544 (1 block shared by 3 layers)"
    assert "1 block shared by 3 layers" in s.render("markdown")
    assert json.loads(s.render("json"))["groups"][1]["shared_by"] == 3


@pytest.mark.parametrize("preset, model", sorted(PINNED, key=str))
def test_published_configs_pinned(preset, model):
    built = build_transformer_model(preset, model=model, verbose=False)
    s = summary(built, **QUIET)
    assert s.total_line() == PINNED[preset, model]
    assert s.params == built.count_params() and s.mismatches == []


def test_the_families_page_shows_the_pinned_counts():
    """docs/families.md's table gives each preset's count as pinned here (BERT's as tests/annotated/test_summary.py
    pins them)."""
    with open(FAMILIES_PAGE, encoding="utf-8") as f:
        shown = {(preset, model): int(count.replace(",", "")) for preset, model, count in
                 re.findall(r'`(\w+)`(?: with `model="(\w+)"`)? \(([\d,]+)\)', f.read())}
    pinned = {key: int(re.match(r"Total ([\d,]+)", line).group(1).replace(",", "")) for key, line in PINNED.items()}
    bert = {("tiny", ""): 23_360, ("bert_base_chinese", ""): 101_677_056, ("bert_base_uncased", ""): 108_891_648,
            ("bert_large_chinese", ""): 324_472_832}
    assert shown == {**bert, **{(preset, model or ""): count for (preset, model), count in pinned.items()}}


def test_cli_summary_takes_the_family(capsys):
    assert main(["summary", "tiny", "--model", "nezha", "--format", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert "Embedding-Relative-Position" in rows and "Embedding-Position" not in rows
    assert main(["summary", "tiny", "--model", "gpt2", "--format", "json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert "Output-Norm" in rows and "Embedding-Segment" not in rows
    assert main(["summary", "tiny", "--model", "gpt3"]) == 2
    assert "argument --model: invalid choice: 'gpt3' (choose from 'bert', 'albert'" in capsys.readouterr().err


GPT_ROWS = {"gpt": {"Embedding-Segment": "T·H", "Transformer-0-MultiHeadSelfAttention-Norm": "2·H",
                    "LM-Activation": "0"},
            "gpt2": {"Transformer-0-MultiHeadSelfAttention-Norm": "2·H", "Output-Norm": "2·H", "Output-Dropout": "0",
                     "LM-Activation": "0"},
            "gpt2_ml": {"Embedding-Norm": "2·H", "Transformer-1-FeedForward-Norm-0": "2·H",
                        "Transformer-1-FeedForward-Norm-1": "2·H"}}


@pytest.mark.parametrize("name", sorted(GPT_ROWS))
def test_gpt_families_add_up_in_their_symbols(name):
    """The GPT language models: every row's formula is its count, the tied output adds no row of weights, and
    GPT-2's final norm is counted with the language model's layers."""
    model = build_transformer_model("tiny", model=name, verbose=False)
    s = summary(model, **QUIET)
    assert s.mismatches == [] and s.params == model.count_params() == s.formula_params
    assert [r.name for r in s.rows if r.source == "generic" and r.params] == []
    symbols = {row.name: row.formula.symbols for row in s.rows}
    assert {key: symbols.get(key) for key in GPT_ROWS[name]} == GPT_ROWS[name]
    assert s.total_line().endswith("+ mlm 64") == (name == "gpt2")  # Output-Norm's 2·H


T5_CONFIG = {"vocab_size": 50, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
             "attention_head_size": 5, "intermediate_size": 20, "hidden_act": ["gelu", "linear"],
             "relative_attention_num_buckets": 32}
T5_SYMBOLS = {"Embedding-Token": "V·H", "Encoder-Embedding-Relative-Position": "N·A",
              "Encoder-Transformer-0-MultiHeadSelfAttention": "4·H·A·d",
              "Decoder-Transformer-1-MultiHeadCrossAttention": "4·H·A·d",
              "Encoder-Transformer-1-FeedForward": "2·H·I+I·H", "Decoder-Transformer-0-FeedForward-Norm": "H",
              "Decoder-Output-LM": "H·V"}


def test_t5_adds_up_in_its_symbols():
    """T5.1.1 with d_kv 5 · 3 heads ≠ H 12: attention 4·12·3·5 = 720, the gated feed-forward 2·12·20+20·12 = 720,
    each RMS gain 12, each relative table 32·3; an encoder block 1,464 and a decoder block 2,196 sum to 3,660."""
    s = summary(build_transformer_model(config=T5_CONFIG, model="t5.1.1", verbose=False), **QUIET)
    assert s.mismatches == [] and s.params == s.formula_params == 8_736
    assert {row.name: row.formula.symbols for row in s.rows if row.name in T5_SYMBOLS} == T5_SYMBOLS
    assert s.total_line() == "Total 8,736 = embeddings 792 + 2 × 3,660 (encoder) + mlm 624"
