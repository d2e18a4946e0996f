"""Sentence vectors from any folder kerasbert reads: `embed` (``kerasbert.embed``) and ``kerasbert embed``.

`open_embedder` tells the folder from its files and opens it as an `Embedder`:

- a checkpoint folder (Google ``bert_config.json`` or Hugging Face ``config.json``, with weights and ``vocab.txt``):
  the encoder with `kerasbert.modeling.heads.embedding`, ``pooling`` `EMBED_POOLING` and unit length unless told;
- a sentence-transformers folder (``modules.json``): its pooling and its ``Normalize``
  (`kerasbert.weights.sentence_transformers`);
- a run folder (``args.json``) whose model answers vectors ``[batch, hidden]`` (``--task sim``): as trained;
- an export folder (``kerasbert-export.json``) of such a model (`kerasbert.serving.vector_export`): its runtime.

A ``pooling`` or ``normalize`` that contradicts what a sentence-transformers folder, a run or an export holds is a
ConfigError (a sentence-transformers folder's normalization may be turned on or off: it is a step after the
model). A prompt goes before each text as in sentence-transformers (``prompt_name``, ``prompt``, a folder's
``default_prompt_name``: `kerasbert.serving.prompts`). Texts are encoded as one text each (segment 0), cut to
``maxlen`` word pieces, and run in batches of similar length; the vectors come back in the order of the texts,
float32 ``[texts, hidden]``.

It sits with the exports because it reads them too. Nothing here imports TensorFlow before a model is loaded, so
an ONNX or OpenVINO export embeds without it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

import numpy as np

from kerasbert import layer_names as names
from kerasbert.choices import EMBED_MAXLEN, EMBED_POOLING, PREDICT_BATCH_SIZE, SIM_POOLINGS, VECTOR_FILES
from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.serving.exported import open_export
from kerasbert.serving.folder import EXPORT_INFO, VECTOR_TASK, read_info
from kerasbert.serving.prompts import check_prompt_options, choose_prompt, declared_prompts
from kerasbert.text.coverage import warn_unknown
from kerasbert.text.tokenizer import Tokenizer, folder_lower_case
from kerasbert.text.tokenizer_base import pad_id_of
from kerasbert.text.tokenizer_files import load_tokenizer, vocabulary_file

__all__ = ["Embedder", "check_maxlen", "check_prompt", "checkpoint_tokenizer", "embed", "embed_file", "embedder_of_run",
           "folder_kind", "model_maxlen", "open_embedder", "returns_vectors", "write_vectors"]

KINDS = {"export": (EXPORT_INFO,), "run": ("args.json",), "sentence-transformers": ("modules.json",),
         "checkpoint": ("bert_config.json", "config.json")}  # a folder's kind, by the first of these files it holds
EXPORT_CHUNK = 1024  # texts an export embeds between two progress lines


@dataclasses.dataclass(frozen=True)
class Embedder:
    """A folder opened to give sentence vectors (`open_embedder`); call it on texts.

    Args:
        path: str. the folder.
        kind: str. ``"checkpoint"``, ``"sentence-transformers"``, ``"run"`` or ``"export"``.
        pooling: str or None. how token vectors become one (`SIM_POOLINGS`); None where a run does not say.
        normalize: bool. whether the vectors have unit length.
        maxlen: int. the word pieces a text keeps, ``[CLS]`` and ``[SEP]`` included.
        lowercase: bool. whether the text is lower-cased (and accents stripped) before its word pieces.
        vocab: str or None. the ``vocab.txt`` (None for a SavedModel export, whose vocabulary is in its graph).
        model: keras.Model or None. the ``[B, H]`` vector model (None for an export).
        tokenizer: Tokenizer or None. the model's tokenizer (None for an export).
        served: the opened export (`kerasbert.serving.exported.open_export`), or None.
        run: LoadedRun or None. the opened run folder (`kerasbert.finetune.runs.open_run`).
        prompts: dict. the prompts the folder declares, by name (`kerasbert.serving.prompts`).
        default_prompt_name: str or None. the prompt put before each text when none is asked for.
        prompts_file: str or None. the file that declares the prompts (the folder where none can).
        include_prompt: bool. whether the pooling takes the prompt's tokens (false: only ``cls`` pooling runs with a
            prompt, as its vector does not depend on it).
    """

    path: str
    kind: str
    pooling: str | None
    normalize: bool
    maxlen: int
    lowercase: bool
    vocab: str | None
    model: object = None
    tokenizer: Tokenizer | None = None
    served: object = None
    run: object = None
    prompts: dict = dataclasses.field(default_factory=dict)
    default_prompt_name: str | None = None
    prompts_file: str | None = None
    include_prompt: bool = True

    @property
    def dimension(self) -> int:
        """H, the width of a vector."""
        return int(self.served.info["dimension"] if self.served is not None else self.model.outputs[0].shape[-1])

    def prompt(self, prompt_name: str | None = None, prompt: str | None = None) -> str:
        """The text put before each text (`kerasbert.serving.prompts.choose_prompt`); a ConfigError for a prompt
        name the folder does not declare, or a prompt its pooling would have to leave out."""
        text = choose_prompt(self.prompts, self.default_prompt_name, prompt_name, prompt,
                             self.prompts_file or self.path)
        if text and not self.include_prompt and self.pooling != "cls":
            raise fail(ConfigError, f"{self.path}: the Pooling module's include_prompt", "true (kerasbert pools the "
                       "prompt's tokens with the text's)", f"false, with {self.pooling} pooling and the prompt "
                       f"{text!r}", "embed without a prompt (prompt=\"\")")
        return text

    def __call__(self, texts: Sequence[str], batch_size: int = PREDICT_BATCH_SIZE, verbose: int = 0,
                 prompt_name: str | None = None, prompt: str | None = None) -> np.ndarray:
        """float32 vectors ``[len(texts), H]`` of the texts, in their order, each after its prompt (`prompt`);
        ``verbose`` shows progress."""
        texts = _checked_texts(texts)
        check_batch_size(batch_size, "batch_size")
        prefix = self.prompt(prompt_name, prompt)
        texts = [prefix + text for text in texts] if prefix else texts
        if self.served is not None:
            return _export_vectors(self.served, texts, batch_size, verbose)
        return model_vectors(self.model, self.tokenizer, texts, self.maxlen, batch_size, verbose)


def check_batch_size(batch_size: int, name: str = "--batch-size") -> None:
    """A ConfigError naming ``name`` unless ``batch_size`` is an integer >= 1."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise fail(ConfigError, name, "an integer >= 1", repr(batch_size))


