"""bert4keras's module layout on Keras 3: a bert4keras script ports by renaming its imports.

``bert4keras.X`` -> ``kerasbert.compat.X``, for X in ``models``, ``tokenizers``, ``layers``, ``snippets``,
``optimizers`` and ``backend``::

    # from bert4keras.backend import keras, K, set_gelu
    # from bert4keras.models import build_transformer_model
    # from bert4keras.tokenizers import Tokenizer, load_vocab
    # from bert4keras.snippets import sequence_padding, DataGenerator
    # from bert4keras.optimizers import Adam, extend_with_piecewise_linear_lr
    from kerasbert.compat.backend import keras, K, set_gelu
    from kerasbert.compat.models import build_transformer_model
    from kerasbert.compat.tokenizers import Tokenizer, load_vocab
    from kerasbert.compat.snippets import sequence_padding, DataGenerator
    from kerasbert.compat.optimizers import Adam, extend_with_piecewise_linear_lr

The five names scripts use most are importable from here too::

    from kerasbert.compat import ConditionalRandomField, Tokenizer, ViterbiDecoder, build_transformer_model, load_vocab
"""

from kerasbert.compat.layers import ConditionalRandomField
from kerasbert.compat.models import build_transformer_model
from kerasbert.compat.snippets import ViterbiDecoder
from kerasbert.compat.tokenizers import Tokenizer, load_vocab

__all__ = ["ConditionalRandomField", "Tokenizer", "ViterbiDecoder", "build_transformer_model", "load_vocab"]
