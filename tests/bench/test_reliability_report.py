"""``benchmarks/reliability.py``'s counting, without running pytest or kill_resume.py: the bad-input catalogue by
area, the property tests' example budgets, and the parsing of pytest's, collect-only's and kill_resume.py's
output."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import test_bad_inputs  # noqa: E402
import test_properties  # noqa: E402

from benchmarks import reliability  # noqa: E402


def test_catalogue_counts_by_area_match_the_table() -> None:
    cases = test_bad_inputs.CASES
    counts = reliability.catalogue(cases)
    assert "other" not in counts, [case.id for case in cases if reliability.area(case.id) == "other"]
    assert set(counts) == set(reliability.AREAS.values())
    assert sum(n for n, _ in counts.values()) == len(cases)
    assert sum(cli for _, cli in counts.values()) == sum(case.cli is not None for case in cases)
    assert counts["configs"][0] == sum(case.id.startswith(("config-", "preset-", "summary-")) for case in cases)
    checkpoints = ("google-", "hf-", "pickle-", "safetensors-", "index-", "convert-")
    assert counts["checkpoints"][0] == sum(case.id.startswith(checkpoints) for case in cases)
    text = reliability.catalogue_text(cases)
    assert f"{len(cases)} cases" in text and "| checkpoints |" in text


def test_budgets_follow_the_profiles_and_the_fractions() -> None:
    from hypothesis import settings

    rows = {name: (cases, per) for name, cases, per in reliability.budgets(test_properties)}
    default, slow = (settings.get_profile(name).max_examples for name in reliability.PROFILES)
    assert rows["test_tokenizer_on_any_unicode"] == (1, {"kerasbert": default, "slow": slow})
    assert rows["test_to_dataset_pads_each_batch_to_its_longest_row"][1] == {
        "kerasbert": max(10, int(default * 0.3)), "slow": max(10, int(slow * 0.3))}
    readers = rows["test_readers_on_any_bytes_return_examples_or_raise_data_error"]
    assert readers == (len(test_properties.READERS), {"kerasbert": max(10, int(default * 0.5)),
                                                      "slow": max(10, int(slow * 0.5))})
    assert "test_ids_equal_bert4keras_on_random_unicode" not in rows  # seeded cases, not hypothesis
    assert test_properties.EXAMPLES == settings.default.max_examples  # restored


def test_output_parsers() -> None:
    collected = ("tests/test_failing_writes.py::test_config\ntests/test_failing_writes.py::test_export[openvino]\n"
                 "\n2 tests collected in 1.00s\n")
    assert reliability.writers(collected) == ["config", "export: openvino"]
    counts = reliability.outcomes("FAILED x\n= 3 failed, 90 passed, 4 xfailed, 2 errors, 1 warning in 61.2s =\n")
    assert (counts["passed"], counts["xfailed"], counts["failed"], counts["error"]) == (90, 4, 3, 2)
    table = ("| # | kill point | moment (s) | saved state at the kill | recovery | runs to finish | resumed ok |\n"
             "|---:|---|---:|---|---|---:|---|\n| 1 | state-write | 1.20 | step 1 | resume | 1 | yes |\n"
             "| 2 | random | 3.00 | none | overwrite | 1 | **no**: weights differ |\n"
             "| 3 | random | - | done | - | 0 | yes |\n")
    assert reliability.kills(table) == {"state-write": (1, 1), "random": (2, 1)}
