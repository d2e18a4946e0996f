"""The state a next-token scorer keeps between steps, in NumPy or in tensors: `Cache`, and `padded` sources.

Nothing here imports TensorFlow or Keras, so a decoder exported to ONNX or OpenVINO
(`kerasbert.serving.portable_decoder`) searches without them; a `kerasbert.generation.cache.CachedModel` keeps
tensors in the same `Cache`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kerasbert.errors import ModelError, fail

__all__ = ["Cache", "padded"]


@dataclasses.dataclass(frozen=True)
class Cache:
    """The keys and values of every layer, and where each row stands.

    Args:
        keys: tuple of ``[N, A, S + T, d]``, one per layer (ALBERT: one per use of its shared block).
        values: the same, values.
        lengths: ``[N]`` int32, each row's source length.
        source_width: int. S, the slots of the sources; target token t of every row lands in slot S + t.
        written: int. target tokens written so far.
    """

    keys: tuple
    values: tuple
    lengths: object
    source_width: int
    written: int = 0

    @property
    def rows(self) -> int:
        return int(self.lengths.shape[0])

    def take(self, rows: np.ndarray) -> Cache:
        """The cache of ``rows`` (indices into these rows, repeats allowed): one row per beam or sample. Tensors
        stay tensors; NumPy arrays (an exported decoder's cache) stay NumPy arrays."""
        if isinstance(self.lengths, np.ndarray):
            take, rows = np.take, np.asarray(rows, "int32")
        else:
            from keras import ops

            take, rows = ops.take, ops.convert_to_tensor(np.asarray(rows, "int32"))
        return dataclasses.replace(self, keys=tuple(take(k, rows, axis=0) for k in self.keys),
                                   values=tuple(take(v, rows, axis=0) for v in self.values),
                                   lengths=take(self.lengths, rows, axis=0))

    def check_room(self, what: str) -> None:
        """A ModelError, blaming ``what``, unless a slot is left for one more target token."""
        slots = int(self.keys[0].shape[2])
        if self.source_width + self.written >= slots:
            raise fail(ModelError, what, f"at most {slots - self.source_width} target tokens (start's max_length)",
                       f"token {self.written + 1}")


def padded(sources: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``sources`` right-padded with 0 to the longest, ``[B, S]`` int32, and their lengths ``[B]`` int32.

    Example:
    >>> token_ids, lengths = padded([[2, 7, 3], [2, 3]])
    >>> token_ids.tolist(), lengths.tolist()
    ([[2, 7, 3], [2, 3, 0]], [3, 2])
    """
    lengths = np.array([len(source) for source in sources], dtype="int32")
    token_ids = np.zeros((len(sources), lengths.max()), dtype="int32")
    for row, source in enumerate(sources):
        token_ids[row, :len(source)] = source
    return token_ids, lengths
