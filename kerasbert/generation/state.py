"""The state a next-token scorer keeps between steps, in NumPy or in tensors: `Cache`, `padded` sources, and
`check_cache`, the bound on the cache's size checked before a search allocates it.

Nothing here imports TensorFlow or Keras, so a decoder exported to ONNX or OpenVINO
(`kerasbert.serving.portable_decoder`) searches without them; a `kerasbert.generation.cache.CachedModel` keeps
tensors in the same `Cache`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kerasbert.choices import GENERATE_LIMITS
from kerasbert.errors import KerasBertError, ModelError, fail

__all__ = ["LANGUAGE_MODEL_IO", "Cache", "ContextCache", "DecoderIO", "cache_bytes", "check_bounds", "check_cache",
           "padded"]


@dataclasses.dataclass(frozen=True)
class Cache:
    """The keys and values of every layer, and where each row stands.

    Args:
        keys: tuple of ``[N, A, S + T, d]``, one per layer (ALBERT: one per use of its shared block).
        values: the same, values.
        lengths: ``[N]`` int32, each row's source length.
        source_width: int. S, the slots of the sources; target token t of every row lands in slot S + t.
        written: int. target tokens written so far.
    """

    keys: tuple
    values: tuple
    lengths: object
    source_width: int
    written: int = 0

    @property
    def rows(self) -> int:
        return int(self.lengths.shape[0])

    def take(self, rows: np.ndarray) -> Cache:
        """The cache of ``rows`` (indices into these rows, repeats allowed): one row per beam or sample. Every
        array field (each tensor of a tuple field) is taken; tensors stay tensors, NumPy arrays (an exported
        decoder's cache) stay NumPy arrays."""
        if isinstance(self.lengths, np.ndarray):
            take, rows = np.take, np.asarray(rows, "int32")
        else:
            from keras import ops

            take, rows = ops.take, ops.convert_to_tensor(np.asarray(rows, "int32"))

        def taken(value):
            if isinstance(value, tuple):
                return tuple(take(item, rows, axis=0) for item in value)
            return value if value is None or isinstance(value, int | np.integer) else take(value, rows, axis=0)

        return dataclasses.replace(self, **{field.name: taken(getattr(self, field.name))
                                            for field in dataclasses.fields(self)})

    def check_room(self, what: str) -> None:
        """A ModelError, blaming ``what``, unless a slot is left for one more target token."""
        slots = int(self.keys[0].shape[2])
        if self.source_width + self.written >= slots:
            raise fail(ModelError, what, f"at most {slots - self.source_width} target tokens (start's max_length)",
                       f"token {self.written + 1}")


@dataclasses.dataclass(frozen=True)
class ContextCache(Cache):
    """An encoder-decoder's cache: the decoder's self-attention keys and values (`Cache`'s, slot 0 the start token,
    target token t in slot 1 + t: ``source_width`` 1), and what its cross-attention reads of the sources.

    Args:
        context_keys: tuple of ``[N, A, S, d]``, one per layer: the cross-attention's keys of the encoder's output.
        context_values: the same, values.
        seen: ``[N, 1 + T]`` bool, each decoder slot visible as a key (id 0, T5's padding, is hidden after slot 0).
    """

    context_keys: tuple = ()
    context_values: tuple = ()
    seen: object = None


LAYERED = ("keys", "values", "context_keys", "context_values")  # the cache's fields that hold one array a layer


@dataclasses.dataclass(frozen=True)
class DecoderIO:
    """What a cached decoder's two graphs take and give, by name: the prefill and the step that reorders its rows
    first, as its ``functions()`` returns them. A search calls them by these names (`kerasbert.generation.graph_search`
    in TensorFlow, an exported decoder in its runtime), so the same search runs any decoder's cache.

    The names are the cache's fields (`Cache`, `ContextCache`: those of `LAYERED` hold one array a layer) and the
    search's own values: ``token_ids``, ``max_length``, ``tokens`` (one a row), ``parents`` (each row's beam before
    the step), and the decoder's ``constants``.

    Args:
        prefill: tuple of str. the prefill's inputs, in order.
        state: tuple of str. the cache's fields the prefill gives, in order, before the log-probabilities.
        step: tuple of str. the step's inputs, in order.
        carried: tuple of str. the fields the step gives anew, in order, before the log-probabilities; the rest of
            ``state`` stays as the prefill gave it.
        source_width: int or None. the cache's ``source_width`` (the slot of the first target token); None: the
            width of the padded sources.
        constants: dict. inputs the decoder fixes (``{name: int}``), fed as int32 scalars.

    Example:
    >>> LANGUAGE_MODEL_IO.names(2)["step"]["inputs"]
    ['keys_0', 'keys_1', 'values_0', 'values_1', 'tokens', 'lengths', 'source_width', 'written', 'parents']
    >>> LANGUAGE_MODEL_IO.grouped(("keys", "values"), ["k0", "k1", "v0", "v1"], layers=2)
    {'keys': ('k0', 'k1'), 'values': ('v0', 'v1')}
    """

    prefill: tuple[str, ...]
    state: tuple[str, ...]
    step: tuple[str, ...]
    carried: tuple[str, ...]
    source_width: int | None = None
    constants: dict = dataclasses.field(default_factory=dict)

    def names(self, layers: int) -> dict[str, dict[str, list[str]]]:
        """The flat names of each graph's inputs and outputs (``tf.nest``'s order: a layered field's arrays one a
        layer, ``keys_0``, ``keys_1``, ...), the step's outputs prefixed ``new_``; ``logp`` last."""
        def flat(fields, prefix=""):
            return [prefix + (f"{name}_{i}" if name in LAYERED else name) for name in fields
                    for i in range(layers if name in LAYERED else 1)]

        return {"prefill": {"inputs": flat(self.prefill), "outputs": [*flat(self.state), "logp"]},
                "step": {"inputs": flat(self.step), "outputs": [*flat(self.carried, "new_"), "logp"]}}

    @staticmethod
    def flat(fields: tuple[str, ...], values: dict) -> list:
        """``values`` of ``fields`` in order, a layered field's tuple spread out."""
        return [item for name in fields for item in (values[name] if name in LAYERED else (values[name],))]

    @staticmethod
    def grouped(fields: tuple[str, ...], arrays, layers: int) -> dict:
        """The flat ``arrays`` of ``fields`` (what a graph gives, before ``logp``) as ``{field: array or tuple}``."""
        arrays, out = list(arrays), {}
        for name in fields:
            count = layers if name in LAYERED else 1
            out[name], arrays = (tuple(arrays[:count]) if name in LAYERED else arrays[0]), arrays[count:]
        return out

    def cache(self, state: dict, lengths, source_width: int) -> Cache:
        """The cache of a prefill's ``state`` (`grouped`), a `ContextCache` where it holds one's fields."""
        kind = Cache if set(state) <= {field.name for field in dataclasses.fields(Cache)} else ContextCache
        width = source_width if self.source_width is None else self.source_width
        return kind(**state, lengths=lengths, source_width=width)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict | None) -> DecoderIO:
        """What `to_json` wrote; `LANGUAGE_MODEL_IO` for None (an export written before it was recorded)."""
        if values is None:
            return LANGUAGE_MODEL_IO
        return cls(**{key: tuple(value) if isinstance(value, list) else value for key, value in values.items()})


