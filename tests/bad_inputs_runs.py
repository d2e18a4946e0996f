"""Bad inputs of run folders, ``train``, ``--resume``, ``evaluate`` and ``predict`` on a run: rows of the catalogue
in ``tests/test_bad_inputs.py``."""

from __future__ import annotations

import json
from pathlib import Path

from kerasbert.errors import ConfigError

from bad_input_kit import Case, Shared, cls_data, copy_run, fake_run, text, train_call, train_cli, truncate


def _state(tmp: Path, content: str) -> None:
    """A run folder whose saved state.json holds ``content``."""
    text(fake_run(tmp) / "state" / "state.json", content)


def _args_with(tmp: Path, **extra) -> Path:
    """A run folder whose args.json holds ``extra`` besides the arguments."""
    run = fake_run(tmp)
    values = json.loads((run / "args.json").read_text(encoding="utf-8"))
    text(run / "args.json", json.dumps({**values, **extra}))
    return run


def _inputs_in_out(tmp: Path, _: Shared) -> None:
    """A folder ``ow`` that holds the training file and the vocabulary (and the user's notes)."""
    cls_data(tmp / "ow")
    text(tmp / "ow" / "notes.txt", "mine\n")


def _run_with_notes(tmp: Path, _: Shared) -> None:
    cls_data(tmp)
    text(fake_run(tmp) / "notes.txt", "mine\n")


def _predict_stride(tmp: Path, stride: int):
    from kerasbert import predict

    return predict(str(tmp / "run"), ["很好"], stride=stride)


def _not_a_run(tmp: Path, _: Shared) -> None:
    """A folder of files kerasbert writes in a run, but no args.json (a checkpoint's vocab and config)."""
    cls_data(tmp)
    text(tmp / "run" / "vocab.txt", "[PAD]\n")
    text(tmp / "run" / "bert_config.json", "{}")


