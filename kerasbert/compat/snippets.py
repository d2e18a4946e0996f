"""``bert4keras.snippets`` -> ``kerasbert.compat.snippets``: bert4keras 0.11.5's data helpers, same signatures.

`sequence_padding`, `truncate_sequences`, `text_segmentate`, `to_array`, `DataGenerator`, `open`,
`parallel_apply`, `parallel_apply_generator`, `ViterbiDecoder` and `AutoRegressiveDecoder` (beam search and sampling
with bert4keras's ids, for sampling under the same NumPy seed); the string, sequence and decorator helpers of
`kerasbert.compat._strings`; `WebServing` (`kerasbert.compat._web`, on Starlette and uvicorn). Misuse raises
`kerasbert.errors.DataError` (a `ValueError`, as bert4keras raised) instead of an assertion or a NumPy error; a
decoder's ``predict`` whose scores do not fit raises `kerasbert.errors.ModelError`. `open` lives only here:
kerasbert itself never shadows the builtin. ``uniout`` (a Python 2 printing module bert4keras imports on demand) is
None, as bert4keras gives it on Python 3.
"""

from __future__ import annotations

import builtins
import itertools
import json
import os

import numpy as np

from kerasbert.compat._decoder import AutoRegressiveDecoder
from kerasbert.compat._parallel import parallel_apply, parallel_apply_generator
from kerasbert.compat._strings import (
    Hook,
    convert_to_str,
    convert_to_unicode,
    delete_arguments,
    insert_arguments,
    is_one_of,
    is_py2,
    is_string,
    longest_common_subsequence,
    longest_common_substring,
    lowercase_and_normalize,
    orthogonally_resize,
    softmax,
    string_matching,
    strQ2B,
)
from kerasbert.compat._web import WebServing
from kerasbert.errors import DataError, fail
from kerasbert.modeling.crf import ViterbiDecoder

__all__ = ["AutoRegressiveDecoder", "DataGenerator", "Hook", "ViterbiDecoder", "WebServing", "convert_to_str",
           "convert_to_unicode", "delete_arguments", "insert_arguments", "is_one_of", "is_py2", "is_string",
           "longest_common_subsequence", "longest_common_substring", "lowercase_and_normalize", "open",
           "orthogonally_resize", "parallel_apply", "parallel_apply_generator", "sequence_padding", "softmax",
           "strQ2B", "string_matching", "text_segmentate", "to_array", "truncate_sequences", "uniout"]

uniout = None


def to_array(*args):
    """Each argument as a NumPy array; one argument gives the array itself, several a list."""
    arrays = [np.array(a) for a in args]
    return arrays[0] if len(arrays) == 1 else arrays


def sequence_padding(inputs, length=None, value=0, seq_dims=1, mode="post"):
    """Pad (or cut) the first ``seq_dims`` axes of every row to one length and stack the rows.

    Rows longer than ``length`` keep their first items, in both modes, as in bert4keras.

    Args:
        inputs: list of array-likes. the rows; their axes after the first ``seq_dims`` must agree.
        length: int or list of int. the padded length of each sequence axis; ``None``: the longest row's.
            An int applies to every sequence axis.
        value: the padding value.
        seq_dims: int. how many leading axes of each row are padded.
        mode: str. ``"post"`` pads at the end, ``"pre"`` at the start.

    Example:
    >>> sequence_padding([[1, 2, 3], [4]], mode="pre").tolist()
    [[1, 2, 3], [0, 0, 4]]
    """
    if mode not in ("post", "pre"):
        raise fail(DataError, "sequence_padding: mode", '"post" or "pre"', repr(mode))
    rows = [np.asarray(x) for x in inputs]
    if not rows or min(r.ndim for r in rows) < seq_dims:
        found = "no rows" if not rows else f"a row of {min(r.ndim for r in rows)} axes"
        raise fail(DataError, "sequence_padding: inputs", f"rows of at least seq_dims={seq_dims} axes", found)
    inner = sorted({r.shape[seq_dims:] for r in rows})
    if len(inner) > 1:
        raise fail(DataError, "sequence_padding: inputs", f"rows whose axes after the first {seq_dims} agree",
                   f"shapes {inner[0]} and {inner[-1]} there", "raise seq_dims to pad those axes too")
    if length is None:
        length = np.max([r.shape[:seq_dims] for r in rows], axis=0)
    elif np.ndim(length) == 0:
        length = [length] * seq_dims
    if len(length) < seq_dims:
        raise fail(DataError, "sequence_padding: length", f"{seq_dims} lengths (seq_dims)", repr(length))
    padded = []
    for row in rows:
        row = row[tuple(slice(0, n) for n in length[:seq_dims])]
        gaps = [n - size for n, size in zip(length[:seq_dims], row.shape[:seq_dims], strict=True)]
        width = [(0, gap) if mode == "post" else (gap, 0) for gap in gaps] + [(0, 0)] * (row.ndim - seq_dims)
        padded.append(np.pad(row, width, constant_values=value))
    return np.array(padded)


