"""Inputs longer than the 512 positions of a BERT checkpoint, against bert4keras 0.11.5: hierarchical absolute
positions (P² positions from a table of P), and the families whose positions have no table (NEZHA's relative,
RoFormer's rotary) at 1,024 and 2,048 tokens; and the errors where a model cannot take such an input."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import ModelError, build_transformer_model

import helpers

LENGTHS = (1024, 2048)
P = 512  # the position table of BERT's checkpoints
BERT = {**helpers.TINY, "max_position_embeddings": P}
FAMILY = {**helpers.TINY, "hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128}
# name -> model=, extra build arguments (the same for both sides), the checkpoint folder
CASES = {
    "bert-hierarchical": ("bert", {"hierarchical_position": True}, "bert"),
    "bert-hierarchical-0.2": ("bert", {"hierarchical_position": 0.2}, "bert"),
    "nezha": ("nezha", {}, "nezha"),
    "roformer": ("roformer", {}, "roformer"),
    "roformer_v2": ("roformer_v2", {}, "roformer_v2"),
}


def _folder(work: str, name: str, config: dict) -> str:
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "bert_config.json"), "w") as f:
        json.dump(config, f)
    return folder


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    """One bert4keras run: it writes the NEZHA and RoFormer checkpoints, then predicts every case at each length
    (the BERT checkpoint is a random Google one)."""
    work = str(tmp_path_factory.mktemp("long_inputs"))
    folders = {"bert": _folder(work, "bert", BERT)}
    helpers.write_checkpoint(folders["bert"], helpers.random_google_weights(BERT, seed=3))
    tasks = []
    for family in ("nezha", "roformer", "roformer_v2"):
        folders[family] = _folder(work, family, FAMILY)
        tasks.append({"kind": "family_checkpoint", "model": family, "kwargs": {}, "seed": len(tasks), "std": 0.2,
                      "config": os.path.join(folders[family], "bert_config.json"),
                      "checkpoint": os.path.join(folders[family], "bert_model.ckpt")})
    cases = {}
    for name, (model, kwargs, writer) in CASES.items():
        for length in LENGTHS:
            inputs = os.path.join(work, f"{name}-{length}.npz")
            np.savez(inputs, **helpers.random_batch(BERT["vocab_size"], batch=2, length=length, seed=length))
            cases[name, length] = {"folder": folders[writer], "model": model, "kwargs": kwargs, "inputs": inputs,
                                   "index": len(tasks)}
            tasks.append(helpers.predict_task(folders[writer], inputs, model=model, **kwargs))
    return cases, helpers.run_oracle(tasks, work)


def _build(case: dict, **extra):
    return helpers.build_from(case["folder"], case["model"], **case["kwargs"], **extra)


@pytest.mark.parametrize("name", sorted(CASES))
def test_long_inputs_equal_bert4keras(oracle, name):
    cases, theirs = oracle
    model = _build(cases[name, LENGTHS[0]])
    for length in LENGTHS:
        case = cases[name, length]
        data = np.load(case["inputs"])
        mine = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
        ref = theirs[f"{case['index']}/0"]
        assert mine.shape == ref.shape == (2, length, model.output.shape[-1])
        np.testing.assert_allclose(mine, ref, atol=1e-5, rtol=0)


def test_a_fixed_long_sequence_length_equals_bert4keras(oracle):
    cases, theirs = oracle
    case = cases["bert-hierarchical", LENGTHS[0]]
    model = _build(case, sequence_length=LENGTHS[0])
    data = np.load(case["inputs"])
    mine = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
    np.testing.assert_allclose(mine, theirs[f"{case['index']}/0"], atol=1e-5, rtol=0)


def test_hierarchical_positions_keep_the_first_p():
    """The first P positions are the table's own rows; position P·i + j is α·U[i] + (1-α)·U[j]."""
    from keras import ops

    from kerasbert.modeling.layers import PositionEmbedding

    layer = PositionEmbedding(4, 3, embeddings_initializer="random_normal", hierarchical=0.4)
    out = ops.convert_to_numpy(layer(ops.zeros((1, 16, 3))))[0]
    table = ops.convert_to_numpy(layer.embeddings)
    np.testing.assert_allclose(out[:4], table, atol=1e-6)
    u = (table - 0.4 * table[:1]) / 0.6
    np.testing.assert_allclose(out[4 * 3 + 1], 0.4 * u[3] + 0.6 * u[1], atol=1e-6)


