"""Google BERT config + checkpoint -> sentence classifier -> compiled, in a few lines.

Run: python examples/classifier_in_few_lines.py bert_config.json bert_model.ckpt
"""
import sys

# isort: off
from kerasbert import build_transformer_model, heads  # first: it turns oneDNN on before TensorFlow loads
import keras
import numpy as np
# isort: on

config_path, checkpoint_path = sys.argv[1:3]
bert = build_transformer_model(config_path, checkpoint_path)  # logs one line per checkpoint variable
model = heads.cls(bert, num_classes=2, dropout=0.1)  # CLS-token -> CLS-Dropout -> CLS-Dense (softmax)
model.compile(keras.optimizers.Adam(2e-5), **heads.loss_and_metrics(model))
model.summary()
probs = model.predict([np.array([[2, 17, 23, 3], [2, 9, 3, 0]]), np.zeros((2, 4), "int32")], verbose=0)
print(f"probabilities {probs.shape}, rows sum to {probs.sum(-1).round(4).tolist()}")
