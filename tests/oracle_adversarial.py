"""Runs bert4keras's adversarial training, gradient penalty, virtual adversarial training and integrated gradients
examples' own code as the oracle. Never imported by the tests.

Usage: python oracle_adversarial.py JOB.json (run by `helpers.run_bert4keras`, with TF_KERAS=1 and
TF_USE_LEGACY_KERAS=1).

The examples rewrite ``model.train_function`` with ``K.gradients`` and ``model.total_loss``, which exist in Keras
2.3's graph: tf-keras 2.x has them in its graph mode (``tf.compat.v1.disable_eager_execution``), where the
functions below run as the examples define them (task_iflytek_adversarial_training.py,
task_iflytek_gradient_penalty.py, task_sentiment_virtual_adversarial_training.py,
task_sentiment_integrated_gradients.py), unchanged.

JOB.json: {"out", "config", "checkpoint", "cases": [{"name", "method", "num_classes", "lr", "head" (npz: kernel,
bias), "data" (npz: token_ids, segment_ids, labels), "batch_size", "steps", "epsilon", "seed"}], "explain":
{"num_classes", "head", "token_ids", "segment_ids", "n"}}. Each case stores its losses and, after steps 1 and
``steps``, every weight under its Google name (the encoder's, bert4keras's variable mapping) or
"CLS-Dense/kernel|bias" as "<name>/<step>/<weight>"; "explain/..." holds the integrated gradients.
"""

import json
import sys

if __name__ != "__main__":  # it turns eager execution off for its whole process
    raise ImportError("tests/oracle_adversarial.py runs only as a script, in bert4keras's subprocess")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()  # Keras 2.3's graph, where K.gradients and model.total_loss exist

from bert4keras.backend import K, batch_gather, keras, search_layer  # noqa: E402

keras.optimizers.Optimizer = keras.optimizers.legacy.Optimizer  # bert4keras's optimizers subclass the legacy one
from bert4keras.models import build_transformer_model  # noqa: E402
from bert4keras.optimizers import Adam  # noqa: E402


# ------------------------------------------------------------------------------- the examples' functions, unchanged
def adversarial_training(model, embedding_name, epsilon=1):
    if model.train_function is None:
        model._make_train_function()
    old_train_function = model.train_function
    for output in model.outputs:
        embedding_layer = search_layer(output, embedding_name)
        if embedding_layer is not None:
            break
    if embedding_layer is None:
        raise Exception('Embedding layer not found')
    embeddings = embedding_layer.embeddings
    gradients = K.gradients(model.total_loss, [embeddings])
    gradients = K.zeros_like(embeddings) + gradients[0]
    inputs = (model._feed_inputs + model._feed_targets + model._feed_sample_weights)
    embedding_gradients = K.function(inputs=inputs, outputs=[gradients], name='embedding_gradients')

    def train_function(inputs):
        grads = embedding_gradients(inputs)[0]
        delta = epsilon * grads / (np.sqrt((grads**2).sum()) + 1e-8)
        K.set_value(embeddings, K.eval(embeddings) + delta)
        outputs = old_train_function(inputs)
        K.set_value(embeddings, K.eval(embeddings) - delta)
        return outputs

    model.train_function = train_function


def sparse_categorical_crossentropy(y_true, y_pred):
    y_true = K.reshape(y_true, K.shape(y_pred)[:-1])
    y_true = K.cast(y_true, 'int32')
    y_true = K.one_hot(y_true, K.shape(y_pred)[-1])
    return K.categorical_crossentropy(y_true, y_pred)


def loss_with_gradient_penalty(y_true, y_pred, epsilon=1):
    loss = K.mean(sparse_categorical_crossentropy(y_true, y_pred))
    embeddings = search_layer(y_pred, 'Embedding-Token').embeddings
    gp = K.sum(K.gradients(loss, [embeddings])[0].values**2)
    return loss + 0.5 * epsilon * gp


def virtual_adversarial_training(model, embedding_name, epsilon=1, xi=10, iters=1):
    if model.train_function is None:
        model._make_train_function()
    old_train_function = model.train_function
    for output in model.outputs:
        embedding_layer = search_layer(output, embedding_name)
        if embedding_layer is not None:
            break
    if embedding_layer is None:
        raise Exception('Embedding layer not found')
    embeddings = embedding_layer.embeddings
    gradients = K.gradients(model.total_loss, [embeddings])
    gradients = K.zeros_like(embeddings) + gradients[0]
    inputs = (model._feed_inputs + model._feed_targets + model._feed_sample_weights)
    model_outputs = K.function(inputs=inputs, outputs=model.outputs, name='model_outputs')
    embedding_gradients = K.function(inputs=inputs, outputs=[gradients], name='embedding_gradients')

    def l2_normalize(x):
        return x / (np.sqrt((x**2).sum()) + 1e-8)

    def train_function(inputs):
        outputs = model_outputs(inputs)
        inputs = inputs[:2] + outputs + inputs[3:]
        delta1, delta2 = 0.0, np.random.randn(*K.int_shape(embeddings))
        for _ in range(iters):
            delta2 = xi * l2_normalize(delta2)
            K.set_value(embeddings, K.eval(embeddings) - delta1 + delta2)
            delta1 = delta2
            delta2 = embedding_gradients(inputs)[0]
        delta2 = epsilon * l2_normalize(delta2)
        K.set_value(embeddings, K.eval(embeddings) - delta1 + delta2)
        outputs = old_train_function(inputs)
        K.set_value(embeddings, K.eval(embeddings) - delta2)
        return outputs

    model.train_function = train_function


