"""``--task seq2seq --model mt5.1.1 --pre-tokenize jieba``: T5 PEGASUS's fine-tuning from the command line, on a
vocab.txt of characters and whole jieba words and a random mT5.1.1 checkpoint over it. Its sources and decoder ids
equal bert4keras's ``Tokenizer(vocab, do_lower_case=True, pre_tokenize=lambda s: jieba.cut(s, HMM=False))``; the
run keeps the option and reloads with it to evaluate and predict by generation from ``[CLS]`` to ``[SEP]``; what
is refused: a word vocabulary without the option, the option where it cannot apply, and the run's export."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest

from kerasbert import build_transformer_model, generate, save_google_checkpoint
from kerasbert.cli import main
from kerasbert.finetune.metrics import generation_metrics
from kerasbert.finetune.runs import open_run
from kerasbert.finetune.t5_seq2seq import T5Seq2SeqTask
from kerasbert.finetune.tasks import get_task
from kerasbert.text.pipeline import to_dataset
from kerasbert.text.readers import LabelSet
from kerasbert.text.tokenizer import Tokenizer

import helpers

CONFIG = {"hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3, "attention_head_size": 5,
          "intermediate_size": 20, "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
          "relative_attention_num_buckets": 32, "attention_scale": False, "is_dropout": True,
          "hidden_act": ["gelu", "linear"]}
PHRASES = ["我们今天去北京大学看看", "天气很好", "自然语言处理是人工智能的一个方向", "模型训练数据", "新闻标题生成",
           "中华人民共和国成立了"]
# whole words jieba cuts from the phrases (HMM off); "新闻标题" is left out, so it is read character by character
WORDS = ["我们", "今天", "北京大学", "看看", "天气", "自然语言", "处理", "人工智能", "一个", "方向", "模型", "训练",
         "数据", "生成", "中华人民共和国", "成立"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "，"]
         + sorted({ch for phrase in PHRASES for ch in phrase}) + WORDS)
CLS, SEP = 2, 3
MAXLEN, TARGET_MAXLEN = 16, 5


def _pairs(path: str, count: int, seed: int) -> str:
    """Two-column TSV: a source of two to four phrases, its target the first."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(count):
            phrases = rng.sample(PHRASES, rng.randint(2, 4))
            f.write("，".join(phrases) + "\t" + phrases[0] + "\n")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """The vocab.txt, an mT5.1.1 config over it and its random Google checkpoint (weights far from 0, so that a
    short training leaves it writing varied tokens), training and dev pairs."""
    work = str(tmp_path_factory.mktemp("pegasus"))
    config = os.path.join(work, "config.json")
    with open(config, "w") as f:
        json.dump({**CONFIG, "vocab_size": len(VOCAB)}, f)
    checkpoint = os.path.join(work, "model.ckpt")
    model = build_transformer_model(config, model="mt5.1.1", verbose=False)
    rng = np.random.default_rng(0)
    model.set_weights([rng.normal(0, 0.5, w.shape).astype("float32") + ("gamma" in w.path) for w in model.weights])
    save_google_checkpoint(model, checkpoint)
    return {"vocab": helpers.write_vocab(work, VOCAB), "config": config, "checkpoint": checkpoint, "work": work,
            "train": _pairs(os.path.join(work, "train.tsv"), 32, 1), "dev": _pairs(os.path.join(work, "dev.tsv"), 8, 2)}


def _train(files: dict, out: str, *options: str) -> int:
    return main(["train", "--task", "seq2seq", "--model", "mt5.1.1", "--config", files["config"], "--checkpoint",
                 files["checkpoint"], "--vocab", files["vocab"], "--train", files["train"], "--dev", files["dev"],
                 "--out", out, "--epochs", "1", "--batch-size", "8", "--lr", "1e-3", "--maxlen", str(MAXLEN),
                 "--target-maxlen", str(TARGET_MAXLEN), "--quiet", *options])


