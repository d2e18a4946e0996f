"""Runs bert4keras 0.11.5 on tf-keras as the reference oracle. Never imported by the tests.

Usage: python oracle_bert4keras.py JOB.json  (run by `helpers.run_oracle`, which sets
TF_KERAS=1 and TF_USE_LEGACY_KERAS=1 before TensorFlow is imported).

JOB.json: {"out": "result.npz", "tasks": [{"kind": ..., ...}, ...]}. Each task's outputs are
stored in the npz as "<task index>/<output index>"; layer names as "<task index>/layers".
"""

import json
import sys

import numpy as np


def bert_outputs(task):
    """Build (and load) a bert4keras model, predict on the task's inputs; "gelu": its ``set_gelu`` first ("erf"
    unless given)."""
    from bert4keras.backend import set_gelu
    from bert4keras.models import build_transformer_model

    set_gelu(task.get("gelu", "erf"))
    model = build_transformer_model(task["config"], task.get("checkpoint"), **task.get("kwargs", {}))
    out = {"layers": np.array([layer.name for layer in model.layers])}
    if "inputs" in task:
        data = np.load(task["inputs"])
        outputs = model.predict([data["token_ids"], data["segment_ids"]], verbose=0)
        outputs = outputs if isinstance(outputs, list) else [outputs]
        out.update({str(i): o for i, o in enumerate(outputs)})
    return out


def family_checkpoint(task):
    """Write a random checkpoint of a family in its own Google names, as bert4keras maps them.

    task: config, model (the family), kwargs (the head flags that build every mapped layer), checkpoint (the
    prefix to write), seed, std. Every trainable weight gets normal(0, std) values (LayerNorm gammas near 1); each
    mapped layer's weights are saved under its ``variable_mapping`` names in their order, the NSP kernel
    transposed as bert4keras's ``create_variable`` does. Returns the layer names.
    """
    import tensorflow as tf
    from bert4keras.backend import K
    from bert4keras.models import build_transformer_model

    bert = build_transformer_model(task["config"], model=task["model"], return_keras_model=False, **task["kwargs"])
    rng = np.random.default_rng(task["seed"])
    for weight in bert.model.trainable_weights:
        value = rng.normal(0.0, task["std"], K.int_shape(weight)) + ("gamma" in weight.name)
        K.set_value(weight, value.astype("float32"))
    names, values = [], []
    for name, variables in bert.variable_mapping().items():
        layer = bert.layers.get(name)
        # a mapped layer the model lacks, or a name with no weight (RoFormer-V2's dropped biases), writes nothing
        for variable, weight in zip(variables, layer.trainable_weights if layer is not None else [], strict=False):
            value = K.get_value(weight)
            names.append(variable)
            values.append(value.T if variable == "cls/seq_relationship/output_weights" else value)
    tf.raw_ops.SaveV2(prefix=task["checkpoint"], tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(v) for v in values])
    return {"layers": np.array([layer.name for layer in bert.model.layers])}


def vocab(task):
    """bert4keras's load_vocab(simplified=True, startswith=...): the kept tokens and their ids."""
    from bert4keras.tokenizers import load_vocab

    token_dict, keep_tokens = load_vocab(task["path"], simplified=True, startswith=task["startswith"])
    return {"tokens": np.array(sorted(token_dict, key=token_dict.get)), "keep_tokens": np.array(keep_tokens)}


def crf(task):
    """bert4keras's CRF on given emissions/transitions/mask/labels: masked output, loss, accuracy, Viterbi paths.

    inputs npz: emissions [B, S, K], trans [K, K], mask [B, S] (right padding), labels [B, S].
    Paths are ViterbiDecoder(trans, starts, ends).decode on each unpadded row, -1 on padding.
    """
    import tensorflow as tf
    from bert4keras.layers import ConditionalRandomField
    from bert4keras.snippets import ViterbiDecoder

    data = np.load(task["inputs"])
    emissions, trans, mask = data["emissions"], data["trans"], data["mask"]
    layer = ConditionalRandomField()
    layer.build(emissions.shape)
    layer._trans.assign(trans)
    masked = layer.call(tf.constant(emissions), mask=tf.constant(mask))
    labels = tf.constant(data["labels"])
    paths = np.full(mask.shape, -1)
    for row, length in enumerate(mask.sum(1)):
        decoder = ViterbiDecoder(trans, task.get("starts"), task.get("ends"))
        paths[row, :length] = decoder.decode(emissions[row, :length].copy())
    return {"masked": masked.numpy(), "loss": layer.sparse_loss(labels, masked).numpy(),
            "accuracy": layer.sparse_accuracy(labels, masked).numpy(), "paths": paths}


