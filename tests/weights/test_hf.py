"""Hugging Face checkpoints: loading (safetensors, shards), parity with keras-hub and bert4keras, saving, converting.

The Hugging Face folders here are written by the test from random Google-named weights with a mapping of its
own (`hf_tensors`), not by kerasbert, so a wrong name or a missing transpose in kerasbert's table shows up as a
difference against keras-hub's loader (which reads the same folder) and against bert4keras (which reads the
folder converted to a Google checkpoint).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from safetensors.numpy import save_file

from kerasbert import CheckpointError, ConfigError, build_transformer_model
from kerasbert.cli import main
from kerasbert.weights.checkpoint import load_checkpoint
from kerasbert.weights.convert import convert_checkpoint
from kerasbert.weights.hf import hf_config_dict, save_hf_checkpoint

import helpers
from conftest import BASE2

ATOL = 1e-5
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"t{i}" for i in range(123)]


def hf_name(google: str, legacy_norm: bool = False, prefix: str = "bert.") -> str:
    """The Hugging Face name of a Google variable, by the test's own rules."""
    special = {"cls/predictions/output_bias": "cls.predictions.bias",
               "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
               "cls/seq_relationship/output_bias": "cls.seq_relationship.bias"}
    if google in special:
        return special[google]
    name = google.replace("layer_", "layer/").replace("/", ".")
    name = name.replace(".kernel", ".weight").replace("_embeddings", "_embeddings.weight")
    if not legacy_norm:
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    return prefix + name[len("bert."):] if name.startswith("bert.") else name


def hf_tensors(google: dict[str, np.ndarray], **options) -> dict[str, np.ndarray]:
    """Google-named values as Hugging Face stores them: renamed, linear weights ``[out, in]``."""
    return {hf_name(name, **options): np.ascontiguousarray(value.T if name.endswith("kernel") else value)
            for name, value in google.items()}


def write_hf_folder(folder: str, cfg: dict, tensors: dict[str, np.ndarray], config_extra=None) -> str:
    os.makedirs(folder, exist_ok=True)
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "bert", "architectures": ["BertForPreTraining"], **cfg, **(config_extra or {})}, f)
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB + [f"u{i}" for i in range(cfg["vocab_size"] - len(VOCAB))]) + "\n")
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """``{name: (hf folder, google weights)}`` for the tiny config and BERT-base shapes with two layers."""
    out = {}
    for name, cfg, seed in (("tiny", helpers.TINY, 11), ("base2", BASE2, 12)):
        google = helpers.random_google_weights(cfg, seed=seed, std=0.2 if name == "tiny" else 0.02)
        out[name] = (write_hf_folder(str(tmp_path_factory.mktemp(f"hf-{name}")), cfg, hf_tensors(google)), google)
    return out


def tanh_gelu_twin(folders, name: str, tmp_path) -> str:
    """The folder ``name`` with ``hidden_act`` gelu_new: keras-hub's BERT computes GELU with tanh, whatever the
    config says, and so must the model it is compared with."""
    cfg = dict(helpers.TINY if name == "tiny" else BASE2, hidden_act="gelu_new")
    return write_hf_folder(str(tmp_path / f"{name}-tanh"), cfg, hf_tensors(folders[name][1]))


def outputs(folder: str, batch: dict, checkpoint: str | None = None) -> list[np.ndarray]:
    """kerasbert's sequence, pooled, MLM and NSP outputs for ``batch``."""
    inputs = [batch["token_ids"], batch["segment_ids"]]
    seq = build_transformer_model(folder, checkpoint or folder, verbose=False).predict(inputs, verbose=0)
    heads = build_transformer_model(folder, checkpoint or folder, with_pool=True, with_mlm=True, verbose=False)
    pooled, mlm = heads.predict(inputs, verbose=0)
    nsp = build_transformer_model(folder, checkpoint or folder, with_nsp=True, verbose=False).predict(inputs, verbose=0)
    return [seq, pooled, mlm, nsp]


