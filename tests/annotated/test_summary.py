"""kerasbert.summary: the reference figures row by row and in total, formulas checked, groups, memory, forms."""

from __future__ import annotations

import json

import keras
import pytest

from kerasbert import ModelError, build_transformer_model, heads
from kerasbert.annotated.collect import annotate, collect, summary
from kerasbert.annotated.formulas import Formula
from kerasbert.annotated.report import render_markdown, render_plain
from kerasbert.modeling.layers import TakeToken

PRESETS = ["tiny", "bert_base_chinese", "bert_base_uncased", "bert_large_chinese"]
QUIET = {"print_fn": lambda text: None}

# Row figures for BERT-base: layer-name suffix -> (params, formula symbols, formula numbers)
BASE_ROWS = {
    "Embedding-Token": (16_226_304, "V·H", "21128·768"),
    "Embedding-Segment": (1_536, "T·H", "2·768"),
    "Embedding-Position": (393_216, "P·H", "512·768"),
    "Embedding-Norm": (1_536, "2·H", "2·768"),
    "MultiHeadSelfAttention": (2_362_368, "4·(H·H+H)", "4·(768·768+768)"),
    "FeedForward": (4_722_432, "H·I+I+I·H+H", "768·3072+3072+3072·768+768"),
    "MultiHeadSelfAttention-Norm": (1_536, "2·H", "2·768"),
    "FeedForward-Norm": (1_536, "2·H", "2·768"),
    "CLS-Dense": (1_538, "H·C+C", "768·2+2"),
}


@pytest.fixture(scope="module")
def base_cn():
    return build_transformer_model("bert_base_chinese", verbose=False)


@pytest.fixture(scope="module")
def classifier(base_cn):
    """BERT-base Chinese + Dense(2): CLS-token (x[:, 0]) + Dense(2, softmax), no pooler."""
    return heads.cls(base_cn, 2)


@pytest.fixture(scope="module")
def by_hand(base_cn):
    """The same classifier written by hand, as a user of bert4keras would."""
    x = TakeToken(0, name="CLS-token")(base_cn.output)
    return keras.Model(base_cn.inputs, keras.layers.Dense(2, activation="softmax", name="CLS-Dense")(x))


@pytest.fixture(scope="module")
def base_cn_pool():
    return build_transformer_model("bert_base_chinese", with_pool=True, verbose=False)


@pytest.fixture(scope="module")
def uncased_pool():
    return build_transformer_model("bert_base_uncased", with_pool=True, verbose=False)


@pytest.fixture(scope="module")
def large():
    return build_transformer_model("bert_large_chinese", verbose=False)


def groups(s) -> dict[str, int]:
    return {g.name: g.params for g in s.groups}


# ---------------------------------------------------------------------------------------------- reference figures
@pytest.mark.parametrize("fixture", ["classifier", "by_hand"])
def test_base_rows_match_design(request, fixture):
    s = summary(request.getfixturevalue(fixture), **QUIET)
    for row in s.rows:
        key = next((k for k in BASE_ROWS if row.name == k or row.name.endswith(f"-{k}") and
                    (k.endswith("Norm") or not row.name.endswith("Norm"))), None)
        if key is None or row.name.endswith(("-Dropout", "-Add")):
            continue
        params, symbols, numbers = BASE_ROWS[key]
        assert (row.params, row.formula.symbols, row.formula.numbers) == (params, symbols, numbers), row.name
        assert row.ok and not row.notes
    assert s.params == 101_678_594 == s.formula_params
    assert groups(s) == {"embeddings": 16_622_592, "encoder": 85_054_464, "head": 1_538}
    assert s.total_line() == "Total 101,678,594 = embeddings 16,622,592 + 12 × 7,087,872 (encoder) + head 1,538"


def test_backbone_without_and_with_pooler(base_cn, base_cn_pool):
    assert summary(base_cn, **QUIET).params == 101_677_056
    s = summary(base_cn_pool, **QUIET)
    assert s.params == 102_267_648 == base_cn_pool.count_params()
    assert groups(s)["pooler"] == 590_592
    assert [(r.formula.symbols, r.params) for r in s.rows if r.name == "Pooler-Dense"] == [("H·H+H", 590_592)]


def test_uncased_groups_and_shares(uncased_pool):
    s = summary(uncased_pool, **QUIET)
    assert groups(s) == {"embeddings": 23_837_184, "encoder": 85_054_464, "pooler": 590_592}
    assert s.params == 109_482_240
    assert [f"{100 * g.share:.2f}%" for g in s.groups] == ["21.77%", "77.69%", "0.54%"]
    assert all(share in s.render("text") for share in ("21.77%", "77.69%", "0.54%"))


