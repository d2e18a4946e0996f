"""How much of the texts a vocabulary covers: the share of their word pieces that are ``[UNK]``, and a warning when it
is high (`warn_unknown`).

A vocabulary of another language (English text with a Chinese character vocabulary) turns nearly every word into
``[UNK]``: the model then sees the same few ids for every text, and its answers (vectors, labels) are alike for all
of them, with no error anywhere. Past `UNKNOWN_SHARE` of the word pieces, embedding, training, evaluation and
prediction log one warning per data set, with the share and one text that shows it. Real text with its own
vocabulary stays far below: a rare character or an emoji here and there.
"""

from __future__ import annotations

from collections.abc import Sequence

from kerasbert.log import logger

__all__ = ["UNKNOWN_SHARE", "unknown_share", "warn_unknown"]

UNKNOWN_SHARE = 0.05  # the share of [UNK] word pieces past which the texts are warned about


def unknown_share(rows: Sequence[Sequence[int]], unk_id: int, specials: Sequence[int] = ()) -> float:
    """The share of ``[UNK]`` (``unk_id``) among the ids of ``rows``, ``specials`` ([CLS], [SEP]) not counted; 0 for
    rows without pieces.

    Example:
    >>> unknown_share([[2, 1, 1, 5, 3], [2, 6, 3]], unk_id=1, specials=(2, 3))
    0.5
    """
    unknown = sum(row.count(unk_id) for row in map(list, rows))
    pieces = sum(len(row) - sum(row.count(special) for special in specials) for row in map(list, rows))
    return unknown / pieces if pieces else 0.0


def warn_unknown(tokenizer, rows: Sequence[Sequence[int]], texts: Sequence[str], what: str) -> float:
    """Log one warning when more than `UNKNOWN_SHARE` of the word pieces of ``rows`` are ``[UNK]``, naming ``what``
    (the data), the share and the first of ``texts`` (one per row) whose own share is that high. Returns the share.

    Args:
        tokenizer: Tokenizer. gives the ids of [UNK], [CLS] and [SEP].
        rows: sequence of sequences of int. the token ids of the texts.
        texts: sequence of str. the text of each row.
        what: str. the data, as the log names it (a file, ``"input"``, ``"texts"``).
    """
    unk_id, specials = tokenizer.token_to_id("[UNK]"), (tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]"))
    share = unknown_share(rows, unk_id, specials)
    if share > UNKNOWN_SHARE:
        example = next((text for text, row in zip(texts, rows, strict=False)
                        if unknown_share([row], unk_id, specials) > UNKNOWN_SHARE), texts[0] if texts else "")
        shown = example if len(example) <= 60 else example[:60] + "..."
        logger.warning("%s: %.1f%% of the word pieces are [UNK] (more than %.0f%%), e.g. in %r: the vocabulary does "
                       "not cover this text, and the model sees little of it. Use the vocab.txt of the checkpoint, "
                       "of a model for this language", what, 100 * share, 100 * UNKNOWN_SHARE, shown)
    return share
