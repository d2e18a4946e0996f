"""The user's path on the Hugging Face encoder families: ``kerasbert train`` from a Hugging Face folder
(``config.json``, ``model.safetensors`` of random weights, the family's tokenizer: a ``tokenizer.json`` trained here
on the demo's own texts, or DistilBERT's ``vocab.txt``), then ``evaluate`` and ``predict``, every fine-tuning task
on one family or another; a RoBERTa tagger exported to ONNX and OpenVINO answering as its run, an int8 export, the
SavedModel refused with the portable exports named, and ``kerasbert serve``'s app answering a request."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from starlette.testclient import TestClient
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from kerasbert import cli
from kerasbert.finetune.demo import DEMO_TEXTS, demo_files

import hf_encoder_folders as encoders
import hf_tokenizer_files as tokenizer_files
import modernbert_folders

# DeBERTa-v3's folder writer lives beside its weight tests, which import their neighbours by name
from deberta_folders import CONFIG as DEBERTA_CONFIG
from deberta_folders import deberta_tensors

pytestmark = pytest.mark.slow  # trains twelve tiny models

MAXLEN = 32
SIZES = {"n_train": 40, "n_dev": 8, "n_test": 8}
BPE_SPECIALS = {"roberta_en": tokenizer_files.ROBERTA_SPECIALS,
                "modernbert": ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]}
# each family's runs: task -> extra ``kerasbert train`` flags
RUNS = {"roberta_en": {"ner": ["--crf"], "qa": []}, "xlm_roberta": {"span": [], "sim": []},
        "deberta_v3": {"cls": [], "relation": []}, "modernbert": {"ner": [], "rerank": []},
        "distilbert": {"cls": [], "multilabel": []}}
SCORES = {"cls": "accuracy", "ner": "f1", "span": "f1", "sim": "spearman", "qa": "f1", "relation": "f1",
          "multilabel": "micro_f1", "rerank": "mrr_at_10"}


# ------------------------------------------------------------------------------------------- folders
def _corpus(files: dict[str, str]) -> list[str]:
    """Every line of the task's data files and the demo's inputs: what the tokenizer is trained on."""
    lines = [line.strip() for split in ("train", "dev", "test") for line in open(files[split], encoding="utf-8")]
    texts = [value for row in DEMO_TEXTS.values() for item in row
             for value in (item.values() if isinstance(item, dict) else [item])]
    return [line for line in lines + texts if line]


def _bpe(family: str, corpus: list[str], folder: str) -> Tokenizer:
    """A byte-level BPE ``tokenizer.json``: RoBERTa's specials and layout, or ModernBERT's (``[CLS] A [SEP]``)."""
    specials = BPE_SPECIALS[family]
    rust = Tokenizer(models.BPE())
    rust.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    rust.decoder = decoders.ByteLevel()
    rust.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=1200, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    ids = {token: rust.token_to_id(token) for token in specials}
    if family == "roberta_en":
        rust.post_processor = tokenizer_files.roberta_template("<s>", "</s>", ids)
        pad, mask, unk = "<pad>", "<mask>", "<unk>"
    else:
        rust.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
        pad, mask, unk = "[PAD]", "[MASK]", "[UNK]"
    tokenizer_files._save(rust, folder, {"pad_token": pad, "mask_token": mask, "unk_token": unk})
    return rust


def _unigram(family: str, corpus: list[str], folder: str) -> Tokenizer:
    """A Unigram ``tokenizer.json`` with XLM-R's specials and layout, or DeBERTa-v3's."""
    specials = tokenizer_files.ROBERTA_SPECIALS if family == "xlm_roberta" else tokenizer_files.DEBERTA_SPECIALS
    rust = Tokenizer(models.Unigram())
    rust.normalizer = normalizers.NFKC()
    rust.pre_tokenizer = pre_tokenizers.Metaspace()
    rust.decoder = decoders.Metaspace()
    rust.train_from_iterator(corpus, trainers.UnigramTrainer(
        vocab_size=600, special_tokens=specials, unk_token=specials[3], show_progress=False))
    ids = {token: rust.token_to_id(token) for token in specials}
    if family == "xlm_roberta":
        rust.post_processor = tokenizer_files.roberta_template("<s>", "</s>", ids)
    else:
        rust.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    tokenizer_files._save(rust, folder)
    return rust


def _weights(family: str, vocab_size: int, pad_id: int, ids: dict) -> tuple[dict, dict]:
    """The family's tiny ``config.json`` for this vocabulary, and random weights in transformers' names."""
    if family in ("roberta_en", "xlm_roberta"):
        cfg = {**encoders.config(family), "vocab_size": vocab_size, "max_position_embeddings": MAXLEN + 2 + pad_id}
        return cfg, encoders.roberta_tensors(cfg, seed=1)
    if family == "distilbert":
        cfg = {**encoders.config(family), "vocab_size": vocab_size, "max_position_embeddings": MAXLEN}
        return cfg, encoders.distilbert_tensors(cfg, seed=1)
    if family == "deberta_v3":
        cfg = {**DEBERTA_CONFIG, "vocab_size": vocab_size, "pad_token_id": pad_id}
        return cfg, deberta_tensors(cfg, seed=1)
    cfg = {**modernbert_folders.CONFIG, "vocab_size": vocab_size, "max_position_embeddings": MAXLEN * 2,
           "pad_token_id": pad_id, "cls_token_id": ids["[CLS]"], "bos_token_id": ids["[CLS]"],
           "sep_token_id": ids["[SEP]"], "eos_token_id": ids["[SEP]"]}
    return cfg, modernbert_folders.modernbert_tensors(cfg, seed=1)


def hf_folder(family: str, files: dict[str, str], folder: str) -> str:
    """A Hugging Face folder of ``family`` whose tokenizer covers the task's data ``files``."""
    os.makedirs(folder, exist_ok=True)
    if family == "distilbert":  # BERT's WordPiece: the demo's own vocab.txt
        vocab = open(files["vocab"], encoding="utf-8").read().splitlines()
        with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        size, pad, ids = len(vocab), vocab.index("[PAD]"), {}
    else:
        write = _unigram if family in ("xlm_roberta", "deberta_v3") else _bpe
        rust = write(family, _corpus(files), folder)
        ids = {token: rust.token_to_id(token) for token in ("[CLS]", "[SEP]")}
        size, pad = rust.get_vocab_size(), rust.token_to_id("<pad>" if "<pad>" in rust.get_vocab() else "[PAD]")
    cfg, values = _weights(family, size, pad, ids)
    return encoders.write(folder, cfg, values)


