"""kerasbert: BERT in Keras 3 the bert4keras way.

Example:
>>> from kerasbert import build_transformer_model
>>> bert = build_transformer_model("tiny", verbose=False)   # a bundled preset, random weights
>>> bert.get_layer("Transformer-1-FeedForward-Norm").name
'Transformer-1-FeedForward-Norm'
"""

from kerasbert.onednn import prefer_onednn

prefer_onednn()  # before anything imports TensorFlow: it reads the switch once, at import

from kerasbert import heads  # noqa: E402
from kerasbert.checkpoint import LoadReport, load_google_checkpoint, save_google_checkpoint  # noqa: E402
from kerasbert.config import BertConfig  # noqa: E402
from kerasbert.errors import CheckpointError, ConfigError, KerasBertError, ModelError  # noqa: E402
from kerasbert.models import build_transformer_model  # noqa: E402
from kerasbert.summary import Summary, annotate, summary  # noqa: E402
from kerasbert.tokenizer import Tokenizer, load_vocab  # noqa: E402
from kerasbert.training import evaluate, predict, train  # noqa: E402

# `kerasbert.summary` is the function; `kerasbert.summary.annotate(model)` keeps working as well.
summary.annotate = annotate

__all__ = [
    "BertConfig",
    "CheckpointError",
    "ConfigError",
    "KerasBertError",
    "LoadReport",
    "ModelError",
    "Summary",
    "Tokenizer",
    "annotate",
    "build_transformer_model",
    "evaluate",
    "heads",
    "load_google_checkpoint",
    "load_vocab",
    "predict",
    "save_google_checkpoint",
    "summary",
    "train",
]
__version__ = "0.1.0"
