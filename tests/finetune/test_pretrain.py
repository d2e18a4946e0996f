"""``kerasbert pretrain``: masked-LM training on raw text, its held-out scores, its dynamic masks, and the
checkpoints it writes, which kerasbert, bert4keras and keras-hub load to the same numbers."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from kerasbert import build_transformer_model
from kerasbert.cli import main
from kerasbert.errors import ConfigError, DataError
from kerasbert.finetune.demo_data import write_demo_data
from kerasbert.finetune.mlm import MaskedLmTask
from kerasbert.finetune.pretrain import pretrain
from kerasbert.modeling import heads
from kerasbert.text.masking import mask_batch, most_predictions, predicted_positions
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.tokenizer import Tokenizer

import helpers

# keras-hub's BERT computes GELU with tanh whatever the config says: the pretrained model uses it too
CONFIG = dict(helpers.TINY, hidden_act="gelu_new")
OPTIONS = {"epochs": 2, "batch_size": 8, "maxlen": 32, "lr": 2e-3, "verbose": 0}


def write_corpus(path: str, texts: list[str], per_document: int = 3) -> str:
    """Plain text: ``per_document`` texts a document, a text a line, a blank line between documents."""
    documents = ["\n".join(texts[i:i + per_document]) for i in range(0, len(texts), per_document)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(documents) + "\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A corpus and held-out documents from the demo sentiment texts, their vocabulary, and a config."""
    folder = tmp_path_factory.mktemp("pretrain_corpus")
    data = write_demo_data(str(folder), n_train=600, n_dev=100, n_test=8)
    texts = {name: [line.split("\t")[0] for line in open(data[f"cls_{name}"], encoding="utf-8").read().splitlines()[1:]]
             for name in ("train", "dev")}
    vocab = data["vocab"]
    config = dict(CONFIG, vocab_size=len(open(vocab, encoding="utf-8").read().split()))
    with open(folder / "bert_config.json", "w") as f:
        json.dump(config, f)
    return {"train": write_corpus(str(folder / "train.txt"), texts["train"]),
            "dev": write_corpus(str(folder / "dev.txt"), texts["dev"]), "vocab": vocab,
            "config": str(folder / "bert_config.json"), "cls_train": data["cls_train"], "cls_dev": data["cls_dev"]}


@pytest.fixture(scope="module")
def pretrained(corpus, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("pretrained") / "run")
    result = pretrain(corpus["train"], out, dev=corpus["dev"], config=corpus["config"], vocab=corpus["vocab"],
                      **OPTIONS)
    return out, result


def dev_rows(corpus):
    """The task and the encoded dev rows, as `pretrain` encodes them."""
    task = MaskedLmTask()
    tokenizer = Tokenizer(corpus["vocab"])
    return task, tokenizer, task.encode(tokenizer, task.read(corpus["dev"]), None, 32, corpus["dev"])


def every_position(token_ids: np.ndarray) -> np.ndarray:
    """``Input-MLM-Positions`` asking for every position of each row: the pretraining model then gives what the
    ``with_mlm`` model gives."""
    return np.tile(np.arange(token_ids.shape[1]), (len(token_ids), 1))


def numpy_scores(model, task, tokenizer, features) -> dict:
    """Held-out loss and accuracy computed in NumPy from the model's probabilities on the dev masks."""
    losses, right = [], []
    for inputs, targets in task.batches(to_dataset(features, 16), tokenizer, 0, None):
        probs = model.predict_on_batch(inputs).astype("float64")
        targets = targets.numpy()
        rows, cols = np.nonzero(targets)
        picked = probs[rows, cols, targets[rows, cols]]
        losses += list(-np.log(np.clip(picked, 1e-7, 1)))
        right += list(probs[rows, cols].argmax(-1) == targets[rows, cols])
    return {"loss": float(np.mean(losses)), "accuracy": float(np.mean(right)), "count": len(losses)}


