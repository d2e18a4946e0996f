"""kerasbert.serving.portable_decoder: a language model's prefill and step written as ONNX or OpenVINO, run by
`PortableDecoder` under `kerasbert.generation.search`, find the ids `kerasbert.generate` finds; the inputs and
outputs are named in the graphs' flattened order; int8 stays close; what cannot convert says so."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert import ConfigError, ModelError, generate
from kerasbert.generation.cache import CachedModel
from kerasbert.generation.search import Rules, beam_search, sample
from kerasbert.generation.state import Cache
from kerasbert.serving.portable_decoder import (
    GRAPHS,
    PortableDecoder,
    check_search,
    decoder_files,
    decoder_names,
    search_batch,
    write_decoder,
)

from int8_cpus import INT8_CPUS, WEIGHT_BITS, assert_weight_bits, int8_cpu

# (family, application, format) of each float32 export: the learned positions, RoFormer's rotation, NEZHA's
# relative positions, both applications, both runtimes
CASES = [("bert", "unilm", "onnx"), ("bert", "unilm", "openvino"), ("roformer", "lm", "onnx"),
         ("nezha", "unilm", "onnx")]
MAX_LENGTH = 8
PROBABILITY_INT8 = 0.05  # int8 next-token probabilities stay this close to float32's


@pytest.fixture(scope="module")
def decoder(language_model, tmp_path_factory):
    """``decoder(family, application, fmt, int8=None)``: the model, the folder, `write_decoder`'s info and the
    loaded `PortableDecoder`, written once a module; ``int8``: None for float32, else the CPU class
    (`int8_cpus.INT8_CPUS`) whose int8 it is."""
    written: dict = {}

    def get(family: str, application: str, fmt: str, int8: str | None = None):
        key = (family, application, fmt, int8)
        if key not in written:
            model, folder = language_model(family, application), str(tmp_path_factory.mktemp("-".join(map(str, key))))
            with int8_cpu(int8) if int8 else contextlib.nullcontext():
                info = write_decoder(model, folder, fmt, int8=int8 is not None)
                written[key] = model, folder, info, PortableDecoder(folder, info)
        return written[key]

    return get


@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_greedy_and_beam_search_find_generates_ids(decoder, case, sources, end_token):
    model, _, _, portable = decoder(*case)
    rules = Rules((end_token(model),), MAX_LENGTH)
    for method, beams in (("greedy", 1), ("beam", 3)):
        expected = generate(model, sources, method, beams=beams if beams > 1 else None, end_ids=rules.end_ids,
                            max_length=MAX_LENGTH)
        _assert_same(beam_search(portable, sources, beams, rules), expected)


@pytest.mark.parametrize("case", CASES[:2], ids="-".join)
def test_the_first_steps_log_probabilities_are_the_cached_models(decoder, case, sources):
    model, _, _, portable = decoder(*case)
    lm = CachedModel(model)
    (cache, logp), (expected_cache, expected) = portable.start(sources, 2), lm.start(sources, 2)
    assert isinstance(cache.keys[0], np.ndarray) and cache.keys[0].shape == tuple(expected_cache.keys[0].shape)
    np.testing.assert_allclose(logp, expected, atol=1e-4)
    tokens, parents = np.array([5, 6, 7, 8]), np.array([1, 1, 0, 3])
    cache, logp = portable.step(cache, tokens, parents)
    np.testing.assert_allclose(logp, lm.step(expected_cache, tokens, parents)[1], atol=1e-4)
    portable.step(cache, tokens)
    with pytest.raises(ModelError, match="at most 2 target tokens"):
        portable.step(portable.step(cache, tokens)[0], tokens)


def test_sampling_takes_rows_of_the_numpy_cache(decoder, sources):
    model, _, _, portable = decoder("bert", "unilm", "openvino")
    found = sample(portable, sources, 3, 5, None, Rules((), MAX_LENGTH), np.random.default_rng(0))
    _assert_same(found, generate(model, sources, "sample", n=3, topk=5, seed=0, max_length=MAX_LENGTH))


def test_cache_take_keeps_numpy_arrays_numpy():
    keys = np.arange(24, dtype="float32").reshape(3, 1, 4, 2)
    cache = Cache((keys,), (-keys,), np.array([1, 2, 3], "int32"), 2).take(np.array([2, 2, 0]))
    assert all(isinstance(array, np.ndarray) for array in (*cache.keys, *cache.values, cache.lengths))
    assert cache.lengths.tolist() == [3, 3, 1] and (cache.values[0] == -keys[[2, 2, 0]]).all()


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_inputs_and_outputs_are_named_in_the_graphs_flattened_order(decoder, fmt):
    _, folder, info, _ = decoder("bert", "unilm", fmt)
    assert info["layers"] == 2 and info["hidden_size"] == 32 and info["names"] == decoder_names(2)
    assert info["names"]["step"]["inputs"][:4] == ["keys_0", "keys_1", "values_0", "values_1"]
    for graph in GRAPHS:
        assert _file_names(os.path.join(folder, info["files"][graph]), fmt) == info["names"][graph], graph


@pytest.mark.parametrize("cpu", INT8_CPUS)
def test_int8_onnx_gives_valid_ids_and_close_probabilities(decoder, sources, cpu):
    model, folder, info, portable = decoder("bert", "unilm", "onnx", int8=cpu)
    assert info["int8"] and info["files"]["step"] == "step.onnx"
    assert info["int8_choice"]["weight_bits"] == WEIGHT_BITS[cpu]
    for graph in GRAPHS:
        assert_weight_bits(os.path.join(folder, info["files"][graph]), cpu)
    found = beam_search(portable, sources, 1, Rules((), MAX_LENGTH))
    assert all(len(one.ids[0]) == MAX_LENGTH and 0 <= min(one.ids[0]) <= max(one.ids[0]) < 128 for one in found)
    lm = CachedModel(model)
    (cache, logp), (expected_cache, expected) = portable.start(sources, 2), lm.start(sources, 2)
    assert np.abs(np.exp(logp) - np.exp(expected)).max() <= PROBABILITY_INT8
    tokens = np.array([5, 6, 7, 8])
    logp, expected = portable.step(cache, tokens)[1], lm.step(expected_cache, tokens)[1]
    assert np.abs(np.exp(logp) - np.exp(expected)).max() <= PROBABILITY_INT8


def test_what_cannot_be_written_says_why(language_model, tmp_path):
    with pytest.raises(ConfigError, match="int8: expected fmt=\"onnx\""):
        write_decoder(language_model("bert", "unilm"), str(tmp_path), "openvino", int8=True)
    with pytest.raises(ConfigError, match="fmt: expected 'onnx' or 'openvino', found 'tflite'"):
        write_decoder(language_model("bert", "unilm"), str(tmp_path), "tflite")
    with pytest.raises(ModelError, match="application"):
        write_decoder(language_model("bert", "encoder"), str(tmp_path), "onnx")
    info = {"format": "onnx", "layers": 2, "files": {"prefill": "prefill.onnx", "step": "step.onnx"},
            "names": decoder_names(2)}
    with pytest.raises(ConfigError, match="prefill.onnx: expected a readable onnx model"):
        PortableDecoder(str(tmp_path), info)


def test_decoder_files_are_read_only_inside_the_export_folder(tmp_path):
    folder, outside = tmp_path / "export", tmp_path / "outside.onnx"
    folder.mkdir()
    outside.write_bytes(b"not the export's")
    (folder / "step.onnx").symlink_to(outside)  # a link inside the folder that leads out of it
    (folder / "inner").mkdir()
    files = {"prefill": "inner/../prefill.onnx", "step": "step.onnx"}
    with pytest.raises(ConfigError, match=r"decoder.files.step: expected a file name inside the export folder .*, "
                                          r"found 'step.onnx'"):
        decoder_files(str(folder), {"files": files})
    assert decoder_files(str(folder), {"files": {**files, "step": "inner/step.onnx"}}) == {
        "prefill": str(folder.resolve() / "prefill.onnx"), "step": str(folder.resolve() / "inner" / "step.onnx")}
    for files in ({"prefill": "prefill.onnx"}, {"prefill": ".", "step": "step.onnx"}, None):
        with pytest.raises(ConfigError, match="decoder.files"):
            decoder_files(str(folder), {"files": files})


@pytest.mark.parametrize("beams, decoder, expected", [(4, {"layers": 12, "hidden_size": 768}, 28),
                                                     (4, {"layers": 12}, 32), (4, None, 32), (1024, None, 4),
                                                     (4096, {"layers": 2, "hidden_size": 8}, 1)])
def test_a_seq2seq_export_searches_as_many_sources_as_keep_to_the_bounds(beams, decoder, expected):
    """A BERT-base's cache with 4 beams over 512 positions: 2 x 4 x 12 x 512 x 768 x 4 = 150,994,944 bytes a
    source, so 28 sources fit in 4 GiB; without a recorded hidden size (an export written before it was recorded)
    only the 4096 rows bound it."""
    info = {"beams": beams, "maxlen": 512, **({} if decoder is None else {"decoder": decoder})}
    assert search_batch(info, 32) == expected
    assert search_batch(info, 3) == min(3, expected)


def test_an_export_whose_one_source_cannot_fit_is_refused_and_one_without_its_shape_is_not(tmp_path):
    """BERT-large over 512 positions: 2 x 24 x 512 x 1024 x 4 = 100,663,296 bytes a beam, so 42 beams fit in
    4 GiB (4,227,858,432 bytes) and 43 (4,328,521,728) do not."""
    info = {"format": "saved_model", "maxlen": 512, "target_maxlen": 32,
            "decoder": {"layers": 24, "hidden_size": 1024, "max_length": 512}}
    check_search(str(tmp_path), {**info, "beams": 42})
    assert search_batch({**info, "beams": 42}, 32) == 1
    with pytest.raises(ConfigError, match=r"kerasbert-export.json decoder: expected a cache of keys and values of at "
                                          r"most 4,294,967,296 bytes, found 43 rows x 24 layers x 512 positions x "
                                          r"1024 hidden x 4 bytes x 2 = 4,328,521,728 bytes"):
        check_search(str(tmp_path), {**info, "beams": 43})
    check_search(str(tmp_path), {**info, "beams": 43, "decoder": {}})  # no shape recorded: the rows bound alone
    assert search_batch({**info, "beams": 43, "decoder": {}}, 32) == 32
    assert search_batch({**info, "beams": 128, "decoder": {}}, 64) == 32  # 4096 rows of 128 beams


def test_a_search_over_an_export_runs_without_tensorflow(decoder):
    _, folder, info, _ = decoder("bert", "unilm", "onnx")
    code = ("import json, sys\n"
            "sys.modules['tensorflow'] = sys.modules['keras'] = None  # neither can be imported\n"
            "from kerasbert.generation.search import Rules, beam_search\n"
            "from kerasbert.serving.portable_decoder import PortableDecoder\n"
            "decoder = PortableDecoder(sys.argv[1], json.loads(sys.argv[2]))\n"
            "print(beam_search(decoder, [[2, 7, 9, 3]], 2, Rules((), 3))[0].ids)")
    done = subprocess.run([sys.executable, "-c", code, folder, json.dumps(info)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(eval(done.stdout)[0]) == 3


def _assert_same(found: list, expected: list) -> None:
    """The same ids, and scores within float32's rounding of the runtimes' kernels."""
    assert [one.ids for one in found] == [one.ids for one in expected]
    np.testing.assert_allclose([one.scores for one in found], [one.scores for one in expected], atol=1e-4)


def _file_names(path: str, fmt: str) -> dict[str, list[str]]:
    """The inputs' and outputs' names of a model file, in its own order."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        ports = session.get_inputs(), session.get_outputs()
        return {"inputs": [port.name for port in ports[0]], "outputs": [port.name for port in ports[1]]}
    import openvino

    model = openvino.Core().read_model(path)
    return {"inputs": [port.get_any_name() for port in model.inputs],
            "outputs": [port.get_any_name() for port in model.outputs]}
