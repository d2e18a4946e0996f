"""kerasbert.cli: the summary subcommand (JSON parsed) for the reference builds, and its errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kerasbert import cli
from kerasbert.choices import TASK_NAMES


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def summary_json(capsys, *argv: str) -> dict:
    code, out, err = run(capsys, "summary", *argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def groups(data: dict) -> dict[str, int]:
    return {g["name"]: g["params"] for g in data["groups"]}


def rows(data: dict) -> dict[str, dict]:
    return {r["name"]: r for r in data["rows"]}


def test_chinese_classifier_rows_and_total(capsys):
    data = summary_json(capsys, "bert_base_chinese", "--head", "cls:2")
    assert data["params"] == 101_678_594 and data["mismatches"] == []
    assert data["total_line"] == "Total 101,678,594 = embeddings 16,622,592 + 12 × 7,087,872 (encoder) + head 1,538"
    by_name = rows(data)
    expected = {"Embedding-Token": (16_226_304, "V·H"), "Embedding-Segment": (1_536, "T·H"),
                "Embedding-Position": (393_216, "P·H"), "Embedding-Norm": (1_536, "2·H"),
                "Transformer-7-MultiHeadSelfAttention": (2_362_368, "4·(H·H+H)"),
                "Transformer-7-FeedForward": (4_722_432, "H·I+I+I·H+H"),
                "Transformer-7-FeedForward-Norm": (1_536, "2·H"), "CLS-Dense": (1_538, "H·C+C")}
    assert {k: (by_name[k]["params"], by_name[k]["formula"]["symbols"]) for k in expected} == expected
    assert all(r["ok"] for r in data["rows"])


def test_chinese_with_pooler_and_uncased_shares(capsys):
    assert summary_json(capsys, "bert_base_chinese", "--pooler")["params"] == 102_267_648
    data = summary_json(capsys, "bert_base_uncased", "--pooler")
    assert groups(data) == {"embeddings": 23_837_184, "encoder": 85_054_464, "pooler": 590_592}
    assert data["params"] == 109_482_240
    assert [round(100 * g["share"], 2) for g in data["groups"]] == [21.77, 77.69, 0.54]


def test_tagging_head_and_memory_estimate(capsys):
    data = summary_json(capsys, "bert_base_chinese", "--head", "tagging:11", "--batch", "8", "--seq", "128")
    assert (rows(data)["Tagging-Dense"]["params"], groups(data)["head"]) == (8_459, 8_459)
    assert data["memory"]["activations"]["batch_size"] == 8 and data["memory"]["activations"]["seq_len"] == 128
    assert data["memory"]["weights"]["float32"] == 4 * data["params"]


def test_text_markdown_expand_and_other_heads(capsys):
    code, out, _ = run(capsys, "summary", "tiny", "--head", "tagging:5:crf", "--expand")
    assert code == 0 and "K·K = 5·5" in out and "qkv_kernel" in out and "Groups" in out
    code, out, _ = run(capsys, "summary", "tiny", "--head", "mlm", "--format", "markdown")
    assert code == 0 and out.startswith("**Model:") and "| MLM-Bias (Bias) |" in out
    assert summary_json(capsys, "tiny", "--head", "nsp")["rows"][-1]["name"] == "NSP-Proba"
    data = summary_json(capsys, "tiny", "--pooler", "--head", "cls:3")  # classifies from Pooler-Dense
    assert [r["name"] for r in data["rows"][-2:]] == ["Pooler-Dense", "CLS-Dense"]


@pytest.mark.parametrize("spec", ["cls", "cls:0", "cls:2:crf", "tagging:x", "crf:3", "mlm:2"])
def test_unknown_head_is_exit_2_with_one_line(capsys, spec):
    code, out, err = run(capsys, "summary", "tiny", "--head", spec)
    assert code == 2 and out == ""
    assert err == (f"kerasbert summary: error: --head: expected cls:N, tagging:K, tagging:K:crf, mlm or nsp, "
                   f"found {spec!r}. e.g. --head cls:2 or --head tagging:9:crf\n")


def test_config_that_does_not_load(capsys, tmp_path):
    code, _, err = run(capsys, "summary", str(tmp_path / "missing.json"))
    assert code == 2 and err.count("\n") == 1 and "missing.json: expected a bert_config.json file" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"vocab_size": 100, "hidden_size": 30, "num_attention_heads": 4, "num_hidden_layers": 2, '
                   '"intermediate_size": 64}')
    code, _, err = run(capsys, "summary", str(bad))
    assert code == 2 and "num_attention_heads: expected a divisor of hidden_size 30, found 4" in err
    assert "Traceback" not in err
    code, _, err = run(capsys, "--debug", "summary", str(bad))
    assert code == 2 and "Traceback (most recent call last)" in err and "ConfigError" in err


def test_usage_errors_and_help(capsys):
    assert run(capsys, "summary")[0] == 2
    assert run(capsys, "nosuchcommand")[0] == 2
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "summary" in out


def _fresh(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300).stdout


def test_help_and_usage_errors_answer_without_tensorflow():
    code = ("import sys; from kerasbert.cli import main; "
            "codes = [main(['--help']), main(['train', '--help']), main(['train', '--task', 'x', '--out', 'o']), "
            "main(['summary'])]; print(codes, 'tensorflow' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stderr.splitlines()[-1] == "[0, 0, 2, 2] False"
    assert "--crf-lr-multiplier" in done.stdout
    choices = ", ".join(f"'{name}'" for name in TASK_NAMES)
    assert f"invalid choice: 'x' (choose from {choices})" in done.stderr


def test_argument_and_file_errors_answer_without_tensorflow(tmp_path):
    """Missing files, a folder that holds a run, and a run folder that is not one are found before TensorFlow
    starts: each error is its one line, and the process never imported tensorflow."""
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n好\n", encoding="utf-8")
    (tmp_path / "train.tsv").write_text("好\tpos\n", encoding="utf-8")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine", encoding="utf-8")
    cls = ["train", "--task", "cls", "--vocab", "vocab.txt"]
    cases = {
        "--train: expected an existing file, found 'gone.tsv', which does not exist":
            [*cls, "--train", "gone.tsv", "--out", "run"],
        "--dev: expected an existing file, found 'full', a folder": [*cls, "--train", "train.tsv", "--dev", "full",
                                                                       "--out", "run"],
        "--checkpoint gone: expected a Google checkpoint (prefix or folder) or Hugging Face weights, found nothing":
            [*cls, "--train", "train.tsv", "--checkpoint", "gone", "--out", "run"],
        "--out full: expected a new or empty run folder, found a folder with 1 entries":
            [*cls, "--train", "train.tsv", "--out", "full"],
        "full: expected a kerasbert run folder with args.json, found no args.json": ["train", "--out", "full",
                                                                                     "--resume"],
        "full: expected a kerasbert run folder with args.json": ["evaluate", "full", "--data", "train.tsv"],
        "--input: expected an existing file, found 'gone.txt', which does not exist": ["predict", "full", "--input",
                                                                                       "gone.txt"],
        "--vocab: expected an existing file, found 'gone.txt'": ["prepare", "--task", "cls", "--data", "train.tsv",
                                                                "--vocab", "gone.txt", "--out", "shards"],
        "--data: expected a corpus file, a glob or a prepared folder, found 'gone.txt'": ["pretrain", "--data",
                                                                                          "gone.txt", "--out", "pt"],
    }
    _answered_without_tensorflow(cases, tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["full", "train.tsv", "vocab.txt"]


def _answered_without_tensorflow(cases: dict[str, list[str]], folder) -> None:
    """Run each case's arguments through `main` in one fresh process in ``folder``: each exits 2 with its one line on
    stderr, holding the case's message, and the process never imported tensorflow."""
    code = ("import json, sys; from kerasbert.cli import main; "
            f"codes = [main(argv) for argv in {list(cases.values())!r}]; "
            "print(json.dumps([codes, 'tensorflow' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=folder)
    assert json.loads(done.stdout.splitlines()[-1]) == [[2] * len(cases), False], done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(cases) and all(" error: " in line for line in lines), done.stderr
    for message, line in zip(cases, lines, strict=True):
        assert message in line, (message, line)


def test_embed_export_and_serve_errors_answer_without_tensorflow(tmp_path):
    """A missing model folder or input, an output that cannot be written, an export folder already there and
    options that do not go together are found before TensorFlow starts, and nothing is written."""
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "bert_config.json").write_text("{}", encoding="utf-8")  # told a checkpoint by its name
    (tmp_path / "texts.txt").write_text("好\n", encoding="utf-8")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "kerasbert-export.json").write_text(json.dumps(
        {"task": "cls", "labels": ["neg", "pos"], "pairs": False, "format": "onnx"}), encoding="utf-8")
    embed = ["embed", "ckpt", "--input", "texts.txt", "--output"]
    cases = {
        "gone: expected a checkpoint folder (bert_config.json or config.json, weights, vocab.txt), a "
        "sentence-transformers folder": ["embed", "gone", "--input", "texts.txt", "--output", "v.npy"],
        "--input: expected an existing file, found 'gone.txt', which does not exist": ["embed", "ckpt", "--input",
                                                                                       "gone.txt", "--output", "v.npy"],
        "--output texts.txt/v.npy: expected a path under a folder, found": [*embed, "texts.txt/v.npy"],
        "--output v.csv: expected a .npy or .jsonl file, found the suffix '.csv'": [*embed, "v.csv"],
        "--pooling: expected first_last_avg, mean, cls, pooler or linear, found 'max'": [*embed, "v.npy", "--pooling",
                                                                                        "max"],
        "--batch-size: expected an integer >= 1, found 0": [*embed, "v.npy", "--batch-size", "0"],
        "full: expected a checkpoint folder": ["embed", "full", "--input", "texts.txt", "--output", "v.npy"],
        "gone: expected a checkpoint folder": ["export", "gone", "out"],
        "full: expected a new export folder, found something already there": ["export", "ckpt", "full"],
        "out texts.txt/out: expected a path under a folder": ["export", "ckpt", "texts.txt/out"],
        "--int8: expected --format onnx or openvino, found --format saved_model": ["export", "ckpt", "out", "--int8"],
        "--precision bf16: expected --format openvino or saved_model, found --format onnx": [
            "export", "ckpt", "out", "--format", "onnx", "--precision", "bf16"],
        "--calibration: expected an existing file, found 'gone.txt'": ["export", "ckpt", "out", "--calibration",
                                                                       "gone.txt"],
        "--stride: expected a run of --task cls, ner or span, found the sentence-vector model of ckpt": [
            "export", "ckpt", "out", "--stride", "8"],
        "export: expected a checkpoint, sentence-transformers or run folder to export, found an export folder": [
            "export", "export", "out"],
        "gone: expected an export folder (kerasbert-export.json) or a run folder (args.json), found no such folder": [
            "serve", "gone"],
        "full: expected an export folder (kerasbert-export.json) or a run folder (args.json), found neither": [
            "serve", "full"],
        "--stride: expected a run folder (an export windows as it was exported)": ["serve", "export", "--stride", "4"],
        "--backend: expected the format of the export export, 'onnx', found 'saved_model'": [
            "serve", "export", "--backend", "saved_model"],
        "max_batch: expected an integer > 0, found 0": ["serve", "export", "--max-batch", "0"],
        "port: expected an integer from 0 to 65535 (0: a free one), found 70000": ["serve", "export", "--port",
                                                                                   "70000"],
    }
    _answered_without_tensorflow(cases, tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["ckpt", "export", "full", "texts.txt"]
    assert [sorted(os.listdir(tmp_path / name)) for name in ("ckpt", "export", "full")] == [
        ["bert_config.json"], ["kerasbert-export.json"], ["notes.txt"]]


def test_tensorflow_log_level_is_set_before_it_starts_unless_debug():
    run_summary = "import os; from kerasbert.cli import main; main([{}'summary', 'tiny', '--format', 'json']); "
    show = "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"
    assert _fresh(run_summary.format("") + show).splitlines()[-1] == "2"
    assert _fresh(run_summary.format("'--debug', ") + show).splitlines()[-1] != "2"  # TensorFlow's own default
    environ = {"TF_CPP_MIN_LOG_LEVEL": "0"}
    cli.quiet_tensorflow(environ)
    assert environ == {"TF_CPP_MIN_LOG_LEVEL": "0"}  # the user's choice stands


def test_train_choices_are_the_owners_names():
    from kerasbert import choices
    from kerasbert.finetune import args, tasks
    from kerasbert.modeling import families, optimizers

    assert choices.TASK_NAMES == tuple(tasks.TASKS)
    assert choices.SCHEDULES == optimizers.WarmupSchedule.DECAYS
    assert choices.CRF_LR_MULTIPLIER == args.TrainArgs("ner", "", "").crf_lr_multiplier
    assert choices.MODEL_FAMILIES == (*families.FAMILY_NAMES, *families.ALIASES)  # each defined, in order


def test_console_script_in_a_real_process():
    script = os.path.join(os.path.dirname(sys.executable), "kerasbert")
    command = [script] if os.path.exists(script) else [sys.executable, "-m", "kerasbert"]
    done = subprocess.run([*command, "summary", "bert_base_chinese", "--format", "json"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert data["params"] == 101_677_056 and groups(data) == {"embeddings": 16_622_592, "encoder": 85_054_464}


def test_task_options_are_declared_once():
    from kerasbert.finetune.args import TrainArgs
    from kerasbert.finetune.options import TASK_OPTIONS, TaskOptions
    from kerasbert.finetune.tasks import TASKS, get_task, task_of

    assert issubclass(TrainArgs, TaskOptions) and all(issubclass(task, TaskOptions) for task in TASKS.values())
    args = TrainArgs("ner", "train.conll", "run", crf=True, dropout=0.2, scheme="BIO")
    options = TaskOptions.of(args)
    assert options == TaskOptions.of(task_of(args)) == TaskOptions.of(get_task("ner", **args.task_options()))
    assert TASK_OPTIONS == tuple(args.task_options())


def test_an_args_json_of_the_released_layout_loads():
    # the keys and values `kerasbert train` wrote in its args.json, in the order it wrote them
    released = {"task": "ner", "train": "/data/train.conll", "out": "/runs/ner", "dev": None, "config": "tiny",
                "checkpoint": None, "vocab": "/data/vocab.txt", "lowercase": True, "crf": True,
                "crf_lr_multiplier": 1000.0, "bilstm_units": None, "dropout": None, "text": None, "text_b": None,
                "label": None, "scheme": "BIO", "strict": False, "maxlen": 64, "batch_size": 16, "epochs": 2,
                "lr": 0.001, "warmup": 0.1, "schedule": "cosine", "weight_decay": 0.01, "grad_accum": 1,
                "layerwise_lr_decay": 1.0, "seed": 0, "mixed_precision": False, "jit_compile": None,
                "strategy": "auto", "max_steps": None, "monitor": None, "save_every": None,
                "export_google_checkpoint": False, "relative_to_run": {}}
    from kerasbert.finetune.args import TrainArgs
    from kerasbert.finetune.tasks import task_of

    args = TrainArgs.saved(released)
    assert (args.crf, args.scheme, args.maxlen, task_of(args).crf_lr_multiplier) == (True, "BIO", 64, 1000.0)
    saved = args.to_saved("/runs/ner")
    assert {key: saved[key] for key in released if key != "relative_to_run"} == {
        key: value for key, value in released.items() if key != "relative_to_run"}
    assert set(saved) == {*released, "model", "target_maxlen", "beams", "stride", "pooling", "sim_loss", "mask_rate",
                          "mask_replace", "mask_random", "max_predictions", "whole_word", "nsp", "pre_tokenize",
                          "adversarial", "adversarial_epsilon", "max_query_length", "max_answer_length",
                          "label_separator", "label_scale", "null_answers"}
    assert args.model is None  # it built BERT
    assert (args.target_maxlen, args.beams) == (32, 1)  # the seq2seq options a run without them takes
    assert (args.pooling, args.sim_loss) == (None, None)  # and the sim options
    assert (args.mask_rate, args.max_predictions, args.whole_word, args.nsp) == (0.15, None, True, False)  # mlm's
    assert args.pre_tokenize is None and task_of(args).pre_tokenize is None  # word pieces alone
    assert (args.adversarial, args.adversarial_epsilon) == (None, 1.0)  # trained without a perturbation


# ------------------------------------------------------------------------------------------- train --model
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TWO_CPUS = """
import sys, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from kerasbert.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def family_data(tmp_path_factory) -> dict[str, str]:
    """Small demo data, and the tiny config with ALBERT's embedding_size E = 16."""
    from kerasbert.finetune.demo_data import write_demo_data

    folder = str(tmp_path_factory.mktemp("family-data"))
    paths = write_demo_data(folder, n_train=64, n_dev=16, n_test=16)
    with open(os.path.join(ROOT, "configs", "tiny.json"), encoding="utf-8") as f:
        config = {**json.load(f), "embedding_size": 16}
    paths["config"] = os.path.join(folder, "albert_config.json")
    with open(paths["config"], "w", encoding="utf-8") as f:
        json.dump(config, f)
    return paths


def _train_argv(data: dict, out: str, task: str, *more: str) -> list[str]:
    return ["train", "--task", task, "--train", data[f"{task}_train"], "--dev", data[f"{task}_dev"], "--vocab",
            data["vocab"], "--out", out, "--epochs", "1", "--batch-size", "16", "--lr", "2e-3", "--maxlen", "24",
            "--quiet", *more]


@pytest.mark.slow
def test_train_a_family_and_the_run_keeps_it(family_data, tmp_path, capsys):
    from kerasbert.finetune.runs import open_run

    out = str(tmp_path / "albert-ner")
    code, _, err = run(capsys, *_train_argv(family_data, out, "ner", "--crf", "--model", "ALBERT", "--config",
                                            family_data["config"]))
    assert code == 0, err
    assert json.load(open(os.path.join(out, "args.json")))["model"] == "albert"
    loaded = open_run(out)
    assert loaded.model.family == "albert" and loaded.args.model == "albert"
    code, printed, err = run(capsys, "predict", out, "--text", "张伟去年加入了华为公司")
    assert code == 0 and json.loads(printed.splitlines()[-1])["text"] == "张伟去年加入了华为公司", err
    assert run(capsys, "evaluate", out)[0] == 0
    # ALBERT's config must give its embedding size: refused before the run folder is written
    other = str(tmp_path / "refused")
    code, _, err = run(capsys, *_train_argv(family_data, other, "cls", "--model", "albert", "--config", "tiny"))
    assert code == 2 and "embedding_size" in err and not os.path.exists(os.path.join(other, "args.json"))
    # a GPT family trains --task lm alone, a T5 family --task seq2seq alone, and --task lm needs a GPT family
    for task, family, message in (("cls", "gpt2", "--task: expected --task lm for --model gpt2, found --task cls"),
                                  ("ner", "mt5.1.1", "--task: expected --task seq2seq for --model mt5.1.1, found "
                                                     "--task ner"),
                                  ("lm", "albert", "--model: expected a GPT family for --task lm: gpt, gpt2, gpt2_ml, "
                                                   "found 'albert'")):
        argv = _train_argv(family_data, other, "cls", "--model", family)
        code, _, err = run(capsys, *[task if value == "cls" else value for value in argv])
        assert code == 2 and message in err and not os.path.exists(os.path.join(other, "args.json")), err


@pytest.mark.slow
def test_a_family_trains_under_mirrored_strategy(family_data, tmp_path):
    out = str(tmp_path / "roformer-mirrored")
    argv = _train_argv(family_data, out, "cls", "--model", "roformer", "--strategy", "mirrored", "--max-steps", "2")
    done = subprocess.run([sys.executable, "-c", TWO_CPUS, *argv], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    assert metrics["steps"] == 2 and json.load(open(os.path.join(out, "args.json")))["model"] == "roformer"


def test_the_tasks_of_the_generative_families_follow_the_families_table():
    """`GENERATIVE_FAMILIES` (kept in the argument module, which loads no Keras) names every GPT and T5 family and
    alias of `kerasbert.modeling.families`, and no other."""
    from kerasbert.finetune.args import GENERATIVE_FAMILIES
    from kerasbert.modeling import families

    task = {"gpt": "lm", "t5": "seq2seq"}
    expected = {name: task[families.get(name).architecture] for name in families.NAMES
                if families.get(name).architecture in task}
    assert {name: t for t, names in GENERATIVE_FAMILIES.items() for name in names} == expected
