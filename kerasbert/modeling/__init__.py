"""The Keras graph: config, layers, the encoder, heads, the CRF, and the losses for ``compile``.

Importing this package registers every kerasbert layer and loss with Keras, so a ``.keras`` file loads with
``keras.saving.load_model(path)`` and no ``custom_objects``.
"""

from kerasbert.modeling import crf, heads, layers, losses, models  # noqa: F401 (registers the layers and losses)
