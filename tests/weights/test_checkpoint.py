"""load_google_checkpoint / save_google_checkpoint: the log, the report, path forms, errors, atomic save."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from kerasbert import CheckpointError, build_transformer_model, load_google_checkpoint, save_google_checkpoint
from kerasbert.weights.google import resolve_checkpoint

import helpers


def tiny(**kwargs):
    return build_transformer_model(config=dict(helpers.TINY), verbose=False, **kwargs)


def test_load_logs_every_variable_like_google(tiny_ckpt, log_lines):
    model = tiny(with_pool=True)
    report = load_google_checkpoint(model, os.path.join(tiny_ckpt, "bert_model.ckpt"))
    lines = log_lines()
    assert "  name = bert/embeddings/word_embeddings, shape = (128, 32), *INIT_FROM_CKPT*" in lines
    assert "  name = bert/encoder/layer_1/attention/self/value/kernel, shape = (32, 32), *INIT_FROM_CKPT*" in lines
    assert "  name = bert/pooler/dense/bias, shape = (32,), *INIT_FROM_CKPT*" in lines
    expected = set(helpers.google_shapes(helpers.TINY, heads=False))
    assert {name for name, _ in report.loaded} == expected
    assert report.new == []
    # the MLM and NSP variables were not asked for: listed as unused, in the log and in the report
    assert sorted(report.unused) == sorted(set(helpers.google_shapes(helpers.TINY)) - expected)
    assert any(line.startswith("  7 checkpoint variables not used: cls/predictions/output_bias") for line in lines)


def test_loaded_values_are_googles(tiny_ckpt):
    model = tiny(with_nsp=True, with_mlm=True)
    load_google_checkpoint(model, tiny_ckpt, verbose=False)
    values = helpers.random_google_weights(helpers.TINY, seed=1)  # what the fixture wrote
    attention = model.get_layer("Transformer-1-MultiHeadSelfAttention")
    q, k, v = np.split(attention.qkv_kernel.numpy(), 3, axis=1)
    np.testing.assert_array_equal(k, values["bert/encoder/layer_1/attention/self/key/kernel"])
    np.testing.assert_array_equal(model.get_layer("NSP-Proba").kernel.numpy(),
                                  values["cls/seq_relationship/output_weights"].T)
    np.testing.assert_array_equal(model.get_layer("MLM-Bias").bias.numpy(), values["cls/predictions/output_bias"])


@pytest.mark.parametrize("suffix", ["", "/bert_model.ckpt", "/bert_model.ckpt.index",
                                    "/bert_model.ckpt.data-00000-of-00001"])
def test_path_forms(tiny_ckpt, suffix):
    assert resolve_checkpoint(tiny_ckpt + suffix) == os.path.join(tiny_ckpt, "bert_model.ckpt")


def test_optimizer_slots_are_skipped_quietly(tmp_path):
    values = helpers.random_google_weights(helpers.TINY, heads=False)
    extra = {"global_step": np.array(7, np.int64),
             "bert/pooler/dense/kernel/adam_m": np.zeros((32, 32), np.float32),
             "output_weights": np.zeros((3, 32), np.float32)}
    helpers.write_checkpoint(str(tmp_path), {**values, **extra})
    report = load_google_checkpoint(tiny(), str(tmp_path), verbose=False)
    assert report.skipped == ["bert/pooler/dense/kernel/adam_m", "global_step"]
    assert "output_weights" in report.unused and "global_step" not in report.unused


def test_missing_checkpoint_path_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match=r"nope/bert_model.ckpt: expected a TF checkpoint .* no such checkpoint"):
        load_google_checkpoint(tiny(), str(tmp_path / "nope" / "bert_model.ckpt"))
    with pytest.raises(CheckpointError, match="expected a folder holding one checkpoint .* found no \\*.index file"):
        load_google_checkpoint(tiny(), str(tmp_path))


def test_vocab_mismatch_names_layer_shapes_and_hint(tmp_path):
    cfg = dict(helpers.TINY, vocab_size=300)
    helpers.write_checkpoint(str(tmp_path), helpers.random_google_weights(cfg))
    model = tiny()
    before = model.get_layer("Embedding-Norm").gamma.numpy().copy()
    with pytest.raises(CheckpointError) as info:
        load_google_checkpoint(model, str(tmp_path))
    assert str(info.value) == (f"Embedding-Token expects [128, 32], checkpoint has [300, 32] (bert/embeddings/"
                               f"word_embeddings in {tmp_path}/bert_model.ckpt): the model's vocab_size does not "
                               "match this checkpoint; build the model from the checkpoint's own bert_config.json")
    np.testing.assert_array_equal(model.get_layer("Embedding-Norm").gamma.numpy(), before)  # nothing assigned


def test_missing_variables_are_listed_unless_allowed(tmp_path, log_lines):
    helpers.write_checkpoint(str(tmp_path), helpers.random_google_weights(helpers.TINY, heads=False))
    with pytest.raises(CheckpointError, match=r"expected every variable the model needs, found 5 missing: "
                                              r"cls/predictions/transform/dense/kernel, .*allow_missing=True"):
        load_google_checkpoint(tiny(with_mlm=True), str(tmp_path))
    report = load_google_checkpoint(tiny(with_mlm=True), str(tmp_path), allow_missing=True)
    assert sorted(path for path, _ in report.new) == ["MLM-Bias/bias", "MLM-Dense/bias", "MLM-Dense/kernel",
                                                      "MLM-Norm/beta", "MLM-Norm/gamma"]
    assert "  name = MLM-Dense/kernel, shape = (32, 32), *NEW*" in log_lines()


def test_keep_tokens_beyond_checkpoint_vocab(tiny_ckpt):
    model = build_transformer_model(config=dict(helpers.TINY, vocab_size=200), keep_tokens=[0, 150], verbose=False)
    with pytest.raises(CheckpointError, match="keep_tokens: expected ids below the checkpoint's vocabulary 128, "
                                              "found max id 150"):
        load_google_checkpoint(model, tiny_ckpt, keep_tokens=[0, 150])


def test_save_has_google_names_and_shapes_and_round_trips(tmp_path, tiny_ckpt):
    model = tiny(with_nsp=True, with_mlm=True)
    load_google_checkpoint(model, tiny_ckpt, verbose=False)
    prefix = save_google_checkpoint(model, str(tmp_path))
    assert prefix == str(tmp_path / "bert_model.ckpt")
    reader = tf.train.load_checkpoint(str(tmp_path))  # folder form: the "checkpoint" state file resolves it
    assert {k: tuple(v) for k, v in reader.get_variable_to_shape_map().items()} == helpers.google_shapes(helpers.TINY)
    original = helpers.random_google_weights(helpers.TINY, seed=1)
    for name, value in original.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)
    assert sorted(os.listdir(tmp_path)) == ["bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
                                            "checkpoint"]


def test_failed_save_leaves_no_files(tmp_path, monkeypatch):
    real = tf.raw_ops.SaveV2

    def save_then_fail(**kwargs):
        real(**kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(tf.raw_ops, "SaveV2", save_then_fail)
    with pytest.raises(OSError, match="disk full"):
        save_google_checkpoint(tiny(), str(tmp_path / "bert_model.ckpt"))
    assert os.listdir(tmp_path) == []


def test_save_creates_its_folder_as_save_pretrained_does(tmp_path):
    prefix = save_google_checkpoint(tiny(), str(tmp_path / "new" / "deeper" / "bert_model.ckpt"))
    assert sorted(os.listdir(tmp_path / "new" / "deeper"))[1:] == ["bert_model.ckpt.index", "checkpoint"]
    assert load_google_checkpoint(tiny(), prefix, verbose=False).new == []
