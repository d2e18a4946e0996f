"""Runs bert4keras 0.11.5's masked LM as the fill-mask oracle, the way its basic_masked_language_model.py example
fills masks. Never imported by the tests.

Usage: python oracle_fill_mask.py JOB.json (run by `helpers.run_bert4keras`, with TF_KERAS=1 and
TF_USE_LEGACY_KERAS=1).

JOB.json: {"out", "tasks": [...]}, each task one of:

- ``{"kind": "family_checkpoint", ...}``: a random checkpoint of a family in bert4keras's own names
  (`oracle_bert4keras.family_checkpoint`);
- ``{"kind": "fill_mask", "config", "checkpoint", "model", "vocab", "texts": [{"text", "masked": [character
  indices]}], "top_k"}``: bert4keras's ``Tokenizer`` encodes each whole text, the example's way sets the pieces of
  the masked characters (one piece a Chinese character) to ``[MASK]``, ``build_transformer_model(..., with_mlm=True)``
  predicts the padded batch, and each text's probabilities at its masks (``"probs/<i>"`` ``[masks, V]``), their
  ``top_k`` ids by ``argsort`` (``"top/<i>"``) and its token ids (``"ids/<i>"``) are stored, with the whole batch's
  probabilities (``"all"`` ``[B, S, V]``).
"""

import sys

import numpy as np
from oracle_bert4keras import family_checkpoint, main


def fill_mask(task):
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import sequence_padding
    from bert4keras.tokenizers import Tokenizer

    tokenizer = Tokenizer(task["vocab"], do_lower_case=True)
    model = build_transformer_model(task["config"], task["checkpoint"], model=task["model"], with_mlm=True)
    rows, positions = [], []
    for item in task["texts"]:
        token_ids, _ = tokenizer.encode(item["text"])
        masked = [index + 1 for index in item["masked"]]  # after [CLS]
        for index in masked:
            token_ids[index] = tokenizer._token_mask_id
        rows.append(token_ids)
        positions.append(masked)
    token_ids = sequence_padding(rows)
    probs = model.predict([token_ids, np.zeros_like(token_ids)], verbose=0)
    out = {"all": probs}
    for i, (ids, masked) in enumerate(zip(rows, positions, strict=True)):
        out[f"ids/{i}"] = np.array(ids)
        out[f"probs/{i}"] = probs[i, masked]
        out[f"top/{i}"] = probs[i, masked].argsort(axis=-1)[:, ::-1][:, :task["top_k"]]
    return out


if __name__ == "__main__":
    main(sys.argv[1], {"family_checkpoint": family_checkpoint, "fill_mask": fill_mask})
