"""The kernel table: every faster form of a layer's step, and the one record of which runs, by the kind of machine.

kerasbert's layers (`kerasbert.modeling.layers`, `kerasbert.modeling.blocks`) state the math plainly and reach each
step that has faster forms through one call of `kerasbert.perf.kernels` (layer norm, dropout, attention scores,
projection, activation, segment lookup, a projection's autocast). Each faster form is a *variant*, an entry of
`VARIANTS`: the kernel it belongs to, the machine kinds it runs on (those where it was measured faster, each against
the others as they run there: ``benchmarks/variants.py`` measures each on and off, the figures are in
benchmarks/HISTORY.md and RESULTS.md), the widths from which it pays, and for two kinds of entry a scope that must
grant it: the portable runtimes' forms (`kerasbert.perf.portable.portable_graph`) and ``"half_gradients"`` (a step
whose optimizer takes bf16 gradients, `kerasbert.perf.half_gradients.allowing`). A variant that buys less than 2 %
on every kind is deleted. A variant changes the speed, not the numbers beyond float rounding (the tests run both
forms), except ``"xla_dropout"``: another random stream, the same rule.

Machine kinds (`machine_kind`): ``"gpu"``; on CPUs ``"amx"`` (AMX tiles), ``"avx512"``, ``"avx2"``, ``"other"``.
`chosen` reads one record: the machine's kind, what `forced` turns on or off (benchmarks and tests: kinds and
widths aside) and what `granted` allows, for the graphs traced inside; `table` lists every variant.

Example:
>>> with forced({"xla_dropout": False}):
...     chosen("xla_dropout", width=768)
False
>>> chosen("portable_gelu"), VARIANTS["xla_gelu"].pays("avx2", width=3072)
(False, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterable, Iterator, Mapping

from kerasbert.errors import ConfigError, fail
from kerasbert.perf.onednn import cpu_flags

KINDS = ("gpu", "amx", "avx512", "avx2", "other")
KERNELS = ("layer_norm", "dropout", "scores", "projection", "activation", "segments", "autocast")


@dataclasses.dataclass(frozen=True)
class Variant:
    """A faster form of one kernel's step, where it runs, and from which width it pays.

    ``width`` is what the kernel measures: the model's width H (layer norm, dropout), the inner width I (the
    activation), the table's rows T (segments). ``needs``: the scope that must grant the variant (`granted`), ""
    for none; a forced variant still needs it.
    """

    name: str
    kernel: str  # one of KERNELS
    what: str  # the step it changes, in a clause
    kinds: frozenset[str]  # machine kinds where it runs: where it was measured faster
    min_width: int = 0  # narrower steps keep the plain form: an XLA kernel's compiles would not repay
    max_width: int | None = None  # wider ones too: the one-hot sum's work grows with the table's rows
    needs: str = ""

    def pays(self, kind: str, width: int | None = None) -> bool:
        """Whether the variant is chosen on machine ``kind`` for a step of ``width`` (None: unknown), unforced."""
        wide = (width or 0) >= self.min_width and (self.max_width is None or (width or 0) <= self.max_width)
        return kind in self.kinds and wide


def _variant(name: str, kernel: str, what: str, kinds: Iterable[str], **limits) -> Variant:
    return Variant(name, kernel, what, frozenset(kinds), **limits)


CPU_SET = ("avx2", "avx512", "amx")  # kinds where the CPU variants were measured or ran when the ratios were
XLA_MIN_WIDTH = 768  # models at least this wide (BERT-base) repay an XLA kernel's compile for each batch shape
XLA_MIN_INNER_WIDTH = 3072  # inner layers at least this wide (BERT-base's) repay the XLA GELU's compiles
PORTABLE = "a graph traced for a portable runtime (kerasbert.perf.portable.portable_graph)"

VARIANTS: dict[str, Variant] = {v.name: v for v in (
    _variant("dense_2d", "projection", "projections as 2-D matmuls on [B·S, H], so oneDNN fuses MatMul + BiasAdd + "
             "GELU", CPU_SET),
    _variant("onednn_scores", "scores", "attention scales Q and subtracts a [B, 1, 1, S] padding penalty", CPU_SET),
    _variant("xla_gelu", "activation", "training's erf GELU as two XLA kernels on TensorFlow's plain graph", CPU_SET,
             min_width=XLA_MIN_INNER_WIDTH),
    _variant("xla_dropout", "dropout", "training's dropout as one XLA kernel each way (a counter-hash random stream)",
             CPU_SET, min_width=XLA_MIN_WIDTH),
    _variant("float32_activation", "activation", "mixed-precision inference computes the activation in float32",
             ["amx"]),
    _variant("xla_layer_norm", "layer_norm", "training's LayerNorm as one XLA kernel each way, in float32", ["amx"],
             min_width=XLA_MIN_WIDTH),
    _variant("centred_layer_norm", "layer_norm", "LayerNorm outside training centres x once and reuses it", CPU_SET),
    _variant("half_gradients", "autocast", "mixed-bf16 training gives projection gradients to kerasbert's optimizer "
             "in bf16", ["amx"], needs="a step whose optimizer takes bf16 gradients "
             "(kerasbert.perf.half_gradients.allowing)"),
    _variant("one_hot_segments", "segments", "the segment embedding as a one-hot sum, a float32 gradient", ["gpu"],
             max_width=16),
    _variant("portable_gelu", "activation", "the erf GELU as 0.5·x·(1+erf(x/√2)), which OpenVINO fuses", KINDS,
             needs=PORTABLE),
    _variant("portable_layer_norm", "layer_norm", "LayerNorm with a list axis, which OpenVINO fuses into one MVN",
             KINDS, needs=PORTABLE),
)}
MEASURED = tuple(name for name, v in VARIANTS.items() if not v.needs or name == "half_gradients")  # speed variants


@dataclasses.dataclass(frozen=True)
class Choices:
    """The record `chosen` reads: what `forced` turned on or off, and the variants `granted` allows."""

    forced: Mapping[str, bool] = dataclasses.field(default_factory=dict)
    granted: frozenset[str] = frozenset()


_record = [Choices()]


@functools.cache
def machine_kind() -> str:
    """This machine's kind: ``"gpu"`` when Keras sees a GPU, else the CPU's from its flags (`KINDS`).

    Example:
    >>> machine_kind() in KINDS
    True
    """
    import keras

    if any(device.lower().startswith("gpu") for device in keras.distribution.list_devices()):
        return "gpu"  # (asking for "gpu" alone raises on a JAX without one)
    return cpu_kind(cpu_flags())


def cpu_kind(flags: Iterable[str]) -> str:
    """The CPU kind of a set of /proc/cpuinfo flags.

    Example:
    >>> cpu_kind({"avx2", "avx512f", "amx_bf16"}), cpu_kind({"avx2", "fma"}), cpu_kind(set())
    ('amx', 'avx2', 'other')
    """
    flags = set(flags)
    if any(f.startswith("amx") for f in flags):
        return "amx"
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "other"


def chosen(name: str, width: int | None = None) -> bool:
    """Whether variant ``name`` runs for a step of ``width`` (`Variant`): never where it needs a scope that did not
    grant it (`granted`); else as forced (`forced`), else where this machine's kind and the width pay. Read when a
    layer traces its graph.

    Example:
    >>> chosen("one_hot_segments", width=2) == (machine_kind() == "gpu")
    True
    """
    variant, record = _checked(name), _record[0]
    if variant.needs and name not in record.granted:
        return False
    if name in record.forced:
        return record.forced[name]
    return variant.pays(machine_kind(), width)


@contextlib.contextmanager
def forced(choices: Mapping[str, bool]) -> Iterator[None]:
    """Choose the variants in ``choices`` on or off for the graphs traced inside, whatever the kind and the width
    (benchmarks and tests); a variant that needs a scope (`Variant.needs`) runs only where it is granted too.

    Example:
    >>> with forced({"centred_layer_norm": True}):
    ...     chosen("centred_layer_norm")
    True
    """
    with _recorded(lambda record: Choices({**record.forced, **choices}, record.granted), choices):
        yield


@contextlib.contextmanager
def granted(grants: Mapping[str, bool]) -> Iterator[None]:
    """Grant (True) or withhold (False) the scope of each variant in ``grants`` for the graphs traced inside.

    Example:
    >>> with granted({"portable_gelu": True}):
    ...     chosen("portable_gelu")
    True
    """
    def update(record: Choices) -> Choices:
        on = {name for name, grant in grants.items() if grant}
        return Choices(record.forced, (record.granted - set(grants)) | on)

    with _recorded(update, grants):
        yield


@contextlib.contextmanager
def _recorded(update, names: Iterable[str]) -> Iterator[None]:
    """`_record` as ``update`` makes it, inside; as it was, after (even on an error)."""
    for name in names:
        _checked(name)
    saved = _record[0]
    _record[0] = update(saved)
    try:
        yield
    finally:
        _record[0] = saved


def table(kind: str | None = None) -> str:
    """A Markdown table of every variant: its kernel, what it changes, its kinds and widths, and whether it runs on
    ``kind`` at a width that pays (this machine's kind, `machine_kind`, when None; `forced` and `granted` count).

    Example:
    >>> print(table("gpu").splitlines()[-3])
    | one_hot_segments | segments | the segment embedding as a one-hot sum, a float32 gradient | gpu | T ≤ 16 | yes |
    """
    kind = machine_kind() if kind is None else kind
    rows = ["| variant | kernel | what | kinds | widths | runs on " + kind + " |", "|---|---|---|---|---|---|"]
    for v in VARIANTS.values():
        record = _record[0]
        runs = (not v.needs or v.name in record.granted) and record.forced.get(v.name, kind in v.kinds)
        kinds = ", ".join(k for k in KINDS if k in v.kinds) if not v.needs else "where granted: " + v.needs
        widths = f"≥ {v.min_width}" if v.min_width else f"T ≤ {v.max_width}" if v.max_width else "any"
        rows.append(f"| {v.name} | {v.kernel} | {v.what} | {kinds} | {widths} | {'yes' if runs else 'no'} |")
    return "\n".join(rows)


def _checked(name: str) -> Variant:
    if name not in VARIANTS:
        raise fail(ConfigError, "variant", f"one of {', '.join(sorted(VARIANTS))}", repr(name))
    return VARIANTS[name]
