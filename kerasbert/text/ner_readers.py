"""NER data files: CoNLL (a token and its tag a line) and span JSONL (``{"text", "entities"}`` a line).

Examples keep character offsets (``NerExample.offsets`` per token, ``NerExample.spans`` per entity), so labels
can later be aligned onto word pieces from a tokenizer's offsets. Each reader has an ``iter_*`` twin that
streams; bad input raises one :class:`DataError` naming the file and line, as in `kerasbert.text.readers`.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
>>> _ = open(path, "w", encoding="utf-8").write("张 B-PER\\n三 I-PER\\n好 O\\n")
>>> read_conll(path)[0].entities()
[('张三', 'PER')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kerasbert.errors import DataError, fail
from kerasbert.files import write_text
from kerasbert.text import schemes
from kerasbert.text.readers import file_rows, get_field, read_lines
from kerasbert.text.schemes import Span


@dataclass
class NerExample:
    """One sentence for NER: tokens with their tags, and the entities as character spans.

    Args:
        text: str. the sentence; for CoNLL files the tokens joined by ``sep``.
        tokens: list of str. the tokens (characters or words) as in the file.
        tags: list of str. one tag per token, in the scheme read or converted to.
        spans: list of ``(start, end, label)``. entities as character offsets into ``text``, ``end``
            exclusive; with ``offsets`` this aligns onto word pieces from their character offsets.
        offsets: list of ``(start, end)``. each token's character offsets into ``text``.
        line: int. the file line of the first token (1-based), for messages.
    """

    text: str
    tokens: list[str]
    tags: list[str]
    spans: list[Span]
    offsets: list[tuple[int, int]]
    line: int = field(default=0, compare=False)

    def entities(self) -> list[tuple[str, str]]:
        """The entities as ``(surface text, label)`` pairs, in order."""
        return [(self.text[start:end], label) for start, end, label in self.spans]

    def token_spans(self) -> list[Span]:
        """The entities as token-index spans (``end`` exclusive), as :mod:`kerasbert.text.schemes` uses."""
        starts = {start: i for i, (start, _) in enumerate(self.offsets)}
        ends = {end: i + 1 for i, (_, end) in enumerate(self.offsets)}
        return [(starts[start], ends[end], label) for start, end, label in self.spans]


def _join(tokens: list[str], sep: str) -> tuple[str, list[tuple[int, int]]]:
    """Join tokens with ``sep``; return the text and each token's character offsets."""
    offsets, position = [], 0
    for token in tokens:
        offsets.append((position, position + len(token)))
        position += len(token) + len(sep)
    return sep.join(tokens), offsets


def _build_ner(text: str, offsets: list[tuple[int, int]], token_spans: list[Span], scheme: str,
               line: int) -> NerExample:
    """Make an example from token offsets and token spans: character spans and tags follow."""
    spans = schemes.token_to_char_spans(offsets, token_spans)
    tags = schemes.spans_to_tags(token_spans, len(offsets), scheme)
    return NerExample(text, [text[a:b] for a, b in offsets], tags, spans, list(offsets), line)


def _conll_sentences(path: str) -> Iterator[list[tuple[int, str, str]]]:
    """Yield a CoNLL file's sentences of ``(line, token, tag)``; token first, tag last column."""
    sentence: list[tuple[int, str, str]] = []
    width: tuple[int, int] | None = None  # (columns, line) of the first token line: every line has as many
    for number, line in enumerate(read_lines(path), 1):
        columns = line.split()
        if not columns or columns[0] == "-DOCSTART-":
            if sentence:
                yield sentence
            sentence = []
            continue
        if len(columns) < 2:
            raise fail(DataError, f"{path}:{number}", "a token and its tag, separated by a space or tab",
                       f"{line.strip()!r} with no tag")
        width = width or (len(columns), number)
        if len(columns) != width[0]:
            raise fail(DataError, f"{path}:{number}", f"{width[0]} columns, as on line {width[1]}",
                       f"{len(columns)}: {line.strip()[:80]!r}", "a token or tag holds a space, or a column is extra")
        sentence.append((number, columns[0], columns[-1]))
    if sentence:
        yield sentence


