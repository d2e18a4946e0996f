"""bert4keras 0.11.5's ``AutoRegressiveDecoder``: beam search and sampling over a user's next-token ``predict``.

A subclass writes ``predict(self, inputs, output_ids, states)`` under the `AutoRegressiveDecoder.wraps`
decorator; the decoder feeds it the inputs (one example, repeated per beam or sample) and the ids chosen so far,
and extends them one token per step. Only NumPy runs here: ``predict`` may call any model, and `last_token`
turns a Keras model with a ``[batch, length, vocab]`` output into one that returns the last position's scores.
The search rules (the beam step, the end rule, the sampling candidates) are `kerasbert.generation.rules`'; this
module keeps bert4keras's interface and its draws from NumPy's global generator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import keras
import numpy as np

from kerasbert.errors import DataError, ModelError, fail
from kerasbert.generation.rules import NEVER, NUMPY, Rules, extend, first_state, log_softmax_at, outcome, top_candidates
from kerasbert.modeling.layers import TakeToken

RTYPES = ("probas", "logits")
LOG_FLOOR = 1e-12  # added before the log so a probability of 0 scores log(1e-12), not -inf


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, the largest logit subtracted first so ``exp`` cannot overflow."""
    exps = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)


def _as_probas(scores: np.ndarray, default_rtype: str, temperature: float) -> np.ndarray:
    """Next-token probabilities at ``temperature`` from what ``predict`` returned (logits or probabilities).

    Probabilities at temperature 1 pass unchanged (unnormalized ones too: `random_sample` normalizes). Otherwise
    probabilities are raised to ``1 / T`` and normalized, as the softmax of their logs at ``T``: computed that way,
    a tiny temperature keeps the likeliest token (greedy) instead of turning every probability into 0 and NaN.
    """
    if temperature == 1:
        return _softmax(scores) if default_rtype == "logits" else scores
    with np.errstate(divide="ignore"):  # a probability of 0 logs to -inf, and stays 0
        logits = scores if default_rtype == "logits" else np.log(scores)
    return np.exp(log_softmax_at(logits, temperature)).astype(np.result_type(scores.dtype, np.float32))


def _check_count(what: str, value, hint: str) -> None:
    """Raise `DataError` unless ``value`` is a whole number of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise fail(DataError, what, "a whole number >= 1", repr(value), hint)


def _check_call(rtype: str, temperature: float) -> None:
    """Raise `DataError` unless ``rtype`` is one of `RTYPES` and ``temperature`` is positive."""
    if rtype not in RTYPES:
        raise fail(DataError, "AutoRegressiveDecoder.predict: rtype", '"probas" or "logits"', repr(rtype))
    if not temperature > 0:
        raise fail(DataError, "AutoRegressiveDecoder: temperature", "a number > 0", repr(temperature),
                   "1 keeps the model's distribution, below 1 sharpens it, above 1 flattens it")


def _check_scores(method: str, scores: np.ndarray, topk: int | None) -> None:
    """Raise `ModelError` unless ``predict``'s scores are ``(rows, vocab_size)`` with ``topk`` at most that width."""
    if scores.ndim != 2:
        raise fail(ModelError, f"{method}: predict's scores", "shape (rows, vocab_size)", f"shape {scores.shape}",
                   "return the last position's scores, e.g. self.last_token(model).predict(...)")
    if topk is not None and topk > scores.shape[1]:
        raise fail(ModelError, f"{method}: topk", f"at most the vocabulary size, {scores.shape[1]} (the width of "
                   "predict's scores)", f"topk={topk}", f"pass topk <= {scores.shape[1]}")


