"""Hugging Face checkpoints <-> a kerasbert model: the `HF` format of `kerasbert.weights.table`, and each
family's (`hf_format`: ALBERT's layer group, ELECTRA's and RoFormer's ``embeddings_project``, ...).

A Hugging Face folder holds ``config.json``, ``vocab.txt`` and the weights as ``model.safetensors`` (or
shards listed in ``model.safetensors.index.json``), or, in older folders, ``pytorch_model.bin`` (or its
sharded index). Names follow ``BertForPreTraining``: ``bert.embeddings...``, ``bert.encoder.layer.{i}...``,
``bert.pooler...``, ``cls.predictions...``, ``cls.seq_relationship...``; a ``BertModel`` file has the same names
without ``bert.``, and old files call the LayerNorm weights ``gamma``/``beta``. The other families put their encoder
under their ``model_type`` (`kerasbert.weights.family_names`); T5's, mT5's and GPT-2's folders hold transformers'
names of those models (`kerasbert.weights.hf_generative`). Linear weights are stored ``[out, in]``. A
fine-tuned ``classifier`` (BertForSequenceClassification / BertForTokenClassification) fills ``CLS-Dense`` or
``Tagging-Dense`` when the sizes match.

Safetensors files are read with the ``safetensors`` package's NumPy API and ``pytorch_model.bin`` with
`kerasbert.weights.torch_pickle`, which runs no code from the file: torch is never needed.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re

import numpy as np

from kerasbert import layer_names as ln
from kerasbert.errors import CheckpointError, fail
from kerasbert.log import logger
from kerasbert.modeling import families
from kerasbert.modeling.config import BertConfig, config_of
from kerasbert.modeling.families import Family, model_type
from kerasbert.modeling.hf_configs import HF_ACTIVATIONS
from kerasbert.weights.deberta_names import RENAMES as DEBERTA_RENAMES
from kerasbert.weights.family_names import ARCHITECTURES, hf_names
from kerasbert.weights.names import CLASSIFIERS, HF_NAMES
from kerasbert.weights.table import Format


def _transposed(name: str) -> bool:
    """Whether HF stores ``name`` ``[out, in]``: every linear weight, not the embedding tables and norms."""
    return name.endswith(".weight") and not name.endswith("_embeddings.weight") and "LayerNorm" not in name \
        and "layer_norm" not in name


HF = Format(
    name="hf",
    config_file="config.json",
    names=HF_NAMES,
    transposed=_transposed,
    vocab_rows=frozenset({"bert.embeddings.word_embeddings.weight", "cls.predictions.bias"}),
    # buffers (positions, RoFormer's sinusoids, NEZHA's relative encodings), and the MLM decoder, whose weight is
    # the word embeddings and whose bias is the MLM bias
    skip=re.compile(r"position_ids$|token_type_ids$|^(cls\.)?predictions\.decoder\.(weight|bias)$|"
                    r"\.embed_positions\.weight$|\.relative_positions_encoding\.positions_encoding$"),
    hints={"word_embeddings": "vocab_size", "predictions.bias": "vocab_size",
           "position_embeddings": "max_position_embeddings", "token_type_embeddings": "type_vocab_size",
           "intermediate.": "intermediate_size", ".output.dense.weight": "intermediate_size"},
    optional=CLASSIFIERS,
)

SAFETENSORS, SAFETENSORS_INDEX = "model.safetensors", "model.safetensors.index.json"
TORCH, TORCH_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
WEIGHT_FILES = (SAFETENSORS, SAFETENSORS_INDEX, TORCH, TORCH_INDEX)  # in order of preference
_ENCODER_PARTS = ("embeddings.", "embeddings_project.", "encoder.", "pooler.")
# model_type -> the prefix of the names a bare model's file lacks, and the names that lack it
_BARE = {"gpt2": ("transformer", ("wte.", "wpe.", "h.", "ln_f.")), "t5": ("", ()), "mt5": ("", ()),
         "xlm-roberta": ("roberta", _ENCODER_PARTS), "distilbert": ("distilbert", ("embeddings.", "transformer.")),
         "deberta-v2": ("deberta", ("embeddings.", "encoder.")),
         "modernbert": ("model", ("embeddings.", "layers.", "final_norm."))}
# model_type -> (pattern, replacement) pairs: other spellings of a family's names, read as its table's
_RENAMES = {"deberta-v2": DEBERTA_RENAMES}


def canonical_name(name: str, kind: str = "bert") -> str:
    """A file's name as the tables spell it: the ``model_type`` ``kind`` (``bert.``, ``albert.``, ...) before the
    encoder's names of a bare model (``BertModel``, ``AlbertModel``), LayerNorm ``weight``/``bias``. NEZHA's
    encoder is read under ``bert.`` too, as ports of its original release name it.

    Example:
    >>> canonical_name("encoder.layer.0.output.LayerNorm.gamma")
    'bert.encoder.layer.0.output.LayerNorm.weight'
    >>> canonical_name("pooler.weight", "albert"), canonical_name("bert.pooler.dense.bias", "nezha")
    ('albert.pooler.weight', 'nezha.pooler.dense.bias')
    >>> canonical_name("h.0.attn.c_attn.weight", "gpt2"), canonical_name("encoder.final_layer_norm.weight", "t5")
    ('transformer.h.0.attn.c_attn.weight', 'encoder.final_layer_norm.weight')
    """
    prefix, parts = _BARE.get(kind, (kind, _ENCODER_PARTS))
    if parts and name.startswith(parts):
        name = f"{prefix}.{name}"
    elif kind == "nezha" and name.startswith("bert."):
        name = "nezha." + name[len("bert."):]
    for pattern, replacement in _RENAMES.get(kind, ()):
        name = pattern.sub(replacement, name)
    return re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name))


def _json(path: str, expected: str):
    """The JSON in ``path``; a CheckpointError when it is not JSON (or nests too deep to read)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, RecursionError) as e:
        raise fail(CheckpointError, path, expected, f"{type(e).__name__}: {str(e)[:80]}") from None