def tokenizer(task):
    """bert4keras's Tokenizer on each [first, second, maxlen] case: tokens (whole and cut to maxlen), ids,
    segments, rematch, decode. With "pre_tokenize": "jieba", its RoFormer examples' ``jieba.cut(s, HMM=False)``;
    "token_start" and "token_end" as given (GPT's examples give None).

    Results are one JSON string under "json" (ragged lists), a list with one dict per case.
    """
    from bert4keras.tokenizers import Tokenizer

    pre_tokenize = None
    if task.get("pre_tokenize") == "jieba":
        import jieba

        pre_tokenize = lambda s: jieba.cut(s, HMM=False)  # noqa: E731 (as bert4keras's examples write it)
    ends = {key: task[key] for key in ("token_start", "token_end") if key in task}
    tok = Tokenizer(task["vocab"], do_lower_case=task["do_lower_case"], pre_tokenize=pre_tokenize, **ends)
    results = []
    for first, second, maxlen in task["cases"]:
        tokens = tok.tokenize(first)
        ids, segments = tok.encode(first, second, maxlen=maxlen)
        results.append({"tokens": tokens, "ids": ids, "segments": segments, "cut": tok.tokenize(first, maxlen=maxlen),
                        "rematch": tok.rematch(first, tokens), "decode": tok.decode(ids)})
    return {"json": np.array(json.dumps(results))}


def _head(kind, output, num_labels, lr_multiplier):
    """A head on bert4keras's sequence output, as its examples write it, named as kerasbert's."""
    from bert4keras.backend import keras
    from bert4keras.layers import ConditionalRandomField

    if kind == "lm":  # the MLM output's next-token probabilities; labels 0 do not count, as in kerasbert's loss
        return output, _next_token_loss, None
    if kind == "cls":
        output = keras.layers.Lambda(lambda x: x[:, 0], name="CLS-token")(output)
        output = keras.layers.Dense(num_labels, activation="softmax", name="CLS-Dense")(output)
        return output, "sparse_categorical_crossentropy", None
    if kind == "tagging":
        output = keras.layers.Dense(num_labels, activation="softmax", name="Tagging-Dense")(output)
        return output, "sparse_categorical_crossentropy", None
    output = keras.layers.Dense(num_labels, name="Tagging-Dense")(output)
    crf = ConditionalRandomField(lr_multiplier=lr_multiplier, name="Tagging-CRF")
    return crf(output), crf.sparse_loss, crf


def _next_token_loss(y_true, y_pred):
    """Cross-entropy summed over the labels that are not 0, over their count (bert4keras's seq2seq examples'
    ``CrossEntropy`` with the target mask folded into the labels)."""
    from bert4keras.backend import K

    y_true = K.cast(y_true, "int32")
    keep = K.cast(K.not_equal(y_true, 0), "float32")
    return K.sum(K.sparse_categorical_crossentropy(y_true, y_pred) * keep) / K.maximum(K.sum(keep), 1.0)


