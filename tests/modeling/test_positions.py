"""NEZHA's relative and RoFormer's rotary positions against bert4keras 0.11.5's layers, value for value, at a
length where the float precision of the angles shows."""

from __future__ import annotations

import numpy as np
import pytest
from keras import ops

from kerasbert.modeling.positions import RelativePositions, RotaryPositions

import helpers

LENGTH, HEAD, DISTANCE = 520, 64, 64  # past 500 positions float32 and float64 angles differ by more than 1e-5


@pytest.fixture(scope="module")
def theirs(tmp_path_factory):
    """bert4keras's RelativePositionEmbedding (a Sinusoidal table of 2K+1 rows) and SinusoidalPositionEmbedding."""
    task = {"kind": "positions", "length": LENGTH, "head_size": HEAD, "max_distance": DISTANCE}
    return helpers.run_oracle([task], str(tmp_path_factory.mktemp("positions")))


def _float64_sinusoids(positions: np.ndarray) -> np.ndarray:
    angles = positions[:, None] * np.power(10000.0, -2.0 * np.arange(HEAD // 2) / HEAD)  # (S, d/2)
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(len(positions), HEAD)


def test_rotary_positions_equal_bert4keras(theirs):
    x = ops.zeros((1, LENGTH, 2))
    mine = ops.convert_to_numpy(RotaryPositions(head_size=HEAD)(x))
    assert mine.shape == theirs["0/rotary"].shape == (1, LENGTH, HEAD)
    np.testing.assert_array_equal(mine, theirs["0/rotary"])
    rows = ops.convert_to_numpy(RotaryPositions(head_size=HEAD).at(ops.array([[LENGTH - 1], [3]])))  # (2, 1, d)
    np.testing.assert_array_equal(rows[:, 0], theirs["0/rotary"][0, [LENGTH - 1, 3]])
    # bert4keras's angles are float32: a float64 table is another one at this length
    assert np.abs(_float64_sinusoids(np.arange(LENGTH)) - theirs["0/rotary"][0]).max() > 1e-5


def test_relative_positions_equal_bert4keras(theirs):
    layer = RelativePositions(head_size=HEAD, max_distance=DISTANCE)
    mine = ops.convert_to_numpy(layer(ops.zeros((1, LENGTH, 2))))
    assert mine.shape == theirs["0/relative"].shape == (LENGTH, LENGTH, HEAD)
    np.testing.assert_array_equal(mine, theirs["0/relative"])
    rows = ops.convert_to_numpy(layer.between(ops.array([[LENGTH - 1]]), ops.array([[0, LENGTH - 30]])))  # (1, 1, 2, d)
    np.testing.assert_array_equal(rows[0, 0], theirs["0/relative"][LENGTH - 1, [0, LENGTH - 30]])