def test_large_total(large):
    s = summary(large, **QUIET)
    assert s.total_line() == "Total 324,472,832 = embeddings 22,163,456 + 24 × 12,596,224 (encoder)"
    assert large.count_params() == 324472832  # BERT-large's figures, layer by layer:
    for prefix, params in (("Embedding-", 22163456), ("Transformer-0-", 12596224), ("Transformer-23-", 12596224)):
        assert sum(layer.count_params() for layer in large.layers if layer.name.startswith(prefix)) == params


def test_heads_figures(base_cn):
    tagger = summary(heads.tagging(base_cn, 11), **QUIET)
    assert [(r.params, r.formula.symbols, r.formula.numbers) for r in tagger.rows if r.name == "Tagging-Dense"] \
        == [(8_459, "H·K+K", "768·11+11")]
    assert groups(tagger)["head"] == 8_459
    crf = summary(heads.tagging(base_cn, 11, crf=True), **QUIET)
    assert groups(crf)["head"] == 8_459 + 121


def test_hand_count_slip_is_visible_in_groups(classifier):
    """The hand count 75,641,856 = embeddings + ONE attention layer's kernels + 12 × (FFN kernels + 2 Norms)."""
    s = summary(classifier, **QUIET)
    rows = {r.name: r for r in s.rows}
    encoder = next(g for g in s.groups if g.name == "encoder")
    assert (encoder.blocks, encoder.per_block) == (12, 7_087_872)

    def kernels(name):
        return sum(w.params for w in rows[name].weights if w.name.endswith("kernel"))

    attention, ffn = "Transformer-0-MultiHeadSelfAttention", "Transformer-0-FeedForward"
    per_layer_by_hand = kernels(ffn) + rows[f"{attention}-Norm"].params + rows[f"{ffn}-Norm"].params
    assert (kernels(attention), per_layer_by_hand) == (2_359_296, 4_721_664)
    assert groups(s)["embeddings"] + kernels(attention) + 12 * per_layer_by_hand == 75_641_856
    missing = 11 * rows[attention].params + 4 * 768 + 12 * (3072 + 768) + groups(s)["head"]
    assert s.params - 75_641_856 == missing == 26_036_738


# ------------------------------------------------------------------------------------------- every formula checked
def _models_of(preset: str):
    """Every model the project builds from one preset (one encoder layer, so it stays fast)."""
    backbone = build_transformer_model(preset, num_hidden_layers=1, verbose=False)
    yield "backbone", backbone
    for flags in ({"with_pool": True}, {"with_nsp": True}, {"with_mlm": True}, {"with_nsp": True, "with_mlm": True}):
        yield str(flags), build_transformer_model(preset, num_hidden_layers=1, verbose=False, **flags)
    yield "cls", heads.cls(backbone, 3, dropout=0.1)
    yield "cls-mean", heads.cls(backbone, 2, pooling="mean")
    yield "cls-pooler", heads.cls(backbone, 2, pooling="pooler")
    yield "tagging", heads.tagging(backbone, 7, dropout=0.1)
    yield "tagging-crf-bilstm", heads.tagging(backbone, 7, crf=True, bilstm_units=16)
    yield "mlm", heads.mlm(backbone)
    yield "nsp", heads.nsp(backbone)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_formula_equals_the_real_count(preset):
    for what, model in _models_of(preset):
        s = summary(model, **QUIET)
        assert s.mismatches == [], (preset, what)
        assert s.params == model.count_params() == s.formula_params, (preset, what)
        generic = [r.name for r in s.rows if r.source == "generic" and r.params]
        assert generic == [], (preset, what)
        for row in s.rows:
            assert row.formula.value == row.params == (row.weights and sum(w.params for w in row.weights) or 0)


def test_builtin_table_names_symbols():
    backbone = build_transformer_model("tiny", verbose=False)
    s = summary(heads.tagging(backbone, 5, crf=True, bilstm_units=8), **QUIET)
    formulas = {r.name: (r.source, r.formula.symbols) for r in s.rows if r.params}
    assert formulas["Tagging-BiLSTM"] == ("builtin", "2·4·(H·U+U·U+U)")
    assert formulas["Tagging-Dense"] == ("builtin", "D·K+K")  # input 2·U = 16, not H
    assert formulas["Tagging-CRF"] == ("layer", "K·K")
    conv = keras.Sequential([keras.Input((None, 6)), keras.layers.Conv1D(4, 3), keras.layers.GRU(5)])
    assert [(r.source, str(r.formula)) for r in summary(conv, **QUIET).rows] == [
        ("builtin", "3·H·F+F = 3·6·4+4"), ("builtin", "3·(D·U+U·U+2·U) = 3·(4·5+5·5+2·5)")]


