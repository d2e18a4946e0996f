"""The private Keras and TensorFlow names kerasbert reads are all still there; each accessor falls back."""

from __future__ import annotations

import keras

from kerasbert import internals


def test_every_private_name_is_still_there():
    gone = internals.missing()
    assert not gone, "moved in this Keras/TensorFlow: " + "; ".join(f"{name} ({internals.SYMBOLS[name]})"
                                                                    for name in gone)


def test_accessors_fall_back_on_objects_without_the_names():
    class Bare:
        pass

    assert internals.nodes_by_depth(Bare()) == {} and internals.inbound_nodes(Bare()) == []
    assert internals.optimizer_variables(Bare()) == []


def test_accessors_read_a_real_graph_and_optimizer():
    inputs = keras.Input((3,))
    dense = keras.layers.Dense(2)
    model = keras.Model(inputs, dense(inputs))
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    assert len(internals.inbound_nodes(dense)) == 1 and sum(map(len, internals.nodes_by_depth(model).values())) == 2
    assert [v.path for v in internals.optimizer_variables(optimizer)] == [v.path for v in model.trainable_variables]
    assert internals.variable_index(optimizer, model.trainable_variables[1]) == 1
    assert internals.enclosing_xla_context() is None
