"""The annotated summary's result, :class:`Summary`, and its three forms: a text table (rich when installed),
Markdown and JSON.

`kerasbert.annotated.collect` fills a :class:`Summary` from a model; this module holds the data (rows, groups,
totals, memory) and renders it. All three forms are built from the same cells (:func:`layer_table`,
:func:`group_table`, :func:`footer_lines`), so they show the same figures.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json

from kerasbert.annotated.formulas import Formula
from kerasbert.choices import SUMMARY_FORMATS

FORMATS = SUMMARY_FORMATS  # the renderings of `render`
LAYER_HEADERS = ("Layer (type)", "Output Shape", "Param #", "Formula (symbols = numbers)", "Note")
GROUP_HEADERS = ("Group", "Param #", "Share", "Detail")
RIGHT = {"Param #", "Share"}


@dataclasses.dataclass
class WeightRow:
    """One weight of a layer (``expand=True``): ``qkv_kernel [768, 2304]``."""

    name: str
    shape: tuple[int, ...]
    params: int
    trainable: bool
    tied_to: str = ""  # the row that already counted this weight, if any


@dataclasses.dataclass
class Row:
    """One layer: real count, formula, the check, and where its parameters are counted."""

    name: str
    type: str
    output_shape: str
    params: int  # the layer's own count_params()
    counted: int  # params not already counted by an earlier row (tied weights count once)
    formula: Formula | None  # None for a nested model's folded row (its layers follow)
    source: str  # "layer", "builtin", "generic" or "nested"
    group: str
    block: int | None = None  # the encoder layer index for Transformer-{i}-*
    depth: int = 0  # nesting depth inside nested models
    notes: list[str] = dataclasses.field(default_factory=list)
    weights: list[WeightRow] = dataclasses.field(default_factory=list)
    calls: int = 1  # the layer's calls in the graph: L for a layer of ALBERT's shared block

    @property
    def ok(self) -> bool:
        """True when the formula's value equals the real count (nested rows are checked through their layers)."""
        return self.formula is None or self.formula.value == self.params


@dataclasses.dataclass
class Group:
    """Parameters of one group; for the encoder (and T5's decoder) also the number of layers and the per-layer
    count with what the stack has outside them, or the number of layers that share its one block (ALBERT)."""

    name: str
    params: int
    share: float
    blocks: int = 0
    per_block: int | None = None  # set when every encoder layer has the same count
    shared_by: int = 0  # set when one block is shared by that many layers (no per-layer blocks)
    extra: int = 0  # params of the stack outside its layers (T5's final norm)

    @property
    def detail(self) -> str:
        """``12 × 7,087,872``, ``12 × 7,087,872 + 768`` (T5's final norm), ``1 block shared by 12 layers``,
        ``12 layers, not alike`` or nothing."""
        if self.per_block is not None:
            return f"{self.blocks} × {self.per_block:,}" + (f" + {self.extra:,}" if self.extra else "")
        if self.blocks:
            return f"{self.blocks} layers, not alike"
        return f"1 block shared by {self.shared_by} layers" if self.shared_by > 1 else ""


@dataclasses.dataclass
class Activations:
    """An estimate of the forward activations kept for backprop, for one batch shape."""

    batch_size: int
    seq_len: int | None
    elements: int
    bytes: int
    formula: str


@dataclasses.dataclass
class Memory:
    """Bytes of the weights per dtype, of the Adam training state, and optionally of activations."""

    weights: dict[str, int]
    adam_training: int
    adam_formula: str
    activations: Activations | None = None


@dataclasses.dataclass
class Summary:
    """Everything the annotated summary shows, for programs; ``render()`` gives text, Markdown or JSON."""

    model: str
    rows: list[Row]
    groups: list[Group]
    params: int
    trainable: int
    non_trainable: int
    formula_params: int  # the same total computed from the formulas
    mismatches: list[str]  # names of rows whose formula disagrees with the real count
    memory: Memory
    expand: bool = False

    def total_line(self) -> str:
        """``Total 101,678,594 = embeddings 16,622,592 + 12 × 7,087,872 (encoder) + head 1,538``."""
        parts = []
        for group in self.groups:
            if not group.params:
                continue
            if group.per_block is not None:
                parts.append(f"{group.detail} ({group.name})")
            elif group.shared_by > 1 and not group.blocks:
                parts.append(f"{group.name} {group.params:,} ({group.detail})")
            else:
                parts.append(f"{group.name} {group.params:,}")
        line = f"Total {self.params:,} = " + " + ".join(parts or ["0"])
        if self.mismatches:
            line += (f"  [MISMATCH: formulas give {self.formula_params:,}; {len(self.mismatches)} row(s) differ: "
                     f"{', '.join(self.mismatches)}]")
        return line

    def to_dict(self) -> dict:
        """Plain data (rows, groups, totals, memory), as the JSON output holds it."""
        data = dataclasses.asdict(self)
        for row, source in zip(data["rows"], self.rows, strict=True):
            row["ok"] = source.ok
            if source.formula is not None:
                row["formula"]["text"] = str(source.formula)
        data["total_line"] = self.total_line()
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def render(self, format: str = "text") -> str:
        """The summary as ``"text"`` (a rich table when rich is installed), ``"markdown"`` or ``"json"``."""
        return render(self, format)

    def __str__(self) -> str:
        return self.render("text")


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n} B"


def _percent(share: float) -> str:
    """``21.77%``; small shares keep two significant digits (``0.0015%``) rather than read as zero."""
    return f"{100 * share:.2f}%" if share >= 1e-4 or share == 0 else f"{100 * share:.2g}%"


