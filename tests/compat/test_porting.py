"""The [CLS] vector of a bert4keras script ported to Keras 3: ``Lambda(lambda x: x[:, 0])`` warns that it drops
the padding mask and its saved model loads only outside safe mode; ``TakeToken`` (docs/from-bert4keras.md) does
neither and gives the same numbers."""

from __future__ import annotations

import warnings

import keras
import numpy as np
import pytest

from kerasbert import build_transformer_model
from kerasbert.modeling.layers import TakeToken

import helpers

INPUTS = [np.array([[2, 5, 6, 3, 0, 0], [2, 7, 3, 0, 0, 0]]), np.zeros((2, 6), "int32")]


def _classifier(bert, take) -> tuple[keras.Model, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        output = keras.layers.Dense(2, activation="softmax", name="Dense")(take(bert.output))
        model = keras.Model(bert.inputs, output)
        model.predict(INPUTS, verbose=0)
    return model, [str(warning.message) for warning in caught if "mask" in str(warning.message)]


@pytest.fixture(scope="module")
def bert():
    return build_transformer_model(config=helpers.TINY, verbose=False)


def test_take_token_replaces_the_lambda(bert, tmp_path):
    ported, ported_warnings = _classifier(bert, TakeToken(0, name="CLS-token"))
    assert ported_warnings == []
    original, original_warnings = _classifier(bert, keras.layers.Lambda(lambda x: x[:, 0], name="CLS-token"))
    assert original_warnings and "will therefore destroy the mask information" in original_warnings[0]
    original.get_layer("Dense").set_weights(ported.get_layer("Dense").get_weights())
    np.testing.assert_array_equal(original.predict(INPUTS, verbose=0), ported.predict(INPUTS, verbose=0))
    ported.save(tmp_path / "ported.keras")
    loaded = keras.saving.load_model(tmp_path / "ported.keras")
    np.testing.assert_allclose(loaded.predict(INPUTS, verbose=0), ported.predict(INPUTS, verbose=0), atol=1e-6)
    original.save(tmp_path / "original.keras")
    with pytest.raises(ValueError, match="Lambda"):
        keras.saving.load_model(tmp_path / "original.keras")


def test_a_lambda_with_a_mask_function_is_silent(bert):
    _, caught = _classifier(bert, keras.layers.Lambda(lambda x: x[:, 0], mask=lambda inputs, mask=None: None))
    assert caught == []
