"""Write one benchmark's section of ``benchmarks/RESULTS.md``, leaving the other sections as they are.

A section is named ``<benchmark>[-<what>]-<machine>`` (``bench-cpu-amx``, ``serve-precision-cpu-avx512``,
``variants-gpu``) and holds only the latest run on that class of machine: a new run replaces it, and its heading
gets the class and the date (`cpu_class`, `dated`). A section new to the file goes after the last one of its
benchmark, so each benchmark's machines read together. Earlier runs belong in ``benchmarks/HISTORY.md``.
"""

from __future__ import annotations

import datetime
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "RESULTS.md")
TITLE = "# kerasbert benchmark results\n\nEach section is written by the script it names; rerun it to refresh.\n"
# a token of a section's name -> the class of machine it names; ``cpu`` alone is an AVX2 CPU (`bench.machine_kind`)
CLASSES = {"gpu": "GPU", "amx": "AMX CPU", "avx512": "AVX-512 CPU", "avx2": "AVX2 CPU", "cpu": "AVX2 CPU"}
_MARKER = re.compile(r"<!-- ([\w.-]+) -->")


def cpu_class(name: str) -> str | None:
    """The class of machine a section's name says its run was on, None for one that names none.

    Example:
    >>> cpu_class("bench-cpu"), cpu_class("serve-precision-cpu-amx"), cpu_class("bench-cpu-avx512-fp32")
    ('AVX2 CPU', 'AMX CPU', 'AVX-512 CPU, bf16 slower than float32')
    >>> cpu_class("variants-gpu"), cpu_class("ner-recipe")
    ('GPU', None)
    """
    tokens = name.split("-")
    for token, label in CLASSES.items():  # the most specific first: "cpu" stands for AVX2 only when alone
        if token in tokens:
            return label + (", bf16 slower than float32" if token == "avx512" and "fp32" in tokens else "")
    return None


def dated(name: str, text: str, day: str) -> str:
    """``text`` with its ``## `` heading ending in the machine class (`cpu_class`), ``day`` (the run's date) and
    the section's name, which tells apart the runs of one script on one class (a family, a set of exports).

    Example:
    >>> dated("bench-cpu-amx-albert", "## Model speed\\n\\nrows", "2026-11-28").splitlines()[0]
    '## Model speed — AMX CPU, 2026-11-28 (`bench-cpu-amx-albert`)'
    """
    head, _, rest = text.strip().partition("\n")
    if not head.startswith("## "):
        return text.strip()
    label = ", ".join(part for part in (cpu_class(name), day) if part) + f" (`{name}`)"
    return f"{head} — {label}\n{rest}" if rest else f"{head} — {label}"


def write_section(name: str, text: str, path: str = RESULTS, day: str | None = None) -> None:
    """Replace the section between ``<!-- name -->`` markers with ``text``, its heading dated ``day`` (today when
    None); a new section goes after the last one of the same benchmark (the name's first word), else at the end.
    Writes atomically."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{start}\n{dated(name, text, day or datetime.date.today().isoformat())}\n{end}"
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else TITLE
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    new = pattern.sub(lambda _: block, old) if pattern.search(old) else _inserted(old, name, block)
    # imported here: bench.py's bert4keras worker imports this module, and kerasbert would bring Keras 3 before tf-keras
    from kerasbert.files import write_text

    write_text(path, new)


def _inserted(old: str, name: str, block: str) -> str:
    """``old`` with ``block`` after the last section whose name starts with the same word as ``name``."""
    kin = [m for m in _MARKER.finditer(old) if m.group(1).split("-")[0] == name.split("-")[0]]
    if not kin:
        return old.rstrip() + "\n\n" + block + "\n"
    close = old.index(f"<!-- /{kin[-1].group(1)} -->") + len(f"<!-- /{kin[-1].group(1)} -->")
    return old[:close] + "\n\n" + block + old[close:]