@pytest.fixture(scope="module")
def pegasus_run(files) -> str:
    out = os.path.join(files["work"], "run")
    assert _train(files, out, "--pre-tokenize", "jieba") == 0
    return out


@pytest.fixture(scope="module")
def oracle(files, tmp_path_factory) -> list[dict]:
    """bert4keras's T5 PEGASUS tokenizer on every training source (cut to MAXLEN) and target (TARGET_MAXLEN + 1)."""
    examples = T5Seq2SeqTask().read(files["train"])
    cases = [[e.text, None, MAXLEN] for e in examples] + [[e.label, None, TARGET_MAXLEN + 1] for e in examples]
    tasks = [{"kind": "tokenizer", "vocab": files["vocab"], "do_lower_case": True, "cases": cases,
              "pre_tokenize": "jieba"}]
    return json.loads(str(helpers.run_oracle(tasks, str(tmp_path_factory.mktemp("pegasus_oracle")))["0/json"]))


def _generated(loaded, sources: list[str]) -> list[str]:
    """Each source's greedy generation by `kerasbert.generate` from [CLS] until [SEP], decoded."""
    ids = [loaded.tokenizer.encode(source, maxlen=MAXLEN)[0] for source in sources]
    found = generate(loaded.model, ids, "greedy", start_id=CLS, end_ids=SEP, max_length=TARGET_MAXLEN)
    return [loaded.tokenizer.decode([i for i in g.ids[0] if i != SEP]) for g in found]


@pytest.mark.slow
def test_sources_and_decoder_ids_equal_bert4keras_t5_pegasus_tokenizer(files, oracle):
    task = get_task("seq2seq", "mt5.1.1", target_maxlen=TARGET_MAXLEN, pre_tokenize="jieba")
    tokenizer = task.make_tokenizer(files["vocab"], True)
    examples = task.read(files["train"])
    features = task.encode(tokenizer, examples, LabelSet([]), MAXLEN, "train")
    assert features.token_ids == [case["ids"] for case in oracle[:len(examples)]]
    assert features.labels == [case["ids"] for case in oracle[len(examples):]]
    assert features.prompts == features.token_ids
    assert all(row[0] == CLS and row[-1] == SEP for row in features.token_ids + features.labels)
    assert max(map(len, features.token_ids)) == MAXLEN and max(map(len, features.labels)) == TARGET_MAXLEN + 1
    first = next(row for example, row in zip(examples, features.labels, strict=True) if example.label == PHRASES[0])
    assert tokenizer.ids_to_tokens(first) == ["[CLS]", "我们", "今天", "去", "北京大学", "[SEP]"]  # whole words, cut


@pytest.mark.slow
def test_the_run_keeps_pre_tokenize_and_feeds_the_decoder_from_cls(files, pegasus_run):
    assert json.load(open(os.path.join(pegasus_run, "args.json")))["pre_tokenize"] == "jieba"
    loaded = open_run(pegasus_run)
    assert isinstance(loaded.task, T5Seq2SeqTask) and loaded.task.pre_tokenize == "jieba"
    assert isinstance(loaded.tokenizer, Tokenizer) and loaded.tokenizer.tokenize("北京大学") == ["[CLS]", "北京大学",
                                                                                                 "[SEP]"]
    examples = loaded.task.read(files["train"])
    features = loaded.task.encode(loaded.tokenizer, examples, LabelSet([]), MAXLEN, "train")
    inputs, labels = next(iter(loaded.task.batches(to_dataset(features, 8, seed=0), loaded.tokenizer, 0, 0)))
    decoder, labels = np.asarray(inputs["Decoder-Input-Token"]), np.asarray(labels)
    assert (decoder[:, 0] == CLS).all() and (labels[:, :-1] == decoder[:, 1:]).all() and (labels[:, -1] == 0).all()


