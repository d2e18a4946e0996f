"""Bad inputs of checkpoints, configs and `convert`: rows of the catalogue in ``tests/test_bad_inputs.py``.

It also holds the writers of hostile weight files (``pytorch_model.bin`` pickles written opcode by opcode, raw
safetensors headers), which ``tests/weights/test_torch_pickle.py`` and ``tests/weights/test_convert.py`` use too.
"""

from __future__ import annotations

import functools
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

from kerasbert.errors import CheckpointError, ConfigError, ModelError

import helpers
from bad_input_kit import Case, config, google, hf, text, tiny_load, tiny_model

WORD = "bert.embeddings.word_embeddings.weight"


# --------------------------------------------------------------------------- hostile pytorch_model.bin
def _int(value: int) -> bytes:
    """One integer opcode: BININT when it fits 32 bits, else LONG1 (any size, as pickle writes 2**64)."""
    if 0 <= value < 1 << 31:
        return b"J" + struct.pack("<i", value)
    raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def _text(value: str) -> bytes:  # BINUNICODE
    return b"X" + struct.pack("<I", len(value.encode())) + value.encode()


def _global(dotted: str) -> bytes:  # GLOBAL
    module, _, name = dotted.rpartition(".")
    return b"c" + f"{module}\n{name}\n".encode()


def state_dict_pickle(tensors: dict[str, tuple]) -> bytes:
    """data.pkl of a state dict, written opcode by opcode (protocol 2) as torch does.

    Args:
        tensors: name -> (storage key, storage elements, offset, shape, strides), each a float32 tensor.
    """
    body = b""
    for name, (key, numel, offset, shape, strides) in tensors.items():
        pid = b"(" + _text("storage") + _global("torch.FloatStorage") + _text(key) + _text("cpu") + _int(numel) + b"tQ"
        args = (pid + _int(offset) + b"(" + b"".join(map(_int, shape)) + b"t" + b"(" + b"".join(map(_int, strides))
                + b"t" + b"\x89" + _global("collections.OrderedDict") + b")R")
        body += _text(name) + _global("torch._utils._rebuild_tensor_v2") + b"(" + args + b"tR"
    return b"\x80\x02}(" + body + b"u."


