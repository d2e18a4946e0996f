"""Sentence pairs for next sentence prediction (NSP): pre-training rows ``[CLS] A [SEP] B [SEP]``.

Google BERT's ``create_pretraining_data.py`` makes them so, and `pack_pairs` follows it: a document's sentences
are gathered into a chunk until it reaches the row's length (a tenth of the time a shorter, random length);
the chunk's first sentences, up to a random cut, are segment A. Half of the time (always when the chunk is one
sentence) segment B is a random run of sentences from another document, and the sentences after the cut go back
to the document for the next row; otherwise B is the rest of the chunk. A pair longer than the row loses pieces
from the longer segment, at its front or back at random.

Where kerasbert departs from Google's script, and why: another document is drawn from the last `MEMORY`
documents read rather than from the whole corpus, so a corpus larger than memory streams; each document draws
from its own generator, seeded by its file's name and line (not the folder), so the pairs are drawn once and are
the same in every run and wherever the corpus lies (masks, drawn anew each epoch, are not). The first document of
a corpus has no other to draw from and draws from itself, as Google's script does when it finds no other. NumPy
only: no TensorFlow here.

Example:
>>> from kerasbert.text.corpus import Document
>>> encode = lambda text: ([ord(ch) for ch in text], list(range(len(text))))
>>> documents = [Document(["ab", "cd", "ef"], "a.txt:1"), Document(["gh", "ij"], "a.txt:5"),
...              Document(["klmnopqrstuvwxyz", "AB"], "a.txt:8")]
>>> [("".join(chr(i) if i > 3 else "|" for i in row.token_ids), row.random_next)
...  for row in pack_pairs(documents, encode, 12, cls_id=2, sep_id=3)]  # doctest: +NORMALIZE_WHITESPACE
[('|ab|cdef|', False), ('|gh|ij|', False), ('|lmnopqr|ij|', True), ('|tuvwxyz|gh|', True), ('|AB|cdef|', True)]
"""

from __future__ import annotations

import collections
import os
import zlib
from collections.abc import Iterable, Iterator

import numpy as np

from kerasbert.text.corpus import Document, Encode, PackedRow, Packing, RowPieces

__all__ = ["MEMORY", "PAIR_SEED", "PairPacking", "pack_pairs"]

PAIR_SEED = 20181011  # with a document's file name and line, the seed of its pairs: the same pairs in every run
MEMORY = 1000  # documents kept to draw a random second segment from
NEXT_RATE = 0.5  # pairs whose second segment is the text that follows
SHORT_RATE = 0.1  # documents packed to a shorter, random length (Google's short_seq_prob)

Unit = tuple[list[int], list[int]]  # a sentence's (or a sentence cut's) piece ids and word ids


class PairPacking(Packing):
    """The rows `pack_pairs` yields, one at a time; ``sentences``, ``cut`` and ``rows`` count as `Packing`'s."""

    def __init__(self, documents: Iterable[Document], encode: Encode, maxlen: int, cls_id: int, sep_id: int) -> None:
        self._memory: collections.deque[list[Unit]] = collections.deque(maxlen=MEMORY)
        super().__init__(documents, encode, maxlen, cls_id, sep_id)

    def _pack(self, documents: Iterable[Document], encode: Encode, window: int, cls_id: int,
              sep_id: int) -> Iterator[PackedRow]:
        room = window - 1  # [CLS] A [SEP] B [SEP]: three special pieces
        for document in documents:
            units = list(self._units(document, encode, room))
            where = os.path.basename(document.source)  # file:line without the folder
            rng = np.random.default_rng([PAIR_SEED, zlib.crc32(where.encode("utf-8"))])
            for first, second, random_next in self._chunks(units, room, rng):
                a = _joined(first)
                b = _joined(second, offset=1 + max(a[1], default=-1))
                yield _pair_row(*_truncated(a, b, room, rng), random_next, cls_id, sep_id, document.source)
            if units:
                self._memory.append(units)

    def _chunks(self, units: list[Unit], room: int, rng: np.random.Generator) -> Iterator[tuple[list, list, bool]]:
        """``(A's units, B's units, B is random)`` for each row of one document, as Google's script cuts it."""
        target = int(rng.integers(2, room + 1)) if rng.random() < SHORT_RATE else room
        chunk, length, i = [], 0, 0
        while i < len(units):
            chunk.append(units[i])
            length += len(units[i][0])
            if i == len(units) - 1 or length >= target:
                cut = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
                if len(chunk) == 1 or rng.random() >= NEXT_RATE:
                    want = target - sum(len(ids) for ids, _ in chunk[:cut])
                    yield chunk[:cut], self._random_run(units, want, rng), True
                    i -= len(chunk) - cut  # the sentences after the cut start the next row
                else:
                    yield chunk[:cut], chunk[cut:], False
                chunk, length = [], 0
            i += 1

    def _random_run(self, units: list[Unit], want: int, rng: np.random.Generator) -> list[Unit]:
        """Sentences of a remembered document from a random one on, until ``want`` pieces (at least one)."""
        other = self._memory[int(rng.integers(len(self._memory)))] if self._memory else units
        run, length = [], 0
        for unit in other[int(rng.integers(len(other))):]:
            run.append(unit)
            length += len(unit[0])
            if length >= want:
                break
        return run