def _checked_texts(texts) -> list[str]:
    """``texts`` as a list of strings; a DataError naming the first that is not one."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise fail(DataError, "texts", "a list of strings", f"a {type(texts).__name__}", "wrap one text in a list")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise fail(DataError, f"texts[{i}]", "a string", f"a {type(text).__name__} {str(text)[:40]}")
    return list(texts)


def model_vectors(model, tokenizer: Tokenizer, texts: list[str], maxlen: int, batch_size: int,
                  verbose: int = 0) -> np.ndarray:
    """The vectors of a Keras ``[B, H]`` model on texts: encoded, sorted by length so batches pad little, run in
    batches (`kerasbert.finetune.task_base.predict_batches`, a progress bar with ``verbose``), put back in order."""
    from kerasbert.finetune.task_base import predict_batches
    from kerasbert.text.pipeline import Features, to_dataset

    if not texts:
        return np.zeros((0, int(model.outputs[0].shape[-1])), np.float32)
    token_ids, segment_ids = tokenizer.encode_batch(texts, maxlen=maxlen)  # a long text read only as maxlen needs
    warn_unknown(tokenizer, token_ids, texts, "texts")
    order = np.argsort([len(ids) for ids in token_ids], kind="stable")
    features = Features([token_ids[i] for i in order], [segment_ids[i] for i in order], pad_id=pad_id_of(tokenizer))
    batches = predict_batches(model, to_dataset(features, batch_size, labels=False),
                              verbose if len(texts) > batch_size else 0)  # a bar for more than one batch
    vectors = np.empty((len(texts), batches[0].shape[-1]), np.float32)
    vectors[order] = np.concatenate(batches)
    return vectors


def _export_vectors(served, texts: list[str], batch_size: int, verbose: int) -> np.ndarray:
    """The vectors an export answers, ``EXPORT_CHUNK`` texts at a time (a log line after each with ``verbose``)."""
    from kerasbert.log import logger

    out = [np.zeros((0, int(served.info["dimension"])), np.float32)]
    for begin in range(0, len(texts), EXPORT_CHUNK):
        rows = served.predict([{"text": text} for text in texts[begin:begin + EXPORT_CHUNK]], batch_size)
        out.append(np.array([row["vector"] for row in rows], np.float32).reshape(len(rows), -1))
        if verbose and len(texts) > EXPORT_CHUNK:
            logger.info("%d/%d texts", min(begin + EXPORT_CHUNK, len(texts)), len(texts))
    return np.concatenate(out)


# ------------------------------------------------------------------------------------------- opening a folder
def folder_kind(path: str | os.PathLike) -> str:
    """What a folder holds, by its files (`KINDS`): ``"export"``, ``"run"``, ``"sentence-transformers"`` or
    ``"checkpoint"``; a ConfigError naming what was looked for when it is none of them.

    Example:
    >>> folder_kind("/no/such/folder")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/such/folder: expected a checkpoint folder ..., found no such folder
    """
    path = os.fspath(path)
    for kind, files in KINDS.items():
        if any(os.path.isfile(os.path.join(path, name)) for name in files):
            return kind
    raise fail(ConfigError, path, "a checkpoint folder (bert_config.json or config.json, weights, vocab.txt), a "
               "sentence-transformers folder (modules.json), a run folder (args.json) or an export folder "
               f"({EXPORT_INFO})", "none of their files" if os.path.isdir(path) else "a file" if os.path.exists(path)
               else "no such folder")


def check_pooling(pooling: str | None) -> None:
    """A ConfigError for a pooling kerasbert does not have (`SIM_POOLINGS`); None passes.

    Example:
    >>> check_pooling("max")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --pooling: expected ...mean..., found 'max'
    """
    if pooling is not None and pooling not in SIM_POOLINGS:
        raise fail(ConfigError, "--pooling", ", ".join(SIM_POOLINGS[:-1]) + f" or {SIM_POOLINGS[-1]}", repr(pooling))


def check_maxlen(maxlen: int | None, longest: int | None) -> None:
    """A ConfigError for a ``maxlen`` that is not an integer >= 2 or is more than the model's positions."""
    if maxlen is None:
        return
    if isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 2:
        raise fail(ConfigError, "--maxlen", "an integer >= 2 ([CLS] and [SEP] included)", repr(maxlen))
    if longest is not None and maxlen > longest:
        raise fail(ConfigError, "--maxlen", f"at most {longest}, the model's positions", str(maxlen))