def test_the_held_out_loss_is_the_masked_cross_entropy_and_falls(corpus, pretrained):
    out, result = pretrained
    task, tokenizer, features = dev_rows(corpus)
    trained = keras.saving.load_model(os.path.join(out, "model.keras"))
    expected = numpy_scores(trained, task, tokenizer, features)
    assert result["dev"]["count"] == expected["count"] > 0
    np.testing.assert_allclose(result["dev"]["loss"], expected["loss"], rtol=1e-5)
    np.testing.assert_allclose(result["dev"]["accuracy"], expected["accuracy"], atol=1e-9)
    fresh = heads.pretraining(build_transformer_model(corpus["config"], with_mlm=True, verbose=False))
    untrained = numpy_scores(fresh, task, tokenizer, features)
    assert result["dev"]["loss"] < untrained["loss"] - 0.5, (result["dev"], untrained)
    history = list(csv.DictReader(open(os.path.join(out, "history.csv"))))
    assert [row["epoch"] for row in history] == ["1", "2"]
    assert all(float(row["pieces_per_second"]) > 0 for row in history)
    assert float(history[-1]["val_loss"]) == pytest.approx(result["dev"]["loss"], abs=1e-6)  # the best: the last


@pytest.mark.parametrize("nsp", [False, True])
def test_the_head_at_the_masked_positions_gives_the_full_heads_loss_and_gradients(corpus, nsp):
    """The pretraining model (the masked LM at the predicted positions alone) against the ``with_mlm`` model it is
    built from, on one masked training batch with the same weights: the same loss (each objective and their sum) and
    the same gradient of every weight, the masked-LM layers' matched by name."""
    import tensorflow as tf

    task, tokenizer = MaskedLmTask(nsp=nsp), Tokenizer(corpus["vocab"])
    features = task.encode(tokenizer, task.read(corpus["dev"]), None, 32, corpus["dev"])
    full = build_transformer_model(corpus["config"], with_mlm=True, with_nsp=nsp, verbose=False)
    gathered = task.head(full, None)
    assert {layer.name for layer in gathered.layers} - {layer.name for layer in full.layers} == {
        "Input-MLM-Positions", "MLM-Gather"}
    inputs, targets = next(iter(task.batches(to_dataset(features, 16), tokenizer, 5, 0)))
    ids, positions = targets[-1].numpy() if nsp else targets.numpy(), inputs["Input-MLM-Positions"].numpy()
    assert positions.shape[1] == most_predictions(task.rule, inputs["Input-Token"].shape[1]) < 32
    labels = np.zeros(inputs["Input-Token"].shape, np.int32)  # the ids to predict at every position: full's labels
    np.put_along_axis(labels, positions, ids, axis=1)
    labels[:, 0] = 0  # the padding's position 0 ([CLS]) is never predicted
    every = {"Input-Token": inputs["Input-Token"], "Input-Segment": inputs["Input-Segment"]}
    found = []
    for model, x, y in ((full, every, (targets[0], labels) if nsp else labels), (gathered, inputs, targets)):
        losses = heads.loss_and_metrics(model)["loss"]
        losses, y = (losses, y) if nsp else ([losses], [y])
        with tf.GradientTape() as tape:
            outputs = model(x, training=False)
            outputs = outputs if nsp else [outputs]
            loss = [loss(target, output) for loss, target, output in zip(losses, y, outputs, strict=True)]
            total = sum(loss)
        grads = tape.gradient(total, model.trainable_weights)
        found.append(([float(v) for v in loss], {w.path: g for w, g in zip(model.trainable_weights, grads,
                                                                                 strict=True)}))
    np.testing.assert_allclose(found[0][0], found[1][0], rtol=1e-5)
    assert found[0][0][-1] > 1 and len(found[0][1]) == len(found[1][1])
    for path, grad in found[0][1].items():  # the new MLM layers' weights carry the path of the loaded ones
        np.testing.assert_allclose(tf.convert_to_tensor(found[1][1][path]), tf.convert_to_tensor(grad), atol=1e-5,
                                   err_msg=path)


