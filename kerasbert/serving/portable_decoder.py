"""A cached decoder as ONNX or OpenVINO files, and `PortableDecoder`, which runs them in ONNX Runtime or OpenVINO for
`kerasbert.generation.search`.

`write_decoder` converts the two graphs of the model's cached decoder (``functions()`` of
`kerasbert.generation.cache.CachedModel`, or of `kerasbert.generation.seq2seq_cache.CachedEncoderDecoder` for T5),
whose ``io`` (`kerasbert.generation.state.DecoderIO`) names what they take and give. A language model's:

- the prefill, ``token_ids [B, S], lengths [B], max_length []`` (int32) -> every layer's keys, then every layer's
  values, each ``[B, A, S + T, d]``, then ``logp [B, V]``;
- the step, every layer's keys, then values, then ``tokens [N], lengths [N], source_width [], written [],
  parents [N]`` -> the new keys, the new values, ``logp [N, V]``.

T5's prefill also takes ``start_id`` and gives each layer's cross-attention keys and values and ``seen`` (the
decoder slots shown as keys); its step takes them and gives the new keys, values and ``seen``. The files name their
inputs and outputs in that order (`DecoderIO.names`: ``tf.nest``'s flattening of the graphs' lists), and the names
and the ``io`` travel in the dict `write_decoder` returns, which `PortableDecoder` reads. Its cache is a
`kerasbert.generation.state.Cache` (`ContextCache`) of NumPy arrays, so `beam_search` and `sample` run over it
unchanged; the
graphs run in the runtime, and neither this module nor a search over it imports TensorFlow or Keras. Every family
that generates converts, in both formats. The files an export names are read only from inside its folder
(`decoder_files`), and a search keeps to the bounds of ``GENERATE_LIMITS`` (`kerasbert.choices`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from kerasbert.choices import GENERATE_LIMITS, PREDICT_BATCH_SIZE
from kerasbert.errors import ConfigError, fail
from kerasbert.generation.state import LANGUAGE_MODEL_IO, DecoderIO, cache_bytes, check_bounds, check_cache, padded
from kerasbert.serving.extras import require
from kerasbert.serving.folder import EXPORT_INFO, vocab_file
from kerasbert.serving.precision import int8_record, openvino_config, runs_in, warn_int8_saturation
from kerasbert.serving.runtime import check_texts, runtime_errors

if TYPE_CHECKING:
    from kerasbert.generation.state import Cache

__all__ = ["FORMATS", "GRAPHS", "PortableDecoder", "PortableSeq2Seq", "check_search", "decoder_files",
           "decoder_names", "search_batch", "write_decoder"]

FORMATS = {"onnx": ".onnx", "openvino": ".xml"}  # format -> the model files' extension
GRAPHS = ("prefill", "step")
Runner = Callable[[dict], list]  # named inputs -> the outputs, in order


def decoder_names(layers: int) -> dict[str, dict[str, list[str]]]:
    """The inputs' and outputs' names of the prefill and the step of a language model of ``layers`` layers, each in
    the order its ``tf.function`` flattens them: every layer's keys, then every layer's values, then the rest
    (`DecoderIO.names`).

    Example:
    >>> names = decoder_names(2)
    >>> names["step"]["inputs"]
    ['keys_0', 'keys_1', 'values_0', 'values_1', 'tokens', 'lengths', 'source_width', 'written', 'parents']
    >>> names["prefill"]["outputs"]
    ['keys_0', 'keys_1', 'values_0', 'values_1', 'logp']
    """
    return LANGUAGE_MODEL_IO.names(layers)


def write_decoder(model, folder: str, fmt: str, int8: bool = False, int8_choice: dict | None = None,
                  decoder=None) -> dict:
    """Write the prefill and the step of a model that generates into ``folder`` as ``prefill.onnx`` and
    ``step.onnx``, or ``prefill.xml`` and ``step.xml`` (each with its ``.bin``).

    Args:
        model: TransformerModel. built with ``application="lm"`` or ``"unilm"``, a GPT, or a whole T5
            (`kerasbert.generation.generate.cached_decoder`'s models).
        folder: str. where to write (made if missing).
        fmt: str. ``"onnx"`` or ``"openvino"``.
        int8: bool. ONNX only: onnxruntime's dynamic int8 quantization of both graphs' weight MatMuls.
        int8_choice: dict or None. int8: the weights' bits and why (`kerasbert.serving.precision.int8_choice`);
            None: as this CPU calls for.
        decoder: the model's cached decoder to write; None: `kerasbert.generation.generate.cached_decoder`'s (an
            encoder-decoder's ``starting_with`` gives one with another start id).

    Returns:
        what `PortableDecoder` reads: ``format``, ``int8`` (and ``int8_choice`` with it), ``layers``,
        ``hidden_size`` (of the cached keys and values), ``vocab_size``, ``max_length`` (None for NEZHA's and
        RoFormer's positions), ``files`` and ``names`` (`DecoderIO.names`), a graph each, and ``io``
        (`DecoderIO.to_json`); JSON-ready.

    Example: see `PortableDecoder`.
    """
    from kerasbert.generation.generate import cached_decoder
    from kerasbert.serving.convert import COLLECT_BYTES, function_to_onnx, function_to_openvino  # Keras: on use

    _check_options(fmt, int8)
    chosen = ({"int8_choice": int8_choice} if int8_choice else int8_record(True)) if int8 else {}
    lm = cached_decoder(model) if decoder is None else decoder
    names, collect = lm.io.names(lm.cache_shape["layers"]), model.count_params() * 4 >= COLLECT_BYTES
    os.makedirs(folder, exist_ok=True)
    for graph, function in zip(GRAPHS, lm.functions(), strict=True):
        path, io = os.path.join(folder, graph + FORMATS[fmt]), (names[graph]["inputs"], names[graph]["outputs"])
        if fmt == "onnx":
            function_to_onnx(function, path, io, int8=int8, collect=collect,
                             weight_bits=chosen["int8_choice"]["weight_bits"] if int8 else None)
        else:
            openvino = require("openvino", "to write OpenVINO")
            openvino.save_model(function_to_openvino(function, io), path, compress_to_fp16=False)
    return {"format": fmt, "int8": int8, **chosen, **lm.cache_shape, "vocab_size": lm.vocab_size,
            "files": {graph: graph + FORMATS[fmt] for graph in GRAPHS}, "names": names, "io": lm.io.to_json()}


def decoder_files(folder: str, info: dict) -> dict[str, str]:
    """The path of each graph's file that ``info`` (what `write_decoder` returned) names, each checked to lie inside
    ``folder`` once links and ``..`` are resolved: an export reads nothing outside its folder.

    Example:
    >>> decoder_files("/exports/a", {"files": {"prefill": "prefill.onnx", "step": "step.onnx"}})["step"]
    '/exports/a/step.onnx'
    >>> decoder_files("/exports/a", {"files": {"prefill": "../b/prefill.onnx", "step": "step.onnx"}})
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: kerasbert-export.json decoder.files.prefill: expected a file name inside the \
export folder /exports/a, found '../b/prefill.onnx'. export the run again
    """
    files, root = info.get("files"), os.path.realpath(folder)
    paths = {}
    for graph in GRAPHS:
        name = files.get(graph) if isinstance(files, dict) else None
        path = os.path.realpath(os.path.join(root, name)) if isinstance(name, str) and name else root
        if path == root or os.path.commonpath([root, path]) != root:
            raise fail(ConfigError, f"{EXPORT_INFO} decoder.files.{graph}", "a file name inside the export "
                       f"folder {folder}", repr(name), "export the run again")
        paths[graph] = path
    return paths


def _check_options(fmt: str, int8: bool) -> None:
    if fmt not in FORMATS:
        raise fail(ConfigError, "write_decoder: fmt", " or ".join(map(repr, FORMATS)), repr(fmt))
    if int8 and fmt != "onnx":
        raise fail(ConfigError, "write_decoder: int8", 'fmt="onnx" (dynamic int8 quantization needs no '
                   "calibration data)", f"fmt={fmt!r}", "write the OpenVINO decoder in float32")


class PortableDecoder:
    """A decoder `write_decoder` wrote, run in ONNX Runtime or OpenVINO (CPU, float32 pinned): a next-token scorer
    with `CachedModel`'s interface (``start``, ``step``, ``vocab_size``, ``max_length``), its cache NumPy arrays,
    its graphs fed by the names of its ``io`` (a language model's where ``info`` records none).

    Args:
        folder: str. the folder `write_decoder` wrote.
        info: dict. what it returned.

    Example:
    >>> import tempfile
    >>> from kerasbert import build_transformer_model
    >>> from kerasbert.generation.search import Rules, beam_search
    >>> folder = tempfile.mkdtemp()
    >>> info = write_decoder(build_transformer_model("tiny", application="lm", verbose=False), folder, "onnx")
    >>> info["files"], info["layers"], info["vocab_size"]
    ({'prefill': 'prefill.onnx', 'step': 'step.onnx'}, 2, 128)
    >>> found = beam_search(PortableDecoder(folder, info), [[2, 7, 9], [2, 5]], beams=2, rules=Rules((), 3))
    >>> [len(one.ids[0]) for one in found]
    [3, 3]
    """

    def __init__(self, folder: str, info: dict) -> None:
        self.info, self.layers, self.io = info, int(info["layers"]), DecoderIO.from_json(info.get("io"))
        warn_int8_saturation(info, folder)
        self._prefill, self._step = (_runner(folder, info, graph) for graph in GRAPHS)

    @property
    def vocab_size(self) -> int:
        return int(self.info["vocab_size"])

    @property
    def max_length(self) -> int | None:
        """The most positions the model embeds; None for NEZHA's and RoFormer's."""
        return self.info["max_length"]

    def start(self, sources: Sequence[Sequence[int]], max_length: int) -> tuple[Cache, np.ndarray]:
        """Run ``sources`` (ragged token ids), keeping room for ``max_length`` target tokens a row.

        Returns:
            the `Cache` (NumPy arrays) and ``[B, V]`` log-probabilities of each row's first target token.
        """
        token_ids, lengths = padded(sources)
        given = {"token_ids": token_ids, "lengths": lengths, "max_length": max_length, **self.io.constants}
        out = self._prefill(self._feeds("prefill", *(given[name] for name in self.io.prefill)))
        state = self.io.grouped(self.io.state, out[:-1], self.layers)
        return self.io.cache(state, lengths, int(token_ids.shape[1])), out[-1]

    def step(self, cache: Cache, tokens: np.ndarray, parents: np.ndarray | None = None) -> tuple[Cache, np.ndarray]:
        """Feed ``tokens`` ``[N]``, one a row (after reordering the rows by ``parents`` when given), and give the
        new cache and the ``[N, V]`` log-probabilities of the token after it, as `CachedModel.step`."""
        cache.check_room("PortableDecoder.step")
        values = {**{field.name: getattr(cache, field.name) for field in dataclasses.fields(cache)},
                  "tokens": tokens, "parents": np.arange(cache.rows) if parents is None else parents}
        out = self._step(self._feeds("step", *self.io.flat(self.io.step, values)))
        carried = self.io.grouped(self.io.carried, out[:-1], self.layers)
        return dataclasses.replace(cache, **carried, written=cache.written + 1), out[-1]

    def _feeds(self, graph: str, *arrays) -> dict[str, np.ndarray]:
        """``arrays`` named in the graph's input order, the int ones as int32 (floats and bools as they are)."""
        arrays = tuple(np.asarray(array) for array in arrays)
        return {name: array if array.dtype.kind in "fb" else array.astype("int32", copy=False)
                for name, array in zip(self.info["names"][graph]["inputs"], arrays, strict=True)}


def _runner(folder: str, info: dict, graph: str) -> Runner:
    """A function running ``graph``'s file of the export on named inputs, giving its outputs in `decoder_names`'
    order; a ConfigError when the runtime is missing or cannot read the file."""
    fmt, path, outputs = info["format"], decoder_files(folder, info)[graph], info["names"][graph]["outputs"]
    with runtime_errors(fmt, path, "write the decoder again"):
        if fmt == "onnx":
            import onnxruntime

            session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
            return lambda feeds: session.run(outputs, feeds)
        import openvino

        compiled = openvino.Core().compile_model(path, "CPU", openvino_config(runs_in(info, folder)))
        request, ports = compiled.create_infer_request(), [compiled.output(name) for name in outputs]

        def run(feeds: dict) -> list:
            results = request.infer(feeds, share_outputs=False)  # copies: the request reuses its buffers
            return [results[port] for port in ports]

        return run


class PortableSeq2Seq:
    """A seq2seq run's ONNX or OpenVINO export, loaded: each source tokenized and cut as the run cuts it, its
    target found by the run's beam search over the exported decoder (`PortableDecoder`), and decoded, as
    ``kerasbert predict`` writes it; no TensorFlow.

    Args:
        path: str. the export folder: ``vocab.txt`` (a T5 run's ``spiece.model``), the decoder's files,
            ``kerasbert-export.json``.
        info: dict. its ``kerasbert-export.json``: ``maxlen``, ``target_maxlen``, ``beams``, ``lowercase``,
            ``decoder`` (what `write_decoder` returned) and, where recorded, ``source_maxlen``, ``end_token``,
            ``vocab_file`` and ``token_start`` (a UniLM's ``maxlen - target_maxlen``, ``[SEP]`` and ``vocab.txt``
            otherwise), checked against the bounds of ``GENERATE_LIMITS`` before the decoder loads; a search takes
            as many sources as keep its cache within them.
    """

    def __init__(self, path: str, info: dict) -> None:
        import threading

        from kerasbert.generation.search import Rules

        self.path, self.info = path, info
        check_search(path, info)
        self.tokenizer = _tokenizer(path, info)
        self.decoder = PortableDecoder(path, info["decoder"])
        self.end = self.tokenizer.token_to_id(info.get("end_token", "[SEP]"))
        self.rules = Rules((self.end,), int(info["target_maxlen"]))
        self._lock = threading.Lock()  # a runtime's request serves one call at a time

    def predict(self, rows: Sequence[dict], batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """``{"text"}`` rows -> ``{"text", "target"}``, as `kerasbert.predict` writes them."""
        check_texts(rows, ("text",))
        targets = self.targets([row["text"] for row in rows], batch_size)
        return [{**row, "target": target} for row, target in zip(rows, targets, strict=True)]

    def predict_examples(self, examples: Sequence, batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """``{"target"}`` of each example read by the seq2seq task (its ``text`` is the source)."""
        return [{"target": target} for target in self.targets([example.text for example in examples], batch_size)]

    def targets(self, texts: Sequence[str], batch_size: int = PREDICT_BATCH_SIZE) -> list[str]:
        """The generated text of each source, ``batch_size`` sources a search."""
        from kerasbert.generation.search import beam_search

        room = int(self.info.get("source_maxlen", self.info["maxlen"] - self.info["target_maxlen"]))
        sources = [self.tokenizer.encode(text, maxlen=room)[0] for text in texts]
        found, batch_size = [], search_batch(self.info, batch_size)
        with self._lock:
            for begin in range(0, len(sources), batch_size):
                found += beam_search(self.decoder, sources[begin:begin + batch_size], int(self.info["beams"]),
                                     self.rules)
        return [self.tokenizer.decode(ids[:-1] if ids and ids[-1] == self.end else ids)
                for ids in (one.ids[0] for one in found)]


def _tokenizer(path: str, info: dict):
    """The run's tokenizer from the export's vocabulary: SentencePiece's with the recorded start and end tokens
    where ``vocab_file`` is its model, else word pieces with the run's case."""
    vocab = os.path.join(path, vocab_file(info))
    if vocab_file(info) == "spiece.model":
        from kerasbert.text.sentencepiece import SpTokenizer

        return SpTokenizer(vocab, token_start=info.get("token_start"), token_end=info.get("end_token"))
    from kerasbert.text.tokenizer import Tokenizer

    return Tokenizer(vocab, do_lower_case=bool(info["lowercase"]))


def search_batch(info: dict, batch_size: int) -> int:
    """``batch_size``, lowered so that a search's rows (sources times beams) and its cache of keys and values keep to
    ``GENERATE_LIMITS``; at least one source (`check_search` checked that one fits).

    Args:
        info: dict. a seq2seq export's ``kerasbert-export.json``: ``beams``, ``maxlen`` (a row's cache positions
            unless ``cache_positions`` says) and, where the export records them, ``decoder``'s ``layers`` and
            ``hidden_size`` (without them only the rows bound the batch).
        batch_size: int. the sources asked for at once (``--batch-size``, ``--max-batch``).

    Example:
    >>> search_batch({"beams": 4, "maxlen": 512, "decoder": {"layers": 12, "hidden_size": 768}}, 32)
    28
    """
    beams, shape = int(info["beams"]), _cache_shape(f"{EXPORT_INFO} decoder", info)
    most = GENERATE_LIMITS["rows"] // beams
    if shape is not None:
        most = min(most, GENERATE_LIMITS["cache_bytes"] // cache_bytes(beams, shape[0], _positions(info), shape[1]))
    return max(1, min(batch_size, most))


def _positions(info: dict) -> int:
    """The positions a source's cache holds: ``cache_positions`` (a T5's source, start and targets), or ``maxlen``
    (a UniLM's source and target share them; an export that records no ``cache_positions``)."""
    return int(info.get("cache_positions", info["maxlen"]))


def _cache_shape(where: str, info: dict) -> tuple[int, int] | None:
    """The ``layers`` and ``hidden_size`` an export's ``decoder`` records (None without ``hidden_size``, as in the
    exports written before it was recorded); a ConfigError for values that are not whole numbers >= 1."""
    decoder = info.get("decoder") or {}
    values = [decoder.get(key) for key in ("layers", "hidden_size")]
    if values[1] is None:
        return None
    if not all(isinstance(value, int) and not isinstance(value, bool) and value >= 1 for value in values):
        raise fail(ConfigError, where, "layers and hidden_size, whole numbers >= 1", f"{values[0]!r} and "
                   f"{values[1]!r}", "export the run again")
    return values[0], values[1]


def check_search(path: str, info: dict) -> None:
    """A ConfigError, naming the export's information file, unless its search options keep to the bounds of
    generation: ``target_maxlen`` and ``beams`` within ``GENERATE_LIMITS``, ``maxlen`` within the model's positions
    (twice the length bound where no position table is recorded) and with room for a source (``source_maxlen`` at
    least 1 where recorded, else ``maxlen`` more than ``target_maxlen + 2``), and one source's cache within bounds
    (where ``decoder`` records its ``layers`` and ``hidden_size``)."""
    where, decoder = os.path.join(path, EXPORT_INFO) + " ", info.get("decoder") or {}
    check_bounds(ConfigError, where, {"target_maxlen": info.get("target_maxlen")}, {"beams": info.get("beams")},
                 "export the run again")
    maxlen, target, positions = info.get("maxlen"), info["target_maxlen"], decoder.get("max_length")
    most = positions if isinstance(positions, int) else 2 * GENERATE_LIMITS["max_length"]
    bound = "the model's positions" if isinstance(positions, int) else "twice the bound of generation"
    recorded = "source_maxlen" in info  # the source's room, and a row's cache positions (a T5's: the start's too)
    checks = [(maxlen, "maxlen", (0, "0") if recorded else (target + 2, f"target_maxlen + 2 ({target + 2})"), most,
               bound)]
    if recorded:
        checks += [(info["source_maxlen"], "source_maxlen", (0, "0"), most, bound),
                   (info.get("cache_positions"), "cache_positions", (target, f"target_maxlen ({target})"),
                    most + 1 + target, f"{bound}, the start and the targets")]
    for value, name, (least, low), high, words in checks:
        if isinstance(value, bool) or not isinstance(value, int) or not least < value <= high:
            raise fail(ConfigError, where + name, f"more than {low} and at most {high} ({words})", repr(value),
                       "export the run again")
    shape = _cache_shape(where + "decoder", info)
    if shape is not None:
        check_cache(where + "decoder", info["beams"], shape[0], _positions(info), shape[1],
                    "export the run again with fewer beams or a lower --maxlen", ConfigError)
