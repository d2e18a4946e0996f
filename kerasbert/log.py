"""The one logger kerasbert prints through (``logging.getLogger("kerasbert")``), and TensorFlow's start-up notices.

The logger prints plain lines to stderr at INFO, like Google's BERT scripts. Silence it with
``logging.getLogger("kerasbert").setLevel(logging.WARNING)``.

TensorFlow's C++ side writes notices to the process's stderr while it is imported and while it first looks for
devices (oneDNN on, no CUDA driver, ``failed call to cuInit``), some before it reads any log level. The
``kerasbert`` command starts TensorFlow inside `hidden_startup_notices`, which keeps back exactly those known
notices and passes every other line through.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator

logger = logging.getLogger("kerasbert")
if not logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False

# TensorFlow's start-up notices: what each says, not where it comes from, so that a real error still shows.
_NOTICE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|[IWE]\d{4} [\d:. ]+\d+ [\w.]+:\d+\] (?:"
    r"oneDNN custom operations are on"
    r"|Could not find cuda drivers on your machine"
    r"|failed call to cuInit"
    r"|This TensorFlow binary is optimized to use available CPU instructions"
    r"|Unable to register cu(?:DNN|FFT|BLAS) factory"
    r"|computation placer already registered"
    r"|TF-TRT Warning: Could not find TensorRT)"
    r"|To enable the following instructions: .* in other operations, rebuild TensorFlow with the appropriate "
    r"compiler flags\.")


def is_startup_notice(line: str) -> bool:
    """Whether ``line`` is one of TensorFlow's known start-up notices.

    Example:
    >>> is_startup_notice("I0000 00:00:1795696484.647537    3613 cudart_stub.cc:31] Could not find cuda drivers "
    ...                   "on your machine, GPU will not be used.")
    True
    >>> is_startup_notice("E0000 00:00:1795696484.647537    3613 saver.cc:12] Not found: model.ckpt")
    False
    """
    return _NOTICE.match(line.strip()) is not None


@contextlib.contextmanager
def hidden_startup_notices() -> Iterator[None]:
    """Hold back TensorFlow's known start-up notices written to file descriptor 2 inside the block.

    Everything else written to the descriptor in the block is written to it after the block, in order.
    """
    sys.stderr.flush()
    with tempfile.TemporaryFile() as held:
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().decode("utf-8", "replace").splitlines(keepends=True)
                    if not is_startup_notice(line)]
            if kept:
                os.write(2, "".join(kept).encode())


def start_tensorflow() -> None:
    """Import TensorFlow and let it find its devices without its start-up notices; nothing if already imported."""
    if "tensorflow" in sys.modules:
        return
    with hidden_startup_notices():
        import tensorflow as tf

        tf.config.list_physical_devices()
