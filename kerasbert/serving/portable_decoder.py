"""A language model's cached decoder as ONNX or OpenVINO files, and `PortableDecoder`, which runs them in ONNX
Runtime or OpenVINO for `kerasbert.generation.search`.

`write_decoder` converts the two graphs of `kerasbert.generation.cache.CachedModel` (`CachedModel.functions`):

- the prefill, ``token_ids [B, S], lengths [B], max_length []`` (int32) -> every layer's keys, then every layer's
  values, each ``[B, A, S + T, d]``, then ``logp [B, V]``;
- the step, every layer's keys, then values, then ``tokens [N], lengths [N], source_width [], written [],
  parents [N]`` -> the new keys, the new values, ``logp [N, V]``.

The files name their inputs and outputs in that order (`decoder_names`: ``tf.nest``'s flattening of the graphs'
lists), and the names travel in the dict `write_decoder` returns, which `PortableDecoder` reads. Its cache is a
`kerasbert.generation.state.Cache` of NumPy arrays, so `beam_search` and `sample` run over it unchanged; the
graphs run in the runtime, and neither this module nor a search over it imports TensorFlow or Keras. Every family
that generates converts, in both formats.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from kerasbert.choices import PREDICT_BATCH_SIZE
from kerasbert.errors import ConfigError, fail

if TYPE_CHECKING:
    from kerasbert.generation.state import Cache

__all__ = ["FORMATS", "GRAPHS", "PortableDecoder", "PortableSeq2Seq", "decoder_names", "write_decoder"]

FORMATS = {"onnx": ".onnx", "openvino": ".xml"}  # format -> the model files' extension
GRAPHS = ("prefill", "step")
Runner = Callable[[dict], list]  # named inputs -> the outputs, in order


def decoder_names(layers: int) -> dict[str, dict[str, list[str]]]:
    """The inputs' and outputs' names of the prefill and the step of a model of ``layers`` layers, each in the order
    its ``tf.function`` flattens them: every layer's keys, then every layer's values, then the rest.

    Example:
    >>> names = decoder_names(2)
    >>> names["step"]["inputs"]
    ['keys_0', 'keys_1', 'values_0', 'values_1', 'tokens', 'lengths', 'source_width', 'written', 'parents']
    >>> names["prefill"]["outputs"]
    ['keys_0', 'keys_1', 'values_0', 'values_1', 'logp']
    """
    cached = [f"keys_{i}" for i in range(layers)] + [f"values_{i}" for i in range(layers)]
    return {"prefill": {"inputs": ["token_ids", "lengths", "max_length"], "outputs": [*cached, "logp"]},
            "step": {"inputs": [*cached, "tokens", "lengths", "source_width", "written", "parents"],
                     "outputs": [*(f"new_{name}" for name in cached), "logp"]}}


def write_decoder(model, folder: str, fmt: str, int8: bool = False) -> dict:
    """Write the prefill and the step of an ``"lm"`` or ``"unilm"`` model into ``folder`` as ``prefill.onnx`` and
    ``step.onnx``, or ``prefill.xml`` and ``step.xml`` (each with its ``.bin``).

    Args:
        model: TransformerModel. built with ``application="lm"`` or ``"unilm"`` (`CachedModel`'s models).
        folder: str. where to write (made if missing).
        fmt: str. ``"onnx"`` or ``"openvino"``.
        int8: bool. ONNX only: onnxruntime's dynamic int8 quantization of both graphs' weight MatMuls.

    Returns:
        what `PortableDecoder` reads: ``format``, ``int8``, ``layers``, ``vocab_size``, ``max_length`` (None for
        NEZHA's and RoFormer's positions), ``files`` and ``names`` (`decoder_names`), a graph each; JSON-ready.

    Example: see `PortableDecoder`.
    """
    from kerasbert.generation.cache import CachedModel
    from kerasbert.serving.convert import COLLECT_BYTES, function_to_onnx, function_to_openvino, require

    _check_options(fmt, int8)
    lm = CachedModel(model)
    names, collect = decoder_names(len(lm.blocks)), model.count_params() * 4 >= COLLECT_BYTES
    os.makedirs(folder, exist_ok=True)
    for graph, function in zip(GRAPHS, lm.functions(), strict=True):
        path, io = os.path.join(folder, graph + FORMATS[fmt]), (names[graph]["inputs"], names[graph]["outputs"])
        if fmt == "onnx":
            function_to_onnx(function, path, io, int8=int8, collect=collect)
        else:
            openvino = require("openvino", "to write OpenVINO")
            openvino.save_model(function_to_openvino(function, io), path, compress_to_fp16=False)
    return {"format": fmt, "int8": int8, "layers": len(lm.blocks), "vocab_size": lm.vocab_size,
            "max_length": lm.max_length, "files": {graph: graph + FORMATS[fmt] for graph in GRAPHS}, "names": names}


def _check_options(fmt: str, int8: bool) -> None:
    if fmt not in FORMATS:
        raise fail(ConfigError, "write_decoder: fmt", " or ".join(map(repr, FORMATS)), repr(fmt))
    if int8 and fmt != "onnx":
        raise fail(ConfigError, "write_decoder: int8", 'fmt="onnx" (dynamic int8 quantization needs no '
                   "calibration data)", f"fmt={fmt!r}", "write the OpenVINO decoder in float32")


class PortableDecoder:
    """A decoder `write_decoder` wrote, run in ONNX Runtime or OpenVINO (CPU, float32 pinned): a next-token scorer
    with `CachedModel`'s interface (``start``, ``step``, ``vocab_size``, ``max_length``), its cache NumPy arrays.

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
        self.info, self.layers = info, int(info["layers"])
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
        from kerasbert.generation.state import Cache, padded

        token_ids, lengths = padded(sources)
        out = self._prefill(self._feeds("prefill", token_ids, lengths, max_length))
        cache = Cache(tuple(out[:self.layers]), tuple(out[self.layers:-1]), lengths, int(token_ids.shape[1]))
        return cache, out[-1]

    def step(self, cache: Cache, tokens: np.ndarray, parents: np.ndarray | None = None) -> tuple[Cache, np.ndarray]:
        """Feed ``tokens`` ``[N]``, one a row (after reordering the rows by ``parents`` when given), and give the
        new cache and the ``[N, V]`` log-probabilities of the token after it, as `CachedModel.step`."""
        cache.check_room("PortableDecoder.step")
        parents = np.arange(cache.rows) if parents is None else parents
        out = self._step(self._feeds("step", *cache.keys, *cache.values, tokens, cache.lengths, cache.source_width,
                                     cache.written, parents))
        cache = dataclasses.replace(cache, keys=tuple(out[:self.layers]), values=tuple(out[self.layers:-1]),
                                    written=cache.written + 1)
        return cache, out[-1]

    def _feeds(self, graph: str, *arrays) -> dict[str, np.ndarray]:
        """``arrays`` named in the graph's input order, the int ones as int32."""
        arrays = tuple(np.asarray(array) for array in arrays)
        return {name: array if array.dtype.kind == "f" else array.astype("int32", copy=False)
                for name, array in zip(self.info["names"][graph]["inputs"], arrays, strict=True)}


def _runner(folder: str, info: dict, graph: str) -> Runner:
    """A function running ``graph``'s file of the export on named inputs, giving its outputs in `decoder_names`'
    order; a ConfigError when the runtime is missing or cannot read the file."""
    from kerasbert.serving.precision import openvino_config, runs_in
    from kerasbert.serving.runtime import runtime_errors

    fmt, path, outputs = info["format"], os.path.join(folder, info["files"][graph]), info["names"][graph]["outputs"]
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
        path: str. the export folder: ``vocab.txt``, the decoder's files, ``kerasbert-export.json``.
        info: dict. its ``kerasbert-export.json``: ``maxlen``, ``target_maxlen``, ``beams``, ``lowercase`` and
            ``decoder`` (what `write_decoder` returned).
    """

    def __init__(self, path: str, info: dict) -> None:
        import threading

        from kerasbert.generation.search import Rules
        from kerasbert.text.tokenizer import Tokenizer

        self.path, self.info = path, info
        self.tokenizer = Tokenizer(os.path.join(path, "vocab.txt"), do_lower_case=bool(info["lowercase"]))
        self.decoder = PortableDecoder(path, info["decoder"])
        self.end = self.tokenizer.token_to_id("[SEP]")
        self.rules = Rules((self.end,), int(info["target_maxlen"]))
        self._lock = threading.Lock()  # a runtime's request serves one call at a time

    def predict(self, rows: Sequence[dict], batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """``{"text"}`` rows -> ``{"text", "target"}``, as `kerasbert.predict` writes them."""
        from kerasbert.serving.runtime import check_texts

        check_texts(rows, pairs=False)
        targets = self.targets([row["text"] for row in rows], batch_size)
        return [{**row, "target": target} for row, target in zip(rows, targets, strict=True)]

    def predict_examples(self, examples: Sequence, batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
        """``{"target"}`` of each example read by the seq2seq task (its ``text`` is the source)."""
        return [{"target": target} for target in self.targets([example.text for example in examples], batch_size)]

    def targets(self, texts: Sequence[str], batch_size: int = PREDICT_BATCH_SIZE) -> list[str]:
        """The generated text of each source, ``batch_size`` sources a search."""
        from kerasbert.generation.search import beam_search

        room = int(self.info["maxlen"]) - int(self.info["target_maxlen"])
        sources = [self.tokenizer.encode(text, maxlen=room)[0] for text in texts]
        found = []
        with self._lock:
            for begin in range(0, len(sources), batch_size):
                found += beam_search(self.decoder, sources[begin:begin + batch_size], int(self.info["beams"]),
                                     self.rules)
        return [self.tokenizer.decode(ids[:-1] if ids and ids[-1] == self.end else ids)
                for ids in (one.ids[0] for one in found)]
