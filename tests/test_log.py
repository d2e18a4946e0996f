"""TensorFlow's start-up notices stay out of a kerasbert command's output; every other line on stderr passes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kerasbert.log import is_startup_notice, without_notices

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
    # where an op first runs on a CPU without AVX-512, in absl's header and in the older one
    "E0000 00:00:1795696490.112233    3613 util.cc:131] oneDNN supports DT_INT32 only on platforms with AVX-512. "
    "Falling back to the default Eigen-based implementation if present.",
    "2025-01-08 14:55:59.249677: E tensorflow/core/util/util.cc:131] oneDNN supports DT_INT64 only on platforms "
    "with AVX-512. Falling back to the default Eigen-based implementation if present.",
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


def test_a_notice_written_inside_a_progress_bar_leaves_the_bar_whole() -> None:
    bar = "1/4 ━━" + NOTICES[-2] + "\n━━ 2/4\r3/4 ━━━" + NOTICES[-1] + "\n━ 4/4\n"
    assert without_notices(bar) == "1/4 ━━━━ 2/4\r3/4 ━━━━ 4/4\n"
    assert without_notices("".join(line + "\n" for line in NOTICES)) == ""
    kept = "E0000 00:00:1795696490.112233    3613 util.cc:131] oneDNN supports DT_INT64 on this CPU: a new message\n"
    assert without_notices(kept) == kept


def test_an_unfinished_line_passes_at_once_and_a_later_notice_is_held(tmp_path) -> None:
    out = tmp_path / "stderr.txt"
    result = run("-c", textwrap.dedent(f"""
        import os, pathlib, time
        from kerasbert.log import hidden_startup_notices
        out = pathlib.Path({str(out)!r})
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT), 2)
        with hidden_startup_notices():
            os.write(2, b"3/4 ")
            for _ in range(2000):  # the bar's text reaches the terminal while the block still runs
                if out.read_bytes() == b"3/4 ":
                    break
                time.sleep(0.01)
            else:
                raise SystemExit("the unfinished line was held")
            os.write(2, {NOTICES[-2]!r}.encode() + b"\\n")
            os.write(2, b"4/4\\n")
        """))
    assert result.returncode == 0, result.stdout + result.stderr
    assert out.read_text() == "3/4 4/4\n"


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


@pytest.mark.slow
def test_a_notice_written_after_start_up_stays_out_of_a_commands_output() -> None:
    result = run("-c", textwrap.dedent(f"""
        import dataclasses, os, sys
        from kerasbert import cli
        from kerasbert.log import logger
        summary = cli.COMMANDS["summary"]
        def run(args):  # as an op that first runs mid-command on a CPU without AVX-512
            os.write(2, {NOTICES[-2]!r}.encode() + b"\\n")
            logger.info("a kerasbert line")
            return summary.run(args)
        cli.COMMANDS["summary"] = dataclasses.replace(summary, run=run)
        sys.exit(cli.main(["summary", "tiny", "--format", "json"]))
        """))
    assert result.returncode == 0 and result.stderr == "a kerasbert line\n", result.stderr
    assert result.stdout.lstrip().startswith("{")


class _Stream:
    def __init__(self, terminal: bool) -> None:
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def test_progress_bars_are_redrawn_only_on_a_terminal(monkeypatch) -> None:
    from kerasbert.log import progress_verbosity

    monkeypatch.setattr(sys, "stdout", _Stream(True))
    assert (progress_verbosity(), progress_verbosity(quiet=True)) == (1, 0)
    monkeypatch.setattr(sys, "stdout", _Stream(False))  # a pipe or a file: one line a bar
    assert (progress_verbosity(), progress_verbosity(quiet=True)) == (2, 0)
