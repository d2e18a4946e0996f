"""Token ids a user passes (to generate, to decode): integers, never bools.

Python counts ``True`` as 1 and ``False`` as 0, and NumPy turns ``[True, 5]`` into ``[1, 5]``: a bool among token
ids would silently be the id of ``[UNK]`` or ``[PAD]`` in a BERT vocabulary. `refuse_bools` says so instead.
"""

from __future__ import annotations

import numpy as np

from kerasbert.errors import DataError, fail

__all__ = ["refuse_bools"]


def refuse_bools(ids, where: str) -> None:
    """A DataError naming ``where`` when ``ids`` (a list or array of token ids, nested or not) holds a bool.

    Example:
    >>> refuse_bools([[2, 7], [3]], "inputs")
    >>> refuse_bools([2, True], "inputs")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: inputs: expected integer token ids, found the bool True. True and False are not \
token ids (Python reads them as 1 and 0): pass ints
    """
    stack = [ids]
    while stack:  # a stack, not recursion: nesting of any depth
        value = stack.pop()
        if isinstance(value, bool | np.bool_):
            raise fail(DataError, where, "integer token ids", f"the bool {bool(value)!r}",
                       "True and False are not token ids (Python reads them as 1 and 0): pass ints")
        if isinstance(value, np.ndarray):
            stack.extend(value.ravel()[::-1] if value.dtype.kind in "bO" else ())
        elif isinstance(value, list | tuple):
            stack.extend(reversed(value))
