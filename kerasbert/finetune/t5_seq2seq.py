"""The ``seq2seq`` task on a T5 family (``t5``, ``t5.1.1``, ``mt5.1.1``): the encoder reads the source, the decoder
writes the target, as bert4keras's ``task_seq2seq_autotitle_csl_mt5.py`` trains one.

Source and target are tokenized by ``SpTokenizer(spiece.model, token_start=None, token_end="</s>")``, the source cut
to ``maxlen`` ids and the target to ``target_maxlen``, each ending with ``</s>``; the decoder reads ``[0] + target``
(0, T5's padding id, is its start). A WordPiece ``vocab.txt`` is tokenized as T5 PEGASUS's ``finetune.py`` does
(with ``pre_tokenize="jieba"``, ``Tokenizer(vocab, do_lower_case=True, pre_tokenize=jieba.cut HMM off)``): source
and target each ``[CLS] ... [SEP]``, the source cut to ``maxlen`` ids, the target to ``target_maxlen + 1`` (its
``[CLS]`` and ``target_maxlen`` more), the target's ids the decoder's, ``[CLS]`` its start. The loss is the
cross-entropy of the output at position i against the decoder id i + 1, padding not counted: bert4keras's
``y_pred[:, :-1]`` against ``y_true[:, 1:]`` masked where the decoder id is 0, the mean over the batch's target
tokens. Generation is `kerasbert.generation.generate` on the whole model from each source (greedy, or beam search
with ``beams``), the decoder from its start (0, or ``[CLS]``), until ``</s>`` (or ``[SEP]``) or ``target_maxlen``
ids. The files, predictions (``{"target": text}``), scores and report are those of `kerasbert.finetune.seq2seq`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kerasbert import layer_names as ln
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.finetune.lm import cut_ids, generated_ids, sentencepiece_vocab
from kerasbert.finetune.seq2seq import Seq2SeqTask
from kerasbert.generation.seq2seq_cache import START_ID
from kerasbert.modeling import families
from kerasbert.modeling.losses import UnmaskedLoss, UnmaskedMean, masked_accuracy
from kerasbert.text.pipeline import Features
from kerasbert.text.readers import LabelSet
from kerasbert.text.sentencepiece import SpTokenizer
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["END_TOKEN", "T5Seq2SeqTask"]

END_TOKEN = "</s>"  # what ends a T5 source and target (id 1 in T5's and mT5's spiece.model)


@dataclass
class T5Seq2SeqTask(Seq2SeqTask):
    """Source -> target text pairs on a T5 family: decoder ids ``[0] + target`` and next-token labels.

    Features: ``token_ids`` the sources, ``labels`` the decoder ids; `batches` feeds them to the encoder and the
    decoder, and the labels shifted by one to the loss.
    """

    application: str = field(default="encoder", init=False)  # T5 builds its own masks: its decoder is causal
    streams: bool = field(default=False, init=False)  # its decoder ids are no field of the prepared shards

    def make_tokenizer(self, vocab: str, lowercase: bool | None) -> SpTokenizer | Tokenizer:
        """bert4keras's T5 tokenizer for a SentencePiece model: no start token, ``</s>`` at the end; for a
        ``vocab.txt``, T5 PEGASUS's: WordPiece between ``[CLS]`` and ``[SEP]``, cut into words first where the task's
        ``pre_tokenize`` says."""
        if sentencepiece_vocab(vocab):
            if self.pre_tokenize is not None:
                raise fail(ConfigError, "--pre-tokenize", "a WordPiece vocab.txt (T5 PEGASUS's)",
                           f"the SentencePiece model {vocab!r}", "leave --pre-tokenize out")
            return SpTokenizer(vocab, token_start=None, token_end=END_TOKEN)
        return super().make_tokenizer(vocab, lowercase)

    def encode(self, tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """Each source's ids (cut to ``maxlen``), its prompt for generation; with ``labels`` (training and scoring)
        the decoder ids: ``[0] + target`` (the target cut to ``target_maxlen``), or with word pieces the target's
        ``[CLS] ... [SEP]`` (cut to ``target_maxlen + 1``)."""
        self._tokenizer = tokenizer
        sources = cut_ids(tokenizer.encode, [example.text for example in examples], maxlen, f"{what} (sources)")
        features = Features(sources, [[0] * len(row) for row in sources], prompts=sources)
        if labels is not None:
            pieces = isinstance(tokenizer, Tokenizer)  # the target's [CLS] is the decoder's start
            targets = cut_ids(tokenizer.encode, [example.label for example in examples],
                              self.target_maxlen + int(pieces), f"{what} (targets)")
            features.labels = targets if pieces else [[START_ID, *row] for row in targets]
        return features

    def source_maxlen(self, maxlen: int) -> int:
        """The most ids of a source: ``maxlen``, the encoder's alone (the decoder's positions are its own)."""
        return maxlen

    def batches(self, dataset, tokenizer, seed: int, epoch: int | None, skip: int = 0):
        """``({Encoder-Input-Token: sources, Decoder-Input-Token: decoder ids}, decoder ids shifted left by one)``."""
        import tensorflow as tf

        def feed(inputs, decoder):
            following = tf.concat([decoder[:, 1:], tf.zeros_like(decoder[:, :1])], axis=1)  # lm.next_token_labels
            return {ln.ENCODER_INPUT: inputs[ln.TOKEN_INPUT], ln.DECODER_INPUT: decoder}, following

        return dataset.map(feed)

    def head(self, backbone, labels: LabelSet):
        """The whole T5 itself: its output is the decoder's next-token softmax."""
        family = families.of_model(backbone)
        if family.architecture != "t5" or family.part:
            raise fail(ModelError, "seq2seq backbone", "a whole T5 model (t5, t5.1.1, mt5.1.1)", repr(family.name))
        return backbone

    def compile_arguments(self, model) -> dict:
        """The mean cross-entropy over the labels that are not 0 (the target tokens), as the GPT families' loss, and
        the accuracy over them; both on the output without the decoder's Keras mask, which Keras would otherwise
        weigh them with (it counts the last token, whose label is 0, and would not broadcast over one number)."""
        loss = UnmaskedLoss(int(model.outputs[0].shape[-1]), ignore_id=0, what="decoder ids", name="masked_lm_loss")
        return {"loss": loss, "metrics": [UnmaskedMean(masked_accuracy, name="masked_accuracy")]}

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> list[list[int]]:
        """The generated ids of each source, the decoder from its start (0, or ``[CLS]``), without the ``</s>`` (or
        ``[SEP]``) that ends them."""
        tokenizer = self._decoder()
        if isinstance(tokenizer, Tokenizer):
            start, end = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        else:
            start, end = START_ID, tokenizer.token_to_id(END_TOKEN)
        return generated_ids(model, features.prompts, self.beams, end, self.target_maxlen, batch_size, start)