# ------------------------------------------------------------------------------------------- runs
def _train(root: str, family: str, task: str, extra: list[str]) -> dict[str, str]:
    files = demo_files(task, os.path.join(root, task), seed=0)
    for split, size in (("train", SIZES["n_train"]), ("dev", SIZES["n_dev"]), ("test", SIZES["n_test"])):
        _keep_first(files[split], size, task)
    folder = hf_folder(family, files, os.path.join(root, task, "hf"))
    out = os.path.join(root, task, "run")
    code = cli.main(["train", "--task", task, "--train", files["train"], "--dev", files["dev"], "--config", folder,
                     "--checkpoint", folder, "--vocab", folder, "--out", out, "--epochs", "1", "--batch-size", "8",
                     "--lr", "1e-3", "--maxlen", str(MAXLEN), "--quiet", *extra])
    assert code == 0, (family, task)
    return {**files, "run": out, "folder": folder}


def _keep_first(path: str, size: int, task: str) -> None:
    """Cut a demo file to its first ``size`` examples (CoNLL: sentences; otherwise lines)."""
    text = open(path, encoding="utf-8").read()
    if path.endswith(".txt"):
        kept = "\n\n".join(text.strip().split("\n\n")[:size]) + "\n"
    else:
        kept = "".join(text.splitlines(keepends=True)[:size])
    with open(path, "w", encoding="utf-8") as f:
        f.write(kept)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``family`` -> ``{task: its files, run and folder}``: the family's tasks trained once each, on first use."""
    made: dict[str, dict[str, dict]] = {}

    def runs(family: str) -> dict[str, dict]:
        if family not in made:
            root = str(tmp_path_factory.mktemp(family))
            made[family] = {task: _train(root, family, task, extra) for task, extra in RUNS[family].items()}
        return made[family]

    return runs


def _predict(run: str, inputs: list, tmp: str) -> list[dict]:
    """``kerasbert predict RUN --input`` on ``inputs`` (texts or rows): the JSONL rows it writes (each call of a
    test writes over the previous call's ``--output`` file)."""
    source, output = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
    with open(source, "w", encoding="utf-8") as f:
        for item in inputs:
            f.write(json.dumps(item if isinstance(item, dict) else {"text": item}, ensure_ascii=False) + "\n")
    assert cli.main(["predict", run, "--input", source, "--output", output]) == 0
    return [json.loads(line) for line in open(output, encoding="utf-8")]


def _check_prediction(task: str, item, row: dict) -> None:
    """A prediction of ``task`` for ``item`` is shaped as the task answers, its offsets pointing into the text."""
    if task in ("ner", "span"):
        for entity in row["entities"]:
            assert row["text"][entity["start"]:entity["end"]] == entity["text"], row
    elif task == "relation":
        for spo in row["spo_list"]:
            for end in ("subject", "object"):
                assert row["text"][spo[f"{end}_start"]:spo[f"{end}_end"]] == spo[end], row
    elif task == "qa":
        assert row["answer"] == (item["context"][row["start"]:row["end"]] if row["start"] >= 0 else ""), row
    elif task == "cls":
        assert row["label"] in row["probabilities"] and sum(row["probabilities"].values()) == pytest.approx(1, 1e-4)
    elif task == "multilabel":
        assert set(row["labels"]) <= set(row["scores"]), row
    elif task == "sim":
        assert -1.0 - 1e-5 <= row["similarity"] <= 1.0 + 1e-5, row
    elif task == "rerank":
        assert isinstance(row["score"], float), row