def model_maxlen(model, maxlen: int | None, default: int) -> int:
    """``maxlen`` checked against the model's positions, or ``default`` capped by them."""
    from kerasbert.modeling import families
    from kerasbert.modeling.config import config_of

    longest = families.max_length(families.of_model(model), config_of(model))
    check_maxlen(maxlen, longest)
    return maxlen if maxlen is not None else min(default, longest or default)


def _check_same(what: str, given, held, where: str) -> None:
    """A ConfigError when an option given (not None) contradicts what the folder holds."""
    if given is not None and held is not None and given != held:
        flag = f"--pooling {given}" if what == "pooling" else "--no-normalize" if given is False else "normalize=True"
        raise fail(ConfigError, flag, f"the {what} of {where}, {held!r}", repr(given),
                   f"leave the option out: {where} gives vectors as it was made")


def _checkpoint(path: str, pooling: str | None, normalize: bool | None, maxlen: int | None) -> Embedder:
    """A Google or Hugging Face checkpoint folder: the encoder, the head, then the weights (a pooler's too)."""
    from kerasbert.modeling import heads
    from kerasbert.modeling.models import build_transformer_model
    from kerasbert.weights.checkpoint import load_checkpoint

    pooling = pooling or EMBED_POOLING
    normalize = True if normalize is None else normalize
    model = heads.embedding(build_transformer_model(path, verbose=False), pooling, normalize=normalize)
    load_checkpoint(model, path, verbose=False)  # after the head: "pooler" and "linear" read the checkpoint's pooler
    lowercase, vocab, tokenizer = checkpoint_tokenizer(path)
    return Embedder(path, "checkpoint", pooling, normalize, model_maxlen(model, maxlen, EMBED_MAXLEN), lowercase, vocab,
                    model, tokenizer)


