"""`generate`: token ids from a language model (``application="lm"``), a sequence-to-sequence UniLM
(``"unilm"``) or an encoder-decoder (T5), by greedy search, beam search or sampling, batched, each step one new
position over cached keys and values (`kerasbert.generation.cache`, `kerasbert.generation.seq2seq_cache`), searched
in NumPy (`kerasbert.generation.search`) by bert4keras's rules (`kerasbert.generation.rules`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence

import keras
import numpy as np

from kerasbert.choices import GENERATE_LIMITS
from kerasbert.errors import DataError, ModelError, fail
from kerasbert.generation.cache import CachedModel
from kerasbert.generation.search import Generated, Rules, beam_search, sample
from kerasbert.generation.seq2seq_cache import CachedEncoderDecoder
from kerasbert.generation.state import check_cache
from kerasbert.modeling import families
from kerasbert.text.token_ids import refuse_bools

METHODS = ("greedy", "beam", "sample")
# Family.architecture (a key of kerasbert.modeling.architecture.ARCHITECTURES) -> the decoder that runs it cached
DECODERS: dict[str, type] = {"encoder": CachedModel, "gpt": CachedModel, "t5": CachedEncoderDecoder}
_CACHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its decoder: one trace per model
Decoder = CachedModel | CachedEncoderDecoder


def generate(model: keras.Model, inputs: Sequence[Sequence[int]], method: str = "greedy", *, beams: int | None = None,
             n: int = 1, topk: int | None = None, topp: float | None = None, temperature: float = 1.0,
             seed: int | None = None, end_ids: int | Sequence[int] | None = None, max_length: int = 32,
             min_length: int = 1, min_ends: int = 1, batch_size: int = 16,
             start_id: int | None = None) -> list[Generated]:
    """Generate token ids after each input, as bert4keras's ``AutoRegressiveDecoder`` with ``start_id=None`` does.

    A ``"unilm"`` model reads each input as its source (segment 0, e.g. ``[CLS] ... [SEP]``) and generates the
    target (segment 1) after it; an ``"lm"`` model continues each input (a prompt, segment 0). Inputs of
    different lengths share a batch, each at its own positions. A whole T5 (``model="t5"``, ``"t5.1.1"``,
    ``"mt5.1.1"``) encodes each input once and decodes from its start id, 0 unless ``start_id`` says otherwise, as
    bert4keras's T5 examples (``AutoRegressiveDecoder(start_id=0, ...)``; T5 PEGASUS's starts with ``[CLS]``); the
    ids it gives leave the start out. Greedy and beam search give bert4keras's ids
    (`kerasbert.generation.rules` states the rules); sampling draws with its own seeded generator. A tiny
    temperature is greedy: the scores are computed so that dividing by it cannot overflow.

    The bounds of ``GENERATE_LIMITS`` (`kerasbert.choices`) are checked before anything is allocated: at most 2048
    tokens generated, at most 4096 rows decoded at once (the inputs of a batch times ``beams`` or ``n``), and at
    most 4 GiB of cached keys and values for a batch (rows × layers × positions × hidden × 4 bytes, twice; T5's
    positions are the source's, the start's and the targets', its hidden the heads × head size).

    Args:
        model: TransformerModel. from ``build_transformer_model(..., application="unilm" or "lm")``, a GPT, or a
            whole T5.
        inputs: list of lists of int. the token ids of each input (no padding id 0).
        method: str. ``"greedy"``, ``"beam"`` or ``"sample"``.
        beams: int. the beam count, with ``method="beam"`` (bert4keras's ``beam_search(topk=...)``).
        n: int. sequences drawn per input, with ``method="sample"``.
        topk: int. sampling: draw among the ``topk`` likeliest tokens only.
        topp: float. sampling: draw among the likeliest tokens whose probabilities first reach ``topp``.
        temperature: float. scores and draws read ``softmax(logits / temperature)``.
        seed: int. sampling's generator (``np.random.default_rng(seed)``); None draws anew each call.
        end_ids: int or list of int. the tokens that end a sequence (e.g. ``[SEP]``); None: ``max_length`` tokens.
        max_length: int. the most tokens generated.
        min_length: int. the fewest tokens before a sequence may end (bert4keras's ``minlen``).
        min_ends: int. how many end ids a sequence holds when it ends.
        batch_size: int. inputs decoded at once (each with its beams or samples).
        start_id: int or None. an encoder-decoder's first decoder id (None: 0, T5's); a language model or UniLM
            continues its input and has none.

    Returns:
        one `Generated` per input: its sequences (the one found; or ``n`` drawn) and their summed log-probabilities.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> seq2seq = build_transformer_model("tiny", application="unilm", verbose=False)
    >>> found = generate(seq2seq, [[2, 17, 30, 3], [2, 9, 3]], "beam", beams=3, end_ids=3, max_length=5)
    >>> len(found), all(1 <= len(g.ids[0]) <= 5 for g in found)
    (2, True)
    """
    lm = _started(cached_decoder(model), start_id)
    counts = {"max_length": max_length, "min_length": min_length, "min_ends": min_ends, "n": n,
              "batch_size": batch_size, "beams": 1 if beams is None and method != "beam" else beams,
              "topk": 1 if topk is None else topk}
    _check_options(method, counts, temperature, topp, lm.vocab_size)
    rules = Rules(_end_ids(end_ids, lm.vocab_size), max_length, min_length, min_ends, float(temperature))
    inputs = _checked_inputs(inputs, lm, max_length)
    _check_size(lm, inputs, counts["n"] if method == "sample" else counts["beams"], max_length, batch_size)
    rng = np.random.default_rng(seed)
    found: list[Generated] = []
    for start in range(0, len(inputs), batch_size):
        batch = inputs[start:start + batch_size]
        if method == "sample":
            found += sample(lm, batch, n, topk, topp, rules, rng)
        else:
            found += beam_search(lm, batch, beams if method == "beam" else 1, rules)
    return found


def cached_decoder(model: keras.Model) -> Decoder:
    """The cached decoder of ``model``'s architecture (`DECODERS`): a `CachedModel` for a language model, a
    `CachedEncoderDecoder` for T5; made (and the model checked) once, its compiled step kept with it.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> type(cached_decoder(build_transformer_model("tiny", application="lm", verbose=False))).__name__
    'CachedModel'
    """
    if model not in _CACHED:
        # an encoder of an architecture of its own (DeBERTa) is built as none of lm / unilm: CachedModel refuses it
        _CACHED[model] = DECODERS.get(families.of_model(model).architecture, CachedModel)(model)
    return _CACHED[model]


def _started(lm: Decoder, start_id) -> Decoder:
    """``lm`` starting its decoder with ``start_id`` (None: as it is); a ModelError for a model without a decoder
    start (a language model or UniLM), a DataError for an id outside the vocabulary."""
    if start_id is None:
        return lm
    if not isinstance(lm, CachedEncoderDecoder):
        raise fail(ModelError, "generate: start_id", "None for a language model or UniLM (it continues each input: "
                   "no decoder start)", f"start_id={start_id!r}", "put the first token at the end of each input, or "
                   "generate with an encoder-decoder (T5)")
    if isinstance(start_id, bool) or not isinstance(start_id, int | np.integer) or not 0 <= start_id < lm.vocab_size:
        raise fail(DataError, "generate: start_id", f"a token id in [0, {lm.vocab_size})", repr(start_id),
                   "pass the decoder's first id (T5: 0; T5 PEGASUS: tokenizer.token_to_id('[CLS]'))")
    return lm.starting_with(int(start_id))


def _end_ids(end_ids, vocab_size: int) -> tuple[int, ...]:
    ids = () if end_ids is None else (end_ids,) if isinstance(end_ids, int | np.integer) else tuple(end_ids)
    if any(isinstance(i, bool) or not isinstance(i, int | np.integer) or not 0 <= i < vocab_size for i in ids):
        raise fail(DataError, "generate: end_ids", f"token ids in [0, {vocab_size})", repr(end_ids),
                   "pass the id of [SEP] (tokenizer.token_to_id('[SEP]')) or a list of ids")
    return tuple(int(i) for i in ids)


def _checked_inputs(inputs, lm: Decoder, max_length: int) -> list[list[int]]:
    """``inputs`` as lists of int: at least one, none empty, ids in [1, V), each fitting the positions."""
    if len(inputs) and isinstance(inputs[0], int | np.integer):
        raise fail(DataError, "generate: inputs", "a list of inputs, each a list of token ids", "one list of ids",
                   "for one input pass [token_ids]")
    if not len(inputs):
        raise fail(DataError, "generate: inputs", "at least one input", "an empty batch")
    for i, ids in enumerate(inputs):
        refuse_bools(ids, f"generate: input {i}")  # NumPy would read [True, 5] as [1, 5]
    checked = [np.asarray(ids).ravel().tolist() for ids in inputs]
    for i, ids in enumerate(checked):
        if not ids or any(not isinstance(t, int) or not 0 < t < lm.vocab_size for t in ids):
            raise fail(DataError, f"generate: input {i}", f"token ids in [1, {lm.vocab_size}) (0 is padding)",
                       repr(ids[:8]) + (" ..." if len(ids) > 8 else ""))
    longest = max(range(len(checked)), key=lambda i: len(checked[i]))
    if lm.max_length is not None and max_length >= lm.max_length:
        raise fail(ModelError, "generate: max_length", f"less than the model's {lm.max_length} positions (each "
                   "input takes at least one)", f"max_length {max_length}, more than the positions" if max_length >
                   lm.max_length else f"max_length {max_length}, all of them", "lower max_length")
    if lm.max_length is not None and len(checked[longest]) + max_length > lm.max_length:
        raise fail(ModelError, f"generate: input {longest}", f"at most {lm.max_length - max_length} tokens (the "
                   f"model's {lm.max_length} positions minus max_length {max_length})",
                   f"{len(checked[longest])} tokens", "truncate the inputs (maxlen when encoding) or lower max_length")
    return checked


def _check_options(method, counts: dict, temperature, topp, vocab_size: int) -> None:
    """A DataError (a ModelError for more beams or topk than the vocabulary) unless the options are in range."""
    if method not in METHODS:
        raise fail(DataError, "generate: method", " or ".join(map(repr, METHODS)), repr(method))
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise fail(DataError, f"generate: {name}", "a whole number >= 1", repr(value),
                       'method="beam" needs beams=k' if name == "beams" else "")
    for name, value in (("beams", counts["beams"]), ("topk", counts["topk"])):
        if value > vocab_size:
            raise fail(ModelError, f"generate: {name}", f"at most the vocabulary size, {vocab_size}", str(value))
    if counts["max_length"] > GENERATE_LIMITS["max_length"]:
        raise fail(DataError, "generate: max_length", f"at most {GENERATE_LIMITS['max_length']} tokens (the bound "
                   "of generation)", str(counts["max_length"]), "generate in parts, each continuing the last")
    if counts["max_length"] < counts["min_length"]:
        raise fail(DataError, "generate: max_length", f">= min_length ({counts['min_length']})",
                   str(counts["max_length"]))
    if not isinstance(temperature, int | float) or not 0 < temperature < math.inf or (
            topp is not None and (not isinstance(topp, int | float) or not 0 < topp <= 1)):
        raise fail(DataError, "generate: temperature, topp", "a finite temperature > 0 and topp in (0, 1]",
                   f"temperature={temperature!r}, topp={topp!r}")


def _check_size(lm: Decoder, inputs: list[list[int]], width: int, max_length: int, batch_size: int) -> None:
    """A DataError when a batch decodes more rows than ``GENERATE_LIMITS["rows"]`` (its inputs times ``width``,
    the beams or samples of each), a ModelError when its cache of keys and values outgrows the bound."""
    rows = min(batch_size, len(inputs)) * width
    if rows > GENERATE_LIMITS["rows"]:
        raise fail(DataError, "generate: batch_size x (beams or n)", f"at most {GENERATE_LIMITS['rows']} rows "
                   "decoded at once", f"{min(batch_size, len(inputs))} x {width} = {rows}",
                   "lower n, beams or batch_size")
    shape = lm.cache_shape
    check_cache("generate", rows, shape["layers"], lm.cache_positions(max(map(len, inputs)), max_length),
                shape["hidden_size"], "lower batch_size, beams, n or max_length")
