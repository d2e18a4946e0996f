"""DeBERTa-v3's model: its buckets against the original's float64 formula, the first-token block, every task head,
the annotated summary, a ``.keras`` round trip, a training step, and what an encoder refuses.

Its numbers against keras-hub and transformers' equations are in tests/weights/test_deberta_weights.py.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
from keras import ops

from kerasbert import ModelError, build_transformer_model, heads
from kerasbert.annotated.collect import summary
from kerasbert.modeling import architecture
from kerasbert.modeling.deberta import DeBERTa
from kerasbert.modeling.deberta_layers import log_buckets

QUIET = {"print_fn": lambda text: None}
IDS = np.array([[1, 9, 17, 23, 5, 2, 0, 0], [1, 40, 2, 0, 0, 0, 0, 0]], "int32")


def _build(**options):
    return build_transformer_model("tiny", model="deberta_v3", verbose=False, **options)


def _inputs(model):
    return [IDS, np.zeros_like(IDS)][:len(model.inputs)]


@pytest.mark.parametrize("buckets, max_position", [(256, 512), (8, 64), (32, 64), (16, 128)])
def test_log_buckets_match_the_original_float64_formula(buckets, max_position):
    """DeBERTa's own ``make_log_bucket_position`` (NumPy, float64) over distances far past the table."""
    relative = np.arange(-4 * max_position, 4 * max_position)
    mid = buckets // 2
    near = (relative < mid) & (relative > -mid)
    distance = np.where(near, mid - 1, np.abs(relative))
    far = np.ceil(np.log(distance / mid) / np.log((max_position - 1) / mid) * (mid - 1)) + mid
    expected = np.where(distance <= mid, relative, far * np.sign(relative)).astype(int)
    np.testing.assert_array_equal(ops.convert_to_numpy(log_buckets(relative, buckets, max_position)), expected)


def test_the_architecture_is_deberta_and_the_first_token_head_runs_its_last_block_alone():
    backbone = _build()
    deberta = architecture.of(backbone)
    assert type(deberta) is DeBERTa and deberta.options.position_buckets == 32 and deberta.max_length is None
    model = heads.cls(backbone, 3)
    full = heads.cls(backbone, 3, first_token_only=False)
    full.set_weights(model.get_weights())
    assert "CLS-token" in [layer.name for layer in model.layers]
    np.testing.assert_allclose(model.predict(_inputs(model), verbose=0), full.predict(_inputs(full), verbose=0),
                               atol=1e-6)


@pytest.mark.parametrize("head", ["tagging", "crf", "spans", "qa", "relations", "mlm", "pretraining", "cls_mean",
                                  "cls_pooler", "embedding_cls", "embedding_mean", "embedding_first_last_avg"])
def test_every_task_head_takes_a_deberta_backbone(head):
    backbone = _build(with_mlm=True) if head == "pretraining" else _build()
    model = {"tagging": lambda: heads.tagging(backbone, 5), "crf": lambda: heads.tagging(backbone, 5, crf=True),
             "spans": lambda: heads.spans(backbone, 2, head_size=8), "qa": lambda: heads.qa(backbone),
             "relations": lambda: heads.relations(backbone, 2, head_size=8), "mlm": lambda: heads.mlm(backbone),
             "pretraining": lambda: heads.pretraining(backbone),
             "cls_mean": lambda: heads.cls(backbone, 2, pooling="mean"),
             "cls_pooler": lambda: heads.cls(backbone, 2, pooling="pooler"),
             "embedding_cls": lambda: heads.embedding(backbone, "cls"),
             "embedding_mean": lambda: heads.embedding(backbone, "mean"),
             "embedding_first_last_avg": lambda: heads.embedding(backbone, "first_last_avg")}[head]()
    extra = [np.array([[1, 2], [1, 0]], "int32")] if head == "pretraining" else []
    outputs = model.predict([*_inputs(backbone), *extra], verbose=0)
    assert all(np.isfinite(np.asarray(o, "float64")[np.isfinite(o)]).all() for o in
               (outputs if isinstance(outputs, list) else [outputs]))
    assert model.family == "deberta_v3"


def test_the_annotated_summary_adds_up_in_deberta_symbols():
    for model in (_build(), _build(with_mlm=True), _build(embedding_size=16, with_mlm=True)):
        s = summary(model, **QUIET)
        assert s.mismatches == [] and s.params == model.count_params() == s.formula_params
        assert [r.name for r in s.rows if r.source == "generic" and r.params] == []
    symbols = {row.name: row.formula.symbols for row in s.rows}
    assert {name: symbols[name] for name in ("Embedding-Token", "Embedding-Mapping", "Embedding-Norm",
                                             "Embedding-Relative-Buckets", "Embedding-Relative-Buckets-Norm",
                                             "Transformer-1-MultiHeadSelfAttention", "MLM-Dense")} == {
        "Embedding-Token": "V·E", "Embedding-Mapping": "E·H", "Embedding-Norm": "2·H",
        "Embedding-Relative-Buckets": "2·N·H", "Embedding-Relative-Buckets-Norm": "2·H",
        "Transformer-1-MultiHeadSelfAttention": "4·(H·H+H)", "MLM-Dense": "H·E+E"}
    # V·E 2,048 + T·E 32 + E·H 512 + 2·H 64 + 2·N·H 2,048 + 2·H 64; MLM H·E+E 528 + 2·E 32 + V 128
    assert s.total_line() == "Total 22,544 = embeddings 4,768 + 2 × 8,544 (encoder) + mlm 688"


def test_a_keras_file_loads_with_the_same_numbers(tmp_path):
    model = heads.tagging(_build(), 4)
    path = str(tmp_path / "deberta.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(loaded.predict(_inputs(loaded), verbose=0), model.predict(_inputs(model), verbose=0))


def test_one_training_step_moves_the_relative_table():
    model = heads.cls(_build(), 2)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy", jit_compile=False)
    table = model.get_layer("Embedding-Relative-Buckets")
    before = ops.convert_to_numpy(table.embeddings).copy()
    history = model.fit(_inputs(model), np.array([0, 1]), epochs=1, verbose=0)
    assert math.isfinite(history.history["loss"][0])
    assert not np.array_equal(ops.convert_to_numpy(table.embeddings), before)


@pytest.mark.parametrize("options, match", [
    ({"application": "lm"}, r"^application: expected \"encoder\" for model='deberta_v3', found 'lm'\. DeBERTa is an "
                            r"encoder only"),
    ({"application": "unilm"}, r"^application: expected \"encoder\" for model='deberta_v3', found 'unilm'"),
    ({"with_pool": True}, r"^with_pool: expected one of with_mlm for model='deberta_v3'"),
    ({"with_nsp": True}, r"^with_nsp: expected one of with_mlm for model='deberta_v3'")])
def test_an_encoder_only_refuses_a_language_model_and_bert_s_other_heads(options, match):
    with pytest.raises(ModelError, match=match):
        _build(**options)


def test_generation_is_refused_with_a_model_error():
    from kerasbert import generate

    with pytest.raises(ModelError, match=r"^model.application: expected \"lm\" or \"unilm\" to generate, found "
                                         r"'encoder'"):
        generate(_build(with_mlm=True), [[1, 5, 9]], max_length=3)
