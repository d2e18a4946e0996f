"""The one place that chooses which speed variant of a layer runs, by the kind of machine.

kerasbert's layers (`kerasbert.modeling.layers`, `kerasbert.modeling.blocks`) state the math plainly. A faster
form of one step for one kind of machine is a *variant*: its code lives in `kerasbert.perf`, and a layer takes it
only where `chosen` says so. Each variant names the machine kinds it runs on; the gain that earns each place is
measured by ``benchmarks/variants.py`` and listed in benchmarks/RESULTS.md. A variant changes the speed, not the
numbers beyond float rounding (the tests run both forms), except where its entry says so.

Machine kinds (`machine_kind`): ``"gpu"``; on CPUs ``"amx"`` (AMX tiles), ``"avx512"``, ``"avx2"``, ``"other"``.

Example:
>>> with forced({"xla_dropout": False}):
...     chosen("xla_dropout")
False
>>> sorted(VARIANTS)[:2]
['centred_layer_norm', 'float32_activation']
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator, Mapping

from kerasbert.perf.onednn import cpu_flags

KINDS = ("gpu", "amx", "avx512", "avx2", "other")
CPU_KINDS = KINDS[1:]


@dataclasses.dataclass(frozen=True)
class Variant:
    """A faster form of one step, and the machine kinds it is chosen on."""

    name: str
    what: str  # the step it changes, in a clause
    kinds: frozenset[str]  # machine kinds where it runs


def _variant(name: str, what: str, kinds) -> Variant:
    return Variant(name, what, frozenset(kinds))


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    _variant("dense_2d", "projections as 2-D matmuls on [B·S, H], so oneDNN fuses MatMul + BiasAdd + GELU", CPU_KINDS),
    _variant("onednn_scores", "attention scales Q and subtracts a [B, 1, 1, S] padding penalty", CPU_KINDS),
    _variant("xla_gelu", "training's erf GELU as two XLA kernels on TensorFlow's plain graph", CPU_KINDS),
    _variant("xla_dropout", "training's dropout as one XLA kernel each way (a counter-hash random stream)", CPU_KINDS),
    _variant("float32_activation", "mixed-precision inference computes the activation in float32", KINDS),
    _variant("centred_layer_norm", "LayerNorm centres x once and reuses it", CPU_KINDS),
    _variant("one_hot_segments", "the segment embedding as a one-hot sum, a float32 gradient", ("gpu",)),
)}

_forced: dict[str, bool] = {}


@functools.cache
def machine_kind() -> str:
    """This machine's kind: ``"gpu"`` when Keras sees a GPU, else the CPU's from its flags (`KINDS`)."""
    import keras

    if keras.distribution.list_devices("gpu"):
        return "gpu"
    return cpu_kind(cpu_flags())


def cpu_kind(flags) -> str:
    """The CPU kind of a set of /proc/cpuinfo flags.

    Example:
    >>> cpu_kind({"avx2", "avx512f", "amx_bf16"}), cpu_kind({"avx2", "fma"}), cpu_kind(set())
    ('amx', 'avx2', 'other')
    """
    if any(f.startswith("amx") for f in flags):
        return "amx"
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "other"


def chosen(name: str) -> bool:
    """Whether variant ``name`` runs here (read when a layer traces its graph)."""
    if name in _forced:
        return _forced[name]
    return machine_kind() in VARIANTS[name].kinds


@contextlib.contextmanager
def forced(choices: Mapping[str, bool]) -> Iterator[None]:
    """Choose the variants in ``choices`` on or off for the graphs traced inside (benchmarks and tests)."""
    unknown = set(choices) - set(VARIANTS)
    if unknown:
        raise KeyError(f"unknown variants {sorted(unknown)}; known: {sorted(VARIANTS)}")
    saved = dict(_forced)
    _forced.update(choices)
    try:
        yield
    finally:
        _forced.clear()
        _forced.update(saved)