def checkpoint_tokenizer(folder: str) -> tuple[bool, str, Tokenizer]:
    """A checkpoint folder's case (`folder_lower_case`), its ``vocab.txt`` (else its ``tokenizer.json``) and their
    tokenizer (`kerasbert.text.tokenizer_files.load_tokenizer`)."""
    lowercase, vocab = folder_lower_case(folder), vocabulary_file(folder)
    return lowercase, vocab, load_tokenizer(vocab, lowercase=lowercase)


def _sentence_transformers(path: str, pooling: str | None, normalize: bool | None,
                           maxlen: int | None) -> Embedder:
    """A sentence-transformers folder (`kerasbert.weights.sentence_transformers`): its encoder with its weights,
    then its pooling; its ``Normalize`` unless ``normalize`` says, its ``max_seq_length`` unless ``maxlen`` does."""
    from kerasbert.modeling import heads
    from kerasbert.modeling.models import build_transformer_model
    from kerasbert.weights.sentence_transformers import PROMPTS, read_sentence_transformers

    folder = read_sentence_transformers(path)
    _check_same("pooling", pooling, folder.pooling, f"the sentence-transformers folder {path}")
    normalize = folder.normalize if normalize is None else normalize
    encoder = build_transformer_model(folder.transformer, folder.transformer, verbose=False)
    model = heads.embedding(encoder, folder.pooling, normalize=normalize)
    lowercase = bool(folder.lowercase) or folder_lower_case(folder.transformer)
    vocab = vocabulary_file(folder.transformer)
    return Embedder(path, "sentence-transformers", folder.pooling, normalize,
                    model_maxlen(model, maxlen, folder.maxlen or EMBED_MAXLEN), lowercase, vocab, model,
                    load_tokenizer(vocab, lowercase=lowercase), prompts=folder.prompts,
                    default_prompt_name=folder.default_prompt_name, prompts_file=os.path.join(path, PROMPTS),
                    include_prompt=folder.include_prompt)


def returns_vectors(loaded) -> bool:
    """Whether an opened run's model answers sentence vectors: one ``[B, H]`` output of the encoder's width, from a
    task that is not a classifier (whose ``[B, labels]`` could be as wide)."""
    from kerasbert.choices import LOSS_BOUND
    from kerasbert.modeling.config import config_of

    outputs = loaded.model.outputs
    return (loaded.args.task not in LOSS_BOUND and len(outputs) == 1 and len(outputs[0].shape) == 2
            and outputs[0].shape[-1] == config_of(loaded.model).hidden_size)


def embedder_of_run(loaded, pooling: str | None = None, normalize: bool | None = None,
                    maxlen: int | None = None) -> Embedder:
    """The `Embedder` of an opened run (`kerasbert.finetune.runs.open_run`) whose model answers vectors; a
    ConfigError for a run of another task, or options that contradict the run."""
    from kerasbert.choices import MAXLEN

    path = loaded.run.path
    if not returns_vectors(loaded):
        raise fail(ConfigError, path, "a run whose model answers sentence vectors [batch, hidden] (--task sim)",
                   f"a {loaded.args.task} run", "embed the checkpoint it was trained from, or export the run for its "
                   "own answers")
    held = any(layer.name == names.VECTOR_NORMALIZE for layer in loaded.model.layers)
    _check_same("pooling", pooling, getattr(loaded.args, "pooling", None), os.path.join(path, "args.json"))
    _check_same("normalization", normalize, held, path)
    return Embedder(path, "run", getattr(loaded.args, "pooling", None), held,
                    model_maxlen(loaded.model, maxlen, loaded.args.maxlen or MAXLEN), bool(loaded.args.lowercase),
                    loaded.run.vocab(), loaded.model, loaded.tokenizer, run=loaded)


def _run(path: str, pooling: str | None, normalize: bool | None, maxlen: int | None) -> Embedder:
    from kerasbert.finetune.runs import open_run

    return embedder_of_run(open_run(path), pooling, normalize, maxlen)


def _vector_export_info(path: str) -> dict:
    """The ``kerasbert-export.json`` of an export of a vector model, read before its model loads; a ConfigError for an
    export of another model."""
    info = read_info(path)
    if info["task"] != VECTOR_TASK:
        raise fail(ConfigError, path, "an export of a sentence-vector model (`kerasbert export CHECKPOINT OUT`)",
                   f"an export of a {info['task']} model", "predict with it: kerasbert predict --model")
    return info


