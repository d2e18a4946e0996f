"""Bad inputs, one table: each row writes a broken config, checkpoint, vocabulary, data file, option or run
folder, calls kerasbert on it, and expects one named error whose message names what is wrong, with nothing
half-written left behind. Rows the CLI can take run through ``kerasbert.cli.main`` too: exit status 2, one line
on stderr, no traceback, and the folder exactly as before."""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from kerasbert.cli import main
from kerasbert.errors import CheckpointError, ConfigError, DataError
from kerasbert.finetune.tasks import get_task
from kerasbert.modeling.config import BertConfig
from kerasbert.text.ner_readers import read_conll, read_span_jsonl
from kerasbert.text.readers import LabelSet, read_classification
from kerasbert.text.tokenizer import Tokenizer

import bad_inputs_data
import bad_inputs_export
import bad_inputs_fill_mask
import bad_inputs_generation
import bad_inputs_multilabel
import bad_inputs_pretrain
import bad_inputs_qa
import bad_inputs_relation
import bad_inputs_rerank
import bad_inputs_runs
import bad_inputs_serving
import bad_inputs_vectors
import bad_inputs_weights
import helpers
from bad_input_kit import (
    CORE_SIZES,
    GPT2,
    ROOT,
    VOCAB,
    Case,
    Shared,
    cls_data,
    config,
    copy_run,
    data_file,
    fake_run,
    google,
    hf,
    listing,
    prepare_cli,
    text,
    tiny_load,
    tiny_model,
    train_call,
    train_cli,
    truncate,
    vocab,
)

# --------------------------------------------------------------------------- the table

def config_rows() -> list[Case]:
    summary = lambda tmp: ["summary", str(tmp / "bert_config.json")]  # noqa: E731
    from_json = lambda tmp: BertConfig.from_json(tmp / "bert_config.json")  # noqa: E731
    rows = [Case(f"config-missing-{key}", functools.partial(lambda tmp, _, key: config(tmp, drop=(key,)), key=key),
                 from_json, ConfigError, ("bert_config.json", key), cli=summary) for key in CORE_SIZES]
    bad = [("config-hidden_size-a-string", {"hidden_size": "32"}, ("hidden_size", "'32'")),
           ("config-num_hidden_layers-a-float", {"num_hidden_layers": 2.5}, ("num_hidden_layers", "2.5")),
           ("config-num_attention_heads-a-bool", {"num_attention_heads": True}, ("num_attention_heads", "True")),
           ("config-vocab_size-zero", {"vocab_size": 0}, ("vocab_size", "positive", "0")),
           ("config-intermediate_size-negative", {"intermediate_size": -64}, ("intermediate_size", "-64")),
           ("config-hidden_size-nan", {"hidden_size": math.nan}, ("hidden_size", "nan")),
           ("config-heads-not-dividing-hidden", {"num_attention_heads": 3}, ("num_attention_heads", "divisor", "3")),
           ("config-unknown-activation", {"hidden_act": "mish"}, ("hidden_act", "gelu", "'mish'")),
           ("config-dropout-above-one", {"hidden_dropout_prob": 1.5}, ("hidden_dropout_prob", "1.5"))]
    rows += [Case(name, functools.partial(lambda tmp, _, changes: config(tmp, **changes), changes=changes),
                  from_json, ConfigError, ("bert_config.json", *words), cli=summary) for name, changes, words in bad]
    raw = [("config-llama", json.dumps({**GPT2, "model_type": "llama"}), ("model_type", "'gpt2'", "'llama'")),
           ("config-gpt2-keys-without-model_type", json.dumps({k: v for k, v in GPT2.items() if k != "model_type"}),
            ("hidden_size", "n_embd")),
           ("config-trailing-comma", json.dumps(helpers.TINY)[:-1] + ",}", ("JSON", "line 1")),
           ("config-a-json-list", "[1, 2]", ("JSON object", "list")),
           ("config-gbk-bytes", b'{"vocab_size": 128, "note": "\xd6\xd0\xce\xc4"}', ("UTF-8",))]
    rows += [Case(name, functools.partial(lambda tmp, _, content: text(tmp / "bert_config.json", content),
                                          content=content),
                  from_json, ConfigError, ("bert_config.json", *words), cli=summary) for name, content, words in raw]
    rows.append(Case("config-no-such-file", lambda tmp, _: None, from_json, ConfigError,
                     ("bert_config.json", "no such file"), cli=summary))
    return rows


