"""The bad-input catalogue's kit: the ``Case`` record, writers of broken inputs, the slow shared fixtures and
the calls the rows make. ``tests/test_bad_inputs.py`` gathers the rows (its own and ``bad_inputs_*.py``'s) and
runs them."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from kerasbert.errors import KerasBertError
from kerasbert.finetune.args import TrainArgs
from kerasbert.text.readers import LabelSet

import helpers

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"好差很a张三北京", "##s"]
CORE_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
GPT2 = {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
        "activation_function": "gelu_new"}
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0  # root writes through any permission bits


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad input: how to write it, the Python call, the error and words expected, the files that must not
    appear, and the CLI arguments that take the same input (None where the CLI does not)."""

    id: str
    write: Callable[[Path, "Shared"], object]
    call: Callable[[Path], object]
    error: type[KerasBertError]
    words: tuple[str, ...]
    absent: tuple[str, ...] = ()
    cli: Callable[[Path], list[str]] | None = None


# --------------------------------------------------------------------------- writers
def text(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def long_line(path: Path, first: str, size: int) -> Path:
    """A file of ``first``'s line, then one line of ``size`` NUL bytes without a line break, written sparsely (the
    file takes no disk for it)."""
    head = text(path, first + "\n").stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(head + size)
    return path


def config(tmp: Path, name: str = "bert_config.json", drop: tuple[str, ...] = (), raw: str | None = None,
           **changes) -> Path:
    values = {key: value for key, value in {**helpers.TINY, **changes}.items() if key not in drop}
    return text(tmp / name, raw if raw is not None else json.dumps(values))


def vocab(tmp: Path, tokens: list[str] = VOCAB, name: str = "vocab.txt") -> Path:
    return text(tmp / name, "".join(token + "\n" for token in tokens))


def cls_data(tmp: Path, content: str | bytes = "很好\tpos\n很差\tneg\n", name: str = "train.tsv") -> Path:
    vocab(tmp)
    return text(tmp / name, content)


def fake_run(tmp: Path, task: str = "cls", state: bool = True, model: bytes | None = None) -> Path:
    """A run folder with the files `kerasbert train` writes first (no training)."""
    run = tmp / "run"
    cls_data(tmp)
    args = TrainArgs(task=task, train=str(tmp / "train.tsv"), out=str(run), vocab=str(tmp / "vocab.txt"))
    text(run / "args.json", json.dumps(dataclasses.asdict(args)))
    shutil.copyfile(tmp / "vocab.txt", run / "vocab.txt")
    LabelSet(["neg", "pos"]).save(str(run / "labels.json"))
    if state:
        text(run / "state" / "state.json", json.dumps({"epoch": 1, "step": 0}))
    if model is not None:
        text(run / "model.keras", model)
    return run


def google(tmp: Path, cfg: dict | None = None, name: str = "ckpt", prefix: str = "bert_model.ckpt",
           values: dict | None = None) -> Path:
    """A Google checkpoint folder (prefix ``prefix``) with bert_config.json; returns the folder."""
    import tensorflow as tf

    cfg = cfg or helpers.TINY
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    values = values or helpers.random_google_weights(cfg, heads=False)
    names = sorted(values)
    tf.raw_ops.SaveV2(prefix=str(folder / prefix), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(values[n]) for n in names])
    text(folder / "bert_config.json", json.dumps(cfg))
    return folder


def data_file(folder: Path) -> Path:
    return next(folder.glob("*.data-*"))


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def hf(tmp: Path, cfg: dict | None = None, name: str = "hf", values: dict | None = None) -> Path:
    """A Hugging Face folder (model.safetensors, config.json), converted from a Google checkpoint."""
    from kerasbert.weights.convert import convert_checkpoint

    source = google(tmp / "src", cfg, values=values)
    convert_checkpoint(source, tmp / name, "hf")
    shutil.rmtree(tmp / "src")
    return tmp / name


class Shared:
    """What several rows need and is slow to make, made once per module when first asked for."""

    def __init__(self, folder: Path):
        self.folder = folder

    @functools.cached_property
    def trained(self) -> Path:
        """A tiny classification run, trained one short epoch on the demo data."""
        from kerasbert import train
        from kerasbert.finetune.demo_data import write_demo_data

        data = write_demo_data(str(self.folder / "data"), n_train=32, n_dev=8, n_test=8)
        run = self.folder / "run"
        train("cls", data["cls_train"], str(run), vocab=data["vocab"], epochs=1, maxlen=16, batch_size=16,
              verbose=0)
        return run

    @functools.cached_property
    def exported(self) -> Path:
        from kerasbert.serving.export import export

        folder = self.folder / "export"
        export(str(self.trained), str(folder), "openvino", precision="f32")
        return folder


def copy_run(tmp: Path, shared: Shared) -> Path:
    shutil.copytree(shared.trained, tmp / "run")
    return tmp / "run"


@functools.cache
def tiny_model():
    """The tiny model checkpoints load into; loading assigns nothing unless every check passes, so one serves all."""
    from kerasbert import build_transformer_model

    return build_transformer_model(config=helpers.TINY, verbose=False)


def tiny_load(path: Path):
    from kerasbert.weights.checkpoint import load_checkpoint

    return load_checkpoint(tiny_model(), str(path), verbose=False)


def train_call(tmp: Path, task: str = "cls", **options):
    from kerasbert import train

    options.setdefault("vocab", str(tmp / "vocab.txt"))
    return train(task, str(tmp / "train.tsv"), str(options.pop("out", tmp / "out")), verbose=0, **options)


def train_cli(tmp: Path, *extra: str, task: str = "cls", out: str = "out", data: str = "train.tsv") -> list[str]:
    return ["train", "--task", task, "--train", str(tmp / data), "--vocab", str(tmp / "vocab.txt"),
            "--out", str(tmp / out), "--quiet", *extra]


def prepare_cli(tmp: Path, data: str, *extra: str, task: str = "cls") -> list[str]:
    return ["prepare", "--task", task, "--data", str(tmp / data), "--vocab", str(tmp / "vocab.txt"),
            "--out", str(tmp / "out"), "--quiet", *extra]


def listing(folder: Path) -> list[tuple[str, int]]:
    """Every path under ``folder`` with its size (0 for folders)."""
    return sorted((str(path.relative_to(folder)), path.stat().st_size if path.is_file() else 0)
                  for path in folder.rglob("*"))