def train_steps(task):
    """bert4keras + a head, trained with tf.keras's plain Adam one batch at a time (``train_on_batch``).

    task: config, checkpoint, model (the family, bert unless given), application (encoder unless given), head
    ("cls" | "tagging" | "crf" | "lm": the MLM output, built with_mlm, on next-token labels; "pretrain": built
    with_nsp and with_mlm, on ``nsp_labels`` and the masked labels, the loss their sum; no head weights),
    num_labels, lr, batch_size, lr_multiplier,
    inputs (npz: token_ids, segment_ids, labels, optional sample_weight; rows taken in order), head_weights
    (npz: kernel, bias, optional trans, the CRF's effective transitions). Returns each step's loss, then every
    trained weight: the encoder's under its Google name (bert4keras's own variable mapping; the NSP kernel
    ``[2, H]`` as Google stores it), the head's as "<layer>/<weight>".
    """
    from bert4keras.backend import K, keras
    from bert4keras.models import build_transformer_model

    pretraining = task["head"] in ("lm", "pretrain")
    bert = build_transformer_model(task["config"], task["checkpoint"], model=task.get("model", "bert"),
                                   application=task.get("application", "encoder"), return_keras_model=False,
                                   **({"with_mlm": True} if pretraining else {}),
                                   **({"with_nsp": True} if task["head"] == "pretrain" else {}))
    if task["head"] == "pretrain":  # [NSP-Proba, MLM-Activation]
        output, loss, crf = bert.model.outputs, ["sparse_categorical_crossentropy", _next_token_loss], None
    else:
        output, loss, crf = _head(task["head"], bert.model.output, task["num_labels"], task.get("lr_multiplier", 1))
    model = keras.Model(bert.model.inputs, output)
    head = np.load(task["head_weights"])
    dense = None if pretraining else model.get_layer("CLS-Dense" if task["head"] == "cls" else "Tagging-Dense")
    if dense is not None:
        dense.set_weights([head["kernel"], head["bias"]])
    if crf is not None:
        K.set_value(crf._trans, head["trans"] / crf.lr_multiplier)
    model.compile(loss=loss, optimizer=keras.optimizers.Adam(task["lr"]))
    data, size = np.load(task["inputs"]), task["batch_size"]
    losses = []
    for start in range(0, len(data["labels"]), size):
        rows = slice(start, start + size)
        weights = data["sample_weight"][rows] if "sample_weight" in data else None
        labels = [data["nsp_labels"][rows], data["labels"][rows]] if "nsp_labels" in data else data["labels"][rows]
        loss = model.train_on_batch([data["token_ids"][rows], data["segment_ids"][rows]], labels,
                                    sample_weight=weights)
        losses.append(loss[0] if isinstance(loss, list) else loss)  # the total, before each output's
    out = {"losses": np.array(losses)}
    for name, variables in bert.variable_mapping().items():
        layer = bert.layers.get(bert.prefixed(name))
        if layer is not None:  # the mapping also names layers this model was built without (MLM, NSP)
            out.update({variable: K.get_value(weight).T if variable == "cls/seq_relationship/output_weights"
                        else K.get_value(weight)
                        for weight, variable in zip(layer.trainable_weights, variables, strict=True)})
    if dense is not None:
        out.update({f"{dense.name}/kernel": K.get_value(dense.kernel), f"{dense.name}/bias": K.get_value(dense.bias)})
    if crf is not None:
        out["Tagging-CRF/trans"] = K.get_value(crf.trans)
    return out


def snippets(task):
    """bert4keras's snippets on the task's cases, one JSON string under "json" (ragged lists):
    sequence_padding ("padding": [rows, kwargs], rows made arrays; returns values and dtype), truncate_sequences
    ("truncate": [maxlen, indices, lists]), text_segmentate ("segmentate": argument lists), to_array ("arrays":
    argument lists) and DataGenerator ("generators": n, batch_size, buffer_size, sized, random, seed, forfit
    (batches taken) or None for one epoch; batches of items in `sample` order).
    """
    import itertools

    from bert4keras.snippets import DataGenerator, sequence_padding, text_segmentate, to_array, truncate_sequences

    class Batches(DataGenerator):
        def __iter__(self, random=False):
            batch = []
            for is_end, item in self.sample(random):
                batch.append(item)
                if len(batch) == self.batch_size or is_end:
                    yield batch
                    batch = []

    padded = [sequence_padding([np.array(row) for row in rows], **kwargs) for rows, kwargs in task["padding"]]
    arrays = [to_array(*args) for args in task["arrays"]]
    generators = []
    for case in task["generators"]:
        np.random.seed(case["seed"])
        data = list(range(case["n"])) if case["sized"] else iter(range(case["n"]))
        gen = Batches(data, case["batch_size"], case["buffer_size"])
        batches = gen.forfit(case["random"]) if case["forfit"] else gen.__iter__(case["random"])
        generators.append({"len": len(gen) if case["sized"] else None,
                           "batches": list(itertools.islice(batches, case["forfit"] or None))})
    results = {
        "padding": [{"values": p.tolist(), "dtype": str(p.dtype)} for p in padded],
        "truncate": [truncate_sequences(maxlen, indices, *lists) for maxlen, indices, lists in task["truncate"]],
        "segmentate": [text_segmentate(*args) for args in task["segmentate"]],
        "arrays": [[a.tolist() for a in (r if isinstance(r, list) else [r])] for r in arrays],
        "generators": generators,
    }
    return {"json": np.array(json.dumps(results))}


