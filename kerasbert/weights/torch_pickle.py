"""PyTorch ``torch.save`` state dicts (``pytorch_model.bin``) as NumPy arrays, without torch and without running code.

A ``torch.save`` file is a pickle, and unpickling calls whatever functions the pickle names. This reader resolves
names through an allow-list (the globals that torch's own ``weights_only=True`` loader accepts in a state dict),
each mapped to a NumPy stand-in, and refuses every other name before anything is imported or called. It never
imports torch, so a machine with torch installed takes the same path. Both layouts ``torch.save`` writes are read:

- zip (the default since torch 1.6): ``<archive>/data.pkl``, one ``<archive>/data/<key>`` entry per storage,
  ``<archive>/byteorder``;
- legacy (``_use_new_zipfile_serialization=False``): four pickles (magic number, protocol version, system info,
  the state dict), a pickled list of storage keys, then each storage as an int64 element count and its bytes.

A tensor is a view (offset, shape, strides, in elements) into a storage that other tensors may share (tied
weights, a transpose). `TorchFile` reads the pickle alone when it opens a file: names, shapes and dtypes, each
view checked against its storage (at most 8 dimensions, sizes and strides below 2**63, every element inside the
storage, no more elements than the storage holds unless the name is a known broadcast buffer such as
``position_ids``). A tensor's bytes are read only when `TorchFile.get` asks for it, after the caller has checked
its name and shape, and only the part of its storage the view covers, in pieces: reading never holds more than
the tensor and one piece of at most half its size, whatever sizes the file declares.
"""

from __future__ import annotations

import _compat_pickle
import collections
import contextlib
import dataclasses
import io
import os
import pickle
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import numpy as np
from numpy.lib.stride_tricks import as_strided

from kerasbert.errors import CheckpointError, fail

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C  # first pickle of a legacy file (torch.serialization.MAGIC_NUMBER)
PROTOCOL_VERSION = 1001  # second pickle of a legacy file (torch.serialization.PROTOCOL_VERSION)
_EXPECTED = "a PyTorch state dict of tensors (weights only)"
_DAMAGED = "the file is truncated or damaged; download it again"
MAX_RANK = 8  # BERT's tensors have at most 2 dimensions; torch allows 64
MAX_PICKLE = 64 << 20  # bytes of data.pkl: a BERT state dict's pickle is tens of kilobytes
BROADCAST_BUFFERS = re.compile(r"(^|\.)(position_ids|token_type_ids)$")  # buffers torch saves as expand()ed views
_MAX_BROADCAST = 1 << 24  # elements a broadcast buffer may have (position_ids: one row of max_position_embeddings)
_PIECE = 1 << 16  # elements read at once at least (a piece is at most max(this, half the tensor's elements))

# torch dtype name -> NumPy dtype of its little-endian bytes. bfloat16 is read as raw 16 bits, then widened.
_NUMPY = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "bfloat16": "<u2", "int64": "<i8", "int32": "<i4",
          "int16": "<i2", "int8": "i1", "uint8": "u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
          "bool": "?", "complex64": "<c8", "complex128": "<c16"}
# Storage class named in a persistent id -> the dtype of its elements (UntypedStorage holds bytes).
_STORAGES = {"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
             "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16",
             "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool", "ComplexFloatStorage": "complex64",
             "ComplexDoubleStorage": "complex128", "UntypedStorage": "uint8"}


@dataclasses.dataclass
class _Dtype:
    """A torch dtype or storage class named in the pickle (``torch.float32``, ``torch.FloatStorage``)."""

    name: str


_TENSOR_CLASS = object()  # torch.Tensor / torch.nn.Parameter, as named by _rebuild_from_type_v2


@dataclasses.dataclass(eq=False)
class _Storage:
    """One storage of the file: its key, its size as the pickle declares it, and where its bytes start (legacy)."""

    key: str
    numel: int
    itemsize: int
    start: int = -1


@dataclasses.dataclass
class _Typed:
    """A storage as a persistent id names it: the storage class gives its tensors' dtype."""

    storage: _Storage | None
    dtype: str | None


