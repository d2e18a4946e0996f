"""Convert a BERT checkpoint between Google's TF1 format and Hugging Face's, without building a model.

Both formats are tables from the same (layer, weight) keys (`kerasbert.weights.google.GOOGLE`,
`kerasbert.weights.hf.HF`), so a conversion renames each variable through its key and transposes it where one
format stores it ``[out, in]`` and the other does not: the numbers are copied bit for bit. The config
(``bert_config.json`` <-> ``config.json``) and ``vocab.txt`` are written beside the weights.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np

from kerasbert.errors import CheckpointError, ConfigError, fail
from kerasbert.files import publish_folder
from kerasbert.log import logger
from kerasbert.weights.checkpoint import checkpoint_format
from kerasbert.weights.google import GOOGLE, TFCheckpoint, resolve_checkpoint, write_google_tensors
from kerasbert.weights.hf import HF, SAFETENSORS, HFCheckpoint
from kerasbert.weights.table import Format

FORMATS = {"google": GOOGLE, "hf": HF}
CONFIG_FILES = {"google": "bert_config.json", "hf": "config.json"}


def _layer_count(names) -> int:
    """How many encoder layers a checkpoint holds, from its names."""
    found = {int(m.group(1)) for name in names if (m := re.search(r"layer[_.](\d+)[/.]", name))}
    return max(found) + 1 if found else 0


def _pairs(src: Format, dst: Format, layers: int) -> list[tuple[str, str]]:
    """(source name, destination name) for every key both tables know, with ``{i}`` expanded."""
    pairs = []
    for key, names in src.names.items():
        if key not in dst.names:
            continue
        src_names = names if isinstance(names, tuple) else (names,)
        dst_names = dst.names[key] if isinstance(dst.names[key], tuple) else (dst.names[key],)
        for i in range(layers) if "{i}" in key[0] else [""]:
            pairs.extend((a.format(i=i), b.format(i=i)) for a, b in zip(src_names, dst_names, strict=True))
    return list(dict.fromkeys(pairs))  # CLS-Dense and Tagging-Dense share HF's classifier names


def _folder_of(path: str) -> str:
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))


def _config(src_folder: str, to: str) -> dict:
    """The source's config, with the keys the destination format expects."""
    for name in ("config.json", "bert_config.json"):
        path = os.path.join(src_folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
            break
    else:
        raise fail(ConfigError, src_folder, "a bert_config.json or config.json beside the weights", "neither")
    if config.get("model_type", "bert") != "bert":
        raise fail(ConfigError, f"{path}: model_type", '"bert"', repr(config["model_type"]),
                   "kerasbert converts BERT checkpoints only")
    if to == "hf":
        return {"architectures": ["BertForPreTraining"], "model_type": "bert", **config}
    return {key: value for key, value in config.items() if key not in ("architectures", "model_type")}


def convert_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, to: str | None = None, *,
                       force: bool = False) -> str:
    """Convert ``src`` (a Google or Hugging Face checkpoint) into the folder ``dst``, in the other format.

    Args:
        src: str. a Google checkpoint (prefix, folder, ``.index``) or Hugging Face weights (folder or file).
        dst: str. the output folder; it must not hold files unless ``force``.
        to: str or None. ``"google"`` or ``"hf"``; None converts to the format ``src`` is not in.
        force: bool. write into a folder that already holds files (they are replaced).

    Returns:
        The path of the weights written (the Google prefix, or ``model.safetensors``).

    Example:
    >>> import os, tempfile
    >>> from kerasbert import build_transformer_model, save_google_checkpoint
    >>> folder = tempfile.mkdtemp()
    >>> prefix = save_google_checkpoint(build_transformer_model("tiny", verbose=False), folder)
    >>> _ = open(os.path.join(folder, "bert_config.json"), "w").write('{"vocab_size": 128}')
    >>> os.path.basename(convert_checkpoint(prefix, os.path.join(folder, "hf")))
    'model.safetensors'
    """
    src, dst = os.fspath(src), os.fspath(dst)
    frm = checkpoint_format(src)
    to = to or ("hf" if frm == "google" else "google")
    if to not in FORMATS:
        raise fail(ConfigError, "--to", "google or hf", repr(to))
    if os.path.isdir(dst) and os.listdir(dst) and not force:
        raise fail(CheckpointError, dst, "a new or empty output folder", "a folder with files",
                   "pass --force to replace them")
    source = HFCheckpoint(src) if frm == "hf" else TFCheckpoint(resolve_checkpoint(src))
    available = source.shapes()
    pairs = [(a, b) for a, b in _pairs(FORMATS[frm], FORMATS[to], _layer_count(available)) if a in available]
    tensors = {}
    for a, b in pairs:
        value = source.get(a)
        if to == "google" and value.dtype.kind == "f":
            value = value.astype(np.float32)  # Google checkpoints hold float32, as its readers expect
        tensors[b] = np.ascontiguousarray(value.T if FORMATS[frm].transposed(a) != FORMATS[to].transposed(b) else value)
    used = {a for a, _ in pairs}
    unused = [n for n in sorted(available) if n not in used and not FORMATS[frm].skip.search(n)]
    if unused:
        logger.info("%d variables have no %s name and are not converted: %s", len(unused), to, ", ".join(unused))
    config = _config(_folder_of(src), to)
    vocab = os.path.join(_folder_of(src), "vocab.txt")
    with publish_folder(dst, last=CONFIG_FILES[to]) as staging:
        if to == "hf":
            from safetensors.numpy import save_file

            save_file(tensors, os.path.join(staging, SAFETENSORS), metadata={"format": "pt"})
        else:
            write_google_tensors(tensors, os.path.join(staging, "bert_model.ckpt"))
        with open(os.path.join(staging, CONFIG_FILES[to]), "w", encoding="utf-8") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if os.path.isfile(vocab):
            shutil.copyfile(vocab, os.path.join(staging, "vocab.txt"))
    weights = os.path.join(dst, SAFETENSORS if to == "hf" else "bert_model.ckpt")
    logger.info("converted %s (%s, %d variables) to %s (%s)", src, frm, len(tensors), weights, to)
    return weights
