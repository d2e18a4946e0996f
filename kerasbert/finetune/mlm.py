"""The ``mlm`` task: masked-LM (and next sentence) training of a BERT on raw text, what `kerasbert.finetune.pretrain`
trains.

A corpus is plain text (a sentence a line, a blank line between documents) or JSONL, read by
`kerasbert.text.corpus`; each document's sentences are packed into rows of at most ``maxlen`` word pieces, each
piece knowing its whole word (`kerasbert.text.masking.word_pieces`: Chinese words cut by jieba, English words
joined by WordPiece's ``##``). With ``nsp`` the rows are sentence pairs ``[CLS] A [SEP] B [SEP]``
(`kerasbert.text.pairs`) and the model also predicts whether B follows A (next sentence prediction, Google BERT's
second objective; RoBERTa found training without it as good, hence off by default).

Masks are drawn anew for every batch of every epoch (dynamic masking, RoBERTa's) from ``(seed, epoch, batch)``,
so a resumed run sees the masks it would have seen; dev data gets one fixed draw, the same for every run, so
held-out losses compare across runs. The model is the checkpoint with its own masked-LM head (``with_mlm``), run
at the predicted positions alone, as Google's ``run_pretraining`` runs it (`kerasbert.modeling.heads.pretraining`):
each batch carries each row's predicted positions and ids, padded with 0 to the most a row of the batch's length
predicts (`kerasbert.text.masking.most_predictions`, ``--max-predictions`` where it is lower). The loss is the
cross-entropy over the predicted pieces, their mean over the batch (`kerasbert.modeling.losses.SparseLabelLoss`,
the padding's id 0 not counted), as bert4keras's pretraining computes it over every position, plus with ``nsp``
the cross-entropy of ``NSP-Proba`` over the batch (Google's ``total_loss``).

Example:
>>> MaskedLmTask(nsp=True).dev_keys
('loss', 'accuracy', 'nsp_accuracy')
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import keras
import numpy as np

from kerasbert import layer_names as ln
from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.finetune.task_base import Task
from kerasbert.log import logger
from kerasbert.modeling import heads
from kerasbert.text import corpus, masking, pairs
from kerasbert.text.pipeline import Features, to_dataset
from kerasbert.text.readers import LabelSet, write_text
from kerasbert.text.tokenizer import Tokenizer
from kerasbert.text.tokenizer_base import pad_id_of

__all__ = ["DEV_SEED", "MaskedLmTask", "PiecesPerSecond", "row_sums"]

DEV_SEED = 20190531  # dev rows' one mask draw, the same in every run
UNCAPPED = 2**31 - 1  # --max-predictions left out: the rate alone says how many pieces a row predicts
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
RANDOM_NEXT = -2  # the word id at [CLS] of a sentence pair whose B is from another document (-1: B follows A)


@dataclass
class MaskedLmTask(Task):
    """Documents of raw text -> packed rows -> masked word pieces; the checkpoint's MLM head predicts them.

    Training rows carry each piece's word index as their labels; `batches` turns them into masked inputs, the
    positions predicted (``Input-MLM-Positions``) and the ids to predict there (0 on the padding), by
    `kerasbert.text.masking.mask_batch` and `kerasbert.text.masking.predicted_positions`. With ``nsp`` the
    word id at ``[CLS]`` also says whether the pair's B follows its A (`RANDOM_NEXT` where not), and the targets
    are ``(next sentence label, ids to predict)``: 0 where B follows A, 1 where it is random, as Google labels them.
    """

    name: str = field(default="mlm", init=False)
    monitor: str = field(default="val_loss", init=False)
    dev_keys: tuple = field(default=("loss", "accuracy"), init=False)

    def __post_init__(self) -> None:
        self.tokenizer: Tokenizer | None = None  # set by `encode`: scoring masks dev rows with its special ids
        self.pieces = 0  # word pieces (not padding) masked so far, training and dev: `PiecesPerSecond` reads it
        cap = UNCAPPED if self.max_predictions is None else self.max_predictions
        self.rule = masking.MaskingRule(self.mask_rate, self.mask_replace, self.mask_random, cap)
        self.rule.check()
        if self.nsp:
            self.dev_keys = ("loss", "accuracy", "nsp_accuracy")

    def backbone_heads(self) -> dict:
        """The checkpoint's masked-LM head, and its NSP head with ``nsp``."""
        return {"with_mlm": True, "with_nsp": self.nsp}

    def stream(self, path: str) -> Iterator[corpus.Document]:
        return corpus.iter_documents(path, text_field=self.text if isinstance(self.text, str) else "text")

    def check(self, examples: Sequence, labels: LabelSet, path: str) -> None:
        """Nothing to check: raw text has no labels."""

    def label_set(self, examples: Sequence) -> LabelSet:
        return LabelSet([])  # the labels are the vocabulary's pieces

    def encode(self, tokenizer: Tokenizer, examples, labels: LabelSet | None, maxlen: int, what: str) -> Features:
        """Rows ``[CLS] pieces [SEP]`` packed from each document's sentences (with ``nsp`` sentence pairs
        ``[CLS] A [SEP] B [SEP]``), with each piece's word index."""
        _special_ids(tokenizer)  # a vocabulary without [MASK] fails now, before anything is written
        self.tokenizer = tokenizer
        segment = None if self.whole_word else list  # list: each character its own word
        packer = pairs.pack_pairs if self.nsp else corpus.pack
        packing = packer(examples, lambda text: masking.word_pieces(tokenizer, text, segment), maxlen,
                         cls_id=tokenizer.token_to_id("[CLS]"), sep_id=tokenizer.token_to_id("[SEP]"))
        rows = list(packing)
        if not rows:
            raise fail(DataError, what, "documents with some text", "none")
        if packing.cut:
            logger.info("%s: %d of %d sentences were longer than a row of %d word pieces, cut across rows", what,
                        packing.cut, packing.sentences, maxlen)
        return Features([row.token_ids for row in rows], [row.segment_ids or [0] * len(row.token_ids) for row in rows],
                        labels=[_labels(row) for row in rows])

    def head(self, backbone, labels: LabelSet):
        """The backbone, built with its masked-LM head (``with_mlm``), that head run at the predicted positions."""
        return heads.pretraining(backbone)

    def compile_arguments(self, model) -> dict:
        return heads.loss_and_metrics(model)  # cross-entropy over the predicted pieces (labels not 0)

    def batches(self, dataset, tokenizer: Tokenizer, seed: int, epoch: int | None, skip: int = 0):
        """Masked inputs with the positions predicted, and the ids to predict there. Training batches are drawn
        from ``(seed, epoch, batch)``, so a resumed epoch draws what it would have; dev rows (``epoch`` None) from
        `DEV_SEED` and their place in the file alone, the same whatever the batch size or the run."""
        import tensorflow as tf

        specials = _special_ids(tokenizer)

        pad_id = pad_id_of(tokenizer)

        def mask(ids: np.ndarray, words: np.ndarray, draw: np.ndarray) -> tuple[np.ndarray, ...]:
            self.pieces += int(np.count_nonzero(ids != pad_id))
            inputs, labels = masking.mask_batch(ids, words, self.rule, seed=tuple(int(x) for x in draw),
                                                mask_id=specials["[MASK]"], vocab_size=tokenizer.vocab_size,
                                                special_ids=sorted(set(specials.values())))
            predicted = masking.predicted_positions(labels, masking.most_predictions(self.rule, ids.shape[1]))
            return inputs.astype(np.int32), *(x.astype(np.int32) for x in predicted)

        def apply(draw, batch):
            inputs, words = batch[0], batch[1]
            ids, positions, targets = tf.numpy_function(mask, [inputs[ln.TOKEN_INPUT], words, draw],
                                                        [tf.int32] * 3, stateful=False)
            ids.set_shape(inputs[ln.TOKEN_INPUT].shape)
            for predicted in (positions, targets):  # [B, P]
                predicted.set_shape([inputs[ln.TOKEN_INPUT].shape[0], None])
            if self.nsp:  # 1 where B is random, as Google labels it
                targets = tf.cast(tf.equal(words[:, 0], RANDOM_NEXT), tf.int32), targets
            return {**inputs, ln.TOKEN_INPUT: ids, ln.MLM_POSITIONS_INPUT: positions}, targets

        if epoch is not None:  # (seed, epoch + 1, batch, first row of the batch: 0); masked while the step runs
            return dataset.enumerate(start=skip).map(
                lambda index, batch: apply(tf.stack([tf.constant(seed, tf.int64), epoch + 1, index, 0]), batch)
            ).prefetch(tf.data.AUTOTUNE)

        def dev_draw(rows, batch):  # (DEV_SEED, 0, 0, rows before this batch)
            first = tf.stack([tf.constant(DEV_SEED, tf.int64), 0, 0, rows])
            return rows + tf.cast(tf.shape(batch[0][ln.TOKEN_INPUT])[0], tf.int64), (first, batch)

        return dataset.scan(tf.constant(0, tf.int64), dev_draw).map(apply)

    def callbacks(self) -> list:
        return [PiecesPerSecond(self)]

    def predicted_ids(self, model, features: Features, batch_size: int, verbose: int = 0) -> list[dict]:
        """Per row, the masked-LM loss summed over its predicted pieces, how many it got right, and how many; with
        ``nsp`` its next sentence prediction's loss and whether it was right."""
        if self.tokenizer is None:
            raise fail(ConfigError, "mlm scoring", "rows encoded by this task first (its tokenizer)", "none")
        batches, rows = self.batches(to_dataset(features, batch_size), self.tokenizer, 0, None), []
        sums = row_sums(model, batches.element_spec)
        keys = ("loss", "right", "count", "nsp_loss", "nsp_right")
        for inputs, targets in batches:
            columns = [keras.ops.convert_to_numpy(x).tolist() for x in sums(inputs, targets)]
            rows += [dict(zip(keys[:len(columns)], values, strict=True)) for values in zip(*columns, strict=True)]
        return rows

    def predict(self, model, features: Features, examples, labels: LabelSet, batch_size: int,
                verbose: int = 0) -> list[dict]:
        return self.predicted_ids(model, features, batch_size, verbose)

    def score(self, examples, predictions: list[dict], labels: LabelSet) -> dict:
        """The held-out masked-LM loss (mean over predicted pieces) and accuracy; with ``nsp`` also the next
        sentence prediction's loss and accuracy (mean over rows), ``loss`` being the sum of the two losses."""
        count = int(sum(row["count"] for row in predictions))
        scores = {"loss": sum(row["loss"] for row in predictions) / max(count, 1),
                  "accuracy": sum(row["right"] for row in predictions) / max(count, 1), "count": count}
        if predictions and "nsp_loss" in predictions[0]:
            nsp_loss = float(np.mean([row["nsp_loss"] for row in predictions]))
            scores.update(mlm_loss=scores["loss"], nsp_loss=nsp_loss, loss=scores["loss"] + nsp_loss,
                          nsp_accuracy=float(np.mean([row["nsp_right"] for row in predictions])))
        return scores

    def write_report(self, folder: str, scores: dict, labels: LabelSet) -> None:
        """The dev scores as ``scores.txt``."""
        lines = [f"{key:<13}{scores[key]:.4f}" for key in ("loss", "accuracy", "mlm_loss", "nsp_loss", "nsp_accuracy")
                 if key in scores]
        write_text(os.path.join(folder, "scores.txt"), "\n".join([*lines, f"{'pieces':<13}{scores['count']}", ""]))

    def examples_of_texts(self, tokenizer: Tokenizer, rows: Sequence[dict]) -> list:
        raise fail(ConfigError, "predict", "a fine-tuned run", "a pretraining run (task mlm)",
                   "fine-tune it first: kerasbert train --checkpoint RUN/google ...")

    def label_columns(self) -> dict[str, str]:
        return {"labels": "ints"}