def truncate_sequences(maxlen, indices, *sequences):
    """Pop items from the longest list (the first of equal ones) until the lists total at most ``maxlen`` items.

    As in bert4keras, empty sequences are left out of the returned list, and the lists are cut in place.

    Args:
        maxlen: int. the most items kept, all lists together.
        indices: int or list of int. where each list loses its items (``-1``: the end, ``0``: the start); one
            int for every list, or one per sequence argument.
        *sequences: lists.

    Example:
    >>> truncate_sequences(4, -1, [1, 2, 3], [4, 5])
    [[1, 2], [4, 5]]
    """
    if not isinstance(indices, (list, tuple)):
        indices = [indices] * len(sequences)
    if len(indices) != len(sequences) or maxlen < 0:
        raise fail(DataError, "truncate_sequences", "maxlen >= 0 and one index per sequence",
                   f"maxlen={maxlen}, {len(indices)} indices for {len(sequences)} sequences")
    kept = [(s, i) for s, i in zip(sequences, indices, strict=True) if len(s)]
    if any(not isinstance(s, list) for s, _ in kept):
        raise fail(DataError, "truncate_sequences: sequences", "lists (cut in place)",
                   ", ".join(type(s).__name__ for s, _ in kept))
    lengths = [len(s) for s, _ in kept]
    while sum(lengths) > maxlen:
        longest = int(np.argmax(lengths))
        kept[longest][0].pop(kept[longest][1])
        lengths[longest] -= 1
    return [s for s, _ in kept]


def text_segmentate(text, maxlen, seps="\n", strips=None):
    """Split ``text`` at ``seps[0]`` into pieces of at most ``maxlen`` characters where it can, splitting a piece
    still too long at ``seps[1]``, and so on; each piece keeps its trailing separator.

    Example:
    >>> text_segmentate("ab。cd。ef", 6, seps="。")
    ['ab。cd。', 'ef']
    """
    text = text.strip().strip(strips)
    if not seps or len(text) <= maxlen:
        return [text]
    sep, finer = seps[0], seps[1:]
    pieces = text.split(sep)
    chunks, current = [], ""
    for index, piece in enumerate(pieces):
        if current and piece and len(current) + len(piece) >= maxlen:
            chunks += text_segmentate(current, maxlen, finer, strips)
            current = ""
        current += piece if index == len(pieces) - 1 else piece + sep
    if current:
        chunks += text_segmentate(current, maxlen, finer, strips)
    return chunks


class _IndexedFile:
    """A file that also reads its ``i``-th line by offset (``f[i]``, ``len(f)``); `open` with ``indexable``."""

    def __init__(self, file, indexable):
        self.file = file
        if isinstance(indexable, str) and os.path.exists(indexable):
            with builtins.open(indexable) as f:
                self.offsets = json.load(f)
            return
        self.offsets, offset = [], 0
        while file.readline():
            self.offsets.append(offset)
            offset = file.tell()
        file.seek(0)
        if isinstance(indexable, str):
            with builtins.open(indexable, "w") as f:
                json.dump(self.offsets, f)

    def __getitem__(self, index):
        self.file.seek(self.offsets[index])
        return self.file.readline()

    def __len__(self):
        return len(self.offsets)

    def __iter__(self):
        return iter(self.file)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

    def __getattr__(self, name):
        return getattr(self.file, name)


def open(name, mode="r", encoding=None, errors="strict", indexable=False):  # noqa: A001 (bert4keras's name)
    """The builtin ``open``; with ``indexable`` (True, or a path to cache the offsets as JSON), a file that also
    reads its ``i``-th line as ``f[i]`` and has ``len(f)`` lines."""
    file = builtins.open(name, mode, encoding=encoding, errors=errors)
    return _IndexedFile(file, indexable) if indexable else file


