"""kerasbert.compat: bert4keras import names; load_vocab equal to bert4keras's."""

from __future__ import annotations

import numpy as np
import pytest

from kerasbert import ConfigError
from kerasbert.compat import build_transformer_model, load_vocab

import helpers

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "的", "中", "国", "中国", "##国", "hello", "##llo", "，",
         "##，", "a", "##b", "ab", "!", "x!", "é", "##é", "：）", "二〇"]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return str(path)


def test_load_vocab_equals_bert4keras(vocab_file, tmp_path):
    startswith = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    theirs = helpers.run_oracle([{"kind": "vocab", "path": vocab_file, "startswith": startswith}], str(tmp_path))
    token_dict, keep_tokens = load_vocab(vocab_file, simplified=True, startswith=startswith)
    assert sorted(token_dict, key=token_dict.get) == list(theirs["0/tokens"])
    assert keep_tokens == list(theirs["0/keep_tokens"])
    assert "中国" not in token_dict and "hello" in token_dict and "##llo" in token_dict  # checked by hand too
    assert load_vocab(vocab_file) == {token: i for i, token in enumerate(VOCAB)}


def test_keep_tokens_from_load_vocab_build(vocab_file):
    _, keep_tokens = load_vocab(vocab_file, simplified=True)
    model = build_transformer_model(config=dict(helpers.TINY), keep_tokens=keep_tokens, with_mlm=True, verbose=False)
    assert model.get_layer("Embedding-Token").embeddings.shape == (len(keep_tokens), 32)
    assert model.predict([np.array([[2, 5, 3]]), np.zeros((1, 3))], verbose=0).shape == (1, 3, len(keep_tokens))


def test_load_vocab_errors(vocab_file, tmp_path):
    with pytest.raises(ConfigError, match="expected a vocab.txt file, found no such file"):
        load_vocab(str(tmp_path / "none.txt"))
    with pytest.raises(ConfigError, match="startswith: expected tokens of the vocabulary, found '\\[BOS\\]'"):
        load_vocab(vocab_file, simplified=True, startswith=["[BOS]"])


def test_crf_names_port_from_bert4keras():
    from kerasbert.compat import ConditionalRandomField, ViterbiDecoder
    from kerasbert.modeling import crf

    assert ConditionalRandomField is crf.ConditionalRandomField and ViterbiDecoder is crf.ViterbiDecoder
    # transitions that forbid staying in a label: the decoder must alternate
    trans = np.array([[-100.0, 0.0], [0.0, -100.0]])
    emissions = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])  # only the first step has a preference
    assert list(ViterbiDecoder(trans).decode(emissions)) == [0, 1, 0, 1]


def test_tokenizer_ports_from_bert4keras(vocab_file):
    import kerasbert
    from kerasbert.compat import Tokenizer

    assert issubclass(Tokenizer, kerasbert.Tokenizer)  # with bert4keras's arguments and defaults
    assert load_vocab(dict_path=vocab_file) == kerasbert.load_vocab(vocab_file)  # bert4keras's argument name
    assert Tokenizer(vocab_file).encode("中国hello") == ([2, 6, 7, 10, 3], [0, 0, 0, 0, 0])