def checkpoint_rows() -> list[Case]:
    convert = lambda tmp: ["convert", str(tmp / "ckpt"), str(tmp / "out")]  # noqa: E731
    other = dict(helpers.TINY)

    def several(tmp, _):
        google(tmp, prefix="model.ckpt-100")
        google(tmp, prefix="model.ckpt-200")

    def without_data(tmp, _):
        data_file(google(tmp)).unlink()

    def int_embeddings(tmp, _):
        values = helpers.random_google_weights(helpers.TINY, heads=False)
        values["bert/embeddings/word_embeddings"] = np.ones((128, 32), np.int32)
        google(tmp, values=values)

    def hf_int(tmp, _):
        values = helpers.random_google_weights(helpers.TINY, heads=False)
        values["bert/embeddings/word_embeddings"] = np.ones((128, 32), np.int32)
        hf(tmp, values=values, name="ckpt")

    def other_model(**changes):
        return lambda tmp, _: google(tmp, {**other, **changes})

    def hf_truncated(tmp, _):
        truncate(hf(tmp, name="ckpt") / "model.safetensors", 0.7)

    def hf_shard_missing(tmp, _):
        folder = tmp / "ckpt"
        text(folder / "config.json", json.dumps(helpers.TINY))
        index = {"weight_map": {"a": "model-00001-of-00002.safetensors"}}
        text(folder / "model.safetensors.index.json", json.dumps(index))

    return [
        Case("google-folder-empty", lambda tmp, _: (tmp / "ckpt").mkdir(), lambda tmp: tiny_load(tmp / "ckpt"),
             CheckpointError, ("ckpt", "bert_model.ckpt.index", "none of them"), ("out",), convert),
        Case("google-prefix-missing", lambda tmp, _: (tmp / "ckpt").mkdir(),
             lambda tmp: tiny_load(tmp / "ckpt" / "bert_model.ckpt"), CheckpointError,
             ("bert_model.ckpt", "no such checkpoint"), ("out",),
             lambda tmp: ["convert", str(tmp / "ckpt" / "bert_model.ckpt"), str(tmp / "out")]),
        Case("google-data-file-truncated", lambda tmp, _: truncate(data_file(google(tmp))),
             lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("bert_model.ckpt", "download"), ("out",), convert),
        Case("google-index-without-data", without_data, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
             ("bert_model.ckpt.data-00000-of-00001", "No such file"), ("out",), convert),
        Case("google-several-checkpoints", several, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
             ("ckpt", "2 checkpoints", "prefix"), ("out",), convert),
        Case("google-int32-embeddings", int_embeddings, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
             ("bert/embeddings/word_embeddings", "float", "int32")),
        Case("google-other-vocab_size", other_model(vocab_size=200), lambda tmp: tiny_load(tmp / "ckpt"),
             CheckpointError, ("bert/embeddings/word_embeddings", "[200, 32]", "vocab_size")),
        Case("google-other-hidden_size", other_model(hidden_size=64, intermediate_size=64),
             lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("[128, 64]", "hidden_size")),
        Case("google-other-intermediate_size", other_model(intermediate_size=128),
             lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("intermediate", "[32, 128]", "intermediate_size")),
        Case("google-other-max_position_embeddings", other_model(max_position_embeddings=32),
             lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("position_embeddings", "max_position_embeddings")),
        Case("google-fewer-layers", other_model(num_hidden_layers=1), lambda tmp: tiny_load(tmp / "ckpt"),
             CheckpointError, ("layer_1", "num_hidden_layers")),
        Case("hf-folder-without-weights", lambda tmp, _: text(tmp / "ckpt" / "config.json", json.dumps(helpers.TINY)),
             lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("model.safetensors", "none of them"), ("out",),
             convert),
        Case("hf-safetensors-truncated", hf_truncated, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
             ("model.safetensors", "truncated"), ("out",), convert),
        Case("hf-safetensors-garbage", lambda tmp, _: text(tmp / "ckpt" / "model.safetensors", b"\x00garbage" * 9),
             lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("model.safetensors", "not one"), ("out",),
             convert),
        Case("hf-shard-missing", hf_shard_missing, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
             ("model-00001-of-00002.safetensors", "no such file"), ("out",), convert),
        Case("hf-int32-embeddings", hf_int, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
             ("bert.embeddings.word_embeddings.weight", "int32")),
        Case("hf-other-hidden_size", lambda tmp, _: hf(tmp, {**other, "hidden_size": 64}, name="ckpt"),
             lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("[128, 64]", "hidden_size")),
    ]


