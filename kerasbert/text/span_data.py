"""The span task's data, without TensorFlow: nested entities read from span JSONL, texts as word pieces with
their character offsets, gold spans as span codes, and span logits back to character spans.

Entities may nest and overlap (``北京大学`` an ``ORG`` holding the ``LOC`` ``北京``). A text is cut into the word
pieces BERT sees in raw text (`Tokenizer.split_words`, then each word's pieces, as the SavedModel's tokenizer cuts
it), each with its character span; a gold span is kept where its first character starts a piece and its last ends
one, as bert4keras's GlobalPointer example keeps it. Each kept span becomes one int, its span code (`span_code`),
and an example's codes are padded with 0 to its number of word pieces: the labels then pad and bucket with the
tokens (`kerasbert.text.pipeline.length_buckets`), so XLA compiles one step per bucket. The loss turns them into
the dense ``[B, K, S, S]`` target (`kerasbert.modeling.global_pointer.span_target`). With ``--stride`` a long text
is split into windows (`kerasbert.text.windows`), each keeping the gold spans wholly inside it, and the windows'
spans are merged back per text (`span_rows`).

Example:
>>> from kerasbert.text.tokenizer import Tokenizer
>>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "北", "京", "大", "学"])})
>>> example = SpanExample("北京大学", [(0, 2, "LOC"), (0, 4, "ORG")])
>>> features = encode_spans(tokenizer, [example], LabelSet(["LOC", "ORG"]), maxlen=8)
>>> features.token_ids, features.labels, features.offsets
([[2, 4, 5, 6, 7, 3]], [[9, 24, 0, 0, 0, 0]], [[(0, 1), (1, 2), (2, 3), (3, 4)]])
>>> [span_of_code(code, 2) for code in features.labels[0] if code]
[(0, 1, 2), (1, 1, 4)]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.log import logger
from kerasbert.text.coverage import warn_unknown
from kerasbert.text.ner_readers import check_span, iter_conll
from kerasbert.text.pipeline import Features, report_truncation
from kerasbert.text.predictions import spans_row
from kerasbert.text.readers import LabelSet, file_rows, get_field
from kerasbert.text.schemes import Span
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.windows import Window, cut, merge_spans, windowed

__all__ = ["CODE_LIMIT", "SpanExample", "SpanFeatures", "decode_spans", "encode_spans", "found_spans",
           "iter_span_examples", "piece_offsets", "span_code", "span_of_code", "span_rows"]

CODE_LIMIT = 2**31 - 1  # span codes are int32


@dataclass
class SpanExample:
    """A text and its entities as character spans, which may nest and overlap.

    Args:
        text: str. the text.
        spans: list of ``(start, end, label)``. character offsets into ``text``, ``end`` exclusive, sorted.
        line: int. the file line (1-based), for messages.
    """

    text: str
    spans: list[Span] = field(default_factory=list)
    line: int = field(default=0, compare=False)


def iter_span_examples(path: str, scheme: str | None = None, strict: bool = False) -> Iterator[SpanExample]:
    """The examples of a span JSONL file (``.jsonl``/``.json``: ``{"text", "entities": [{"start", "end",
    "label"}]}`` a line, entities that nest or overlap allowed) or of a CoNLL file (flat entities, read by
    `kerasbert.text.ner_readers.iter_conll` with ``scheme`` and ``strict``), one at a time.

    Raises:
        DataError: naming the file and line: a line that is no JSON object with a string ``text``, an entity that
            is not ``{"start", "end", "label"}`` with ``0 <= start < end <= len(text)``.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> _ = open(path, "w").write('{"text": "北京大学", "entities": [[0, 4, "ORG"], [0, 2, "LOC"]]}\\n')
    >>> next(iter_span_examples(path)).spans
    [(0, 2, 'LOC'), (0, 4, 'ORG')]
    """
    if not path.endswith((".jsonl", ".json")):
        for example in iter_conll(path, scheme=scheme, strict=strict):
            yield SpanExample(example.text, list(example.spans), example.line)
        return
    for line, row in file_rows(path, "jsonl"):
        where = f"{path}:{line}"
        text = get_field(row, "text", where)
        entities = row.get("entities", []) if isinstance(row, dict) else None
        if not isinstance(entities, list):
            raise fail(DataError, where, '"entities": a list', repr(entities))
        yield SpanExample(text, sorted({check_span(span, len(text), where) for span in entities}), line)


def _word_pieces(tokenizer: Tokenizer, word: str, ids: list[int]) -> list[tuple[int, int]]:
    """The character span of each piece of one word, within the word (bert4keras's ``rematch``)."""
    if len(ids) == 1:
        return [(0, len(word))]
    try:
        mapping = tokenizer.rematch(word, tokenizer.ids_to_tokens(ids))
    except ValueError:  # a piece rematch cannot place: each piece spans the word
        mapping = [[]] * len(ids)
    return [(min(m[0], len(word) - 1), min(m[-1] + 1, len(word))) if m else (0, len(word)) for m in mapping]


def piece_offsets(tokenizer: Tokenizer, texts: Sequence[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """Each text's word-piece ids (without [CLS] and [SEP]) and each piece's character span ``(start, end)``.

    Example:
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "##s"])})
    >>> piece_offsets(tokenizer, ["Héllos hello"])
    [([4, 5, 4], [(0, 5), (5, 6), (7, 12)])]

    A tokenizer that gives its pieces' offsets itself (a ``tokenizer.json``'s: `kerasbert.text.hf_tokenizer`) gives
    them here.
    """
    own = getattr(tokenizer, "piece_offsets", None)
    if own is not None:
        return own(texts)
    words = [tokenizer.split_words(text) for text in texts]
    pieces = tokenizer.encode_words([[text[a:b] for a, b in spans] for text, spans in zip(texts, words, strict=True)])
    out = []
    for text, spans, word_ids in zip(texts, words, pieces, strict=True):
        ids, offsets = [], []
        for (a, b), piece_ids in zip(spans, word_ids, strict=True):
            ids += piece_ids
            offsets += [(a + start, a + end) for start, end in _word_pieces(tokenizer, text[a:b], piece_ids)]
        out.append((ids, offsets))
    return out


def span_code(kind: int, start: int, end: int, kinds: int) -> int:
    """The int that stands for a span of type ``kind`` (of ``kinds``) over word pieces ``start..end``
    (``start <= end``, positions in the model's input): ``1 + kind + kinds·(end·(end + 1)/2 + start)``; 0 is none.

    Example:
    >>> span_code(1, 2, 3, kinds=2), span_of_code(18, kinds=2)
    (18, (1, 2, 3))
    """
    return 1 + kind + kinds * (end * (end + 1) // 2 + start)


def span_of_code(code: int, kinds: int) -> tuple[int, int, int]:
    """``(kind, start, end)`` of a `span_code`."""
    kind, index = (code - 1) % kinds, (code - 1) // kinds
    end = int((np.sqrt(8 * index + 1) - 1) // 2)
    end += (end + 1) * (end + 2) // 2 <= index  # the square root's rounding, either way
    end -= end * (end + 1) // 2 > index
    return kind, index - end * (end + 1) // 2, end


@dataclass
class SpanFeatures(Features):
    """`Features` of the span task: the labels are span codes, one row as long as its token row.

    Args:
        offsets: list of list of ``(start, end)``. per example, each kept word piece's character span ([CLS] and
            [SEP] have none); every piece's when the rows are windows (``windows``).
        spans: int. the gold spans of the examples (with labels).
        dropped: dict. the gold spans not kept, by why: ``"maxlen"`` (``"windows"`` when the rows are windows: no
            window holds the span whole), ``"boundaries"`` (no piece starts or ends there), ``"room"`` (more spans
            than word pieces).
    """

    offsets: list[list[tuple[int, int]]] = field(default_factory=list)
    spans: int = 0
    dropped: dict = field(default_factory=lambda: {"maxlen": 0, "boundaries": 0, "room": 0})


def _piece_spans(spans: Sequence[Span], offsets: list[tuple[int, int]], types: LabelSet,
                 features: SpanFeatures) -> set[tuple[int, int, int]]:
    """``(type, first, last)`` of the spans whose first character starts a word piece and whose last ends one
    (``first``, ``last``: the text's pieces, 0 its first); the rest counted."""
    starts, ends = {}, {}
    for i, (a, b) in enumerate(offsets):
        starts.setdefault(a, i)
        ends[b] = i
    out = set()
    for start, end, label in spans:
        first, last = starts.get(start), ends.get(end)
        if first is None or last is None or last < first:
            features.dropped["boundaries"] += 1
        else:
            out.add((types.index(label), first, last))
    features.spans += len(spans)
    return out


def _codes(pieces: list[set[tuple[int, int, int]]], windows: Sequence[Window], kinds: int, features: SpanFeatures,
           reason: str) -> list[list[int]]:
    """Each row's sorted codes, of the spans that lie wholly inside its window, padded to the row's tokens; the
    spans of a text that no row holds whole counted under ``reason``."""
    held: list[set] = [set() for _ in pieces]
    rows = []
    for window in windows:
        inside = {(k, a, b) for k, a, b in pieces[window.document] if window.start <= a and b < window.end}
        held[window.document] |= inside
        room = window.end - window.start + 2  # one code per token: [CLS] pieces [SEP]
        codes = sorted(span_code(k, a - window.start + 1, b - window.start + 1, kinds) for k, a, b in inside)
        features.dropped["room"] += max(0, len(codes) - room)
        rows.append(codes[:room] + [0] * (room - len(codes[:room])))
    features.dropped[reason] += sum(len(spans - kept) for spans, kept in zip(pieces, held, strict=True))
    return rows


def encode_spans(tokenizer: Tokenizer, examples: Sequence[SpanExample], types: LabelSet | None, maxlen: int,
                 what: str = "data", stride: int | None = None) -> SpanFeatures:
    """Encode texts as ``[CLS] pieces [SEP]`` cut to ``maxlen``, and their gold spans as span codes (with ``types``).

    Spans that ``maxlen`` cuts, that do not start and end on word pieces, or that outnumber the text's pieces
    are dropped and counted (`SpanFeatures.dropped`) and logged with the examples ``maxlen`` cut. With ``stride``, a
    longer text is split into windows instead (`kerasbert.text.windows.windowed`), ``Features.windows`` naming each
    row's: a window keeps the gold spans that lie wholly inside it, and spans no window holds whole are counted as
    ``"windows"``; ``offsets`` are then the whole texts'.

    Args:
        tokenizer: Tokenizer. the run's tokenizer.
        examples: sequence of SpanExample. the texts and their spans.
        types: LabelSet or None. the entity types (their ids are the pointer's heads); None: no labels (prediction).
        maxlen: int. the most tokens an example (or a window) keeps, [CLS] and [SEP] included.
        what: str. the data named in the logs.
        stride: int or None. the word pieces consecutive windows share; None cuts texts at ``maxlen``.
    """
    if types is not None and span_code(len(types) - 1, maxlen - 1, maxlen - 1, len(types)) > CODE_LIMIT:
        raise fail(ConfigError, "--maxlen", f"a length whose spans of {len(types)} types fit an int32 code",
                   str(maxlen), "lower --maxlen")
    encoded = piece_offsets(tokenizer, [e.text for e in examples])
    warn_unknown(tokenizer, [ids for ids, _ in encoded], [e.text for e in examples], what)
    rows, windows = _rows(tokenizer, encoded, maxlen, stride, what)
    reason = "maxlen" if stride is None else "windows"
    offsets = [offsets for _, offsets in encoded]
    if stride is None:  # a cut text's: of its kept pieces
        offsets = [row[:window.end] for row, window in zip(offsets, windows, strict=True)]
    features = SpanFeatures(rows.token_ids, rows.segment_ids, truncated=rows.truncated, windows=rows.windows,
                            offsets=offsets, dropped={reason: 0, "boundaries": 0, "room": 0})
    if types is not None:
        pieces = [_piece_spans(example.spans, offsets, types, features)
                  for example, (_, offsets) in zip(examples, encoded, strict=True)]
        features.labels = _codes(pieces, windows, len(types), features, reason)
    reasons = {"maxlen": f"lie past maxlen={maxlen} word pieces", "boundaries": "do not start and end on word pieces",
               "room": "outnumber the word pieces of their text",
               "windows": f"cross an edge of every window that holds them (--stride {stride})"}
    for kind, count in features.dropped.items():
        if count:
            logger.warning("%s: %d of %d entities %s and were dropped", what, count, features.spans, reasons[kind])
    return features


def _rows(tokenizer: Tokenizer, encoded: list, maxlen: int, stride: int | None, what: str) -> tuple[Features, list]:
    """The token rows of texts' pieces (`piece_offsets`), cut at ``maxlen`` or split into windows with ``stride``,
    and each row's window (a cut text's: its kept pieces)."""
    start, end = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    whole = Features([[start, *ids, end] for ids, _ in encoded], [[0] * (len(ids) + 2) for ids, _ in encoded])
    if stride is not None:
        rows = windowed(whole, maxlen, stride, what)
        return rows, rows.windows
    windows = [Window(d, 0, min(len(ids), maxlen - 2)) for d, (ids, _) in enumerate(encoded)]
    rows = Features([cut(row, window) for row, window in zip(whole.token_ids, windows, strict=True)],
                    [[0] * (window.end + 2) for window in windows],
                    truncated=sum(window.end < len(ids) for window, (ids, _) in zip(windows, encoded, strict=True)))
    report_truncation(rows.truncated, len(encoded), maxlen, what)
    return rows, windows


def decode_spans(logits: np.ndarray, offsets: Sequence[tuple[int, int]], labels: Sequence[str]) -> list[Span]:
    """The character spans of one example's span logits ``[K, S, S]``: each ``(type, start piece, end piece)``
    scored > 0 over the example's word pieces (not [CLS], [SEP] or padding), ``start <= end``; sorted, each once.

    Example:
    >>> logits = np.full((1, 4, 4), -np.inf)
    >>> logits[0, 1, 2] = logits[0, 2, 2] = 1.0
    >>> decode_spans(logits, [(0, 1), (1, 3)], ["LOC"])
    [(0, 3, 'LOC'), (1, 3, 'LOC')]
    """
    return _characters(found_spans(logits, len(offsets)), offsets, labels)


def found_spans(logits: np.ndarray, count: int) -> list[tuple[int, int, int]]:
    """``(start, end, type)`` of each span one row's logits ``[K, S, S]`` score > 0 over its ``count`` word pieces:
    row positions (1 is the first piece, ``start <= end``).

    Example:
    >>> logits = np.full((2, 4, 4), -1.0)
    >>> logits[1, 2, 2] = logits[0, 1, 2] = logits[0, 2, 1] = logits[0, 3, 3] = 1.0
    >>> found_spans(logits, 2)
    [(1, 2, 0), (2, 2, 1)]
    """
    kinds, starts, ends = np.nonzero(np.asarray(logits)[:, 1:count + 1, 1:count + 1] > 0)
    return sorted((int(i) + 1, int(j) + 1, int(k)) for k, i, j in zip(kinds, starts, ends, strict=True) if i <= j)


def _characters(spans: Sequence[tuple], offsets: Sequence[tuple[int, int]], labels: Sequence[str]) -> list[Span]:
    """``(start, end, type)`` piece spans (row positions) as character spans with labels; sorted, each once."""
    return sorted({(offsets[i - 1][0], offsets[j - 1][1], labels[k]) for i, j, k in spans})


def span_rows(texts: Sequence[str], found: Sequence[Sequence[tuple[int, int, int]]], features: SpanFeatures,
              labels: Sequence[str]) -> list[dict]:
    """One prediction row per text, ``{"entities": [{"start", "end", "label", "text"}]}`` as the ner task's
    (`kerasbert.text.predictions.spans_row`), from the spans found in each of ``features``' rows (`found_spans`).
    A text split into windows (``features.windows``) keeps each span from the window where its pieces are furthest
    from an edge (`kerasbert.text.windows.merge_spans`); its spans are then in the whole text's character offsets,
    each once.

    Example:
    >>> from kerasbert.text.windows import split
    >>> features = SpanFeatures([], [], windows=split([3], maxlen=4, stride=1), offsets=[[(0, 1), (1, 2), (2, 3)]])
    >>> found = [[(1, 2, 0)], [(1, 2, 0), (2, 2, 0)]]  # pieces 0..1 in the first window; 1..2 and 2 in the second
    >>> [(e["text"], e["label"]) for e in span_rows(["北京市"], found, features, ["LOC"])[0]["entities"]]
    [('北京', 'LOC'), ('京市', 'LOC'), ('市', 'LOC')]
    """
    spans = found if features.windows is None else merge_spans(features.windows, found)
    return [spans_row(text, _characters(row, offsets, labels))
            for text, row, offsets in zip(texts, spans, features.offsets, strict=True)]
