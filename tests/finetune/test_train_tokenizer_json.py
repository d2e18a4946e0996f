"""`kerasbert train` with ``--vocab`` a folder holding a Hugging Face tokenizer.json (RoBERTa's byte-level BPE,
``<pad>`` id 1) on a tiny roberta_en model: the run keeps the tokenizer.json, its batches pad with 1, which the
model masks, and the run reloads, predicts, evaluates and exports it (ONNX tokenizes in Python; a SavedModel is
refused)."""

from __future__ import annotations

import filecmp
import json
import os

import numpy as np
import pytest

from kerasbert import cli
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.text.hf_tokenizer import HfTokenizer

import hf_tokenizer_files as files

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def roberta_run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("tokenizer-json-run")
    data = write_demo_data(str(root / "data"), n_train=32, n_dev=8, n_test=8)
    folder = files.write_bpe(str(root / "roberta"))
    with open(os.path.join(HERE, "..", "..", "configs", "tiny.json"), encoding="utf-8") as f:
        config = {**json.load(f), "vocab_size": 400, "type_vocab_size": 1, "max_position_embeddings": 40,
                  "pad_token_id": 1}
    config_path = str(root / "config.json")
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    out = str(root / "run")
    code = cli.main(["train", "--task", "cls", "--train", data["cls_train"], "--dev", data["cls_dev"], "--vocab",
                     folder, "--config", config_path, "--model", "roberta_en", "--out", out, "--epochs", "1",
                     "--batch-size", "8", "--maxlen", "24", "--quiet"])
    assert code == 0
    return {"out": out, "folder": folder, "data": data, "root": root}


def test_the_run_keeps_the_tokenizer_json_and_pads_with_its_pad_id(roberta_run):
    from kerasbert.finetune.runs import open_run

    out = roberta_run["out"]
    assert filecmp.cmp(os.path.join(out, "tokenizer.json"), os.path.join(roberta_run["folder"], "tokenizer.json"))
    assert not os.path.exists(os.path.join(out, "vocab.txt"))
    loaded = open_run(out)
    assert isinstance(loaded.tokenizer, HfTokenizer) and loaded.tokenizer.pad_id == 1
    assert loaded.args.vocab.endswith("tokenizer.json")
    # a short text's probabilities are the same alone and in a batch padded with <pad> to a long text's length
    short, long = "这家餐厅好", "说实话这个景点挺值得推荐，位置在市中心，这本书相当好看"
    from kerasbert.finetune.training import predict

    alone = predict(out, [short])[0]["probabilities"]
    batched = predict(out, [short, long], batch_size=2)[0]["probabilities"]
    np.testing.assert_allclose(list(alone.values()), list(batched.values()), atol=1e-5)


def test_the_run_evaluates_and_exports_to_onnx_not_to_a_saved_model(roberta_run, capsys):
    out, root = roberta_run["out"], roberta_run["root"]
    assert cli.main(["evaluate", out]) == 0
    refused = str(root / "saved_model")
    assert cli.main(["export", out, refused, "--format", "saved_model"]) == 2
    err = capsys.readouterr().err
    assert "--format saved_model: expected a model of a vocab.txt" in err and "--format onnx" in err, err
    assert not os.path.exists(refused)
    exported = str(root / "onnx")
    assert cli.main(["export", out, exported, "--format", "onnx", "--precision", "f32"]) == 0
    info = json.load(open(os.path.join(exported, "kerasbert-export.json")))
    assert info["vocab_file"] == "tokenizer.json" and os.path.isfile(os.path.join(exported, "tokenizer.json"))
    from kerasbert.finetune.training import predict
    from kerasbert.serving.exported import open_export

    texts = ["这家餐厅好", "说实话这个景点挺值得推荐，位置在市中心"]
    served = open_export(exported).predict([{"text": text} for text in texts])
    for row, expected in zip(served, predict(out, texts), strict=True):
        np.testing.assert_allclose(list(row["probabilities"].values()), list(expected["probabilities"].values()),
                                   atol=1e-4)