@dataclasses.dataclass
class _Tensor:
    """A tensor as the pickle describes it: a strided view of a storage, in elements of ``dtype``."""

    storage: _Storage | None
    offset: Any
    shape: Any
    stride: Any
    dtype: str | None


class _Unpickler(pickle.Unpickler):
    """Unpickles only what a tensor state dict holds, into the stand-ins above; any other global is refused."""

    def __init__(self, file: BinaryIO, where: str) -> None:
        super().__init__(file)
        self.where = where
        self.storages: dict[str, _Storage] = {}

    def refuse(self, found: str, hint: str = "") -> CheckpointError:
        return fail(CheckpointError, self.where, _EXPECTED, found, hint)

    def find_class(self, module: str, name: str) -> Any:
        # A protocol-2 pickle names Python 2 modules (__builtin__.exec): resolve them as pickle itself would.
        fixed = _compat_pickle.IMPORT_MAPPING.get(module, module), name
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), fixed)
        if module in ("torch", "torch.cuda", "torch.storage") and name in _STORAGES:
            return _Dtype(_STORAGES[name])
        if module == "torch" and name in _NUMPY:
            return _Dtype(name)
        allowed = {("collections", "OrderedDict"): collections.OrderedDict,
                   ("torch._utils", "_rebuild_tensor"): self.rebuild_tensor,
                   ("torch._utils", "_rebuild_tensor_v2"): self.rebuild_tensor,
                   ("torch._utils", "_rebuild_tensor_v3"): self.rebuild_tensor_v3,
                   ("torch._utils", "_rebuild_parameter"): self.rebuild_parameter,
                   ("torch._utils", "_rebuild_parameter_with_state"): self.rebuild_parameter,
                   ("torch._tensor", "_rebuild_from_type_v2"): self.rebuild_from_type_v2,
                   ("torch", "Tensor"): _TENSOR_CLASS, ("torch.nn.parameter", "Parameter"): _TENSOR_CLASS}
        if (module, name) not in allowed:
            raise self.refuse(f"a pickle that calls {module}.{name}", "refusing to load it, as unpickling would run "
                              "that code; if you trust the file, load it with torch and save its state_dict again")
        return allowed[module, name]

    def persistent_load(self, pid: Any) -> _Typed:
        """``('storage', storage class, key, location, numel[, view])`` -> the storage and its element dtype."""
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage" and isinstance(pid[1], _Dtype)
                and isinstance(pid[2], str) and type(pid[4]) is int and pid[4] >= 0):
            raise self.refuse(f"a persistent id {pid!r:.80}")
        if len(pid) == 6 and pid[5] is not None:
            raise self.refuse(f"storage {pid[2]} as a view of another", "load it with torch and save it again")
        dtype = pid[1].name
        storage = self.storages.setdefault(pid[2], _Storage(pid[2], pid[4], np.dtype(_NUMPY[dtype]).itemsize))
        return _Typed(storage, dtype)

    def rebuild_tensor(self, storage: Any, offset: Any, shape: Any, stride: Any, requires_grad: Any = False,
                       hooks: Any = None, metadata: Any = None) -> _Tensor:
        """``torch._utils._rebuild_tensor(_v2)``: the dtype is the storage's."""
        return self.rebuild_tensor_v3(storage, offset, shape, stride, requires_grad, hooks, None, metadata)

    def rebuild_tensor_v3(self, storage: Any, offset: Any, shape: Any, stride: Any, requires_grad: Any,
                          hooks: Any, dtype: Any, metadata: Any = None) -> _Tensor:
        """``torch._utils._rebuild_tensor_v3``: an untyped storage read as ``dtype`` (uint16/32/64 and newer)."""
        if metadata:
            raise self.refuse(f"a tensor with conjugate or negative bits set ({metadata!r:.80})")
        typed = storage if isinstance(storage, _Typed) else _Typed(None, None)  # checked in _to_numpy, once built
        name = typed.dtype if dtype is None else dtype.name if isinstance(dtype, _Dtype) else None
        return _Tensor(typed.storage, offset, shape, stride, name)

    def rebuild_parameter(self, data: Any, *_: Any) -> Any:
        """``torch._utils._rebuild_parameter(_with_state)``: a Parameter is its tensor."""
        return data

    def rebuild_from_type_v2(self, func: Any, new_type: Any, args: Any, state: Any) -> Any:
        """``torch._tensor._rebuild_from_type_v2``: a tensor carrying Python attributes, which are dropped."""
        if new_type is not _TENSOR_CLASS or not callable(func) or not isinstance(args, tuple):
            raise self.refuse(f"a tensor of type {new_type!r:.80}")
        return func(*args)


