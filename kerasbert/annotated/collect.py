"""The annotated summary: every row of ``model.summary()`` with the formula of its parameter count.

``summary(model)`` collects one :class:`Row` per layer in graph order (name, type, output shape,
real ``count_params()``), the formula the layer states for itself (see
:mod:`kerasbert.annotated.formulas`), the check of one against the other, group totals
(embeddings, encoder layers, pooler, heads), trainable counts and a memory estimate, then renders
them as a text table, Markdown or JSON (:mod:`kerasbert.annotated.report`).

Example:
>>> from kerasbert import build_transformer_model
>>> s = summary(build_transformer_model("tiny", verbose=False), print_fn=lambda text: None)
>>> s.total_line()
'Total 23,360 = embeddings 6,272 + 2 × 8,544 (encoder)'
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable

import keras

from kerasbert import layer_names as ln
from kerasbert.annotated.formulas import Symbols, formula_for
from kerasbert.annotated.report import FORMATS, Activations, Group, Memory, Row, Summary, WeightRow
from kerasbert.errors import ModelError, fail
from kerasbert.internals import inbound_nodes, nodes_by_depth

GROUP_ORDER = ln.PARTS  # a row's group is the part of the model its layer's name belongs to
ADAM_BYTES_PER_PARAM = 16  # float32 weight + gradient + Adam's two moments (m, v), 4 bytes each
WEIGHT_DTYPES = {"float32": 4, "bfloat16": 2, "float16": 2}


# ------------------------------------------------------------------------------------------- collecting
def _walk(model, depth: int = 0):
    """``(layer, depth, owner)`` in graph order; a nested model is followed by its own layers, one level deeper."""
    for layer in model.layers:
        yield layer, depth, model
        if isinstance(layer, keras.Model):
            yield from _walk(layer, depth + 1)


def _graph_nodes(model) -> list:
    """The nodes of the model's graph (Keras's own summary reads the same attribute); [] when subclassed."""
    return [node for nodes in nodes_by_depth(model).values() for node in nodes]


def _shape_text(tensor) -> str:
    return "(" + ", ".join("None" if n is None else str(n) for n in tensor.shape) + ")"


def _nodes_of(layer, owner) -> list:
    """The layer's calls in its owner's graph (all its calls when the owner keeps no graph, e.g. Sequential)."""
    nodes = inbound_nodes(layer)
    node_ids = {id(n) for n in _graph_nodes(owner)}
    return [n for n in nodes if not node_ids or id(n) in node_ids] or nodes[:1]


def _output_shape(nodes) -> str:
    if not nodes:
        return "?"
    shapes = [_shape_text(t) for t in keras.tree.flatten(nodes[0].output_tensors)]
    return shapes[0] if len(shapes) == 1 else "[" + ", ".join(shapes) + "]"


def _reuse_notes(nodes, group: str, block: int | None, weighted: bool) -> list[str]:
    """``shared: also called on MLM-Norm -> (None, None, 21128); weights counted once`` for a reused layer;
    ``shared by 12 layers; weights counted once`` for a layer of ALBERT's one block, called once per layer. A layer
    without weights shares nothing: ``called in 12 layers; no weights``, ``also called on ...; no weights``."""
    if len(nodes) < 2:
        return []
    if group == "encoder" and block is None:
        return [f"shared by {len(nodes)} layers; weights counted once" if weighted
                else f"called in {len(nodes)} layers; no weights"]
    calls = []
    for node in nodes[1:]:
        parents = ", ".join(p.operation.name for p in node.parent_nodes) or "?"
        calls.append(f"{parents} -> {_output_shape([node])}")
    if not weighted:
        return [f"also called on {'; '.join(calls)}; no weights"]
    return [f"shared: also called on {'; '.join(calls)}; weights counted once"]


def _group_of(name: str, layer) -> tuple[str, int | None]:
    if isinstance(layer, keras.layers.InputLayer):
        return "inputs", None
    return ln.part_of(name)


def _count_weights(layer, name: str, seen: dict[int, str]) -> tuple[int, list[WeightRow], list[str]]:
    """Params this row adds (weights not seen before), one WeightRow per weight, notes on tied weights."""
    counted, weights, notes = 0, [], []
    keys = {id(w): key for key, w in layer.weights_by_key().items()} if hasattr(layer, "weights_by_key") else {}
    for weight in layer.weights:
        size, key = math.prod(int(n) for n in weight.shape), keys.get(id(weight), weight.name)  # qkv_kernel
        owner = seen.setdefault(id(weight), name)
        tied = owner if owner != name else ""
        weights.append(WeightRow(key, tuple(int(n) for n in weight.shape), size, weight.trainable, tied))
        if tied:
            notes.append(f"{key} is tied to {owner}: counted there")
        else:
            counted += size
    return counted, weights, notes


def _make_row(layer, depth: int, owner, symbols: Symbols, seen: dict[int, str]) -> Row:
    nodes = _nodes_of(layer, owner)
    group, block = _group_of(layer.name, layer)
    params = int(layer.count_params()) if layer.weights else 0
    if isinstance(layer, keras.Model):  # folded row; its layers follow and count the weights
        row = Row(layer.name, type(layer).__name__, _output_shape(nodes), params, 0, None, "nested", group, block,
                  depth, ["nested model: its layers follow and are counted there"])
        return row
    counted, weights, notes = _count_weights(layer, layer.name, seen)
    formula, source = formula_for(layer, symbols)
    if source == "generic" and weights:
        notes.append("generic formula from the weight shapes")
    row = Row(layer.name, type(layer).__name__, _output_shape(nodes), params, counted, formula, source, group,
              block, depth, notes + _reuse_notes(nodes, group, block, bool(weights)), weights, calls=len(nodes))
    if not row.ok:
        row.notes.insert(0, f"MISMATCH: formula gives {formula.value:,}, the layer has {params:,}")
    return row


def _check_built(model) -> None:
    if not isinstance(model, keras.layers.Layer):
        raise fail(ModelError, "summary(model)", "a Keras model", type(model).__name__)
    if not model.built:
        raise fail(ModelError, f"model {model.name!r}", "a built model", "a model that was never built or called",
                   "call it once on a batch, or call model.build(input_shape), before summarizing it")


def collect_rows(model) -> list[Row]:
    """One Row per layer, in graph order, formulas checked against the real counts.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> rows = collect_rows(build_transformer_model("tiny", verbose=False))
    >>> [str(r.formula) for r in rows if r.name == "Embedding-Token"]
    ['V·H = 128·32']
    """
    _check_built(model)
    walked = list(_walk(model))
    symbols = Symbols()
    for layer, _, _ in walked:  # bind V, H, I, P ... from the layers' own formulas first
        if callable(getattr(layer, "param_formula", None)):
            symbols.bind_from(layer.param_formula())
    seen: dict[int, str] = {}
    try:
        return [_make_row(layer, depth, owner, symbols, seen) for layer, depth, owner in walked]
    except ValueError as e:  # count_params() of an unbuilt layer inside a built model
        raise fail(ModelError, f"model {model.name!r}", "every layer built", str(e)) from None


def _groups(rows: list[Row], total: int) -> list[Group]:
    """Totals per group in GROUP_ORDER; the encoder (and T5's decoder) also as ``L × per-layer`` when the layers
    are alike, plus what the stack has outside its layers (T5's final norm), or as one block shared by L layers
    (ALBERT)."""
    sums: dict[str, int] = {}
    blocks: dict[str, dict[int, int]] = {"encoder": {}, "decoder": {}}  # per stack: layer index -> params
    shared_by = 0  # the calls of ALBERT's shared block: L
    for row in rows:
        if row.source == "nested":
            continue
        sums[row.group] = sums.get(row.group, 0) + row.counted
        if row.block is not None:
            blocks[row.group][row.block] = blocks[row.group].get(row.block, 0) + row.counted
        elif row.group == "encoder":
            shared_by = max(shared_by, row.calls)
    backbone = any(name in sums for name in ("embeddings", "encoder"))
    groups = []
    for name in GROUP_ORDER:
        if not sums.get(name):
            continue
        group = Group(name if backbone or name != "head" else "model", sums[name], sums[name] / total if total else 0)
        if name in blocks:
            layers = blocks[name]
            group.blocks, group.shared_by = len(layers), shared_by if name == "encoder" else 0
            group.per_block = next(iter(layers.values())) if len(set(layers.values())) == 1 else None
            group.extra = sums[name] - sum(layers.values()) if layers else 0
        groups.append(group)
    return groups


def _unique_weights(model) -> list:
    seen, unique = set(), []
    for weight in model.weights:
        if id(weight) not in seen:
            seen.add(id(weight))
            unique.append(weight)
    return unique


def _dtype_bytes(dtype: str) -> int:
    dtype = keras.backend.standardize_dtype(dtype)
    bits = re.search(r"\d+", dtype)
    return int(bits.group(0)) // 8 if bits else 1  # bool: one byte


def _elements(shape, batch_size: int, seq_len: int | None, where: str) -> int:
    dims = [batch_size if i == 0 and n is None else n for i, n in enumerate(shape)]
    if None in dims and seq_len is None:
        raise fail(ModelError, "seq_len", f"a sequence length for the None axes of {where} {tuple(shape)}", "None",
                   "pass seq_len (CLI: --seq)")
    return math.prod(seq_len if n is None else int(n) for n in dims)


ACTIVATION_FORMULA = (
    "estimate: Σ over every layer call of its output elements (batch B for the first None axis, sequence S for "
    "the others) × the output dtype's bytes, plus the tensors inside a layer that it reports through "
    "activation_elements(B, S, queries) for each call (attention: qkv, scores and probabilities B·A·S·S, context; "
    "feed-forward: the inner B·S·I before and after the activation; a call whose output has no sequence axis, the "
    "[CLS]-only last block, for one query); framework workspace is not included"
)


def estimate_activations(model, batch_size: int, seq_len: int | None) -> Activations:
    """Activation memory for one forward pass kept for backprop; an estimate (see ACTIVATION_FORMULA).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> estimate_activations(build_transformer_model("tiny", verbose=False), 2, 16).elements > 2 * 16 * 32
    True
    """
    elements = size = 0
    for layer, _, owner in _walk(model):
        if isinstance(layer, keras.Model):
            continue  # its layers are walked next
        report = getattr(layer, "activation_elements", None)
        for node in _nodes_of(layer, owner):
            outputs = keras.tree.flatten(node.output_tensors)
            for tensor in outputs:
                count = _elements(tensor.shape, batch_size, seq_len, layer.name)
                elements += count
                size += count * _dtype_bytes(tensor.dtype)
            if callable(report) and seq_len is not None:
                extra = int(report(batch_size, seq_len, queries=1 if len(outputs[0].shape) == 2 else seq_len))
                elements += extra
                size += extra * _dtype_bytes(layer.compute_dtype)
    return Activations(batch_size, seq_len, elements, size, ACTIVATION_FORMULA)


def _memory(params: int, trainable: int, activations: Activations | None) -> Memory:
    weights = {dtype: params * size for dtype, size in WEIGHT_DTYPES.items()}
    adam = trainable * ADAM_BYTES_PER_PARAM + (params - trainable) * WEIGHT_DTYPES["float32"]
    text = "trainable × 16 B (float32 weight + gradient + Adam m + v) + non-trainable × 4 B"
    return Memory(weights, adam, text, activations)


def collect(model, *, expand: bool = False, batch_size: int | None = None, seq_len: int | None = None) -> Summary:
    """Build the :class:`Summary` of a built model without printing it.

    Args:
        model: keras.Model. a built model (functional, sequential, or subclassed and called once).
        expand: bool. keep per-weight rows for rendering (they are always in ``Row.weights``).
        batch_size: int. batch size of the activation estimate (1 when only seq_len is given).
        seq_len: int. sequence length for the activation estimate's None axes.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> collect(build_transformer_model("tiny", verbose=False)).params
    23360
    """
    rows = collect_rows(model)
    unique = _unique_weights(model)
    params = sum(math.prod(int(n) for n in w.shape) for w in unique)
    trainable = sum(math.prod(int(n) for n in w.shape) for w in unique if w.trainable)
    formula_params = sum(r.formula.value - (r.params - r.counted) for r in rows if r.formula is not None)
    activations = None
    if batch_size is not None or seq_len is not None:
        activations = estimate_activations(model, batch_size or 1, seq_len)
    return Summary(model.name, rows, _groups(rows, params), params, trainable, params - trainable, formula_params,
                   [r.name for r in rows if not r.ok], _memory(params, trainable, activations), expand)


def _print_stdout(text: str) -> None:
    """The default print_fn: the whole rendered summary to standard output, as Keras's summary does."""
    sys.stdout.write(text + "\n")


def summary(
    model,
    *,
    expand: bool = False,
    batch_size: int | None = None,
    seq_len: int | None = None,
    print_fn: Callable[[str], object] | None = None,
    format: str = "text",
) -> Summary:
    """Print the annotated summary of ``model`` and return it as a :class:`Summary`.

    Args:
        model: keras.Model. a built model.
        expand: bool. also show one row per weight (qkv_kernel, qkv_bias, ...).
        batch_size: int. batch size of the activation-memory estimate.
        seq_len: int. sequence length of the activation-memory estimate.
        print_fn: callable. called once with the whole rendered text (default: standard output).
        format: str. ``"text"``, ``"markdown"`` or ``"json"``.

    Returns:
        The :class:`Summary` (rows, groups, totals, memory) that was printed.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> s = summary(build_transformer_model("tiny", verbose=False), format="json", print_fn=lambda text: None)
    >>> s.params, s.mismatches
    (23360, [])
    """
    if format not in FORMATS:
        raise fail(ModelError, "format", f"one of {', '.join(FORMATS)}", repr(format))
    result = collect(model, expand=expand, batch_size=batch_size, seq_len=seq_len)
    (print_fn or _print_stdout)(result.render(format))
    return result


def annotate(model: keras.Model) -> keras.Model:
    """Make this one model's ``model.summary(...)`` print the annotated summary; Keras is not patched.

    It sets an instance attribute that shadows ``Model.summary`` for this object only (other models,
    and the class, keep Keras's summary; ``del model.summary`` undoes it). It accepts the keyword
    arguments of :func:`summary`.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> model = annotate(build_transformer_model("tiny", verbose=False))
    >>> model.summary(print_fn=lambda text: None).params
    23360
    """
    if not isinstance(model, keras.Model):
        raise fail(ModelError, "annotate(model)", "a keras.Model", type(model).__name__)
    model.summary = functools.partial(summary, model)
    return model