def test_masks_are_new_each_epoch_fixed_on_dev_and_resume_where_they_stopped(corpus):
    task, tokenizer, features = dev_rows(corpus)

    def drawn(epoch, skip=0, seed=3):
        data = to_dataset(features, 8, skip_batches=skip)
        return [(x["Input-Token"].numpy(), y.numpy(), x["Input-MLM-Positions"].numpy())
                for x, y in task.batches(data, tokenizer, seed, epoch, skip)]

    first, again, second = drawn(0), drawn(0), drawn(1)
    assert all((a[0] == b[0]).all() and (a[1] == b[1]).all() for a, b in zip(first, again, strict=True))
    assert any((a[1] != b[1]).any() for a, b in zip(first, second, strict=True))
    resumed = drawn(0, skip=2)
    assert all((a[1] == b[1]).all() for a, b in zip(first[2:], resumed, strict=True))
    assert all((a[1] == b[1]).all() for a, b in zip(drawn(None, seed=1), drawn(None, seed=2), strict=True))
    raw_inputs, words = next(iter(to_dataset(features, 8)))  # epoch 0 of seed 3 is drawn from (3, 1), batch 0
    expected = mask_batch(raw_inputs["Input-Token"].numpy(), words.numpy(), task.rule, seed=(3, 1, 0, 0),
                          mask_id=tokenizer.token_to_id("[MASK]"), vocab_size=tokenizer.vocab_size,
                          special_ids=[0, 1, 2, 3, 4])
    np.testing.assert_array_equal(first[0][0], expected[0])
    positions, ids = predicted_positions(expected[1], most_predictions(task.rule, expected[1].shape[1]))
    np.testing.assert_array_equal(first[0][2], positions)  # each row's predicted positions, padded with 0
    np.testing.assert_array_equal(first[0][1], ids)


def test_the_google_and_hf_folders_hold_the_best_model(corpus, pretrained):
    import keras_hub

    out, result = pretrained
    trained = keras.saving.load_model(os.path.join(out, "model.keras"))
    batch = helpers.random_batch(trained.get_layer("Embedding-Token").input_dim, seed=4)
    inputs = [batch["token_ids"], batch["segment_ids"]]
    expected = trained.predict([*inputs, every_position(batch["token_ids"])], verbose=0)
    google = result["google"]
    assert {"bert_config.json", "vocab.txt", "bert_model.ckpt.index"} <= set(os.listdir(google))
    again = build_transformer_model(os.path.join(google, "bert_config.json"), os.path.join(google, "bert_model.ckpt"),
                                    with_mlm=True, verbose=False)  # the pooler beside it is the start's, unused
    np.testing.assert_allclose(again.predict(inputs, verbose=0), expected, atol=1e-6)
    hf = build_transformer_model(result["hf"], result["hf"], with_mlm=True, verbose=False)
    np.testing.assert_allclose(hf.predict(inputs, verbose=0), expected, atol=1e-6)
    hub = keras_hub.models.BertBackbone.from_preset(result["hf"])
    sequence = build_transformer_model(result["hf"], result["hf"], verbose=False).predict(inputs, verbose=0)
    found = hub({"token_ids": batch["token_ids"], "segment_ids": batch["segment_ids"],
                 "padding_mask": batch["token_ids"] != 0})["sequence_output"]
    real = (batch["token_ids"] != 0)[..., None]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(found) * real, sequence * real, atol=1e-5)


def test_bert4keras_loads_the_google_checkpoint(pretrained, tmp_path):
    """bert4keras reads the checkpoint (its config's ``gelu`` with bert4keras's tanh GELU, which is gelu_new)."""
    out, result = pretrained
    google = result["google"]
    config = str(tmp_path / "bert_config.json")
    with open(config, "w") as f:
        json.dump(dict(json.load(open(os.path.join(google, "bert_config.json"))), hidden_act="gelu"), f)
    checkpoint = os.path.join(google, "bert_model.ckpt")
    model = build_transformer_model(os.path.join(google, "bert_config.json"), checkpoint, with_pool=True,
                                    with_mlm=True, verbose=False)
    batch = helpers.random_batch(model.get_layer("Embedding-Token").input_dim, seed=6)
    inputs = str(tmp_path / "inputs.npz")
    np.savez(inputs, **batch)
    oracle = helpers.run_oracle([{"kind": "bert", "config": config, "checkpoint": checkpoint, "inputs": inputs,
                                  "gelu": "tanh", "kwargs": {"with_pool": True, "with_mlm": True}}], str(tmp_path))
    ours = model.predict([batch["token_ids"], batch["segment_ids"]], verbose=0)
    for index, output in enumerate(ours):
        np.testing.assert_allclose(output, oracle[f"0/{index}"], atol=1e-5)