@pytest.mark.parametrize("name", ["tiny", "base2"])
def test_an_hf_folder_gives_keras_hub_numbers(folders, name, tmp_path):
    import keras
    import keras_hub

    folder = tanh_gelu_twin(folders, name, tmp_path)
    batch = helpers.random_batch(json.load(open(os.path.join(folder, "config.json")))["vocab_size"], seed=5)
    seq, pooled, _, _ = outputs(folder, batch)
    hub = keras_hub.models.BertBackbone.from_preset(folder)
    out = hub({"token_ids": batch["token_ids"], "segment_ids": batch["segment_ids"],
               "padding_mask": batch["token_ids"] != 0})
    real = (batch["token_ids"] != 0)[..., None]  # keras-hub leaves padded positions unmasked in its output
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out["sequence_output"]) * real, seq * real, atol=ATOL)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out["pooled_output"]), pooled, atol=ATOL)


def test_an_hf_folder_converted_to_google_gives_bert4keras_numbers(folders, tmp_path):
    builds = ({}, {"with_pool": True, "with_mlm": True}, {"with_nsp": True})  # seq; pooled, MLM; NSP
    tasks, ours = [], []
    for name in ("tiny", "base2"):
        folder, _ = folders[name]
        google = str(tmp_path / name)
        assert main(["convert", folder, google]) == 0
        batch = helpers.random_batch(json.load(open(os.path.join(folder, "config.json")))["vocab_size"], seed=3)
        inputs = str(tmp_path / f"inputs-{name}.npz")
        np.savez(inputs, **batch)
        tasks += [{"kind": "bert", "config": os.path.join(google, "bert_config.json"), "inputs": inputs,
                   "checkpoint": os.path.join(google, "bert_model.ckpt"), "kwargs": kwargs} for kwargs in builds]
        ours.append(outputs(folder, batch))
    oracle = helpers.run_oracle(tasks, str(tmp_path))
    for index, (seq, pooled, mlm, nsp) in enumerate(ours):
        first = 3 * index
        for theirs, mine in ((oracle[f"{first}/0"], seq), (oracle[f"{first + 1}/0"], pooled),
                             (oracle[f"{first + 1}/1"], mlm), (oracle[f"{first + 2}/0"], nsp)):
            np.testing.assert_allclose(theirs, mine, atol=ATOL)