def vocab_rows() -> list[Case]:
    tokenizer = lambda tmp: Tokenizer(str(tmp / "vocab.txt"))  # noqa: E731
    prepare = lambda tmp: prepare_cli(tmp, "train.tsv")  # noqa: E731

    def write(tokens: list[str] | bytes):
        def writer(tmp, _):
            text(tmp / "train.tsv", "很好\tpos\n很差\tneg\n")
            return text(tmp / "vocab.txt", tokens) if isinstance(tokens, bytes) else vocab(tmp, tokens)
        return writer

    def other_size(tmp, _):  # more tokens than the checkpoint's 128 ids (fewer would be fine)
        cls_data(tmp)
        text(tmp / "vocab.txt", "\n".join([*VOCAB, *(f"[unused{i}]" for i in range(130))]) + "\n")
        google(tmp)

    rows = [Case("vocab-no-such-file", lambda tmp, _: text(tmp / "train.tsv", "很好\tpos\n"), tokenizer, ConfigError,
                 ("vocab.txt", "no such file"), ("out",), prepare),
            Case("vocab-empty", write(b""), tokenizer, ConfigError, ("vocab.txt", "empty"), ("out",), prepare),
            Case("vocab-duplicated-token", write([*VOCAB, "好"]), tokenizer, ConfigError,
                 ("vocab.txt", "'好'", "line 6", f"line {len(VOCAB) + 1}"), ("out",), prepare),
            Case("vocab-gbk-bytes", write("\n".join(VOCAB).encode() + b"\n\xd6\xd0\n"), tokenizer, ConfigError,
                 (f"vocab.txt:{len(VOCAB) + 1}", "UTF-8"), ("out",), prepare)]
    rows += [Case(f"vocab-without-{token[1:-1]}", write([t for t in VOCAB if t != token]), tokenizer, ConfigError,
                  ("vocab.txt", token), ("out",), prepare) for token in ("[CLS]", "[SEP]", "[UNK]")]
    rows.append(Case("vocab-size-not-the-checkpoint-vocab_size", other_size,
                     lambda tmp: train_call(tmp, config=str(tmp / "ckpt"), checkpoint=str(tmp / "ckpt")), ConfigError,
                     ("vocab.txt", f"{len(VOCAB) + 130} tokens", "at most 128", "vocab_size"), ("out",),
                     lambda tmp: train_cli(tmp, "--checkpoint", str(tmp / "ckpt"))))
    return rows


