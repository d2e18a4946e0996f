"""How often each training label occurs, logged, and a warning for a label so rare it may be a typo.

A label the training file spells once (``pso`` among ``pos`` and ``neg``) becomes a class of its own, which the
model can hardly learn and the scores then count. `report_labels` logs every label with its count, most frequent
first, and warns for each rare one (`rare_labels`), naming the lines it is on. The rule: a label is rare when it is
seen once while another label is seen more often, or fewer than 1 in `RARE_RATIO` times as often as the most
frequent label. Nothing here imports TensorFlow.

Example:
>>> counts = count_labels([("pos", 1), ("neg", 2), ("pos", 3), ("pso", 4), ("neg", 5)])
>>> {label: len(lines) for label, lines in counts.items()}, rare_labels(counts)
({'pos': 2, 'neg': 2, 'pso': 1}, ['pso'])
"""

from __future__ import annotations

from collections.abc import Iterable

from kerasbert.log import logger

__all__ = ["RARE_RATIO", "count_labels", "rare_labels", "report_labels"]

RARE_RATIO = 100  # a label seen fewer than 1 in this many times as often as the most frequent one is rare
SHOWN_LINES = 3  # the lines a warning names for one rare label


def count_labels(labelled: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """The lines each label is on, from ``(label, line)`` pairs, the labels most frequent first (ties in the order
    first seen)."""
    lines: dict[str, list[int]] = {}
    for label, line in labelled:
        lines.setdefault(label, []).append(line)
    return dict(sorted(lines.items(), key=lambda item: -len(item[1])))


def rare_labels(counts: dict[str, list[int]]) -> list[str]:
    """The labels of ``counts`` (`count_labels`) that are rare: seen once while another is seen more often, or
    fewer than 1 in `RARE_RATIO` times as often as the most frequent.

    Example:
    >>> rare_labels({"a": [1] * 300, "b": [2] * 2, "c": [3] * 3}), rare_labels({"a": [1], "b": [2]})
    (['b'], [])
    """
    most = max((len(lines) for lines in counts.values()), default=0)
    return [label for label, lines in counts.items()
            if (len(lines) == 1 < most) or len(lines) * RARE_RATIO < most]


def report_labels(labelled: Iterable[tuple[str, int]], path: str, noun: str = "label", verbose: int = 1) -> dict:
    """Log each label of the training file ``path`` with its count (with ``verbose``), and warn for each rare one
    with the lines it is on; returns `count_labels`'s counts. ``noun`` names what a label is (``"entity type"``)."""
    counts = count_labels(labelled)
    if not counts:
        return counts
    if verbose:
        listed = ", ".join(f"{label} {len(lines)}" for label, lines in counts.items())
        logger.info("%d %ss in %s: %s", len(counts), noun, path, listed)
    top, most = next(iter(counts.items()))
    for label in rare_labels(counts):
        lines = counts[label]
        where = ", ".join(map(str, lines[:SHOWN_LINES])) + (", ..." if len(lines) > SHOWN_LINES else "")
        seen = "once" if len(lines) == 1 else f"{len(lines)} times"
        logger.warning("%s:%s: %s %r is seen %s, %r %d times: a misspelt %s trains as a class of its own; correct "
                       "it, or keep it if it is meant", path, where, noun, label, seen, top, len(most), noun)
    return counts