def test_shards_and_bert_prefixless_legacy_names_give_the_same_numbers(folders, tmp_path):
    folder, google = folders["tiny"]
    batch = helpers.random_batch(128, seed=7)
    reference = outputs(folder, batch)
    tensors = hf_tensors(google, legacy_norm=True, prefix="")  # a BertModel file of an older transformers
    names = sorted(tensors)
    sharded = write_hf_folder(str(tmp_path / "sharded"), helpers.TINY, {})
    os.remove(os.path.join(sharded, "model.safetensors"))
    weight_map = {}
    for shard, part in (("model-00001-of-00002.safetensors", names[::2]), ("model-00002-of-00002.safetensors",
                                                                           names[1::2])):
        save_file({n: tensors[n] for n in part}, os.path.join(sharded, shard), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    for got, want in zip(outputs(sharded, batch), reference, strict=True):
        np.testing.assert_array_equal(got, want)
    report = load_checkpoint(build_transformer_model(sharded, verbose=False), sharded, verbose=False)
    # the log and the report name the file's own names: pooler.dense.*, not bert.pooler.dense.*
    assert report.unused == [n for n in names if n.startswith(("pooler.", "cls."))]
    assert "pooler.dense.bias" in report.unused and "bert.pooler.dense.bias" not in report.unused
    assert report.loaded[0] == ("embeddings.word_embeddings.weight", (128, 32))
    assert ("encoder.layer.0.output.LayerNorm.gamma", (32,)) in report.loaded


def test_a_folder_with_both_formats_reads_safetensors_and_says_so(folders, tmp_path, caplog):
    import logging

    folder, google = folders["tiny"]
    both = write_hf_folder(str(tmp_path / "both"), helpers.TINY, hf_tensors(google))
    open(os.path.join(both, "pytorch_model.bin"), "wb").write(b"never read")
    with caplog.at_level(logging.INFO, logger="kerasbert"):
        report = load_checkpoint(build_transformer_model(both, verbose=False), both, verbose=False)
    assert f"{both} holds safetensors and pytorch_model.bin weights: reading model.safetensors" in caplog.text
    assert report.new == []


def test_half_precision_files_load_exactly(folders, tmp_path):
    """Files saved in bfloat16 (which NumPy lacks) or float16 give the float32 values they hold."""
    _, google = folders["tiny"]
    bits = {n: (v.view(np.uint32) >> 16).astype(np.uint16) for n, v in hf_tensors(google).items()}
    exact = {n: (b.astype(np.uint32) << 16).view(np.float32) for n, b in bits.items()}  # bf16-representable
    reference = write_hf_folder(str(tmp_path / "float32"), helpers.TINY, exact)
    bf16 = write_hf_folder(str(tmp_path / "bf16"), helpers.TINY, {})
    header, data = {}, b""
    for name in sorted(bits):
        offsets = [len(data), len(data) + bits[name].nbytes]
        header[name] = {"dtype": "BF16", "shape": list(bits[name].shape), "data_offsets": offsets}
        data += bits[name].astype("<u2").tobytes()
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(os.path.join(bf16, "model.safetensors"), "wb").write(len(text).to_bytes(8, "little") + text + data)
    half = write_hf_folder(str(tmp_path / "fp16"), helpers.TINY, {n: v.astype(np.float16) for n, v in exact.items()})
    batch = helpers.random_batch(128, seed=6)
    want = outputs(reference, batch)
    for got, expected in zip(outputs(bf16, batch), want, strict=True):
        np.testing.assert_array_equal(got, expected)
    model = build_transformer_model(half, half, verbose=False)  # float16 rounds the values: close, not equal
    np.testing.assert_allclose(model.predict([batch["token_ids"], batch["segment_ids"]], verbose=0), want[0],
                               atol=0.05)


@pytest.mark.parametrize("dtype, kind", [("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2")])
def test_float8_files_load_and_convert_as_float32(folders, tmp_path, dtype, kind):
    """float8 weights (read through ml_dtypes) come back as the float32 values they hold, loaded or converted."""
    import ml_dtypes
    from safetensors.numpy import load_file

    _, google = folders["tiny"]
    small = {n: getattr(ml_dtypes, kind)(v) for n, v in hf_tensors(google).items()}  # rounded to float8
    folder = write_hf_folder(str(tmp_path / "f8"), helpers.TINY, {})
    header, data = {}, b""
    for name in sorted(small):
        header[name] = {"dtype": dtype, "shape": list(small[name].shape), "data_offsets": [len(data), len(data)
                                                                                            + small[name].nbytes]}
        data += small[name].tobytes()
    text = json.dumps(header).encode()
    open(os.path.join(folder, "model.safetensors"), "wb").write(len(text).to_bytes(8, "little") + text + data)
    model = build_transformer_model(folder, folder, verbose=False)
    np.testing.assert_array_equal(model.get_layer("Embedding-Token").embeddings.numpy(),
                                  small["bert.embeddings.word_embeddings.weight"].astype(np.float32), strict=True)
    convert_checkpoint(folder, tmp_path / "google", to="google")
    convert_checkpoint(tmp_path / "google", tmp_path / "back", to="hf")
    back = load_file(str(tmp_path / "back" / "model.safetensors"))
    for name, value in small.items():
        np.testing.assert_array_equal(back[name], value.astype(np.float32), strict=True)


def test_google_to_hf_to_google_is_bit_exact(tiny_ckpt, tmp_path):
    import tensorflow as tf

    hf = convert_checkpoint(tiny_ckpt, tmp_path / "hf")
    assert {"config.json", "model.safetensors"} <= set(os.listdir(tmp_path / "hf"))
    back = convert_checkpoint(os.path.dirname(hf), tmp_path / "google")
    before, after = tf.train.load_checkpoint(os.path.join(tiny_ckpt, "bert_model.ckpt")), tf.train.load_checkpoint(back)
    names = sorted(before.get_variable_to_shape_map())
    assert names == sorted(after.get_variable_to_shape_map())
    for name in names:
        np.testing.assert_array_equal(before.get_tensor(name), after.get_tensor(name), err_msg=name)
    config = json.load(open(tmp_path / "google" / "bert_config.json"))
    assert config == json.load(open(os.path.join(tiny_ckpt, "bert_config.json")))


def test_a_kerasbert_model_saved_as_hf_reads_back_in_keras_hub(folders, tmp_path):
    import keras
    import keras_hub

    folder = tanh_gelu_twin(folders, "tiny", tmp_path)
    model = build_transformer_model(folder, folder, with_pool=True, verbose=False)  # keras-hub needs the pooler
    saved = save_hf_checkpoint(model, tmp_path / "out" / "hf", vocab=os.path.join(folder, "vocab.txt"))
    assert sorted(os.listdir(saved)) == ["config.json", "model.safetensors", "vocab.txt"]
    batch = helpers.random_batch(128, seed=9)
    hub = keras_hub.models.BertBackbone.from_preset(saved)
    out = keras.ops.convert_to_numpy(hub({"token_ids": batch["token_ids"], "segment_ids": batch["segment_ids"],
                                          "padding_mask": batch["token_ids"] != 0})["sequence_output"])
    real = (batch["token_ids"] != 0)[..., None]
    seq = build_transformer_model(saved, saved, verbose=False).predict([batch["token_ids"], batch["segment_ids"]],
                                                                        verbose=0)
    np.testing.assert_allclose(out * real, seq * real, atol=ATOL)


def test_a_fine_tuned_classifier_fills_the_head_when_sizes_match(folders, tmp_path):
    from kerasbert import heads

    folder, google = folders["tiny"]
    tensors = {**hf_tensors(google), "classifier.weight": np.full((3, 32), 0.5, np.float32),
               "classifier.bias": np.arange(3, dtype=np.float32)}
    tuned = write_hf_folder(str(tmp_path / "tuned"), helpers.TINY, tensors)
    model = heads.cls(build_transformer_model(tuned, tuned, with_pool=True, verbose=False), 3, pooling="pooler")
    report = load_checkpoint(model, tuned, verbose=False)
    kernel, bias = model.get_layer("CLS-Dense").get_weights()
    np.testing.assert_array_equal(kernel, np.full((32, 3), 0.5))
    np.testing.assert_array_equal(bias, [0, 1, 2])
    assert ("classifier.weight", (3, 32)) in report.loaded
    other = heads.cls(build_transformer_model(tuned, tuned, with_pool=True, verbose=False), 5, pooling="pooler")
    report = load_checkpoint(other, tuned, verbose=False)  # a head of another size: new, and the file's unused
    assert {"classifier.weight", "classifier.bias"} <= set(report.unused)
    assert any(path.startswith("CLS-Dense") for path, _ in report.new)


def test_a_folder_gives_the_tokenizer_its_vocab_and_case(folders, tmp_path):
    from kerasbert import Tokenizer

    folder, _ = folders["tiny"]
    t1 = VOCAB.index("t1")
    assert Tokenizer(folder).encode("T1 t1")[0] == [2, t1, t1, 3]
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": False}, f)
    try:
        assert Tokenizer(folder).encode("T1 t1")[0] == [2, 1, t1, 3]  # cased: T1 is [UNK]
        assert Tokenizer(folder, do_lower_case=True).encode("T1 t1")[0] == [2, t1, t1, 3]
    finally:
        os.remove(os.path.join(folder, "tokenizer_config.json"))


# --- bad inputs: each a named error, nothing half-written ----------------------------------------------------

def test_a_folder_without_weights_lists_what_it_looked_for(tmp_path):
    folder = write_hf_folder(str(tmp_path / "empty"), helpers.TINY, {})
    os.remove(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json")) as f:
        assert json.load(f)["model_type"] == "bert"
    with pytest.raises(CheckpointError, match="model.safetensors, model.safetensors.index.json, pytorch_model.bin"):
        load_checkpoint(build_transformer_model("tiny", verbose=False), folder)


def test_a_truncated_safetensors_file(folders, tmp_path):
    folder, _ = folders["tiny"]
    data = open(os.path.join(folder, "model.safetensors"), "rb").read()
    cut = write_hf_folder(str(tmp_path / "cut"), helpers.TINY, {})
    open(os.path.join(cut, "model.safetensors"), "wb").write(data[: len(data) // 2])
    model = build_transformer_model(cut, verbose=False)
    before = [w.copy() for w in model.get_weights()]
    with pytest.raises(CheckpointError, match="model.safetensors: expected .* bytes, as its header declares"):
        load_checkpoint(model, cut)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights(), strict=True))


def test_a_shard_missing_from_its_index(tmp_path):
    folder = write_hf_folder(str(tmp_path / "index"), helpers.TINY, {})
    os.remove(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"bert.embeddings.word_embeddings.weight": "model-00001-of-00002.safetensors"}}, f)
    with pytest.raises(CheckpointError, match="model-00001-of-00002.safetensors: expected a shard listed in "
                                              "model.safetensors.index.json, found no such file"):
        load_checkpoint(build_transformer_model("tiny", verbose=False), folder)


