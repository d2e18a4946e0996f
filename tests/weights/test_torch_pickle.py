"""kerasbert.weights.torch_pickle: torch.save files read without torch, and never run.

The ``.bin`` fixtures were written by real torch (tests/fixtures/torch_files/make_fixtures.py, versions.txt);
the hostile and damaged files are built here, in pure Python.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shlex
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasbert.errors import CheckpointError
from kerasbert.weights.torch_pickle import MAGIC_NUMBER, PROTOCOL_VERSION, TorchFile, read_torch_state_dict

from bad_inputs_weights import state_dict_pickle, torch_zip

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "torch_files")
SYS_INFO = {"protocol_version": PROTOCOL_VERSION, "little_endian": True,
            "type_sizes": {"short": 2, "int": 4, "long": 4}}
LEGACY_HEADER = b"".join(pickle.dumps(obj, protocol=2) for obj in (MAGIC_NUMBER, PROTOCOL_VERSION, SYS_INFO))
REFUSED = "expected a PyTorch state dict of tensors (weights only), found a pickle that calls "
WITH_TEST_BROADCAST = re.compile(r"(^|\.)position_ids$|^test\.broadcast$")  # the fixtures' expand()ed (4, 3) view


def write_zip(path, data_pkl: bytes, storages: dict[str, bytes] | None = None) -> str:
    """A zip-format torch file: ``archive/data.pkl`` and one ``archive/data/<key>`` entry per storage."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", data_pkl)
        for key, data in (storages or {}).items():
            archive.writestr(f"archive/data/{key}", data)
    return str(path)


def tensor_pickle(offset: int, shape: tuple[int, ...], stride: tuple[int, ...], numel: int = 4,
                  build: dict[str, tuple[int, ...]] | None = None) -> bytes:
    """data.pkl of ``{"w": tensor}`` on FloatStorage "0", written opcode by opcode (protocol 2) as torch does.

    ``build`` adds what torch never writes: a BUILD opcode that sets attributes of the rebuilt tensor object.
    """
    def name(dotted: str) -> bytes:  # GLOBAL
        module, _, attr = dotted.rpartition(".")
        return b"c" + f"{module}\n{attr}\n".encode()

    def text(value: str) -> bytes:  # BINUNICODE
        return b"X" + struct.pack("<I", len(value)) + value.encode()

    def ints(values: tuple[int, ...]) -> bytes:  # MARK, BININT each, TUPLE
        return b"(" + b"".join(b"J" + struct.pack("<i", v) for v in values) + b"t"

    pid = b"(" + text("storage") + name("torch.FloatStorage") + text("0") + text("cpu") + ints((numel,))[1:-1] + b"tQ"
    args = pid + ints((offset,))[1:-1] + ints(shape) + ints(stride) + b"\x89" + name("collections.OrderedDict") + b")R"
    attributes = b"}(" + b"".join(text(k) + ints(v) for k, v in build.items()) + b"ub" if build else b""
    return b"\x80\x02}" + text("w") + name("torch._utils._rebuild_tensor_v2") + b"(" + args + b"tR" + attributes + b"s."


class Payload:
    """What an attacker pickles: unpickling it calls ``func(*args)``."""

    def __init__(self, func, *args) -> None:
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


ATTACKS = {  # name of the refused global -> the payload that would create `marker`
    f"{os.system.__module__}.system": lambda marker: Payload(os.system, f"touch {shlex.quote(str(marker))}"),
    "builtins.exec": lambda marker: Payload(exec, f"open({str(marker)!r}, 'w').close()"),
    "subprocess.Popen": lambda marker: Payload(subprocess.Popen, ["touch", str(marker)]),
}


