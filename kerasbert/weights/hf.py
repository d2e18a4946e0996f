"""Hugging Face BERT checkpoints <-> a kerasbert model: the `HF` format of `kerasbert.weights.table`.

A Hugging Face folder holds ``config.json``, ``vocab.txt`` and the weights as ``model.safetensors`` (or
shards listed in ``model.safetensors.index.json``), or, in older folders, ``pytorch_model.bin`` (or its
sharded index). Names follow ``BertForPreTraining``: ``bert.embeddings...``, ``bert.encoder.layer.{i}...``,
``bert.pooler...``, ``cls.predictions...``, ``cls.seq_relationship...``; a ``BertModel`` file has the same names
without ``bert.``, and old files call the LayerNorm weights ``gamma``/``beta``. Linear weights are stored
``[out, in]``. A fine-tuned ``classifier`` (BertForSequenceClassification / BertForTokenClassification) fills
``CLS-Dense`` or ``Tagging-Dense`` when the sizes match.

Safetensors files are read with the ``safetensors`` package's NumPy API and ``pytorch_model.bin`` with
`kerasbert.weights.torch_pickle`, which runs no code from the file: torch is never needed.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from kerasbert.errors import CheckpointError, fail
from kerasbert.log import logger
from kerasbert.weights.names import HF_NAMES
from kerasbert.weights.table import Format

HF = Format(
    name="hf",
    config_file="config.json",
    names=HF_NAMES,
    transposed=lambda name: name.endswith(".weight") and "embeddings" not in name and "LayerNorm" not in name,
    vocab_rows=frozenset({"bert.embeddings.word_embeddings.weight", "cls.predictions.bias"}),
    # buffers, and the MLM decoder, whose weight is the word embeddings and whose bias is cls.predictions.bias
    skip=re.compile(r"position_ids$|^cls\.predictions\.decoder\.(weight|bias)$"),
    hints={name: f"{key} in config.json does not match this checkpoint" for name, key in (
        ("word_embeddings", "vocab_size"), ("predictions.bias", "vocab_size"),
        ("position_embeddings", "max_position_embeddings"), ("token_type_embeddings", "type_vocab_size"),
        ("intermediate.", "intermediate_size"), (".output.dense.weight", "intermediate_size"))},
    optional=frozenset({"CLS-Dense", "Tagging-Dense"}),
)

SAFETENSORS, SAFETENSORS_INDEX = "model.safetensors", "model.safetensors.index.json"
TORCH, TORCH_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
WEIGHT_FILES = (SAFETENSORS, SAFETENSORS_INDEX, TORCH, TORCH_INDEX)  # in order of preference
_ENCODER_PARTS = ("embeddings.", "encoder.", "pooler.")


def canonical_name(name: str) -> str:
    """A file's name as `HF_NAMES` spells it: ``bert.`` before the encoder's names, LayerNorm ``weight``/``bias``.

    Example:
    >>> canonical_name("encoder.layer.0.output.LayerNorm.gamma")
    'bert.encoder.layer.0.output.LayerNorm.weight'
    """
    if name.startswith(_ENCODER_PARTS):
        name = "bert." + name
    return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name))


def weight_files(path: str) -> list[str]:
    """The weight files of a folder, a file or an index, resolved to the files to read (shards in order)."""
    if os.path.isdir(path):
        present = [name for name in WEIGHT_FILES if os.path.isfile(os.path.join(path, name))]
        if not present:
            raise fail(CheckpointError, path, "Hugging Face weights: " + ", ".join(WEIGHT_FILES)
                       + " (or a Google bert_model.ckpt.index)", "none of them in the folder")
        if present[0] in (SAFETENSORS, SAFETENSORS_INDEX) and {TORCH, TORCH_INDEX} & set(present):
            logger.info("%s holds safetensors and pytorch_model.bin weights: reading %s", path, present[0])
        path = os.path.join(path, present[0])
    if not os.path.isfile(path):
        raise fail(CheckpointError, path, "a weights file", "no such file")
    if not path.endswith(".index.json"):
        return [path]
    try:
        with open(path, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (ValueError, KeyError, TypeError):
        raise fail(CheckpointError, path, 'JSON with a "weight_map" from names to shard files',
                   "something else") from None
    folder = os.path.dirname(path)
    shards = [os.path.join(folder, shard) for shard in dict.fromkeys(weight_map.values())]
    for shard in shards:
        if not os.path.isfile(shard):
            raise fail(CheckpointError, shard, f"a shard listed in {os.path.basename(path)}", "no such file",
                       "download the checkpoint again")
    return shards


def is_hf_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` names Hugging Face weights (a folder holding them, or one of their files)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return any(os.path.isfile(os.path.join(path, name)) for name in WEIGHT_FILES)
    return path.endswith((".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json"))


class HFCheckpoint:
    """Hugging Face weights as a `kerasbert.weights.table.Source`: names made canonical, shards merged."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._where: dict[str, tuple[str, str]] = {}  # canonical name -> (file, name in the file)
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._arrays: dict[str, dict[str, np.ndarray]] = {}  # a .bin file is read whole, once
        self._headers: dict[str, tuple[dict[str, dict], int]] = {}  # a safetensors file's header, read once
        for file in weight_files(self.path):
            for name, shape in self._file_shapes(file).items():
                key = canonical_name(name)
                if key not in self._where or name == key:
                    self._where[key], self._shapes[key] = (file, name), shape

    def _file_shapes(self, file: str) -> dict[str, tuple[int, ...]]:
        if file.endswith(".safetensors"):
            self._headers[file] = _safetensors_header(file)
            tensors, _ = self._headers[file]
            return {name: tuple(info["shape"]) for name, info in tensors.items()}
        return {name: tuple(value.shape) for name, value in self._torch_arrays(file).items()}

    def _torch_arrays(self, file: str) -> dict[str, np.ndarray]:
        if file not in self._arrays:
            from kerasbert.weights.torch_pickle import read_torch_state_dict

            self._arrays[file] = read_torch_state_dict(file)
        return self._arrays[file]

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self._shapes)

    def get(self, name: str) -> np.ndarray:
        file, stored = self._where[name]
        if not file.endswith(".safetensors"):
            return self._torch_arrays(file)[stored]
        tensors, start = self._headers[file]
        if tensors[stored]["dtype"] == "BF16":  # NumPy has no bfloat16: widen to float32, exactly
            return _bfloat16_as_float32(file, start, tensors[stored])
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(file, framework="np") as f:
                return f.get_tensor(stored)
        except (SafetensorError, OSError, ValueError) as e:
            raise fail(CheckpointError, file, f"a readable safetensors file with {stored}", f"{e}") from None


