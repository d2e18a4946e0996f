"""The relation task's data, without TensorFlow: (subject, predicate, object) triples read from DuIE-style JSONL,
their entities as word pieces, GPLinker's targets as pair codes, and the three pointers' logits back to triples.

A line is ``{"text", "spo_list": [{"subject", "predicate", "object"}]}``; ``object`` is a string or DuIE 2.0's
``{"@value": ...}``. Each entity is found in the text at ``subject_start`` / ``object_start`` where the line gives
them (character offsets), else at its first occurrence in the text's characters (bert4keras's GPLinker example
searches the first occurrence of its token ids instead: the same place unless the two differ, e.g. by case).

GPLinker (Su 2022, https://kexue.fm/archives/8888) reads a triple off three pointers over the word pieces: the
entity pointer (head 0: subject spans, head 1: object spans), the head pointer (per predicate: subject start to
object start) and the tail pointer (per predicate: subject end to object end). A target ``(kind, i, j)`` (``kind``
0 and 1 the entity heads, ``2 + p`` the head pointer's head ``p``, ``2 + P + p`` the tail pointer's) is one int,
its pair code (`pair_code`), and an example's codes are padded with 0 to its number of tokens, so that they pad and
bucket with them; the loss reads each pointer's targets back (`kerasbert.modeling.global_pointer.pair_targets`),
the sparse index lists bert4keras's example builds (`pointer_labels`). A triple is predicted where both entities
score > 0 and the head and tail pointers agree on a predicate (`found_triples`, the example's ``extract_spoes``).

Example:
>>> from kerasbert.text.tokenizer import Tokenizer
>>> tokenizer = Tokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"张伟在北京"])})
>>> example = RelationExample("张伟在北京", [(0, 2, "工作地", 3, 5)])
>>> features = encode_relations(tokenizer, [example], LabelSet(["工作地"]), maxlen=16)
>>> [sorted(heads[0]) for heads in pointer_labels(features.labels[0], 1)]
[[(1, 2)], [(1, 4)], [(2, 5)]]
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from kerasbert.errors import ConfigError, DataError, fail
from kerasbert.log import logger
from kerasbert.text.pipeline import Features
from kerasbert.text.readers import LabelSet, file_rows, get_field
from kerasbert.text.span_data import SpanExample, encode_spans

__all__ = ["CODE_LIMIT", "ENTITY_HEADS", "KEYS", "RelationExample", "RelationFeatures", "Triple", "code_pair",
           "encode_relations", "examples_of_rows", "found_triples", "iter_relation_examples", "pair_code",
           "pointer_labels", "portable_predict", "string_triples", "triple_row", "triple_rows", "width"]

CODE_LIMIT = 2**31 - 1  # pair codes are int32
ENTITY_HEADS = 2  # the entity pointer's heads: subjects, objects
KEYS = ("subject", "predicate", "object")
Triple = tuple[int, int, str, int, int]  # subject start, end, predicate, object start, end (characters, end exclusive)


@dataclass
class RelationExample:
    """A text and its triples as character spans.

    Args:
        text: str. the text.
        triples: list of ``(subject_start, subject_end, predicate, object_start, object_end)``. character offsets
            into ``text``, ends exclusive, sorted, each once.
        line: int. the file line (1-based), for messages.
    """

    text: str
    triples: list[Triple] = field(default_factory=list)
    line: int = field(default=0, compare=False)


def _entity(spo: dict, key: str, text: str, where: str) -> tuple[int, int]:
    """The character span of ``spo``'s subject or object: at ``<key>_start`` when given, else where the text first
    holds it."""
    value = spo[key]
    if key == "object" and isinstance(value, dict):  # DuIE 2.0: {"@value": ..., other slots}
        value = value.get("@value")
    if not isinstance(value, str) or not value:
        raise fail(DataError, f"{where} {key}", "a non-empty string" + (' (or {"@value": string})'
                                                                         if key == "object" else ""),
                   repr(spo[key])[:80])
    start = spo.get(f"{key}_start")
    if start is None:
        start = text.find(value)
        if start < 0:
            raise fail(DataError, f"{where} {key}", f"an entity the text holds, {text[:40]!r}", repr(value),
                       f"give {key}_start, or fix the {key}")
    elif isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= len(text) - len(value):
        raise fail(DataError, f"{where} {key}_start", f"an offset from 0 to {len(text) - len(value)} (the text has "
                   f"{len(text)} characters, the {key} {len(value)})", repr(start))
    elif text[start:start + len(value)] != value:
        raise fail(DataError, f"{where} {key}_start", f"the offset of {value!r} in the text",
                   f"{start}, where the text holds {text[start:start + len(value)]!r}")
    return start, start + len(value)


def _triple(spo: object, text: str, where: str) -> Triple:
    """One spo of a line as a `Triple`."""
    if not isinstance(spo, dict) or any(key not in spo for key in KEYS):
        raise fail(DataError, where, 'an spo {"subject", "predicate", "object"}', repr(spo)[:80])
    predicate = spo["predicate"]
    if not isinstance(predicate, str) or not predicate:
        raise fail(DataError, f"{where} predicate", "a non-empty string", repr(predicate))
    return (*_entity(spo, "subject", text, where), predicate, *_entity(spo, "object", text, where))


def iter_relation_examples(path: str) -> Iterator[RelationExample]:
    """The examples of a DuIE-style JSONL file, one at a time.

    Raises:
        DataError: naming the file and line: a line that is no JSON object with a string ``text``, an ``spo_list``
            that is no list, an spo that is no object of ``subject``, ``predicate`` and ``object``, an entity the
            text does not hold, an offset past the text or not at its entity; an empty file.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.jsonl")
    >>> spo = '{"subject": "张伟", "predicate": "工作地", "object": {"@value": "北京"}}'
    >>> _ = open(path, "w").write('{"text": "张伟在北京", "spo_list": [%s]}\\n' % spo)
    >>> next(iter_relation_examples(path)).triples
    [(0, 2, '工作地', 3, 5)]
    """
    for line, row in file_rows(path, "jsonl"):
        where = f"{path}:{line}"
        text = get_field(row, "text", where)
        spo_list = row.get("spo_list", []) if isinstance(row, dict) else None
        if not isinstance(spo_list, list):
            raise fail(DataError, f"{where} spo_list", "a list of spo objects", repr(spo_list)[:80])
        yield RelationExample(text, sorted({_triple(spo, text, where) for spo in spo_list}), line)


def string_triples(example: RelationExample) -> list[tuple[str, str, str]]:
    """``(subject, object, predicate)`` strings of an example's triples, as the example's evaluation compares them
    (the predicate last: `kerasbert.finetune.metrics.entity_metrics` counts it as the type).

    Example:
    >>> string_triples(RelationExample("张伟在北京", [(0, 2, "工作地", 3, 5)]))
    [('张伟', '北京', '工作地')]
    """
    text = example.text
    return [(text[a:b], text[c:d], predicate) for a, b, predicate, c, d in example.triples]


def pair_code(kind: int, i: int, j: int, kinds: int) -> int:
    """The int that stands for target ``(kind, i, j)`` (of ``kinds``; ``i``, ``j`` positions in the model's input):
    ``1 + kind + kinds·pair(i, j)``, ``pair`` Szudzik's (``j·j + i`` where ``i < j``, else ``i·i + i + j``), which
    needs no sequence length; 0 is none.

    Example:
    >>> pair_code(1, 2, 5, kinds=4), code_pair(110, kinds=4)
    (110, (1, 2, 5))
    """
    return 1 + kind + kinds * (j * j + i if i < j else i * i + i + j)


def code_pair(code: int, kinds: int) -> tuple[int, int, int]:
    """``(kind, i, j)`` of a `pair_code`."""
    kind, index = (code - 1) % kinds, (code - 1) // kinds
    root = math.isqrt(index)
    rest = index - root * root
    return (kind, rest, root) if rest < root else (kind, root, rest - root)


def pointer_labels(codes: Sequence[int], predicates: int) -> tuple[list[set], list[set], list[set]]:
    """The targets of one example's pair codes as bert4keras's GPLinker example builds them: per head of the entity,
    head and tail pointers, the set of its ``(i, j)`` (before the example pads them with ``(0, 0)``)."""
    kinds = ENTITY_HEADS + 2 * predicates
    heads: list[set] = [set() for _ in range(kinds)]
    for code in codes:
        if code:
            kind, i, j = code_pair(int(code), kinds)
            heads[kind].add((i, j))
    return heads[:ENTITY_HEADS], heads[ENTITY_HEADS:ENTITY_HEADS + predicates], heads[ENTITY_HEADS + predicates:]


@dataclass
class RelationFeatures(Features):
    """`Features` of the relation task: the labels are pair codes, one row at least as long as its token row.

    Args:
        offsets: list of list of ``(start, end)``. per example, each kept word piece's character span.
        triples: int. the gold triples of the examples (with labels).
        dropped: dict. the gold triples not kept, by why: ``"maxlen"`` (an entity lies past the kept pieces),
            ``"boundaries"`` (an entity does not start and end on word pieces).
    """

    offsets: list[list[tuple[int, int]]] = field(default_factory=list)
    triples: int = 0
    dropped: dict = field(default_factory=lambda: {"maxlen": 0, "boundaries": 0})


def _codes(example: RelationExample, offsets: list[tuple[int, int]], predicates: LabelSet,
           features: RelationFeatures) -> list[int]:
    """One example's sorted pair codes (positions in the model's input: 1 is the first piece); the triples whose
    entities do not lie on its kept pieces counted."""
    starts, ends = {}, {}
    for i, (a, b) in enumerate(offsets, 1):
        starts.setdefault(a, i)
        ends[b] = i
    count, kinds, kept_end = len(predicates), ENTITY_HEADS + 2 * len(predicates), offsets[-1][1] if offsets else 0
    codes = set()
    for ss, se, predicate, os_, oe in example.triples:
        sh, st, oh, ot = starts.get(ss), ends.get(se), starts.get(os_), ends.get(oe)
        if None in (sh, st, oh, ot) or sh > st or oh > ot:
            features.dropped["maxlen" if max(se, oe) > kept_end else "boundaries"] += 1
            continue
        p = predicates.index(predicate)
        codes |= {pair_code(0, sh, st, kinds), pair_code(1, oh, ot, kinds),
                  pair_code(ENTITY_HEADS + p, sh, oh, kinds), pair_code(ENTITY_HEADS + count + p, st, ot, kinds)}
    features.triples += len(example.triples)
    return sorted(codes)


def encode_relations(tokenizer, examples: Sequence[RelationExample], predicates: LabelSet | None, maxlen: int,
                     what: str = "data") -> RelationFeatures:
    """Encode texts as ``[CLS] pieces [SEP]`` cut to ``maxlen`` (`kerasbert.text.span_data.encode_spans`) and, with
    ``predicates``, their triples as pair codes padded with 0 to the row's tokens.

    Triples an entity of which ``maxlen`` cuts or that does not start and end on word pieces are dropped, counted
    (`RelationFeatures.dropped`) and logged.

    Args:
        tokenizer: Tokenizer. the run's tokenizer.
        examples: sequence of RelationExample. the texts and their triples.
        predicates: LabelSet or None. the predicates (their ids are the head and tail pointers' heads); None: no
            labels (prediction).
        maxlen: int. the most tokens a text keeps, [CLS] and [SEP] included.
        what: str. the data named in the logs.
    """
    kinds = ENTITY_HEADS + 2 * len(predicates or ())
    if predicates is not None and pair_code(kinds - 1, maxlen - 1, maxlen - 1, kinds) > CODE_LIMIT:
        raise fail(ConfigError, "--maxlen", f"a length whose pairs of {kinds} heads fit an int32 code", str(maxlen),
                   "lower --maxlen")
    spans = encode_spans(tokenizer, [SpanExample(example.text) for example in examples], None, maxlen, what)
    features = RelationFeatures(spans.token_ids, spans.segment_ids, truncated=spans.truncated, offsets=spans.offsets)
    if predicates is not None:
        features.labels = []
        for example, offsets, ids in zip(examples, features.offsets, features.token_ids, strict=True):
            codes = _codes(example, offsets, predicates, features)
            features.labels.append(codes + [0] * (len(ids) - len(codes)))
    reasons = {"maxlen": f"have an entity past maxlen={maxlen} word pieces",
               "boundaries": "have an entity that does not start and end on word pieces"}
    for kind, count in features.dropped.items():
        if count:
            logger.warning("%s: %d of %d triples %s and were dropped", what, count, features.triples, reasons[kind])
    return features


def found_triples(logits: np.ndarray, count: int) -> list[tuple[int, int, int, int, int]]:
    """``(subject start, subject end, predicate, object start, object end)`` of each triple one row's logits
    ``[2 + 2P, S, S]`` (the entity, head and tail pointers, stacked) give over its ``count`` word pieces: the example's
    ``extract_spoes`` at threshold 0. Row positions (1 is the first piece); sorted.

    Example:
    >>> logits = np.full((4, 5, 5), -1.0)
    >>> logits[0, 1, 2] = logits[1, 3, 3] = logits[2, 1, 3] = logits[3, 2, 3] = 1.0  # 张伟 -> 北
    >>> found_triples(logits, 3)
    [(1, 2, 0, 3, 3)]
    """
    logits = np.asarray(logits)
    predicates = (logits.shape[0] - ENTITY_HEADS) // 2
    inner = logits[:, 1:count + 1, 1:count + 1]  # [CLS], [SEP] and padding left out
    subjects, objects = (np.argwhere(np.triu(inner[k] > 0)) for k in range(ENTITY_HEADS))
    if not len(subjects) or not len(objects):
        return []
    heads = inner[ENTITY_HEADS:ENTITY_HEADS + predicates][:, subjects[:, :1], objects[:, 0]] > 0  # [P, S, O]
    tails = inner[ENTITY_HEADS + predicates:][:, subjects[:, 1:], objects[:, 1]] > 0
    p, s, o = np.nonzero(heads & tails)
    return sorted((int(subjects[a, 0]) + 1, int(subjects[a, 1]) + 1, int(k), int(objects[b, 0]) + 1,
                   int(objects[b, 1]) + 1) for k, a, b in zip(p, s, o, strict=True))


def triple_row(text: str, found: Sequence[tuple[int, int, int, int, int]], offsets: Sequence[tuple[int, int]],
               predicates: Sequence[str]) -> dict:
    """One prediction row, ``{"spo_list": [{"subject", "subject_start", "subject_end", "predicate", "object",
    "object_start", "object_end"}]}``, of a text's `found_triples`: character offsets (ends exclusive), sorted by
    subject, predicate and object offsets, each once.

    Example:
    >>> triple_row("张伟在北京", [(1, 2, 0, 4, 5)], [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)], ["工作地"])["spo_list"]
    [{'subject': '张伟', 'subject_start': 0, 'subject_end': 2, 'predicate': '工作地', 'object': '北京', \
'object_start': 3, 'object_end': 5}]
    """
    spans = sorted({(offsets[sh - 1][0], offsets[st - 1][1], p, offsets[oh - 1][0], offsets[ot - 1][1])
                    for sh, st, p, oh, ot in found})
    return {"spo_list": [{"subject": text[ss:se], "subject_start": ss, "subject_end": se, "predicate": predicates[p],
                          "object": text[os_:oe], "object_start": os_, "object_end": oe}
                         for ss, se, p, os_, oe in spans]}


# ------------------------------------------------------------------------------------------- exports' parts
def width(shape: Sequence[int]) -> int:
    """The predicates a portable model's output row ``[2 + 2P, S, S]`` answers (`kerasbert.serving.task_exports`).

    Example:
    >>> width((8, 12, 12))
    3
    """
    return (int(shape[0]) - ENTITY_HEADS) // 2


def examples_of_rows(tokenizer, rows: Sequence[dict]) -> list[RelationExample]:
    """Unlabelled examples of ``{"text"}`` rows."""
    return [RelationExample(row["text"], [], i + 1) for i, row in enumerate(rows)]


def portable_predict(export, examples: Sequence[RelationExample], batch_size: int) -> list[dict]:
    """An OpenVINO or ONNX export's rows (`kerasbert.serving.runtime.PortableExport`): each text's stacked pointer
    logits decoded in NumPy (`found_triples`), as `kerasbert.predict` decodes them; rows run in batches of similar
    length (`PortableExport.run_features`)."""
    features = encode_relations(export.tokenizer, examples, None, export.info["maxlen"], "input")
    found = [found_triples(row, len(ids) - 2)
             for row, ids in zip(export.run_features(features, batch_size), features.token_ids, strict=True)]
    return [triple_row(example.text, row, offsets, export.labels.labels)
            for example, row, offsets in zip(examples, found, features.offsets, strict=True)]


def triple_rows(info: dict, rows: Sequence[dict], outputs: dict) -> list[dict]:
    """The prediction of each row from the SavedModel's padded outputs (`kerasbert.serving.relation_export`)."""
    def value(name: str, i: int, k: int):
        item = outputs[name][i, k]
        return item.decode() if isinstance(item, bytes) else int(item)

    names = ("subject", "subject_start", "subject_end", "predicate", "object", "object_start", "object_end")
    return [{"spo_list": [{name: value(name, i, k) for name in names} for k in range(int(outputs["triple_count"][i]))]}
            for i in range(len(rows))]