def data_rows() -> list[Case]:
    read = lambda name: lambda tmp: get_task("cls").read(str(tmp / name))  # noqa: E731
    prep = lambda name, *extra, task="cls": lambda tmp: prepare_cli(tmp, name, *extra, task=task)  # noqa: E731
    csv_fields = ("--text-field", "text", "--label-field", "label")

    def write(content: str | bytes, name: str = "train.tsv"):
        return lambda tmp, _: cls_data(tmp, content, name)

    def ner(content: str, name: str = "train.txt"):
        return lambda tmp, _: cls_data(tmp, content, name)

    def with_labels(tmp, _):
        cls_data(tmp, "很好\tpos\n很差\tbad\n")
        LabelSet(["neg", "pos"]).save(str(tmp / "labels.json"))

    long_line = "好" * (1 << 20) + "\tpos\n"
    spans = lambda entities: json.dumps({"text": "张三在北京", "entities": entities}) + "\n"  # noqa: E731
    return [
        Case("data-empty-file", write(""), read("train.tsv"), DataError, ("train.tsv", "empty file"), ("out",),
             prep("train.tsv")),
        Case("data-only-a-header", write("text,label\n", "train.csv"),
             lambda tmp: read_classification(str(tmp / "train.csv"), text="text", label="label"), DataError,
             ("train.csv", "only a header"), ("out",), prep("train.csv", *csv_fields)),
        Case("data-commas-in-a-tsv", write("很好,pos\n很差,neg\n"), read("train.tsv"), DataError,
             ("train.tsv:1", "2 columns", "found 1 column"), ("out",), prep("train.tsv")),
        Case("data-missing-column", write("sentence,label\n很好,pos\n", "train.csv"),
             lambda tmp: read_classification(str(tmp / "train.csv"), text="text", label="label"), DataError,
             ("train.csv:1", "'text'", "sentence"), ("out",), prep("train.csv", *csv_fields)),
        Case("data-label-not-in-label-set", with_labels,
             lambda tmp: read_classification(str(tmp / "train.tsv"), labels=LabelSet.load(str(tmp / "labels.json"))),
             DataError, ("train.tsv:2", "'bad'"), ("out",), prep("train.tsv", "--labels", "labels.json")),
        Case("data-mixed-label-types", write('{"text": "好", "label": "1"}\n{"text": "差", "label": 0}\n',
                                             "train.jsonl"),
             read("train.jsonl"), DataError, ("train.jsonl:2", "str", "int"), ("out",), prep("train.jsonl")),
        Case("data-gbk-bytes", write("很好\tpos\n".encode() + "很差\tneg\n".encode("gbk")), read("train.tsv"),
             DataError, ("train.tsv:2", "UTF-8", "GBK"), ("out",), prep("train.tsv")),
        Case("data-latin1-bytes", write("很好\tpos\n\ncafé\tneg\n".encode("latin-1", "ignore")),
             read("train.tsv"), DataError, ("train.tsv:3", "UTF-8"), ("out",), prep("train.tsv")),
        Case("data-invalid-json-line", write('{"text": "好", "label": "pos"}\n{"text": \n', "train.jsonl"),
             read("train.jsonl"), DataError, ("train.jsonl:2", "JSON"), ("out",), prep("train.jsonl")),
        Case("data-a-1mb-line", write("很好\tpos\n" + long_line), read("train.tsv"), DataError,
             ("train.tsv:2", "characters"), ("out",), prep("train.tsv")),
        Case("conll-three-fields", ner("张 B-PER\n三 I-PER x\n\n北 B-LOC\n"),
             lambda tmp: read_conll(str(tmp / "train.txt")), DataError, ("train.txt:2", "2 columns", "3"), ("out",),
             prep("train.txt", task="ner")),
        Case("conll-token-without-tag", ner("张 B-PER\n三\n"), lambda tmp: read_conll(str(tmp / "train.txt")),
             DataError, ("train.txt:2", "no tag"), ("out",), prep("train.txt", task="ner")),
        Case("conll-I-without-B-strict", ner("张 O\n三 I-PER\n"),
             lambda tmp: read_conll(str(tmp / "train.txt"), strict=True), DataError,
             ("train.txt:2", "B-PER", "I-PER"), ("out",), prep("train.txt", "--strict", task="ner")),
        Case("conll-bad-tag", ner("张 PER\n三 O\n"), lambda tmp: read_conll(str(tmp / "train.txt")), DataError,
             ("train.txt", "'PER'"), ("out",), prep("train.txt", task="ner")),
        Case("spans-overlapping", ner(spans([[0, 2, "PER"], [1, 3, "LOC"]]), "train.jsonl"),
             lambda tmp: read_span_jsonl(str(tmp / "train.jsonl")), DataError, ("train.jsonl:1", "overlap"),
             ("out",), prep("train.jsonl", task="ner")),
        Case("spans-out-of-range", ner(spans([[3, 9, "LOC"]]), "train.jsonl"),
             lambda tmp: read_span_jsonl(str(tmp / "train.jsonl")), DataError, ("train.jsonl:1", "<= 5", "9"),
             ("out",), prep("train.jsonl", task="ner")),
        Case("spans-end-before-start", ner(spans([{"start": 2, "end": 1, "label": "PER"}]), "train.jsonl"),
             lambda tmp: read_span_jsonl(str(tmp / "train.jsonl")), DataError, ("train.jsonl:1", "start < end"),
             ("out",), prep("train.jsonl", task="ner")),
        Case("spans-entities-not-a-list", ner(json.dumps({"text": "张三", "entities": "PER"}) + "\n", "train.jsonl"),
             lambda tmp: read_span_jsonl(str(tmp / "train.jsonl")), DataError, ("train.jsonl:1", "entities"),
             ("out",), prep("train.jsonl", task="ner")),
    ]


