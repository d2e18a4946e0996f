"""Tag schemes for NER: BIO, BIOES and BMES, detected and converted through spans.

A *span* here is ``(start, end, label)`` over token indices, ``end`` exclusive. Every scheme
maps a list of non-overlapping spans to one tag per token and back, so converting between
schemes is ``spans_to_tags(tags_to_spans(tags), n, to)`` and loses nothing on valid input.

=========  ====================  ==================  =============
scheme     single-token entity   first / inside      last
=========  ====================  ==================  =============
BIO        ``B-X``               ``B-X`` / ``I-X``   ``I-X``
BIOES      ``S-X``               ``B-X`` / ``I-X``   ``E-X``
BMES       ``S-X``               ``B-X`` / ``M-X``   ``E-X``
=========  ====================  ==================  =============

Example:
>>> convert_tags(["B-PER", "I-PER", "I-PER", "O", "B-LOC"], "BMES")
['B-PER', 'M-PER', 'E-PER', 'O', 'S-LOC']
"""

from __future__ import annotations

from collections.abc import Sequence

from kerasbert.errors import DataError, fail
from kerasbert.log import logger

SCHEMES = ("BIO", "BIOES", "BMES")
Span = tuple[int, int, str]

_INSIDE = {"BIO": "I", "BIOES": "I", "BMES": "M"}


def _split_tag(tag: str, where: str) -> tuple[str, str]:
    """Return ``(prefix, label)`` of one tag; ``("O", "")`` for the outside tag."""
    if tag == "O":
        return "O", ""
    prefix, dash, label = tag.partition("-")
    if not dash or prefix not in ("B", "I", "M", "E", "S") or not label:
        raise fail(DataError, where, "a tag O or B-/I-/M-/E-/S- followed by a label", repr(tag))
    return prefix, label


def detect_scheme(tags: Sequence[str], where: str = "tags") -> str:
    """Name the scheme a tag sequence (or a whole file's tags) is written in.

    ``M-`` tags mean BMES, ``E-``/``S-`` tags without ``M-`` mean BIOES, anything else is BIO.
    Tags with only ``B-``/``E-``/``S-`` read the same in BIOES and BMES, so BIOES is returned.

    Args:
        tags: sequence of str. the tags, e.g. every tag of a CoNLL file.
        where: str. what to name in an error (a file name).

    Returns:
        str. one of ``SCHEMES``.

    Raises:
        DataError: a tag is ill-formed, or ``I-`` and ``M-`` tags are mixed.

    Example:
    >>> detect_scheme(["B-PER", "M-PER", "E-PER", "O"])
    'BMES'
    >>> detect_scheme(["B-PER", "I-PER", "O"])
    'BIO'
    """
    prefixes = {_split_tag(tag, where)[0] for tag in tags}
    if "I" in prefixes and "M" in prefixes:
        raise fail(DataError, where, "one tag scheme (BIO, BIOES or BMES)", "both I- and M- tags")
    if "M" in prefixes:
        return "BMES"
    if prefixes & {"E", "S"}:
        return "BIOES"
    return "BIO"


def _check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise fail(DataError, "scheme", f"one of {', '.join(SCHEMES)}", repr(scheme))
    return scheme


def _orphan(tag: str, where: str, strict: bool | None) -> None:
    """Report a continuation tag with no entity before it; raise when ``strict``, keep quiet when None."""
    if strict is None:
        return
    if strict:
        raise fail(DataError, where, f"B-{tag[2:]} or S-{tag[2:]} before {tag}",
                   f"{tag} with no entity before it", "fix the tag, or read with strict=False to repair it")
    logger.warning("%s: %s with no entity before it; read as the start of an entity", where, tag)


def tags_to_spans(tags: Sequence[str], strict: bool | None = False,
                  where: Sequence[str] | None = None) -> list[Span]:
    """Read the entity spans of one tag sequence in any of BIO, BIOES or BMES.

    ``I-``/``M-``/``E-`` tags that continue no entity of their label are reported: with
    ``strict=True`` that is a :class:`DataError`, otherwise the tag is read as the start of a
    new entity (a ``B-``, or an ``S-`` for a lone ``E-``) and a warning is logged.

    Args:
        tags: sequence of str. one tag per token.
        strict: bool or None. fail on an orphan continuation tag instead of repairing it; None
            repairs without a warning (a model's predictions).
        where: sequence of str or None. a location per tag (``"train.txt:12"``) for messages.

    Returns:
        list of ``(start, end, label)``. token spans, ``end`` exclusive, in order.

    Example:
    >>> tags_to_spans(["B-PER", "I-PER", "O", "S-LOC", "B-ORG", "E-ORG"])
    [(0, 2, 'PER'), (3, 4, 'LOC'), (4, 6, 'ORG')]
    >>> tags_to_spans(["O", "I-PER", "I-PER"])  # repaired, with a warning
    [(1, 3, 'PER')]
    """
    spans: list[Span] = []
    start, label = -1, ""  # the open entity, start -1 when none
    for i, tag in enumerate(tags):
        at = where[i] if where is not None else f"tag {i}"
        prefix, name = _split_tag(tag, at)
        continues = start >= 0 and name == label and prefix in ("I", "M", "E")
        if start >= 0 and not continues:
            spans.append((start, i, label))
            start = -1
        if prefix in ("I", "M", "E") and not continues:
            _orphan(tag, at, strict)
        if prefix in ("B", "I", "M") and not continues:
            start, label = i, name
        elif prefix in ("S", "E"):
            spans.append((i if start < 0 else start, i + 1, name))
            start = -1
    if start >= 0:
        spans.append((start, len(tags), label))
    return spans