def test_next_sentence_prediction_trains_scores_and_loads_in_bert4keras(corpus, tmp_path):
    """With ``nsp`` the rows are sentence pairs; the held-out loss is the masked-LM loss plus NSP's cross-entropy,
    each as NumPy computes it from the model's probabilities, and bert4keras (``with_nsp``, ``with_mlm``) reads the
    Google checkpoint to the same NSP and MLM probabilities."""
    out = str(tmp_path / "nsp")
    result = pretrain(corpus["train"], out, dev=corpus["dev"], config=corpus["config"], vocab=corpus["vocab"],
                      **dict(OPTIONS, epochs=1), nsp=True)
    task, tokenizer = MaskedLmTask(nsp=True), Tokenizer(corpus["vocab"])
    features = task.encode(tokenizer, task.read(corpus["dev"]), None, 32, corpus["dev"])
    assert any(1 in row for row in features.segment_ids)
    trained = keras.saving.load_model(os.path.join(out, "model.keras"))
    mlm, nsp, random_next = [], [], []
    for inputs, (next_labels, targets) in task.batches(to_dataset(features, 16), tokenizer, 0, None):
        nsp_probs, probs = (x.astype("float64") for x in trained.predict_on_batch(inputs))
        targets, next_labels = targets.numpy(), next_labels.numpy()
        rows, cols = np.nonzero(targets)
        mlm += list(-np.log(probs[rows, cols, targets[rows, cols]]))
        nsp += list(-np.log(nsp_probs[np.arange(len(next_labels)), next_labels]))
        random_next += list(next_labels)
    dev = result["dev"]
    np.testing.assert_allclose([dev["mlm_loss"], dev["nsp_loss"]], [np.mean(mlm), np.mean(nsp)], rtol=1e-5)
    assert dev["loss"] == pytest.approx(dev["mlm_loss"] + dev["nsp_loss"])
    assert 0.3 < np.mean(random_next) < 0.8 and 0 <= dev["nsp_accuracy"] <= 1
    assert "val_nsp_accuracy" in open(os.path.join(out, "history.csv")).readline()

    google = result["google"]
    config = str(tmp_path / "bert_config.json")
    with open(config, "w") as f:
        json.dump(dict(json.load(open(os.path.join(google, "bert_config.json"))), hidden_act="gelu"), f)
    batch = helpers.random_batch(trained.get_layer("Embedding-Token").input_dim, seed=7)
    np.savez(str(tmp_path / "inputs.npz"), **batch)
    checkpoint = os.path.join(google, "bert_model.ckpt")
    oracle = helpers.run_oracle([{"kind": "bert", "config": config, "checkpoint": checkpoint,
                                  "inputs": str(tmp_path / "inputs.npz"), "gelu": "tanh",
                                  "kwargs": {"with_nsp": True, "with_mlm": True}}], str(tmp_path))
    every = every_position(batch["token_ids"])
    for index, output in enumerate(trained.predict([batch["token_ids"], batch["segment_ids"], every], verbose=0)):
        np.testing.assert_allclose(output, oracle[f"0/{index}"], atol=1e-5)


def test_fine_tuning_and_pretraining_again_start_from_it(corpus, pretrained, tmp_path):
    from kerasbert.finetune.training import train

    out, result = pretrained
    tuned = train("cls", corpus["cls_train"], str(tmp_path / "cls"), checkpoint=result["google"], epochs=1,
                  max_steps=3, batch_size=8, verbose=0)
    assert tuned["steps"] == 3
    again = pretrain(corpus["dev"], str(tmp_path / "again"), checkpoint=result["google"], epochs=1, batch_size=8,
                     maxlen=32, verbose=0)
    assert os.path.isdir(again["hf"]) and again["steps"] > 0