def test_a_config_that_does_not_match_the_weights_names_the_value(folders, tmp_path):
    folder, google = folders["tiny"]
    wrong = write_hf_folder(str(tmp_path / "wrong"), dict(helpers.TINY, vocab_size=100), hf_tensors(google))
    with pytest.raises(CheckpointError, match=r"Embedding-Token expects \[100, 32\], checkpoint has \[128, 32\] .*"
                                              "the model's vocab_size does not match this checkpoint; build "
                                              "the model from the checkpoint's own config.json"):
        build_transformer_model(wrong, wrong, verbose=False)


def test_a_llama_config_is_not_a_bert(tmp_path):
    folder = write_hf_folder(str(tmp_path / "llama"), helpers.TINY, {}, {"model_type": "llama"})
    with pytest.raises(ConfigError, match="model_type: expected one of 'bert', 'albert', .*, found 'llama'"):
        build_transformer_model(folder, verbose=False)
    with pytest.raises(ConfigError, match="model_type: expected one of 'bert', 'albert', .*, found 'llama'"):
        convert_checkpoint(folder, tmp_path / "out", to="google")
    assert not (tmp_path / "out").exists()


def test_convert_onto_an_existing_output_needs_force(folders, tmp_path, capsys):
    folder, _ = folders["tiny"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["convert", folder, str(out)]) == 2
    assert "expected a new or empty output folder, found a folder with files" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["keep.txt"]
    assert main(["convert", folder, str(out), "--force"]) == 0
    assert {"bert_model.ckpt.index", "bert_config.json", "vocab.txt", "keep.txt"} <= set(os.listdir(out))


