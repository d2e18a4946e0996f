"""The public names of the package, and what importing it does and does not do."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys

import kerasbert


def test_public_api():
    errors = {"CheckpointError", "ConfigError", "DataError", "KerasBertError", "ModelError"}
    assert sorted(kerasbert.__all__) == sorted({*kerasbert._HOMES, *errors})
    for name in kerasbert.__all__:
        assert getattr(kerasbert, name) is not None
    model = kerasbert.heads.cls(kerasbert.build_transformer_model("tiny", verbose=False), 2)
    out = io.StringIO()
    info = kerasbert.summary(model, format="markdown", print_fn=lambda line, **_: out.write(line + "\n"))
    assert isinstance(info, kerasbert.Summary)
    assert info.params == 23426 == model.count_params()
    assert "| CLS-Dense (Dense) | (None, 2) | 66 | H·C+C = 32·2+2 |" in out.getvalue()


def test_summary_is_a_function_not_a_module():
    assert callable(kerasbert.summary) and kerasbert.summary.__module__ == "kerasbert.annotated.collect"
    assert importlib.util.find_spec("kerasbert.summary") is None  # no module behind the name


def test_unknown_name_is_an_attribute_error():
    try:
        kerasbert.build_transformer_modle  # noqa: B018
    except AttributeError as error:
        assert "build_transformer_modle" in str(error)
    else:
        raise AssertionError("a misspelt name must raise AttributeError")


def _fresh(code: str) -> str:
    """Run ``code`` in a new interpreter, whose modules start empty; its stdout."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_import_does_not_start_tensorflow_until_a_name_is_used():
    code = ("import sys, kerasbert; print('tensorflow' in sys.modules); kerasbert.Tokenizer; "
            "print('tensorflow' in sys.modules, 'kerasbert.modeling.layers' in sys.modules)")
    assert _fresh(code).split() == ["False", "True", "True"]