def _conll_layout(path: str) -> tuple[list[str], bool]:
    """Each tag of a CoNLL file once, in file order (so an error names the first bad one), and whether
    every token is one character."""
    tags: dict[str, None] = {}
    chars = True
    for sentence in _conll_sentences(path):
        tags.update(dict.fromkeys(tag for _, _, tag in sentence))
        chars = chars and all(len(token) == 1 for _, token, _ in sentence)
    return list(tags), chars


def read_conll(path: str, scheme: str | None = None, strict: bool = False, sep: str | None = None) -> list[NerExample]:
    """Read a CoNLL-style NER file: one token and its tag a line, a blank line between sentences.

    Columns are split on spaces or tabs; the first is the token and the last the tag (so
    CoNLL-2003's four columns work). The tag scheme (BIO, BIOES or BMES) is detected over the
    whole file. An ``I-``/``M-``/``E-`` tag with no entity before it is reported with its line:
    with ``strict=True`` it is a :class:`DataError`, otherwise it is repaired and logged.

    Args:
        path: str. the file.
        scheme: str or None. convert the tags to this scheme; None keeps the file's scheme.
        strict: bool. fail on an orphan continuation tag instead of repairing it.
        sep: str or None. what joins tokens into ``text``; default ``""`` when every token of the
            file is one character (Chinese), else ``" "``.

    Returns:
        list of NerExample.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.txt")
    >>> _ = open(path, "w").write("John B-PER\\nlives O\\nin O\\nParis B-LOC\\n")
    >>> example = read_conll(path, scheme="BIOES")[0]
    >>> example.tags, example.spans
    (['S-PER', 'O', 'O', 'S-LOC'], [(0, 4, 'PER'), (14, 19, 'LOC')])
    """
    return list(iter_conll(path, scheme, strict, sep))


def iter_conll(path: str, scheme: str | None = None, strict: bool = False,
               sep: str | None = None) -> Iterator[NerExample]:
    """:func:`read_conll` one sentence (a `NerExample`) at a time, with the same arguments.

    The file is never held whole. It is read twice when ``scheme`` or ``sep`` is not given: both are
    properties of the whole file.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.txt")
    >>> _ = open(path, "w").write("张 B-PER\\n\\n京 B-LOC\\n")
    >>> [example.entities() for example in iter_conll(path)]
    [[('张', 'PER')], [('京', 'LOC')]]
    """
    if scheme is None or sep is None:
        tags, chars = _conll_layout(path)
        scheme = scheme or schemes.detect_scheme(tags, path)
        sep = ("" if chars else " ") if sep is None else sep
    for sentence in _conll_sentences(path):
        where = [f"{path}:{line}" for line, _, _ in sentence]
        token_spans = schemes.tags_to_spans([tag for _, _, tag in sentence], strict=strict, where=where)
        text, offsets = _join([token for _, token, _ in sentence], sep)
        yield _build_ner(text, offsets, token_spans, scheme, sentence[0][0])


def write_conll(path: str, examples: Sequence[NerExample], delimiter: str = " ") -> None:
    """Write NER examples as a CoNLL file (token, delimiter, tag; a blank line between sentences), atomically.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> write_conll(path, [span_example("Bob ran", [(0, 3, "PER")], tokens="word")]); print(open(path).read())
    Bob B-PER
    ran O
    <BLANKLINE>
    """
    blocks = ["".join(f"{token}{delimiter}{tag}\n" for token, tag in zip(e.tokens, e.tags, strict=True))
              for e in examples]
    write_text(path, "\n".join(blocks))


_TOKEN = {"char": re.compile(r"\S"), "word": re.compile(r"\S+")}