def test_the_command_line(corpus, tmp_path, capsys):
    out = str(tmp_path / "run")
    assert main(["pretrain", "--data", corpus["dev"], "--out", out, "--config", corpus["config"], "--vocab",
                 corpus["vocab"], "--epochs", "1", "--maxlen", "32", "--batch-size", "8", "--mask-rate", "0.2",
                 "--no-whole-word", "--nsp", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert f"Google checkpoint: {out}/google" in printed and f"Hugging Face folder: {out}/hf" in printed
    saved = json.load(open(os.path.join(out, "args.json")))
    assert (saved["task"], saved["mask_rate"], saved["whole_word"], saved["nsp"], saved["schedule"]) == (
        "mlm", 0.2, False, True, "linear")


@pytest.mark.parametrize("case", ["no-mask", "empty", "gbk", "rate"])
def test_bad_inputs_are_one_named_error_and_write_nothing(corpus, tmp_path, case):
    out, vocab, data, options = str(tmp_path / "run"), corpus["vocab"], corpus["dev"], {}
    if case == "no-mask":
        tokens = [t for t in open(vocab, encoding="utf-8").read().split() if t != "[MASK]"]
        vocab = helpers.write_vocab(str(tmp_path), tokens)
    elif case == "empty":
        data = str(tmp_path / "empty.txt")
        open(data, "w").write("\n\n  \n")
    elif case == "gbk":
        data = str(tmp_path / "gbk.txt")
        open(data, "wb").write("很好的一天\n\n".encode("gbk"))
    else:
        options = {"mask_rate": 1.5}
    error = ConfigError if case in ("no-mask", "rate") else DataError
    with pytest.raises(error) as caught:
        pretrain(data, out, config=corpus["config"], vocab=vocab, epochs=1, maxlen=32, verbose=0, **options)
    expected = {"no-mask": "[MASK]", "empty": data, "gbk": data, "rate": "--mask-rate"}[case]
    assert expected in str(caught.value)
    assert not os.path.exists(out)


def test_a_glob_streams_the_rows_a_file_gives(corpus, tmp_path):
    """The corpus cut into two files and read by a glob (prepared into shards, streamed) gives the rows the one
    file gives: the same steps an epoch, and ``kerasbert prepare --task mlm`` writes them."""
    documents = open(corpus["dev"], encoding="utf-8").read().split("\n\n")
    half = len(documents) // 2
    for index, part in enumerate((documents[:half], documents[half:])):
        (tmp_path / f"part-{index}.txt").write_text("\n\n".join(part).strip() + "\n", encoding="utf-8")
    options = dict(config=corpus["config"], vocab=corpus["vocab"], epochs=1, batch_size=4, maxlen=32, verbose=0)
    whole = pretrain(corpus["dev"], str(tmp_path / "whole"), **options)
    streamed = pretrain(str(tmp_path / "part-*.txt"), str(tmp_path / "streamed"), **options)
    assert streamed["steps"] == whole["steps"] > 0
    assert main(["prepare", "--task", "mlm", "--data", str(tmp_path / "part-*.txt"), "--vocab", corpus["vocab"],
                 "--maxlen", "32", "--out", str(tmp_path / "prepared")]) == 0
    prepared = pretrain(str(tmp_path / "prepared"), str(tmp_path / "from-prepared"), **options)
    assert prepared["steps"] == whole["steps"]


def test_sentence_pairs_prepare_and_a_prepared_folder_must_match_the_run(corpus, tmp_path):
    """``prepare --task mlm --nsp`` writes the pairs a run packs itself; a folder prepared with other masking
    options than the run's (pairs or not, whole words or not) is refused by name."""
    options = dict(config=corpus["config"], vocab=corpus["vocab"], epochs=1, batch_size=4, maxlen=32, verbose=0)
    folder = str(tmp_path / "prepared")
    assert main(["prepare", "--task", "mlm", "--nsp", "--data", corpus["dev"], "--vocab", corpus["vocab"],
                 "--maxlen", "32", "--out", folder, "--quiet"]) == 0
    whole = pretrain(corpus["dev"], str(tmp_path / "whole"), nsp=True, **options)
    assert pretrain(folder, str(tmp_path / "from-prepared"), nsp=True, **options)["steps"] == whole["steps"]
    for wrong, message in (({}, "expected data prepared with nsp False, found True"),
                           ({"nsp": True, "whole_word": False}, "expected data prepared with whole_word False")):
        with pytest.raises(ConfigError, match=message):
            pretrain(folder, str(tmp_path / "wrong"), **options, **wrong)
        assert not os.path.exists(tmp_path / "wrong")


@pytest.mark.slow
def test_a_run_killed_mid_epoch_resumes_to_the_uninterrupted_weights(corpus, tmp_path):
    """The masks a resumed epoch draws are those it would have drawn: a run killed (SIGKILL) inside its second epoch
    and resumed ends with the weights of the run that was never stopped, each in a process of its own."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    common = [sys.executable, "-m", "kerasbert", "pretrain", "--data", corpus["dev"], "--config", corpus["config"],
              "--vocab", corpus["vocab"], "--maxlen", "32", "--batch-size", "4", "--epochs", "2", "--lr", "2e-3",
              "--save-every", "2", "--quiet"]
    runs = {name: str(tmp_path / name) for name in ("whole", "killed")}
    whole = subprocess.Popen([*common, "--out", runs["whole"]], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    state = helpers.kill_mid_epoch(subprocess.Popen([*common, "--out", runs["killed"]], env=env,
                                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                                   runs["killed"])
    assert whole.wait(timeout=600) == 0, whole.stderr.read()[-3000:]
    assert state["epoch"] == 1 and state["step"] > 0
    done = subprocess.run([sys.executable, "-m", "kerasbert", "pretrain", "--out", runs["killed"], "--resume",
                           "--quiet"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Hugging Face folder" in done.stdout
    weights = {name: keras.saving.load_model(os.path.join(run, "model.keras"), compile=False).get_weights()
               for name, run in runs.items()}
    for x, y in zip(weights["whole"], weights["killed"], strict=True):
        np.testing.assert_allclose(x, y, atol=1e-5)


def test_evaluate_scores_a_pretraining_run_and_predict_and_export_say_what_to_do(corpus, pretrained, tmp_path,
                                                                                  capsys):
    out, result = pretrained
    assert main(["evaluate", out, "--data", corpus["dev"]]) == 0
    printed = capsys.readouterr().out
    assert f"masked-LM loss {result['dev']['loss']:.4f}  accuracy {result['dev']['accuracy']:.4f}" in printed
    assert main(["predict", out, "--text", "你好"]) == 2
    assert "found a pretraining run (task mlm)" in capsys.readouterr().err
    assert main(["export", out, str(tmp_path / "export")]) == 2
    assert f"kerasbert export {out}/google OUT" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "export")


@pytest.mark.slow
def test_two_replicas_and_mixed_precision_pretrain(corpus, tmp_path):
    """MirroredStrategy on two logical CPUs (each replica masks its own rows' share of the batch) and bfloat16
    mixed precision with gradient accumulation both train and write the checkpoints."""
    two_cpus = ("import sys, tensorflow as tf\ncpu = tf.config.list_physical_devices('CPU')[0]\n"
                "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)\n"
                "from kerasbert.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    out = str(tmp_path / "mirrored")
    done = subprocess.run([sys.executable, "-c", two_cpus, "pretrain", "--data", corpus["dev"], "--config",
                           corpus["config"], "--vocab", corpus["vocab"], "--maxlen", "32", "--batch-size", "4",
                           "--epochs", "1", "--strategy", "mirrored", "--out", out, "--quiet"],
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "MirroredStrategy: 2 replica(s) x 4 rows = global batch 8" in done.stderr
    assert os.path.isfile(os.path.join(out, "google", "bert_model.ckpt.index"))
    mixed = pretrain(corpus["dev"], str(tmp_path / "mixed"), dev=corpus["dev"], config=corpus["config"],
                     vocab=corpus["vocab"], epochs=1, batch_size=8, maxlen=32, mixed_precision=True, grad_accum=2,
                     verbose=0)
    assert np.isfinite(mixed["dev"]["loss"]) and os.path.isdir(mixed["hf"])
