"""The run folder: everything a training run leaves behind, written so a kill never corrupts it.

Layout of ``kerasbert train ... --out RUN``::

    RUN/args.json          the training arguments (a resumed run reads them back)
    RUN/labels.json        the label set (classification labels or BIO tags)
    RUN/bert_config.json   the model config used; RUN/vocab.txt the vocabulary used (RUN/spiece.model a
                           SentencePiece model's, RUN/tokenizer.json a Hugging Face tokenizer's)
    RUN/model.keras        the best model on dev (the last one without dev), no optimizer
    RUN/history.csv        one row per epoch: train loss and metrics, dev metrics
    RUN/curves.png         loss and metrics per epoch, train vs dev
    RUN/metrics.json       the best epoch's dev metrics (and per-type NER figures)
    RUN/confusion.png      classification: the dev confusion matrix
    RUN/per_type.txt       NER: precision / recall / F1 per entity type
    RUN/per_label.txt      multilabel: precision / recall / F1 per label
    RUN/multilabel.json    multilabel: the threshold chosen on dev, which the run predicts with
    RUN/state/             resume state: every variable of the model and optimizer, epoch and step
    RUN/google/            with --export-google-checkpoint: the fine-tuned encoder, Google format
    RUN/eval-<file>.json   written by ``kerasbert evaluate``

Every file is written to a temporary name (``.tmp-*``) and renamed; the state folder is swapped in whole
(``state`` -> ``state.old``, then the new one -> ``state``), so after ``kill -9`` the folder holds the last
complete state. A resumed run first removes the temporaries a kill left.

``args.json`` names each input (``train``, ``dev``, ``config``, ``checkpoint``, ``vocab``) by its absolute path
and, under ``relative_to_run``, relative to the run folder: a run is read from any working directory, and
after the run and its data were moved together the relative path finds them.

``--overwrite`` replaces a run folder whole (the new one's first files are written beside it and swapped in),
and only a run folder: one with ``args.json`` that holds nothing but the files above (and ``.tmp-*``), and
none of the command's inputs.

`open_run` opens a finished run as a `LoadedRun` (its arguments, task, tokenizer, labels and best model, by name):
what evaluation, prediction and export read.
"""

from __future__ import annotations

import csv
import dataclasses
import fnmatch
import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.files import TEMPORARY, atomic_path, remove_temporaries, replace_folder, write_text
from kerasbert.finetune.args import TrainArgs
from kerasbert.finetune.distribute import is_multiworker_name
from kerasbert.text.readers import LabelSet, read_text

if TYPE_CHECKING:
    import keras

    from kerasbert.finetune.tasks import Task
    from kerasbert.text.sentencepiece import SpTokenizer
    from kerasbert.text.tokenizer import Tokenizer

__all__ = ["RUN_FILES", "VOCAB_FILES", "LoadedRun", "Run", "State", "finished_run", "open_run", "predict_rows",
           "resumed_args", "score_file", "scored_file", "train_args", "vocab_name", "with_stride"]

# a run's copy of its vocabulary: WordPiece's, SentencePiece's model, or a Hugging Face tokenizer.json
VOCAB_FILES = ("vocab.txt", "spiece.model", "tokenizer.json")
RUN_FILES = ("args.json", "labels.json", "bert_config.json", *VOCAB_FILES, "model.keras", "history.csv", "curves.png",
             "metrics.json", "confusion.png", "per_type.txt", "per_label.txt", "scores.txt", "multilabel.json", "state",
             "state.old", "google", "hf", "eval-*.json",
             TEMPORARY + "*")  # what kerasbert writes in a run folder: what --overwrite may remove


