"""The optional packages of ``kerasbert[serve]`` that exports import on use, and `require`, which imports one or
names the extra that installs it. Nothing here imports them before it is asked."""

from __future__ import annotations

import importlib
from types import ModuleType

from kerasbert.errors import ConfigError, fail

__all__ = ["INSTALL", "require"]

INSTALL = {"tf2onnx": "tf2onnx", "onnxruntime": "onnxruntime", "openvino": "openvino", "nncf": "nncf",
           "tensorflow_text": "tensorflow-text"}  # a module's top package -> the pip package that installs it


def require(module: str, what: str) -> ModuleType:
    """Import ``module``, or a ConfigError saying which extra installs it.

    Example:
    >>> require("nncf.no_such_module", "to quantize")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: export: expected nncf, to quantize, found ModuleNotFoundError: ...
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise fail(ConfigError, "export", f"{INSTALL[module.split('.')[0]]}, {what}", f"{type(e).__name__}: {e}",
                   'pip install "kerasbert[serve]"') from None
