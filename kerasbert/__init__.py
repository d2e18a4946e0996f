"""kerasbert: BERT in Keras 3 the bert4keras way.

The names below load on first use, so ``import kerasbert`` (and the ``kerasbert`` command's ``--help``) does not
start TensorFlow. The first one used imports `kerasbert.modeling`, which registers every kerasbert layer with
Keras: a ``.keras`` file then loads with ``keras.saving.load_model`` and no ``custom_objects``.

On x86-64, importing kerasbert turns on TensorFlow's oneDNN kernels (`kerasbert.perf.onednn`) unless
``TF_ENABLE_ONEDNN_OPTS`` is already set; ``TF_ENABLE_ONEDNN_OPTS=0`` keeps them off.

Example:
>>> from kerasbert import build_transformer_model, config_of
>>> bert = build_transformer_model("tiny", verbose=False)   # a bundled preset, random weights
>>> bert.get_layer("Transformer-1-FeedForward-Norm").name
'Transformer-1-FeedForward-Norm'
>>> config_of(bert).num_hidden_layers                      # the config the model carries
2
"""

import importlib

from kerasbert.errors import CheckpointError, ConfigError, DataError, KerasBertError, ModelError
from kerasbert.perf.onednn import prefer_onednn

prefer_onednn()  # before anything imports TensorFlow: it reads the switch once, at import

_HOMES = {  # public name -> the module that owns it
    "BertConfig": "kerasbert.modeling.config",
    "config_of": "kerasbert.modeling.config",
    "build_transformer_model": "kerasbert.modeling.models",
    "heads": "kerasbert.modeling.heads",
    "LoadReport": "kerasbert.weights.table",
    "load_checkpoint": "kerasbert.weights.checkpoint",
    "load_google_checkpoint": "kerasbert.weights.google",
    "save_google_checkpoint": "kerasbert.weights.google",
    "save_hf_checkpoint": "kerasbert.weights.hf",
    "convert_checkpoint": "kerasbert.weights.convert",
    "Summary": "kerasbert.annotated.report",
    "annotate": "kerasbert.annotated.collect",
    "summary": "kerasbert.annotated.collect",
    "Tokenizer": "kerasbert.text.tokenizer",
    "SpTokenizer": "kerasbert.text.sentencepiece",
    "load_vocab": "kerasbert.text.tokenizer",
    "embed": "kerasbert.serving.embed",
    "evaluate": "kerasbert.finetune.training",
    "explain": "kerasbert.finetune.explain",
    "export": "kerasbert.serving.export",
    "fill_mask": "kerasbert.serving.fill_mask",
    "generate": "kerasbert.generation.generate",
    "predict": "kerasbert.finetune.training",
    "rerank": "kerasbert.serving.rerank_command",
    "train": "kerasbert.finetune.training",
}


def __getattr__(name: str):
    """Import the module that owns ``name`` on first use (PEP 562) and keep the name here."""
    if name not in _HOMES:
        raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")
    importlib.import_module("kerasbert.modeling")  # registers the layers before any model is built or loaded
    home = importlib.import_module(_HOMES[name])
    value = home if name == "heads" else getattr(home, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [  # the names of _HOMES, and the errors
    "BertConfig", "CheckpointError", "ConfigError", "DataError", "KerasBertError", "LoadReport", "ModelError",
    "SpTokenizer", "Summary", "Tokenizer", "annotate", "build_transformer_model", "config_of", "convert_checkpoint",
    "embed", "evaluate", "explain", "export", "fill_mask", "generate", "heads", "load_checkpoint",
    "load_google_checkpoint", "load_vocab", "predict", "rerank", "save_google_checkpoint", "save_hf_checkpoint",
    "summary", "train",
]
__version__ = "0.1.0"