def torch_zip(path: Path, tensors: dict[str, tuple], storages: dict[str, bytes],
              compression: int = zipfile.ZIP_STORED) -> Path:
    """A zip-format ``pytorch_model.bin``: ``archive/data.pkl`` and one ``archive/data/<key>`` entry per storage."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression) as archive:
        archive.writestr("archive/data.pkl", state_dict_pickle(tensors))
        for key, data in storages.items():
            archive.writestr(f"archive/data/{key}", data)
    return path


def hostile_bin(tmp: Path, shape: tuple, strides: tuple, numel: int = 1, name: str = WORD) -> Path:
    """An HF folder whose pytorch_model.bin holds one tensor ``name``: a view of a ``numel``-element storage."""
    text(tmp / "ckpt" / "config.json", json.dumps(helpers.TINY))
    return torch_zip(tmp / "ckpt" / "pytorch_model.bin", {name: ("0", numel, 0, shape, strides)},
                     {"0": bytes(4 * numel)}, zipfile.ZIP_DEFLATED)


# --------------------------------------------------------------------------- hostile safetensors
def raw_safetensors(path: Path, header: dict | str, data: bytes = b"") -> Path:
    """A safetensors file with ``header`` as given (a dict, or JSON text), not checked by any writer."""
    head = (header if isinstance(header, str) else json.dumps(header)).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)
    return path


def hf_header(tmp: Path, entry: dict | str, data: bytes = bytes(16)) -> Path:
    """An HF folder whose model.safetensors declares the word embeddings as ``entry``."""
    text(tmp / "ckpt" / "config.json", json.dumps(helpers.TINY))
    header = entry if isinstance(entry, str) else {WORD: entry}
    return raw_safetensors(tmp / "ckpt" / "model.safetensors", header, data)


def hf_index(tmp: Path, weight_map) -> Path:
    """An HF folder holding model.safetensors.index.json with ``weight_map``, and a valid shard."""
    folder = hf(tmp, name="ckpt")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    return text(folder / "model.safetensors.index.json", json.dumps({"metadata": {}, "weight_map": weight_map}))


# --------------------------------------------------------------------------- rows
def _convert(tmp: Path, src: str = "ckpt", dst: str = "out"):
    from kerasbert.weights.convert import convert_checkpoint

    return convert_checkpoint(tmp / src, tmp / dst)


def _convert_cli(tmp: Path, src: str = "ckpt", dst: str = "out") -> list[str]:
    return ["convert", str(tmp / src), str(tmp / dst)]


def pickle_rows() -> list[Case]:
    views = [("pickle-view-16384x16384-of-1-element", (16384, 16384), (0, 0), ("at most the 1 elements", "268435456")),
             ("pickle-view-2^20-squared-of-1-element", (1 << 20, 1 << 20), (0, 0), ("1099511627776",)),
             ("pickle-stride-2^64", (128, 32), (1 << 64, 1), ("below 2**63", str(1 << 64))),
             ("pickle-size-2^70", (1 << 70, 32), (0, 1), ("below 2**63", str(1 << 70))),
             ("pickle-100-dimensions", (1,) * 100, (1,) * 100, ("at most 8 dimensions", "100 dimensions")),
             ("pickle-broadcast-position_ids-2^20-squared", (1 << 20, 1 << 20), (0, 0), ("position_ids",))]
    rows = []
    for name, shape, strides, words in views:
        key = "bert.embeddings.position_ids" if "position_ids" in name else WORD
        write = functools.partial(lambda tmp, _, shape, strides, key: hostile_bin(tmp, shape, strides, name=key),
                                  shape=shape, strides=strides, key=key)
        rows.append(Case(name, write, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
                         ("pytorch_model.bin", key, *words), ("out",), _convert_cli))
    rows.append(Case("pickle-declared-2048x2048-where-128x32-is-expected",
                     lambda tmp, _: hostile_bin(tmp, (2048, 2048), (2048, 1), numel=2048 * 2048),
                     _load_allowing_missing, CheckpointError,
                     ("Embedding-Token expects [128, 32]", "[2048, 2048]", WORD), ("out",), _convert_cli))
    return rows


def _load_allowing_missing(tmp: Path):
    from kerasbert.weights.checkpoint import load_checkpoint

    return load_checkpoint(tiny_model(), str(tmp / "ckpt"), allow_missing=True, verbose=False)


def safetensors_rows() -> list[Case]:
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    entries = [("safetensors-entry-without-data_offsets", {"dtype": "F32", "shape": [2, 2]}, ("data_offsets", "None")),
               ("safetensors-string-data_offsets", {"dtype": "F32", "shape": [2, 2], "data_offsets": ["0", "16"]},
                ("data_offsets", "'0'")),
               ("safetensors-unknown-dtype", {"dtype": "C64", "shape": [2], "data_offsets": [0, 16]},
                ("'C64'", "F8_E4M3")),
               ("safetensors-shape-of-100-dimensions", {"dtype": "F32", "shape": [1] * 100, "data_offsets": [0, 4]},
                ("at most 8 sizes",)),
               ("safetensors-offsets-not-the-shape", {"dtype": "F32", "shape": [1 << 20], "data_offsets": [0, 16]},
                ("4194304 bytes",))]
    rows = [Case(name, functools.partial(lambda tmp, _, entry: hf_header(tmp, entry), entry=entry),
                 lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("model.safetensors", WORD, *words), ("out",),
                 _convert_cli) for name, entry, words in entries]
    position = "bert.embeddings.position_embeddings.weight"
    overlaps = [("safetensors-two-tensors-at-offset-0", [0, 16], [0, 16], "[0, 16]"),
                ("safetensors-tensors-sharing-half-their-bytes", [0, 16], [8, 24], "[8, 24]")]
    for name, word, other, found in overlaps:
        header = {WORD: {"dtype": "F32", "shape": [2, 2], "data_offsets": word},
                  position: {"dtype": "F32", "shape": [2, 2], "data_offsets": other}}
        rows.append(Case(name, functools.partial(lambda tmp, _, header: hf_header(tmp, json.dumps(header), bytes(24)),
                                                 header=header),
                         lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
                         ("model.safetensors", "do not overlap", WORD, position, found), ("out",), _convert_cli))
    rows.append(Case("safetensors-header-nested-100000-deep", lambda tmp, _: hf_header(tmp, deep),
                     lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError, ("model.safetensors", "not one"), ("out",),
                     _convert_cli))
    maps = [("index-weight_map-a-list", ["model-00001-of-00001.safetensors"], ("weight_map", "list")),
            ("index-weight_map-to-numbers", {WORD: 1}, ("weight_map", "shard file names", "1")),
            ("index-shard-outside-the-folder", {WORD: "../outside.safetensors"}, ("outside", "../outside")),
            ("index-shard-an-absolute-path", {WORD: "/etc/hostname"}, ("outside", "/etc/hostname")),
            ("index-nested-100000-deep", None, ("model.safetensors.index.json", "RecursionError"))]
    for name, weight_map, words in maps:
        def write(tmp, _, weight_map=weight_map):
            index = hf_index(tmp, weight_map or {})
            if weight_map is None:
                index.write_text('{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}")
            text(tmp / "outside.safetensors", b"")
        rows.append(Case(name, write, lambda tmp: tiny_load(tmp / "ckpt"), CheckpointError,
                         ("model.safetensors.index.json", *words), ("out",), _convert_cli))
    return rows


def convert_rows() -> list[Case]:
    def no_bert(tmp, _):
        from safetensors.numpy import save_file

        text(tmp / "ckpt" / "config.json", json.dumps(helpers.TINY))
        save_file({"gpt.wte": np.zeros((4, 4), np.float32)}, str(tmp / "ckpt" / "model.safetensors"))

    def string_variable(tmp, _):
        values = helpers.random_google_weights(helpers.TINY, heads=False)
        values["bert/embeddings/LayerNorm/gamma"] = np.array([b"x"] * 32)
        google(tmp, values=values)

    def missing(tmp, _):
        values = helpers.random_google_weights(helpers.TINY, heads=False)
        del values["bert/encoder/layer_1/output/dense/bias"]
        google(tmp, values=values)

    def config_file(content: str):
        return lambda tmp, _: text(google(tmp) / "bert_config.json", content)

    def destination(tmp, _):
        google(tmp)
        text(tmp / "file.txt", "a file\n")

    def row(name, write, error, words, dst="out"):
        return Case(name, write, functools.partial(_convert, dst=dst), error, words, ("out",),
                    functools.partial(_convert_cli, dst=dst))

    return [
        row("convert-no-bert-variable", no_bert, CheckpointError, ("ckpt", "bert variables",
                                                                   "none among its 1 variables")),
        row("convert-google-string-variable", string_variable, CheckpointError,
            ("bert/embeddings/LayerNorm/gamma", "dtype")),
        row("convert-missing-encoder-variable", missing, CheckpointError,
            ("1 missing", "bert/encoder/layer_1/output/dense/bias", "nothing was written")),
        row("convert-config-not-json", config_file("{not json"), ConfigError, ("bert_config.json", "JSON")),
        row("convert-config-a-list", config_file("[1, 2]"), ConfigError, ("bert_config.json", "JSON object", "list")),
        row("convert-config-too-many-layers", config_file(json.dumps({**helpers.TINY, "num_hidden_layers": 100_000})),
            ConfigError, ("num_hidden_layers", "100000", "would need")),
        row("convert-into-a-file", destination, CheckpointError, ("file.txt", "a file"), dst="file.txt"),
        row("convert-under-a-file", destination, CheckpointError, ("file.txt", "under the file"),
            dst="file.txt/out"),
    ]


def config_rows() -> list[Case]:
    from kerasbert.modeling.config import BertConfig

    summary = lambda tmp: ["summary", str(tmp / "bert_config.json")]  # noqa: E731
    from_json = lambda tmp: BertConfig.from_json(tmp / "bert_config.json")  # noqa: E731
    raw = [("config-hidden_act-a-list", '"hidden_act": ["gelu"]', ("hidden_act", "list")),
           ("config-hidden_act-a-number", '"hidden_act": 1', ("hidden_act", "int")),
           ("config-vocab_size-10^400", '"vocab_size": 1' + "0" * 400, ("vocab_size", "1.00e+400", "would need")),
           ("config-vocab_size-10^12", '"vocab_size": 1000000000000', ("vocab_size", "1000000000000", "TiB")),
           ("config-hidden_size-2^20", f'"hidden_size": {1 << 20}', ("hidden_size", "1048576", "would need")),
           ("config-100000-layers", '"num_hidden_layers": 100000', ("num_hidden_layers", "100000", "would need"))]
    rows = []
    for name, pair, words in raw:
        key = pair.split(":")[0].strip('"')
        body = json.dumps({k: v for k, v in helpers.TINY.items() if k != key})[:-1] + ", " + pair + "}"
        write = functools.partial(lambda tmp, _, body: config(tmp, raw=body), body=body)
        rows.append(Case(name, write, from_json, ConfigError, ("bert_config.json", *words), cli=summary))
    rows.append(Case("summary-unknown-preset", lambda tmp, _: None, lambda tmp: _build("bert_base"), ConfigError,
                     ("bert_base", "tiny", "bert_base_chinese", "bert_large_chinese"),
                     cli=lambda tmp: ["summary", "bert_base"]))
    rows.append(Case("preset-and-weights-of-another-size",
                     lambda tmp, _: hf(tmp, {**helpers.TINY, "hidden_size": 64}, name="ckpt"),
                     lambda tmp: _build("tiny", tmp / "ckpt"), CheckpointError,
                     ("Embedding-Token expects [128, 32]", "the model's hidden_size", "checkpoint's own config.json")))
    return rows


def _build(preset: str, checkpoint: Path | None = None, model: str | None = None):
    from kerasbert import build_transformer_model

    return build_transformer_model(preset, checkpoint_path=checkpoint, model=model, verbose=False)


def _albert_checkpoint(tmp: Path, _) -> None:
    """A Google ALBERT checkpoint of the tiny sizes (E 16) and its config."""
    from kerasbert import build_transformer_model, save_google_checkpoint

    values = {**helpers.TINY, "embedding_size": 16}
    save_google_checkpoint(build_transformer_model(config=values, model="albert", verbose=False), tmp / "ckpt")
    config(tmp / "ckpt", embedding_size=16)


def family_rows() -> list[Case]:
    """A checkpoint of one family built as another, a family that does not exist, a config without its
    family's key."""
    summary = lambda tmp: ["summary", str(tmp / "bert_config.json"), "--model", "albert"]  # noqa: E731
    return [
        Case("google-checkpoint-of-albert-built-as-bert", _albert_checkpoint,
             lambda tmp: _build(str(tmp / "ckpt" / "bert_config.json"), tmp / "ckpt", "bert"), CheckpointError,
             ("layer_0/attention", "names are those of model='albert', not model='bert'",
              "build the model with model='albert'")),
        Case("config-model-family-that-does-not-exist", lambda tmp, _: None, lambda tmp: _build("tiny", model="gpt5"),
             ModelError, ("model", "bert, albert, albert_unshared, nezha, electra, roformer, roformer_v2", "'gpt5'")),
        Case("config-model-family-misspelled", lambda tmp, _: None, lambda tmp: _build("tiny", model="albet"),
             ModelError, ("model: expected one of bert, albert,", "found 'albet'", "did you mean model='albert'?")),
        Case("config-albert-without-embedding_size", lambda tmp, _: config(tmp),
             lambda tmp: _build(str(tmp / "bert_config.json"), model="albert"), ConfigError,
             ("bert_config.json: embedding_size", "every albert config gives", "no embedding_size"), cli=summary),
    ]


def rows() -> list[Case]:
    return pickle_rows() + safetensors_rows() + convert_rows() + config_rows() + family_rows()
