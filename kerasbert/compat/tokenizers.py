"""``bert4keras.tokenizers`` -> ``kerasbert.compat.tokenizers``: `Tokenizer` and `load_vocab`, as
`kerasbert.text.tokenizer` defines them."""

from kerasbert.text.tokenizer import Tokenizer, load_vocab

__all__ = ["Tokenizer", "load_vocab"]
