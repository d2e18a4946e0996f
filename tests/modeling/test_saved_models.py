"""`.keras` files saved by an earlier release load without custom_objects and give the outputs they gave.

The files in tests/fixtures were written by `tests/fixtures/make_saved_models.py`; they are kept as
they are, so that moving or renaming a layer's module cannot break models people have saved.
"""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import kerasbert.modeling  # noqa: F401  (registers kerasbert's layers, as the docs tell users to)

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


@pytest.mark.parametrize("name", ["cls", "tagging", "tagging-crf"])
def test_a_saved_model_loads_and_predicts_as_when_saved(name):
    model = keras.saving.load_model(os.path.join(FIXTURES, f"{name}.keras"), compile=False)
    saved = np.load(os.path.join(FIXTURES, f"{name}.npz"))
    outputs = keras.ops.convert_to_numpy(model([saved["token_ids"], saved["segment_ids"]], training=False))
    np.testing.assert_allclose(outputs, saved["outputs"], rtol=1e-5, atol=1e-6)
    assert model.layers[-1].name == {"cls": "CLS-Dense", "tagging": "Tagging-Dense", "tagging-crf": "Tagging-CRF"}[name]


def test_importing_kerasbert_modeling_is_all_a_fresh_process_needs():
    path = os.path.join(FIXTURES, "tagging-crf.keras")
    code = (f"import kerasbert.modeling, keras; m = keras.saving.load_model({path!r}, compile=False); "
            "print(type(m.layers[-1]).__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["kerasbert.modeling.crf"]