def check_span(span: object, length: int, where: str) -> Span:
    """Validate one JSON entity ``{"start", "end", "label"}`` (or a ``(start, end, label)`` tuple)."""
    if isinstance(span, dict):
        span = (span.get("start"), span.get("end"), span.get("label"))
    ok = isinstance(span, list | tuple) and len(span) == 3
    if ok:
        start, end, label = span
        ok = isinstance(start, int) and isinstance(end, int) and isinstance(label, str) and label != ""
        ok = ok and 0 <= start < end <= length
    if not ok:
        raise fail(DataError, where, f'an entity {{"start", "end", "label"}} with 0 <= start < end <= {length}',
                   repr(span))
    return start, end, label


def span_example(text: str, entities: Sequence, scheme: str = "BIO", tokens: str = "char", where: str = "text",
                 line: int = 0) -> NerExample:
    """Make an NER example from a text and its entities as character spans.

    Args:
        text: str. the sentence.
        entities: sequence of ``(start, end, label)`` or ``{"start", "end", "label"}``. character spans.
        scheme: str. the tag scheme of ``tags``.
        tokens: str. ``"char"`` (every non-space character a token, as BERT reads Chinese) or ``"word"``
            (runs of non-space characters).
        where: str. what to name in an error.
        line: int. the file line, kept on the example.

    Returns:
        NerExample.

    Example:
    >>> span_example("我爱北京", [(2, 4, "LOC")], scheme="BMES").tags
    ['O', 'O', 'B-LOC', 'E-LOC']
    """
    if tokens not in _TOKEN:
        raise fail(DataError, "tokens", '"char" or "word"', repr(tokens))
    offsets = [match.span() for match in _TOKEN[tokens].finditer(text)]
    checked = [check_span(span, len(text), where) for span in entities]
    token_spans = schemes.char_to_token_spans(offsets, checked, where)
    return _build_ner(text, offsets, token_spans, scheme, line)


def read_span_jsonl(path: str, scheme: str = "BIO", tokens: str = "char") -> list[NerExample]:
    """Read NER examples from JSONL lines ``{"text": ..., "entities": [{"start", "end", "label"}]}``.

    Args:
        path: str. the file.
        scheme: str. the tag scheme for ``NerExample.tags``.
        tokens: str. ``"char"`` or ``"word"``, as in :func:`span_example`.

    Returns:
        list of NerExample.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> write_span_jsonl(path, [span_example("我爱北京", [(2, 4, "LOC")])])
    >>> read_span_jsonl(path)[0].entities()
    [('北京', 'LOC')]
    """
    return list(iter_span_jsonl(path, scheme, tokens))


def iter_span_jsonl(path: str, scheme: str = "BIO", tokens: str = "char") -> Iterator[NerExample]:
    """:func:`read_span_jsonl` one line at a time, reading the file as it goes.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> _ = open(path, "w").write('{"text": "北京", "entities": [[0, 2, "LOC"]]}\\n')
    >>> [example.tags for example in iter_span_jsonl(path)]
    [['B-LOC', 'I-LOC']]
    """
    for line, row in file_rows(path, "jsonl"):
        where = f"{path}:{line}"
        text = get_field(row, "text", where)
        entities = row.get("entities", []) if isinstance(row, dict) else None
        if not isinstance(entities, list):
            raise fail(DataError, where, '"entities": a list', repr(entities))
        yield span_example(text, entities, scheme, tokens, where, line)


def write_span_jsonl(path: str, examples: Sequence[NerExample]) -> None:
    """Write NER examples as span JSONL, one ``{"text", "entities"}`` object a line, atomically."""
    lines = []
    for example in examples:
        entities = [{"start": start, "end": end, "label": label} for start, end, label in example.spans]
        lines.append(json.dumps({"text": example.text, "entities": entities}, ensure_ascii=False) + "\n")
    write_text(path, "".join(lines))
