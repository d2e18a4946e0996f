"""bert4keras 0.11.5's whole public surface ports: each public class and function of its six modules (listed by
bert4keras itself in the oracle's environment: tests/oracle_surface.py) is in the same ``kerasbert.compat`` module,
or docs/from-bert4keras.md names it in a row with the Keras 3 lines that replace it and a test proves them."""

from __future__ import annotations

import importlib
import os
import re

import pytest

import helpers

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "from-bert4keras.md")

# bert4keras's public values that are neither classes nor functions, which scripts import all the same
VALUES = {"backend": ["keras", "K", "is_tf_keras", "do_recompute", "custom_objects"], "layers": ["custom_objects"],
          "optimizers": ["custom_objects"], "snippets": ["is_py2", "uniout", "Hook"]}

# "module.name" -> the test (file::function, under tests/) proving the guide's Keras 3 replacement; only for names
# Keras 3 itself rules out
REPLACED = {"models.data_parallel": "compat/test_examples_optimizers.py::test_iflytek_under_a_mirrored_strategy"}


@pytest.fixture(scope="module")
def surface(tmp_path_factory) -> dict[str, list[str]]:
    names = helpers.run_bert4keras("oracle_surface.py", {}, str(tmp_path_factory.mktemp("surface")))
    return {module: sorted({*map(str, found), *VALUES.get(module, [])}) for module, found in names.items()}


def _guide_rows() -> list[str]:
    with open(GUIDE, encoding="utf-8") as f:
        return [line for line in f if line.startswith("| `")]


def _test_exists(where: str) -> bool:
    path, function = where.split("::")
    with open(os.path.join(ROOT, "tests", path), encoding="utf-8") as f:
        return re.search(rf"^def {re.escape(function)}\(", f.read(), re.M) is not None


def test_the_oracle_lists_the_six_modules(surface):
    assert set(surface) == {"models", "layers", "backend", "snippets", "tokenizers", "optimizers"}
    assert {"build_transformer_model", "BERT", "Transformer"} <= set(surface["models"])
    assert {"WebServing", "AutoRegressiveDecoder", "uniout"} <= set(surface["snippets"])
    assert sum(map(len, surface.values())) > 120


def test_every_public_name_ports(surface):
    missing = []
    for module, names in surface.items():
        compat = importlib.import_module(f"kerasbert.compat.{module}")
        missing += [f"{module}.{name}" for name in names if not hasattr(compat, name)
                    and f"{module}.{name}" not in REPLACED]
    assert missing == [], f"{len(missing)} bert4keras names kerasbert.compat lacks: {missing}"


def test_each_replacement_is_documented_and_tested():
    rows = _guide_rows()
    for name, where in REPLACED.items():
        row = [r for r in rows if f"`{name}`" in r or f"`{name}(" in r]
        assert row and "not supported" not in row[0], f"{name}: no row in docs/from-bert4keras.md with a replacement"
        assert _test_exists(where), f"{name}: {where} does not exist"


def test_the_guide_marks_nothing_unsupported(surface):
    """A row saying "not supported" for a name bert4keras has is a name a porting user can hit."""
    unsupported = [row.split("|")[1].strip() for row in _guide_rows() if "not supported" in row]
    assert unsupported == []