class Gradient(keras.layers.Layer):
    def __init__(self, **kwargs):
        super(Gradient, self).__init__(**kwargs)  # noqa: UP008
        self.supports_masking = True

    def call(self, input):
        input, output, label = input
        output = batch_gather(output, label)
        return K.gradients(output, [input])[0] * input

    def compute_output_shape(self, input_shape):
        return input_shape[0]


# ------------------------------------------------------------------------------- the runs
def classifier(job, num_classes, head):
    """The examples' model: bert4keras's BERT, ``x[:, 0]``, a softmax Dense with the job's weights."""
    bert = build_transformer_model(config_path=job["config"], checkpoint_path=job["checkpoint"],
                                   return_keras_model=False)
    output = keras.layers.Lambda(lambda x: x[:, 0])(bert.model.output)
    output = keras.layers.Dense(units=num_classes, activation='softmax', kernel_initializer=bert.initializer,
                                name="CLS-Dense")(output)
    model = keras.models.Model(bert.model.input, output)
    weights = np.load(head)
    model.get_layer("CLS-Dense").set_weights([weights["kernel"], weights["bias"]])
    return bert, model


def snapshot(bert, model, prefix):
    """Every weight under its Google name (the Dense's as CLS-Dense/...), keys prefixed."""
    out = {}
    for name, variables in bert.variable_mapping().items():
        layer = bert.layers.get(name)
        if layer is not None:
            out.update({f"{prefix}/{variable}": K.get_value(weight)
                        for weight, variable in zip(layer.trainable_weights, variables, strict=True)})
    dense = model.get_layer("CLS-Dense")
    out.update({f"{prefix}/CLS-Dense/kernel": K.get_value(dense.kernel),
                f"{prefix}/CLS-Dense/bias": K.get_value(dense.bias)})
    return out


def train_case(job, case):
    """One method's steps, as its example compiles and rewrites the model."""
    K.clear_session()
    bert, model = classifier(job, case["num_classes"], case["head"])
    method, epsilon = case["method"], case["epsilon"]
    loss = {"fgm": "sparse_categorical_crossentropy", "vat": "kld",
            "gp": lambda y_true, y_pred: loss_with_gradient_penalty(y_true, y_pred, epsilon)}[method]
    model.compile(loss=loss, optimizer=Adam(case["lr"]))
    if method == "fgm":
        adversarial_training(model, 'Embedding-Token', epsilon)
    elif method == "vat":
        virtual_adversarial_training(model, 'Embedding-Token', epsilon)
    data, size = np.load(case["data"]), case["batch_size"]
    np.random.seed(case["seed"])
    out, losses = {}, []
    for step in range(case["steps"]):
        rows = slice(step * size, (step + 1) * size)
        labels = data["labels"][rows]
        if method == "vat":  # the example's unlabeled batches: one-hot labels of class 0, replaced by predictions
            labels = keras.utils.to_categorical(np.zeros(len(labels)), case["num_classes"])
        result = model.train_on_batch([data["token_ids"][rows], data["segment_ids"][rows]], labels)
        losses.append(result[0] if isinstance(result, list) else result)
        if step + 1 in (1, case["steps"]):
            out.update(snapshot(bert, model, f"{case['name']}/{step + 1}"))
    out[f"{case['name']}/losses"] = np.array(losses)
    return out


def explain(job, task):
    """task_sentiment_integrated_gradients.py on the job's classifier and text."""
    K.clear_session()
    _, model = classifier(job, task["num_classes"], task["head"])
    token_ids, segment_ids = task["token_ids"], task["segment_ids"]
    label_in = keras.layers.Input(shape=(1,))
    input = model.get_layer('Embedding-Token').output
    output = model.output
    grads = Gradient()([input, output, label_in])
    grad_model = keras.models.Model(model.inputs + [label_in], grads)
    embeddings = model.get_layer('Embedding-Token').embeddings
    values = K.eval(embeddings)
    preds = model.predict([[token_ids], [segment_ids]])
    label = np.argmax(preds[0])
    pred_grads = []
    n = task["n"]
    for i in range(n):
        alpha = 1.0 * i / (n - 1)
        K.set_value(embeddings, alpha * values)
        pred_grad = grad_model.predict([[token_ids], [segment_ids], [[label]]])[0]
        pred_grads.append(pred_grad)
    pred_grads = np.mean(pred_grads, 0)
    scores = np.sqrt((pred_grads**2).sum(axis=1))
    norm = (scores - scores.min()) / (scores.max() - scores.min())
    scores = np.abs(pred_grads).max(axis=1)
    peak = (scores - scores.min()) / (scores.max() - scores.min())
    return {"explain/label": np.array(label), "explain/probabilities": preds[0], "explain/gradients": pred_grads,
            "explain/norm": norm, "explain/max": peak}


def main(path):
    with open(path) as f:
        job = json.load(f)
    out = {}
    for case in job.get("cases", []):
        out.update(train_case(job, case))
    if "explain" in job:
        out.update(explain(job, job["explain"]))
    np.savez(job["out"], **out)


if __name__ == "__main__":
    main(sys.argv[1])