def _export(path: str, pooling: str | None, normalize: bool | None, maxlen: int | None) -> Embedder:
    """An export folder of a vector model (`kerasbert.serving.vector_export`), run by its own runtime."""
    _vector_export_info(path)
    served = open_export(path)
    info = served.info
    where = os.path.join(path, EXPORT_INFO)
    _check_same("pooling", pooling, info.get("pooling"), where)
    _check_same("normalization", normalize, info.get("normalize"), where)
    if maxlen is not None and maxlen != info["maxlen"]:
        raise fail(ConfigError, "--maxlen", f"the export's, {info['maxlen']} (its tokenizer is part of it)",
                   str(maxlen), "leave --maxlen out, or export again")
    vocab = os.path.join(path, "vocab.txt")
    return Embedder(path, "export", info.get("pooling"), bool(info.get("normalize")), info["maxlen"],
                    bool(info.get("lowercase")), vocab if os.path.isfile(vocab) else None, served=served,
                    prompts=dict(info.get("prompts") or {}), default_prompt_name=info.get("default_prompt_name"),
                    prompts_file=where, include_prompt=info.get("include_prompt", True))


OPENERS = {"checkpoint": _checkpoint, "sentence-transformers": _sentence_transformers, "run": _run,
           "export": _export}


def open_embedder(path: str | os.PathLike, pooling: str | None = None, normalize: bool | None = None,
                  maxlen: int | None = None) -> Embedder:
    """Open a folder to give sentence vectors; its kind is told from its files (`folder_kind`).

    Args:
        path: str. a checkpoint, sentence-transformers, run or export folder.
        pooling: str or None. one of `SIM_POOLINGS`; None: `EMBED_POOLING` for a checkpoint, the folder's own for
            the others (which a pooling given must equal).
        normalize: bool or None. unit-length vectors; None: True for a checkpoint, the folder's own for the others.
        maxlen: int or None. the word pieces a text keeps; None: `EMBED_MAXLEN` for a checkpoint, ``max_seq_length``
            for a sentence-transformers folder, the run's ``--maxlen``, the export's; never more than the model's
            positions.

    Returns:
        An `Embedder`.
    """
    path = os.fspath(path)
    return OPENERS[check_source(path, pooling, normalize, maxlen)](path, pooling, normalize, maxlen)


def check_source(path: str, pooling: str | None = None, normalize: bool | None = None,
                 maxlen: int | None = None) -> str:
    """What `open_embedder` checks before a model loads (so before TensorFlow starts): the options, the folder's kind
    (`folder_kind`), a run's files (`kerasbert.finetune.runs.finished_run`) and an export's task. Returns the kind.

    Example:
    >>> check_source("/no/such/folder", pooling="mean")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/such/folder: expected a checkpoint folder ..., found no such folder
    """
    from kerasbert.finetune.runs import finished_run

    check_pooling(pooling)
    check_maxlen(maxlen, None)
    if normalize is not None and not isinstance(normalize, bool):
        raise fail(ConfigError, "normalize", "True, False or None", repr(normalize))
    kind = folder_kind(path)
    if kind == "run":
        finished_run(path)
    elif kind == "export":
        _vector_export_info(path)
    return kind