# --- the Chinese BERT family: BERT's graph, each with its own names and config keys ---------------------------
FAMILY = {
    # hfl/chinese-bert-wwm-ext: an older config with no model_type, LayerNorm gamma/beta, the pre-training heads
    "chinese-bert-wwm-ext": ({"directionality": "bidi", "pooler_fc_size": 32, "pooler_type": "first_token_transform"},
                             {"legacy_norm": True}, {}),
    # hfl/chinese-roberta-wwm-ext: BERT's graph and [CLS]/[SEP] (not RoBERTa's), type_vocab_size 2, no NSP head
    "chinese-roberta-wwm-ext": ({"model_type": "bert", "architectures": ["BertForMaskedLM"], "bos_token_id": 0,
                                 "eos_token_id": 2, "output_past": True, "type_vocab_size": 2}, {}, {"no_nsp": True}),
    # hfl/chinese-macbert-base: a newer transformers: position_ids buffer, the tied MLM decoder saved too
    "chinese-macbert-base": ({"model_type": "bert", "position_embedding_type": "absolute", "use_cache": True,
                              "transformers_version": "4.41.0"}, {}, {"decoder": True}),
}


@pytest.mark.parametrize("name", sorted(FAMILY))
def test_the_chinese_bert_family_loads_as_bert(folders, tmp_path, name):
    folder, google = folders["tiny"]
    extra, naming, quirks = FAMILY[name]
    tensors = hf_tensors(google, **naming)
    if quirks.get("no_nsp"):
        tensors = {n: v for n, v in tensors.items() if not n.startswith("cls.seq_relationship")}
    if quirks.get("decoder"):
        tensors.update({"cls.predictions.decoder.weight": tensors["bert.embeddings.word_embeddings.weight"],
                        "cls.predictions.decoder.bias": tensors["cls.predictions.bias"],
                        "bert.embeddings.position_ids": np.arange(64, dtype=np.int64)[None]})
    family = write_hf_folder(str(tmp_path / name), helpers.TINY, tensors, extra)
    config_path = os.path.join(family, "config.json")
    if "model_type" not in extra:
        config = json.load(open(config_path))
        json.dump({k: v for k, v in config.items() if k != "model_type"}, open(config_path, "w"))
    batch = helpers.random_batch(128, seed=4)
    inputs = [batch["token_ids"], batch["segment_ids"]]
    model = build_transformer_model(family, family, with_pool=True, with_mlm=True, verbose=False)
    reference = build_transformer_model(folder, folder, with_pool=True, with_mlm=True, verbose=False)
    for got, want in zip(model.predict(inputs, verbose=0), reference.predict(inputs, verbose=0), strict=True):
        np.testing.assert_array_equal(got, want)
    report = load_checkpoint(model, family, verbose=False)
    nsp = [] if quirks.get("no_nsp") else ["cls.seq_relationship.bias", "cls.seq_relationship.weight"]
    assert report.unused == nsp
    assert report.skipped == (["bert.embeddings.position_ids", "cls.predictions.decoder.bias",
                               "cls.predictions.decoder.weight"] if quirks.get("decoder") else [])


