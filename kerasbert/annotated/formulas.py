"""Where each summary row's parameter formula comes from: the layer, a small table, or its weight shapes.

The annotated summary (``kerasbert.summary``) asks, in this order:

1. the layer itself: ``layer.param_formula()`` (every kerasbert layer has one);
2. a small table for Keras built-ins: Dense, Embedding, LayerNormalization, LSTM, GRU, Bidirectional
   and Conv1D, written with the symbols the kerasbert layers already use (``H·C+C``, ``T·H``; ``E·H+H`` for
   the ``Embedding-Mapping`` Dense of ALBERT and ELECTRA, whose embedding layers bind E);
3. the weight shapes, as a product per weight, marked *generic*.

It never re-derives a BERT shape: symbol values are read from the kerasbert layers' own formulas
(``V·H = 21128·768`` binds V and H), and a built-in layer only names its own sizes.
"""

from __future__ import annotations

import dataclasses
import math
import re

import keras

from kerasbert.internals import inbound_nodes

LAYER, BUILTIN, GENERIC = "layer", "builtin", "generic"


@dataclasses.dataclass(frozen=True)
class Formula:
    """A parameter count as a formula: ``symbols`` (``4·(H·H+H)``), ``numbers`` and ``value``.

    Example:
    >>> Formula.of("4·(H·H+H)", H=768)
    Formula(symbols='4·(H·H+H)', numbers='4·(768·768+768)', value=2362368)
    """

    symbols: str
    numbers: str
    value: int

    @classmethod
    def of(cls, symbols: str, **sizes: int) -> "Formula":
        """Substitute ``sizes`` into ``symbols`` and evaluate (only digits, + · ( ) are allowed)."""
        numbers = re.sub(r"[A-Za-z]+", lambda m: str(sizes[m.group(0)]), symbols)
        if not re.fullmatch(r"[0-9+·() ]+", numbers):
            raise ValueError(f"formula {symbols!r} has symbols not in {sorted(sizes)}")
        value = eval(numbers.replace("·", "*"), {"__builtins__": {}}, {})  # digits and + * ( ) only
        return cls(symbols, numbers, int(value))

    def __str__(self) -> str:
        return f"{self.symbols} = {self.numbers}"


class Symbols:
    """Names sizes with single letters, consistently over one model.

    ``bind_from(formula)`` learns ``V=21128, H=768`` from ``V·H = 21128·768``;
    ``name(size, candidates)`` returns the first candidate already bound to ``size``, else binds
    the first free candidate, else falls back to the size itself as a literal.

    Example:
    >>> symbols = Symbols()
    >>> symbols.bind_from(Formula.of("V·H", V=21128, H=768))
    >>> symbols.name(768, ("H", "D")), symbols.name(2, ("V", "T")), symbols.name(2, ("H",))
    ('H', 'T', '2')
    """

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def bind_from(self, formula: Formula) -> None:
        """Learn symbol values from a formula's symbols and numbers; first binding wins."""
        letters = re.findall(r"[A-Za-z]+", formula.symbols)
        pattern = re.sub(r"[A-Za-z]+", "@", formula.symbols)
        pattern = re.escape(pattern).replace("@", r"(\d+)")
        match = re.fullmatch(pattern, formula.numbers)
        if match:
            for letter, number in zip(letters, match.groups(), strict=True):
                self.values.setdefault(letter, int(number))

    def name(self, size: int, candidates: tuple[str, ...]) -> str:
        for symbol in candidates:
            if self.values.get(symbol) == size:
                return symbol
        for symbol in candidates:
            if symbol not in self.values:
                self.values[symbol] = size
                return symbol
        return str(size)

    def formula(self, template: str, **named: str) -> Formula:
        """``template`` with ``{slot}`` placeholders filled by symbol names, evaluated with the bound values."""
        return Formula.of(template.format(**named), **self.values)


def _output_rank(layer) -> int:
    """Rank of the layer's first output in the graph (2 when it was never called symbolically)."""
    nodes = inbound_nodes(layer)  # Keras's own summary reads the same attribute
    return len(keras.tree.flatten(nodes[0].output_tensors)[0].shape) if nodes else 2