class DataGenerator:
    """bert4keras's batch generator template: subclass it and write ``__iter__(self, random=False)``.

    Args:
        data: a list (or anything with ``len`` and indexing), or an iterable of unknown length.
        batch_size: int. the batch size; ``len(gen)`` is the number of batches, the last one partial.
        buffer_size: int. for data without ``len``, how many items ``sample(random=True)`` shuffles among;
            default ``batch_size * 1000``.
    """

    def __init__(self, data, batch_size=32, buffer_size=None):
        self.data = data
        self.batch_size = batch_size
        self.steps = -(-len(data) // batch_size) if hasattr(data, "__len__") else None
        self.buffer_size = buffer_size or batch_size * 1000

    def __len__(self):
        if self.steps is None:
            raise fail(DataError, "DataGenerator", "data with a length", type(self.data).__name__,
                       "give steps_per_epoch to fit instead of len(generator)")
        return self.steps

    def _shuffled(self):
        """The items in random order: a permutation, or for data without ``len`` a draw from a buffer."""
        if self.steps is not None:
            for i in np.random.permutation(len(self.data)):
                yield self.data[i]
            return
        buffer = []
        for item in self.data:
            buffer.append(item)
            if len(buffer) > self.buffer_size:  # the buffer fills to buffer_size + 1, then gives one per new item
                yield buffer.pop(np.random.randint(len(buffer)))
        while buffer:
            yield buffer.pop(np.random.randint(len(buffer)))

    def sample(self, random=False):
        """Yield ``(is_end, item)`` for every item, ``is_end`` True for the last; shuffled when ``random``."""
        items = self._shuffled() if random else iter(self.data)
        previous = sentinel = object()
        for item in items:
            if previous is not sentinel:
                yield False, previous
            previous = item
        if previous is not sentinel:
            yield True, previous

    def __iter__(self, random=False):
        raise NotImplementedError("DataGenerator subclasses define __iter__(self, random=False)")

    def _forever(self, random, inputs_only=False):
        """Batches forever; inputs (or labels, for a model of several outputs) that are a list come out as a tuple
        (Keras 3's ``fit`` reads a generator's structure and refuses lists), and ``inputs, None`` (a model whose
        loss layer takes the labels as inputs) as the 1-tuple ``(inputs,)``: a ``tf.data`` element cannot hold
        None, and ``fit`` reads a 1-tuple as inputs without labels."""
        def tupled(part):
            return tuple(part) if isinstance(part, list) else part

        while True:
            for batch in self.__iter__(random):
                if inputs_only:
                    yield batch[0]
                elif isinstance(batch, tuple | list) and len(batch) == 2 and batch[1] is None:
                    yield (tupled(batch[0]),)
                elif isinstance(batch, tuple | list):
                    yield tuple(tupled(part) for part in batch)
                else:
                    yield batch

    def forfit(self, random=True):
        """Batches forever, for ``model.fit(gen.forfit(), steps_per_epoch=len(gen))``: a ``tf.data.Dataset``.

        Each batch may be padded to its own length, as bert4keras's examples pad: every dimension but those of
        1 in the first batch is left open (given a plain generator, Keras 3's ``fit`` fixes the lengths its
        first two batches share and fails on a later batch of another length). Iterated directly, it gives
        tensors; a batch ``inputs, None`` (a model whose loss layer takes the labels as inputs) comes out as
        ``(inputs,)``.
        """
        return _open_dataset(lambda: self._forever(random))

    def fortest(self, random=False):
        """Inputs only (each batch's first element), forever, as `forfit` gives them: for ``model.predict``."""
        return _open_dataset(lambda: self._forever(random, inputs_only=True))

    def to_dataset(self, types, shapes, names=None, padded_batch=False):
        """`forfit` as a batched ``tf.data.Dataset``; with ``names`` (a str, a list of str, or one list per
        element of each batch item) the items become dicts keyed by them.

        Args:
            types: the dtype of each element of an item (a nested structure like the items).
            shapes: the shape of each element (``[None]`` for a variable length).
            names: str, list of str, or list of lists of str.
            padded_batch: bool. pad variable lengths per batch (``padded_batch``) instead of ``batch``.
        """
        import tensorflow as tf

        wrap = _namer(names)
        types, shapes = wrap(types), wrap(shapes)
        def spec(dtype, shape):  # `shape` is a list, so walk the structure of `types`
            if isinstance(dtype, dict):
                return {key: spec(dtype[key], shape[key]) for key in dtype}
            if isinstance(dtype, (list, tuple)):
                return tuple(spec(d, s) for d, s in zip(dtype, shape, strict=True))
            return tf.TensorSpec(shape, dtype)

        signature = spec(types, shapes)
        dataset = tf.data.Dataset.from_generator(lambda: (wrap(d) for d in self._forever(True)),
                                                 output_signature=signature)
        return dataset.padded_batch(self.batch_size, shapes) if padded_batch else dataset.batch(self.batch_size)


def _open_dataset(batches):
    """A ``tf.data.Dataset`` of what ``batches()`` yields, each dimension of each element but those of 1 left open."""
    import tensorflow as tf

    first_batches = batches()
    first = next(first_batches)
    def spec(x):  # a dimension of 1 stays (a label column that losses squeeze), as does the rank
        shape = np.shape(x)
        return tf.TensorSpec([None] * min(len(shape), 1) + [1 if d == 1 else None for d in shape[1:]],
                             tf.as_dtype(np.asarray(x).dtype))

    signature = tf.nest.map_structure(spec, first)
    started = []

    def generate():
        if started:  # the dataset iterated again: a new pass of the data
            return batches()
        started.append(True)
        return itertools.chain([first], first_batches)

    return tf.data.Dataset.from_generator(generate, output_signature=signature)


def _namer(names):
    """How `to_dataset` keys an item by ``names``: unchanged, one dict, or a tuple of dicts."""
    if names is None:
        return lambda values: values
    if isinstance(names, str):
        return lambda values: {names: values}
    if isinstance(names[0], str):
        return lambda values: dict(zip(names, values, strict=False))
    return lambda values: tuple(dict(zip(keys, group, strict=False))
                                for keys, group in zip(names, values, strict=False))
