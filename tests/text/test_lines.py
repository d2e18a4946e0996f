"""A data file's lines are read with a bound on their bytes: a line past MAX_LINE_BYTES is refused by file, line and
byte offset before the rest of it is read, by every reader of data files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kerasbert.errors import DataError
from kerasbert.text import lines
from kerasbert.text.corpus import iter_documents
from kerasbert.text.limits import MAX_TEXT_CHARS
from kerasbert.text.lines import MAX_LINE_BYTES, raw_lines, read_lines
from kerasbert.text.ner_readers import read_conll
from kerasbert.text.readers import read_classification, read_texts

BOUND = 16  # the bound the small tests set, so that their files stay a few bytes


@pytest.fixture(params=[1 << 20, 4], ids=["whole", "in-pieces"])
def small_bound(monkeypatch, request):
    """The bound set to `BOUND`; a line read at once, or in pieces of 4 bytes as a line longer than 1 MiB is."""
    monkeypatch.setattr(lines, "MAX_LINE_BYTES", BOUND)
    monkeypatch.setattr(lines, "_PIECE", request.param)


def _too_long(path, line: int, offset: int) -> str:
    return (rf"^{path}:{line}: expected a line of at most {BOUND} bytes, found more than {BOUND} bytes from byte "
            rf"offset {offset}\. Split it into lines of one example each \(a corpus: a sentence or document each\); "
            r"a text holds at most 1,000,000 characters$")


FULL = b"0123456789abcdef"  # BOUND bytes


def test_lines_up_to_the_bound_are_read_with_their_offsets(tmp_path, small_bound):
    path = tmp_path / "in.txt"
    path.write_bytes(FULL + b"\n" + FULL[:-1] + b"\r\n" + b"\n" + b"ab\n" + FULL)  # 16, 16 with the \r, 0, 2, 16
    assert list(raw_lines(str(path))) == [(1, 0, FULL + b"\n"), (2, 17, FULL[:-1] + b"\r\n"), (3, 34, b"\n"),
                                          (4, 35, b"ab\n"), (5, 38, FULL)]
    assert list(read_lines(str(path))) == [FULL.decode(), FULL[:-1].decode(), "", "ab", FULL.decode()]


@pytest.mark.parametrize("last", [FULL + b"0\n", FULL + b"0", FULL * 1000], ids=["17-bytes", "17-bytes-last", "16000"])
def test_one_byte_over_the_bound_is_refused_by_file_line_and_offset(tmp_path, small_bound, last):
    path = tmp_path / "in.txt"
    path.write_bytes(b"ok\n" + FULL + b"\n" + last)
    with pytest.raises(DataError, match=_too_long(path, 3, 20)):
        list(read_lines(str(path)))


@pytest.mark.parametrize(("name", "first", "read"), [
    ("in.txt", "好", read_texts),
    ("in.jsonl", '{"text": "好"}', read_texts),
    ("train.tsv", "好\tpos", read_classification),
    ("train.conll", "好 O", read_conll),
    ("corpus.txt", "好", lambda path: list(iter_documents(path))),
    ("corpus.jsonl", '{"text": "好"}', lambda path: list(iter_documents(path))),
])
def test_every_reader_of_data_files_refuses_a_line_past_the_bound(tmp_path, small_bound, name, first, read):
    path = tmp_path / name
    path.write_bytes(f"{first}\n".encode() + "好".encode() * 6 + b"\n")  # 18 bytes
    with pytest.raises(DataError, match=_too_long(path, 2, len(first.encode()) + 1)):
        read(str(path))


def test_the_bound_holds_a_pair_of_the_longest_texts_in_the_longest_escapes(tmp_path):
    """Two texts of MAX_TEXT_CHARS characters outside the BMP, each written as a JSON surrogate pair of escapes
    (12 bytes), and a label: a line the character bound accepts, so the byte bound must too."""
    text = "\U0001F600" * MAX_TEXT_CHARS
    line = json.dumps({"text": text, "text_b": text, "label": "pos"}) + "\n"
    assert 24 * MAX_TEXT_CHARS < len(line) <= MAX_LINE_BYTES
    path = tmp_path / "train.jsonl"
    path.write_text(line, encoding="ascii")
    [example] = read_classification(str(path), text_b="text_b")
    assert (example.text, example.text_b, example.label) == (text, text, "pos")


MEMORY_PROBE = r"""
import json, sys
from kerasbert.errors import DataError
from kerasbert.text.corpus import iter_documents
from kerasbert.text.readers import read_texts

def status_kib(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

growth = {}
for name, read in [("read_texts", read_texts), ("iter_documents", lambda path: list(iter_documents(path)))]:
    with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) starts again from the resident size now
        f.write("5")
    baseline = status_kib("VmRSS")
    try:
        read(sys.argv[1])
    except DataError as error:
        growth[name] = [status_kib("VmHWM") - baseline, str(error)]
print(json.dumps(growth))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak resident size from /proc")
def test_a_200_megabyte_line_is_refused_in_memory_far_under_its_size(tmp_path):
    """A file of one line of 200 MB (sparse, so it takes no disk): each reader grows the process by the bound, 32 MB,
    and a piece, measured in a fresh process as its peak resident size (VmHWM, reset before reading) over its
    resident size before; reading the line whole would take at least its 200 MB."""
    path = tmp_path / "in.txt"
    size = 200_000_000
    with open(path, "wb") as handle:
        handle.write(b"short line\n")
        handle.truncate(size)
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    growth = json.loads(done.stdout)
    assert sorted(growth) == ["iter_documents", "read_texts"]
    for kib, message in growth.values():
        assert message.startswith(f"{path}:2: expected a line of at most 32,000,000 bytes, found more than"), message
        assert MAX_LINE_BYTES // 1024 < kib < MAX_LINE_BYTES * 5 // 4 // 1024 < size // 1024 // 4, growth
