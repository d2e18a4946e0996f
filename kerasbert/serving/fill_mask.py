"""Fill-mask: a masked LM's guesses for each ``[MASK]`` of a text (`fill_mask`, ``kerasbert.fill_mask``,
``kerasbert fill-mask``), as Hugging Face's fill-mask pipeline and bert4keras's masked-LM example give them.

`open_filler` opens one of three folders as a `MaskFiller`:

- a Google checkpoint (a folder or a ``bert_model.ckpt`` prefix, with ``bert_config.json`` and ``vocab.txt``) or
  a Hugging Face folder (``config.json``, ``model.safetensors`` or ``pytorch_model.bin``, ``vocab.txt``) holding its
  masked-LM head (Google's ``cls/predictions/*``, ``BertForMaskedLM``'s ``cls.predictions.*``): built with
  ``build_transformer_model(..., with_mlm=True)``; a checkpoint without that head is a ModelError naming the
  variables it lacks;
- a pretraining run folder (``kerasbert pretrain``, or ``kerasbert train --task mlm``): its best model.

The families with a masked LM are `FILL_MASK_FAMILIES` (BERT and RoBERTa, ALBERT, NEZHA, RoFormer, RoFormer-V2, and
Hugging Face's RoBERTa, XLM-R, DistilBERT, DeBERTa-v3 and ModernBERT);
ELECTRA's discriminator, GPT and T5 have none. A text holds `MASK_TOKEN` (or RoBERTa's ``<mask>``: `MASK_MARKS`, each
the model's own mask token) where a word piece is to be guessed (at most `MAX_MASKS`); with a ``vocab.txt`` the text
between masks is cut into word pieces part by part, so the mask stays one piece, and a ``tokenizer.json`` encodes the
whole text with the marks written as its own mask token, which it keeps whole (and which takes the space before it
where the file says so, as RoBERTa's ``<mask>``). A guess reads as the tokenizer decodes it (a byte-level ``Ġ`` is a
space, ``##`` is dropped). Each mask gets its ``top_k`` word pieces by softmax probability; each
run of two or more adjacent masks (a Chinese word masked one character a mask, as whole-word-masking checkpoints
were trained) also gets its ``top_k`` whole words: the pieces' probabilities are each read from the one masked input,
independent given it, and a word's score is their product, the best ``top_k`` found exactly by a k-best merge
position by position. A text longer than ``maxlen`` word pieces loses its end while every mask stays; a mask past
``maxlen`` is a DataError. Nothing here imports TensorFlow before a model is opened.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import os
import re
from collections.abc import Sequence

import numpy as np

from kerasbert import layer_names as names
from kerasbert.choices import EMBED_MAXLEN, MAXLEN, PREDICT_BATCH_SIZE
from kerasbert.errors import ConfigError, DataError, ModelError, fail
from kerasbert.serving.embed import check_batch_size, check_maxlen, checkpoint_tokenizer, folder_kind, model_maxlen
from kerasbert.text.tokenizer import Tokenizer, pad_ids

__all__ = ["FILL_MASK_FAMILIES", "MASK_MARKS", "MASK_TOKEN", "MAX_MASKS", "MaskFiller", "MaskedText", "check_source",
           "check_texts", "check_top_k", "fill_mask", "filled_row", "open_filler", "top_words"]

MASK_TOKEN = "[MASK]"  # the vocabulary's mask token, as a text writes it
MASK_MARKS = (MASK_TOKEN, "<mask>")  # what a text may write for the model's own mask token (BERT's, RoBERTa's)
_MARK = re.compile("|".join(re.escape(mark) for mark in MASK_MARKS))
MAX_MASKS = 20  # the most masks of one text: beyond, so little of the text is left that the guesses mean little
TOP_K = 5  # the guesses per mask unless told, as Hugging Face's pipeline
# the families whose checkpoints hold a masked LM (``with_mlm``), with the alias roberta
FILL_MASK_FAMILIES = ("bert", "roberta", "albert", "albert_unshared", "nezha", "roformer", "roformer_v2", "roberta_en",
                      "xlm_roberta", "distilbert", "deberta_v3", "modernbert")
_MLM_LAYERS = (names.MLM_DENSE, names.MLM_NORM, names.MLM_BIAS, names.OUTPUT_MAPPING)  # the masked LM's weights
_NO_MLM_HINTS = {  # what a family without a masked LM is used for instead
    "electra": "an ELECTRA discriminator tells replaced tokens from real ones; its generator is a small BERT: "
               "fill-mask that as model='bert'",
    "gpt": "a GPT predicts the next token: kerasbert.generate",
    "t5": "T5 fills spans marked by sentinel tokens: kerasbert.generate",
}


@dataclasses.dataclass(frozen=True)
class MaskedText:
    """One text with masks, as word pieces.

    Args:
        text: str. the text as given.
        token_ids: list of int. ``[CLS] pieces [SEP]``, each mask one piece.
        positions: list of int. the word piece index of each mask.
        offsets: list of int. the character offset of each mask in ``text``.
        cut: int. word pieces cut from the end of a text longer than ``maxlen``.
    """

    text: str
    token_ids: list[int]
    positions: list[int]
    offsets: list[int]
    cut: int = 0

    @property
    def parts(self) -> list[str]:
        """The text before, between and after the masks (one more than the masks)."""
        return _MARK.split(self.text)


def check_texts(texts, where: Sequence[str] | None = None) -> list[str]:
    """``texts`` (one string or a list of them) as a list, each with 1 to `MAX_MASKS` masks; a DataError naming the
    first that is not (``where[i]``, else ``texts[i]``).

    Example:
    >>> check_texts("北京是中国的[MASK][MASK]。")
    ['北京是中国的[MASK][MASK]。']
    >>> check_texts(["北京是中国的首都。"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.DataError: texts[0]: expected a text with [MASK] where a word piece is to be guessed, found ...
    """
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, Sequence) or isinstance(texts, bytes):
        raise fail(DataError, "texts", "a text or a list of texts", f"a {type(texts).__name__}")
    for i, text in enumerate(texts):
        name = where[i] if where is not None else f"texts[{i}]"
        if not isinstance(text, str):
            raise fail(DataError, name, "a string", f"a {type(text).__name__} {str(text)[:40]}")
        count = len(_MARK.findall(text))
        if count == 0:
            lower = MASK_TOKEN.lower() in text.lower()
            raise fail(DataError, name, f"a text with {MASK_TOKEN} where a word piece is to be guessed",
                       f"none in {text[:40]!r}", f"write the mask as {MASK_TOKEN}, in capitals" if lower else "")
        if count > MAX_MASKS:
            raise fail(DataError, name, f"at most {MAX_MASKS} {MASK_TOKEN}s", str(count),
                       "fill a few at a time: each guess reads the text around it")
    return list(texts)


def check_top_k(top_k: int, vocab_size: int | None = None) -> None:
    """A ConfigError unless ``top_k`` is an integer from 1 to the vocabulary's size.

    Example:
    >>> check_top_k(0)
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: top_k: expected an integer >= 1, found 0
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise fail(ConfigError, "top_k", "an integer >= 1", repr(top_k))
    if vocab_size is not None and top_k > vocab_size:
        raise fail(ConfigError, "top_k", f"at most {vocab_size}, the word pieces of the vocabulary", str(top_k))


def encode_masked(tokenizer: Tokenizer, text: str, maxlen: int, where: str) -> MaskedText:
    """``text``'s word pieces with each mask one piece: the parts between masks cut into pieces one by one; a
    text longer than ``maxlen`` loses its end, and a DataError names ``where`` when a mask would go with it."""
    mask_id, offsets = tokenizer.token_to_id(MASK_TOKEN), [match.start() for match in _MARK.finditer(text)]
    if _hf(tokenizer):
        ids = tokenizer.encode(_MARK.sub(lambda _: tokenizer.id_to_token(mask_id), text))[0]
        positions = [i for i, index in enumerate(ids) if index == mask_id]
        if len(positions) != len(offsets):
            raise fail(DataError, where, f"each mask one {tokenizer.id_to_token(mask_id)} token", f"{len(positions)} "
                       f"for {len(offsets)} masks in {text[:40]!r}", "write each mask apart from the words around it")
    else:
        ids, positions = [tokenizer.token_to_id("[CLS]")], []
        for part in _MARK.split(text)[:-1]:
            ids += tokenizer.encode(part)[0][1:-1]
            positions.append(len(ids))
            ids.append(mask_id)
        ids += [*tokenizer.encode(_MARK.split(text)[-1])[0][1:-1], tokenizer.token_to_id("[SEP]")]
    if len(ids) <= maxlen:
        return MaskedText(text, ids, positions, offsets)
    if positions[-1] >= maxlen - 1:
        raise fail(DataError, where, f"every {MASK_TOKEN} within the first {maxlen - 2} word pieces (maxlen {maxlen}, "
                   "[CLS] and [SEP] included)", f"the {MASK_TOKEN} at character {offsets[-1]} at word piece "
                   f"{positions[-1]} of {len(ids) - 2}", "cut the text around its masks, or pass a larger maxlen")
    return MaskedText(text, [*ids[:maxlen - 1], ids[-1]], positions, offsets, len(ids) - maxlen)


# ------------------------------------------------------------------------------------------- guesses
def _best(scores: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` highest scores, highest first (the lower index first among equal ones)."""
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return top[np.lexsort((top, -scores[top]))]


def top_words(log_probs: np.ndarray, k: int) -> list[tuple[tuple[int, ...], float]]:
    """The ``k`` best sequences of one id per row of ``log_probs`` ``[n, V]`` by their summed log-probability, best
    first: a k-best merge row by row, exact (a prefix of one of the k best is among the k best prefixes).

    Example:
    >>> log_probs = np.log(np.array([[0.6, 0.3, 0.1], [0.5, 0.3, 0.2]]))
    >>> [(ids, round(float(np.exp(score)), 2)) for ids, score in top_words(log_probs, 3)]
    [((0, 0), 0.3), ((0, 1), 0.18), ((1, 0), 0.15)]
    """
    beams: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    for row in log_probs:
        best = _best(row, k)
        heap, seen, merged = [(-(beams[0][1] + row[best[0]]), 0, 0)], {(0, 0)}, []
        while heap and len(merged) < k:
            score, i, j = heapq.heappop(heap)
            merged.append((beams[i][0] + (int(best[j]),), -score))
            for a, b in ((i + 1, j), (i, j + 1)):
                if a < len(beams) and b < len(best) and (a, b) not in seen:
                    seen.add((a, b))
                    heapq.heappush(heap, (-(beams[a][1] + row[best[b]]), a, b))
        beams = merged
    return [(ids, float(score)) for ids, score in beams]


def _hf(tokenizer) -> bool:
    """Whether ``tokenizer`` reads a ``tokenizer.json`` (`kerasbert.text.hf_tokenizer.HfTokenizer`)."""
    from kerasbert.text.hf_tokenizer import HfTokenizer

    return isinstance(tokenizer, HfTokenizer)


def _tokens(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each id's token as a guess names it: a word piece as it is (``##`` kept, as Hugging Face's pipeline), a
    ``tokenizer.json``'s piece as it decodes (`_surfaces`)."""
    return _surfaces(tokenizer, ids) if _hf(tokenizer) else tokenizer.ids_to_tokens([int(i) for i in ids])


def _surfaces(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each id's piece as it reads in a text: ``##`` dropped from a word piece; a ``tokenizer.json``'s piece as it
    decodes (a byte-level ``Ġ`` a space), a special token as itself."""
    tokens = tokenizer.ids_to_tokens([int(i) for i in ids])
    if not _hf(tokenizer):
        return [token[2:] if token.startswith("##") else token for token in tokens]
    return [tokenizer.decode([int(i)]) or token for i, token in zip(ids, tokens, strict=True)]


def _fill(before: str, surface: str) -> str:
    """``surface`` written after ``before``: one space where both bring one (a mask that takes the space before it)."""
    return surface[1:] if surface.startswith(" ") and (not before or before[-1].isspace()) else surface


def _runs(positions: list[int]) -> list[list[int]]:
    """The masks (by index) in runs of adjacent word pieces."""
    runs: list[list[int]] = []
    for i, position in enumerate(positions):
        if runs and positions[runs[-1][-1]] == position - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def filled_row(masked: MaskedText, probs: np.ndarray, tokenizer: Tokenizer, top_k: int = TOP_K,
               whole_word: bool = True) -> dict:
    """One text's answer from its masks' probabilities ``[masks, V]``: ``{"text", "masks": [{"position",
    "candidates": [{"token", "score", "token_id"}]}], "words": [{"position", "masks", "candidates": [{"word",
    "score", "token_ids"}]}], "filled"}``; ``words`` lists the runs of two or more adjacent masks (none without
    ``whole_word``), ``filled`` is the text with each mask's best piece (``##`` dropped).

    Example:
    >>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "首", "都"])})
    >>> masked = encode_masked(tokenizer, "[MASK][MASK]。", 16, "texts[0]")
    >>> probs = np.array([[0, 0, 0, 0, 0, 0.9, 0.1], [0, 0, 0, 0, 0, 0.2, 0.8]])
    >>> row = filled_row(masked, probs, tokenizer, top_k=2)
    >>> row["filled"], row["masks"][1]["candidates"][0], row["words"][0]["candidates"][0]["word"]
    ('首都。', {'token': '都', 'score': 0.8, 'token_id': 6}, '首都')
    """
    known = np.asarray(probs, np.float64)[:, :tokenizer.vocab_size]  # ids past the vocabulary have no piece
    best = [_best(row, top_k) for row in known]
    tokens = [_tokens(tokenizer, ids) for ids in best]
    masks = [{"position": offset, "candidates": [{"token": token, "score": float(row[i]), "token_id": int(i)}
                                                 for token, i in zip(pieces, ids, strict=True)]}
             for offset, row, ids, pieces in zip(masked.offsets, known, best, tokens, strict=True)]
    parts = masked.parts
    filled = parts[0]
    for surface, part in zip(_surfaces(tokenizer, [ids[0] for ids in best]), parts[1:], strict=True):
        filled += _fill(filled, surface) + part
    words = [] if not whole_word else [_word_row(masked, known, run, tokenizer, top_k)
                                       for run in _runs(masked.positions) if len(run) > 1]
    return {"text": masked.text, "masks": masks, "words": words, "filled": filled}


def _word_row(masked: MaskedText, known: np.ndarray, run: list[int], tokenizer: Tokenizer, top_k: int) -> dict:
    """The ``top_k`` whole words of a run of adjacent masks; the text between its masks (spaces) kept."""
    between = masked.parts[run[0] + 1:run[-1] + 1]
    with np.errstate(divide="ignore"):
        log_probs = np.log(known[run])
    candidates = []
    for ids, score in top_words(log_probs, top_k):
        pieces = _surfaces(tokenizer, ids)
        word = pieces[0] + "".join(space + piece for space, piece in zip(between, pieces[1:], strict=True))
        if _hf(tokenizer) and not "".join(between).strip():  # the pieces as the tokenizer joins them
            word = tokenizer.decode(list(ids)).strip() or word
        candidates.append({"word": word, "score": float(np.exp(score)), "token_ids": list(ids)})
    return {"position": masked.offsets[run[0]], "masks": len(run), "candidates": candidates}


# ------------------------------------------------------------------------------------------- a model
@dataclasses.dataclass(frozen=True)
class MaskFiller:
    """A folder opened to fill masks (`open_filler`); call it on texts.

    Args:
        path: str. the folder (or Google checkpoint prefix).
        kind: str. ``"checkpoint"`` or ``"run"``.
        family: str. the model's family.
        maxlen: int. the word pieces a text keeps, ``[CLS]`` and ``[SEP]`` included.
        tokenizer: Tokenizer. the model's tokenizer.
        model: keras.Model. inputs ``[Input-Token, Input-Segment, Input-MLM-Positions]``, the masked LM's
            probabilities at those positions ``[B, P, V]`` (`kerasbert.modeling.heads.pretraining`) last among
            its outputs.
    """

    path: str
    kind: str
    family: str
    maxlen: int
    tokenizer: Tokenizer
    model: object

    def encode(self, texts: Sequence[str], where: Sequence[str] | None = None) -> list[MaskedText]:
        """Each text's word pieces with its masks (`encode_masked`); texts cut to ``maxlen`` are logged."""
        from kerasbert.log import logger

        rows = [encode_masked(self.tokenizer, text, self.maxlen, where[i] if where else f"texts[{i}]")
                for i, text in enumerate(check_texts(texts, where))]
        cut = sum(row.cut > 0 for row in rows)
        if cut:
            logger.warning("%d of %d texts were longer than maxlen %d word pieces: their ends were cut, every %s "
                           "kept", cut, len(rows), self.maxlen, MASK_TOKEN)
        return rows

    def probabilities(self, rows: Sequence[MaskedText], batch_size: int = PREDICT_BATCH_SIZE) -> list[np.ndarray]:
        """Each row's masked-LM probabilities at its masks, float32 ``[masks, V]``: rows sorted by length and run
        in batches, padded with the model's padding id (``[PAD]``, RoBERTa's ``<pad>``; a padded position reads
        ``[CLS]``'s, then is dropped)."""
        check_batch_size(batch_size, "batch_size")
        order, out = np.argsort([len(row.token_ids) for row in rows], kind="stable"), [None] * len(rows)
        for begin in range(0, len(rows), batch_size):
            batch = [rows[i] for i in order[begin:begin + batch_size]]
            ids = pad_ids([row.token_ids for row in batch], pad_id=self._pad_id)
            probs = np.asarray(self._predict(ids, np.zeros_like(ids), pad_ids([row.positions for row in batch])),
                               np.float32)
            for i, row, found in zip(order[begin:begin + batch_size], batch, probs, strict=True):
                out[i] = found[:len(row.positions)]
        return out

    @functools.cached_property
    def _pad_id(self) -> int:
        """The id the model masks as padding (`kerasbert.modeling.families.pad_id`)."""
        from kerasbert.modeling import families
        from kerasbert.modeling.config import config_of

        return families.pad_id(families.of_model(self.model), config_of(self.model))

    @functools.cached_property
    def _predict(self):
        """The model's masked-LM probabilities as one graph function, traced once for any batch and length."""
        import tensorflow as tf

        spec = tf.TensorSpec([None, None], tf.int32)

        @tf.function(input_signature=[spec] * 3)
        def predict(token_ids, segment_ids, positions):
            with_segments = len(self.model.inputs) == 3  # DistilBERT and ModernBERT have none
            inputs = [token_ids, segment_ids, positions] if with_segments else [token_ids, positions]
            outputs = self.model(inputs, training=False)
            return outputs[-1] if isinstance(outputs, list | tuple) else outputs

        return predict

    def __call__(self, texts, top_k: int = TOP_K, whole_word: bool = True, batch_size: int = PREDICT_BATCH_SIZE,
                 where: Sequence[str] | None = None) -> list[dict]:
        """One answer per text (`filled_row`), in the order of the texts."""
        check_top_k(top_k, self.tokenizer.vocab_size)
        rows = self.encode(texts, where)
        return [filled_row(row, probs, self.tokenizer, top_k, whole_word)
                for row, probs in zip(rows, self.probabilities(rows, batch_size), strict=True)]


def _folder(path: str) -> str:
    """The folder of a checkpoint: ``path`` itself, or the folder of a Google checkpoint prefix or file."""
    if os.path.isdir(path):
        return path
    prefix = path.split(".data-")[0].removesuffix(".index")
    return os.path.dirname(os.path.abspath(path)) if os.path.isfile(prefix + ".index") else path


def check_source(path: str, family: str | None = None, maxlen: int | None = None, top_k: int = TOP_K) -> str:
    """What `open_filler` checks before a model loads (so before TensorFlow starts): the options, the folder's
    kind (`kerasbert.serving.embed.folder_kind`), a checkpoint's ``vocab.txt`` and a run's task. Returns the kind.

    Example:
    >>> check_source("/no/such/folder", family="electra")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ModelError: model: expected a family with a masked-LM head (bert, ...), found 'electra'...
    """
    from kerasbert.finetune.runs import finished_run

    check_top_k(top_k)
    check_maxlen(maxlen, None)
    if family is not None and str(family).lower() not in FILL_MASK_FAMILIES:
        _refuse_family(str(family).lower())
    kind = folder_kind(_folder(path))
    if kind in ("export", "sentence-transformers"):
        raise fail(ConfigError, path, "a checkpoint with its masked-LM head or a pretraining run folder",
                   f"an {kind} folder" if kind == "export" else "a sentence-transformers folder",
                   "fill-mask the checkpoint it was made from")
    if kind == "run":
        args = finished_run(path)
        if args.task != "mlm":
            raise fail(ConfigError, path, "a pretraining run (kerasbert pretrain, --task mlm)", f"a {args.task} run",
                       "a fine-tuned model has no masked LM: fill-mask the checkpoint it was trained from")
        if family is not None:
            raise fail(ConfigError, "model", "no family for a run folder (it holds its own)", repr(family))
    elif not any(os.path.isfile(os.path.join(_folder(path), name)) for name in ("vocab.txt", "tokenizer.json")):
        raise fail(ConfigError, path, "a checkpoint folder with its vocab.txt (or tokenizer.json)",
                   "no vocab.txt and no tokenizer.json",
                   "copy the vocab.txt (or tokenizer.json) that came with the checkpoint beside it")
    return kind


def _refuse_family(name: str) -> None:
    """A ModelError for a family without a masked LM, saying what it is for instead."""
    kind = "gpt" if name.startswith("gpt") else "t5" if "t5" in name else name
    raise fail(ModelError, "model", f"a family with a masked-LM head ({', '.join(FILL_MASK_FAMILIES)})", repr(name),
               _NO_MLM_HINTS.get(kind, ""))


def open_filler(path: str | os.PathLike, family: str | None = None, maxlen: int | None = None) -> MaskFiller:
    """Open a checkpoint (Google or Hugging Face) with its masked-LM head, or a pretraining run folder, to fill masks.

    Args:
        path: str. the folder, or a Google checkpoint prefix.
        family: str or None. a checkpoint's family, as bert4keras's ``model=`` (one of `FILL_MASK_FAMILIES`); None:
            the ``model_type`` of a Hugging Face config, else ``bert``. A run knows its own.
        maxlen: int or None. the word pieces a text keeps; None: `EMBED_MAXLEN` for a checkpoint, the run's
            ``--maxlen``; never more than the model's positions.

    Returns:
        A `MaskFiller`.
    """
    path = os.fspath(path)
    if check_source(path, family, maxlen) == "run":
        return _run(path, maxlen)
    return _checkpoint(path, family, maxlen)


def _run(path: str, maxlen: int | None) -> MaskFiller:
    """A pretraining run folder: its best model, which runs the masked LM at the positions it is given."""
    from kerasbert.finetune.runs import open_run
    from kerasbert.modeling import families

    loaded = open_run(path)
    return MaskFiller(path, "run", families.of_model(loaded.model).name,
                      model_maxlen(loaded.model, maxlen, loaded.args.maxlen or MAXLEN), loaded.tokenizer, loaded.model)


def _checkpoint(path: str, family: str | None, maxlen: int | None) -> MaskFiller:
    """A checkpoint: the encoder ``with_mlm``, its weights (a ModelError for a masked LM the checkpoint lacks),
    then its masked LM run at the masks alone (`kerasbert.modeling.heads.pretraining`)."""
    from kerasbert.modeling import families, heads
    from kerasbert.modeling.config import resolve_config
    from kerasbert.modeling.final_layers import MLM_HEADS
    from kerasbert.modeling.models import build_transformer_model

    folder = _folder(path)
    config = resolve_config(_config_file(folder))
    found = families.resolve(family, config)
    if found.heads not in MLM_HEADS:
        _refuse_family(found.name)
    _, vocab, tokenizer = checkpoint_tokenizer(folder)
    if tokenizer.token_to_id(MASK_TOKEN) in (None, tokenizer.token_to_id("[UNK]")):
        raise fail(ConfigError, vocab, f"a vocabulary with {MASK_TOKEN}", f"no {MASK_TOKEN}")
    if tokenizer.vocab_size > config.vocab_size:
        raise fail(ConfigError, vocab, f"at most the config's vocab_size, {config.vocab_size} word pieces",
                   str(tokenizer.vocab_size), "use the vocab.txt that came with the checkpoint")
    backbone = build_transformer_model(config, model=found.name, with_mlm=True, verbose=False)
    _load(backbone, path, found)
    return MaskFiller(path, "checkpoint", found.name, model_maxlen(backbone, maxlen, EMBED_MAXLEN), tokenizer,
                      heads.pretraining(backbone))


def _config_file(folder: str) -> str:
    """A checkpoint folder's ``bert_config.json``, else its ``config.json``."""
    google = os.path.join(folder, "bert_config.json")
    return google if os.path.isfile(google) else os.path.join(folder, "config.json")


def _load(backbone, path: str, family) -> None:
    """The checkpoint's weights; a ModelError naming the masked-LM variables it lacks (an encoder-only checkpoint),
    the loader's CheckpointError for any other."""
    from kerasbert.weights.checkpoint import checkpoint_format, load_checkpoint

    report = load_checkpoint(backbone, path, allow_missing=True, verbose=False)
    new = [name for name, _ in report.new]
    if not new:
        return
    if any(name.split("/")[0] not in _MLM_LAYERS for name in new):
        load_checkpoint(backbone, path, verbose=False)  # the encoder lacks some: the loader's own error
    if checkpoint_format(path) == "hf":
        from kerasbert.weights.hf import hf_format as format_of
    else:
        from kerasbert.weights.google import google_format as format_of
    table = format_of(family).names
    names = [table.get(tuple(name.split("/")[:2]), name) for name in new]
    raise fail(ModelError, path, "the masked-LM head's weights (a pretraining checkpoint, such as Google's release or "
               "a Hugging Face BertForMaskedLM folder)", f"{len(names)} missing: {', '.join(map(str, names))}",
               "this checkpoint holds the encoder alone (a fine-tuned or encoder-only one): fill-mask needs the one "
               "saved with its pretraining heads")


def fill_mask(model: str | os.PathLike | MaskFiller, texts, top_k: int = TOP_K, *, family: str | None = None,
              whole_word: bool = True, maxlen: int | None = None, batch_size: int = PREDICT_BATCH_SIZE) -> list[dict]:
    """A masked LM's guesses for each ``[MASK]`` of each text, best first, as Hugging Face's fill-mask pipeline.

    Args:
        model: str or MaskFiller. a Google checkpoint (folder or prefix) or Hugging Face folder with its masked-LM
            head, a pretraining run folder (`open_filler`), or a `MaskFiller` already open.
        texts: str or list of str. texts with 1 to `MAX_MASKS` ``[MASK]`` each.
        top_k: int. the guesses per mask (and per whole word), from 1 to the vocabulary's size.
        family: str or None. a checkpoint's family, as bert4keras's ``model=`` (`open_filler`).
        whole_word: bool. also guess whole words for each run of two or more adjacent masks.
        maxlen: int or None. the word pieces a text keeps (`open_filler`).
        batch_size: int. texts the model runs at once.

    Returns:
        list of dict, one per text: ``{"text", "masks": [{"position" (the character offset of the mask),
        "candidates": [{"token", "score", "token_id"}]}], "words": [{"position", "masks", "candidates":
        [{"word", "score", "token_ids"}]}], "filled"}`` (`filled_row`), scores the softmax probabilities.

    Example:
    >>> import tempfile
    >>> from kerasbert import build_transformer_model, save_hf_checkpoint
    >>> bert = build_transformer_model("tiny", with_mlm=True, verbose=False)
    >>> folder = save_hf_checkpoint(bert, tempfile.mkdtemp() + "/hf")
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"北京是中国的首都。"]
    >>> _ = open(folder + "/vocab.txt", "w", encoding="utf-8").write("\\n".join(vocab))
    >>> [row] = fill_mask(folder, "北京是中国的[MASK][MASK]。", top_k=3)
    >>> len(row["masks"]), len(row["masks"][0]["candidates"]), row["words"][0]["masks"], row["filled"][:6]
    (2, 3, 2, '北京是中国的')
    """
    texts = check_texts(texts)
    check_top_k(top_k)
    check_batch_size(batch_size, "batch_size")
    if isinstance(model, MaskFiller):
        if (family, maxlen) != (None, None):
            raise fail(ConfigError, "fill_mask", "family and maxlen left out with an open MaskFiller",
                       f"family={family!r}, maxlen={maxlen!r}", "pass them to open_filler instead")
        return model(texts, top_k, whole_word, batch_size)
    return open_filler(model, family, maxlen)(texts, top_k, whole_word, batch_size)