class PiecesPerSecond(keras.callbacks.Callback):
    """Logs the training word pieces (padding aside) a second of each epoch, as ``pieces_per_second`` in the
    history; the count is the task's, taken as batches are masked (a few batches ahead of the step)."""

    def __init__(self, task: MaskedLmTask):
        super().__init__()
        self.task = task

    def on_epoch_begin(self, epoch, logs=None):
        self.start, self.pieces = time.perf_counter(), self.task.pieces

    def on_train_batch_end(self, batch, logs=None):
        self.end, self.trained = time.perf_counter(), self.task.pieces  # before dev scoring masks its rows

    def on_epoch_end(self, epoch, logs=None):
        rate = (self.trained - self.pieces) / max(self.end - self.start, 1e-9)
        logger.info("epoch %d: %.0f word pieces a second", epoch + 1, rate)
        if logs is not None:
            logs["pieces_per_second"] = rate


_ROW_SUMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (batch spec, its graph function)


def row_sums(model: keras.Model, spec) -> Callable:
    """``model``'s graph function ``(inputs, targets) -> (loss, right, count)`` summed per row over the pieces whose
    target is not 0 (and ``nsp_loss, nsp_right`` per row where the targets hold next sentence labels), traced once
    for batches of ``spec`` (any batch size and length): the vocabulary-wide probabilities never leave the graph.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> model = build_transformer_model("tiny", application="lm", with_mlm=True, verbose=False)
    >>> features = Features([[2, 7, 9, 3]], [[0, 0, 0, 0]], labels=[[7, 9, 3, 0]])
    >>> dataset = to_dataset(features, 1)
    >>> [int(x[0]) for x in row_sums(model, dataset.element_spec)(*next(iter(dataset)))][2]   # 3 labels counted
    3
    """
    import tensorflow as tf

    kept = _ROW_SUMS.get(model)
    if kept is None or kept[0] != spec:
        weak = weakref.ref(model)  # the kept function must not keep the model alive (`_ROW_SUMS` holds it)

        @tf.function(input_signature=list(spec))
        def sums(inputs, targets):
            outputs = weak()(inputs, training=False)
            outputs = list(outputs) if isinstance(outputs, list | tuple) else [outputs]
            targets = list(targets) if isinstance(targets, list | tuple) else [targets]
            keep = tf.cast(tf.not_equal(targets[-1], 0), tf.float32)
            loss, right = _cross_entropy(targets[-1], outputs[-1])
            found = [tf.reduce_sum(loss * keep, 1), tf.reduce_sum(right * keep, 1), tf.reduce_sum(keep, 1)]
            return found + (list(_cross_entropy(targets[0], outputs[0])) if len(targets) == 2 else [])

        kept = _ROW_SUMS[model] = spec, sums
    return kept[1]


