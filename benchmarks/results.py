"""Write one benchmark's section of ``benchmarks/RESULTS.md``, leaving the other sections as they are."""

from __future__ import annotations

import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "RESULTS.md")
TITLE = "# kerasbert benchmark results\n\nEach section is written by the script it names; rerun it to refresh.\n"


def write_section(name: str, text: str, path: str = RESULTS) -> None:
    """Replace (or append) the section between ``<!-- name -->`` markers, writing atomically."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{start}\n{text.strip()}\n{end}"
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else TITLE
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    new = pattern.sub(lambda _: block, old) if pattern.search(old) else old.rstrip() + "\n\n" + block + "\n"
    # imported here: bench.py's bert4keras worker imports this module, and kerasbert would bring Keras 3 before tf-keras
    from kerasbert.files import write_text

    write_text(path, new)
