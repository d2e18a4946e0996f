"""Atomic writes: a file appears whole under its name, or not at all.

Every file kerasbert writes goes through `atomic_path`: the content is written to a temporary name in
the same folder, then renamed over the target (a rename within one file system is atomic), and the
temporary file is removed if writing fails. A reader never sees half a file, and a run killed while
writing leaves the previous file in place.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

__all__ = ["atomic_path", "write_text"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """A temporary path beside ``path`` to write to; renamed to ``path`` when the block ends without error.

    The temporary name keeps ``path``'s name at its end (``.tmp-XXXX-model.keras``), so writers that check
    the extension (Keras's ``model.save``) accept it.

    Example:
    >>> folder = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(folder, "a.txt")) as tmp:
    ...     _ = open(tmp, "w").write("whole")
    >>> os.listdir(folder), open(os.path.join(folder, "a.txt")).read()
    (['a.txt'], 'whole')
    """
    path = os.fspath(path)
    handle, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-",
                                   suffix="-" + os.path.basename(path))
    os.close(handle)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (UTF-8, newlines as given).

    Args:
        path: str. the file to write.
        text: str. its whole content.

    Example:
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> write_text(path, "hello\\n"); open(path).read()
    'hello\\n'
    """
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as out:
        out.write(text)
