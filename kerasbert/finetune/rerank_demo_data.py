"""A generated Chinese reranking corpus: questions about a person and candidate passages, one of which answers.

Each query asks one fact of one person (where they work, where they come from, which university they finished,
where they live now) in one of the fact's wordings. Its candidates are the person's four facts, shuffled, as a
retriever would find them for the person's name: the answer (label 1) and three passages that name the person but
answer something else (label 0). Two facts are places (the home province or city, where the person lives now), so
only the words of a fact, read against the question's, tell the answer from the hardest negative. A ranker that
reads nothing ranks the answer at a random place among four, an MRR@10 of about 0.52 (``RANDOM_MRR``). The same
seed gives the same bytes (a local ``random.Random``).

`write_rerank_data` writes ``{train,dev,test}.jsonl`` of ``{"query", "passage", "label"}`` and a character
``vocab.txt``; ``kerasbert demo --task rerank`` trains on it.

Example:
>>> query, passages = rerank_groups(1, seed=3)[0]
>>> len(passages), sorted(label for _, label in passages)
(4, [0, 0, 0, 1])
"""

from __future__ import annotations

import json
import random

from kerasbert.finetune.demo_data import LOCATIONS, ORGANIZATIONS, _person, title_vocabulary, write_splits

__all__ = ["FACTS", "RANDOM_MRR", "rerank_groups", "write_rerank_data"]

VALUES = {"ORG": ORGANIZATIONS[4:], "UNI": ORGANIZATIONS[:4], "PLACE": LOCATIONS, "CITY": LOCATIONS[:14]}
# fact -> (the kind of its value, its question wordings, its passage wordings)
FACTS = {
    "work": ("ORG", ("{PER}在哪里工作", "{PER}在哪个单位上班", "{PER}的工作单位是哪里"),
             ("{PER}在{X}工作", "{PER}每天去{X}上班", "{PER}是{X}的员工")),
    "home": ("PLACE", ("{PER}是哪里人", "{PER}的老家在哪里", "{PER}出生在哪里"),
             ("{PER}是{X}人", "{PER}的老家在{X}", "{PER}出生在{X}")),
    "school": ("UNI", ("{PER}毕业于哪所大学", "{PER}在哪里读的大学", "{PER}是哪个学校毕业的"),
               ("{PER}毕业于{X}", "{PER}在{X}读的大学", "{PER}是{X}的毕业生")),
    "live": ("CITY", ("{PER}现在住在哪里", "{PER}住在哪个城市", "{PER}一家现在在哪里生活"),
             ("{PER}现在住在{X}", "{PER}一家人住在{X}", "{PER}最近搬到了{X}")),
}
RANDOM_MRR = sum(1 / rank for rank in range(1, len(FACTS) + 1)) / len(FACTS)  # the answer at a random rank


def _group(rng: random.Random) -> tuple[str, list[tuple[str, int]]]:
    """One query and its labelled candidates, the asked person's facts, shuffled."""
    person, asked = _person(rng), rng.choice(sorted(FACTS))
    query = rng.choice(FACTS[asked][1]).format(PER=person)
    candidates = []
    for fact, (kind, _, wordings) in FACTS.items():
        candidates.append((rng.choice(wordings).format(PER=person, X=rng.choice(VALUES[kind])), int(fact == asked)))
    rng.shuffle(candidates)
    return query, candidates


def rerank_groups(n: int = 1000, seed: int = 0) -> list[tuple[str, list[tuple[str, int]]]]:
    """``n`` queries, each with its ``(passage, label)`` candidates, one a fact.

    Example:
    >>> rerank_groups(2, seed=1) == rerank_groups(2, seed=1)
    True
    """
    rng, groups, seen = random.Random(seed), [], set()
    while len(groups) < n:  # each query once: a file's pairs are grouped by their query's text
        query, passages = _group(rng)
        if query not in seen:
            seen.add(query)
            groups.append((query, passages))
    return groups


def write_rerank_data(folder: str, seed: int = 0, n_train: int = 1000, n_dev: int = 50,
                      n_test: int = 50) -> dict[str, str]:
    """Write `rerank_groups` splits as JSONL (``{"query", "passage", "label"}`` a line, a query's candidates one after
    the other) and their ``vocab.txt`` into ``folder`` (created if needed); each split drawn with its own seed,
    derived from ``seed``.

    Args:
        folder: str. where to write.
        seed: int. the random seed; the same seed writes the same bytes.
        n_train: int. queries in the training split (four pairs each).
        n_dev: int. queries in the dev split.
        n_test: int. queries in the test split.

    Returns:
        dict from ``train``, ``dev``, ``test`` and ``vocab`` to the paths.

    Example:
    >>> import tempfile
    >>> paths = write_rerank_data(tempfile.mkdtemp(), n_train=2, n_dev=1, n_test=1)
    >>> sorted(paths), len(open(paths["dev"], encoding="utf-8").readlines())
    (['dev', 'test', 'train', 'vocab'], 4)
    """
    def lines(size: int, split_seed: int):
        return (json.dumps({"query": query, "passage": passage, "label": label}, ensure_ascii=False) + "\n"
                for query, passages in rerank_groups(size, split_seed) for passage, label in passages)

    wordings = tuple(wording for _, asked, told in FACTS.values() for wording in (*asked, *told))
    return write_splits(folder, seed, (n_train, n_dev, n_test), lines, ".jsonl", title_vocabulary(wordings))
