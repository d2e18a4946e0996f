"""Atomic writes: a file appears whole under its name, or not at all.

Every file kerasbert writes goes through `atomic_path`: the content is written to a temporary name in
the same folder, then renamed over the target (a rename within one file system is atomic), and the
temporary file is removed if writing fails. A reader never sees half a file, and a run killed while
writing leaves the previous file in place.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

__all__ = ["atomic_path", "publish_folder", "write_text"]


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


@contextlib.contextmanager
def publish_folder(folder: str | os.PathLike, last: str | None = None) -> Iterator[str]:
    """A temporary folder beside ``folder`` to write several files in; they move into ``folder`` when the block
    ends without error, and are removed if it fails.

    A ``folder`` that does not exist yet appears whole, by one rename. Into an existing folder the files move
    one by one, each whole, ``last`` (the file that marks the set complete) after the others.

    Example:
    >>> target = os.path.join(tempfile.mkdtemp(), "new", "out")
    >>> with publish_folder(target) as staging:
    ...     _ = open(os.path.join(staging, "a.txt"), "w").write("a")
    >>> os.listdir(target)
    ['a.txt']
    """
    folder = os.path.abspath(os.fspath(folder))
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".kerasbert-", dir=parent)
    try:
        yield staging
        if not os.path.exists(folder):
            os.replace(staging, folder)
            return
        for name in sorted(os.listdir(staging), key=lambda name: name == last):
            os.replace(os.path.join(staging, name), os.path.join(folder, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
