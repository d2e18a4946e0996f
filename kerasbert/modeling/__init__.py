"""The Keras graph: config, layers, the encoder, heads, the CRF, the losses and the optimizer for ``compile``.

Importing this package registers every layer, loss, metric, optimizer and schedule kerasbert defines with Keras
(`kerasbert.modeling.registry`), so a ``.keras`` file loads with ``keras.saving.load_model(path)`` and no
``custom_objects``.
"""

from kerasbert.modeling import (  # noqa: F401 (each registers what it defines)
    backbone,
    blocks,
    conditional_norm,
    crf,
    global_pointer,
    heads,
    layers,
    losses,
    models,
    optimizers,
    pooling,
    positions,
)
