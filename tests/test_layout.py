"""The package's rooms import each other in one direction, and no modules import each other in a circle.

Rooms, from the ground up: the core modules (errors, log, files, internals, and the model config
``modeling.config`` with its Hugging Face keys ``modeling.hf_configs``, ``modeling.deberta_config`` and
``modeling.modernbert_config``, and the table of families ``modeling.families``, plain data every room reads: they
import
only the core); perf, annotated, weights and text,
which need only the core; modeling (the graph), which may use perf, annotated, weights and text (plain data code
without TensorFlow: bert4keras's NumPy ``ViterbiDecoder`` decodes with ``text.predictions.viterbi``); generation
(decoding with a built language model), which may use modeling and the rooms below it; finetune, which may use
every room below it; serving (exports), above finetune; and the entry points (the package's ``__init__``, cli,
compat), which may use all.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "kerasbert"
CORE = {"errors", "log", "files", "internals", "choices", "layer_names"}
CORE_MODULES = {"kerasbert.modeling.config", "kerasbert.modeling.hf_configs", "kerasbert.modeling.families",
                "kerasbert.modeling.deberta_config", "kerasbert.modeling.modernbert_config"}
ENTRY = {"__init__", "__main__", "cli", "compat"}
ALLOWED = {
    "core": {"core"},
    "perf": {"core"},
    "annotated": {"core"},
    "weights": {"core"},
    "text": {"core"},
    "modeling": {"core", "perf", "annotated", "weights", "text"},
    "generation": {"core", "perf", "annotated", "weights", "text", "modeling"},
    "finetune": {"core", "perf", "annotated", "weights", "text", "modeling", "generation"},
    "serving": {"core", "perf", "annotated", "weights", "text", "modeling", "finetune", "generation"},
    "entry": {"core", "perf", "annotated", "weights", "text", "modeling", "generation", "finetune", "serving"},
}


def _module_of(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ENTRY:
        return "entry"
    return "core" if parts[1] in CORE or module in CORE_MODULES else parts[1]


def _imports(path: pathlib.Path, top_level_only: bool) -> set[str]:
    """The kerasbert modules ``path`` imports (``from kerasbert.text import schemes`` counts as the module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kerasbert"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").exists() else node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("kerasbert")}
    return found


MODULES = {_module_of(path): path for path in sorted(PACKAGE.rglob("*.py")) if "configs" not in path.parts}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_room_imports_only_the_rooms_below_it(module):
    room = _room(module)
    wrong = sorted(m for m in _imports(MODULES[module], top_level_only=False)
                   if _room(m) != room and _room(m) not in ALLOWED[room])
    assert not wrong, f"{module} ({room}) imports {wrong}; {room} may use {sorted(ALLOWED[room])}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) == "serving"))
def test_serving_stands_without_the_training_loop(module):
    # an export reads a run folder through kerasbert.finetune.runs, never through the training loop
    assert "kerasbert.finetune.training" not in _imports(MODULES[module], top_level_only=False), module


def test_no_modules_import_each_other_in_a_circle():
    # every import counts, those inside functions too: a lazy import keeps start-up fast, it does not excuse a circle
    graph = {module: {m for m in _imports(path, top_level_only=False) if m in MODULES and m != module}
             for module, path in MODULES.items()}
    done, path = set(), []

    def visit(module):
        if module in path:
            raise AssertionError("import circle: " + " -> ".join([*path[path.index(module):], module]))
        if module in done:
            return
        path.append(module)
        for target in sorted(graph[module]):
            visit(target)
        path.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)
    assert len(done) == len(MODULES) > 30
