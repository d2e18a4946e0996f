"""From examples to model inputs: word-piece encoding, label alignment and ``tf.data`` batches.

Classification rows become ``(token_ids, segment_ids)`` and a label id. NER sentences are split into
word pieces word by word (a CoNLL token, or a word of raw text from `Tokenizer.split_words`): the
first piece of a word carries the word's tag, the other pieces and [CLS]/[SEP] get weight 0 so that
softmax loss and accuracy ignore them. A CRF needs a label at every step, so there the other pieces
carry the continuation of the word's tag (``I-X`` inside an entity, ``O`` outside) and [CLS]/[SEP]
carry ``O``; metrics read only first pieces either way. Predictions map back to character spans
through the words' offsets (`decode_ner`).

Tags are handled in BIO inside the model (`ner_tag_set`); files in BIOES or BMES are converted on
reading. ``maxlen`` cuts are counted in ``Features.truncated`` and logged, never silent.

Example:
>>> from kerasbert.text.tokenizer import Tokenizer
>>> from kerasbert.text.ner_readers import span_example
>>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "张", "三", "好"])})
>>> example = span_example("张三好", [(0, 2, "PER")])
>>> tags = ner_tag_set([example])
>>> features = encode_ner(tokenizer, [example], tags)
>>> features.token_ids, features.labels, features.weights
([[2, 4, 5, 6, 3]], [[0, 1, 2, 0, 0]], [[0.0, 1.0, 1.0, 1.0, 0.0]])
>>> decode_ner(features.labels[0], features.first_pieces[0], example.offsets, tags)
[(0, 2, 'PER')]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kerasbert import layer_names as ln
from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.log import logger, progress_verbosity
from kerasbert.text import schemes
from kerasbert.text.coverage import warn_unknown
from kerasbert.text.ner_readers import NerExample
from kerasbert.text.readers import ClassificationExample, LabelSet
from kerasbert.text.schemes import Span
from kerasbert.text.tokenizer import Tokenizer

__all__ = ["Features", "bucket_length", "bucket_lengths", "decode_ner", "encode_classification", "encode_ner",
           "entity_rows", "length_buckets", "ner_tag_set", "report_truncation", "text_example", "to_dataset"]


@dataclass
class Features:
    """Encoded examples, unpadded: one list per example.

    Args:
        token_ids: list of list of int. ``Input-Token`` rows.
        segment_ids: list of list of int. ``Input-Segment`` rows.
        labels: list of int (classification), list of list of int (NER, one per piece), or None.
        weights: list of list of float or None. NER softmax: 1 on first pieces, 0 elsewhere.
        first_pieces: list of list of int or None. NER: the piece index of each word's first piece,
            -1 for words cut by ``maxlen``.
        truncated: int. how many examples ``maxlen`` cut.
        prompts: list of list of int or None. seq2seq: each source's ids, where generation starts.
        windows: list of `kerasbert.text.windows.Window` or None. each row's window when long texts are split
            (``--stride``); the rows are then windows, and ``first_pieces`` stays one row per example, numbered in
            the example's uncut row. None: one row per example.
        group: int. rows that stay together, in order, when `to_dataset` shuffles and batches them: 2 for
            sentence pairs (`kerasbert.finetune.sim`: a pair's two texts one after the other), else 1.
        pad_id: int. the id `to_dataset` pads the token rows with: the tokenizer's padding id
            (`kerasbert.text.tokenizer_base.pad_id_of`: 0, [PAD], in BERT's vocabularies).
    """

    token_ids: list[list[int]]
    segment_ids: list[list[int]]
    labels: list | None = None
    weights: list[list[float]] | None = None
    first_pieces: list[list[int]] | None = None
    truncated: int = 0
    prompts: list[list[int]] | None = None
    windows: list | None = None
    group: int = 1
    pad_id: int = 0

    def __len__(self) -> int:
        return len(self.token_ids)


def _check_maxlen(maxlen: int | None) -> None:
    if maxlen is not None and (not isinstance(maxlen, int) or maxlen < 3):
        raise fail(ConfigError, "maxlen", "an int >= 3 ([CLS], one token, [SEP])", repr(maxlen))


PROGRESS_CHUNK = 20_000  # rows per progress-bar update when encoding a large file


def _in_chunks(encode, rows: list, what: str):
    """``encode(rows)`` in chunks, with a progress bar when there is more than one chunk (redrawn on a terminal, one
    line at its end elsewhere: `kerasbert.log.progress_verbosity`)."""
    if len(rows) <= PROGRESS_CHUNK:
        return encode(rows)
    import keras

    logger.info("%s: encoding %d examples into word pieces", what, len(rows))
    bar, out = keras.utils.Progbar(len(rows), verbose=progress_verbosity(), unit_name="example"), []
    for i in range(0, len(rows), PROGRESS_CHUNK):
        out.extend(encode(rows[i:i + PROGRESS_CHUNK]))
        bar.update(min(i + PROGRESS_CHUNK, len(rows)))
    return out


def report_truncation(truncated: int, total: int, maxlen: int | None, what: str) -> None:
    """Log how many of ``total`` examples of ``what`` were cut to ``maxlen`` word pieces (nothing when none)."""
    if truncated:
        logger.warning("%s: %d of %d examples are longer than maxlen=%s word pieces and were cut",
                       what, truncated, total, maxlen)


def encode_classification(tokenizer: Tokenizer, examples: Sequence[ClassificationExample],
                          labels: LabelSet | None = None, maxlen: int | None = None,
                          what: str = "data") -> Features:
    """Encode texts (or pairs) with `Tokenizer.encode_batch` and their labels with ``labels``.

    Args:
        tokenizer: Tokenizer. the checkpoint's tokenizer.
        examples: sequence of ClassificationExample. rows from `kerasbert.text.readers.read_classification`.
        labels: LabelSet or None. the label ids; None leaves ``Features.labels`` None (prediction).
        maxlen: int or None. the most word pieces a row keeps, cut as bert4keras cuts.
        what: str. the data named in the truncation report.

    Example:
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])})
    >>> rows = [ClassificationExample("a b a", "x"), ClassificationExample("b", "y")]
    >>> features = encode_classification(tokenizer, rows, LabelSet(["x", "y"]), maxlen=4)
    >>> features.token_ids, features.labels, features.truncated
    ([[2, 4, 5, 3], [2, 5, 3]], [0, 1], 1)
    >>> pair = encode_classification(tokenizer, [ClassificationExample("b b", "y", text_b="a a")], maxlen=5)
    >>> pair.token_ids, pair.segment_ids
    ([[2, 5, 3, 4, 3]], [[0, 0, 0, 1, 1]])
    """
    _check_maxlen(maxlen)
    pairs = [example.text_b is not None for example in examples]
    if any(pairs) and not all(pairs):
        line = next(example.line for example, pair in zip(examples, pairs, strict=True) if not pair)
        raise fail(DataError, f"{what}:{line}", "text pairs in every row, or in none", "a row without text_b")
    seconds = [example.text_b for example in examples] if any(pairs) else None

    def encode(rows):  # a long text read only as far as its first maxlen + 1 pieces: enough to cut it as a whole
        ids, segments = tokenizer.encode_batch([row.text for row in rows],
                                               [row.text_b for row in rows] if seconds is not None else None,
                                               most_pieces=None if maxlen is None else maxlen + 1)
        return list(zip(ids, segments, strict=True))

    encoded = _in_chunks(encode, list(examples), what)
    token_ids, segment_ids = [row[0] for row in encoded], [row[1] for row in encoded]
    warn_unknown(tokenizer, token_ids, [example.text for example in examples], what)
    truncated = 0
    if maxlen is not None:
        for i, row in enumerate(token_ids):
            if len(row) > maxlen:
                truncated += 1
                token_ids[i], segment_ids[i] = tokenizer.truncate(row, segment_ids[i], maxlen)
    report_truncation(truncated, len(examples), maxlen, what)
    label_ids = None if labels is None else [labels.index(example.label) for example in examples]
    return Features(token_ids, segment_ids, label_ids, truncated=truncated)


def ner_tag_set(examples: Sequence[NerExample]) -> LabelSet:
    """The BIO tag set of the entity types in ``examples``: ``O`` first (id 0), then ``B-X``, ``I-X``."""
    types = sorted({label for example in examples for _, _, label in example.spans})
    return LabelSet(["O"] + [f"{prefix}-{name}" for name in types for prefix in "BI"])


def _word_tags(example: NerExample, tags: LabelSet) -> list[int]:
    """BIO tag ids of each word of ``example``; entity types outside ``tags`` are a DataError."""
    bio = schemes.spans_to_tags(example.token_spans(), len(example.tokens), "BIO")
    return [tags.index(tag) for tag in bio]


def encode_ner(tokenizer: Tokenizer, examples: Sequence[NerExample], tags: LabelSet | None = None,
               maxlen: int | None = None, crf: bool = False, what: str = "data") -> Features:
    """Encode NER sentences word by word and align their tags onto word pieces.

    Args:
        tokenizer: Tokenizer. the checkpoint's tokenizer.
        examples: sequence of NerExample. sentences from `kerasbert.text.ner_readers.read_conll` or
            `read_span_jsonl`, or `text_example` for raw text.
        tags: LabelSet or None. BIO tag ids (`ner_tag_set`); None leaves labels and weights None.
        maxlen: int or None. the most word pieces a sentence keeps; words that do not fit whole are cut.
        crf: bool. label every piece (the CRF's need) instead of weighting non-first pieces 0.
        what: str. the data named in the truncation report.
    """
    _check_maxlen(maxlen)
    pieces_of = _in_chunks(tokenizer.encode_words, [example.tokens for example in examples], what)
    start, end = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    features = Features([], [], [] if tags else None, [] if tags and not crf else None, [])
    for example, pieces in zip(examples, pieces_of, strict=True):
        word_tags = _word_tags(example, tags) if tags else [0] * len(pieces)
        ids, labels, weights, firsts = [start], [0], [0.0], []
        for word, tag in zip(pieces, word_tags, strict=True):
            if maxlen is not None and len(ids) + len(word) > maxlen - 1:
                break
            firsts.append(len(ids))
            rest = tags.index("I" + tags.labels[tag][1:]) if tags and tag else 0
            ids += word
            labels += [tag] + [rest if crf else 0] * (len(word) - 1)
            weights += [1.0] + [0.0] * (len(word) - 1)
        features.truncated += len(firsts) < len(pieces)
        features.first_pieces.append(firsts + [-1] * (len(pieces) - len(firsts)))
        features.token_ids.append(ids + [end])
        features.segment_ids.append([0] * (len(ids) + 1))
        if tags:
            features.labels.append(labels + [0])
            if not crf:
                features.weights.append(weights + [0.0])
    warn_unknown(tokenizer, features.token_ids, [example.text for example in examples], what)
    report_truncation(features.truncated, len(examples), maxlen, what)
    return features


def decode_ner(piece_tags: Sequence[int], first_pieces: Sequence[int], offsets: Sequence[tuple[int, int]],
               tags: LabelSet) -> list[Span]:
    """Character spans of one sentence's predicted tag ids, read on each word's first piece.

    Words cut by ``maxlen`` (first piece -1) read as ``O``; an ``I-X`` that continues nothing starts
    an entity, as in `kerasbert.text.schemes.tags_to_spans`.

    Args:
        piece_tags: sequence of int. a tag id per word piece (argmax or Viterbi path).
        first_pieces: sequence of int. ``Features.first_pieces`` of the sentence.
        offsets: sequence of ``(start, end)``. each word's character offsets (``NerExample.offsets``).
        tags: LabelSet. the tag ids.
    """
    word_tags = [tags.labels[int(piece_tags[p])] if p >= 0 else "O" for p in first_pieces]
    return schemes.token_to_char_spans(offsets, schemes.tags_to_spans(word_tags, strict=None))


def entity_rows(text: str, spans: Sequence[Span]) -> list[dict]:
    """``(start, end, label)`` character spans of ``text`` as prediction rows name them.

    Example:
    >>> entity_rows("张伟去北京", [(3, 5, "LOC")])
    [{'start': 3, 'end': 5, 'label': 'LOC', 'text': '北京'}]
    """
    return [{"start": a, "end": b, "label": label, "text": text[a:b]} for a, b, label in spans]


def text_example(tokenizer: Tokenizer, text: str) -> NerExample:
    """An untagged NER example of raw ``text``, its words split as BERT splits them (for prediction).

    Example:
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])})
    >>> text_example(tokenizer, "I like 北京").tokens
    ['I', 'like', '北', '京']
    """
    offsets = tokenizer.split_words(text)
    return NerExample(text, [text[a:b] for a, b in offsets], ["O"] * len(offsets), [], offsets)


def _order(n: int, seed: int | None, epoch: int, group: int = 1) -> np.ndarray:
    """Row order of one epoch: a permutation drawn from ``(seed, epoch)`` of the ``n / group`` groups of ``group``
    consecutive rows (each group in its own order), or 0..n-1 unshuffled.

    Example:
    >>> _order(6, 0, 0, group=2).reshape(3, 2) % 2
    array([[0, 1],
           [0, 1],
           [0, 1]])
    """
    if seed is None:
        return np.arange(n)
    groups = np.random.default_rng([seed, epoch]).permutation(n // group)  # group 1: the rows themselves
    return (groups[:, None] * group + np.arange(group)).reshape(-1)


def to_dataset(features: Features, batch_size: int, *, seed: int | None = None, epoch: int = 0,
               bucket_boundaries: Sequence[int] | None = None, skip_batches: int = 0, labels: bool = True,
               prefetch: bool = True):
    """A ``tf.data.Dataset`` of ``({"Input-Token", "Input-Segment"}, labels[, weights])`` batches.

    Each batch is padded to its own longest row: the token ids with ``features.pad_id``, all else with 0. With
    ``seed`` the examples are shuffled in an order drawn from ``(seed, epoch)``: the same order every time, so a
    resumed run sees the batches it would have seen (``skip_batches`` skips those already trained on). Rows of a
    group (``features.group``) stay together, in order, in one batch.

    Args:
        features: Features. from `encode_classification` or `encode_ner`.
        batch_size: int. examples per batch: rows, or groups of ``features.group`` rows.
        seed: int or None. shuffle seed; None keeps the file order.
        epoch: int. which epoch's order to draw (with ``seed``).
        bucket_boundaries: sequence of int or None. group rows of similar length (fewer pad tokens);
            lengths ``< b[0]``, ``< b[1]``, … each batch from one bucket.
        skip_batches: int. batches to drop from the start.
        labels: bool. include labels (and weights) when ``features`` has them.
        prefetch: bool. prefetch batches while the model runs.

    Example:
    >>> features = Features([[2, 4, 3], [2, 4, 4, 4, 3], [2, 3]], [[0] * 3, [0] * 5, [0] * 2], [1, 0, 1])
    >>> [tuple(x["Input-Token"].shape) for x, y in to_dataset(features, 2)]
    [(2, 5), (1, 2)]
    >>> features.pad_id = 1  # RoBERTa's <pad>
    >>> next(iter(to_dataset(features, 2)))[0]["Input-Token"].numpy().tolist()
    [[2, 4, 3, 1, 1], [2, 4, 4, 4, 3]]
    """
    import tensorflow as tf

    if not isinstance(batch_size, int) or batch_size < 1:
        raise fail(ConfigError, "batch_size", "an int >= 1", repr(batch_size))
    if features.group > 1 and (len(features) % features.group or bucket_boundaries):
        raise fail(ConfigError, "features", f"whole groups of {features.group} rows, not bucketed by length",
                   f"{len(features)} rows" + (", bucket_boundaries" if bucket_boundaries else ""))
    order = _order(len(features), seed, epoch, features.group)

    def ragged(rows, dtype):  # from flat values: tf.ragged.constant takes minutes on 10^5 rows
        picked = [rows[i] for i in order]
        lengths = np.fromiter(map(len, picked), np.int64, len(picked))
        flat = np.fromiter(itertools.chain.from_iterable(picked), dtype.as_numpy_dtype, int(lengths.sum()))
        return tf.RaggedTensor.from_row_lengths(flat, lengths)

    inputs = {ln.TOKEN_INPUT: ragged(features.token_ids, tf.int32),
              ln.SEGMENT_INPUT: ragged(features.segment_ids, tf.int32)}
    parts: list = [inputs]
    if labels and features.labels is not None:
        sequence = bool(features.labels) and isinstance(features.labels[0], list)
        if sequence:
            parts.append(ragged(features.labels, tf.int32))
        else:  # label ids, or numbers (a sentence pair's score)
            values = np.asarray([features.labels[i] for i in order])
            parts.append(tf.constant(values.astype(np.float32 if values.dtype.kind == "f" else np.int32)))
        if features.weights is not None:
            parts.append(ragged(features.weights, tf.float32))
    dataset = tf.data.Dataset.from_tensor_slices(tuple(parts) if len(parts) > 1 else parts[0])

    def dense(*xs):  # slices of a ragged tensor come out as rank-0-ragged; padding wants plain tensors
        xs = tf.nest.map_structure(lambda x: x.to_tensor() if isinstance(x, tf.RaggedTensor) else x, xs)
        return xs if len(xs) > 1 else xs[0]

    dataset = dataset.map(dense)
    paddings = _padding_values(dataset.element_spec, features.pad_id)
    if bucket_boundaries:
        dataset = dataset.bucket_by_sequence_length(
            lambda *xs: tf.shape(xs[0][ln.TOKEN_INPUT])[0], list(bucket_boundaries),
            [batch_size] * (len(bucket_boundaries) + 1), padding_values=paddings)
    else:
        dataset = dataset.padded_batch(batch_size * features.group, padding_values=paddings)
    if skip_batches:
        dataset = dataset.skip(skip_batches)
    return dataset.prefetch(tf.data.AUTOTUNE) if prefetch else dataset


def _padding_values(spec, pad_id: int):
    """``padded_batch``'s padding values for elements of ``spec``: ``pad_id`` for the token ids, 0 elsewhere."""
    import tensorflow as tf

    values = tf.nest.map_structure(lambda s: tf.constant(0, s.dtype), spec)
    inputs, specs = (values[0], spec[0]) if isinstance(values, tuple) else (values, spec)
    inputs[ln.TOKEN_INPUT] = tf.constant(pad_id, specs[ln.TOKEN_INPUT].dtype)
    return values


