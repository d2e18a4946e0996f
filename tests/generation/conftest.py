"""The generation tests' models: tiny lm and unilm models of every family with random weights, built once a session.

Weights are drawn wide (σ 0.3) so that next-token distributions are peaked and differ from position to position:
beams then part ways, and an end token chosen from a model's own greedy output ends sequences at different steps.
"""

from __future__ import annotations

import collections

import keras
import numpy as np
import pytest

SOURCES = [[2, 17, 30, 44, 3], [2, 9, 3], [2, 61, 62, 63, 64, 65, 66, 3], [2, 100, 101, 3]]  # [CLS] ... [SEP]


def random_model(family: str, application: str, **kwargs) -> keras.Model:
    """A tiny ``family`` model for ``application`` whose weights (all but the norms' γ) are drawn from N(0, 0.3²)."""
    from kerasbert import build_transformer_model

    keras.utils.set_random_seed(0)
    extra = {"embedding_size": 16} if family == "albert" else {}
    model = build_transformer_model("tiny", model=family, application=application, verbose=False, **extra, **kwargs)
    rng = np.random.default_rng(1)
    for weight in model.weights:
        if "gamma" not in weight.path:
            weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    return model


@pytest.fixture(scope="session")
def language_model():
    """``language_model(family, application, **build_kwargs)``: `random_model`, built once a session."""
    built: dict = {}

    def get(family: str = "bert", application: str = "unilm", **kwargs) -> keras.Model:
        key = (family, application, tuple(sorted(kwargs.items())))
        if key not in built:
            built[key] = random_model(family, application, **kwargs)
        return built[key]

    return get


@pytest.fixture(scope="session")
def sources() -> list[list[int]]:
    """Four sources of different lengths."""
    return [list(source) for source in SOURCES]


@pytest.fixture(scope="session")
def end_token():
    """``end_token(model)``: the token of the model's greedy outputs on `SOURCES` (8 tokens each) that first
    appears at the most different steps (absent counts as a step), so that sequences end at different steps."""
    from kerasbert import generate

    def get(model: keras.Model) -> int:
        outputs = [one.ids[0] for one in generate(model, SOURCES, max_length=8)]
        counts = collections.Counter(t for ids in outputs for t in ids)
        steps = {t: len({ids.index(t) if t in ids else -1 for ids in outputs}) for t in counts}
        return max(counts, key=lambda t: (steps[t], counts[t]))

    return get