def spans_to_tags(spans: Sequence[Span], length: int, scheme: str = "BIO") -> list[str]:
    """Write token spans as one tag per token in ``scheme``.

    Args:
        spans: sequence of ``(start, end, label)``. token spans, ``end`` exclusive.
        length: int. the number of tokens.
        scheme: str. one of ``SCHEMES``.

    Returns:
        list of str. ``length`` tags.

    Raises:
        DataError: a span is empty, out of range or overlaps another.

    Example:
    >>> spans_to_tags([(0, 3, "PER"), (4, 5, "LOC")], 5, "BIOES")
    ['B-PER', 'I-PER', 'E-PER', 'O', 'S-LOC']
    """
    _check_scheme(scheme)
    tags = ["O"] * length
    for start, end, label in sorted(spans):
        if not 0 <= start < end <= length or any(tag != "O" for tag in tags[start:end]):
            raise fail(DataError, f"span {(start, end, label)}", f"a non-empty span within 0..{length} that "
                       "overlaps no other span", "one that does not")
        tags[start:end] = [f"{_INSIDE[scheme]}-{label}"] * (end - start)
        tags[start] = f"B-{label}"
        if scheme != "BIO" and end - start == 1:
            tags[start] = f"S-{label}"
        elif scheme != "BIO":
            tags[end - 1] = f"E-{label}"
    return tags


def convert_tags(tags: Sequence[str], to: str, strict: bool = False, where: Sequence[str] | None = None) -> list[str]:
    """Convert a tag sequence from any scheme to ``to``; lossless on valid input.

    Args:
        tags: sequence of str. one tag per token in BIO, BIOES or BMES.
        to: str. the target scheme, one of ``SCHEMES``.
        strict: bool. fail on an orphan continuation tag instead of repairing it.
        where: sequence of str or None. a location per tag for messages.

    Returns:
        list of str. the same entities in ``to``.

    Example:
    >>> convert_tags(["S-PER", "O", "B-LOC", "E-LOC"], "BIO")
    ['B-PER', 'O', 'B-LOC', 'I-LOC']
    """
    _check_scheme(to)
    return spans_to_tags(tags_to_spans(tags, strict=strict, where=where), len(tags), to)


def char_to_token_spans(offsets: Sequence[tuple[int, int]], spans: Sequence[Span], where: str = "spans") -> list[Span]:
    """Map character spans onto the tokens they cover, given each token's character offsets.

    Args:
        offsets: sequence of ``(start, end)``. each token's character offsets (a tokenizer's, or
            ``NerExample.offsets``).
        spans: sequence of ``(start, end, label)``. character spans, ``end`` exclusive.
        where: str. what to name in an error.

    Returns:
        list of ``(start, end, label)``. token spans, sorted.

    Raises:
        DataError: a span cuts a token, holds no token, or overlaps another span.

    Example:
    >>> char_to_token_spans([(0, 3), (4, 7)], [(4, 7, "LOC")])
    [(1, 2, 'LOC')]
    """
    token_spans = []
    for start, end, label in spans:
        inside = [i for i, (a, b) in enumerate(offsets) if start <= a and b <= end]
        cut = [i for i, (a, b) in enumerate(offsets) if a < end and b > start and i not in inside]
        if cut or not inside:
            raise fail(DataError, where, f"entity {(start, end, label)} on token boundaries",
                       "a span that cuts a token" if cut else "a span with no token in it")
        token_spans.append((inside[0], inside[-1] + 1, label))
    token_spans.sort()
    for before, after in zip(token_spans, token_spans[1:], strict=False):
        if after[0] < before[1]:
            raise fail(DataError, where, "entities that do not overlap", f"{before} and {after} (token spans)")
    return token_spans


def token_to_char_spans(offsets: Sequence[tuple[int, int]], spans: Sequence[Span]) -> list[Span]:
    """Map token spans back to character spans, given each token's character offsets.

    Example:
    >>> token_to_char_spans([(0, 3), (4, 7)], [(0, 2, "PER")])
    [(0, 7, 'PER')]
    """
    return [(offsets[start][0], offsets[end - 1][1], label) for start, end, label in spans]
