"""The speed benchmark in --quick mode (tiny config): every worker runs and the report is written.
It checks that the benchmark works, not speed (speed figures live in benchmarks/RESULTS.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # trains, spawns workers or runs a benchmark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)  # benchmarks/ is not part of the installed package

from benchmarks.bench import (  # noqa: E402
    forward_flops,
    groups,
    half_speedup,
    machine_kind,
    median_interval,
    paired,
    peer,
    targets,
    variant,
)


def test_forward_flops_by_hand():
    cfg = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    # per layer and token: 8·32² + 4·32·64 + 4·16·32 = 8192 + 8192 + 2048; pooler 2·32², head 2·32·2 a row
    assert forward_flops(cfg, batch=2, seq=16) == 2 * 2 * 16 * 18432 + 2 * (2048 + 128)
    # kerasbert's classifier: the last layer's 15 other tokens only get keys and values (4·32² of the 18432)
    assert forward_flops(cfg, 2, 16, first_token_only=True) == 2 * (2 * 16 * 18432 - 15 * 14336) + 2 * (2048 + 128)


def test_groups_keep_kerasbert_and_bert4keras_in_each():
    names = ["kerasbert", "kerasbert-noxla", "bert4keras", "keras-hub", "kerasbert-bf16", "kerasbert-train"]
    assert groups(names, 4) == [["kerasbert", "bert4keras", "kerasbert-noxla", "keras-hub"],
                                ["kerasbert", "bert4keras", "kerasbert-bf16", "kerasbert-train"]]
    assert groups(names, 6) == [names]
    assert groups(["kerasbert", "bert4keras", "keras-hub"], 2) == [["kerasbert", "bert4keras", "keras-hub"]]


def test_paired_ratio_is_the_median_of_same_round_ratios_within_a_group():
    # the machine slows down 2x between rounds; the ratio of each round's pair stays 1.5 in group 0
    results = {("bert4keras", "infer"): [{"group": 0, "times": [3.0, 6.0, 3.0]}, {"group": 1, "times": [2.0]}],
               ("kerasbert", "infer"): [{"group": 0, "times": [2.0, 4.0, 2.0]}, {"group": 1, "times": [1.0]}],
               ("keras-hub", "infer"): [{"group": 1, "times": [4.0]}]}
    # rounds 3/2, 6/4, 3/2 (group 0) and 2/1 (group 1): median of [1.5, 1.5, 1.5, 2.0]
    assert paired(results, "infer", "bert4keras", "kerasbert") == 1.5
    assert paired(results, "infer", "keras-hub", "kerasbert") == 4.0  # only group 1 has both
    assert paired(results, "infer", "keras-hub", "kerasbert-bf16") is None
    assert paired(results, "train", "bert4keras", "kerasbert") is None


def test_median_interval_takes_the_order_statistics_the_binomial_tail_allows():
    # n = 10: P(Bin(10, ½) <= 1) = 11/1024 <= 0.025 < P(<= 2) = 56/1024: the 2nd smallest and 2nd largest
    assert median_interval([10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0]) == (2.0, 9.0)
    # n = 20: P(<= 5) = 21700/2**20 = 0.0207, P(<= 6) = 60460/2**20 = 0.0577: the 6th from each end
    assert median_interval([float(v) for v in range(1, 21)]) == (6.0, 15.0)
    # 50 %: P(<= 7) = 0.132 <= 0.25 < P(<= 8) = 0.252: the 8th from each end
    assert median_interval([float(v) for v in range(1, 21)], confidence=0.5) == (8.0, 13.0)
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == (1.0, 6.0)  # P(Bin(6, ½) = 0) = 1/64
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None  # 1/32 > 0.025: no 95 % interval from 5 rounds
    assert median_interval([]) is None


def test_ratio_targets_give_the_rounds_interval_and_say_when_the_target_lies_inside_it():
    rows = {("kerasbert", "infer"): {"step_s": 1.0, "peak_pct": 90.0, "vs_bert4keras": 1.14}}
    b4k = [1.14, 1.00, 1.30, 1.05, 1.25, 1.10, 1.20, 1.14, 1.12, 1.18]  # kerasbert's times are all 1.0
    results = {("bert4keras", "infer"): [{"group": 0, "times": b4k}],
               ("kerasbert", "infer"): [{"group": 0, "times": [1.0] * 10}],
               ("keras-hub", "infer"): [{"group": 0, "times": [1.5] * 10}]}
    text = targets({"figures": rows}, results)
    assert ("- infer: kerasbert vs bert4keras: 1.14× (target ≥ 1.15×; 95 % interval 1.05–1.25 over 10 rounds) — "
            "**missed** (the target is inside the interval)") in text
    assert "- infer: kerasbert vs keras-hub: 1.50× (target ≥ 1.0×; 95 % interval 1.50–1.50 over 10 rounds) — met" \
        in text.splitlines()


def test_bert4keras_way_and_baseline_rows_pair_with_their_own_peers():
    assert peer("kerasbert-b4k") == peer("kerasbert-b4k@base") == "bert4keras-b4k"
    assert peer("kerasbert") == peer("kerasbert@base") == "bert4keras"
    assert variant("kerasbert-b4k@base") == ("b4k_way", {"library": "kerasbert"})
    rows = {("kerasbert-b4k@base", "train"): {"step_s": 2.0}}
    results = {("bert4keras-b4k", "train"): [{"group": 0, "times": [3.0] * 6}],
               ("kerasbert-b4k", "train"): [{"group": 0, "times": [2.0] * 6}],
               ("kerasbert-b4k@base", "train"): [{"group": 0, "times": [2.2] * 6}]}
    lines = targets({"figures": rows}, results).splitlines()
    assert ("- train, bert4keras's way (Lambda + Dense, *_on_batch): kerasbert vs bert4keras: 1.50× (target ≥ 1.0×; "
            "95 % interval 1.50–1.50 over 6 rounds) — met") in lines
    assert ("- train: kerasbert-b4k against the baseline tree's: 1.10× (target ≥ 1.0×; 95 % interval 1.10–1.10 over "
            "6 rounds) — met") in lines


def test_mixed_precision_target_applies_where_the_run_measured_half_precision_matmuls_faster():
    rows = {(name, mode): {"step_s": 1.0, "peak_pct": 50.0, "vs_bert4keras": 1.0}
            for name in ("kerasbert", "kerasbert-bf16") for mode in ("infer", "train")}
    results = {("kerasbert", mode): [{"group": 0, "times": [2.0, 2.0]}] for mode in ("infer", "train")}
    results |= {("kerasbert-bf16", "infer"): [{"group": 0, "times": [1.0, 1.0]}],  # 2.0 x fp32
                ("kerasbert-bf16", "train"): [{"group": 0, "times": [1.5, 1.5]}]}  # 1.33 x fp32
    # AVX-512 bf16 under oneDNN (400 against 210 GFLOP/s): the 1.6 x target applies
    fast = targets({"figures": rows, "peaks": {"float32": 210.0, "bfloat16": 400.0}}, results)
    assert "- infer: kerasbert-bf16 / fp32 speed: 2.00× (target ≥ 1.6×) — met" in fast
    assert "- train: kerasbert-bf16 / fp32 speed: 1.33× (target ≥ 1.6×) — **missed**" in fast
    # AVX2 (71 against 79): it does not, and the report says why
    plain = targets({"figures": rows, "peaks": {"float32": 79.0, "bfloat16": 71.0}}, results)
    assert "- infer: kerasbert-bf16 / fp32 speed: 2.00× (its matmul 0.90× fp32: fp32 stays the default)" in plain
    # just under HALF_FASTER: still not a speed option
    edge = targets({"figures": rows, "peaks": {"float32": 100.0, "bfloat16": 124.0}}, results)
    assert "(its matmul 1.24× fp32: fp32 stays the default)" in edge and "target ≥ 1.6" not in edge
    assert half_speedup({"float32": 100.0, "float16": 300.0, "bfloat16": 200.0}) == 3.0
    assert half_speedup({"float32": 100.0}) is None


def test_machine_kind_reads_the_cpu_flags_and_on_avx512_the_measured_bf16_speed():
    assert machine_kind("gpu", "avx512f amx_bf16") == "gpu"
    assert machine_kind("cpu", "fma avx2 avx512f avx512_bf16 amx_bf16 amx_tile", half=0.5) == "cpu-amx"
    avx512 = "fma avx2 avx512f avx512_bf16 avx512_vnni"
    assert machine_kind("cpu", avx512, half=1.9) == "cpu-avx512"  # AMD EPYC Zen 4
    assert machine_kind("cpu", avx512, half=0.55) == "cpu-avx512-fp32"  # Intel Xeon without AMX
    assert machine_kind("cpu", avx512, half=1.24) == "cpu-avx512-fp32"  # just under HALF_FASTER
    assert machine_kind("cpu", "fma avx2", half=2.0) == "cpu"


# every worker function once; kerasbert-noxla / -bf16 are kerasbert's worker with jit_compile=False / a dtype
# policy (mixed-precision builds are tested in test_models), so they are left out for time
QUICK = "matmul,kerasbert,bert4keras,keras-hub,kerasbert-train"


def test_quick_benchmark_runs_every_worker_and_writes_its_section(tmp_path):
    """BERT's workers, and with ``--families all`` each Hugging Face family's pair against keras-hub's backbone."""
    results = tmp_path / "RESULTS.md"
    results.write_text("# results\n\n<!-- other -->\nkept\n<!-- /other -->\n")
    command = [sys.executable, os.path.join(ROOT, "benchmarks", "bench.py"), "--quick", "--results", str(results),
               "--variants", QUICK, "--families", "all"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert "<!-- other -->\nkept\n<!-- /other -->" in text and "<!-- bench-quick -->" in text
    rows = re.findall(r"^\| (infer|train) \| ([\w-]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+|—) \|", text, re.M)
    found = {(mode, name) for mode, name, *_ in rows}
    expected = {(mode, name) for mode in ("infer", "train")
                for name in ("kerasbert", "bert4keras", "keras-hub")}
    assert expected | {("train", "kerasbert-train")} <= found, found
    for _, name, build, step, per_second, ratio in rows:
        assert float(build) >= 0
        assert float(step) > 0 and float(per_second) > 0
        if name == "bert4keras":
            assert ratio == "1.00"
    assert re.search(r"Matmul peak measured by the same run \(.*?\): float32 \d+ GFLOP/s", text)
    assert "infer: kerasbert vs bert4keras:" in text and "`kerasbert train` step / bare model step:" in text
    families = re.findall(r"^\| (\w+) \| (\w+Backbone) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", text, re.M)
    assert [(family, backbone) for family, backbone, *_ in families] == [
        ("roberta_en", "RobertaBackbone"), ("xlm_roberta", "XLMRobertaBackbone"), ("distilbert", "DistilBertBackbone"),
        ("deberta_v3", "DebertaV3Backbone")]
    assert all(float(value) > 0 for *_, mine, hub, ratio in families for value in (mine, hub, ratio))
    for family, backbone, *_ in families:
        assert re.search(rf"^- infer, {family}: kerasbert vs keras-hub's {backbone}: [\d.]+× \(target ≥ 1.0×\)",
                         text, re.M), family


def test_families_are_checked_before_any_worker_starts(capsys):
    from benchmarks.bench import main
    from benchmarks.bench_families import family_config, variant_names

    with pytest.raises(SystemExit):
        main(["--quick", "--families", "roberta_en,bart"])
    assert "--families: expected all or some of roberta_en, xlm_roberta, distilbert, deberta_v3, found bart" in \
        capsys.readouterr().err
    assert variant("kerasbert-xlm_roberta") == ("kerasbert_family", {"model": "xlm_roberta"})
    assert variant(variant_names("deberta_v3")[1]) == ("keras_hub_family", {"model": "deberta_v3"})
    assert family_config("xlm_roberta", quick=False)["vocab_size"] == 250002


def test_quick_benchmark_runs_on_the_jax_backend_without_bert4keras(tmp_path):
    """The GPU machines here have JAX but no TensorFlow: the same script runs kerasbert and keras-hub on
    Keras's JAX backend, measures the matmul peak with JAX, and names what it could not measure."""
    results = tmp_path / "RESULTS.md"
    command = [sys.executable, os.path.join(ROOT, "benchmarks", "bench.py"), "--quick", "--results", str(results),
               "--variants", "kerasbert,kerasbert-noxla,keras-hub"]
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert "Keras backend jax" in text and "Not measured: kerasbert-noxla (no plain graph on jax)." in text
    rows = re.findall(r"^\| (infer|train) \| ([\w-]+) \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|", text, re.M)
    assert {(mode, name) for mode, name, _ in rows} == {(mode, name) for mode in ("infer", "train")
                                                          for name in ("kerasbert", "keras-hub")}
    assert all(float(per_second) > 0 for *_, per_second in rows)
    assert re.search(r"float32 \d+ GFLOP/s, bfloat16 \d+ GFLOP/s", text)
    assert "infer: kerasbert vs keras-hub:" in text and "vs bert4keras" not in text.split("Targets")[1]


def test_a_worker_that_cannot_run_here_says_why(monkeypatch):
    import importlib.util

    from benchmarks.bench import available

    assert available("kerasbert-noxla") is None and available("bert4keras") is None
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert available("kerasbert-noxla") == "no plain graph on jax" and available("kerasbert") is None
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorflow" else real(name, *a))
    assert available("bert4keras") == "tensorflow not installed"
    assert available("kerasbert-train") == "tensorflow not installed"


def test_mixed_precision_report_gives_each_head_and_all_heads_together():
    from benchmarks.mixed_precision import table

    def row(differ: int, compared: int) -> dict:
        same = {"score": 1.0, "differ": 0, "agreement": 1.0, "loss_gap": 0.0, "compared": compared}
        mixed = {"score": 0.99, "differ": differ, "agreement": 1 - differ / compared, "loss_gap": 0.08,
                 "compared": compared}
        return {"float32": {"score": 1.0}, "float32-again": same, "mixed": mixed}

    text = table({"cls": row(1, 150), "ner": row(7, 1526)})
    assert "| cls | 1.000 / 1.000 / 0.990 | 150 | 0 / 1 | 100.00% / 99.33% (**missed**) | 0.0% / 8.0% |" in text
    assert ("All heads together: 8 of 1,676 predictions differ, agreement 99.52% (met; one of a head's 150 "
            "predictions is 0.67%: a head of fewer than 200 cannot resolve 99.5%).") in text
    assert "agreement 99.40% (**missed**;" in table({"cls": row(1, 150), "ner": row(9, 1526)})


def test_variant_sets_prints_each_arm_against_the_first():
    for mode in ("train", "infer"):
        done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "variant_sets.py"),
                               '{"base": {}, "no gelu": {"xla_gelu": false}}', "--config", "tiny", "--rounds", "2",
                               "--mode", mode], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        lines = [line for line in done.stdout.splitlines() if "paired" in line]
        assert [line.split(":")[0] for line in lines] == ["base", "no gelu"]
        assert lines[0].endswith("base / base paired 1.000")