def bucket_length(length: int, maxlen: int, smallest: int = 16) -> int:
    """The length `length_buckets` pads a batch of longest row ``length`` to: the next power of two
    from ``smallest``, at most ``maxlen``.

    Example:
    >>> [bucket_length(n, 128) for n in (3, 16, 17, 100, 128)]
    [16, 16, 32, 128, 128]
    """
    return min(maxlen, max(smallest, 1 << (int(length) - 1).bit_length()))


def bucket_lengths(maxlen: int, smallest: int = 16) -> list[int]:
    """Every length `length_buckets` pads to, shortest first.

    Example:
    >>> bucket_lengths(48)
    [16, 32, 48]
    """
    return sorted({bucket_length(n, maxlen, smallest) for n in range(1, maxlen + 1)})


def length_buckets(dataset, maxlen: int, smallest: int = 16, pad_id: int = 0):
    """``dataset`` with each batch padded to `bucket_length` of its own length: its token ids with ``pad_id`` (the
    tokenizer's padding id), all else with 0.

    XLA compiles once per input shape; batches padded to their own longest row have up to ``maxlen``
    shapes, bucketed ones ``log2(maxlen / smallest) + 1``. Padding is masked everywhere (attention,
    pooling, CRF, tagging weights), so the results are those of the unbucketed batches.

    Args:
        dataset: a ``tf.data.Dataset`` of `to_dataset` (or ``prepared_dataset``) batches.
        maxlen: int. the longest bucket (the encoding's maxlen).
        smallest: int. the shortest bucket.
        pad_id: int. the id the token ids are padded with (`Features.pad_id`).

    Example:
    >>> features = Features([[2, 4, 3], [2, 4, 4, 4, 3]], [[0] * 3, [0] * 5], [1, 0])
    >>> [tuple(x["Input-Token"].shape) for x, y in length_buckets(to_dataset(features, 2), 128)]
    [(2, 16)]
    """
    import tensorflow as tf

    sizes = tf.constant(bucket_lengths(maxlen, smallest), tf.int32)

    def pad(*batch):
        batch = batch if len(batch) > 1 else batch[0]

        def widen(x, value=0):  # [B, S, ...] -> [B, bucket of S, ...], each its own S (T5's sources and targets
            if x.shape.rank is None or x.shape.rank < 2:  # differ); labels of classification ([B]) stay
                return x
            length = tf.shape(x)[1]
            target = tf.maximum(sizes[tf.minimum(tf.searchsorted(sizes, [length])[0], len(sizes) - 1)], length)
            paddings = tf.concat([[[0, 0], [0, target - length]], tf.zeros([x.shape.rank - 2, 2], tf.int32)], 0)
            return tf.pad(x, paddings, constant_values=tf.cast(value, x.dtype))

        inputs = batch[0] if isinstance(batch, tuple) else batch
        tokens = inputs.get(ln.TOKEN_INPUT) if isinstance(inputs, dict) else None
        return tf.nest.map_structure(lambda x: widen(x, pad_id) if x is tokens else widen(x), batch)

    return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