def sp_tokenizer(task):
    """bert4keras's SpTokenizer on "model" with "token_start" and "token_end", on each [first, second, maxlen,
    truncate_from] case: tokens (whole and cut to maxlen), ids, segments, decode; then "ids" looked up
    (``id_to_token``), "tokens" looked up (``token_to_id``), each list of "decode" decoded, and the special ids.

    Results are one JSON string under "json".
    """
    from bert4keras.tokenizers import SpTokenizer

    tok = SpTokenizer(task["model"], token_start=task["token_start"], token_end=task["token_end"])
    cases = []
    for first, second, maxlen, truncate_from in task["cases"]:
        ids, segments = tok.encode(first, second, maxlen=maxlen, truncate_from=truncate_from)
        cases.append({"tokens": tok.tokenize(first), "cut": tok.tokenize(first, maxlen=maxlen), "ids": ids,
                      "segments": segments, "decode": tok.decode(ids)})
    specials = {name: getattr(tok, name, None) for name in ("_token_pad_id", "_token_unk_id", "_token_mask_id",
                                                             "_token_start_id", "_token_end_id", "_vocab_size")}
    return {"json": np.array(json.dumps({
        "cases": cases, "id_to_token": [tok.id_to_token(i) for i in task["ids"]],
        "token_to_id": tok.tokens_to_ids(task["tokens"]), "decode": [tok.decode(ids) for ids in task["decode"]],
        "specials": specials}))}


def decode(task):
    """bert4keras's AutoRegressiveDecoder on the toy scorer of tests/toy_decoder.py, one case at a time ("cases":
    see `toy_decoder.decode`); one JSON string under "json", per case its sequences of ids."""
    from bert4keras.snippets import AutoRegressiveDecoder

    import toy_decoder

    return {"json": np.array(json.dumps([toy_decoder.decode(AutoRegressiveDecoder, case) for case in task["cases"]]))}


def positions(task):
    """bert4keras's position layers on an input of ``length`` tokens: NEZHA's relative table of ``2K+1`` rows
    (K = ``max_distance``) gathered ``[S, S, d]`` ("relative"), RoFormer's rotary sinusoids ``[1, S, d]``
    ("rotary"), d = ``head_size``."""
    from bert4keras.backend import K
    from bert4keras.layers import RelativePositionEmbedding, SinusoidalPositionEmbedding

    x = K.zeros((1, task["length"], 2))
    relative = RelativePositionEmbedding(2 * task["max_distance"] + 1, task["head_size"],
                                         embeddings_initializer="Sinusoidal")
    rotary = SinusoidalPositionEmbedding(task["head_size"], merge_mode="zero")
    relative.build([K.int_shape(x)] * 2)  # (its compute_mask reads a mask that a bare input lacks)
    return {"relative": K.eval(relative.call([x, x])), "rotary": K.eval(rotary(x))}


KINDS = {"bert": bert_outputs, "family_checkpoint": family_checkpoint, "vocab": vocab,
         "crf": crf, "tokenizer": tokenizer, "sp_tokenizer": sp_tokenizer, "train": train_steps,
         "snippets": snippets, "decode": decode, "positions": positions}


def main(job_path, kinds=None):
    """Run the job's tasks with ``kinds`` (these of this script unless given: another oracle's) and save the npz."""
    with open(job_path) as f:
        job = json.load(f)
    result = {}
    for index, task in enumerate(job["tasks"]):
        for key, value in (kinds or KINDS)[task["kind"]](task).items():
            result[f"{index}/{key}"] = value
    np.savez(job["out"], **result)


if __name__ == "__main__":
    main(sys.argv[1])
