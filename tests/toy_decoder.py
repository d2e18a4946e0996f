"""A toy next-token scorer in plain NumPy, wrapped in kerasbert's and in bert4keras's AutoRegressiveDecoder.

The decoder tests and the bert4keras oracle (tests/oracle_bert4keras.py) both import it, so the two decoders
search the same scores. The scores depend on the input, the last output id, the length and (with states) a
step counter, and ending grows likelier with length, so sequences end at different steps. Its tables come from
their own generator: building them leaves NumPy's global seed, which sampling reads, untouched.
"""

from __future__ import annotations

import numpy as np

VOCAB, START, END = 20, 1, 2
_TABLES = np.random.default_rng(7)
TRANSITION = _TABLES.normal(0.0, 2.0, (VOCAB, VOCAB))  # logit of the next id given the last
CONTEXT = _TABLES.normal(0.0, 1.0, (VOCAB, VOCAB))  # shift of the logits given the input's id sum (mod VOCAB)


def toy_logits(inputs, output_ids: np.ndarray, states=None) -> np.ndarray:
    """Next-token logits ``(rows, VOCAB)`` in float32, as a model gives them; ``states`` (a step count) lowers
    the end's logit early on."""
    rows, length = output_ids.shape
    last = output_ids[:, -1] if length else np.zeros(rows, dtype=int)
    logits = TRANSITION[last] + CONTEXT[np.asarray(inputs[0]).sum(axis=1) % VOCAB]
    logits[:, END] += 0.7 * length - 2.0  # ending grows likelier with length
    if states is not None:
        logits[:, END] -= 3.0 / (1 + states)
    return logits.astype(np.float32)


def toy_probas(inputs, output_ids: np.ndarray, states=None) -> np.ndarray:
    """The softmax of `toy_logits`, in float32."""
    logits = toy_logits(inputs, output_ids, states).astype(np.float64)
    exps = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (exps / exps.sum(axis=1, keepdims=True)).astype(np.float32)


def decoder_class(base: type, rtype: str = "logits", use_states: bool = False) -> type:
    """A subclass of ``base`` (an AutoRegressiveDecoder) whose ``predict`` scores with the toy, returning
    ``rtype`` scores and, with ``use_states``, the states plus one."""

    class Toy(base):
        @base.wraps(default_rtype=rtype, use_states=use_states)
        def predict(self, inputs, output_ids, states):
            score = toy_logits if rtype == "logits" else toy_probas
            scores = score(inputs, output_ids, states if use_states else None)
            return (scores, (states or 0) + 1) if use_states else scores

    return Toy


def decode(base: type, case: dict) -> list[list[int]]:
    """Run one case with ``base``'s decoder: beam search (one sequence) or random sampling after
    ``np.random.seed(case["seed"])``; every sequence as a list of ids."""
    decoder = decoder_class(base, case["rtype"], case.get("use_states", False))(
        case.get("start_id", START), case.get("end_id", END), case["maxlen"], case.get("minlen", 1))
    states = 0 if case.get("use_states") else None
    if case["method"] == "beam":
        return [decoder.beam_search(case["inputs"], states=states, **case["kwargs"]).tolist()]
    np.random.seed(case["seed"])
    return [ids.tolist() for ids in decoder.random_sample(case["inputs"], states=states, **case["kwargs"])]
