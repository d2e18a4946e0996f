"""bert4keras's training hacks as Keras 3 steps: the functions its examples define, by their own names.

bert4keras's examples rewrite a compiled model's ``train_function`` with ``K.gradients`` (Keras 2's graph); Keras 3
has no such function to rewrite, so each of these gives the model a ``train_step`` that makes the same update on the
same batch (`kerasbert.finetune.adversarial`). A ported script deletes its own definition and imports the function:

- ``adversarial_training(model, embedding_name, epsilon=1)``: task_iflytek_adversarial_training.py's FGM;
- ``virtual_adversarial_training(model, embedding_name, epsilon=1, xi=10, iters=1)``:
  task_sentiment_virtual_adversarial_training.py's step on the model's own predictions, its first direction drawn
  by ``np.random.randn`` as there (so ``np.random.seed`` fixes it; the step then runs without XLA);
- ``gradient_penalty(model, embedding_name, epsilon=1)``: task_iflytek_gradient_penalty.py's
  ``loss_with_gradient_penalty``, whose ``K.gradients`` inside a loss has no Keras 3 form: compile with the plain
  loss (the example's own ``sparse_categorical_crossentropy``), then call this.

Each is called after ``compile``, as in the examples.

Example:
>>> import numpy as np, keras
>>> from kerasbert.compat.models import build_transformer_model
>>> bert = build_transformer_model("tiny", verbose=False)
>>> output = keras.layers.Dense(2, activation="softmax")(keras.layers.Lambda(lambda x: x[:, 0])(bert.output))
>>> model = keras.Model(bert.inputs, output)
>>> model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
>>> adversarial_training(model, "Embedding-Token", 0.5)
>>> ids = np.array([[2, 7, 3]])
>>> bool(np.isfinite(model.train_on_batch([ids, np.zeros_like(ids)], np.array([1]))))
True
"""

from __future__ import annotations

import keras

from kerasbert.finetune.adversarial import enable, numpy_normal

__all__ = ["adversarial_training", "gradient_penalty", "virtual_adversarial_training"]


def adversarial_training(model: keras.Model, embedding_name: str, epsilon: float = 1) -> None:
    """FGM on the embedding ``embedding_name`` of the compiled ``model``: each step trains at
    ``E + ε·g/(‖g‖+1e-8)``, ``g`` the loss's gradient by ``E``, as bert4keras's ``adversarial_training``.

    Args:
        model: keras.Model. compiled.
        embedding_name: str. the embedding layer's name (``"Embedding-Token"``).
        epsilon: float. the perturbation's norm.
    """
    enable(model, "fgm", epsilon, embedding_name=embedding_name)


def gradient_penalty(model: keras.Model, embedding_name: str, epsilon: float = 1) -> None:
    """The compiled loss ``L`` of ``model`` trained as ``L + ε/2·Σ‖∂L/∂e‖²`` over the looked-up rows ``e`` of
    ``embedding_name``, as bert4keras's ``loss_with_gradient_penalty``.

    Args:
        model: keras.Model. compiled with a loss whose gradient has a gradient (not Keras's fused sparse
            cross-entropy: the example's own one-hot ``sparse_categorical_crossentropy``).
        embedding_name: str. the embedding layer's name.
        epsilon: float. the penalty's weight.
    """
    enable(model, "gp", epsilon, embedding_name=embedding_name)


def virtual_adversarial_training(model: keras.Model, embedding_name: str, epsilon: float = 1, xi: float = 10,
                                 iters: int = 1) -> None:
    """VAT on ``embedding_name``: each step trains the compiled loss against the model's own predictions at
    ``E + ε·d/‖d‖``, ``d`` found by ``iters`` power iterations from a random direction of norm ``xi``, as
    bert4keras's ``virtual_adversarial_training`` (the batch's labels unused).

    Args:
        model: keras.Model. compiled (the example: ``loss="kld"``).
        embedding_name: str. the embedding layer's name.
        epsilon: float. the perturbation's norm.
        xi: float. the norm of the direction each power iteration tries.
        iters: int. power iterations.
    """
    if model.jit_compile:
        model.jit_compile = False  # its first direction is NumPy's draw, which XLA cannot run
    enable(model, "vat", epsilon, embedding_name=embedding_name, xi=xi, iters=iters, supervised=False,
           draw=numpy_normal)
