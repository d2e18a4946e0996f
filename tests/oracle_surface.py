"""Lists bert4keras 0.11.5's public surface: each module's public classes and functions, as a user imports them.
Never imported by the tests.

Usage: python oracle_surface.py JOB.json (run by `helpers.run_bert4keras`, with TF_KERAS=1 and
TF_USE_LEGACY_KERAS=1). The npz holds one array of names per module. ``bert4keras.snippets`` replaces itself in
``sys.modules`` by a ``Hook`` over the module (for its lazy ``uniout``): the names are read from the module inside.
"""

import importlib
import inspect
import json
import sys

import numpy as np

MODULES = ("models", "layers", "backend", "snippets", "tokenizers", "optimizers")


def public_names(module) -> list[str]:
    """The module's public classes and functions defined in it, aliases under a second name too."""
    module = getattr(module, "module", module)  # snippets' Hook
    return sorted(name for name, value in vars(module).items() if not name.startswith("_")
                  and (inspect.isclass(value) or inspect.isfunction(value))
                  and getattr(value, "__module__", None) == module.__name__)


def main(job_path: str) -> None:
    with open(job_path) as f:
        job = json.load(f)
    np.savez(job["out"], **{name: np.array(public_names(importlib.import_module(f"bert4keras.{name}")))
                            for name in MODULES})


if __name__ == "__main__":
    main(sys.argv[1])
