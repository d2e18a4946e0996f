"""``--task seq2seq`` on a T5 family: an mT5.1.1 trained from the command line on source/target pairs with a
SentencePiece model, its inputs as bert4keras's mT5 autotitle example builds them, its first batch's loss shifted
and masked by hand, and its run folder reloaded to evaluate and predict with greedy generation."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from kerasbert import ConfigError, build_transformer_model, generate, save_google_checkpoint
from kerasbert.cli import main
from kerasbert.finetune.metrics import generation_metrics
from kerasbert.finetune.runs import open_run
from kerasbert.finetune.t5_seq2seq import T5Seq2SeqTask
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.readers import LabelSet
from kerasbert.text.sentencepiece import SpTokenizer

import helpers

CONFIG = helpers.TINY_T5
MAXLEN, TARGET_MAXLEN = 24, 6
_pairs = helpers.write_t5_pairs  # JSONL pairs: a source of Chinese characters and English words, its target the words


@pytest.fixture(scope="module")
def t5_run(tmp_path_factory):
    """An mT5.1.1 of random weights saved as a Google checkpoint, trained one epoch from the command line."""
    work = str(tmp_path_factory.mktemp("mt5"))
    spm = helpers.write_sentencepiece(work)
    config = os.path.join(work, "mt5_config.json")
    with open(config, "w") as f:
        json.dump({**CONFIG, "vocab_size": SpTokenizer(spm).vocab_size}, f)
    checkpoint = os.path.join(work, "model.ckpt")
    save_google_checkpoint(build_transformer_model(config, model="mt5.1.1", verbose=False), checkpoint)
    paths = {"train": _pairs(os.path.join(work, "train.jsonl"), 40, 1),
             "dev": _pairs(os.path.join(work, "dev.jsonl"), 10, 2), "spm": spm, "out": os.path.join(work, "run")}
    code = main(["train", "--task", "seq2seq", "--model", "mt5.1.1", "--config", config, "--checkpoint", checkpoint,
                 "--vocab", spm, "--train", paths["train"], "--dev", paths["dev"], "--out", paths["out"], "--epochs",
                 "1", "--batch-size", "8", "--lr", "1e-3", "--maxlen", str(MAXLEN), "--target-maxlen",
                 str(TARGET_MAXLEN), "--quiet"])
    assert code == 0
    return paths


def _generated(loaded, sources: list[str]) -> list[str]:
    """Each source's greedy generation, decoded, by `kerasbert.generate` on the whole T5 until ``</s>``."""
    ids = [loaded.tokenizer.encode(source, maxlen=MAXLEN)[0] for source in sources]
    found = generate(loaded.model, ids, "greedy", end_ids=1, max_length=TARGET_MAXLEN)
    return [loaded.tokenizer.decode([i for i in g.ids[0] if i != 1]) for g in found]


@pytest.mark.slow
def test_the_run_folder_reloads_as_an_mt5(t5_run):
    loaded = open_run(t5_run["out"])
    assert os.path.isfile(os.path.join(t5_run["out"], "spiece.model"))
    assert not os.path.exists(os.path.join(t5_run["out"], "vocab.txt"))
    assert loaded.model.family == "mt5.1.1" and isinstance(loaded.task, T5Seq2SeqTask)
    assert loaded.tokenizer.encode("the news")[0][-1] == 1 and loaded.tokenizer._token_start_id is None


def test_sources_and_decoder_ids_are_the_mt5_examples(tmp_path):
    """``SpTokenizer(spm, token_start=None, token_end="</s>")``: the source cut to maxlen, ``[0] + target``."""
    spm = helpers.write_sentencepiece(str(tmp_path))
    tokenizer = SpTokenizer(spm, token_start=None, token_end="</s>")
    task = T5Seq2SeqTask(target_maxlen=4)
    examples = task.read(_pairs(str(tmp_path / "pairs.jsonl"), 6, 3))
    features = task.encode(tokenizer, examples, LabelSet([]), 10, "pairs")
    for example, source, decoder in zip(examples, features.token_ids, features.labels, strict=True):
        assert source == tokenizer.encode(example.text, maxlen=10)[0] and source[-1] == 1
        assert decoder == [0, *tokenizer.encode(example.label, maxlen=4)[0]]
    assert features.prompts == features.token_ids


def test_a_t5_task_refuses_pre_tokenize_with_a_sentencepiece_model(tmp_path):
    spm = helpers.write_sentencepiece(str(tmp_path))
    with pytest.raises(ConfigError, match=r"--pre-tokenize: expected a WordPiece vocab.txt \(T5 PEGASUS's\), found the "
                                          r"SentencePiece model '.*\.model'\. leave --pre-tokenize out"):
        T5Seq2SeqTask(pre_tokenize="jieba").make_tokenizer(spm, True)


@pytest.mark.slow
def test_the_first_batch_loss_is_the_shifted_masked_cross_entropy(t5_run):
    """bert4keras's mT5 loss: y_pred[:, :-1] against the decoder ids [:, 1:], masked where the decoder id is 0."""
    loaded = open_run(t5_run["out"])
    task = loaded.task
    examples = task.read(t5_run["train"])
    features = task.encode(loaded.tokenizer, examples, LabelSet([]), MAXLEN, "train")
    inputs, labels = next(iter(task.batches(to_dataset(features, 8, seed=0), loaded.tokenizer, 0, 0)))
    assert sorted(inputs) == ["Decoder-Input-Token", "Encoder-Input-Token"]
    probs = np.asarray(loaded.model(inputs, training=False))
    decoder = np.asarray(inputs["Decoder-Input-Token"])
    assert (decoder[:, 0] == 0).all() and (decoder[:, 1:] == 0).any()  # the start id 0, then targets and padding
    mask = (decoder[:, 1:] != 0).astype("float64")
    picked = np.take_along_axis(probs[:, :-1], decoder[:, 1:, None], axis=-1)[..., 0]
    expected = float(np.sum(-np.log(picked) * mask) / np.sum(mask))
    loaded.model.compile("adam", **task.compile_arguments(loaded.model))  # Keras's path, as fit computes it
    got = loaded.model.test_on_batch(inputs, labels, return_dict=True)
    right = float(np.sum((probs[:, :-1].argmax(-1) == decoder[:, 1:]) * mask) / np.sum(mask))
    assert got["loss"] == pytest.approx(expected, rel=1e-5) and got["masked_accuracy"] == pytest.approx(right)


@pytest.mark.slow
def test_evaluate_prints_rouge_and_bleu_of_greedy_generation(t5_run, capsys):
    assert main(["evaluate", t5_run["out"]]) == 0
    printed = capsys.readouterr().out
    loaded = open_run(t5_run["out"])
    examples = loaded.task.read(t5_run["dev"])
    expected = generation_metrics([e.label for e in examples], _generated(loaded, [e.text for e in examples]))
    helpers.check_generation_scores(t5_run["out"], expected, printed)


@pytest.mark.slow
def test_predict_prints_the_generated_target(t5_run, capsys):
    source = "我们今天去北京 the news"
    assert main(["predict", t5_run["out"], "--text", source]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert row == {"text": source, "target": _generated(open_run(t5_run["out"]), [source])[0]}
