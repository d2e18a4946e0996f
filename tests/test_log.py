"""TensorFlow's start-up notices stay out of a kerasbert command's output; every other line on stderr passes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kerasbert.log import is_startup_notice

NOTICES = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795696484.647283    3613 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.",
    "I0000 00:00:1795696484.647537    3613 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "E0000 00:00:1795696487.327350    3613 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1795696510.969547    5414 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow with the "
    "appropriate compiler flags.",
]


def run(*code_or_args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *code_or_args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("line", NOTICES)
def test_known_notices_are_recognised(line: str) -> None:
    assert is_startup_notice(line) and is_startup_notice(line + "\n")


@pytest.mark.parametrize("line", [
    "E0000 00:00:1795696487.327350    3613 saver.cc:52] Not found: bert_model.ckpt.index",
    "W0000 00:00:1795696487.327350    3613 op_kernel.cc:1857] OP_REQUIRES failed: OOM when allocating tensor",
    "kerasbert train: error: train.tsv line 3: expected 2 columns, found 1",
    "Traceback (most recent call last):",
])
def test_other_lines_are_not_notices(line: str) -> None:
    assert not is_startup_notice(line)


def test_the_block_keeps_back_notices_and_passes_the_rest_in_order() -> None:
    notices = "".join(line + "\n" for line in NOTICES)
    result = run("-c", textwrap.dedent(f"""
        import os, sys
        from kerasbert.log import hidden_startup_notices
        print("before", file=sys.stderr, flush=True)
        with hidden_startup_notices():
            os.write(2, {notices!r}.encode())
            os.write(2, b"a real error\\n")
            print("a Python warning", file=sys.stderr)
            os.write(2, {NOTICES[3]!r}.encode() + b"\\n")
        print("after", file=sys.stderr)
        """))
    assert result.returncode == 0, result.stderr
    assert result.stderr == "before\na real error\na Python warning\nafter\n"


@pytest.mark.slow
def test_a_command_prints_only_its_own_lines() -> None:
    failed = run("-m", "kerasbert", "summary", "no-such-config.json")
    assert failed.returncode == 2
    assert failed.stderr.splitlines() == [failed.stderr.strip()], failed.stderr
    assert failed.stderr.startswith("kerasbert summary: error: no-such-config.json")
    worked = run("-m", "kerasbert", "summary", "tiny", "--format", "json")
    assert worked.returncode == 0 and worked.stderr == "", worked.stderr
    assert worked.stdout.lstrip().startswith("{")
    debug = run("-m", "kerasbert", "--debug", "summary", "no-such-config.json")
    assert debug.returncode == 2 and "Traceback" in debug.stderr
