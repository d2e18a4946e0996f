"""bert4keras import names, so that porting a bert4keras script is a one-line change.

Replace ``from bert4keras.models import build_transformer_model`` and
``from bert4keras.tokenizers import load_vocab`` with::

    from kerasbert.compat import build_transformer_model, load_vocab

``Tokenizer`` and ``ViterbiDecoder`` join this module with the tokenizer and CRF issues.
"""

from kerasbert.models import build_transformer_model
from kerasbert.tokenizer import load_vocab

__all__ = ["build_transformer_model", "load_vocab"]