def _cross_entropy(labels, probs) -> tuple:
    """The cross-entropy of each label and whether it is the most probable class, in float32."""
    import tensorflow as tf

    probs = tf.cast(probs, tf.float32)
    right = tf.cast(tf.equal(tf.argmax(probs, -1, output_type=tf.int32), labels), tf.float32)
    return keras.losses.sparse_categorical_crossentropy(labels, probs), right


def _labels(row: corpus.PackedRow) -> list[int]:
    """A row's labels: its word ids, the one at [CLS] `RANDOM_NEXT` where it is a pair whose B is random."""
    return [RANDOM_NEXT, *row.word_ids[1:]] if row.random_next else row.word_ids


def _special_ids(tokenizer: Tokenizer) -> dict[str, int]:
    """The ids never masked nor drawn as random pieces: the special pieces (BERT's names stand for a
    ``tokenizer.json``'s own: ``<s>``, ``<pad>``, ``<mask>``...), a ``tokenizer.json``'s other special tokens, and
    id 0, which the labels keep for "not predicted"; a vocabulary without a mask token cannot be pretrained."""
    found = {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}
    if found["[MASK]"] is None or found["[MASK]"] == found["[UNK]"]:
        raise fail(ConfigError, "--vocab", "a vocabulary with [MASK] (masked-LM pretraining replaces pieces by it)",
                   "no [MASK]", "use the checkpoint's vocab.txt, which has it")
    found = {token: index for token, index in found.items() if index is not None}
    others = getattr(tokenizer, "special_ids", ())
    return {**{f"special:{index}": index for index in (0, *others)}, **found}