def _predict(model, length: int):
    batch = helpers.random_batch(model.bert_config.vocab_size, batch=2, length=length)
    return model.predict([batch["token_ids"], batch["segment_ids"]], verbose=0)


def test_a_bert_input_longer_than_its_positions_names_the_limit():
    import tensorflow as tf

    model = build_transformer_model(config={**helpers.TINY}, verbose=False)
    limit = "Input-Token: expected at most 64 tokens \\(max_position_embeddings\\)"
    with pytest.raises(ModelError, match=limit + ", found sequences of 65. .*hierarchical_position=True"):
        _predict(model, 65)
    for length in (10, 20, 30):  # Keras retraces predict for any length: the length is known only when run
        _predict(model, length)
    with pytest.raises(tf.errors.InvalidArgumentError, match=limit + ", found a longer sequence"):
        _predict(model, 65)


def test_a_sequence_length_beyond_the_positions_is_refused():
    with pytest.raises(ModelError, match="sequence_length: expected 1 to 64 \\(max_position_embeddings\\), found 65"):
        build_transformer_model(config={**helpers.TINY}, sequence_length=65, verbose=False)
    with pytest.raises(ModelError, match="sequence_length: expected 1 to 4096 \\(max_position_embeddings squared, "
                                         "hierarchical\\), found 4097"):
        build_transformer_model(config={**helpers.TINY}, sequence_length=64 ** 2 + 1, hierarchical_position=True,
                                verbose=False)


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "mixed_float16"])
def test_a_long_hierarchical_model_in_mixed_precision(dtype):
    model = build_transformer_model(config={**BERT}, hierarchical_position=True, dtype=dtype, verbose=False)
    out = _predict(model, LENGTHS[0])
    assert out.shape == (2, LENGTHS[0], BERT["hidden_size"])
    assert np.isfinite(out.astype(np.float32)).all()


@pytest.mark.parametrize("dtype", ["mixed_bfloat16", "mixed_float16"])
def test_hierarchical_positions_are_summed_in_float32(dtype):
    """In mixed precision the table stays float32 until the positions are summed: one rounding, at the end."""
    from keras import ops

    from kerasbert.modeling.layers import PositionEmbedding

    half = PositionEmbedding(P, 8, embeddings_initializer="random_normal", hierarchical=0.4, dtype=dtype)
    full = PositionEmbedding(P, 8, hierarchical=0.4)
    x = ops.zeros((1, 4 * P, 8))
    full.build(x.shape)
    y = half(ops.cast(x, half.compute_dtype))
    full.embeddings.assign(half.embeddings)
    assert y.dtype == half.compute_dtype
    np.testing.assert_array_equal(ops.convert_to_numpy(ops.cast(y, "float32")),
                                  ops.convert_to_numpy(ops.cast(ops.cast(full(x), y.dtype), "float32")))


def test_the_length_each_family_takes():
    from kerasbert.modeling import families
    from kerasbert.modeling.config import BertConfig

    config = BertConfig.from_dict(BERT)
    assert [families.max_length(name, config) for name in ("bert", "albert", "nezha", "roformer", "roformer_v2")] \
        == [P, P, None, None, None]
    assert families.max_length("bert", config, hierarchical=0.2) == P ** 2


def test_encoded_rows_longer_than_512_reach_the_model(oracle):
    """Nothing between the text and the model caps a row at the checkpoint's 512 positions."""
    from kerasbert.text.tokenizer import Tokenizer

    cases, _ = oracle
    tokenizer = Tokenizer({token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
    token_ids, segment_ids = tokenizer.encode_batch(["a b " * 1500, "b " * 900], maxlen=LENGTHS[1], padding=True)
    assert token_ids.shape == (2, LENGTHS[1]) and (token_ids[1] != 0).sum() == 902
    for name in ("bert-hierarchical", "roformer"):
        out = _build(cases[name, LENGTHS[0]]).predict([token_ids, segment_ids], verbose=0)
        assert out.shape[:2] == (2, LENGTHS[1]) and np.isfinite(out).all()


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_a_hierarchical_input_beyond_p_squared_fails(jit_compile):
    """Where the length is known only when run: an assert names the limit; XLA drops asserts, and the slice of the
    table that the positions read fails instead of a clamped gather."""
    import tensorflow as tf

    model = build_transformer_model(config={**helpers.TINY, "max_position_embeddings": 8}, hierarchical_position=True,
                                    verbose=False)
    model.jit_compile = jit_compile
    for length in (4, 5, 6):
        _predict(model, length)
    message = "Input-Token: expected at most 64 tokens" if not jit_compile else "Expected size"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        _predict(model, 65)
