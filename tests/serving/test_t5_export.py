"""The exports of a T5 seq2seq run: a SavedModel (SentencePiece ids, the encoder once, beam search over the cached
decoder and SentencePiece's decoding, all in its graph) that answers where kerasbert cannot be imported, ONNX and
OpenVINO decoders searched in Python, and `kerasbert serve` on them, each giving `kerasbert.predict`'s targets."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from kerasbert import build_transformer_model, generate, predict, save_google_checkpoint
from kerasbert.cli import main
from kerasbert.finetune.runs import open_run
from kerasbert.serving.export import export
from kerasbert.serving.exported import open_export
from kerasbert.text.sentencepiece import SpTokenizer

import helpers
from helpers import savedmodel_without_kerasbert

pytestmark = pytest.mark.slow  # trains a small T5 and exports it

MAXLEN, TARGET_MAXLEN, END = 24, 6, 1  # END: </s>
# a short text, one cut to the source's room, mixed scripts, an empty text
TEXTS = ["新闻标题 the news title", "生成摘要" * 9 + " news", "hello 你好 world 2024", ""]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[int, str]:
    """An mT5.1.1 run with 3 beams, trained one epoch at a learning rate that keeps its random weights' varied
    targets; and the same run with 1 beam (greedy) in its args.json."""
    work = str(tmp_path_factory.mktemp("t5"))
    spm = helpers.write_sentencepiece(work)
    config = os.path.join(work, "mt5_config.json")
    with open(config, "w") as f:
        json.dump({**helpers.TINY_T5, "vocab_size": SpTokenizer(spm).vocab_size}, f)
    checkpoint = os.path.join(work, "model.ckpt")
    save_google_checkpoint(build_transformer_model(config, model="mt5.1.1", verbose=False), checkpoint)
    run = os.path.join(work, "run3")
    train, dev = (helpers.write_t5_pairs(os.path.join(work, name), count, seed)
                  for name, count, seed in (("train.jsonl", 16, 1), ("dev.jsonl", 6, 2)))
    assert main(["train", "--task", "seq2seq", "--model", "mt5.1.1", "--config", config, "--checkpoint", checkpoint,
                 "--vocab", spm, "--train", train, "--dev", dev, "--out", run, "--epochs", "1", "--batch-size", "8",
                 "--lr", "1e-5", "--maxlen", str(MAXLEN), "--target-maxlen", str(TARGET_MAXLEN), "--beams", "3",
                 "--quiet"]) == 0
    greedy = os.path.join(work, "run1")
    shutil.copytree(run, greedy)
    with open(os.path.join(greedy, "args.json")) as f:
        args = json.load(f)
    with open(os.path.join(greedy, "args.json"), "w") as f:
        json.dump({**args, "beams": 1, "out": greedy}, f)
    return {3: run, 1: greedy}


@pytest.fixture(scope="module")
def saved(runs, tmp_path_factory) -> dict[int, tuple[str, dict]]:
    """Each run's SavedModel export and what it records."""
    out = {}
    for beams, run in runs.items():
        folder = os.path.join(str(tmp_path_factory.mktemp(f"export{beams}")), "export")
        out[beams] = folder, export(run, folder)
    return out


def _found(run: str, texts: list[str], beams: int) -> list:
    """What `kerasbert.generate` finds for ``texts`` on the run's model, sources cut as the run cuts them."""
    loaded = open_run(run)
    sources = [loaded.tokenizer.encode(text, maxlen=MAXLEN)[0] for text in texts]
    return generate(loaded.model, sources, "beam" if beams > 1 else "greedy", beams=beams if beams > 1 else None,
                    end_ids=END, max_length=TARGET_MAXLEN)


@pytest.mark.parametrize("beams", [3, 1])
def test_the_savedmodel_generates_what_the_run_predicts_without_kerasbert(runs, saved, beams):
    folder, info = saved[beams]
    assert (info["task"], info["beams"], info["target_maxlen"], info["maxlen"]) == ("seq2seq", beams, 6, 24)
    assert (info["source_maxlen"], info["cache_positions"]) == (24, 24 + 1 + 6)  # the source, the start, targets
    assert (info["end_token"], info["vocab_file"], info["token_start"]) == ("</s>", "spiece.model", None)
    assert info["decoder"] == {"layers": 2, "hidden_size": 15, "max_length": None}  # 3 heads x 5, no position table
    assert info["dev"] == info["dev_run"]
    out = savedmodel_without_kerasbert(folder, TEXTS)
    expected = [row["target"] for row in predict(runs[beams], TEXTS)]
    assert out["target"] == expected and len(set(expected)) > 1  # the targets differ: a real check of each
    np.testing.assert_allclose(out["score"], [g.scores[0] for g in _found(runs[beams], TEXTS, beams)], rtol=1e-5)


def test_the_ids_signature_gives_the_generated_ids(runs, saved):
    import tensorflow as tf

    loaded = open_run(runs[3])
    sources = [loaded.tokenizer.encode(text, maxlen=MAXLEN)[0] for text in TEXTS]
    padded = np.zeros((len(sources), max(map(len, sources))), np.int32)
    for row, source in enumerate(sources):
        padded[row, :len(source)] = source
    out = tf.saved_model.load(saved[3][0]).signatures["ids"](token_ids=tf.constant(padded))
    for row, one in enumerate(_found(runs[3], TEXTS, 3)):
        ids = one.ids[0][:-1] if one.ids[0][-1] == END else one.ids[0]
        assert out["target_ids"][row, :out["target_length"][row]].numpy().tolist() == ids
        assert not out["target_ids"][row, out["target_length"][row]:].numpy().any()


def test_serve_answers_the_run_s_targets(runs, saved):
    from starlette.testclient import TestClient

    from kerasbert.serving.server import make_app

    with TestClient(make_app(open_export(saved[3][0]), "t5")) as client:
        answer = client.post("/v1/models/t5:predict", json={"instances": TEXTS[:2] + [{"text": TEXTS[2]}]})
        assert answer.status_code == 200
        assert answer.json() == {"predictions": [{"target": row["target"]} for row in predict(runs[3], TEXTS[:3])]}


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_portable_decoders_generate_what_the_run_predicts(runs, tmp_path, fmt):
    from starlette.testclient import TestClient

    from kerasbert.serving.server import make_app

    info = export(runs[3], str(tmp_path / "export"), format=fmt, precision="f32")
    extension = {"onnx": ".onnx", "openvino": ".xml"}[fmt]
    assert info["decoder"]["files"] == {"prefill": "prefill" + extension, "step": "step" + extension}
    assert info["decoder"]["io"]["constants"] == {"start_id": 0}  # T5's decoder starts with id 0
    assert info["decoder"]["names"]["step"]["outputs"] == ["new_keys_0", "new_keys_1", "new_values_0",
                                                           "new_values_1", "new_seen", "logp"]
    assert "spiece.model" in os.listdir(tmp_path / "export") and info["dev"] == info["dev_run"]
    expected = predict(runs[3], TEXTS)
    served = open_export(str(tmp_path / "export"))
    assert served.predict([{"text": text} for text in TEXTS]) == expected
    with TestClient(make_app(served, "t5")) as client:
        answer = client.post("/v1/models/t5:predict", json={"instances": TEXTS})
        assert answer.json() == {"predictions": [{"target": row["target"]} for row in expected]}