def _widths(symbols: Symbols) -> tuple[str, ...]:
    """The width symbols a built-in layer may use: H, and E once the model's embedding layers bound it
    (``Embedding-Mapping`` is ``E·H+H``, ALBERT's ``MLM-Dense`` ``H·E+E``); E is offered only when bound, so
    no other size is ever named E."""
    return ("H", "E") if "E" in symbols.values else ("H",)


def _dense(layer, symbols: Symbols) -> Formula:
    rank = _output_rank(layer)
    din = symbols.name(int(layer.kernel.shape[0]), (*_widths(symbols), "I", "D"))
    out = symbols.name(int(layer.units), (*_widths(symbols), "C" if rank <= 2 else "K"))
    return symbols.formula("{i}·{o}+{o}" if layer.use_bias else "{i}·{o}", i=din, o=out)


def _embedding(layer, symbols: Symbols) -> Formula:
    rows = symbols.name(int(layer.input_dim), ("V", "T", "N"))
    return symbols.formula("{v}·{h}", v=rows, h=symbols.name(int(layer.output_dim), (*_widths(symbols), "D")))


def _layer_norm(layer, symbols: Symbols) -> Formula:
    size = math.prod(int(w.shape[-1]) for w in layer.weights[:1]) if layer.weights else 0
    h = symbols.name(size, (*_widths(symbols), "D"))
    count = int(layer.scale) + int(layer.center)
    return symbols.formula({2: "2·{h}", 1: "{h}", 0: "0"}[count], h=h)


def _recurrent(layer, symbols: Symbols, gates: int) -> Formula:
    cell = layer.cell
    din = symbols.name(int(cell.kernel.shape[0]), ("H", "D"))
    units = symbols.name(int(cell.units), ("U",))
    bias = ""
    if cell.use_bias:
        bias = "+2·{u}" if getattr(cell, "reset_after", False) else "+{u}"
    return symbols.formula(f"{gates}·({{d}}·{{u}}+{{u}}·{{u}}{bias})", d=din, u=units)


def _conv1d(layer, symbols: Symbols) -> Formula:
    width, channels, filters = (int(n) for n in layer.kernel.shape)
    d = symbols.name(channels, ("H", "D"))
    f = symbols.name(filters, ("F",))
    return symbols.formula(f"{width}·{{d}}·{{f}}" + ("+{f}" if layer.use_bias else ""), d=d, f=f)


def _bidirectional(layer, symbols: Symbols) -> Formula | None:
    forward = builtin_formula(layer.forward_layer, symbols)
    backward = builtin_formula(layer.backward_layer, symbols)
    if forward is None or forward != backward:
        return None
    return Formula.of(f"2·{forward.symbols}", **symbols.values)


_BUILTINS = {
    keras.layers.Dense: _dense,
    keras.layers.Embedding: _embedding,
    keras.layers.LayerNormalization: _layer_norm,
    keras.layers.LSTM: lambda layer, symbols: _recurrent(layer, symbols, 4),
    keras.layers.GRU: lambda layer, symbols: _recurrent(layer, symbols, 3),
    keras.layers.Conv1D: _conv1d,
    keras.layers.Bidirectional: _bidirectional,
}


def builtin_formula(layer, symbols: Symbols) -> Formula | None:
    """The table's formula for an exact Keras built-in class, or None (subclasses are not assumed alike)."""
    rule = _BUILTINS.get(type(layer))
    if rule is None or (type(layer) is keras.layers.Conv1D and layer.groups != 1):
        return None
    return rule(layer, symbols)


def generic_formula(weights) -> Formula:
    """``a·b+c``: one product of dimensions per weight, in literal numbers.

    Example:
    >>> generic_formula([keras.Variable(keras.ops.zeros((3, 2))), keras.Variable(keras.ops.zeros((2,)))])
    Formula(symbols='3·2+2', numbers='3·2+2', value=8)
    """
    terms = ["·".join(str(int(n)) for n in w.shape) or "1" for w in weights]
    text = "+".join(terms) or "0"
    return Formula.of(text)


def formula_for(layer, symbols: Symbols) -> tuple[Formula, str]:
    """The formula of one layer and where it came from: ``"layer"``, ``"builtin"`` or ``"generic"``."""
    if callable(getattr(layer, "param_formula", None)):
        return layer.param_formula(), LAYER
    formula = builtin_formula(layer, symbols)
    if formula is not None:
        return formula, BUILTIN
    return generic_formula(layer.weights), GENERIC
