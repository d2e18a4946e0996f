"""benchmarks/results.py: a run replaces its machine class's section of RESULTS.md, dated, and a new section goes
beside its benchmark's others."""

from __future__ import annotations

from benchmarks.results import write_section

FILE = """# results

<!-- bench-cpu-amx -->
## Model speed — AMX CPU, 2026-11-20 (`bench-cpu-amx`)
old amx
<!-- /bench-cpu-amx -->

<!-- serve-cpu-amx -->
## Serving speed
serving
<!-- /serve-cpu-amx -->
"""


def test_a_run_replaces_its_class_section_and_dates_its_heading(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(FILE)
    write_section("bench-cpu-amx", "## Model speed\n\nnew amx", str(path), day="2026-11-28")
    text = path.read_text()
    assert "old amx" not in text and text.count("<!-- bench-cpu-amx -->") == 1
    assert "## Model speed — AMX CPU, 2026-11-28 (`bench-cpu-amx`)\n\nnew amx" in text
    assert text.index("new amx") < text.index("<!-- serve-cpu-amx -->")  # in its place


def test_a_new_class_goes_after_its_benchmarks_sections(tmp_path):
    path = tmp_path / "RESULTS.md"
    path.write_text(FILE)
    write_section("bench-cpu", "## Model speed\n\navx2", str(path), day="2026-11-28")
    write_section("tokenize", "## Tokenizer speed\n\ntokens", str(path), day="2026-11-28")
    text = path.read_text()
    order = [text.index(marker) for marker in ("<!-- /bench-cpu-amx -->", "<!-- bench-cpu -->",
                                               "<!-- serve-cpu-amx -->", "<!-- tokenize -->")]
    assert order == sorted(order)
    assert "## Model speed — AVX2 CPU, 2026-11-28 (`bench-cpu`)" in text
    assert "## Tokenizer speed — 2026-11-28 (`tokenize`)" in text  # no machine class in its name