class WrongDense(keras.layers.Dense):
    """A layer whose stated formula forgets its bias."""

    def param_formula(self) -> Formula:
        return Formula.of("H·C", H=int(self.kernel.shape[0]), C=self.units)


class NoFormula(keras.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], 3), name="w")

    def call(self, x):
        return keras.ops.matmul(x, self.w)


def test_wrong_formula_is_flagged_never_hidden():
    backbone = build_transformer_model("tiny", verbose=False)
    model = keras.Model(backbone.inputs, WrongDense(2, name="CLS-Dense")(TakeToken(0)(backbone.output)))
    s = summary(model, **QUIET)
    row = next(r for r in s.rows if r.name == "CLS-Dense")
    assert not row.ok and row.notes[0] == "MISMATCH: formula gives 64, the layer has 66"
    assert s.mismatches == ["CLS-Dense"] and s.params == 23_426 and s.formula_params == 23_424
    assert "MISMATCH" in s.total_line() and "formulas give 23,424" in s.total_line()
    for text in (s.render("text"), s.render("markdown"), render_plain(s)):
        assert "! 66" in text and "MISMATCH" in text
    assert json.loads(s.render("json"))["mismatches"] == ["CLS-Dense"]


def test_generic_formula_is_marked():
    model = keras.Sequential([keras.Input((4,)), NoFormula(name="custom")])
    row = summary(model, **QUIET).rows[0]
    assert (row.source, str(row.formula), row.ok) == ("generic", "4·3 = 4·3", True) or \
        (row.source, row.formula.numbers, row.ok) == ("generic", "4·3", True)
    assert "generic formula from the weight shapes" in row.notes


# ------------------------------------------------------------------------------------------- sharing, nesting
def test_tied_mlm_embedding_is_counted_once():
    model = build_transformer_model("tiny", with_mlm=True, verbose=False)
    s = summary(model, **QUIET)
    token = next(r for r in s.rows if r.name == "Embedding-Token")
    assert token.notes == ["shared: also called on MLM-Norm -> (None, None, 128); weights counted once"]
    assert s.params == model.count_params() == 23_360 + 32 * 32 + 32 + 64 + 128
    assert groups(s)["mlm"] == 32 * 32 + 32 + 64 + 128  # MLM-Dense, MLM-Norm, MLM-Bias; Eᵀ is Embedding-Token's


def test_nested_model_rows_and_tied_weight_across_layers():
    inner = build_transformer_model("tiny", verbose=False)
    inputs = [keras.Input((None,), dtype="int32"), keras.Input((None,), dtype="int32")]
    model = keras.Model(inputs, keras.layers.Dense(2, name="CLS-Dense")(TakeToken(0)(inner(inputs))))
    s = summary(model, **QUIET)
    nested = next(r for r in s.rows if r.name == "bert")
    assert (nested.source, nested.counted, nested.params) == ("nested", 0, 23_360)
    assert s.params == model.count_params() == 23_426 and s.mismatches == []
    assert {r.depth for r in s.rows if r.name.startswith("Transformer-")} == {1}
    assert s.total_line() == "Total 23,426 = embeddings 6,272 + 2 × 8,544 (encoder) + head 66"


# ------------------------------------------------------------------------------------------- memory
def test_memory_weights_adam_and_activation_estimate():
    model = build_transformer_model("tiny", verbose=False)
    model.get_layer("Embedding-Position").trainable = False
    s = summary(model, batch_size=4, seq_len=16, **QUIET)
    assert s.memory.weights == {"float32": 4 * 23_360, "bfloat16": 2 * 23_360, "float16": 2 * 23_360}
    assert (s.trainable, s.non_trainable) == (23_360 - 2_048, 2_048)
    assert s.memory.adam_training == 16 * (23_360 - 2_048) + 4 * 2_048
    act = s.memory.activations
    # 2 int32 inputs and a bool mask [4, 16]; every other output is [4, 16, 32] float32 (6 + 8 per layer);
    # inside each layer: attention qkv + context B·S·4H and scores + probs 2·B·A·S², feed-forward inner 2·B·S·I
    inside = 2 * (64 * 4 * 32 + 2 * 4 * 2 * 16 * 16 + 2 * 64 * 64)
    assert act.elements == 3 * 64 + (6 + 2 * 8) * 64 * 32 + inside
    assert act.bytes == 2 * 64 * 4 + 64 + ((6 + 2 * 8) * 64 * 32 + inside) * 4
    assert act.formula.startswith("estimate:") and "Activations (estimate, batch 4, seq 16)" in s.render()