@pytest.mark.parametrize("family", RUNS)
def test_each_task_trains_evaluates_and_predicts_from_an_hf_folder(trained, family, tmp_path):
    for task, files in trained(family).items():
        run = files["run"]
        assert cli.main(["evaluate", run, "--data", files["test"]]) == 0
        scores = json.load(open(os.path.join(run, "eval-test.json"), encoding="utf-8"))
        assert SCORES[task] in scores, (family, task, scores)
        inputs = DEMO_TEXTS[task][:2]
        rows = _predict(run, inputs, str(tmp_path))
        assert len(rows) == len(inputs), (family, task)
        for item, row in zip(inputs, rows, strict=True):
            _check_prediction(task, item, row)


def test_a_sim_run_and_its_hf_folder_embed_from_the_cli(trained, tmp_path):
    """``kerasbert embed`` on XLM-R's sim run and on the Hugging Face folder it started from: unit vectors."""
    files = trained("xlm_roberta")["sim"]
    texts = tmp_path / "texts.txt"
    texts.write_text("从北京到上海怎么走\n银行几点开门\n", encoding="utf-8")
    for name, model in (("run", files["run"]), ("folder", files["folder"])):
        out = str(tmp_path / f"{name}.npy")
        assert cli.main(["embed", model, "--input", str(texts), "--output", out, "--maxlen", str(MAXLEN),
                         "--quiet"]) == 0
        vectors = np.load(out)
        assert vectors.shape == (2, encoders.ROBERTA["hidden_size"]), name
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# ------------------------------------------------------------------------------------------- exports
TAGGED = ["张伟去年加入了华为公司", "李娜和王芳昨天去了北京", "听说赵敏在腾讯公司上班"]


@pytest.fixture(scope="module")
def tagger_exports(trained, tmp_path_factory) -> dict[str, str]:
    """RoBERTa's CRF tagger exported by the CLI to ONNX and OpenVINO (f32), and to ONNX int8."""
    run, root = trained("roberta_en")["ner"]["run"], tmp_path_factory.mktemp("exports")
    out = {}
    for kind, flags in (("onnx", ["--format", "onnx", "--precision", "f32"]),
                        ("openvino", ["--format", "openvino", "--precision", "f32"]),
                        ("onnx-int8", ["--format", "onnx", "--int8", "--accept-loss"])):
        out[kind] = str(root / kind)
        assert cli.main(["export", run, out[kind], *flags]) == 0, kind
    return out


@pytest.mark.parametrize("kind", ["onnx", "openvino", "onnx-int8"])
def test_a_roberta_tagger_exports_answer_as_its_run(trained, tagger_exports, kind, tmp_path):
    from kerasbert.serving.exported import predict_export

    run = trained("roberta_en")["ner"]["run"]
    info = json.load(open(os.path.join(tagger_exports[kind], "kerasbert-export.json"), encoding="utf-8"))
    assert (info["format"], info["int8"], info["vocab_file"]) == (kind.split("-")[0], kind.endswith("int8"),
                                                                   "tokenizer.json")
    got, want = predict_export(tagger_exports[kind], TAGGED), _predict(run, TAGGED, str(tmp_path))
    assert any(row["entities"] for row in want)
    for mine, theirs in zip(got, want, strict=True):
        for entity in mine["entities"]:
            assert mine["text"][entity["start"]:entity["end"]] == entity["text"]
        if not kind.endswith("int8"):  # float32: the same entities as the run's
            assert mine == theirs


def test_a_saved_model_of_a_tokenizer_json_run_is_refused_naming_the_portable_exports(trained, tmp_path, capsys):
    run, out = trained("deberta_v3")["cls"]["run"], str(tmp_path / "saved_model")
    assert cli.main(["export", run, out, "--format", "saved_model"]) == 2
    err = capsys.readouterr().err
    assert "--format saved_model" in err and "--format onnx" in err and "openvino" in err, err
    assert not os.path.exists(out)


def test_serve_answers_a_request_of_the_onnx_export(trained, tagger_exports):
    from kerasbert.serving.exported import open_export
    from kerasbert.serving.server import make_app

    want = [{key: value for key, value in row.items() if key != "text"}
            for row in open_export(tagger_exports["onnx"]).predict([{"text": text} for text in TAGGED])]
    with TestClient(make_app(open_export(tagger_exports["onnx"]), "ner")) as client:
        answer = client.post("/v1/models/ner:predict", json={"instances": TAGGED})
    assert answer.status_code == 200 and answer.json()["predictions"] == want