def vocab_name(vocab: str) -> str:
    """The name of a run's copy of the vocabulary ``vocab``: ``spiece.model`` for a SentencePiece model,
    ``tokenizer.json`` for a Hugging Face tokenizer, else ``vocab.txt``.

    Example:
    >>> vocab_name("mt5/spiece.model"), vocab_name("chinese_L-12_H-768_A-12/vocab.txt")
    ('spiece.model', 'vocab.txt')
    >>> vocab_name("xlm-roberta-base/tokenizer.json")
    'tokenizer.json'
    """
    if str(vocab).endswith(".json"):
        return VOCAB_FILES[2]
    return VOCAB_FILES[1] if str(vocab).endswith(".model") else VOCAB_FILES[0]


_DAMAGED = "the saved state is damaged: start the run over with --overwrite instead of --resume"
_NO_MODEL = "the run has not finished an epoch yet; resume it with `kerasbert train --out RUN --resume`"


@dataclass
class State:
    """Where training stands: ``epoch`` epochs done and ``step`` batches of the next one."""

    epoch: int = 0
    step: int = 0
    global_step: int = 0
    history: list[dict] = field(default_factory=list)
    best: float | None = None
    best_epoch: int | None = None
    finished: bool = False

    @classmethod
    def read(cls, path: str) -> State:
        """The state saved in ``path`` (a ``state.json``); a ConfigError naming the key when it is damaged or
        written by a newer kerasbert."""
        try:
            values = json.loads(read_text(path))
        except ValueError as error:
            raise fail(ConfigError, path, "JSON", f"invalid JSON ({error})", _DAMAGED) from None
        if not isinstance(values, dict):
            raise fail(ConfigError, path, "a JSON object", type(values).__name__, _DAMAGED)
        kinds = {"epoch": int, "step": int, "global_step": int, "history": list, "best": (int, float, type(None)),
                 "best_epoch": (int, type(None)), "finished": bool}
        for key, value in values.items():
            if key not in kinds:
                raise fail(ConfigError, path, f"the keys {sorted(kinds)}", f"the unknown key {key!r}",
                           "a newer kerasbert wrote this run: upgrade kerasbert to resume it")
            if not isinstance(value, kinds[key]) or (kinds[key] is int and (isinstance(value, bool) or value < 0)):
                raise fail(ConfigError, path, f"{key} of type {_kind_name(kinds[key])}", repr(value)[:80], _DAMAGED)
        return cls(**values)


def _kind_name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is type(None) else "int >= 0" if k is int else k.__name__ for k in kinds)


def check_writable(path: str, what: str) -> None:
    """A ConfigError unless ``path`` can be made or written: its nearest existing ancestor is a writable folder, and
    no ``..`` follows a folder that does not exist (the system resolves ``a/..`` only where ``a`` is a folder)."""
    ancestor, missing = os.path.join(os.getcwd(), path), []  # as written, not normalized
    while not os.path.exists(ancestor):
        ancestor, name = os.path.split(ancestor)
        missing.append(name)
    if ".." in missing:
        raise fail(ConfigError, f"{what} {path}", "an existing folder before each '..'",
                   f"'..' after {os.path.join(ancestor, missing[-1])}, which does not exist",
                   "create that folder first, or write the path without '..'")
    if not missing and os.path.isfile(ancestor):  # the path itself, an earlier output written over
        if not os.access(ancestor, os.W_OK):
            raise fail(ConfigError, f"{what} {path}", "a writable file", "no permission to write it")
        return
    if not os.path.isdir(ancestor):
        raise fail(ConfigError, f"{what} {path}", "a path under a folder", f"{ancestor}, a file, on the way")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise fail(ConfigError, f"{what} {path}", f"a writable folder {ancestor}", "no permission to write there")