def embed(model: str | os.PathLike | Embedder, texts: Sequence[str], pooling: str | None = None,
          normalize: bool | None = None, batch_size: int = PREDICT_BATCH_SIZE, maxlen: int | None = None,
          verbose: int = 0, prompt_name: str | None = None, prompt: str | None = None) -> np.ndarray:
    """Sentence vectors of texts: float32 ``[len(texts), H]``, in the order of the texts, as
    ``SentenceTransformer.encode`` gives them.

    Args:
        model: str or Embedder. a checkpoint folder (Google or Hugging Face), a sentence-transformers folder, a run
            folder of a vector task, an export folder of one (`open_embedder`), or an `Embedder` already open.
        texts: list of str. the texts, each one input (segment 0).
        pooling: str or None. how a checkpoint's token vectors become one (`open_embedder`).
        normalize: bool or None. unit-length vectors (`open_embedder`).
        batch_size: int. texts the model runs at once.
        maxlen: int or None. the word pieces a text keeps (`open_embedder`).
        verbose: int. 1: a progress bar.
        prompt_name: str or None. the name of a prompt the folder declares (``config_sentence_transformers.json``'s
            ``prompts``, e.g. ``"query"``), put before each text; None: its ``default_prompt_name``, if any.
        prompt: str or None. the text put before each text (``"query: "``); ``""``: none, the default left out.

    Example:
    >>> import tempfile
    >>> from kerasbert import build_transformer_model, save_hf_checkpoint
    >>> folder = save_hf_checkpoint(build_transformer_model("tiny", verbose=False), tempfile.mkdtemp() + "/hf")
    >>> _ = open(folder + "/vocab.txt", "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"]))
    >>> vectors = embed(folder, ["a b", "b"])
    >>> vectors.shape, vectors.dtype.name, round(float((vectors[0] ** 2).sum()), 4)
    ((2, 32), 'float32', 1.0)
    """
    if isinstance(model, Embedder):
        if (pooling, normalize, maxlen) != (None, None, None):
            raise fail(ConfigError, "embed", "pooling, normalize and maxlen left out with an open Embedder",
                       f"pooling={pooling!r}, normalize={normalize!r}, maxlen={maxlen!r}",
                       "pass them to open_embedder instead")
        return model(texts, batch_size, verbose, prompt_name, prompt)
    check_prompt(os.fspath(model), prompt_name, prompt)  # a name the folder lacks fails before the model loads
    return open_embedder(model, pooling, normalize, maxlen)(texts, batch_size, verbose, prompt_name, prompt)


def check_prompt(path: str, prompt_name: str | None = None, prompt: str | None = None) -> None:
    """What `Embedder.prompt` checks that needs no model: the options, and that the folder declares
    ``prompt_name`` (`kerasbert.serving.prompts`).

    Example:
    >>> check_prompt("/a/checkpoint", prompt="query: ")
    """
    check_prompt_options(prompt_name, prompt)
    if prompt_name is not None:
        prompts, default, where = declared_prompts(path, folder_kind(path))
        choose_prompt(prompts, default, prompt_name, prompt, where)


# ------------------------------------------------------------------------------------------- files
def check_output(path: str) -> None:
    """A ConfigError for an ``--output`` that is not ``.npy`` or ``.jsonl`` or cannot be written, before any model
    loads.

    Example:
    >>> check_output("vectors.csv")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --output vectors.csv: expected a .npy or .jsonl file, found the suffix '.csv'
    """
    from kerasbert.finetune.runs import check_writable

    suffix = os.path.splitext(path)[1].lower()
    if suffix not in VECTOR_FILES:
        raise fail(ConfigError, f"--output {path}", f"a {' or '.join(VECTOR_FILES)} file", f"the suffix {suffix!r}")
    if os.path.isdir(path):
        raise fail(ConfigError, f"--output {path}", "a file to write the vectors to", "a folder")
    check_writable(os.path.dirname(os.path.abspath(path)) if os.path.isfile(path) else path, "--output")


def write_vectors(path: str, rows: Sequence[dict], vectors: np.ndarray) -> None:
    """Write vectors atomically: ``.npy`` float32 ``[N, H]``, or ``.jsonl``, each row with its ``"vector"``."""
    from kerasbert.files import atomic_path, write_text

    check_output(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if path.lower().endswith(".npy"):
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.save(f, np.asarray(vectors, np.float32))
        return
    write_text(path, "".join(json.dumps({**row, "vector": vector.tolist()}, ensure_ascii=False) + "\n"
                             for row, vector in zip(rows, np.asarray(vectors, np.float32), strict=True)))


def embed_file(model: str, input: str, output: str, pooling: str | None = None, normalize: bool | None = None,
               maxlen: int | None = None, batch_size: int = PREDICT_BATCH_SIZE, verbose: int = 0,
               prompt_name: str | None = None, prompt: str | None = None) -> np.ndarray:
    """``kerasbert embed``: the vectors of the texts of ``input`` (one a line, or ``.jsonl`` with ``"text"``), each
    after its prompt (`embed`), written to ``output`` (`write_vectors`); the output and the prompt are checked
    before the model loads. Returns the vectors."""
    from kerasbert.text.readers import read_texts

    check_output(output)
    check_pooling(pooling)
    check_prompt(model, prompt_name, prompt)
    rows = read_texts(input)
    embedder = open_embedder(model, pooling, normalize, maxlen)
    vectors = embedder([row["text"] for row in rows], batch_size, verbose, prompt_name, prompt)
    write_vectors(output, rows, vectors)
    return vectors
