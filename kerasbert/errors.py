"""One exception family for kerasbert.

Every error a user can cause (a bad config, a checkpoint that does not fit, an input
that is too long) is raised as a subclass of :class:`KerasBertError`. Each message names
the file or variable, what was expected, what was found, and gives a hint. The
subclasses also derive from the matching built-in (`ValueError`, `FileNotFoundError`)
so that generic ``except ValueError`` code keeps working.
"""

from __future__ import annotations


class KerasBertError(Exception):
    """Base class of every error kerasbert raises on purpose."""


class ConfigError(KerasBertError, ValueError):
    """A model configuration is missing, ill-formed or inconsistent."""


class CheckpointError(KerasBertError, ValueError):
    """A checkpoint cannot be found, read, written, or does not fit the model."""


class ModelError(KerasBertError, ValueError):
    """A model cannot be built or called with the given arguments or inputs."""


class DataError(KerasBertError, ValueError):
    """A data file cannot be read, or its rows, tags or labels are ill-formed."""


def fail(cls: type[KerasBertError], what: str, expected: str, found: str, hint: str = "") -> KerasBertError:
    """Build an error whose message reads ``what: expected X, found Y. hint``.

    Args:
        cls: type. the kerasbert error class to instantiate.
        what: str. the file, variable or argument at fault.
        expected: str. what kerasbert expected there.
        found: str. what it found instead.
        hint: str. what the user can do about it.

    Example:
    >>> raise fail(ConfigError, "bert_config.json", "hidden_size > 0", "hidden_size = 0")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: bert_config.json: expected hidden_size > 0, found hidden_size = 0
    """
    message = f"{what}: expected {expected}, found {found}"
    if hint:
        message += f". {hint}"
    return cls(message)