def _word_vocabulary(tmp: Path, _: Shared) -> None:
    """Classification data with a vocabulary of whole Chinese words, as RoFormer's, appended."""
    cls_data(tmp)
    words = [chr(0x4E00 + i) + chr(0x4E00 + i + 1) for i in range(1200)]
    with open(tmp / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("".join(word + "\n" for word in words))


def _train_file_gone(tmp: Path, _: Shared) -> None:
    fake_run(tmp)
    (tmp / "train.tsv").unlink()


def _resume(tmp: Path):
    return train_call(tmp, out=tmp / "run", resume=True)


def _resume_cli(tmp: Path) -> list[str]:
    return ["train", "--out", str(tmp / "run"), "--resume", "--quiet"]


def _overwrite(out: str, train: str = "train.tsv", vocab: str = "vocab.txt"):
    def call(tmp: Path):
        from kerasbert import train as train_

        return train_("cls", str(tmp / train), str(tmp / out), vocab=str(tmp / vocab), overwrite=True, verbose=0)

    def cli(tmp: Path) -> list[str]:
        return ["train", "--task", "cls", "--train", str(tmp / train), "--vocab", str(tmp / vocab),
                "--out", str(tmp / out), "--overwrite", "--quiet"]

    return call, cli


def _predict(tmp: Path):
    from kerasbert import predict

    return predict(str(tmp / "run"), ["很好"])


def _evaluate_dev(tmp: Path):
    from kerasbert import evaluate

    return evaluate(str(tmp / "run"), verbose=0)


def _evaluate_train_file(tmp: Path):
    from kerasbert import evaluate

    return evaluate(str(tmp / "run"), str(tmp / "train.tsv"), verbose=0)


def rows() -> list[Case]:
    state = {"epoch": 1, "step": 0, "global_step": 2, "history": [], "best": None, "best_epoch": None,
             "finished": False}
    in_out, in_out_cli = _overwrite("ow", "ow/train.tsv", "ow/vocab.txt")
    vocab_in_out, vocab_in_out_cli = _overwrite("ow", vocab="ow/vocab.txt")
    run_out, run_out_cli = _overwrite("run")
    return [
        Case("resume-state.json-not-json", lambda tmp, _: _state(tmp, '{"epoch": 1, "st'), _resume, ConfigError,
             ("state.json", "invalid JSON", "--overwrite"), (), _resume_cli),
        Case("resume-state.json-a-list", lambda tmp, _: _state(tmp, "[1, 0]"), _resume, ConfigError,
             ("state.json", "a JSON object", "list"), (), _resume_cli),
        Case("resume-state.json-unknown-key", lambda tmp, _: _state(tmp, json.dumps({**state, "ema_step": 3})),
             _resume, ConfigError, ("state.json", "'ema_step'", "newer kerasbert"), (), _resume_cli),
        Case("resume-state.json-epoch-a-string", lambda tmp, _: _state(tmp, json.dumps({**state, "epoch": "one"})),
             _resume, ConfigError, ("state.json", "epoch", "'one'"), (), _resume_cli),
        Case("resume-state.json-step-negative", lambda tmp, _: _state(tmp, json.dumps({**state, "step": -4})),
             _resume, ConfigError, ("state.json", "step", "int >= 0", "-4"), (), _resume_cli),
        Case("resume-variables.npz-truncated",
             lambda tmp, shared: truncate(copy_run(tmp, shared) / "state" / "variables.npz"), _resume, ConfigError,
             ("variables.npz", "a whole variables.npz", "--overwrite"), (), _resume_cli),
        Case("resume-variables.npz-missing", lambda tmp, _: _state(tmp, json.dumps(state)), _resume, ConfigError,
             ("variables.npz", "a whole variables.npz"), (), _resume_cli),
        Case("resume-training-file-gone", _train_file_gone, _resume, ConfigError,
             ("--resume", "--train", "train.tsv", "nothing there", "relative to the run"), (), _resume_cli),
        Case("resume-args.json-unknown-key", lambda tmp, _: _args_with(tmp, ema_decay=0.999), _resume, ConfigError,
             ("args.json", "'ema_decay'", "newer kerasbert"), (), _resume_cli),
        Case("predict-args.json-unknown-key", lambda tmp, _: _args_with(tmp, ema_decay=0.999), _predict,
             ConfigError, ("args.json", "'ema_decay'"), (), lambda tmp: ["predict", str(tmp / "run"), "--text", "很"]),
        Case("resume-args.json-not-an-object", lambda tmp, _: text(fake_run(tmp) / "args.json", "[]"), _resume,
             ConfigError, ("args.json", "a JSON object", "list"), (), _resume_cli),
        Case("overwrite-folder-holding-the-train-file", _inputs_in_out, in_out, ConfigError,
             ("--overwrite", "ow", "--train", "train.tsv"), (), in_out_cli),
        Case("overwrite-folder-holding-the-vocab", lambda tmp, _: (_inputs_in_out(tmp, _), cls_data(tmp)),
             vocab_in_out, ConfigError, ("--overwrite", "ow", "--vocab", "vocab.txt"), (), vocab_in_out_cli),
        Case("overwrite-run-with-a-file-kerasbert-did-not-write", _run_with_notes, run_out, ConfigError,
             ("--overwrite", "run", "notes.txt", "did not write"), (), run_out_cli),
        Case("overwrite-folder-that-is-no-run", _not_a_run, run_out, ConfigError,
             ("--overwrite", "run", "no args.json"), (), run_out_cli),
        Case("train-on-a-word-level-vocabulary", _word_vocabulary, train_call, ConfigError,
             ("vocab.txt", "1200 whole Chinese words", "pre_tokenize=jieba_words"), ("out",), train_cli),
        Case("train-warmup-negative", lambda tmp, _: cls_data(tmp), lambda tmp: train_call(tmp, warmup=-0.1),
             ConfigError, ("--warmup", "[0, 1]", "-0.1"), ("out",), lambda tmp: train_cli(tmp, "--warmup", "-0.1")),
        Case("train-stride-not-below-the-window", lambda tmp, _: cls_data(tmp),
             lambda tmp: train_call(tmp, maxlen=32, stride=30), ConfigError,
             ("--stride", "less than maxlen - 2 = 30", "found 30"), ("out",),
             lambda tmp: train_cli(tmp, "--maxlen", "32", "--stride", "30")),
        Case("predict-stride-not-below-the-window", lambda tmp, shared: copy_run(tmp, shared),
             lambda tmp: _predict_stride(tmp, 1000), ConfigError, ("--stride", "less than maxlen - 2", "found 1000"),
             (), lambda tmp: ["predict", str(tmp / "run"), "--text", "很好", "--stride", "1000"]),
        Case("evaluate-without-data-on-a-run-without-dev", lambda tmp, shared: copy_run(tmp, shared), _evaluate_dev,
             ConfigError, ("--data", "no --dev"), ("run/eval-dev.json",), lambda tmp: ["evaluate", str(tmp / "run")]),
        Case("evaluate-a-run-that-saved-no-model", lambda tmp, _: fake_run(tmp), _evaluate_train_file, ConfigError,
             ("run", "model.keras", "not finished an epoch", "--resume"), ("run/eval-train.json",),
             lambda tmp: ["evaluate", str(tmp / "run"), "--data", str(tmp / "train.tsv")]),
        Case("train-checkpoint-gone", lambda tmp, _: cls_data(tmp), lambda tmp: train_call(tmp, checkpoint=str(
             tmp / "gone")), ConfigError, ("--checkpoint", "gone", "Hugging Face weights", "nothing there"), ("out",),
             lambda tmp: train_cli(tmp, "--checkpoint", str(tmp / "gone"))),
        Case("train-dev-a-folder", lambda tmp, _: (cls_data(tmp), (tmp / "dev").mkdir()),
             lambda tmp: train_call(tmp, dev=str(tmp / "dev")), ConfigError, ("--dev", "an existing file", "a folder"),
             ("out",), lambda tmp: train_cli(tmp, "--dev", str(tmp / "dev"))),
    ]