# --- pytorch_model.bin: files written by real torch, read without it ------------------------------------------
TORCH_FILES = os.path.join(helpers.HERE, "fixtures", "torch_files")
TINY_BERT = {"vocab_size": 24, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 16, "max_position_embeddings": 16, "type_vocab_size": 2}


def _copy_into(folder: str, *names: str) -> str:
    for name in names:
        with open(os.path.join(TORCH_FILES, name), "rb") as src, open(os.path.join(folder, name), "wb") as dst:
            dst.write(src.read())
    return folder


def test_pytorch_bin_whole_or_sharded_gives_the_safetensors_numbers(tmp_path):
    arrays = dict(np.load(os.path.join(TORCH_FILES, "tiny-bert.npz")))
    reference = write_hf_folder(str(tmp_path / "safetensors"), TINY_BERT, arrays)
    whole = write_hf_folder(str(tmp_path / "bin"), TINY_BERT, {})
    os.remove(os.path.join(whole, "model.safetensors"))
    _copy_into(whole, "pytorch_model.bin")
    sharded = write_hf_folder(str(tmp_path / "sharded"), TINY_BERT, {})
    os.remove(os.path.join(sharded, "model.safetensors"))
    _copy_into(sharded, "pytorch_model.bin.index.json", "pytorch_model-00001-of-00002.bin",
               "pytorch_model-00002-of-00002.bin")
    batch = helpers.random_batch(24, seed=8)
    want = outputs(reference, batch)
    for folder in (whole, sharded):
        for got, expected in zip(outputs(folder, batch), want, strict=True):
            np.testing.assert_array_equal(got, expected)
        report = load_checkpoint(build_transformer_model(folder, with_nsp=True, with_mlm=True, verbose=False), folder,
                                 verbose=False)
        assert report.unused == [] and report.skipped == ["bert.embeddings.position_ids",
                                                          "cls.predictions.decoder.weight"]


def test_a_pytorch_bin_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    import pickle
    import zipfile

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    folder = write_hf_folder(str(tmp_path / "evil"), TINY_BERT, {})
    os.remove(os.path.join(folder, "model.safetensors"))
    with zipfile.ZipFile(os.path.join(folder, "pytorch_model.bin"), "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"bert.embeddings.word_embeddings.weight": Payload()}))
    with pytest.raises(CheckpointError, match=r"pytorch_model.bin: expected a PyTorch state dict of tensors .*"
                                              r"found a pickle that calls (posix|os)\.system"):
        build_transformer_model(folder, folder, verbose=False)
    assert not marker.exists()


def test_the_config_json_written_is_the_models_own_config():
    model = build_transformer_model("tiny", keep_tokens=[0, 1, 2, 3, 7], hidden_act="gelu_tanh", dropout_rate=0.2,
                                    initializer_range=0.05, verbose=False)
    config = hf_config_dict(model)
    assert (config["vocab_size"], config["hidden_act"], config["hidden_dropout_prob"]) == (5, "gelu_new", 0.2)
    assert (config["initializer_range"], config["model_type"], config["architectures"]) == (
        0.05, "bert", ["BertForPreTraining"])