def test_activation_estimate_counts_the_cls_only_block_at_one_query():
    """The classifier runs its last block for [CLS] alone: that block's attention keeps q, scores, probs and
    context for one query (k and v for all S), its feed-forward one position; node outputs are [B, H] too."""
    trimmed, full = (heads.cls(build_transformer_model("tiny", verbose=False), 2, first_token_only=only)
                     for only in (True, False))
    b, s, h, a, i = 4, 16, 32, 2, 64
    fewer = {"attention inside": b * h * 2 * (s - 1) + 2 * b * a * (s - 1) * s,  # q, context; scores, probs
             "feed-forward inside": 2 * b * (s - 1) * i}
    # outputs [B, H] instead of [B, S, H]: the block's 8 layers (attention, feed-forward, each with its dropout,
    # add and norm); CLS-token outputs [B, H] in both
    fewer["outputs"] = 8 * b * (s - 1) * h
    estimate = {name: collect(m, batch_size=b, seq_len=s).memory.activations.elements
                for name, m in (("trimmed", trimmed), ("full", full))}
    assert estimate["full"] - estimate["trimmed"] == sum(fewer.values())


class ReportsActivations(keras.layers.Layer):
    def call(self, x):
        return x

    def activation_elements(self, batch_size, seq_len, queries):
        return batch_size * queries * 100


def test_activation_hook_and_missing_seq_len():
    model = keras.Sequential([keras.Input((None, 8)), ReportsActivations()])
    assert collect(model, batch_size=2, seq_len=3).memory.activations.elements == 2 * 3 * 8 + 600  # output + hook
    with pytest.raises(ModelError, match="seq_len: expected a sequence length"):
        collect(model, batch_size=2)


# ------------------------------------------------------------------------------------------- output forms
def test_forms_hold_the_same_figures():
    model = build_transformer_model("tiny", verbose=False)
    printed = []
    s = summary(model, expand=True, print_fn=printed.append)
    assert len(printed) == 1 and printed[0] == s.render("text")
    for text in (printed[0], render_plain(s), render_markdown(s)):
        assert s.total_line() in text and "V·H = 128·32" in text and "qkv_kernel" in text and "[32, 96]" in text
    assert render_markdown(s).splitlines()[2].startswith("| Layer (type) | Output Shape | Param # |")
    data = json.loads(s.render("json"))
    assert set(data) >= {"rows", "groups", "params", "trainable", "memory", "total_line", "mismatches"}
    token = next(r for r in data["rows"] if r["name"] == "Embedding-Token")
    assert token["formula"] == {"symbols": "V·H", "numbers": "128·32", "value": 4096, "text": "V·H = 128·32"}
    assert token["ok"] and token["weights"][0]["shape"] == [128, 32]


def test_annotate_changes_only_that_model():
    model, other = build_transformer_model("tiny", verbose=False), build_transformer_model("tiny", verbose=False)
    assert annotate(model) is model
    printed = []
    assert model.summary(print_fn=printed.append).params == 23_360
    assert "V·H = 128·32" in printed[0]
    keras_lines = []
    other.summary(print_fn=keras_lines.append)
    assert "V·H" not in "".join(keras_lines) and "Total params" in "".join(keras_lines)
    del model.summary
    assert model.summary.__func__ is keras.Model.summary


# ------------------------------------------------------------------------------------------- bad input
class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(2)

    def call(self, x):
        return self.dense(x)


def test_unbuilt_model_is_one_clear_error():
    with pytest.raises(ModelError, match="expected a built model, found a model that was never built or called"):
        summary(Subclassed(), **QUIET)
    model = Subclassed()
    model(keras.ops.zeros((1, 3)))
    assert summary(model, **QUIET).params == 8


def test_bad_format_and_non_model():
    model = build_transformer_model("tiny", verbose=False)
    with pytest.raises(ModelError, match="format: expected one of text, markdown, json, found 'html'"):
        summary(model, format="html")
    with pytest.raises(ModelError, match="expected a Keras model, found str"):
        summary("bert")