def option_rows() -> list[Case]:
    write = lambda tmp, _: cls_data(tmp)  # noqa: E731

    def option(name: str, flag: str, value, words: tuple[str, ...], **extra) -> Case:
        return Case(f"train-{flag}-{value}", write, lambda tmp: train_call(tmp, **{name: value}, **extra),
                    ConfigError, (flag, *words), ("out",), lambda tmp: train_cli(tmp, flag, str(value)))

    def out_under_file(tmp, _):
        cls_data(tmp)
        text(tmp / "file.txt", "a file\n")

    def read_only(tmp, _):
        cls_data(tmp)
        (tmp / "locked").mkdir(mode=0o500)

    rows = [option("epochs", "--epochs", -1, ("an int >= 1", "-1")),
            option("maxlen", "--maxlen", 1, ("an int >= 3", "1")),
            option("batch_size", "--batch-size", 0, (">= 1", "0")),
            option("lr", "--lr", 0.0, ("(0, 1]", "0.0")),
            option("warmup", "--warmup", 1.5, ("1.5",)),
            option("grad_accum", "--grad-accum", 0, (">= 1",)),
            option("maxlen", "--maxlen", 512, ("max_position_embeddings", "512")),
            Case("train-unknown-task", write, lambda tmp: train_call(tmp, task="pos"), ConfigError,
                 ("--task", "'pos'", "cls"), ("out",), lambda tmp: train_cli(tmp, task="pos")),
            Case("train-crf-with-task-cls", write, lambda tmp: train_call(tmp, crf=True), ConfigError,
                 ("--crf", "--task ner", "--task cls"), ("out",), lambda tmp: train_cli(tmp, "--crf")),
            Case("train-no-such-train-file", lambda tmp, _: vocab(tmp), lambda tmp: train_call(tmp), ConfigError,
                 ("--train", "train.tsv", "does not exist"), ("out",), lambda tmp: train_cli(tmp)),
            Case("train-resume-and-overwrite", lambda tmp, _: fake_run(tmp),
                 lambda tmp: train_call(tmp, out=tmp / "run", resume=True, overwrite=True), ConfigError,
                 ("--overwrite", "--resume"), (),
                 lambda tmp: ["train", "--out", str(tmp / "run"), "--resume", "--overwrite", "--quiet"]),
            Case("train-resume-another-tasks-run", lambda tmp, _: fake_run(tmp),
                 lambda tmp: train_call(tmp, task="ner", out=tmp / "run", resume=True), ConfigError,
                 ("--task", "ner", "cls", "run"), (),
                 lambda tmp: ["train", "--task", "ner", "--out", str(tmp / "run"), "--resume", "--quiet"]),
            Case("train-resume-run-without-state", lambda tmp, _: fake_run(tmp, state=False),
                 lambda tmp: train_call(tmp, out=tmp / "run", resume=True), ConfigError, ("run", "no state/"), (),
                 lambda tmp: ["train", "--out", str(tmp / "run"), "--resume", "--quiet"]),
            Case("train-out-is-a-file", out_under_file, lambda tmp: train_call(tmp, out=tmp / "file.txt"),
                 ConfigError, ("file.txt", "a folder", "a file"), (),
                 lambda tmp: train_cli(tmp, out="file.txt")),
            Case("train-out-under-a-file", out_under_file, lambda tmp: train_call(tmp, out=tmp / "file.txt" / "run"),
                 ConfigError, ("file.txt", "a folder", "a file"), (),
                 lambda tmp: train_cli(tmp, out="file.txt/run"))]
    if ROOT:  # root writes through permission bits: a path under a file is the folder that cannot be written
        rows.append(Case("train-out-not-writable-(root-so-under-a-file)", out_under_file,
                         lambda tmp: train_call(tmp, out=tmp / "file.txt" / "a" / "run"), ConfigError,
                         ("file.txt", "a folder"), (), lambda tmp: train_cli(tmp, out="file.txt/a/run")))
    else:
        rows.append(Case("train-out-not-writable-(chmod-0o500)", read_only,
                         lambda tmp: train_call(tmp, out=tmp / "locked" / "run"), ConfigError,
                         ("locked", "writable"), (), lambda tmp: train_cli(tmp, out="locked/run")))
    return rows