@pytest.mark.parametrize("name", ["bert-zip.bin", "bert-legacy.bin", "bert-legacy-protocol4.bin"])
def test_reads_what_torch_wrote(name, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails: the reader must not need it
    weights = read_torch_state_dict(os.path.join(FIXTURES, name), broadcast=WITH_TEST_BROADCAST)
    expected = np.load(os.path.join(FIXTURES, "bert.npz"))
    assert sorted(weights) == sorted(expected.files)
    for key in expected.files:
        assert (weights[key].dtype, weights[key].shape) == (expected[key].dtype, expected[key].shape), key
        np.testing.assert_array_equal(weights[key], expected[key], strict=True)
        assert weights[key].flags.c_contiguous and weights[key].flags.writeable, key
    assert weights["bert.embeddings.position_ids"].dtype == np.int64
    assert weights["test.bfloat16"].dtype == np.float32 and weights["test.float16"].dtype == np.float16
    assert weights["test.transposed"].shape == (5, 3) and weights["test.broadcast"].shape == (4, 3)
    tied = weights["cls.decoder.weight"], weights["bert.embeddings.word_embeddings.weight"]
    np.testing.assert_array_equal(*tied)
    assert not np.shares_memory(*tied)  # one storage in the file, two independent arrays here


def test_accepts_path_objects(tmp_path):
    path = write_zip(tmp_path / "w.bin", tensor_pickle(1, (3,), (1,)), {"0": np.arange(4, dtype="<f4").tobytes()})
    weights = read_torch_state_dict(tmp_path / "w.bin")
    assert read_torch_state_dict(path).keys() == weights.keys() == {"w"}
    np.testing.assert_array_equal(weights["w"], np.array([1, 2, 3], np.float32), strict=True)


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
@pytest.mark.parametrize("refused", sorted(ATTACKS))
def test_refuses_a_pickle_that_runs_code(tmp_path, refused, protocol):
    marker = tmp_path / "ran"
    path = write_zip(tmp_path / "pytorch_model.bin", pickle.dumps({"w": ATTACKS[refused](marker)}, protocol))
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: {REFUSED}{refused}. refusing to load it")):
        read_torch_state_dict(path)
    assert not marker.exists()
    control = tmp_path / "control"  # the same payload, given to pickle.loads, does run: the check above is not vacuous
    result = pickle.loads(pickle.dumps(ATTACKS[refused](control), protocol))
    if isinstance(result, subprocess.Popen):
        result.wait()
    assert control.exists()


@pytest.mark.parametrize("slot", ["state dict", "magic number"])
def test_refuses_a_legacy_pickle_that_runs_code(tmp_path, slot):
    marker = tmp_path / "ran"
    payload = pickle.dumps({"w": ATTACKS["builtins.exec"](marker)}, protocol=2)
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(LEGACY_HEADER + payload if slot == "state dict" else payload)
    message = f"{REFUSED}builtins.exec" if slot == "state dict" else "expected a PyTorch file (torch.save zip"
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: {message}")):
        read_torch_state_dict(path)
    assert not marker.exists()


@pytest.mark.parametrize("offset, shape, stride", [(3, (2,), (1,)), (0, (2, 2), (1000, 1)), (4, (), ())])
def test_refuses_a_view_outside_its_storage(tmp_path, offset, shape, stride):
    path = write_zip(tmp_path / "w.bin", tensor_pickle(offset, shape, stride), {"0": bytes(16)})
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: expected tensor w inside its storage of 4 elements")):
        read_torch_state_dict(path)


@pytest.mark.parametrize("build", [{"stride": (-1,)}, {"shape": (-4,)}, {"shape": (1, 2)}, {"offset": (1,)}])
def test_refuses_a_tensor_rewritten_after_its_checks(tmp_path, build):
    path = write_zip(tmp_path / "w.bin", tensor_pickle(3, (1,), (1,), build=build), {"0": bytes(16)})
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: expected tensor w as a storage, offset, shape")):
        read_torch_state_dict(path)


@pytest.mark.parametrize("name, size", [("bert-zip.bin", 0.5), ("bert-zip.bin", 0.99), ("bert-legacy.bin", 0.3),
                                        ("bert-legacy.bin", 0.99)])
def test_truncated_file(tmp_path, name, size):
    data = open(os.path.join(FIXTURES, name), "rb").read()
    path = tmp_path / name
    path.write_bytes(data[: int(len(data) * size)])
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: .*truncated"):
        read_torch_state_dict(path)


def copy_zip(source: str, target, change: dict[str, bytes | None]) -> str:
    """Copies a zip entry by entry; ``change`` maps an entry to its new bytes, or to None to drop it."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            if change.get(info.filename, b"") is not None:
                new.writestr(info, change.get(info.filename) or old.read(info))
    return str(target)


@pytest.mark.parametrize("data, found", [(None, "no such entry"), (b"\0" * 12, "12 bytes")])
def test_missing_or_short_storage_entry(tmp_path, data, found):
    entry = "bert-zip/data/0"  # bert.embeddings.position_ids: 6 int64
    path = copy_zip(os.path.join(FIXTURES, "bert-zip.bin"), tmp_path / "pytorch_model.bin", {entry: data})
    message = f"{path}: expected zip entry {entry} of 48 bytes, found {found}"
    with pytest.raises(CheckpointError, match=re.escape(message)):
        read_torch_state_dict(path)


def test_damaged_storage_bytes(tmp_path):
    data = bytearray(open(os.path.join(FIXTURES, "bert-zip.bin"), "rb").read())
    info = zipfile.ZipFile(os.path.join(FIXTURES, "bert-zip.bin")).getinfo("bert-zip/data/1")
    name_size, extra_size = struct.unpack("<HH", data[info.header_offset + 26: info.header_offset + 30])
    data[info.header_offset + 30 + name_size + extra_size] ^= 0xFF  # first byte of the storage: the CRC no longer fits
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=rf"{re.escape(str(path))}: .*Bad CRC-32"):
        read_torch_state_dict(path, broadcast=WITH_TEST_BROADCAST)


@pytest.mark.parametrize("content, found", [
    (b"", "found neither"), (b"config = 1\nhidden = 2\n", "found neither"), (bytes(range(256)), "found neither"),
    (b"".join(pickle.dumps(obj, 2) for obj in (MAGIC_NUMBER, 999, SYS_INFO)), "found protocol 999")])
def test_not_a_pytorch_file(tmp_path, content, found):
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: expected a .*PyTorch file.*{found}"):
        read_torch_state_dict(path)


def test_a_zip_that_is_not_a_pytorch_file(tmp_path):
    np.savez(tmp_path / "weights.npz", w=np.zeros(2))
    with pytest.raises(CheckpointError, match=r"weights.npz: expected a PyTorch file .* found a zip without data.pkl"):
        read_torch_state_dict(tmp_path / "weights.npz")


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="nothing.bin: expected a readable file, found FileNotFoundError"):
        read_torch_state_dict(tmp_path / "nothing.bin")


@pytest.mark.parametrize("state, found", [([1, 2], "a pickled list"), ({"w": 1}, "a value of type int under 'w'"),
                                          ({"model": {}}, "a value of type dict under 'model'"),
                                          ({3: 1}, "the key 3, not a string")])
def test_not_a_dict_of_tensors(tmp_path, state, found):
    path = write_zip(tmp_path / "pytorch_model.bin", pickle.dumps(state, protocol=2))
    with pytest.raises(CheckpointError, match=re.escape(f"{path}: expected a PyTorch state dict of tensors (weights "
                                                        f"only), found {found}")):
        read_torch_state_dict(path)


# --------------------------------------------------------------------------- hostile views and sizes
@pytest.mark.parametrize("shape, strides, found", [
    ((16384, 16384), (0, 0), "a view of 268435456 elements"), ((1 << 20, 1 << 20), (0, 0), "1099511627776 elements"),
    ((4, 2), (1 << 64, 1), f"found {1 << 64} (shape"), ((1 << 70, 1), (0, 1), f"found {1 << 70} (shape"),
    ((1,) * 100, (1,) * 100, "found 100 dimensions"), ((1,) * 9, (1,) * 9, "found 9 dimensions")])
def test_a_hostile_view_is_refused_when_the_file_opens(tmp_path, shape, strides, found):
    path = torch_zip(tmp_path / "pytorch_model.bin", {"w": ("0", 1, 0, shape, strides)}, {"0": bytes(4)})
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: expected tensor w .*{re.escape(found)}"):
        TorchFile(path)


def test_only_known_broadcast_buffers_repeat_elements(tmp_path):
    tensors = {"bert.embeddings.position_ids": ("0", 4, 0, (1, 4), (0, 1)),
               "embeddings.token_type_ids": ("0", 4, 0, (3, 4), (0, 1))}
    path = torch_zip(tmp_path / "pytorch_model.bin", tensors, {"0": np.arange(4, dtype="<f4").tobytes()})
    weights = read_torch_state_dict(path)
    np.testing.assert_array_equal(weights["embeddings.token_type_ids"], np.tile(np.arange(4, dtype=np.float32), (3, 1)))
    path = torch_zip(tmp_path / "other.bin", {"bert.pooler.ids": ("0", 4, 0, (3, 4), (0, 1))}, {"0": bytes(16)})
    with pytest.raises(CheckpointError, match="expected tensor bert.pooler.ids of at most the 4 elements of its "
                                              r"storage, found a view of 12 elements .* only a broadcast buffer"):
        TorchFile(path)


@pytest.mark.parametrize("shape, strides, offset", [((5, 3), (1, 5), 0), ((4, 2), (3, 1), 1), ((6, 1), (2, 1), 2),
                                                    ((2, 3, 2), (0, 1, 3), 0), ((3,), (0,), 7)])
def test_views_read_in_pieces_give_numpys_values(tmp_path, shape, strides, offset, monkeypatch):
    import kerasbert.weights.torch_pickle as torch_pickle

    monkeypatch.setattr(torch_pickle, "_PIECE", 1)  # as small as a piece can be: every row read on its own
    storage = np.arange(16, dtype="<f4")
    name = "x.position_ids"  # may repeat elements
    for compression in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        path = torch_zip(tmp_path / f"{compression}.bin", {name: ("0", 16, offset, shape, strides)},
                         {"0": storage.tobytes()}, compression)
        expected = np.lib.stride_tricks.as_strided(storage[offset:], shape, [4 * s for s in strides])
        np.testing.assert_array_equal(TorchFile(path).get(name), expected, strict=True)


MEMORY_PROBE = r"""
import json, sys
from kerasbert.weights.torch_pickle import TorchFile

def status_kib(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

expected = {name: tuple(shape) for name, shape in json.loads(sys.argv[2]).items()}
file = TorchFile(sys.argv[1])
with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) starts again from the resident size now
    f.write("5")
baseline = status_kib("VmRSS")
sums = {}
for name, shape in file.shapes().items():
    if expected.get(name) == shape:  # the loader's check: a name and shape it expects, else never read
        sums[name] = float(file.get(name).sum())  # one tensor alive at a time, as a loader reads them
print(json.dumps({"read": sorted(sums), "growth_kib": status_kib("VmHWM") - baseline, "sums": sums}))
"""


def test_reading_a_hostile_file_holds_at_most_twice_the_largest_expected_tensor(tmp_path):
    """A 1 GiB storage, deflated to a few megabytes and declared correctly, under three tensors: one of a shape the
    loader does not expect (never read), one expected at the storage's far end, one expected with rows 32768
    elements apart (its view spans the whole storage). The largest expected tensor is 32 MiB: reading them one after
    the other may grow the process by at most twice that, measured in a fresh process as its peak resident size
    (VmHWM, reset before reading; ru_maxrss would carry the parent's peak across fork and exec) over its resident
    size before reading."""
    numel, rows, cols = 1 << 28, 8192, 1024
    tensors = {"big": ("0", numel, 0, (16384, 16384), (16384, 1)),
               "far": ("0", numel, numel - rows * cols, (rows, cols), (cols, 1)),
               "gapped": ("0", numel, 0, (rows, cols), (32768, 1))}
    path = tmp_path / "pytorch_model.bin"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("archive/data.pkl", state_dict_pickle(tensors))
        with archive.open("archive/data/0", "w", force_zip64=True) as entry:
            ones = np.ones(1 << 22, "<f4").tobytes()  # 16 MiB
            for _ in range(64):
                entry.write(ones)
    assert os.path.getsize(path) < 8 << 20
    expected = {"big": (rows, cols), "far": (rows, cols), "gapped": (rows, cols)}
    result = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(path), json.dumps(expected)],
                            capture_output=True, text=True, check=True, timeout=300)
    found = json.loads(result.stdout)
    assert found["read"] == ["far", "gapped"]
    assert found["sums"] == {"far": rows * cols, "gapped": rows * cols}
    assert found["growth_kib"] <= 2 * rows * cols * 4 // 1024, found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(0, 5), min_size=0, max_size=4),
       strides=st.lists(st.integers(0, 12), min_size=4, max_size=4), offset=st.integers(0, 70),
       piece=st.sampled_from([1, 4, 1 << 16]), name=st.sampled_from(["w", "a.position_ids"]))
def test_any_view_reads_as_numpy_sees_it_or_is_refused(tmp_path, monkeypatch, shape, strides, offset, piece, name):
    """Any offset, shape and strides over a 64-element storage: read in pieces of any size, the tensor equals NumPy's
    strided view, or the file is refused as it opens (outside the storage, or more elements than it holds)."""
    import kerasbert.weights.torch_pickle as torch_pickle

    monkeypatch.setattr(torch_pickle, "_PIECE", piece)
    storage = np.arange(64, dtype="<f4")
    strides = tuple(strides[:len(shape)])
    path = torch_zip(tmp_path / "p.bin", {name: ("0", 64, offset, tuple(shape), strides)}, {"0": storage.tobytes()},
                     zipfile.ZIP_DEFLATED)
    span = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))
    numel = int(np.prod(shape))
    if span and offset + span > 64 or numel > 64 and name == "w":  # an empty view reaches no element
        with pytest.raises(CheckpointError, match=re.escape(f"{path}: expected tensor {name} ")):
            TorchFile(path)
        return
    expected = np.lib.stride_tricks.as_strided(storage[offset:], tuple(shape), [4 * s for s in strides])
    np.testing.assert_array_equal(TorchFile(path).get(name), expected, strict=True)