def _bfloat16_as_float32(file: str, start: int, info: dict) -> np.ndarray:
    """A bfloat16 tensor of a safetensors file as float32: its 16 bits are the float32's upper half."""
    begin, end = info["data_offsets"]
    with open(file, "rb") as f:
        f.seek(start + begin)
        halves = np.frombuffer(f.read(end - begin), dtype="<u2")
    return (halves.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])


def _safetensors_header(file: str) -> tuple[dict[str, dict], int]:
    """The tensors a safetensors file declares (name -> dtype, shape, offsets), checked against its size, and
    where their data starts."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        try:
            header = json.loads(f.read(length)) if 0 < length <= size - 8 else None
        except ValueError:
            header = None
    if not isinstance(header, dict):
        raise fail(CheckpointError, file, "a safetensors file (an 8-byte length, a JSON header, the data)",
                   f"{size} bytes that are not one", "download the file again")
    tensors = {name: info for name, info in header.items() if name != "__metadata__"}
    end = max((info["data_offsets"][1] for info in tensors.values()), default=0)
    if 8 + length + end > size:
        raise fail(CheckpointError, file, f"{8 + length + end} bytes, as its header declares", f"{size} bytes",
                   "the file is truncated: download it again")
    return tensors, 8 + length


_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "swish": "silu"}


def config_of(model) -> dict:
    """A Hugging Face ``config.json`` dict read off a kerasbert model's layers (names and sizes).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> config = config_of(build_transformer_model("tiny", verbose=False))
    >>> config["model_type"], config["vocab_size"], config["num_hidden_layers"], config["num_attention_heads"]
    ('bert', 128, 2, 2)
    """
    from kerasbert.weights.table import all_layers

    layers = {layer.name: layer for layer in all_layers(model)}
    if "Embedding-Token" not in layers:
        raise fail(CheckpointError, "model", "layers with bert4keras names (Embedding-Token, ...)", "none")
    blocks = sorted(int(m.group(1)) for name in layers if (m := re.fullmatch(r"Transformer-(\d+)-FeedForward", name)))
    token, position = layers["Embedding-Token"], layers["Embedding-Position"]
    feed_forward = layers["Transformer-0-FeedForward"] if blocks else None
    return {
        "architectures": ["BertForPreTraining"], "model_type": "bert",
        "vocab_size": token.input_dim, "hidden_size": token.output_dim, "num_hidden_layers": len(blocks),
        "num_attention_heads": layers["Transformer-0-MultiHeadSelfAttention"].num_heads if blocks else 1,
        "intermediate_size": feed_forward.units if blocks else 4 * token.output_dim,
        "hidden_act": _HF_ACTIVATIONS.get(feed_forward.activation, feed_forward.activation) if blocks else "gelu",
        "max_position_embeddings": position.input_dim,
        "type_vocab_size": layers["Embedding-Segment"].input_dim if "Embedding-Segment" in layers else 0,
        "layer_norm_eps": float(layers["Embedding-Norm"].epsilon), "initializer_range": 0.02,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "pad_token_id": 0,
    }


def save_hf_checkpoint(model, folder: str | os.PathLike, *, config: dict | None = None,
                       vocab: str | os.PathLike | None = None) -> str:
    """Write the model's BERT weights as a Hugging Face folder: ``config.json``, ``model.safetensors``, ``vocab.txt``.

    Names are ``BertForPreTraining``'s (``bert.`` before the encoder), so transformers' ``BertModel`` and
    ``BertForPreTraining``, keras-hub's Hugging Face loader and kerasbert read the folder. The folder is created
    if needed, and its files appear all at once or not at all (written beside it, then renamed in).

    Args:
        model: keras.Model. a model with kerasbert's layer names (heads with an HF name are saved too).
        folder: str. the output folder.
        config: dict or None. the ``config.json`` to write (a `kerasbert.BertConfig`'s ``to_dict()`` will do);
            None reads the sizes off the model (`config_of`).
        vocab: str or None. a ``vocab.txt`` to copy beside the weights.

    Returns:
        The folder.

    Example:
    >>> import os, tempfile
    >>> from kerasbert import build_transformer_model
    >>> folder = save_hf_checkpoint(build_transformer_model("tiny", verbose=False), tempfile.mkdtemp() + "/hf")
    >>> sorted(os.listdir(folder))
    ['config.json', 'model.safetensors']
    """
    from safetensors.numpy import save_file

    from kerasbert.files import publish_folder
    from kerasbert.weights.table import model_tensors

    tensors = model_tensors(model, HF)
    config = {**config_of(model), **(dict(config) if config is not None else {})}
    config.setdefault("model_type", "bert")
    with publish_folder(folder) as staging:
        save_file(tensors, os.path.join(staging, SAFETENSORS), metadata={"format": "pt"})
        with open(os.path.join(staging, "config.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if vocab is not None:
            with open(vocab, "rb") as src, open(os.path.join(staging, "vocab.txt"), "wb") as dst:
                dst.write(src.read())
    return os.fspath(folder)
