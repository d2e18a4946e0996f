"""The one logger kerasbert prints through (``logging.getLogger("kerasbert")``), and TensorFlow's start-up notices.

The logger prints plain lines to stderr at INFO, like Google's BERT scripts. Silence it with
``logging.getLogger("kerasbert").setLevel(logging.WARNING)``.

TensorFlow's C++ side writes notices to the process's stderr while it is imported and while it first looks for
devices (oneDNN on, no CUDA driver, ``failed call to cuInit``), some before it reads any log level, and later
where an op first runs (oneDNN's fall-back to Eigen for a dtype on a CPU without AVX-512). The ``kerasbert``
command runs inside `hidden_startup_notices`, which keeps back exactly those known notices, wherever they are
written, and passes every other line through.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import select
import sys
import threading
from collections.abc import Iterator

logger = logging.getLogger("kerasbert")
if not logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

# TensorFlow's known notices: what each says, not where it comes from, so that a real error still shows. A notice
# starts with absl's header (``E0000 00:00:1795696487.327350    3613 util.cc:131] ``) or the older one
# (``2025-01-08 14:55:59.249677: E tensorflow/core/util/util.cc:131] ``) and runs to the end of its line.
_HEADER = r"(?:[IWE]\d{4} [\d:. ]+\d+ [\w.]+:\d+\] |\d{4}-\d\d-\d\d [\d:.]+: [IWE] [\w/.]+:\d+\] )"
_NOTICE = re.compile(
    r"(?:WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    rf"|{_HEADER}(?:"
    r"oneDNN custom operations are on"
    r"|Could not find cuda drivers on your machine"
    r"|failed call to cuInit"
    r"|This TensorFlow binary is optimized to use available CPU instructions"
    r"|Unable to register cu(?:DNN|FFT|BLAS) factory"
    r"|computation placer already registered"
    r"|TF-TRT Warning: Could not find TensorRT"
    r"|oneDNN supports DT_\w+ only on platforms with AVX-512)"  # written once per dtype on a CPU without AVX-512
    r"|To enable the following instructions: .* in other operations, rebuild TensorFlow with the appropriate "
    r"compiler flags\.)[^\n]*\n?")
_NOTICE_BYTES = re.compile(_NOTICE.pattern.encode())  # the same, on the bytes written to the descriptor
_PIPE_SIZE = 1 << 20  # room for a burst of lines while the filter thread waits for the interpreter
_PARTIAL_WAIT = 0.05  # seconds an unfinished line (a progress bar's) waits for its end before it is passed on


def is_startup_notice(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's known notices (start-up, devices, oneDNN's fall-backs).

    Example:
    >>> is_startup_notice("I0000 00:00:1795696484.647537    3613 cudart_stub.cc:31] Could not find cuda drivers "
    ...                   "on your machine, GPU will not be used.")
    True
    >>> is_startup_notice("E0000 00:00:1795696484.647537    3613 saver.cc:12] Not found: model.ckpt")
    False
    """
    return _NOTICE.fullmatch(line.strip() + "\n") is not None


def without_notices(text: str) -> str:
    r"""``text`` with every known notice removed, also one written in the middle of another line (a progress bar).

    Example:
    >>> without_notices("1/4 ━━E0000 00:00:1795696487.327350    3613 util.cc:131] oneDNN supports DT_INT32 only on "
    ...                 "platforms with AVX-512. Falling back to the default Eigen-based implementation if present.\n"
    ...                 "━━ 4/4\n")
    '1/4 ━━━━ 4/4\n'
    """
    return _NOTICE.sub("", text)


@contextlib.contextmanager
def hidden_startup_notices() -> Iterator[None]:
    """Hold back TensorFlow's known notices written to file descriptor 2 inside the block, whichever thread or
    library writes them and whenever.

    Every other byte written to the descriptor passes through as it comes, in order: a thread reads the descriptor
    through a pipe and writes each finished line (and an unfinished one, such as a progress bar's, once nothing
    follows it) to the descriptor's old target.
    """
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    with contextlib.suppress(AttributeError, OSError):  # Linux only; the default 64 KiB also works
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    target, saved = os.dup(2), os.dup(2)
    filter_thread = threading.Thread(target=_pass_lines, args=(read_end, target), daemon=True)
    filter_thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last writer closes (unless a child process still holds it)
        os.close(saved)
        filter_thread.join(timeout=2)


def _pass_lines(read_end: int, target: int) -> None:
    """Copy ``read_end`` to ``target`` until the pipe closes, without the known notices; then close both.

    It keeps reading after ``target`` fails (a closed terminal), so that writers never block on a full pipe.
    """
    pending, failed = b"", False
    try:
        while True:
            waiting, _, _ = select.select([read_end], [], [], _PARTIAL_WAIT if pending else None)
            chunk = os.read(read_end, 1 << 16) if waiting else b""
            if waiting and not chunk:
                break
            pending += chunk
            cut = pending.rfind(b"\n") + 1 if waiting else len(pending)
            failed = failed or not _write_all(target, _NOTICE_BYTES.sub(b"", pending[:cut]))
            pending = pending[cut:]
        _write_all(target, _NOTICE_BYTES.sub(b"", pending))
    finally:
        os.close(read_end)
        os.close(target)


def _write_all(fd: int, data: bytes) -> bool:
    """Write all of ``data`` to ``fd``; whether that worked."""
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        return False
    return True


def progress_verbosity(quiet: bool = False) -> int:
    """The ``verbose`` of Keras's progress bars and ``fit``: 0 with ``quiet``; 1, a bar redrawn in place, when
    standard output (where Keras draws it) is a terminal; else 2, one line when a bar or an epoch ends, so a pipe
    or a log file gets no redrawn bar."""
    if quiet:
        return 0
    return 1 if hasattr(sys.stdout, "isatty") and sys.stdout.isatty() else 2


def start_tensorflow() -> None:
    """Import TensorFlow and let it find its devices without its start-up notices; nothing if already imported."""
    if "tensorflow" in sys.modules:
        return
    with hidden_startup_notices():
        import tensorflow as tf

        tf.config.list_physical_devices()