def _joined(units: list[Unit], offset: int = 0) -> tuple[list[int], list[int]]:
    """The units' ids and their word ids numbered from ``offset`` across the units."""
    row = RowPieces()
    for ids, words in units:
        row.add(ids, words)
    return row.ids, [word + offset for word in row.words]


def _truncated(a: tuple[list[int], list[int]], b: tuple[list[int], list[int]], room: int,
               rng: np.random.Generator) -> tuple[tuple[list[int], list[int]], tuple[list[int], list[int]]]:
    """``a`` and ``b`` with at most ``room`` pieces between them: the longer one loses a piece at a time, at its
    front or its back at random (Google's truncate_seq_pair)."""
    (a_ids, a_words), (b_ids, b_words) = (list(a[0]), list(a[1])), (list(b[0]), list(b[1]))
    while len(a_ids) + len(b_ids) > room:
        ids, words = (a_ids, a_words) if len(a_ids) > len(b_ids) else (b_ids, b_words)
        at = 0 if rng.random() < 0.5 else -1
        del ids[at], words[at]
    return (a_ids, a_words), (b_ids, b_words)


def _pair_row(a: tuple[list[int], list[int]], b: tuple[list[int], list[int]], random_next: bool, cls_id: int,
              sep_id: int, source: str) -> PackedRow:
    ids = [cls_id, *a[0], sep_id, *b[0], sep_id]
    words = [-1, *a[1], -1, *b[1], -1]
    return PackedRow(ids, words, source, segment_ids=[0] * (len(a[0]) + 2) + [1] * (len(b[0]) + 1),
                     random_next=random_next)


def pack_pairs(documents: Iterable[Document], encode: Encode, maxlen: int, *, cls_id: int,
               sep_id: int) -> PairPacking:
    """Sentence pairs of the documents as pre-training rows ``[CLS] A [SEP] B [SEP]`` of at most ``maxlen`` ids,
    lazily, with their segment ids and whether B follows A (the module's rules).

    Args:
        documents: iterable of Document. read as the rows are used.
        encode: callable. as `kerasbert.text.corpus.pack` takes it.
        maxlen: int. the most ids a row holds, the three special ones included; at least `corpus.MIN_MAXLEN`.
        cls_id: int. the id of [CLS].
        sep_id: int. the id of [SEP].

    Returns:
        PairPacking: an iterator of PackedRow with ``segment_ids`` (0 for ``[CLS] A [SEP]``, 1 for ``B [SEP]``) and
        ``random_next``; word ids are -1 at the special pieces and count A's and B's words on from 0.

    Raises:
        ConfigError: ``maxlen`` is below `corpus.MIN_MAXLEN` (now).
    """
    return PairPacking(documents, encode, maxlen, cls_id, sep_id)