def _unpickle(unpickler: _Unpickler, what: str) -> Any:
    """Runs ``unpickler.load()``, turning whatever a damaged pickle raises into a CheckpointError."""
    try:
        return unpickler.load()
    except CheckpointError:
        raise
    except Exception as e:  # a damaged pickle can raise nearly anything: EOFError, TypeError, UnpicklingError...
        raise fail(CheckpointError, unpickler.where, f"a readable {what}", f"{type(e).__name__}: {e}",
                   "the file is truncated or damaged; download it again") from None


def _damaged(where: str, e: Exception) -> CheckpointError:
    return fail(CheckpointError, where, "a complete zip archive (torch.save format)", f"{type(e).__name__}: {e}",
                _DAMAGED)


def _zip_meta(archive: zipfile.ZipFile, where: str) -> tuple[Any, dict[str, _Storage], str]:
    """The unpickled data.pkl, its storages (each checked against the size of its entry) and the entries' prefix."""
    names = set(archive.namelist())
    pickles = sorted(name for name in names if name.endswith("/data.pkl") and name.count("/") == 1)
    if not pickles:
        raise fail(CheckpointError, where, "a PyTorch file (a zip holding <archive>/data.pkl)",
                   "a zip without data.pkl", "is it a .keras or .npz file?")
    prefix = pickles[0][: -len("data.pkl")]
    byteorder = archive.read(prefix + "byteorder") if prefix + "byteorder" in names else b"little"
    if byteorder != b"little":
        raise fail(CheckpointError, where, "a little-endian PyTorch file", f"byteorder {byteorder!r:.20}")
    size = archive.getinfo(pickles[0]).file_size  # a deflated entry can declare, and inflate to, any size
    if size > MAX_PICKLE:
        raise fail(CheckpointError, where, f"a data.pkl of at most {MAX_PICKLE} bytes", f"{size} bytes", _DAMAGED)
    unpickler = _Unpickler(io.BytesIO(archive.read(pickles[0])), where)
    state = _unpickle(unpickler, "data.pkl")
    for storage in unpickler.storages.values():
        entry = f"{prefix}data/{storage.key}"
        size = archive.getinfo(entry).file_size if entry in names else None
        if size != storage.numel * storage.itemsize:  # checked before reading: a zip can declare any size
            raise fail(CheckpointError, where, f"zip entry {entry} of {storage.numel * storage.itemsize} bytes",
                       "no such entry" if size is None else f"{size} bytes", _DAMAGED)
    return state, unpickler.storages, prefix


def _legacy_meta(file: BinaryIO, where: str) -> tuple[Any, dict[str, _Storage]]:
    """The unpickled state dict and its storages, each with where its bytes start in the file (not read)."""
    try:  # one unpickler per pickle, as torch does: a pickle's memo indices start afresh
        magic = _Unpickler(file, where).load()
    except Exception:  # whatever the first bytes raise, they are not a PyTorch file's
        magic = None
    if type(magic) is not int or magic != MAGIC_NUMBER:
        raise fail(CheckpointError, where, "a PyTorch file (torch.save zip, or legacy pickle with its magic number)",
                   "neither", "pass the pytorch_model.bin that torch.save wrote")
    protocol = _unpickle(_Unpickler(file, where), "legacy header")
    info = _unpickle(_Unpickler(file, where), "legacy header")
    if protocol != PROTOCOL_VERSION or not isinstance(info, dict) or info.get("little_endian") is not True:
        raise fail(CheckpointError, where, f"a little-endian legacy PyTorch file of protocol {PROTOCOL_VERSION}",
                   f"protocol {protocol!r:.20}, system info {info!r:.80}")
    unpickler = _Unpickler(file, where)
    state = _unpickle(unpickler, "state dict pickle")
    keys = _unpickle(_Unpickler(file, where), "list of storage keys")
    if not isinstance(keys, list) or set(keys) != set(unpickler.storages):
        raise fail(CheckpointError, where, f"the keys of the {len(unpickler.storages)} storages the pickle uses",
                   f"{keys!r:.80}")
    size = os.fstat(file.fileno()).st_size
    for key in keys:
        storage = unpickler.storages[key]
        header = file.read(8)
        count = struct.unpack("<q", header)[0] if len(header) == 8 else None
        left = size - file.tell()
        if count is None or count != storage.numel or count * storage.itemsize > left:
            found = "the end of the file" if count is None else f"{count} elements, {left} bytes left in the file"
            raise fail(CheckpointError, where, f"storage {key} of {storage.numel} elements", found, _DAMAGED)
        storage.start = file.tell()
        file.seek(count * storage.itemsize, os.SEEK_CUR)
    return state, unpickler.storages