def _shards(path: str) -> list[str]:
    """The shard files a sharded index lists, in order, each inside the index's folder."""
    expected = 'JSON with a "weight_map" from tensor names to shard files'
    weight_map = _json(path, expected)
    weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        found = "an empty weight_map" if weight_map == {} else f"a weight_map of type {type(weight_map).__name__}"
        raise fail(CheckpointError, path, expected, found, "download the checkpoint again")
    wrong = next(((k, v) for k, v in weight_map.items() if not isinstance(v, str) or not v), None)
    if wrong is not None:
        raise fail(CheckpointError, f"{path}: weight_map", "shard file names", f"{wrong[1]!r:.40} for {wrong[0]!r:.60}",
                   "download the checkpoint again")
    folder = os.path.realpath(os.path.dirname(path))
    shards = []
    for shard in dict.fromkeys(weight_map.values()):
        full = os.path.realpath(os.path.join(folder, shard))
        if os.path.isabs(shard) or os.path.dirname(full) != folder:
            raise fail(CheckpointError, f"{path}: weight_map", "shard files in the folder of the index",
                       f"{shard!r:.80}", "refusing to read a file outside the checkpoint's folder")
        if not os.path.isfile(full):
            raise fail(CheckpointError, os.path.join(os.path.dirname(path), shard),
                       f"a shard listed in {os.path.basename(path)}", "no such file", "download the checkpoint again")
        shards.append(os.path.join(os.path.dirname(path), shard))
    return shards


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
    return _shards(path) if path.endswith(".index.json") else [path]