@pytest.mark.slow
def test_evaluate_prints_rouge_and_bleu_of_generation_from_cls(files, pegasus_run, capsys):
    assert main(["evaluate", pegasus_run]) == 0
    printed = capsys.readouterr().out
    loaded = open_run(pegasus_run)
    examples = loaded.task.read(files["dev"])
    expected = generation_metrics([e.label for e in examples], _generated(loaded, [e.text for e in examples]))
    helpers.check_generation_scores(pegasus_run, expected, printed)


@pytest.mark.slow
def test_predict_prints_the_text_generated_from_cls_to_sep(pegasus_run, capsys):
    source = "我们今天去北京大学看看，天气很好"
    assert main(["predict", pegasus_run, "--text", source]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert row == {"text": source, "target": _generated(open_run(pegasus_run), [source])[0]} and row["target"]


@pytest.mark.slow
def test_the_run_is_not_exported(pegasus_run, tmp_path, capsys):
    assert main(["export", pegasus_run, str(tmp_path / "export"), "--format", "onnx"]) == 2
    err = capsys.readouterr().err
    assert (f"{pegasus_run}: expected a run of word pieces alone to export, found a run trained with --pre-tokenize "
            "jieba. the SavedModel's tokenizer runs in the graph and the ONNX and OpenVINO exports' in kerasbert's "
            "runtime, and neither cuts words") in err
    assert not os.path.exists(tmp_path / "export")


@pytest.mark.slow
def test_a_word_vocabulary_without_pre_tokenize_is_refused(files, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("kerasbert.text.pre_tokenize.WORD_VOCABULARY", 10)  # the vocabulary holds 16 words
    assert _train(files, str(tmp_path / "run")) == 2
    err = capsys.readouterr().err
    assert (f"{files['vocab']}: expected a vocabulary of characters and word pieces, found 16 whole Chinese words (a "
            "word-level vocabulary, as RoFormer's or T5 PEGASUS's). cut the texts into words first: kerasbert train "
            "--pre-tokenize jieba (cls, seq2seq)") in err
    assert not os.path.exists(tmp_path / "run" / "args.json")


@pytest.mark.parametrize(("task", "why"), [("ner", "its tags sit on the characters as BERT splits them"),
                                           ("sim", "its sentence vectors are served by kerasbert embed"),
                                           ("mlm", "masking cuts its own words")])
def test_pre_tokenize_is_refused_where_a_task_reads_no_whole_texts(files, tmp_path, capsys, task, why):
    code = main(["train", "--task", task, "--vocab", files["vocab"], "--train", files["train"], "--out",
                 str(tmp_path / "run"), "--pre-tokenize", "jieba"])
    err = capsys.readouterr().err
    assert code == 2 and f"--pre-tokenize: expected --task cls or seq2seq, found --task {task}. {why}" in err


def test_pre_tokenize_is_refused_with_a_sentencepiece_model(files, tmp_path, capsys):
    spm = helpers.write_sentencepiece(str(tmp_path))
    code = main(["train", "--task", "seq2seq", "--model", "mt5.1.1", "--vocab", spm, "--train", files["train"],
                 "--out", str(tmp_path / "run"), "--pre-tokenize", "jieba"])
    err = capsys.readouterr().err
    assert code == 2 and (f"--pre-tokenize: expected a WordPiece vocab.txt (T5 PEGASUS's, RoFormer's), found the "
                          f"SentencePiece model {spm!r}. SentencePiece cuts its own pieces") in err


def test_a_cls_task_cuts_words_with_pre_tokenize(files):
    text = "自然语言处理是人工智能的一个方向"
    words = get_task("cls", pre_tokenize="jieba").make_tokenizer(files["vocab"], True).tokenize(text)
    assert words == ["[CLS]", "自然语言", "处理", "是", "人工智能", "的", "一个", "方向", "[SEP]"]
    assert get_task("cls").make_tokenizer(files["vocab"], True).tokenize(text)[1:3] == ["自", "然"]
