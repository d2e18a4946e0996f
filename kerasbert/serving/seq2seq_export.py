"""The SavedModel of a seq2seq run: raw text in, generated text out, in one TensorFlow graph.

The graph holds the whole of ``kerasbert predict`` for such a run: the tokenizer (a UniLM's
`kerasbert.serving.graph_text.GraphTokenizer`, each source cut to ``maxlen - target_maxlen`` pieces; a T5's
`kerasbert.serving.graph_sentencepiece.GraphSpTokenizer`, each source cut to ``maxlen``), the cached decoder's beam
search (`kerasbert.generation.graph_search`, a ``tf.while_loop`` over one position a step; a T5's encoder runs once
before it) and the detokenizer (`kerasbert.serving.graph_decode.GraphDetokenizer`, bert4keras's decode rules, or
SentencePiece's own), so TF Serving, or any TensorFlow program with tensorflow-text, answers text without kerasbert.
Two signatures:

- ``serving_default``: ``text``, a batch of strings; returns ``target`` (the generated text, without the end token
  that ends it: ``[SEP]``, T5's ``</s>``) and ``score`` (the sequence's summed log-probabilities, the end included);
- ``ids``: ``token_ids`` ``[batch, S]`` (the sources as the tokenizer gives them: ``[CLS] source [SEP]``, T5's
  ``source </s>``; padded with 0, the first position a token whatever its id, as the models' masks read it) for
  callers that tokenize themselves; returns ``target_ids`` ``[batch, target_maxlen]`` (0 after each one's end),
  ``target_length`` and ``score``.
"""

from __future__ import annotations

import tensorflow as tf

from kerasbert.errors import ModelError
from kerasbert.generation.graph_search import Found, graph_beam_search
from kerasbert.generation.search import Rules
from kerasbert.generation.state import check_bounds
from kerasbert.modeling.layers import first_kept

__all__ = ["served_seq2seq"]


def served_seq2seq(model, decoder, tokenizer, detokenizer, beams: int, target_maxlen: int,
                   end_id: int) -> tuple[tf.Module, dict]:
    """The tf.Module to save for a seq2seq model, and its two signatures.

    Args:
        model: keras.Model. the run's model (a ``"unilm"`` model, or a whole T5), whose weights the module tracks.
        decoder: its cached decoder (`kerasbert.generation.generate.cached_decoder`), searched in the graph.
        tokenizer: GraphTokenizer or GraphSpTokenizer. with the run's vocabulary; its ``maxlen`` cuts the sources.
        detokenizer: GraphDetokenizer, or the GraphSpTokenizer. with the run's vocabulary.
        beams: int. the beam count (1: greedy search), at most ``GENERATE_LIMITS["rows"]`` (`kerasbert.choices`).
        target_maxlen: int. the most word pieces generated, at most ``GENERATE_LIMITS["max_length"]``.
        end_id: int. the token that ends a sequence (``[SEP]``, T5's ``</s>``).

    Returns:
        the module (it tracks the model's weights) and ``{"serving_default": ..., "ids": ...}``.
    """
    check_bounds(ModelError, "seq2seq export: ", {"target_maxlen": target_maxlen}, {"beams": beams},
                 "the run's args.json holds them: train with --target-maxlen and --beams within the bounds")
    rules = Rules((end_id,), target_maxlen)
    module = tf.Module()
    module.model, module.tokenizer, module.detokenizer = model, tokenizer, detokenizer

    def search(token_ids: tf.Tensor, lengths: tf.Tensor) -> tuple[Found, tf.Tensor]:
        """The sequence found per source, and its length without the end id."""
        found = graph_beam_search(decoder, token_ids, lengths, beams, rules)
        last = tf.gather(found.ids, tf.maximum(found.lengths - 1, 0), batch_dims=1)
        return found, found.lengths - tf.cast((found.lengths > 0) & tf.equal(last, end_id), tf.int32)

    def on_text(text: tf.Tensor) -> dict:
        pieces = module.tokenizer.tokenize(text)
        found, length = search(pieces["token_ids"], pieces["lengths"])
        return {"target": module.detokenizer.detokenize(found.ids, length), "score": found.scores}

    def on_ids(token_ids: tf.Tensor) -> dict:
        found, length = search(token_ids, tf.reduce_sum(tf.cast(first_kept(token_ids), tf.int32), axis=1))
        kept = tf.range(target_maxlen)[None] < length[:, None]
        return {"target_ids": tf.where(kept, found.ids, 0), "target_length": length, "score": found.scores}

    module.serve_text = tf.function(on_text, input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    module.serve_ids = tf.function(on_ids, input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")])
    return module, {"serving_default": module.serve_text.get_concrete_function(),
                    "ids": module.serve_ids.get_concrete_function()}