def run_rows() -> list[Case]:
    from kerasbert.serving.exported import predict_export

    def truncated(tmp, shared):
        truncate(copy_run(tmp, shared) / "model.keras")

    def without(name: str):
        return lambda tmp, shared: os.remove(copy_run(tmp, shared) / name)

    def vocab_changed(tmp, shared):
        shutil.copytree(shared.exported, tmp / "export")
        with open(tmp / "export" / "vocab.txt", "a", encoding="utf-8") as f:
            f.write("新\n")

    def predict(tmp):
        from kerasbert import predict

        return predict(str(tmp / "run"), ["很好"])

    def evaluate(tmp):
        from kerasbert import evaluate

        return evaluate(str(tmp / "run"), str(tmp / "run" / "dev.tsv"), verbose=0)

    def export_run(tmp):
        from kerasbert.serving.export import export

        return export(str(tmp / "run"), str(tmp / "out"), "openvino")

    predict_cli = lambda tmp: ["predict", str(tmp / "run"), "--text", "很好"]  # noqa: E731
    return [
        Case("run-model.keras-truncated", truncated, predict, ConfigError, ("model.keras", "train"), (), predict_cli),
        Case("run-without-labels.json", without("labels.json"), predict, ConfigError, ("run", "labels.json"), (),
             predict_cli),
        Case("run-without-args.json", without("args.json"), predict, ConfigError, ("run", "args.json"), (),
             predict_cli),
        Case("run-garbage-model.keras", lambda tmp, _: fake_run(tmp, model=b"not a zip file"), predict, ConfigError,
             ("model.keras",), (), predict_cli),
        Case("evaluate-no-such-data-file", lambda tmp, shared: copy_run(tmp, shared), evaluate, DataError,
             ("dev.tsv", "nothing at that path"), ("run/eval-dev.json",),
             lambda tmp: ["evaluate", str(tmp / "run"), "--data", str(tmp / "run" / "dev.tsv")]),
        Case("export-vocab.txt-changed", vocab_changed, lambda tmp: predict_export(str(tmp / "export"), ["很好"]),
             ConfigError, ("vocab.txt", "sha256", "export the run again"), (),
             lambda tmp: ["serve", str(tmp / "export"), "--port", "0"]),
        Case("export-run-folder-that-is-no-run", lambda tmp, _: (tmp / "run").mkdir(), export_run,
             ConfigError, ("run", "args.json"), ("out",),
             lambda tmp: ["export", str(tmp / "run"), str(tmp / "out"), "--format", "openvino"]),
    ]