def _formula_cell(row: Row) -> str:
    if row.formula is None:
        return "Σ of the rows below"
    if row.formula.value == 0 and row.params == 0:
        return ""
    return str(row.formula) if row.formula.symbols != row.formula.numbers else row.formula.numbers


def _layer_cells(row: Row) -> list[str]:
    indent = "  " * row.depth
    params = f"{row.params:,}" if row.ok else f"! {row.params:,}"
    return [f"{indent}{row.name} ({row.type})", row.output_shape, params, _formula_cell(row), "; ".join(row.notes)]


def _weight_cells(row: Row) -> list[list[str]]:
    indent = "  " * row.depth + "  └ "
    cells = []
    for weight in row.weights:
        notes = ([] if weight.trainable else ["non-trainable"]) + ([f"tied to {weight.tied_to}"] if weight.tied_to
                                                                     else [])
        shape = "[" + ", ".join(str(n) for n in weight.shape) + "]"
        product = "·".join(str(n) for n in weight.shape) or "1"
        cells.append([f"{indent}{weight.name}", shape, f"{weight.params:,}", product, "; ".join(notes)])
    return cells


def layer_table(summary: Summary) -> list[list[str]]:
    """One list of cells per row (and per weight when ``summary.expand``), in LAYER_HEADERS order."""
    table = []
    for row in summary.rows:
        table.append(_layer_cells(row))
        if summary.expand:
            table.extend(_weight_cells(row))
    return table


def group_table(summary: Summary) -> list[list[str]]:
    """One list of cells per group, in GROUP_HEADERS order."""
    table = []
    for group in summary.groups:
        table.append([group.name, f"{group.params:,}", _percent(group.share), group.detail])
    return table


def footer_lines(summary: Summary) -> list[str]:
    """Totals, trainable counts, memory, the activation estimate and the total line."""
    memory = summary.memory
    lines = [
        f"Total params: {summary.params:,}",
        f"Trainable params: {summary.trainable:,}",
        f"Non-trainable params: {summary.non_trainable:,}",
        "Weights: " + " · ".join(f"{dtype} {_bytes(size)}" for dtype, size in memory.weights.items()),
        f"Training state with Adam: {_bytes(memory.adam_training)} ({memory.adam_formula})",
    ]
    act = memory.activations
    if act is not None:
        lines.append(f"Activations (estimate, batch {act.batch_size}, seq {act.seq_len}): {_bytes(act.bytes)} "
                     f"({act.elements:,} elements)")
        lines.append(f"  {act.formula}")
    if summary.mismatches:
        lines.append(f"MISMATCH: {len(summary.mismatches)} row(s) whose formula disagrees with the layer "
                     f"(marked !): {', '.join(summary.mismatches)}")
    lines.append(summary.total_line())
    return lines


def _plain_table(headers, rows) -> list[str]:
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]

    def line(cells):
        return "  ".join(c.rjust(w) if h in RIGHT else c.ljust(w)
                         for c, w, h in zip(cells, widths, headers, strict=True)).rstrip()

    rule = "-" * len(line(["-" * w for w in widths]))
    return [rule, line(headers), rule, *(line(r) for r in rows), rule]


def render_plain(summary: Summary) -> str:
    """Fixed-width text without rich."""
    lines = [f'Model: "{summary.model}"', *_plain_table(LAYER_HEADERS, layer_table(summary)), ""]
    lines += [*_plain_table(GROUP_HEADERS, group_table(summary)), *footer_lines(summary)]
    return "\n".join(lines)


def render_rich(summary: Summary) -> str:
    """A rich table, as Keras's own summary draws it, captured as plain text (no colour codes)."""
    import rich.console
    import rich.markup
    import rich.table

    console = rich.console.Console(file=io.StringIO(), width=400, color_system=None, force_terminal=False,
                                   highlight=False)
    for title, headers, rows in ((f'Model: "{summary.model}"', LAYER_HEADERS, layer_table(summary)),
                                 ("Groups", GROUP_HEADERS, group_table(summary))):
        table = rich.table.Table(*[rich.table.Column(h, justify="right" if h in RIGHT else "left")
                                   for h in headers], title=rich.markup.escape(title), title_justify="left")
        for cells in rows:
            table.add_row(*[rich.markup.escape(c) for c in cells])
        console.print(table)
    for line in footer_lines(summary):
        console.print(rich.markup.escape(line), soft_wrap=True)
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines())


def _markdown_table(headers, rows) -> list[str]:
    def line(cells):
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(headers), "|" + "|".join("---:" if h in RIGHT else "---" for h in headers) + "|",
            *(line(r) for r in rows)]


def render_markdown(summary: Summary) -> str:
    """GitHub Markdown: the layer table, the group table, then the totals as a list."""
    lines = [f"**Model: `{summary.model}`**", "", *_markdown_table(LAYER_HEADERS, layer_table(summary)), ""]
    lines += [*_markdown_table(GROUP_HEADERS, group_table(summary)), ""]
    lines += [f"- {line}" for line in footer_lines(summary)]
    return "\n".join(lines)


def render(summary: Summary, format: str = "text") -> str:
    """Dispatch on ``format``: text (rich if installed, else plain), markdown or json."""
    if format == "json":
        return summary.to_json()
    if format == "markdown":
        return render_markdown(summary)
    return render_rich(summary) if importlib.util.find_spec("rich") else render_plain(summary)
