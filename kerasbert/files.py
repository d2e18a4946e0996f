"""Atomic writes: a file or folder appears whole under its name, or not at all.

Every file kerasbert writes goes through this module. `atomic_path` gives a temporary name in the same
folder, renamed over the target (a rename within one file system is atomic) when the write succeeds and
removed when it fails; `publish_folder` does the same for a set of files, and `replace_folder` swaps a
whole folder in, keeping the previous one under a second name between its two renames. A reader never sees
half a file, a failed write (a full disk) leaves the previous version in place, and its `OSError` names the
target. Every temporary name starts with ``.tmp-``; a process killed while writing leaves such entries
behind, and `remove_temporaries` clears them before the folder is written again.

`json_value` reads the JSON of a file a user gives (a data line, a folder's config) into one kerasbert error naming
the file (and line) when it is not the JSON expected, too deep a nesting included; `check_existing` and `is_glob`
say what a path a user gives names.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator

from kerasbert.errors import ConfigError, DataError, KerasBertError, fail

__all__ = ["JSON_DEPTH", "TEMPORARY", "atomic_path", "check_existing", "copy_file", "is_glob", "json_value",
           "publish_folder", "remove_temporaries", "replace_folder", "write_text"]

TEMPORARY = ".tmp-"  # the prefix of every temporary file and folder
# the deepest nesting `json_value` reads: far beyond any config or data row, and far below the depth at which Python's
# parser, ``repr`` and ``json.dumps`` stop with a RecursionError
JSON_DEPTH = 100
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def _named(error: OSError, path: str) -> OSError:
    """``error`` again with ``path`` as its file name (the target, not the temporary the writer had open)."""
    if error.filename == path:
        return error
    if error.errno is None:
        return OSError(f"{path}: {error}")
    return OSError(error.errno, error.strerror or str(error), path)


def _remove(path: str) -> None:
    """Remove a file or a folder, if there."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


@contextlib.contextmanager
def _failing_names(path: str) -> Iterator[None]:
    """Re-raise an `OSError` of the block with ``path`` as its file name."""
    try:
        yield
    except OSError as error:
        raise _named(error, path) from error


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """A temporary path beside ``path`` to write to; renamed to ``path`` when the block ends without error.

    The temporary name keeps ``path``'s name at its end (``.tmp-XXXX-model.keras``), so writers that check
    the extension (Keras's ``model.save``) accept it. The file gets the mode a plain ``open`` would give it.

    Example:
    >>> folder = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(folder, "a.txt")) as tmp:
    ...     _ = open(tmp, "w").write("whole")
    >>> os.listdir(folder), open(os.path.join(folder, "a.txt")).read()
    (['a.txt'], 'whole')
    """
    path = os.fspath(path)
    with _failing_names(path):
        handle, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=TEMPORARY,
                                       suffix="-" + os.path.basename(path))
        os.close(handle)
    try:
        with _failing_names(path):
            yield tmp
            os.chmod(tmp, 0o666 & ~_UMASK)
            os.replace(tmp, path)
    finally:
        _remove(tmp)


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


def output_rows(rows: list[dict], output: str | None, written: str) -> None:
    """A command's answers, each row a JSON line: into the file ``output`` (its folder made, the file whole or not at
    all) with one line saying ``{count} {written} to {output}``, else printed.

    Example:
    >>> output_rows([{"text": "好", "label": "pos"}], None, "predictions written")
    {"text": "好", "label": "pos"}
    """
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    if output is None:
        print("\n".join(lines))
        return
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    write_text(output, "".join(line + "\n" for line in lines))
    print(f"{len(lines)} {written} to {output}")


