"""Convert a checkpoint of any family between Google's TF1 format and Hugging Face's, without building a model.

Both formats of a family are tables from the same (layer, weight) keys (`kerasbert.weights.google.google_format`,
`kerasbert.weights.hf.hf_format`), so a conversion renames each variable through its key and transposes it where
one format stores it ``[out, in]`` and the other does not: the numbers are copied bit for bit. The family is the
Hugging Face config's ``model_type``, or the ``model`` given (a Google config names none; BERT by default). The
config (``bert_config.json`` <-> ``config.json``, with the family's ``model_type`` and ``architectures``),
``vocab.txt`` and the tokenizer's case (``tokenizer_config.json``) are written beside the weights.

The config is read and checked first; then every variable's name and shape (from the file's header, nothing read
yet) against the sizes it gives; only then is each variable read, one at a time. The embeddings and every encoder
block must be there; the pre-training heads (pooler, MLM, NSP, ELECTRA's discriminator) are converted when
present and listed when absent. Weights of a checkpoint of another family are refused with the family they look like.

T5's, mT5's and GPT-2's folders (`kerasbert.weights.hf_generative`) cross the same way, their config written in the
destination's own keys: transformers' (``d_model``, ``n_embd``, ...) or bert4keras's (``hidden_size``, ...). The
weights cross unchanged, and the config says whose numbers a model of them computes: bert4keras's T5 adds a position
bias to its cross-attention, where transformers' does not.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil

import numpy as np

from kerasbert import layer_names as ln
from kerasbert.choices import CHECKPOINT_FORMATS
from kerasbert.errors import CheckpointError, ConfigError, fail
from kerasbert.files import TEMPORARY, atomic_path, publish_folder
from kerasbert.log import logger
from kerasbert.modeling import families
from kerasbert.modeling.config import BertConfig
from kerasbert.modeling.families import Family
from kerasbert.weights.checkpoint import checkpoint_format
from kerasbert.weights.family_names import family_shapes
from kerasbert.weights.google import TFCheckpoint, google_format, resolve_checkpoint, write_google_tensors
from kerasbert.weights.hf import SAFETENSORS, hf_family_config, hf_format, open_hf
from kerasbert.weights.hf_generative import generative_shapes, google_config, hf_config
from kerasbert.weights.names import OPTIONAL_LAYERS
from kerasbert.weights.table import Format, family_hint, listed

CONFIG_FILES = {"google": "bert_config.json", "hf": "config.json"}
TOKENIZER_CONFIG = "tokenizer_config.json"
TOKENIZER_FILES = ("vocab.txt", "spiece.model")  # copied beside the weights: a WordPiece or a SentencePiece vocabulary


def _folder_of(path: str) -> str:
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


def _formats(family: Family) -> dict[str, Format]:
    """The family's formats by name; ALBERT's files hold one block, whether its model shares it or not."""
    family = families.get("albert") if family.checkpoint == "albert" else family
    return dict(zip(CHECKPOINT_FORMATS, (google_format(family), hf_format(family)), strict=True))


def _config(src_folder: str, to: str, model: str | None) -> tuple[dict, BertConfig, Family]:
    """The source's config, with the keys the destination format expects, its checked `BertConfig` and its family
    (``model``, else the config's ``model_type``, else BERT)."""
    path = next((os.path.join(src_folder, name) for name in ("config.json", "bert_config.json")
                 if os.path.isfile(os.path.join(src_folder, name))), None)
    if path is None:
        raise fail(ConfigError, src_folder, "a bert_config.json or config.json beside the weights", "neither")
    config = BertConfig.from_json(path)  # JSON, an object, BERT's keys, sane sizes: before any weight is read
    family = families.resolve(model, config)
    if family.architecture != "encoder":
        return (hf_config(config, family) if to == "hf" else google_config(config)), config, family
    with open(path, encoding="utf-8-sig") as f:
        values = json.load(f)
    if to == "hf":
        return {**values, **hf_family_config(config, family)}, config, family
    google = {key: value for key, value in values.items() if key not in ("architectures", "model_type")}
    return google, config, family


def _lower_case(folder: str, frm: str) -> bool | None:
    """The tokenizer's case: ``do_lower_case`` of ``tokenizer_config.json``, else the ``lowercase`` of
    ``tokenizer.json``'s BERT normalizer, else, for a Google folder, its name (Google names its releases
    ``cased_...`` and ``uncased_...``); None when none of them says."""
    for name, read in ((TOKENIZER_CONFIG, lambda v: v.get("do_lower_case")),
                       ("tokenizer.json", lambda v: (v.get("normalizer") or {}).get("lowercase"))):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as f:
                    value = read(json.load(f))
            except (ValueError, AttributeError, RecursionError):
                raise fail(ConfigError, path, "a JSON object", "something else") from None
            if value is not None and not isinstance(value, bool):
                raise fail(ConfigError, f"{path}: do_lower_case", "true or false", repr(value))
            if value is not None:
                return value
    if frm == "google":
        base = os.path.basename(os.path.abspath(folder)).lower()
        if re.search(r"(^|[_-])uncased([_-]|$)", base):
            return True
        if re.search(r"(^|[_-])cased([_-]|$)", base):
            return False
    return None


def _tokenizer_config(folder: str, lower: bool | None) -> dict | None:
    """The ``tokenizer_config.json`` to write: the source's (if any) with ``do_lower_case`` set."""
    if lower is None:
        return None
    values = {"tokenizer_class": "BertTokenizer"}
    path = os.path.join(folder, TOKENIZER_CONFIG)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    return {**values, "do_lower_case": lower}


def _file_shape(shape: tuple[int, ...], parts: int, transposed: bool) -> tuple[int, ...]:
    """A kerasbert weight's shape as one of its ``parts`` file variables has it."""
    shape = (*shape[:-1], shape[-1] // parts)
    return shape[::-1] if transposed else shape


def _rows(layer: str, src: list[str], dst: list[str], shape: tuple[int, ...], frm: Format) -> list:
    """The plan's rows of one weight (``shape`` in kerasbert's layout): each source name with its destination name;
    where one format fuses what the other keeps apart (GPT-2's ``c_attn``, Google's query, key and value), each part
    with ``("join" | "split", index, count)``."""
    if len(src) == len(dst):
        return [(layer, a, b, _file_shape(shape, len(src), frm.transposed(a)), None)
                for a, b in zip(src, dst, strict=True)]
    if len(dst) == 1:
        return [(layer, a, dst[0], _file_shape(shape, len(src), frm.transposed(a)), ("join", k, len(src)))
                for k, a in enumerate(src)]
    return [(layer, src[0], b, _file_shape(shape, 1, frm.transposed(src[0])), ("split", k, len(dst)))
            for k, b in enumerate(dst)]


def _plan(frm: Format, to: Format, config: BertConfig) -> list[tuple]:
    """(layer, source name, destination name, source shape, part) of every variable both formats know, ``{i}``
    expanded to the config's layers (`_rows`)."""
    family = families.get(frm.family)
    shapes = family_shapes(family, config) if family.architecture == "encoder" else generative_shapes(
        family, config, frm.names)
    plan = []
    for key, names in frm.names.items():
        if key not in to.names or key not in shapes or (key[0] == ln.EMBEDDING_SEGMENT and not config.type_vocab_size):
            continue
        src = names if isinstance(names, tuple) else (names,)
        dst = to.names[key] if isinstance(to.names[key], tuple) else (to.names[key],)
        for i in range(config.num_hidden_layers) if ln.BLOCK_KEY in key[0] else [""]:
            plan += _rows(key[0].format(i=i), [a.format(i=i) for a in src], [b.format(i=i) for b in dst],
                          shapes[key], frm)
    return plan


def _checked_plan(source, plan: list, frm: Format) -> list:
    """The rows of ``plan`` the source holds, each shape checked; a CheckpointError for a file without the
    family's variables, a variable of another shape, or a missing embedding or encoder variable."""
    available, config_file = source.shapes(), frm.config_file
    present = [row for row in plan if row[1] in available]
    if not present:
        raise fail(CheckpointError, source.path, f"{frm.family} variables ({plan[0][1]}, ...)",
                   f"none among its {len(available)} variables",
                   family_hint(available, frm) or f"is it a {frm.family} checkpoint?")
    for layer, name, _, shape, _ in present:
        if tuple(available[name]) != shape:
            raise fail(CheckpointError, f"{name} in {source.path}", f"shape {list(shape)} (from {config_file})",
                       f"{list(available[name])}", f"{layer}'s sizes in {config_file} do not match the weights")
    missing = [name for layer, name, *_ in plan if name not in available and layer not in OPTIONAL_LAYERS]
    if missing:
        other = family_hint(available, frm)
        raise fail(CheckpointError, source.path, "every embedding and encoder variable", listed(missing),
                   "the checkpoint is incomplete" + (f", or {other}" if other else "") + "; nothing was written")
    absent = sorted({layer for layer, name, *_ in plan if name not in available})
    if absent:
        logger.info("%s has no %s: not converted", source.path, ", ".join(absent))
    return present


def _tensors(source, present: list, frm: Format, to: Format, dst_format: str) -> dict[str, np.ndarray]:
    """Read, check and lay out each variable of ``present`` for the destination: in kerasbert's layout (kernels
    ``[in, out]``) a fused variable is split and parts are joined on the last axis."""
    tensors, joins, last = {}, {}, (None, None)
    for _, a, b, shape, part in present:
        value = last[1] if last[0] == a else source.get(a)  # a fused variable's parts follow one another
        last = (a, value)
        if value.dtype.kind not in "fiu" or tuple(value.shape) != shape:  # numbers cross as they are; text cannot
            found = f"dtype {value.dtype.name}" if value.dtype.kind not in "fiu" else f"shape {value.shape}"
            raise fail(CheckpointError, f"{a} in {source.path}", f"numbers of shape {shape}", found,
                       "the file is not a BERT checkpoint, or was written wrongly")
        if dst_format == "google" and value.dtype.kind == "f":
            value = value.astype(np.float32)  # Google checkpoints hold float32, as its readers expect
        value = value.T if frm.transposed(a) else value
        if part is not None and part[0] == "split":
            value = np.split(value, part[2], axis=-1)[part[1]]
        elif part is not None:
            joins.setdefault(b, [None] * part[2])[part[1]] = value
            if any(piece is None for piece in joins[b]):
                continue
            value = np.concatenate(joins.pop(b), axis=-1)
        tensors[b] = np.ascontiguousarray(value.T if to.transposed(b) else value)
    return tensors


def _check_destination(dst: str, force: bool) -> None:
    """Refuse a destination that is a file, under a file, or a folder with files (unless ``force``); remove the
    staging folders a killed conversion into it left beside it."""
    if os.path.exists(dst) and not os.path.isdir(dst):
        raise fail(CheckpointError, dst, "an output folder", "a file", "pass a folder path")
    parent = os.path.dirname(os.path.abspath(dst))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise fail(CheckpointError, dst, "an output folder", f"a path under the file {parent}", "pass a folder path")
    if os.path.isdir(dst) and os.listdir(dst) and not force:
        raise fail(CheckpointError, dst, "a new or empty output folder", "a folder with files",
                   "pass --force to replace them")
    beside = os.path.dirname(os.path.abspath(dst))
    for stale in glob.glob(os.path.join(glob.escape(beside), f"{TEMPORARY}*-{glob.escape(os.path.basename(dst))}")):
        if os.path.isdir(stale):
            shutil.rmtree(stale, ignore_errors=True)
            logger.info("removed %s, left by a conversion that did not finish", stale)


def _write(dst: str, to: str, tensors: dict, config: dict, src_folder: str, tokenizer: dict | None) -> None:
    """The destination folder: weights, config, the vocabulary (`TOKENIZER_FILES`) and tokenizer_config.json,
    published whole."""
    with publish_folder(dst, last=CONFIG_FILES[to]) as staging:
        if to == "hf":
            from safetensors.numpy import save_file

            with atomic_path(os.path.join(staging, SAFETENSORS)) as tmp:  # the mode every kerasbert file gets
                save_file(tensors, tmp, metadata={"format": "pt"})
        else:
            write_google_tensors(tensors, os.path.join(staging, "bert_model.ckpt"))
        with open(os.path.join(staging, CONFIG_FILES[to]), "w", encoding="utf-8") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if tokenizer is not None:
            with open(os.path.join(staging, TOKENIZER_CONFIG), "w", encoding="utf-8") as f:
                f.write(json.dumps(tokenizer, indent=2, sort_keys=True) + "\n")
        for name in TOKENIZER_FILES:
            if os.path.isfile(os.path.join(src_folder, name)):
                shutil.copyfile(os.path.join(src_folder, name), os.path.join(staging, name))


def convert_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None, *,
                       model: str | None = None, force: bool = False) -> str:
    """Convert ``src`` (a Google or Hugging Face checkpoint of a family) into the folder ``dst``, in the other
    format.

    Args:
        src: str. a Google checkpoint (prefix, folder, ``.index``) or Hugging Face weights (folder or file).
        dst: str. the output folder; it must not hold files unless ``force``.
        to: str or None. ``"google"`` or ``"hf"``; None converts to the format ``src`` is not in.
        model: str or None. the family (`kerasbert.modeling.families`: ``bert``, ``albert``, ``nezha``,
            ``electra``, ``roformer``, ...); None: the ``model_type`` of a Hugging Face config, else ``bert``.
        force: bool. write into a folder that already holds files (they are replaced).

    Returns:
        The path of the weights written (the Google prefix, or ``model.safetensors``).

    Raises:
        ConfigError: the config beside the weights is missing, not JSON, not an object, or not a sane BERT config;
            or its ``model_type`` is not the family ``model`` names.
        CheckpointError: the weights hold no variable of the family, lack an embedding or encoder variable, or one
            of another shape or of no float type; or ``dst`` is a file, under a file, or a folder with files.

    Example:
    >>> import os, tempfile
    >>> from kerasbert import BertConfig, build_transformer_model, save_google_checkpoint
    >>> folder = tempfile.mkdtemp()
    >>> prefix = save_google_checkpoint(build_transformer_model("tiny", verbose=False), folder)
    >>> _ = BertConfig.from_preset("tiny").to_json(os.path.join(folder, "bert_config.json"))
    >>> os.path.basename(convert_checkpoint(prefix, os.path.join(folder, "hf")))
    'model.safetensors'
    >>> json.load(open(os.path.join(folder, "hf", "config.json")))["architectures"]
    ['BertForPreTraining']
    """
    src, dst = os.fspath(src), os.fspath(dst)
    frm = checkpoint_format(src)
    to = to or ("hf" if frm == "google" else "google")
    if to not in CHECKPOINT_FORMATS:
        raise fail(ConfigError, "--to", " or ".join(CHECKPOINT_FORMATS), repr(to))
    _check_destination(dst, force)
    folder = _folder_of(src)
    config, checked, family = _config(folder, to, model)
    formats = _formats(family)
    tokenizer = _tokenizer_config(folder, _lower_case(folder, frm))
    source = open_hf(src, families.get(formats["hf"].family))[0] if frm == "hf" else TFCheckpoint(
        resolve_checkpoint(src))
    present = _checked_plan(source, _plan(formats[frm], formats[to], checked), formats[frm])
    used = {name for _, name, *_ in present}
    unused = [n for n in sorted(source.shapes()) if n not in used and not formats[frm].skip.search(n)]
    if unused:
        logger.info("%d variables have no %s name and are not converted: %s", len(unused), to, ", ".join(unused))
    tensors = _tensors(source, present, formats[frm], formats[to], to)
    _write(dst, to, tensors, config, folder, tokenizer)
    if tokenizer is None:
        logger.info("%s does not say the tokenizer's case: no %s written (kerasbert's Tokenizer then lower-cases)",
                    folder, TOKENIZER_CONFIG)
    weights = os.path.join(dst, SAFETENSORS if to == "hf" else "bert_model.ckpt")
    logger.info("converted %s (%s %s, %d variables) to %s (%s)", src, family.name, frm, len(tensors), weights, to)
    return weights
