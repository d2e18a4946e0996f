"""Bad options of `kerasbert export` (precision): rows of the catalogue in ``tests/test_bad_inputs.py``. Each fails
before the run is read, so the run folder is only made, not trained."""

from __future__ import annotations

from pathlib import Path

from kerasbert.errors import ConfigError

from bad_input_kit import Case


def _export(fmt: str, precision: str):
    def call(tmp: Path):
        from kerasbert.serving.export import export

        return export(str(tmp / "run"), str(tmp / "out"), fmt, precision=precision)

    return call


def _cli(fmt: str, precision: str):
    return lambda tmp: ["export", str(tmp / "run"), str(tmp / "out"), "--format", fmt, "--precision", precision]


def _run(tmp: Path, _shared) -> None:
    (tmp / "run").mkdir()


def rows() -> list[Case]:
    return [
        Case(f"export-precision-bf16-{fmt}", _run, _export(fmt, "bf16"), ConfigError,
             ("--precision bf16", "expected --format openvino or saved_model", f"found --format {fmt}"), ("out",),
             _cli(fmt, "bf16"))
        for fmt in ("onnx",)
    ] + [
        Case("export-precision-unknown", _run, _export("openvino", "fp16"), ConfigError,
             ("--precision", "auto or f32 or bf16", "'fp16'"), ("out",), _cli("openvino", "fp16")),
    ]
