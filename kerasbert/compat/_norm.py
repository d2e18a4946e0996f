"""bert4keras's ``LayerNormalization``: its arguments over kerasbert's
`kerasbert.modeling.conditional_norm.ConditionalLayerNorm`, which computes it.

Example:
>>> import keras
>>> norm = LayerNormalization(zero_mean=False, scale=False, offset=False)
>>> keras.ops.convert_to_numpy(norm(keras.ops.array([[3.0, -3.0]]))).round(4).tolist(), norm.weights
([[1.0, -1.0]], [])
"""

from __future__ import annotations

import keras

from kerasbert.modeling.conditional_norm import ConditionalLayerNorm
from kerasbert.modeling.registry import register_compat


@register_compat
class LayerNormalization(ConditionalLayerNorm):
    """(Conditional) layer normalization with bert4keras's arguments and weights (``beta``, ``gamma``, then the
    condition's ``hidden_dense``, ``beta_dense``, ``gamma_dense``).

    Args:
        zero_mean: bool. subtract the mean first.
        unit_variance: bool. divide by ``√(mean(x²) + ε)``.
        epsilon: float. ε (None: ``keras.config.epsilon()``, bert4keras's ``K.epsilon()``).
        **kwargs: ``scale``, ``offset``, ``conditional``, ``hidden_units``, ``hidden_activation``,
            ``hidden_initializer`` (`ConditionalLayerNorm`), and a layer's ``name``, ``dtype``.
    """

    def __init__(self, zero_mean: bool = True, unit_variance: bool = True, epsilon: float | None = None, **kwargs):
        super().__init__(epsilon=epsilon or keras.config.epsilon(), zero_mean=zero_mean, unit_variance=unit_variance,
                         **kwargs)