# Rows by area in sibling modules, each the owner of its area's newer cases.
CASES = (config_rows() + checkpoint_rows() + vocab_rows() + data_rows() + option_rows() + run_rows()
         + bad_inputs_weights.rows() + bad_inputs_data.rows() + bad_inputs_runs.rows() + bad_inputs_serving.rows()
         + bad_inputs_export.rows() + bad_inputs_generation.rows() + bad_inputs_vectors.rows()
         + bad_inputs_pretrain.rows() + bad_inputs_qa.rows() + bad_inputs_multilabel.rows()
         + bad_inputs_relation.rows() + bad_inputs_rerank.rows() + bad_inputs_fill_mask.rows())


# --------------------------------------------------------------------------- the test
@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Shared:
    return Shared(tmp_path_factory.mktemp("shared"))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_named_error(case: Case, tmp_path: Path, shared: Shared, capsys) -> None:
    case.write(tmp_path, shared)
    before = listing(tmp_path)
    with pytest.raises(case.error) as caught:
        case.call(tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    for word in case.words:
        assert word in message, f"{word!r} not in {message!r}"
    for name in case.absent:
        assert not (tmp_path / name).exists(), name
    assert listing(tmp_path) == before
    if case.cli is None:
        return
    capsys.readouterr()
    code = main(case.cli(tmp_path))
    _, err = capsys.readouterr()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err and err.startswith("kerasbert "), err
    assert listing(tmp_path) == before


def test_table_size() -> None:
    assert len(CASES) >= 60 and len({case.id for case in CASES}) == len(CASES)


# --------------------------------------------------------------------------- inputs that simply work
@pytest.mark.parametrize("content", [b"\xef\xbb\xbf" + "很好\tpos\n".encode(), "很好\tpos\r\n很差\tneg\r\n".encode()],
                         ids=["bom", "crlf"])
def test_bom_and_crlf_data_parse(tmp_path: Path, content: bytes) -> None:
    path = text(tmp_path / "train.tsv", content)
    examples = read_classification(str(path))
    assert examples[0].text == "很好" and examples[0].label == "pos"


def test_bom_config_and_vocab_read(tmp_path: Path) -> None:
    path = text(tmp_path / "bert_config.json", b"\xef\xbb\xbf" + json.dumps(helpers.TINY).encode())
    assert BertConfig.from_json(path).hidden_size == 32
    vocab_path = text(tmp_path / "vocab.txt", b"\xef\xbb\xbf" + "\r\n".join(VOCAB).encode() + b"\r\n")
    assert Tokenizer(str(vocab_path)).token_to_id("[PAD]") == 0


def test_optional_config_keys_keep_their_defaults() -> None:
    cfg = BertConfig.from_dict({key: helpers.TINY[key] for key in CORE_SIZES})
    assert (cfg.hidden_act, cfg.max_position_embeddings, cfg.type_vocab_size) == ("gelu", 512, 2)


def test_save_google_checkpoint_creates_its_folder(tmp_path: Path) -> None:
    from kerasbert.weights.google import save_google_checkpoint

    for target in (tmp_path / "new" / "folder", tmp_path / "other" / "bert_model.ckpt"):
        prefix = save_google_checkpoint(tiny_model(), target)
        assert os.path.isfile(prefix + ".index") and os.path.isfile(os.path.join(os.path.dirname(prefix), "checkpoint"))
    assert prefix == str(tmp_path / "other" / "bert_model.ckpt")
    assert os.path.basename(save_google_checkpoint(tiny_model(), tmp_path / "new" / "folder")) == "bert_model.ckpt"
