"""Build the bundled tiny BERT, save it as a Google checkpoint, load that checkpoint back, predict.

Runs offline in a few seconds: python examples/quickstart.py [OUT_FOLDER]
"""

import os
import sys
import tempfile

import numpy as np

from kerasbert import build_transformer_model, save_google_checkpoint
from kerasbert.modeling.config import BertConfig

out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="kerasbert-quickstart-")
os.makedirs(out, exist_ok=True)

# 1. A tiny BERT from the bundled preset (random weights), written as a Google TF1 checkpoint.
config = BertConfig.from_preset("tiny")
config.to_json(os.path.join(out, "bert_config.json"))
original = build_transformer_model(os.path.join(out, "bert_config.json"), with_pool=True, with_mlm=True)
save_google_checkpoint(original, os.path.join(out, "bert_model.ckpt"))

# 2. The bert4keras way: config + checkpoint -> functional Keras model (logs one line per variable).
bert = build_transformer_model(os.path.join(out, "bert_config.json"), os.path.join(out, "bert_model.ckpt"),
                               with_pool=True, with_mlm=True)

# 3. Predict on a padded batch: [CLS] ... [SEP] with two segments.
token_ids = np.array([[2, 17, 23, 5, 3, 0, 0], [2, 9, 3, 44, 45, 46, 3]])
segment_ids = np.array([[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1, 1]])
pooled, mlm_probs = bert.predict([token_ids, segment_ids], verbose=0)
expected = original.predict([token_ids, segment_ids], verbose=0)
same = all(np.allclose(a, b) for a, b in zip(expected, [pooled, mlm_probs], strict=True))
print(f"checkpoint: {out}/bert_model.ckpt")
print(f"pooled output {pooled.shape}, MLM probabilities {mlm_probs.shape}, rows sum to {mlm_probs.sum(-1).mean():.4f}")
print(f"most likely token at each position of row 0: {mlm_probs[0].argmax(-1).tolist()}")
print(f"reloaded model reproduces the original: {same}")
