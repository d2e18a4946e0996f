"""bert4keras import names, so that porting a bert4keras script is a one-line change.

Replace ``from bert4keras.models import build_transformer_model`` and
``from bert4keras.tokenizers import Tokenizer, load_vocab`` with::

    from kerasbert.compat import build_transformer_model, Tokenizer, load_vocab

and ``from bert4keras.snippets import ViterbiDecoder`` / ``from bert4keras.layers import
ConditionalRandomField`` with the same names from here.
"""

from kerasbert.modeling.crf import ConditionalRandomField, ViterbiDecoder
from kerasbert.modeling.models import build_transformer_model
from kerasbert.text.tokenizer import Tokenizer, load_vocab

__all__ = ["ConditionalRandomField", "Tokenizer", "ViterbiDecoder", "build_transformer_model", "load_vocab"]