def is_hf_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` names Hugging Face weights (a folder holding them, or one of their files)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return any(os.path.isfile(os.path.join(path, name)) for name in WEIGHT_FILES)
    return path.endswith((".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json"))


class HFCheckpoint:
    """Hugging Face weights as a `kerasbert.weights.table.Source`: names made canonical, shards merged.

    Opening reads the names and shapes only (safetensors headers, the pickles of ``.bin`` files); `get` reads one
    tensor's bytes. ``kind`` is the ``model_type`` whose prefix a bare model's names get (`canonical_name`).
    """

    def __init__(self, path: str | os.PathLike, kind: str = "bert"):
        from kerasbert.weights.torch_pickle import TorchFile

        self.path = os.fspath(path)
        self._where: dict[str, tuple[str, str]] = {}  # canonical name -> (file, name in the file)
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._files: dict[str, SafetensorsFile | TorchFile] = {}
        for file in weight_files(self.path):
            self._files[file] = SafetensorsFile(file) if file.endswith(".safetensors") else TorchFile(file)
            for name, shape in self._files[file].shapes().items():
                key = canonical_name(name, kind)
                if key not in self._where or name == key:
                    self._where[key], self._shapes[key] = (file, name), shape

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self._shapes)

    def file_name(self, name: str) -> str:
        """The name the file stores ``name`` under (``pooler.dense.weight`` for ``bert.pooler.dense.weight``)."""
        return self._where[name][1]

    def get(self, name: str) -> np.ndarray:
        file, stored = self._where[name]
        return self._files[file].get(stored)


# the architectures whose blocks are not BERT's, and the encoder families whose transformers names are not BERT's
# -> the module of their Hugging Face tables, which gives ``hf_format(family, base)`` (the format over `HF`'s
# reading rules) and ``hf_config(config, family)`` (the config.json)
ARCHITECTURE_TABLES = {"gpt": "kerasbert.weights.hf_generative", "t5": "kerasbert.weights.hf_generative",
                       "deberta": "kerasbert.weights.deberta_names", "modernbert": "kerasbert.weights.modernbert_names",
                       **dict.fromkeys(("roberta_en", "xlm_roberta", "distilbert"), "kerasbert.weights.hf_encoders")}


def _own_tables(family: Family) -> bool:
    """Whether a module of `ARCHITECTURE_TABLES` holds the family's Hugging Face tables (its family's row, else
    its architecture's; BERT's encoder families read `kerasbert.weights.family_names`)."""
    return family.name in ARCHITECTURE_TABLES or family.architecture != "encoder"


def _tables(family: Family):
    """The module of the family's own Hugging Face tables (`ARCHITECTURE_TABLES`)."""
    return importlib.import_module(ARCHITECTURE_TABLES.get(family.name) or ARCHITECTURE_TABLES[family.architecture])


def hf_format(family: Family) -> Format:
    """The Hugging Face format of a family's checkpoints (`kerasbert.weights.family_names.hf_names`).

    Example:
    >>> sorted(hf_format(families.get("albert")).vocab_rows)
    ['albert.embeddings.word_embeddings.weight', 'predictions.bias']
    """
    if _own_tables(family):
        return _tables(family).hf_format(family, HF)
    names = hf_names(family)
    rows = {names.get((ln.EMBEDDING_TOKEN, "embeddings")), names.get((ln.MLM_BIAS, "bias"))} - {None}
    return dataclasses.replace(HF, names=names, family=family.name, vocab_rows=frozenset(rows))


_OTHER_GROUPS = re.compile(r"\.albert_layer_groups\.(?!0\.)\d+\.|\.albert_layers\.(?!0\.)\d+\.")


def open_hf(path: str | os.PathLike, family: Family) -> tuple[HFCheckpoint, Format]:
    """Hugging Face weights opened for a family: the source and the family's format. A CheckpointError for an
    ALBERT file of more than one layer (``num_hidden_groups`` or ``inner_group_num`` above 1), which no bert4keras
    family builds."""
    fmt = hf_format(family)
    source = HFCheckpoint(path, model_type(family))
    other = next((name for name in sorted(source.shapes()) if _OTHER_GROUPS.search(name)), None)
    if other is not None:
        raise fail(CheckpointError, f"{source.file_name(other)} in {source.path}", "one ALBERT layer group "
                   "(albert_layer_groups.0.albert_layers.0)", "another group or layer",
                   "kerasbert builds ALBERT with num_hidden_groups and inner_group_num 1")
    return source, fmt


# safetensors dtype -> NumPy dtype of its little-endian bytes; BF16 and the float8 types are widened to float32
_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
                       "I16": "<i2", "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?",
                       "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
MAX_HEADER = 100_000_000  # bytes of a safetensors header, the format's own limit
MAX_RANK = 8


def _numpy_dtype(name: str) -> np.dtype:
    if name.startswith("float8"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


class SafetensorsFile:
    """A safetensors file opened for reading: its header checked at once, a tensor's bytes read by `get`."""

    def __init__(self, path: str):
        self.path = path
        self.tensors, self.start = _safetensors_header(path)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(info["shape"]) for name, info in self.tensors.items()}

    def get(self, name: str) -> np.ndarray:
        """One tensor, native byte order; BF16, F8_E4M3 and F8_E5M2 as float32 (exactly)."""
        info = self.tensors[name]
        begin, end = info["data_offsets"]
        data = bytearray(end - begin)
        with open(self.path, "rb") as f:
            f.seek(self.start + begin)
            if f.readinto(data) != len(data):
                raise fail(CheckpointError, self.path, f"the {len(data)} bytes of {name}", "the end of the file",
                           "the file is truncated: download it again")
        array = np.frombuffer(data, _numpy_dtype(_SAFETENSORS_DTYPES[info["dtype"]])).reshape(info["shape"])
        if info["dtype"] == "BF16":  # NumPy has no bfloat16: its 16 bits are the upper half of a float32
            return (array.astype(np.uint32) << 16).view(np.float32)
        if info["dtype"].startswith("F8_"):
            return array.astype(np.float32)
        return array.astype(array.dtype.newbyteorder("="), copy=False)


def _checked_entry(info) -> str:
    """What is wrong with one tensor entry of a safetensors header, or "" when nothing is."""
    if not isinstance(info, dict):
        return f"an entry of type {type(info).__name__}"
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in _SAFETENSORS_DTYPES:
        return f"dtype {dtype!r:.40}, not one of {', '.join(_SAFETENSORS_DTYPES)}"
    if not (isinstance(shape, list) and len(shape) <= MAX_RANK
            and all(type(n) is int and 0 <= n < 1 << 40 for n in shape)):
        return f"shape {shape!r:.60} (at most {MAX_RANK} sizes, each a natural number)"
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(n) is int for n in offsets)
            and 0 <= offsets[0] <= offsets[1]):
        return f"data_offsets {offsets!r:.60}, not [begin, end] as two integers"
    size = int(np.prod(shape, dtype=object)) * _numpy_dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
    if offsets[1] - offsets[0] != size:
        return f"data_offsets {offsets} spanning {offsets[1] - offsets[0]} bytes for {size} bytes of {dtype} {shape}"
    return ""


def _safetensors_header(file: str) -> tuple[dict[str, dict], int]:
    """The tensors a safetensors file declares (name -> dtype, shape, offsets), each entry checked and the data
    checked against the file's size, and where their data starts."""
    size = os.path.getsize(file)
    with open(file, "rb") as f:
        head = f.read(8)
        length = int.from_bytes(head, "little") if len(head) == 8 else -1
        try:
            header = json.loads(f.read(length)) if 0 < length <= min(size - 8, MAX_HEADER) else None
        except (ValueError, RecursionError):
            header = None
    if not isinstance(header, dict):
        raise fail(CheckpointError, file, "a safetensors file (an 8-byte length, a JSON header, the data)",
                   f"{size} bytes that are not one", "download the file again")
    tensors = {name: info for name, info in header.items() if name != "__metadata__"}
    for name, info in tensors.items():
        wrong = _checked_entry(info)
        if wrong:
            raise fail(CheckpointError, f"{name} in {file}", "a safetensors entry: a dtype, a shape and "
                       "data_offsets [begin, end]", wrong, "the file is damaged, or written by something else")
    _check_disjoint(file, tensors)
    end = max((info["data_offsets"][1] for info in tensors.values()), default=0)
    if 8 + length + end > size:
        raise fail(CheckpointError, file, f"{8 + length + end} bytes, as its header declares", f"{size} bytes",
                   "the file is truncated: download it again")
    return tensors, 8 + length


def _check_disjoint(file: str, tensors: dict[str, dict]) -> None:
    """A CheckpointError unless the tensors' data ranges are disjoint: two tensors sharing bytes would load as
    views of one another's data. An empty tensor holds no bytes and overlaps nothing."""
    spans = sorted((info["data_offsets"][0], info["data_offsets"][1], name) for name, info in tensors.items()
                   if info["data_offsets"][0] < info["data_offsets"][1])
    reach, holder = 0, ""  # the furthest end so far, and whose
    for begin, end, name in spans:
        if begin < reach:
            first = tensors[holder]["data_offsets"]
            raise fail(CheckpointError, file, "tensors whose data_offsets ranges do not overlap",
                       f"{holder} at {first} and {name} at [{begin}, {end}] sharing bytes",
                       "the file is damaged, or written by something else: download it again")
        if end > reach:
            reach, holder = end, name


def hf_family_config(config: BertConfig, family: Family) -> dict:
    """The ``config.json`` keys that say the family to transformers and keras-hub: ``model_type``,
    ``architectures``, and the keys their configs of the family read without a default that fits (ALBERT's and
    ELECTRA's ``embedding_size``, ALBERT's one layer group, NEZHA's ``max_relative_position``).

    Example:
    >>> cfg = BertConfig.from_preset("tiny").replace(embedding_size=16)
    >>> sorted(hf_family_config(cfg, families.get("albert")).items())[2:]
    [('inner_group_num', 1), ('model_type', 'albert'), ('num_hidden_groups', 1)]
    """
    kind = model_type(family)
    values = {"architectures": [ARCHITECTURES[kind]], "model_type": kind}
    if kind != "bert":
        values["embedding_size"] = config.embedding_width
    if kind == "albert":
        values.update(num_hidden_groups=1, inner_group_num=1)
    if kind == "nezha":
        values["max_relative_position"] = config.max_relative_position
    return values


def hf_config_dict(model) -> dict:
    """A Hugging Face ``config.json`` dict of the model's config (`kerasbert.config_of`), with HF's activation
    names and the keys of its family (`hf_family_config`).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> config = hf_config_dict(build_transformer_model("tiny", verbose=False))
    >>> config["model_type"], config["vocab_size"], config["num_hidden_layers"], config["num_attention_heads"]
    ('bert', 128, 2, 2)
    >>> hf_config_dict(build_transformer_model("tiny", model="electra", verbose=False))["architectures"]
    ['ElectraForPreTraining']
    """
    config, family = config_of(model), families.of_model(model)
    if _own_tables(family):
        return _tables(family).hf_config(config, family)
    values = {"pad_token_id": 0, **config.to_dict()}
    values["hidden_act"] = HF_ACTIVATIONS[config.activation]
    return {**values, **hf_family_config(config, family)}  # the names save_hf writes


def save_hf_checkpoint(model, folder: str | os.PathLike, *, config: dict | None = None,
                       vocab: str | os.PathLike | None = None) -> str:
    """Write the model's weights as a Hugging Face folder: ``config.json``, ``model.safetensors``, ``vocab.txt``.

    Names are those of the family's transformers model (``BertForPreTraining``, ``AlbertForPreTraining``,
    ``ElectraForPreTraining``, ``NezhaForPreTraining``, ``RoFormerForMaskedLM``, ``T5ForConditionalGeneration``,
    ``MT5ForConditionalGeneration``, ``GPT2LMHeadModel``, ``RobertaForMaskedLM``, ``XLMRobertaForMaskedLM``,
    ``DistilBertForMaskedLM``), and ``config.json`` gives its ``model_type`` and
    ``architectures`` (T5's and GPT-2's in transformers' own keys, `kerasbert.weights.hf_generative.hf_config`), so
    transformers, keras-hub's Hugging Face loader (BERT, ALBERT, GPT-2) and kerasbert read the folder. The folder is
    created if needed, and its files appear all at once or not at all (written beside it, then renamed in). An
    ``albert_unshared`` model has no such folder: Hugging Face's ALBERT holds one block; nor has a GPT or GPT2-ML
    model, which transformers lacks.

    Args:
        model: keras.Model. a model with kerasbert's layer names (heads with an HF name are saved too).
        folder: str. the output folder.
        config: dict or None. keys to write over the model's own ``config.json`` (`hf_config_dict`).
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

    from kerasbert.files import atomic_path, publish_folder
    from kerasbert.weights.table import model_tensors

    tensors = model_tensors(model, hf_format(families.of_model(model)))
    config = {**hf_config_dict(model), **(dict(config) if config is not None else {})}
    with publish_folder(folder) as staging:
        with atomic_path(os.path.join(staging, SAFETENSORS)) as tmp:  # the mode every kerasbert file gets
            save_file(tensors, tmp, metadata={"format": "pt"})
        with open(os.path.join(staging, "config.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if vocab is not None:
            with open(vocab, "rb") as src, open(os.path.join(staging, "vocab.txt"), "wb") as dst:
                dst.write(src.read())
    return os.fspath(folder)
