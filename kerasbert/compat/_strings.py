"""bert4keras 0.11.5's small ``snippets`` helpers: strings, sequences, NumPy and decorators, same arguments and results.

`kerasbert.compat.snippets` re-exports them. Python 3 only: ``is_py2`` is False, and a "unicode" string is a ``str``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from kerasbert.errors import ConfigError, fail
from kerasbert.text.pre_tokenize import _lowercase_and_normalize as lowercase_and_normalize

__all__ = ["Hook", "convert_to_str", "convert_to_unicode", "delete_arguments", "insert_arguments", "is_one_of",
           "is_py2", "is_string", "longest_common_subsequence", "longest_common_substring", "lowercase_and_normalize",
           "orthogonally_resize", "softmax", "strQ2B", "string_matching"]

is_py2 = False


class Hook:
    """A module seen through an object whose attribute ``uniout`` is None (bert4keras wraps ``snippets`` in one so
    that ``from bert4keras.snippets import uniout`` imports the Python 2 printing module only when asked; Python 3
    needs none). Every other attribute is the module's.

    Example:
    >>> import math
    >>> hooked = Hook(math)
    >>> hooked.uniout is None, hooked.pi == math.pi
    (True, True)
    """

    def __init__(self, module) -> None:
        self.module = module

    def __getattr__(self, attr: str):
        return None if attr == "uniout" else getattr(self.module, attr)

FULL_WIDTH_SPACE, FULL_WIDTH = 0x3000, (0xFF01, 0xFF5E)  # U+FF01..U+FF5E are U+0021..U+007E full width
FULL_WIDTH_OFFSET = 0xFF01 - 0x21


def is_string(s) -> bool:
    """Whether ``s`` is a ``str``."""
    return isinstance(s, str)


def strQ2B(ustring: str) -> str:  # noqa: N802 (bert4keras's name)
    """Full-width characters (``ＡＢＣ１２３，``, the ideographic space) as their half-width ASCII forms.

    Example:
    >>> strQ2B("ＡＢＣ　１２３！")
    'ABC 123!'
    """
    def half(ch: str) -> str:
        code = ord(ch)
        if code == FULL_WIDTH_SPACE:
            return " "
        return chr(code - FULL_WIDTH_OFFSET) if FULL_WIDTH[0] <= code <= FULL_WIDTH[1] else ch

    return "".join(map(half, ustring))


def string_matching(s: str, keywords: Iterable[str]) -> bool:
    """Whether one of the regular expressions ``keywords`` is found in ``s``.

    Example:
    >>> string_matching("北京大学", ["上海", "北.大"])
    True
    """
    return any(re.search(keyword, s) for keyword in keywords)


def convert_to_unicode(text, encoding: str = "utf-8", errors: str = "ignore"):
    """``bytes`` decoded to ``str`` (undecodable bytes dropped by default); anything else as it is.

    Example:
    >>> convert_to_unicode("中".encode() + b"\\xff")
    '中'
    """
    return text.decode(encoding, errors=errors) if isinstance(text, bytes) else text


convert_to_str = convert_to_unicode  # in Python 3 the native string is the unicode one


def is_one_of(x, ys) -> bool:
    """Whether ``x`` is (by identity) one of ``ys``: ``x in ys`` where ``==`` would fail or mislead (arrays).

    Example:
    >>> a = np.zeros(2)
    >>> is_one_of(a, [np.zeros(2), a]), is_one_of(np.zeros(2), [a])
    (True, False)
    """
    return any(x is y for y in ys)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """NumPy softmax along ``axis``, shifted by the maximum for stability.

    Example:
    >>> softmax(np.array([0.0, np.log(3.0)])).round(4).tolist()
    [0.25, 0.75]
    """
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def insert_arguments(**arguments) -> Callable:
    """Decorate a method (``__init__`` mostly) to take the keyword ``arguments`` it lacks: each is set on ``self``,
    from the call or else from its default here, and not passed on.

    Example:
    >>> class Layer:
    ...     @insert_arguments(heads=2)
    ...     def __init__(self, units):
    ...         self.units = units
    >>> layer = Layer(8, heads=4)
    >>> layer.units, layer.heads, Layer(8).heads
    (8, 4, 2)
    """
    def decorator(method):
        @functools.wraps(method)
        def wrapped(self, *args, **kwargs):
            for name, default in arguments.items():
                setattr(self, name, kwargs.pop(name, default))
            return method(self, *args, **kwargs)

        return wrapped

    return decorator


def delete_arguments(*arguments: str) -> Callable:
    """Decorate a method (``__init__`` mostly) to refuse the keyword ``arguments`` with the ``TypeError`` Python
    gives an unexpected keyword argument (a subclass that fixes what its parent lets callers choose).

    Example:
    >>> class Fixed:
    ...     @delete_arguments("units")
    ...     def __init__(self, **kwargs):
    ...         pass
    >>> Fixed(units=3)
    Traceback (most recent call last):
    ...
    TypeError: Fixed got an unexpected keyword argument 'units'
    """
    def decorator(method):
        @functools.wraps(method)
        def wrapped(self, *args, **kwargs):
            for name in arguments:
                if name in kwargs:
                    raise TypeError(f"{type(self).__name__} got an unexpected keyword argument '{name}'")
            return method(self, *args, **kwargs)

        return wrapped

    return decorator


def longest_common_substring(source: Sequence, target: Sequence) -> tuple[int, tuple[int, int, int, int]]:
    """The length of the longest common contiguous run of ``source`` and ``target`` and its place
    ``(source start, source end, target start, target end)``: the first found, scanning source then target.

    Example:
    >>> longest_common_substring("abcde", "xbcdy")
    (3, (1, 4, 1, 4))
    """
    best, span = 0, (0, 0, 0, 0)
    previous = [0] * (len(target) + 1)  # run lengths ending at the previous source item
    for i, s in enumerate(source, 1):
        current = [0] * (len(target) + 1)
        for j, t in enumerate(target, 1):
            if s == t:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, span = current[j], (i - current[j], i, j - current[j], j)
        previous = current
    return best, span


def longest_common_subsequence(source: Sequence, target: Sequence) -> tuple[int, list[tuple[int, int]]]:
    """The length of the longest common subsequence of ``source`` and ``target`` and one such alignment: the
    ``(source index, target index)`` pairs, in order (the one bert4keras's tie-breaking picks).

    Example:
    >>> longest_common_subsequence("abcd", "acbd")
    (3, [(0, 0), (1, 2), (3, 3)])
    """
    table = [[0] * (len(target) + 1) for _ in range(len(source) + 1)]  # table[i][j]: of source[:i], target[:j]
    for i, s in enumerate(source, 1):
        for j, t in enumerate(target, 1):
            if s == t:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i][j - 1], table[i - 1][j])
    length, mapping = table[-1][-1], []
    i, j = len(source) - 1, len(target) - 1
    while len(mapping) < length:
        if source[i] == target[j]:
            mapping.append((i, j))
            i, j = i - 1, j - 1
        elif table[i + 1][j] > table[i][j + 1]:
            j -= 1
        else:
            i -= 1
    return length, mapping[::-1]


def orthogonally_resize(a: np.ndarray, new_shape: Sequence[int], window: int = 2) -> np.ndarray:
    """``a`` resized to ``new_shape`` keeping its norm: an axis that grows repeats each block of ``window``
    entries (``[a, b, a, b, c, d, c, d]``) and is cut to length, one that shrinks is cut. Used to initialize a
    larger model's weights from a smaller one's.

    Example:
    >>> orthogonally_resize(np.array([[3.0, 4.0]]), (1, 4)).round(4).tolist()
    [[2.1213, 2.8284, 2.1213, 2.8284]]
    """
    if a.ndim != len(new_shape):
        raise fail(ConfigError, "orthogonally_resize: new_shape", f"{a.ndim} lengths, one per axis", repr(new_shape))
    norm, cuts = np.linalg.norm(a), []
    for axis, (old, new) in enumerate(zip(a.shape, new_shape, strict=True)):
        repeats = -(-new // old)
        if old != new and repeats > 1:
            if old % window:
                raise fail(ConfigError, "orthogonally_resize: window", f"a divisor of axis {axis}'s length {old}",
                           str(window))
            blocks = a.reshape(a.shape[:axis] + (old // window, window) + a.shape[axis + 1:])
            a = np.repeat(blocks, repeats, axis=axis).reshape(a.shape[:axis] + (old * repeats,) + a.shape[axis + 1:])
        cuts.append(slice(0, new))
    a = a[tuple(cuts)]
    return a / np.linalg.norm(a) * norm
