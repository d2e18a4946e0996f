"""The serving benchmarks in --quick mode (tiny config): every variant and export runs, the server is measured and
load-tested, and each script writes its own section of the results file."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from serve_bench import (  # noqa: E402
    BF16_VARIANTS,
    TINY,
    VARIANTS,
    against_float32,
    amx_targets,
    pass_flops,
    pass_shapes,
    peak_share,
    section,
    texts,
)
from serve_load import same_answer  # noqa: E402


def test_texts_are_drawn_like_sentences():
    drawn = texts(400, 2000)
    lengths = sorted(len(text) for text in drawn)
    assert min(lengths) >= 10 and max(lengths) <= 126
    assert 30 <= lengths[len(lengths) // 2] <= 50
    assert drawn == texts(400, 2000) and drawn != texts(400, 2000, seed=1)
    assert all(0x4E00 <= ord(c) < 0x4E00 + 1995 for text in drawn for c in text)


def test_same_answer_compares_labels_exactly_and_probabilities_within_1e_4():
    a = {"label": "pos", "probabilities": {"neg": 0.25, "pos": 0.75}}
    assert same_answer(a, {"label": "pos", "probabilities": {"neg": 0.25005, "pos": 0.74995}})
    assert not same_answer(a, {"label": "neg", "probabilities": {"neg": 0.25, "pos": 0.75}})
    assert not same_answer(a, {"label": "pos", "probabilities": {"neg": 0.2502, "pos": 0.7498}})
    entities = {"entities": [{"start": 0, "end": 2, "label": "PER", "text": "张伟"}]}
    assert same_answer(entities, entities) and not same_answer(entities, {"entities": []})


def test_a_pass_counts_the_shapes_each_variant_runs_padding_included():
    job = {"texts": ["一" * 10, "一" * 40, "一" * 11, "一" * 200, "一" * 12], "batch": 2}
    # in order, each batch padded to its longest (+ [CLS] and [SEP], at most 128)
    assert pass_shapes("keras", job) == pass_shapes("saved_model", job) == [(2, 42), (2, 128), (1, 14)]
    # portable exports: similar lengths together (12, 13, 14 | 42 | 128), chunks of a power of two rounded to 8
    assert pass_shapes("onnx", job) == pass_shapes("openvino-int8", job) == [(2, 16), (1, 16), (1, 48), (1, 128)]
    cfg = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    # per layer and token 8·32² + 4·32·64 + 4·S·32; the pooler 2·32² and the head 2·32·2 a row
    expected = 2 * (2 * 16 * (16384 + 4 * 16 * 32)) + 2 * (2048 + 128)
    assert pass_flops(cfg, [(2, 16)], first_token_only=False) == expected
    assert pass_flops(cfg, [(2, 16)], first_token_only=True) < expected


def test_a_variants_share_is_of_the_peak_of_its_own_precision_and_the_section_names_the_cpu_kind():
    job = {"texts": ["一" * 30] * 4, "batch": 4}
    flops = pass_flops(TINY, pass_shapes("openvino", job), first_token_only=True)
    measured = {"f32": flops / 1e9, "int8": 4 * flops / 1e9}  # GFLOP/s: a pass a second is the whole f32 peak
    assert peak_share("openvino", 2.0, TINY, job, measured) == "50% of f32"
    assert peak_share("openvino-int8", 0.5, TINY, job, measured) == "50% of int8"
    assert peak_share("openvino-bf16", 1.0, TINY, job, measured) == "—"  # no bf16 units: no bf16 peak
    assert section(VARIANTS, quick=True) == "serve-quick"
    assert section(VARIANTS, quick=False).startswith("serve-cpu")
    assert section(["openvino", *BF16_VARIANTS], quick=False).startswith("serve-precision-cpu")
    assert section(["openvino", "openvino-bf16"], quick=False, pretrained="minilm").startswith(
        "serve-precision-minilm-cpu")


def test_the_amx_targets_are_judged_only_where_the_cpu_has_amx():
    times = {"bert4keras": [12.0, 12.0, 12.0], "openvino-bf16": [2.0, 2.0, 2.0], "openvino-int8": [1.0, 1.5, 1.0],
             "onnx-int8": [1.5, 1.5, 1.5]}
    figures = {"openvino-int8": {"per_s": 96.0, "ratio": 12.0}, "onnx-int8": {"per_s": 85.0, "ratio": 8.0}}
    amx = amx_targets(times, figures, frozenset({"amx_int8", "amx_bf16"}))
    assert amx == ["- AMX: best int8 export ≥ 1.6 × the bf16 export: **met**, openvino-int8 at 2.00 × openvino-bf16",
                   "- AMX: best int8 export ≥ 10 × bert4keras: **met**, openvino-int8 at 12.00 ×"]
    figures["openvino-int8"]["ratio"] = 9.0
    assert "**missed**, openvino-int8 at 9.00 ×" in amx_targets(times, figures, frozenset({"amx_int8"}))[1]
    assert all("not judged (no AMX here)" in line for line in amx_targets(times, figures, frozenset({"avx512f"})))
    assert amx_targets({"openvino": [1.0]}, {"openvino": {"per_s": 1.0, "ratio": None}}) == []


def test_each_low_precision_export_is_measured_against_the_float32_export_of_its_format():
    times = {"saved_model": [2.0, 2.0, 4.0], "saved_model-bf16": [1.0, 1.0, 1.0], "openvino": [1.0, 1.0, 1.0],
             "openvino-int8": [0.5, 0.25, 0.5], "bert4keras": [3.0, 3.0, 3.0]}
    lines = against_float32(times)
    assert [line.split(":")[0] for line in lines] == ["- saved_model-bf16", "- openvino-int8"]
    assert lines[0].startswith("- saved_model-bf16: 2.00 × saved_model (float32)")
    assert lines[1].startswith("- openvino-int8: 2.00 × openvino (float32)")
    assert "saved_model-bf16" in BF16_VARIANTS and "saved_model-bf16" not in VARIANTS


def test_quick_serving_benchmarks_run_every_variant_and_write_their_sections(tmp_path):
    results, keep = tmp_path / "RESULTS.md", tmp_path / "serve"
    results.write_text("# results\n\n<!-- other -->\nkept\n<!-- /other -->\n")
    for script, extra in (("serve_bench.py", ["--keep", str(keep)]), ("serve_load.py", [str(keep)])):
        done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), "--quick", "--results",
                               str(results), *extra], capture_output=True, text=True, cwd=ROOT, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert "<!-- other -->\nkept\n<!-- /other -->" in text
    assert "<!-- serve-quick -->" in text and "<!-- serve-load-quick -->" in text
    rows = dict(re.findall(r"^\| ([\w-]+) \| ([\d.]+) \| [\d.]+.*? GB \| (?:yes|no) \|", text, re.M))
    assert set(rows) == set(VARIANTS) and all(float(value) > 0 for value in rows.values())
    tensorflow = dict(re.findall(r"^\| ([\w-]+) \| [\d.]+ \| .*? GB \| (yes|no) \|", text, re.M))
    assert {name for name, loaded in tensorflow.items() if loaded == "no"} == {"onnx", "onnx-int8", "openvino",
                                                                               "openvino-int8"}
    assert re.search(r"int8 instructions: ", text)
    assert re.search(r"peaks measured by the run: f32 \d+ GFLOP/s(, bf16 \d+ GFLOP/s)?, int8 \d+ GFLOP/s", text)
    shares = dict(re.findall(r"^\| ([\w-]+) \| [\d.]+ \| [^|]+ \| \d+% of (\w+) \|", text, re.M))
    assert shares == {name: "int8" if "int8" in name else "f32" for name in VARIANTS}
    served = re.findall(r"^\| ([\w-]+) \| [\d.]+ / [\d.]+ ms \| ([\d.]+)/s \((\d+) errors\)", text, re.M)
    assert {name for name, _, _ in served} == {"openvino-int8", "openvino", "onnx-int8", "saved_model"}
    assert all(float(per_s) > 0 and errors == "0" for _, per_s, errors in served)
    load = re.search(r"load test on openvino-int8, 8 clients for 2 s: \*\*\w+\*\*: (\d+) requests, (\d+) answered, "
                     r"(\d+) refused \(429\), (\d+) failed, (\d+) answers unlike", text)
    assert load and int(load.group(1)) > 0 and load.group(4) == "0" and load.group(5) == "0"
    assert int(load.group(2)) + int(load.group(3)) == int(load.group(1))