class Run:
    """A run folder (see the module docstring).

    Args:
        path: str. the folder.
    """

    def __init__(self, path: str) -> None:
        self.path = os.fspath(path)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    # ------------------------------------------------------------------ creating
    def check_new(self, overwrite: bool, inputs: dict[str, str] | None = None) -> None:
        """Fail on a non-empty folder unless ``overwrite``, and with ``overwrite`` on a folder that is not a run
        or holds one of ``inputs`` (paths by option); called before anything is written."""
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise fail(ConfigError, f"--out {self.path}", "a folder", "a file")
        check_writable(self.path, "--out")
        entries = sorted(os.listdir(self.path)) if os.path.isdir(self.path) else []
        if entries and not overwrite:
            raise fail(ConfigError, f"--out {self.path}", "a new or empty run folder",
                       f"a folder with {len(entries)} entries",
                       "pass --resume to continue that run or --overwrite to start it over")
        if not entries:
            return
        folder = os.path.realpath(self.path)
        for option, path in (inputs or {}).items():
            if os.path.commonpath([folder, os.path.realpath(path)]) == folder:
                raise fail(ConfigError, f"--overwrite {self.path}", "a run folder that holds none of the inputs",
                           f"{option} {path} in it", "move the input out of it, or train into another --out")
        strangers = [name for name in entries if not any(fnmatch.fnmatch(name, known) for known in RUN_FILES)]
        if strangers or "args.json" not in entries:
            raise fail(ConfigError, f"--overwrite {self.path}", "a kerasbert run folder (args.json and the files "
                       "`kerasbert train` writes)", f"{strangers[0]}, which kerasbert did not write" if strangers
                       else "no args.json", "remove what you want gone yourself, or train into another --out")

    def create(self, write: Callable[[Run], None]) -> None:
        """Write the run's first files with ``write`` (given a staging `Run` beside the folder), then swap them
        in whole for whatever the folder held (`kerasbert.files.replace_folder`). Staging folders of this run
        that a kill left beside it are removed first.

        A folder that cannot be renamed (a mount point, one in a folder this user cannot write, or the working
        directory or a folder around it) is emptied and written in place instead, ``args.json`` removed last and
        written last (``write`` writes it last)."""
        folder = os.path.realpath(self.path)
        parent, name = os.path.split(folder)
        fixed = os.path.ismount(folder) or not os.access(parent, os.W_OK | os.X_OK) or os.path.commonpath(
            [folder, os.path.realpath(os.getcwd())]) == folder
        if os.path.isdir(folder) and fixed:
            for entry in sorted(os.listdir(folder), key=lambda entry: entry == "args.json"):
                path = os.path.join(folder, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            write(Run(folder))
            return
        staged = re.compile(re.escape(TEMPORARY) + "[a-z0-9_]{8}-" + re.escape(name))  # `tempfile.mkdtemp`'s names
        for entry in os.listdir(parent) if os.path.isdir(parent) else ():
            if staged.fullmatch(entry):
                shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
        with replace_folder(folder, os.path.join(parent, f"{TEMPORARY}old-{name}")) as staging:
            write(Run(staging))

    # ------------------------------------------------------------------ small files
    def write_json(self, name: str, value) -> None:
        write_text(self.file(name), json.dumps(value, ensure_ascii=False, indent=1) + "\n")

    def _require(self, name: str, hint: str = "pass the --out folder of a `kerasbert train` run") -> str:
        """The path of ``name`` in the run folder; a clear error when the run has no such file."""
        path = self.file(name)
        if not os.path.exists(path):
            raise fail(ConfigError, self.path, f"a kerasbert run folder with {name}", f"no {name}", hint)
        return path

    def read_json(self, name: str):
        path = self._require(name)
        try:
            return json.loads(read_text(path))
        except ValueError as error:
            raise fail(ConfigError, path, "JSON", f"invalid JSON ({error})") from None

    def vocab(self) -> str:
        """The path of the run's copy of its vocabulary (`vocab_name`); a clear error when there is none."""
        found = [name for name in VOCAB_FILES if os.path.isfile(self.file(name))]
        return self.file(found[0]) if found else self._require(VOCAB_FILES[0])

    def labels(self) -> LabelSet:
        return LabelSet.load(self._require("labels.json"))

    def write_history(self, history: list[dict]) -> None:
        keys = list(dict.fromkeys(key for row in history for key in row))
        out = io.StringIO()
        writer = csv.DictWriter(out, keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(history)
        write_text(self.file("history.csv"), out.getvalue())

    def read_history(self) -> list[dict]:
        """``history.csv``: one dict of strings per epoch."""
        return list(csv.DictReader(io.StringIO(read_text(self._require("history.csv")))))

    # ------------------------------------------------------------------ models
    def save_model(self, model) -> None:
        """Save ``model`` as ``model.keras`` without its optimizer: a fresh `TransformerModel` wrapper, which keeps
        the model's config, family (an ALBERT's export and Google checkpoint are an ALBERT's) and application."""
        from kerasbert.modeling import families
        from kerasbert.modeling.backbone import TransformerModel
        from kerasbert.modeling.config import config_of
        from kerasbert.modeling.masks import application_of

        bare = TransformerModel(model.inputs, model.outputs, name=model.name, bert_config=config_of(model),
                                family=families.of_model(model).name, application=application_of(model))
        with atomic_path(self.file("model.keras")) as tmp:
            bare.save(tmp)

    def load_model(self):
        import keras

        import kerasbert.modeling  # noqa: F401  (registers the layers)

        path = self._require("model.keras", _NO_MODEL)
        try:
            return keras.saving.load_model(path, compile=False)
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as e:  # cut short or not a .keras file
            first = str(e).splitlines()[0] if str(e) else ""
            raise fail(ConfigError, path, "a whole .keras model file", f"{type(e).__name__}: {first[:200]}",
                       "train the run again, or resume it with `kerasbert train --out RUN --resume`") from None

    # ------------------------------------------------------------------ resume state
    def save_state(self, state: State, model, optimizer) -> None:
        """Write every model and optimizer variable, and ``state``, into a new ``state/`` swapped in whole
        (`kerasbert.files.replace_folder`: the previous one is ``state.old`` between the two renames)."""
        arrays = {f"model/{i}": np.asarray(v.numpy()) for i, v in enumerate(model.variables)}
        arrays.update({f"optimizer/{i}": np.asarray(v.numpy()) for i, v in enumerate(optimizer.variables)})
        with replace_folder(self.file("state"), self.file("state.old")) as staging:
            np.savez(os.path.join(staging, "variables.npz"), **arrays)
            with open(os.path.join(staging, "state.json"), "w", encoding="utf-8") as out:
                json.dump(dataclasses.asdict(state), out, ensure_ascii=False)
                out.flush()
                os.fsync(out.fileno())

    def remove_temporaries(self) -> list[str]:
        """Remove what a killed writer left (``.tmp-*``, `kerasbert.files.remove_temporaries`); before resuming."""
        return remove_temporaries(self.path)

    def state_folder(self) -> str:
        """The last complete state (``state.old`` when a kill came between the two renames of `save_state`)."""
        for name in ("state", "state.old"):
            if os.path.exists(os.path.join(self.file(name), "state.json")):
                return self.file(name)
        raise fail(ConfigError, f"--resume {self.path}", "a run folder with a saved state", "no state/",
                   "nothing to resume: start it over, with --overwrite instead of --resume")

    def check_state(self) -> State:
        """The saved state, read and checked (``state.json`` and the index of ``variables.npz``) before any data
        is read or model built."""
        folder = self.state_folder()
        state = State.read(os.path.join(folder, "state.json"))
        with self._variables(folder) as arrays:
            arrays.files  # noqa: B018 (reads the zip's index)
        return state

    def _variables(self, folder: str):
        """``variables.npz`` of a state folder, opened; a ConfigError when it is missing or not a whole zip."""
        path = os.path.join(folder, "variables.npz")
        try:
            return np.load(path)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            raise fail(ConfigError, path, "a whole variables.npz", f"{type(error).__name__}: {error}"[:200],
                       _DAMAGED) from None

    def load_state(self, model, optimizer) -> State:
        """Restore the variables saved by `save_state` into ``model`` and ``optimizer``; return the state."""
        folder = self.state_folder()
        state = State.read(os.path.join(folder, "state.json"))
        optimizer.build(model.trainable_variables)
        path = os.path.join(folder, "variables.npz")
        with self._variables(folder) as arrays:
            for prefix, variables in (("model", model.variables), ("optimizer", optimizer.variables)):
                saved = sum(key.startswith(prefix + "/") for key in arrays.files)
                if saved != len(variables):
                    raise fail(ConfigError, path, f"{len(variables)} {prefix} variables",
                               f"{saved}", "resume with the arguments of the original run")
                for i, variable in enumerate(variables):
                    try:
                        variable.assign(arrays[f"{prefix}/{i}"])
                    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
                        raise fail(ConfigError, path, f"{prefix}/{i} of shape {tuple(variable.shape)}",
                                   f"{type(error).__name__}: {error}"[:200], _DAMAGED) from None
        return state


def train_args(task: str | None, train: str | None, out: str, resume: bool, overwrite: bool,
               options: dict) -> TrainArgs:
    """The checked arguments of a `kerasbert.finetune.training.train` call, before TensorFlow starts: the values
    and paths (`TrainArgs.check`), the run to resume (`resumed_args`) or the folder a new run goes in
    (`Run.check_new`; left to the chief under ``--strategy multiworker``, whose workers share the folder)."""
    source = Run(out)
    if resume:
        args = resumed_args(source, task, overwrite)
    else:
        for name, value in (("task", task), ("train", train)):
            if value is None:
                raise fail(ConfigError, f"--{name}", "a value (or --resume to continue a run)", "none")
        args = TrainArgs(task=task, train=train, out=out, **options)
    args.check()
    if not resume and not is_multiworker_name(args.strategy):
        source.check_new(overwrite, args.inputs())
    return args


def resumed_args(source: Run, task: str | None, overwrite: bool) -> TrainArgs:
    """The saved arguments of the run to resume, its vocabulary and config the run's own copies (what its model
    was built with); a clear error now, before reading any data, when there is no state, when ``task`` is not the
    run's, or with ``overwrite``."""
    if overwrite:
        raise fail(ConfigError, "--overwrite", "either --resume or --overwrite", "both",
                   "--resume continues the run, --overwrite starts it over")
    args = TrainArgs.saved(source.read_json("args.json"), source.path)
    if task and task != args.task:
        raise fail(ConfigError, "--task", f"{args.task}, the task of the run {source.path}", task,
                   "leave --task out to resume, or train the new task into another --out")
    for name, file in (*(("vocab", vocab) for vocab in VOCAB_FILES), ("config", "bert_config.json")):
        if os.path.isfile(source.file(file)):
            setattr(args, name, source.file(file))
    missing = args.missing()
    if missing:
        option, path = next(iter(missing.items()))
        raise fail(ConfigError, f"--resume {source.path}", f"the run's {option} at {path} (args.json)",
                   "nothing there, nor at its path relative to the run folder",
                   "put it back where it was, or beside the run as it was when the run trained")
    source.check_state()
    return args


@dataclass(frozen=True)
class LoadedRun:
    """A finished run folder, opened: what evaluation, prediction and export read of it.

    Args:
        run: Run. the folder.
        args: TrainArgs. its ``args.json``, input paths as they are found now.
        task: Task. the task those arguments describe.
        tokenizer: Tokenizer or SpTokenizer. the task's tokenizer of the run's ``vocab.txt`` (with its case) or
            ``spiece.model``.
        labels: LabelSet. its ``labels.json``.
        model: keras.Model. the best model (``model.keras``), without optimizer.
    """

    run: Run
    args: TrainArgs
    task: Task
    tokenizer: Tokenizer | SpTokenizer
    labels: LabelSet
    model: keras.Model


def open_run(run_dir: str) -> LoadedRun:
    """Open the run folder ``run_dir`` of a ``kerasbert train`` run; a ConfigError naming the file that is missing
    or damaged.

    Example:
    >>> open_run("/no/run")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/run: expected a kerasbert run folder with args.json, found no args.json...
    """
    from kerasbert.finetune.tasks import task_of  # the tasks import Keras; the checks here answer before it

    run = Run(run_dir)
    args = TrainArgs.saved(run.read_json("args.json"), run.path)
    task = task_of(args)
    task.read_run(run.path)  # what it chose on dev after training (multilabel: its threshold)
    return LoadedRun(run, args, task, task.make_tokenizer(run.vocab(), args.lowercase), run.labels(),
                     run.load_model())


def scored_file(run_dir: str, data: str | None) -> str:
    """The labelled file `kerasbert.finetune.training.evaluate` scores the run ``run_dir`` on (None: the run's dev
    file), checked with the run folder (`finished_run`) before TensorFlow starts."""
    args = finished_run(run_dir)
    if data is None and args.dev is None:
        raise fail(ConfigError, "--data", "a labelled file", "none, and the run had no --dev",
                   f"pass the file to score {run_dir} on")
    path = args.dev if data is None else data
    if not os.path.isfile(path):
        raise fail(DataError, path, "an existing file", "a folder" if os.path.isdir(path) else "nothing at that path")
    return path


def finished_run(run_dir: str) -> TrainArgs:
    """The arguments of the finished run ``run_dir``, checked before TensorFlow starts: its ``args.json``, and its
    ``labels.json`` and ``model.keras`` there; a ConfigError naming the file that is not."""
    run = Run(run_dir)
    args = TrainArgs.saved(run.read_json("args.json"), run.path)
    run._require("labels.json")
    run._require("model.keras", _NO_MODEL)
    return args


def with_stride(loaded: LoadedRun, stride: int | None) -> LoadedRun:
    """``loaded`` with its texts split into windows sharing ``stride`` word pieces (`kerasbert.text.windows`) instead
    of as the run was trained (``args.json``'s ``stride``); None keeps the run's. A ConfigError for a stride the run
    cannot use (`TrainArgs.check_stride`)."""
    if stride is None:
        return loaded
    from kerasbert.finetune.tasks import task_of  # the tasks import Keras; the checks here answer before it

    args = dataclasses.replace(loaded.args, stride=stride)
    args.check_stride()
    task = task_of(args)
    task.read_run(loaded.run.path)
    return dataclasses.replace(loaded, args=args, task=task)


def predict_rows(loaded: LoadedRun, rows: list[dict], batch_size: int | None = None, verbose: int = 0,
                 what: str = "input") -> list[dict]:
    """The task's prediction of each input row (``{"text"}``, or the task's own fields) by a loaded run's model,
    without the row itself; ``what`` names the rows in messages."""
    args, the_task = loaded.args, loaded.task
    examples = the_task.examples_of_texts(loaded.tokenizer, rows)
    features = the_task.encoded(loaded.tokenizer, examples, None, args.maxlen, what)
    return the_task.predict(loaded.model, features, examples, loaded.labels, batch_size or args.batch_size, verbose)


def score_file(loaded: LoadedRun, data: str, batch_size: int | None = None, verbose: int = 0) -> dict:
    """The task's scores of a loaded run's model on the labelled file ``data`` (the training format)."""
    args, the_task, labels = loaded.args, loaded.task, loaded.labels
    examples = the_task.read(data, labels)
    features = the_task.encoded(loaded.tokenizer, examples, labels, args.maxlen, data)
    predictions = the_task.predict(loaded.model, features, examples, labels, batch_size or args.batch_size, verbose)
    return the_task.score(examples, predictions, labels)