def _draw(probas: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    """One token id per row, ``(rows, 1)``: one ``np.random.choice(columns, p=row)`` call per row, in order."""
    picks = [np.random.choice(len(row), p=row) for row in probas]
    return np.take_along_axis(token_ids, np.array(picks).reshape(-1, 1), axis=1)


class AutoRegressiveDecoder:
    """Beam search and random sampling for a next-token model, with bert4keras 0.11.5's interface and results.

    Subclass it and define ``predict(self, inputs, output_ids, states)`` under `wraps`: given the inputs (a
    list of arrays, one row per live beam or sample) and ``output_ids`` (``(rows, steps)``), it returns the
    next token's scores, ``(rows, vocab_size)``. Sequences start as ``[start_id]`` (empty when ``start_id`` is
    None) and end once their last token is ``end_id`` and they hold at least ``min_ends`` of them, provided
    they are at least ``minlen`` long (``start_id`` included); decoding stops after ``maxlen`` tokens. The
    returned ids include ``start_id``. ``minlen`` only delays the end: a shorter sequence may still hold
    ``end_id`` and then decodes on past it. Beam search is deterministic; sampling draws from NumPy's global
    generator exactly as bert4keras does, so both give the same ids after the same ``np.random.seed``.

    Args:
        start_id: int or None. the first token of every sequence; None starts them empty.
        end_id: int or None. the token that ends a sequence; None decodes ``maxlen`` tokens always.
        maxlen: int. the most tokens decoded.
        minlen: int. the shortest sequence (``start_id`` included) that may end.

    Example:
    >>> class Cycle(AutoRegressiveDecoder):
    ...     @AutoRegressiveDecoder.wraps(default_rtype="logits")
    ...     def predict(self, inputs, output_ids, states):
    ...         return np.eye(4)[(output_ids[:, -1] + 1) % 4] * 5  # token t is likely followed by t + 1
    >>> Cycle(start_id=0, end_id=3, maxlen=10).beam_search([[7]], topk=2).tolist()
    [0, 1, 2, 3]
    """

    def __init__(self, start_id: int | None, end_id: int | None, maxlen: int, minlen: int = 1):
        for name, token_id in (("start_id", start_id), ("end_id", end_id)):
            if token_id is not None and (isinstance(token_id, bool) or not isinstance(token_id, int | np.integer)):
                raise fail(DataError, f"AutoRegressiveDecoder: {name}", "one token id (an int) or None",
                           repr(token_id), "to end on any of several ids, map them to end_id inside predict"
                           if name == "end_id" else "")
        if maxlen < minlen:
            raise fail(DataError, "AutoRegressiveDecoder: maxlen", f">= minlen ({minlen})", f"maxlen={maxlen}",
                       "maxlen is the most tokens decoded and minlen the shortest sequence that may end; raise "
                       "maxlen or lower minlen")
        self.start_id, self.end_id, self.maxlen, self.minlen = start_id, end_id, maxlen, minlen
        self.models: dict = {}  # model -> its last-token model, built once by `last_token`
        if start_id is None:
            self.first_output_ids = np.empty((1, 0), dtype=int)
        else:
            self.first_output_ids = np.array([[start_id]])

    @staticmethod
    def wraps(default_rtype: str = "probas", use_states: bool = False) -> Callable:
        """Decorate a subclass's ``predict(self, inputs, output_ids, states)`` into the ``predict`` the search
        methods call: ``predict(inputs, output_ids, states, temperature=1, rtype=default_rtype)``, which returns
        ``(scores, states)``.

        The decorated ``predict`` returns ``default_rtype`` scores: ``"logits"`` (before the softmax) or
        ``"probas"`` (probabilities), and with ``use_states`` a pair ``(scores, states)``, the states handed to
        its next call as they are (the decoder neither reorders nor filters them as beams move or samples
        end); without it ``states`` stays None. Logits are divided by ``temperature`` before the softmax;
        probabilities are raised to ``1 / temperature`` and renormalized. ``rtype="probas"`` returns the
        probabilities, ``rtype="logits"`` their log (plus 1e-12), whichever ``default_rtype`` was: the
        decorated ``predict`` never returns the raw logits.

        Args:
            default_rtype: str. what the decorated function returns, ``"probas"`` or ``"logits"``.
            use_states: bool. whether it returns ``(scores, states)``.

        Example:
        >>> class Uniform(AutoRegressiveDecoder):
        ...     @AutoRegressiveDecoder.wraps(default_rtype="logits")
        ...     def predict(self, inputs, output_ids, states):
        ...         return np.zeros((len(output_ids), 4))
        >>> Uniform(0, 3, 5).predict([[1]], np.array([[0]]), None, rtype="probas")[0].tolist()
        [[0.25, 0.25, 0.25, 0.25]]
        """
        if default_rtype not in RTYPES:
            raise fail(DataError, "AutoRegressiveDecoder.wraps: default_rtype", '"probas" or "logits"',
                       repr(default_rtype))

        def decorate(predict: Callable) -> Callable:
            @functools.wraps(predict)
            def scored(self, inputs, output_ids, states, temperature=1, rtype=default_rtype):
                _check_call(rtype, temperature)
                result = predict(self, inputs, output_ids, states)
                if use_states and not (isinstance(result, tuple | list) and len(result) == 2):
                    raise fail(ModelError, "AutoRegressiveDecoder.predict", "(scores, states) with use_states=True",
                               type(result).__name__, "return the scores and the states for the next call")
                scores, states = result if use_states else (result, None)
                probas = _as_probas(np.asarray(scores), default_rtype, temperature)
                return (probas if rtype == "probas" else np.log(probas + LOG_FLOOR)), states

            return scored

        return decorate

    def last_token(self, model: keras.Model) -> keras.Model:
        """A model with ``model``'s inputs whose outputs are ``model``'s at the last position (``x[:, -1]``),
        built once per model and kept in ``self.models``.

        Args:
            model: keras.Model. a functional model, e.g. a kerasbert model with an MLM head, whose outputs
                have a length axis second (``[batch, length, vocab_size]``).

        Example:
        >>> import keras
        >>> x = keras.Input((None,))
        >>> model = keras.Model(x, keras.layers.Embedding(10, 4)(x))
        >>> tuple(AutoRegressiveDecoder(0, 1, 5).last_token(model)(np.zeros((2, 3))).shape)
        (2, 4)
        """
        if model not in self.models:
            # the inputs and outputs keep the structure they were built with (one tensor, a list, a dict)
            last = keras.tree.map_structure(lambda output: TakeToken(-1)(output), model.output)
            self.models[model] = keras.Model(model.input, last)
        return self.models[model]

    def predict(self, inputs, output_ids, states=None, temperature=1, rtype="probas"):
        """The next token's scores; a subclass defines ``predict(self, inputs, output_ids, states)`` under
        `wraps`, which adds ``temperature`` and ``rtype``."""
        raise NotImplementedError("define predict(self, inputs, output_ids, states) under AutoRegressiveDecoder.wraps")

    def _rules(self, min_ends: int) -> Rules:
        """The search rules: ``end_id`` (none: never ends), ``maxlen`` tokens after ``start_id``, ``minlen`` tokens
        (``start_id`` included) before a sequence may end."""
        return Rules(() if self.end_id is None else (self.end_id,), self.maxlen, self.minlen, min_ends)

    def beam_search(self, inputs: Sequence, topk: int, states=None, temperature: float = 1,
                    min_ends: int = 1) -> np.ndarray:
        """The likeliest sequence (the largest sum of log-probabilities) that ``topk`` beams find.

        At each step, every beam extended by every token is scored and the ``topk`` best are kept (deterministic;
        equal scores in the order of beam, then token, where bert4keras leaves them to ``np.argpartition``).
        From ``minlen`` on, the search returns the best beam once it has ended; beams that end but are not the
        best are dropped, and the beam count shrinks with them. After ``maxlen`` steps it returns the best beam.

        Args:
            inputs: list. the model's inputs for one example (e.g. ``[token_ids, segment_ids]``), each repeated
                once per beam.
            topk: int. the beam size, at most the vocabulary size.
            states: the first states handed to ``predict`` (with ``use_states``).
            temperature: float. applied by ``predict`` (see `wraps`).
            min_ends: int. how many ``end_id`` tokens end a sequence.

        Returns:
            the token ids, ``start_id`` first, as a 1-D array.
        """
        _check_count("beam_search: topk", topk, "topk is the beam size; 1 is greedy search")
        rules, start = self._rules(min_ends), self.first_output_ids.shape[1]
        state = first_state(NUMPY, 1, topk, start + self.maxlen)  # start_id, when given, written in every beam
        state = state._replace(written=start, ids=state.ids + np.pad(self.first_output_ids, [(0, 0), (0, self.maxlen)]))
        # the same arrays at every step, as in bert4keras: a predict that marks its inputs in place (reading
        # comprehension's -1 on a passage without an answer) finds the marks at the next steps
        arrays = [np.array([x]) for x in inputs]
        for step in range(self.maxlen):
            live = state.scores[0] > NEVER  # predict sees the live beams only, as in bert4keras
            output_ids = state.ids[0, live, :state.written]
            if step == 1:  # one row for the example, then one per beam
                arrays = [np.repeat(x, topk, axis=0) for x in arrays]
            scores, states = self.predict([x[:len(output_ids)] for x in arrays], output_ids, states, temperature,
                                          "logits")
            scores = np.asarray(scores)
            _check_scores("beam_search", scores, topk)
            logp = np.zeros((topk, scores.shape[1]))
            logp[live] = scores
            state = extend(NUMPY, state, logp, rules)[0]
            if state.done[0]:
                break
        ids, length, _ = outcome(NUMPY, state)
        return ids[0, :length[0]]

    def random_sample(self, inputs: Sequence, n: int, topk: int | None = None, topp: float | None = None,
                      states=None, temperature: float = 1, min_ends: int = 1) -> list[np.ndarray]:
        """``n`` sequences, each token drawn from ``predict``'s probabilities with NumPy's global generator.

        The draws are bert4keras's: one ``np.random.choice`` per live sample per step, in row order, over the
        same candidates in the same order, so after the same ``np.random.seed`` both give the same ids.

        Args:
            inputs: list. the model's inputs for one example, each repeated once per sample.
            n: int. how many sequences.
            topk: int or None. draw among each step's ``topk`` likeliest tokens only.
            topp: float or None. draw among the likeliest tokens whose probabilities first reach ``topp``
                (after ``topk``, when both are given).
            states: the first states handed to ``predict`` (with ``use_states``).
            temperature: float. applied by ``predict`` (see `wraps`).
            min_ends: int. how many ``end_id`` tokens end a sequence.

        Returns:
            a list of ``n`` 1-D arrays of token ids (``start_id`` first): the ended sequences in the order they
            ended, then those cut at ``maxlen``.
        """
        _check_count("random_sample: n", n, "n is how many sequences to sample")
        if topk is not None:
            _check_count("random_sample: topk", topk, "pass topk=None to draw from the whole vocabulary")
        inputs, rules = [np.array([x]) for x in inputs], self._rules(min_ends)
        output_ids, results = self.first_output_ids, []
        for step in range(self.maxlen):
            probas, states = self.predict(inputs, output_ids, states, temperature, "probas")
            probas = np.asarray(probas)
            _check_scores("random_sample", probas, topk)
            probas = probas / probas.sum(axis=1, keepdims=True)
            if step == 0:  # one prediction for the example, then one row per sample
                probas, output_ids = np.repeat(probas, n, axis=0), np.repeat(output_ids, n, axis=0)
                inputs = [np.repeat(x, n, axis=0) for x in inputs]
            output_ids = np.concatenate([output_ids, _draw(*top_candidates(probas, topk, topp))], axis=1)
            finished = rules.finished(output_ids)
            results.extend(output_ids[finished])
            inputs, output_ids = [x[~finished] for x in inputs], output_ids[~finished]
            if not len(output_ids):
                break
        return results + list(output_ids)
