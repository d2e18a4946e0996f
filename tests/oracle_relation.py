"""Runs bert4keras 0.11.5's GPLinker (examples/task_relation_extraction_gplinker.py) on tf-keras as the reference
oracle of ``--task relation``. Never imported by the tests.

Usage: python oracle_relation.py JOB.json, with TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 (`helpers.run_bert4keras`).

JOB.json: {"config", "checkpoint", "vocab", "maxlen", "head_size", "predicates": [...], "rows": [{"text",
"spo_list": [[subject, predicate, object]]}], "weights": "weights.npz" (per pointer ``entity``, ``head``, ``tail``:
"<pointer>/<weight index>", the layer's weights in bert4keras's order), "out"}. out.npz holds the batch the
example's ``data_generator`` builds of the rows (``token_ids``, ``entity_labels``, ``head_labels``,
``tail_labels``), the three pointers' logits on it (``entity``, ``head``, ``tail``; masked spans -1e12 there), the
example's loss on it (``loss``, and per pointer ``loss/<pointer>``) and, per row, the triples the example's
``extract_spoes`` finds (``spoes``, JSON lists of [subject, predicate, object], sorted).
"""

import json
import sys

import numpy as np

POINTERS = ("entity", "head", "tail")


def search(pattern, sequence):
    """The example's: the first index where ``pattern`` starts in ``sequence``, else -1."""
    n = len(pattern)
    for i in range(len(sequence)):
        if sequence[i:i + n] == pattern:
            return i
    return -1


def labels_of(tokenizer, row, predicate2id, maxlen):
    """The example's ``data_generator`` for one row: token ids and the three pointers' padded (i, j) lists."""
    from bert4keras.snippets import sequence_padding

    token_ids, _ = tokenizer.encode(row["text"], maxlen=maxlen)
    spoes = set()
    for s, p, o in row["spo_list"]:
        s, o = tokenizer.encode(s)[0][1:-1], tokenizer.encode(o)[0][1:-1]
        sh, oh = search(s, token_ids), search(o, token_ids)
        if sh != -1 and oh != -1:
            spoes.add((sh, sh + len(s) - 1, predicate2id[p], oh, oh + len(o) - 1))
    entity = [set() for _ in range(2)]
    head, tail = ([set() for _ in predicate2id] for _ in range(2))
    for sh, st, p, oh, ot in spoes:
        entity[0].add((sh, st))
        entity[1].add((oh, ot))
        head[p].add((sh, oh))
        tail[p].add((st, ot))
    for label in entity + head + tail:
        if not label:
            label.add((0, 0))
    return token_ids, [sequence_padding([list(spans) for spans in labels]) for labels in (entity, head, tail)]


def globalpointer_crossentropy(y_true, y_pred):
    """The example's loss of one pointer."""
    from bert4keras.backend import K, sparse_multilabel_categorical_crossentropy

    shape = K.shape(y_pred)
    y_true = y_true[..., 0] * K.cast(shape[2], K.floatx()) + y_true[..., 1]
    y_pred = K.reshape(y_pred, (shape[0], -1, K.prod(shape[2:])))
    loss = sparse_multilabel_categorical_crossentropy(y_true, y_pred, True)
    return K.mean(K.sum(loss, axis=1))


def extract_spoes(model, tokenizer, text, id2predicate, maxlen, threshold=0):
    """The example's ``extract_spoes``: one text's triples."""
    from bert4keras.snippets import to_array

    tokens = tokenizer.tokenize(text, maxlen=maxlen)
    mapping = tokenizer.rematch(text, tokens)
    token_ids, segment_ids = tokenizer.encode(text, maxlen=maxlen)
    outputs = [o[0] for o in model.predict(to_array([token_ids], [segment_ids]), verbose=0)]
    subjects, objects = set(), set()
    outputs[0][:, [0, -1]] -= np.inf
    outputs[0][:, :, [0, -1]] -= np.inf
    for kind, h, t in zip(*np.where(outputs[0] > threshold), strict=True):
        (subjects if kind == 0 else objects).add((h, t))
    spoes = set()
    for sh, st in subjects:
        for oh, ot in objects:
            for p in set(np.where(outputs[1][:, sh, oh] > threshold)[0]) & set(np.where(outputs[2][:, st, ot] >
                                                                                         threshold)[0]):
                spoes.add((text[mapping[sh][0]:mapping[st][-1] + 1], id2predicate[p],
                           text[mapping[oh][0]:mapping[ot][-1] + 1]))
    return sorted(spoes)


def main(path):
    import tensorflow as tf
    from bert4keras.backend import keras
    from bert4keras.layers import EfficientGlobalPointer as GlobalPointer
    from bert4keras.models import build_transformer_model
    from bert4keras.snippets import sequence_padding
    from bert4keras.tokenizers import Tokenizer

    with open(path) as f:
        job = json.load(f)
    weights = dict(np.load(job["weights"]))
    predicate2id = {p: i for i, p in enumerate(job["predicates"])}
    tokenizer = Tokenizer(job["vocab"], do_lower_case=True)
    base = build_transformer_model(job["config"], job["checkpoint"], return_keras_model=False)
    heads, size = len(predicate2id), job["head_size"]
    layers = [GlobalPointer(heads=2, head_size=size),
              GlobalPointer(heads=heads, head_size=size, RoPE=False, tril_mask=False),
              GlobalPointer(heads=heads, head_size=size, RoPE=False, tril_mask=False)]
    model = keras.models.Model(base.model.inputs, [layer(base.model.output) for layer in layers])
    for name, layer in zip(POINTERS, layers, strict=True):
        layer.set_weights([weights[f"{name}/{i}"] for i in range(len(layer.weights))])
    rows = [labels_of(tokenizer, row, predicate2id, job["maxlen"]) for row in job["rows"]]
    token_ids = sequence_padding([ids for ids, _ in rows])
    labels = [sequence_padding([row[1][k] for row in rows], seq_dims=2) for k in range(3)]
    logits = model.predict([token_ids, np.zeros_like(token_ids)], verbose=0)
    losses = [float(globalpointer_crossentropy(tf.constant(y, tf.float32), tf.constant(p)))
              for y, p in zip(labels, logits, strict=True)]
    id2predicate = dict(enumerate(job["predicates"]))
    spoes = [json.dumps(extract_spoes(model, tokenizer, row["text"], id2predicate, job["maxlen"]), ensure_ascii=False)
             for row in job["rows"]]
    out = {"token_ids": token_ids, "loss": np.float64(sum(losses)), "spoes": np.array(spoes)}
    for name, label, logit, loss in zip(POINTERS, labels, logits, losses, strict=True):
        out.update({f"{name}_labels": label, name: logit, f"loss/{name}": np.float64(loss)})
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