def padded(sources: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """``sources`` right-padded with 0 to the longest, ``[B, S]`` int32, and their lengths ``[B]`` int32.

    Example:
    >>> token_ids, lengths = padded([[2, 7, 3], [2, 3]])
    >>> token_ids.tolist(), lengths.tolist()
    ([[2, 7, 3], [2, 3, 0]], [3, 2])
    """
    lengths = np.array([len(source) for source in sources], dtype="int32")
    token_ids = np.zeros((len(sources), lengths.max()), dtype="int32")
    for row, source in enumerate(sources):
        token_ids[row, :len(source)] = source
    return token_ids, lengths


def cache_bytes(rows: int, layers: int, positions: int, hidden: int) -> int:
    """The bytes of the keys and values a search keeps: ``rows × layers × positions × hidden`` float32 numbers, for
    the keys and again for the values (in Python integers, which do not overflow).

    Example:
    >>> cache_bytes(rows=4, layers=12, positions=512, hidden=768)
    150994944
    """
    return 2 * rows * layers * positions * hidden * 4


def check_cache(what: str, rows: int, layers: int, positions: int, hidden: int, hint: str,
                cls: type[KerasBertError] = ModelError) -> None:
    """A ``cls`` error, blaming ``what``, when the cache of a search is larger than
    ``GENERATE_LIMITS["cache_bytes"]`` (`kerasbert.choices`); ``hint`` says what to lower.

    Example:
    >>> check_cache("generate", rows=64, layers=12, positions=512, hidden=768, hint="lower batch_size")
    >>> check_cache("generate", rows=10**6, layers=12, positions=512, hidden=768, hint="lower n")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ModelError: generate: expected a cache of keys and values of at most 4,294,967,296 bytes, \
found 1000000 rows x 12 layers x 512 positions x 768 hidden x 4 bytes x 2 = 37,748,736,000,000 bytes. lower n
    """
    size, limit = cache_bytes(rows, layers, positions, hidden), GENERATE_LIMITS["cache_bytes"]
    if size > limit:
        raise fail(cls, what, f"a cache of keys and values of at most {limit:,} bytes",
                   f"{rows} rows x {layers} layers x {positions} positions x {hidden} hidden x 4 bytes x 2 = "
                   f"{size:,} bytes", hint)


def check_bounds(cls: type[KerasBertError], where: str, lengths: dict[str, object], widths: dict[str, object],
                 hint: str) -> None:
    """A ``cls`` error naming ``where`` and the option unless each of ``lengths`` (tokens generated) is a whole
    number from 1 to ``GENERATE_LIMITS["max_length"]`` and each of ``widths`` (beams or samples of one input) one
    from 1 to ``GENERATE_LIMITS["rows"]``: the options a saved run or export gives a search.

    Example:
    >>> check_bounds(ModelError, "export ", {"target_maxlen": 10**6}, {"beams": 4}, "train again")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ModelError: export target_maxlen: expected a whole number from 1 to 2048 (the bound of \
generation), found 1000000. train again
    """
    bounds = [(name, value, GENERATE_LIMITS["max_length"]) for name, value in lengths.items()]
    bounds += [(name, value, GENERATE_LIMITS["rows"]) for name, value in widths.items()]
    for name, value, most in bounds:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 1 <= value <= most:
            raise fail(cls, where + name, f"a whole number from 1 to {most} (the bound of generation)", repr(value),
                       hint)


LANGUAGE_MODEL_IO = DecoderIO(prefill=("token_ids", "lengths", "max_length"), state=("keys", "values"),
                              step=("keys", "values", "tokens", "lengths", "source_width", "written", "parents"),
                              carried=("keys", "values"))  # `kerasbert.generation.cache.CachedModel`'s graphs
