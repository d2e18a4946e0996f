"""`kerasbert.embed` and ``kerasbert embed``: vectors of a Google or Hugging Face checkpoint folder against NumPy
poolings of the encoder's outputs and the checkpoint's own pooler weights; batching that keeps the order; the run
path; the CLI's .npy and .jsonl files; and the errors of bad options."""

from __future__ import annotations

import json
import logging
import os
import shutil
import types

import keras
import numpy as np
import pytest

from kerasbert import ConfigError, DataError, build_transformer_model, convert_checkpoint, embed, heads
from kerasbert.cli import main
from kerasbert.finetune.runs import LoadedRun, Run
from kerasbert.serving.embed import embedder_of_run, open_embedder, returns_vectors
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer

import helpers

ATOL = 1e-5
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghij", *(f"w{i}" for i in range(113))]
TEXTS = ["a b c d e f g h i j a b c", "w1 w2", "j", "w7 w7 w7 a", "", "c a", "w100 w3 b"]


@pytest.fixture(scope="module")
def folders(tiny_ckpt, tmp_path_factory) -> dict[str, str]:
    """The tiny random Google checkpoint (its pooler included) with a vocab.txt, and the same as Hugging Face's."""
    google = str(tmp_path_factory.mktemp("embed") / "google")
    shutil.copytree(tiny_ckpt, google)
    helpers.write_vocab(google, VOCAB)
    hf = str(tmp_path_factory.mktemp("embed") / "hf")
    convert_checkpoint(google, hf)
    return {"google": google, "hf": hf}


@pytest.fixture(scope="module")
def outputs(folders) -> dict[str, np.ndarray]:
    """The encoder's first and last block outputs on TEXTS, float64, and the token ids."""
    folder = folders["google"]
    token_ids, segment_ids = Tokenizer(os.path.join(folder, "vocab.txt")).encode_batch(TEXTS, padding=True)
    bert = build_transformer_model(folder, folder, verbose=False)
    first = keras.Model(bert.inputs, bert.get_layer("Transformer-0-FeedForward-Norm").output)
    run = lambda model: np.asarray(model.predict([token_ids, segment_ids], verbose=0), np.float64)  # noqa: E731
    return {"first": run(first), "last": run(bert), "token_ids": token_ids}