def copy_file(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """Copy ``source`` to ``path`` atomically (bytes only, as `shutil.copyfile`).

    Example:
    >>> folder = tempfile.mkdtemp()
    >>> write_text(os.path.join(folder, "a.txt"), "a")
    >>> copy_file(os.path.join(folder, "a.txt"), os.path.join(folder, "b.txt")); sorted(os.listdir(folder))
    ['a.txt', 'b.txt']
    """
    with atomic_path(path) as tmp:
        shutil.copyfile(source, tmp)


def _staging(folder: str) -> str:
    """A new temporary folder beside ``folder`` (whose parent is made if needed), readable as a plain one."""
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=TEMPORARY, suffix="-" + os.path.basename(folder), dir=parent)
    os.chmod(staging, 0o777 & ~_UMASK)
    return staging


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
    with _failing_names(folder):
        staging = _staging(folder)
    try:
        with _failing_names(folder):
            yield staging
            if not os.path.exists(folder):
                os.replace(staging, folder)
                return
            for name in sorted(os.listdir(staging), key=lambda name: name == last):
                os.replace(os.path.join(staging, name), os.path.join(folder, name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def replace_folder(folder: str | os.PathLike, old: str | os.PathLike) -> Iterator[str]:
    """A temporary folder to write a new version of ``folder`` in; it replaces ``folder`` whole when the block
    ends without error, and is removed if it fails.

    Two renames swap it in: ``folder`` -> ``old``, then the new one -> ``folder``; ``old`` is removed after.
    A process killed between the two leaves the previous version complete under ``old``, so a reader looks
    for ``folder`` first, then ``old``.

    Example:
    >>> root = tempfile.mkdtemp()
    >>> for text in ("first", "second"):
    ...     with replace_folder(os.path.join(root, "state"), os.path.join(root, "state.old")) as staging:
    ...         write_text(os.path.join(staging, "a.txt"), text)
    >>> os.listdir(root), open(os.path.join(root, "state", "a.txt")).read()
    (['state'], 'second')
    """
    folder, old = os.path.abspath(os.fspath(folder)), os.path.abspath(os.fspath(old))
    with _failing_names(folder):
        staging = _staging(folder)
    try:
        with _failing_names(folder):
            yield staging
            if os.path.isdir(folder):
                shutil.rmtree(old, ignore_errors=True)
                os.replace(folder, old)
            os.replace(staging, folder)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_temporaries(folder: str | os.PathLike) -> list[str]:
    """Remove the ``.tmp-*`` files and folders a killed writer left in ``folder``; return their names.

    Call it only where no other process is writing into ``folder``.

    Example:
    >>> folder = tempfile.mkdtemp()
    >>> _ = open(os.path.join(folder, ".tmp-1234-model.keras"), "w").write("half")
    >>> remove_temporaries(folder), os.listdir(folder)
    (['.tmp-1234-model.keras'], [])
    """
    names = sorted(name for name in os.listdir(folder) if name.startswith(TEMPORARY))
    for name in names:
        _remove(os.path.join(folder, name))
    return names


def json_value(text: str | bytes, where: str, expected: str, error: type[KerasBertError] = DataError,
               hint: str = ""):
    """The JSON value of ``text``, read from ``where`` (``file`` or ``file:line``), nested at most `JSON_DEPTH` deep.

    Args:
        text: str or bytes. the JSON text.
        where: str. the file, or ``file:line``, named in the error.
        expected: str. what the text should hold, for the error.
        error: type. the kerasbert error to raise (a DataError for data, a ConfigError for a config).
        hint: str. what to do about it.

    Raises:
        error: the text is not JSON, or nests deeper than `JSON_DEPTH`.

    Example:
    >>> json_value('{"text": "a"}', "in.jsonl:1", "one JSON object")
    {'text': 'a'}
    >>> json_value("[" * 101 + "]" * 101, "in.jsonl:2", "one JSON object")
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: in.jsonl:2: expected one JSON object, found a value nested more than 100 deep
    """
    too_deep = f"a value nested more than {JSON_DEPTH} deep"
    try:
        value = json.loads(text)
    except RecursionError:  # Python's parser recurses once per level
        raise fail(error, where, expected, too_deep, hint) from None
    except ValueError as e:
        raise fail(error, where, expected, f"invalid JSON ({type(e).__name__}: {str(e)[:80]})", hint) from None
    opening = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
    if text.count(opening[0]) + text.count(opening[1]) > JSON_DEPTH and _nesting(value) > JSON_DEPTH:
        raise fail(error, where, expected, too_deep, hint)
    return value


def _nesting(value) -> int:
    """How deep lists and objects nest in a JSON value (0 for a string or number), counted without recursion, up
    to one past `JSON_DEPTH`."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= JSON_DEPTH:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def check_existing(path: str | None, option: str) -> None:
    """A ConfigError naming ``option`` unless ``path`` (when given) is a file, checked before any model loads.

    Example:
    >>> check_existing("/no/such/texts.txt", "--input")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: --input: expected an existing file, found '/no/such/texts.txt', which does not exist
    """
    if path is not None and not os.path.isfile(path):
        raise fail(ConfigError, option, "an existing file", f"{path!r}, " + ("a folder" if os.path.isdir(path) else
                                                                           "which does not exist"))


def is_glob(path: str | None) -> bool:
    """Whether ``path`` has glob characters (``*``, ``?``, ``[``): it names the files that match it.

    Example:
    >>> is_glob("data/train-*.tsv"), is_glob("data/train.tsv"), is_glob(None)
    (True, False, False)
    """
    return path is not None and glob.has_magic(path)