@dataclasses.dataclass(frozen=True)
class _View:
    """A tensor of the file, checked: ``shape`` elements of ``dtype`` at ``offset`` and ``strides`` in a storage."""

    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=object))

    @property
    def span(self) -> int:
        """Elements of the storage from the view's first to its last, or 0 for an empty view."""
        return 0 if 0 in self.shape else 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides, strict=True))


def _checked_view(name: str, tensor: _Tensor, where: str, broadcast: re.Pattern) -> _View:
    """``tensor`` as a `_View`, once its rank, sizes, strides and extent are checked against its storage."""
    def naturals(values: Any) -> bool:
        return isinstance(values, (tuple, list)) and all(type(v) is int and v >= 0 for v in values)

    what = f"tensor {name}"
    # Checked here, after unpickling: a BUILD opcode in the pickle could rewrite a tensor after its rebuild call.
    if not (isinstance(tensor.storage, _Storage) and isinstance(tensor.dtype, str) and tensor.dtype in _NUMPY
            and naturals([tensor.offset]) and naturals(tensor.shape) and naturals(tensor.stride)
            and len(tensor.shape) == len(tensor.stride)):
        found = (tensor.offset, tensor.shape, tensor.stride, tensor.dtype)
        raise fail(CheckpointError, where, f"{what} as a storage, offset, shape, strides and dtype",
                   f"{found!r:.120}", "the file is damaged")
    if len(tensor.shape) > MAX_RANK:
        raise fail(CheckpointError, where, f"{what} of at most {MAX_RANK} dimensions",
                   f"{len(tensor.shape)} dimensions", "the file is damaged or hostile")
    big = [v for v in (tensor.offset, *tensor.shape, *tensor.stride) if v >= 1 << 63]
    if big:
        raise fail(CheckpointError, where, f"{what} with offset, sizes and strides below 2**63",
                   f"{big[0]} (shape {tuple(tensor.shape)!r:.80}, strides {tuple(tensor.stride)!r:.80})",
                   "the file is damaged or hostile")
    view = _View(tensor.storage, tensor.offset, tuple(tensor.shape), tuple(tensor.stride), tensor.dtype)
    storage = view.storage.numel * view.storage.itemsize // np.dtype(_NUMPY[view.dtype]).itemsize
    if view.span and view.offset + view.span > storage:  # as_strided checks no bounds: it would read past the end
        raise fail(CheckpointError, where, f"{what} inside its storage of {storage} elements",
                   f"a view reaching element {view.offset + view.span - 1}", "the file is damaged")
    limit = _MAX_BROADCAST if broadcast.search(name) else storage
    if view.numel > limit:
        raise fail(CheckpointError, where, f"{what} of at most the {limit} elements of its storage",
                   f"a view of {view.numel} elements (shape {view.shape!r:.60}, strides {view.strides!r:.60})",
                   "only a broadcast buffer (position_ids, token_type_ids) may repeat elements; the file is damaged "
                   "or hostile")
    return view


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides, in elements, of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def _fill(read: Callable[..., np.ndarray], view: _View, out: np.ndarray, budget: int) -> None:
    """Copies ``view`` into ``out`` (C-contiguous): a contiguous view is read straight into it, any other in pieces
    of at most ``budget`` elements of the storage."""
    span = view.span
    if span == 0:
        return
    if span == view.numel and view.strides == _c_strides(view.shape):  # the common case: straight into ``out``
        read(view.offset, span, into=out)
        return
    if span <= budget or not view.shape:
        flat = read(view.offset, span)
        out[...] = as_strided(flat, view.shape, [s * flat.itemsize for s in view.strides], writeable=False)
        return
    first, stride, inner = view.shape[0], view.strides[0], dataclasses.replace(
        view, shape=view.shape[1:], strides=view.strides[1:])
    if first == 1 or stride == 0:  # one row, or the same row repeated: read it once
        _fill(read, inner, out[0], budget)
        out[1:] = out[0]
        return
    rows = max(1, (budget - inner.span) // stride + 1)  # rows whose span together fits the budget
    for begin in range(0, first, rows):
        count = min(rows, first - begin)
        block = dataclasses.replace(view, offset=view.offset + begin * stride, shape=(count, *view.shape[1:]))
        _fill(read, block, out[begin:begin + count], budget)


class _Reader:
    """Elements of one storage: seeks in a plain file; in a zip entry, reads forward, inflating and dropping what it
    skips a megabyte at a time (a backward read opens the entry again)."""

    def __init__(self, open_stream: Callable[[], BinaryIO], start: int, dtype: np.dtype, plain: bool):
        self.open_stream, self.start, self.dtype, self.plain = open_stream, start, dtype, plain
        self.stream, self.position = open_stream(), 0

    def __call__(self, offset: int, count: int, into: np.ndarray | None = None) -> np.ndarray:
        target = self.start + offset * self.dtype.itemsize
        if self.plain:
            self.stream.seek(target)
            self.position = target
        elif target < self.position:
            self.stream.close()
            self.stream, self.position = self.open_stream(), 0
        while self.position < target:
            skipped = len(self.stream.read(min(1 << 20, target - self.position)))
            if not skipped:
                raise EOFError("the storage ends early")
            self.position += skipped
        data = np.empty(count * self.dtype.itemsize, np.uint8) if into is None else into.reshape(-1).view(np.uint8)
        filled = 0
        while filled < len(data):  # in pieces, into one buffer: never a second copy of the bytes
            piece = self.stream.read(min(1 << 20, len(data) - filled))
            if not piece:
                raise EOFError("the storage ends early")
            data[filled:filled + len(piece)] = np.frombuffer(piece, np.uint8)
            filled += len(piece)
        self.position += filled
        return data.view(self.dtype)

    def close(self) -> None:
        self.stream.close()


class TorchFile:
    """A ``torch.save`` state dict opened for reading: names, shapes and dtypes at once, each tensor's bytes on
    demand. Nothing of the file is run, and no tensor is read before `get` asks for it by name.

    Args:
        path: str | os.PathLike. a ``pytorch_model.bin`` in the zip (torch >= 1.6) or the legacy format.
        broadcast: regex. names that may repeat elements of their storage (``expand``ed buffers).

    Example:
    >>> import os, pickle, tempfile, zipfile
    >>> path = os.path.join(tempfile.mkdtemp(), "pytorch_model.bin")
    >>> with zipfile.ZipFile(path, "w") as archive:  # a pickle that names eval, as an attack would
    ...     archive.writestr("archive/data.pkl", pickle.dumps(eval))
    >>> try:
    ...     TorchFile(path)
    ... except CheckpointError as e:
    ...     print(str(e).split(", found ")[1].split(". ")[0])
    a pickle that calls builtins.eval
    """

    def __init__(self, path: str | os.PathLike, broadcast: re.Pattern = BROADCAST_BUFFERS):
        self.path = where = os.fspath(path)
        self._prefix = None
        try:
            with open(where, "rb") as file:
                if file.read(4) == b"PK\x03\x04":
                    file.seek(0)
                    with zipfile.ZipFile(file) as archive:
                        state, _, self._prefix = _zip_meta(archive, where)
                else:
                    file.seek(0)
                    state, _ = _legacy_meta(file, where)
        except CheckpointError:
            raise
        except OSError as e:
            if isinstance(e, FileNotFoundError | PermissionError | IsADirectoryError):
                raise fail(CheckpointError, where, "a readable file", f"{type(e).__name__}: {e.strerror}") from None
            raise _damaged(where, e) from None
        except (zipfile.BadZipFile, EOFError, ValueError) as e:
            raise _damaged(where, e) from None
        if not isinstance(state, dict):
            raise fail(CheckpointError, where, _EXPECTED, f"a pickled {type(state).__name__}")
        for key, value in state.items():
            if not isinstance(key, str):
                raise fail(CheckpointError, where, _EXPECTED, f"the key {key!r:.40}, not a string")
            if not isinstance(value, _Tensor):
                raise fail(CheckpointError, where, _EXPECTED,
                           f"a value of type {type(value).__name__} under {key!r:.60}",
                           "pass the state dict itself (e.g. checkpoint['model']), saved with torch.save")
        self._views = {key: _checked_view(key, value, where, broadcast) for key, value in state.items()}

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Each tensor's shape, as the file declares it (checked against its storage)."""
        return {key: view.shape for key, view in self._views.items()}

    @contextlib.contextmanager
    def _reader(self, view: _View) -> Iterator[_Reader]:
        dtype = np.dtype(_NUMPY[view.dtype])
        with open(self.path, "rb") as file:
            if self._prefix is None:
                reader = _Reader(lambda: file, view.storage.start, dtype, plain=True)
                yield reader
                return
            with zipfile.ZipFile(file) as archive:
                entry = f"{self._prefix}data/{view.storage.key}"
                reader = _Reader(lambda: archive.open(entry), 0, dtype, plain=False)
                try:
                    yield reader
                finally:
                    reader.close()

    def get(self, name: str) -> np.ndarray:
        """Reads one tensor: C-contiguous, native byte order, bfloat16 widened to float32.

        Only the part of the storage the view covers is read: straight into the result when the view is
        contiguous, else in pieces of at most half its elements (65536 at least).
        """
        view = self._views[name]
        out = np.empty(view.shape, np.dtype(_NUMPY[view.dtype]))  # the file's little-endian bytes
        try:
            with self._reader(view) as reader:
                _fill(reader, view, out, max(view.numel // 2, _PIECE))
        except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as e:
            raise fail(CheckpointError, self.path, f"the bytes of tensor {name}", f"{type(e).__name__}: {e}",
                       _DAMAGED) from None
        if view.dtype == "bfloat16":  # bfloat16 is the upper half of a float32
            return (out.astype(np.uint32) << 16).view(np.float32)
        return out.astype(out.dtype.newbyteorder("="), copy=False)


def read_torch_state_dict(path: str | os.PathLike, broadcast: re.Pattern = BROADCAST_BUFFERS) -> dict[str, np.ndarray]:
    """Reads every tensor of a ``torch.save`` state dict into NumPy, without torch and without running its code.

    A loader that knows which tensors it needs opens the file as a `TorchFile` and reads only those.

    Args:
        path: str | os.PathLike. a ``pytorch_model.bin`` in the zip (torch >= 1.6) or the legacy format.
        broadcast: regex. names that may repeat elements of their storage (``expand``ed buffers).

    Returns:
        Each tensor by its key, with its shape and its dtype as stored (float32, float16, int64...), except
        bfloat16, which NumPy lacks: it comes back as float32, exactly.

    Raises:
        CheckpointError: the file is not a PyTorch file, is truncated or damaged, is not a dict of tensors, declares
            a view its storage cannot hold, or its pickle names any function outside a state dict's
            (``os.system``...): nothing of it is run.

    Example:
    >>> import os, pickle, tempfile, zipfile
    >>> path = os.path.join(tempfile.mkdtemp(), "pytorch_model.bin")
    >>> with zipfile.ZipFile(path, "w") as archive:  # a state dict without tensors
    ...     archive.writestr("archive/data.pkl", pickle.dumps({}))
    >>> read_torch_state_dict(path)
    {}

    On a real file: ``read_torch_state_dict("bert-base-chinese/pytorch_model.bin")`` gives
    ``{"bert.embeddings.word_embeddings.weight": <array (21128, 768) float32>, ...}``.
    """
    file = TorchFile(path, broadcast)
    return {key: file.get(key) for key in file.shapes()}