def pooled(outputs: dict, pooling: str, folder: str) -> np.ndarray:
    """Each pooling in NumPy; the pooler's weights read from the Google checkpoint itself."""
    import tensorflow as tf

    real = (outputs["token_ids"] != 0)[..., None]
    mean = lambda x: (x * real).sum(1) / real.sum(1)  # noqa: E731
    if pooling in ("pooler", "linear"):
        reader = tf.train.load_checkpoint(os.path.join(folder, "bert_model.ckpt"))
        dense = outputs["last"][:, 0] @ reader.get_tensor("bert/pooler/dense/kernel") \
            + reader.get_tensor("bert/pooler/dense/bias")
        return np.tanh(dense) if pooling == "pooler" else dense
    return {"cls": outputs["last"][:, 0], "mean": mean(outputs["last"]),
            "first_last_avg": mean((outputs["first"] + outputs["last"]) / 2)}[pooling]


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("kind", ["google", "hf"])
def test_a_checkpoint_gives_unit_mean_vectors_by_default(folders, outputs, kind):
    vectors = embed(folders[kind], TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(vectors, unit(pooled(outputs, "mean", folders["google"])), atol=ATOL)
    embedder = open_embedder(folders[kind])
    assert (embedder.kind, embedder.pooling, embedder.normalize, embedder.maxlen) == ("checkpoint", "mean", True, 64)


@pytest.mark.parametrize("pooling", ["cls", "first_last_avg", "pooler", "linear"])
def test_each_pooling_equals_numpy_with_the_checkpoints_pooler(folders, outputs, pooling):
    vectors = embed(folders["hf"], TEXTS, pooling=pooling, normalize=False)
    np.testing.assert_allclose(vectors, pooled(outputs, pooling, folders["google"]), atol=ATOL)


def test_batches_keep_the_order_and_maxlen_cuts(folders):
    together = embed(folders["google"], TEXTS, batch_size=2)
    alone = np.concatenate([embed(folders["google"], [text]) for text in TEXTS])
    np.testing.assert_allclose(together, alone, atol=ATOL)
    cut = embed(folders["google"], TEXTS, maxlen=4)
    np.testing.assert_allclose(cut[[1, 2, 4]], together[[1, 2, 4]], atol=ATOL)  # 4 pieces or fewer: whole
    assert not np.allclose(cut[0], together[0], atol=1e-3)
    embedder = open_embedder(folders["google"], maxlen=4)
    np.testing.assert_allclose(embed(embedder, TEXTS), cut, atol=ATOL)
    assert embed(embedder, []).shape == (0, 32)


def test_the_cli_writes_npy_and_jsonl(folders, tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": text, "id": i}) + "\n" for i, text in enumerate(TEXTS[:4])),
                      encoding="utf-8")
    expected = embed(folders["hf"], TEXTS[:4], pooling="cls", normalize=False)
    npy, jsonl = tmp_path / "out" / "v.npy", tmp_path / "v.jsonl"
    base = ["embed", folders["hf"], "--input", str(source), "--pooling", "cls", "--no-normalize", "--batch-size", "2"]
    assert main([*base, "--output", str(npy)]) == 0
    assert "4 vectors of 32 written to" in capsys.readouterr().out
    written = np.load(npy)
    assert written.dtype == np.float32 and sorted(os.listdir(npy.parent)) == ["v.npy"]
    np.testing.assert_allclose(written, expected, atol=ATOL)
    assert main([*base, "--output", str(jsonl), "--quiet"]) == 0
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert [(row["text"], row["id"]) for row in rows] == [(text, i) for i, text in enumerate(TEXTS[:4])]
    np.testing.assert_allclose([row["vector"] for row in rows], expected, atol=ATOL)
    plain = tmp_path / "in.txt"
    plain.write_text("w1 w2\n\nj\n", encoding="utf-8")
    assert main(["embed", folders["google"], "--input", str(plain), "--output", str(npy)]) == 0  # over the old one
    np.testing.assert_allclose(np.load(npy), embed(folders["google"], ["w1 w2", "j"]), atol=ATOL)


def test_embed_into_a_pipe_draws_no_bar(folders, tmp_path, capsys):
    """Standard output that is no terminal (capsys, as a pipe or a file) gets the bar's one closing line, never a bar
    redrawn with carriage returns, backspaces or colours."""
    source = tmp_path / "in.txt"
    source.write_text("".join(text + "\n" for text in TEXTS if text), encoding="utf-8")  # 6 texts
    argv = ["embed", folders["google"], "--input", str(source), "--output", str(tmp_path / "v.npy")]
    assert main([*argv, "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "\r" not in out and "\b" not in out and "\x1b[" not in out, repr(out)
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("3/3 ") and lines[1].startswith("6 vectors of 32 written to"), out
    assert main([*argv, "--batch-size", "2", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("6 vectors of 32 written to")


def test_bad_options_fail_before_anything_is_written(folders, tmp_path, capsys):
    folder = folders["google"]
    with pytest.raises(ConfigError, match="--pooling: expected (cls|mean|first_last_avg|pooler|linear)(, \\w+)* or "
                                          "\\w+, found 'max'"):
        embed(folder, TEXTS, pooling="max")
    with pytest.raises(ConfigError, match="--maxlen: expected at most 64, the model's positions, found 65"):
        embed(folder, TEXTS, maxlen=65)
    with pytest.raises(DataError, match="texts: expected a list of strings, found a str"):
        embed(folder, "a b")
    with pytest.raises(DataError, match=r"texts\[1\]: expected a string, found a int 3"):
        embed(folder, ["a", 3])
    with pytest.raises(ConfigError, match="pooling, normalize and maxlen left out with an open Embedder"):
        embed(open_embedder(folder), TEXTS, pooling="cls")
    with pytest.raises(ConfigError, match="expected a checkpoint folder .*args.json.*kerasbert-export.json.*, found "
                                          "none of their files"):
        embed(str(tmp_path), TEXTS)
    source = tmp_path / "in.txt"
    source.write_text("a\n", encoding="utf-8")
    for output in ("v.csv", "v.npz"):
        assert main(["embed", folder, "--input", str(source), "--output", str(tmp_path / output)]) == 2
        suffix = os.path.splitext(output)[1]
        assert f"expected a .npy or .jsonl file, found the suffix '{suffix}'" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def _loaded_run(folder: str, tmp_path, task: str, model, pooling: str | None = "cls") -> LoadedRun:
    """What `open_run` gives for a run of ``task`` whose best model is ``model``."""
    run = Run(str(tmp_path / "run"))
    os.makedirs(run.path, exist_ok=True)
    shutil.copyfile(os.path.join(folder, "vocab.txt"), run.file("vocab.txt"))
    args = types.SimpleNamespace(task=task, pooling=pooling, maxlen=16, lowercase=True, dev=None, train=None)
    return LoadedRun(run, args, None, Tokenizer(run.file("vocab.txt")), LabelSet([]), model)


def test_a_run_whose_model_answers_vectors_embeds_as_trained(folders, tmp_path):
    folder = folders["google"]
    model = heads.embedding(build_transformer_model(folder, folder, verbose=False), "cls")
    loaded = _loaded_run(folder, tmp_path, "sim", model)
    assert returns_vectors(loaded)
    embedder = embedder_of_run(loaded)
    assert (embedder.kind, embedder.pooling, embedder.normalize, embedder.maxlen) == ("run", "cls", True, 16)
    token_ids, segment_ids = loaded.tokenizer.encode_batch(TEXTS, maxlen=16, padding=True)
    np.testing.assert_allclose(embedder(TEXTS), model.predict([token_ids, segment_ids], verbose=0), atol=ATOL)
    with pytest.raises(ConfigError, match=r"--pooling mean: expected the pooling of .*args.json, 'cls', found 'mean'"):
        embedder_of_run(loaded, pooling="mean")
    with pytest.raises(ConfigError, match="--no-normalize: expected the normalization of .*, True, found False"):
        embedder_of_run(loaded, normalize=False)
    classifier = _loaded_run(folder, tmp_path, "cls", heads.cls(build_transformer_model(folder, verbose=False), 32))
    assert not returns_vectors(classifier)  # [B, 32] as wide as the encoder, yet probabilities
    with pytest.raises(ConfigError, match="expected a run whose model answers sentence vectors .*, found a cls run"):
        embedder_of_run(classifier)


def test_texts_the_vocabulary_does_not_cover_are_warned_about_once(folders, caplog):
    logger = logging.getLogger("kerasbert")
    logger.addHandler(caplog.handler)  # the logger does not propagate
    try:
        embed(folders["google"], TEXTS)
        assert not [r for r in caplog.records if "[UNK]" in r.getMessage()]
        embed(folders["google"], ["a b", "x y z a", "zz"])  # 4 of 7 pieces unknown
    finally:
        logger.removeHandler(caplog.handler)
    warned = [r.getMessage() for r in caplog.records if "[UNK]" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("texts: 57.1% of the word pieces are [UNK] (more than 5%), e.g. "
                                                     "in 'x y z a'")
