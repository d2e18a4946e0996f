"""Runs bert4keras 0.11.5's T5 decoding as its mT5 title example drives it, the oracle of kerasbert's cached T5
decoder. Never imported by the tests.

Usage: python oracle_t5_decode.py JOB.json  (run by `helpers.run_bert4keras`, which sets TF_KERAS=1 and
TF_USE_LEGACY_KERAS=1 before TensorFlow is imported).

JOB.json: {"out": "result.npz", "tasks": [...]}, each task a random checkpoint (`oracle_t5.checkpoint`) then its
decoding: {"config", "model", "checkpoint", "sources", "maxlen", "n", "topk", "sample_seed"} and optionally
"start_id" (the decoder's first id; 0 where absent, T5's; T5 PEGASUS starts with its [CLS]).
Results are stored in the npz as "<task index>/<key>"; ragged sequences padded with -1.
"""

import sys

import numpy as np
from oracle_t5 import checkpoint, main


def decode(task):
    """``AutoRegressiveDecoder(start_id=<start_id or 0>, end_id=..., maxlen=...)`` whose ``predict`` is
    ``self.last_token(decoder).predict([c_encoded, output_ids])``, each source encoded alone by
    ``encoder.predict``, as task_seq2seq_autotitle_csl_mt5.py decodes, the end id chosen from greedy sequences
    decoded without one (`_end_id`). Gives the
    end id, ``beam1`` and ``beam3`` (beam_search's ids, the start left out), ``samples`` (random_sample's ``n``
    sequences per source after ``np.random.seed``, the start left out) and ``sample_probas``, the decoder's
    probabilities along each sample ``[rows, maxlen, V]``."""
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import AutoRegressiveDecoder

    t5 = build_transformer_model(task["config"], task["checkpoint"], model=task["model"], return_keras_model=False)
    encoder, decoder = t5.encoder, t5.decoder

    class AutoTitle(AutoRegressiveDecoder):
        @AutoRegressiveDecoder.wraps(default_rtype="probas")
        def predict(self, inputs, output_ids, states):
            c_encoded = inputs[0]
            return self.last_token(decoder).predict([c_encoded, output_ids], verbose=0)

    encoded = [encoder.predict(np.array([source]), verbose=0)[0] for source in task["sources"]]
    start = task.get("start_id", 0)
    free = AutoTitle(start_id=start, end_id=None, maxlen=task["maxlen"])
    end_id = _end_id([free.beam_search([c], topk=1)[1:].tolist() for c in encoded])
    title = AutoTitle(start_id=start, end_id=end_id, maxlen=task["maxlen"])
    out = {"end_id": np.array(end_id)}
    for topk in (1, 3):
        out[f"beam{topk}"] = _padded([title.beam_search([c], topk=topk)[1:] for c in encoded], task["maxlen"])
    np.random.seed(task["sample_seed"])
    samples = [ids[1:] for c in encoded for ids in title.random_sample([c], task["n"], topk=task["topk"])]
    probas = np.zeros((len(samples), task["maxlen"], decoder.output_shape[-1]), "float32")
    for row, ids in enumerate(samples):
        c = encoded[row // task["n"]]
        probas[row, :len(ids)] = decoder.predict([c[None], np.array([[start, *ids[:-1]]])], verbose=0)[0]
    out.update(samples=_padded(samples, task["maxlen"]), sample_probas=probas)
    return out


def _end_id(greedy: list[list[int]]) -> int:
    """A token of the greedy sequences (decoded without an end) that none starts with, first seen latest in one
    of them: with it as the end id, that sequence ends late and the others at other steps or never."""
    first = {ids[0] for ids in greedy}
    seen = [(ids.index(token), token) for ids in greedy for token in set(ids) if token and token not in first]
    return int(max(seen)[1]) if seen else int(greedy[0][-1])


def _padded(rows, width: int) -> np.ndarray:
    ids = np.full((len(rows), width), -1, "int32")
    for row, values in enumerate(rows):
        ids[row, :len(values)] = values
    return ids


if __name__ == "__main__":
    main(sys.argv[1], {"checkpoint": checkpoint, "decode": decode})
