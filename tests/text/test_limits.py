"""One text read from a file holds at most MAX_TEXT_CHARS characters; the error names the file and line."""

from __future__ import annotations

import pytest

from kerasbert.errors import DataError
from kerasbert.text.corpus import iter_documents
from kerasbert.text.limits import MAX_TEXT_CHARS, check_text
from kerasbert.text.readers import read_texts


def test_the_limit_itself_passes_and_one_more_character_fails():
    assert len(check_text("a" * MAX_TEXT_CHARS, "in.txt:1")) == MAX_TEXT_CHARS
    with pytest.raises(DataError, match=r"^in.txt:4: expected a text of at most 1,000,000 characters, found "
                                        r"1,000,001 characters\. Split it"):
        check_text("a" * (MAX_TEXT_CHARS + 1), "in.txt:4")


def test_readers_name_the_files_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("one\u2028two\n\n" + "好" * MAX_TEXT_CHARS + "\n" + "好" * (MAX_TEXT_CHARS + 1) + "\n",
                    encoding="utf-8")
    with pytest.raises(DataError, match=r"in\.txt:4: expected a text of at most 1,000,000 characters"):
        read_texts(str(path))
    path.write_text("one\u2028two\n\n三\n", encoding="utf-8")  # texts split as str.splitlines splits, as before
    assert read_texts(str(path)) == [{"text": "one"}, {"text": "two"}, {"text": "三"}]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "好"}\n\n{"text": "' + "好" * (MAX_TEXT_CHARS + 1) + '"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: expected a text of at most"):
        list(iter_documents(str(corpus)))
