"""The one place that chooses which speed variant of a layer runs, by the kind of machine.

kerasbert's layers (`kerasbert.modeling.layers`, `kerasbert.modeling.blocks`) state the math plainly. A faster
form of one step for one kind of machine is a *variant*: its code lives in `kerasbert.perf`, and a layer takes it
where `chosen` says so, with a one-line branch. Each variant names the machine kinds it runs on: those where it
was measured faster, each against the others as they run there (``benchmarks/variants.py`` measures each one on
and off; the figures and their sources are in benchmarks/HISTORY.md and RESULTS.md): the CPU variants interact,
so a variant's worth is what removing it from the set costs. A variant that buys less than 2 % on every kind is
deleted. A variant changes the speed, not the numbers beyond float rounding (the tests run both forms), except
``"xla_dropout"``: another random stream, the same rule.

Machine kinds (`machine_kind`): ``"gpu"``; on CPUs ``"amx"`` (AMX tiles), ``"avx512"``, ``"avx2"``, ``"other"``.
`table` lists every variant and whether it runs here; `forced` turns variants on or off for the graphs traced
inside it (benchmarks and tests).

Example:
>>> with forced({"xla_dropout": False}):
...     chosen("xla_dropout")
False
>>> sorted(VARIANTS)[:2]
['centred_layer_norm', 'dense_2d']
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterable, Iterator, Mapping

from kerasbert.errors import ConfigError, fail
from kerasbert.perf.onednn import cpu_flags

KINDS = ("gpu", "amx", "avx512", "avx2", "other")


@dataclasses.dataclass(frozen=True)
class Variant:
    """A faster form of one step, and the machine kinds it is chosen on."""

    name: str
    what: str  # the step it changes, in a clause
    kinds: frozenset[str]  # machine kinds where it runs: where it was measured faster


def _variant(name: str, what: str, kinds: Iterable[str]) -> Variant:
    return Variant(name, what, frozenset(kinds))


CPU_SET = ("avx2", "avx512", "amx")  # kinds where the CPU variants were measured or ran when the ratios were

VARIANTS: dict[str, Variant] = {v.name: v for v in (
    _variant("dense_2d", "projections as 2-D matmuls on [B·S, H], so oneDNN fuses MatMul + BiasAdd + GELU", CPU_SET),
    _variant("onednn_scores", "attention scales Q and subtracts a [B, 1, 1, S] padding penalty", CPU_SET),
    _variant("xla_gelu", "training's erf GELU as two XLA kernels on TensorFlow's plain graph", CPU_SET),
    _variant("xla_dropout", "training's dropout as one XLA kernel each way (a counter-hash random stream)", CPU_SET),
    _variant("float32_activation", "mixed-precision inference computes the activation in float32", ["amx"]),
    _variant("xla_layer_norm", "training's LayerNorm as one XLA kernel each way, in float32", ["amx"]),
    _variant("centred_layer_norm", "LayerNorm outside training centres x once and reuses it", CPU_SET),
    _variant("half_gradients", "mixed-bf16 training gives projection gradients to kerasbert's optimizer in bf16",
             ["amx"]),
    _variant("one_hot_segments", "the segment embedding as a one-hot sum, a float32 gradient", ["gpu"]),
)}

_forced: dict[str, bool] = {}


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


def chosen(name: str) -> bool:
    """Whether variant ``name`` runs here: forced on or off (`forced`), else whether this machine's kind is one
    of its kinds. Read when a layer traces its graph.

    Example:
    >>> chosen("one_hot_segments") == (machine_kind() == "gpu")
    True
    """
    _check(name)
    if name in _forced:
        return _forced[name]
    return machine_kind() in VARIANTS[name].kinds


@contextlib.contextmanager
def forced(choices: Mapping[str, bool]) -> Iterator[None]:
    """Choose the variants in ``choices`` on or off for the graphs traced inside (benchmarks and tests).

    Example:
    >>> with forced({"centred_layer_norm": True}):
    ...     chosen("centred_layer_norm")
    True
    """
    for name in choices:
        _check(name)
    saved = dict(_forced)
    _forced.update(choices)
    try:
        yield
    finally:
        _forced.clear()
        _forced.update(saved)


def table(kind: str | None = None) -> str:
    """A Markdown table of every variant: what it changes, its kinds, and whether it runs on ``kind``
    (this machine's, `machine_kind`, when None; `forced` choices count).

    Example:
    >>> print(table("gpu").splitlines()[-1])
    | one_hot_segments | the segment embedding as a one-hot sum, a float32 gradient | gpu | yes |
    """
    kind = machine_kind() if kind is None else kind
    rows = ["| variant | what | kinds | runs on " + kind + " |", "|---|---|---|---|"]
    for v in VARIANTS.values():
        runs = _forced.get(v.name, kind in v.kinds)
        kinds = ", ".join(k for k in KINDS if k in v.kinds)
        rows.append(f"| {v.name} | {v.what} | {kinds} | {'yes' if runs else 'no'} |")
    return "\n".join(rows)


def _check(name: str) -> None:
    if name not in VARIANTS:
        raise fail(ConfigError, "variant", f"one of {', '.join(sorted(VARIANTS))}", repr(name))
