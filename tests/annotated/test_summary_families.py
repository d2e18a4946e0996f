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
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs")
FAMILIES_PAGE, SUMMARY_PAGE = os.path.join(DOCS, "families.md"), os.path.join(DOCS, "summary.md")
WITH_E = {"albert", "albert_unshared", "electra", "roformer_v2"}  # families built here with embedding_size 16 ≠ H 32
# the pre-training layers each family has, built one at a time
FLAGS = {"bert": ({"with_pool": True}, {"with_nsp": True, "with_mlm": True}),
         "electra": ({"with_discriminator": True},), "roformer_v2": ({"with_mlm": True},),
         "roberta": ({"with_pool": True, "with_mlm": True},), "distilbert": ({"with_mlm": True},)}
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
              "Decoder-Embedding-Relative-Position": "N·A", "Encoder-Transformer-0-MultiHeadSelfAttention": "4·H·A·d",
              "Decoder-Transformer-0-MultiHeadSelfAttention": "4·H·A·d",
              "Decoder-Transformer-1-MultiHeadCrossAttention": "4·H·A·d",
              "Encoder-Transformer-1-FeedForward": "2·H·I+I·H",
              "Decoder-Transformer-0-FeedForward": "2·H·I+I·H", "Encoder-Transformer-0-FeedForward-Norm": "H",
              "Decoder-Transformer-0-MultiHeadCrossAttention-Norm": "H", "Encoder-Output-Norm": "H",
              "Decoder-Output-Norm": "H", "Decoder-Output-LM": "H·V"}
# T5.1.0: ReLU's one input matrix, and the output tied to Embedding-Token (a softmax row of no weights)
T5_1_0_SYMBOLS = {**{name: text for name, text in T5_SYMBOLS.items() if name != "Decoder-Output-LM"},
                  "Encoder-Transformer-1-FeedForward": "H·I+I·H", "Decoder-Transformer-0-FeedForward": "H·I+I·H",
                  "Decoder-Output-LM-Activation": "0"}
# an encoder layer: attention 4·12·3·5 = 720, its norm and the feed-forward's 12 each, the gated feed-forward
# 2·12·20+20·12 = 720 (T5.1.0's 12·20+20·12 = 480); a decoder layer adds the cross-attention and its norm;
# embeddings: V·H 600 and a 32·3 table per stack; the decoder's norm and H·V 600 feed the output
T5_TOTALS = {
    ("t5", ""): "Total 7,176 = embeddings 792 + 2 × 1,224 + 12 (encoder) + 2 × 1,956 (decoder) + mlm 12",
    ("t5", "_encoder"): "Total 3,156 = embeddings 696 + 2 × 1,224 + 12 (encoder)",
    ("t5", "_decoder"): "Total 4,620 = embeddings 696 + 2 × 1,956 (decoder) + mlm 12",
    ("t5.1.1", ""): "Total 8,736 = embeddings 792 + 2 × 1,464 + 12 (encoder) + 2 × 2,196 (decoder) + mlm 612",
    ("t5.1.1", "_encoder"): "Total 3,636 = embeddings 696 + 2 × 1,464 + 12 (encoder)",
    ("t5.1.1", "_decoder"): "Total 5,700 = embeddings 696 + 2 × 2,196 (decoder) + mlm 612"}


def _t5_symbols(family: str, part: str) -> dict:
    """The rows of ``family + part`` and their symbols: a part has its own stack's rows and the shared embedding."""
    symbols = T5_1_0_SYMBOLS if family == "t5" else T5_SYMBOLS
    other = {"_encoder": "Decoder-", "_decoder": "Encoder-"}.get(part)
    return {name: text for name, text in symbols.items() if other is None or not name.startswith(other)}


@pytest.mark.parametrize("part", ["", "_encoder", "_decoder"])
@pytest.mark.parametrize("family", ["t5", "t5.1.1", "mt5.1.1"])
def test_t5_adds_up_in_its_symbols(family, part):
    """T5 with d_kv 5 · 3 heads ≠ H 12: every row's formula is its count, in T5's symbols; the encoder's layers and
    the decoder's are totalled apart, each stack's final norm with the stack that ends with it."""
    config = {**T5_CONFIG, "hidden_act": "relu"} if family == "t5" else T5_CONFIG
    model = build_transformer_model(config=config, model=family + part, verbose=False)
    s = summary(model, **QUIET)
    assert s.mismatches == [] and s.params == s.formula_params == model.count_params()
    assert [r.name for r in s.rows if r.source == "generic" and r.params] == []
    for row in s.rows:
        assert row.formula is None or row.formula.value == row.params == sum(w.params for w in row.weights), row.name
    expected = _t5_symbols(family, part)
    symbols = {row.name: row.formula.symbols if row.formula else None for row in s.rows if row.name in expected}
    assert symbols == expected
    assert s.total_line() == T5_TOTALS["t5" if family == "t5" else "t5.1.1", part]


def test_cli_summary_prints_the_t5_rows(tmp_path, capsys):
    """The rows and the total line docs/summary.md shows for this T5.1.1."""
    config = tmp_path / "t5_config.json"
    config.write_text(json.dumps(T5_CONFIG))
    assert main(["summary", str(config), "--model", "t5.1.1", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip().split(" (")[0]: line.split("|")[4].strip() for line in out.splitlines()
            if line.startswith("| ") and "-" in line.split("|")[1]}
    assert {name: rows[name] for name in ("Encoder-Embedding-Relative-Position", "Decoder-Output-Norm",
                                          "Encoder-Transformer-0-FeedForward",
                                          "Decoder-Transformer-1-MultiHeadCrossAttention")} == {
        "Encoder-Embedding-Relative-Position": "N·A = 32·3", "Decoder-Output-Norm": "H = 12",
        "Encoder-Transformer-0-FeedForward": "2·H·I+I·H = 2·12·20+20·12",
        "Decoder-Transformer-1-MultiHeadCrossAttention": "4·H·A·d = 4·12·3·5"}
    assert T5_TOTALS["t5.1.1", ""] in out
    with open(SUMMARY_PAGE, encoding="utf-8") as f:
        page = " ".join(f.read().split())
    assert f"`{T5_TOTALS['t5.1.1', '']}`" in page and "`kerasbert summary t5_config.json --model t5.1.1`" in page
