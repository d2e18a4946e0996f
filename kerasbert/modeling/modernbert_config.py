"""ModernBERT's ``config.json`` (transformers' ``model_type`` ``"modernbert"``): its keys read as
`kerasbert.BertConfig`'s, and the options its architecture reads beside the sizes (`options`), without TensorFlow.

Renamed to BertConfig's keys (`KEYS`), and back when the config is written:

    hidden_activation -> hidden_act            norm_eps -> layer_norm_eps
    embedding_dropout -> hidden_dropout_prob   attention_dropout -> attention_probs_dropout_prob

ModernBERT has no segments (``type_vocab_size`` 0). The rest stay in ``BertConfig.extra`` under transformers' names
and are read by `options`: ``local_attention`` (the window: a local layer's token sees the keys within
``±local_attention / 2``), ``global_attn_every_n_layers`` (layer i attends globally where ``i % n == 0``; a newer
config's ``layer_types`` says the same per layer), ``global_rope_theta`` and ``local_rope_theta`` (a newer config's
``rope_parameters``), ``norm_bias``, ``attention_bias``, ``mlp_bias``, ``classifier_bias``, ``decoder_bias`` and
``classifier_activation``. A config without them (a preset built with ``model="modernbert"``) reads transformers'
defaults, ModernBERT-base's.

`kerasbert.modeling.hf_configs.from_hf` renames the keys and checks the options as it reads the file.

Example:
>>> options({"local_attention": 4}, 4, "config.json").global_layers
(True, False, False, True)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kerasbert.errors import ConfigError, fail

KEYS = {"hidden_activation": "hidden_act", "norm_eps": "layer_norm_eps", "embedding_dropout": "hidden_dropout_prob",
        "attention_dropout": "attention_probs_dropout_prob"}  # transformers' key -> BertConfig's
# transformers' ModernBertConfig defaults (ModernBERT-base's), for the keys a config.json may leave out
DEFAULTS = {"vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 22,
            "num_attention_heads": 12, "hidden_activation": "gelu", "max_position_embeddings": 8192,
            "norm_eps": 1e-5, "embedding_dropout": 0.0, "attention_dropout": 0.0}
GLOBAL, LOCAL = "full_attention", "sliding_attention"  # a newer config's layer_types and rope_parameters keys


@dataclasses.dataclass(frozen=True)
class ModernBertOptions:
    """What ModernBERT's architecture reads beside the sizes (transformers' defaults are ModernBERT-base's).

    Args:
        local_attention: int. the window of a local layer, even: a token sees the keys within ±local_attention/2.
        global_layers: tuple of bool. per layer, whether it attends globally (else within the window).
        global_rope_theta: float. θ of the rotary positions of the global layers.
        local_rope_theta: float. θ of the rotary positions of the local layers.
        norm_bias: bool. every LayerNorm has β.
        attention_bias: bool. ``Wqkv`` and ``Wo`` have biases.
        mlp_bias: bool. ``Wi`` and the MLP's ``Wo`` have biases.
        classifier_bias: bool. the masked LM's ``head.dense`` has a bias.
        decoder_bias: bool. the masked LM's output has a bias per token (``decoder.bias``).
        classifier_activation: str. the activation of ``head.dense``.
    """

    local_attention: int = 128
    global_layers: tuple[bool, ...] = ()
    global_rope_theta: float = 160000.0
    local_rope_theta: float = 10000.0
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    classifier_bias: bool = False
    decoder_bias: bool = True
    classifier_activation: str = "gelu"

    @property
    def half_window(self) -> int:
        """``local_attention / 2``: how far a local layer's token sees on each side."""
        return self.local_attention // 2


_FLAGS = ("norm_bias", "attention_bias", "mlp_bias", "classifier_bias", "decoder_bias")


def _positive(extra: dict, key: str, source: str, kind: type, default):
    value = extra.get(key, default)
    if isinstance(value, bool) or not isinstance(value, kind if kind is int else (int, float)) or value <= 0:
        raise fail(ConfigError, f"{source}: {key}", f"a positive {'integer' if kind is int else 'number'}",
                   repr(value), "use the config.json that came with the checkpoint")
    return value


def _thetas(extra: dict, source: str) -> tuple[float, float]:
    """θ of the global and the local layers: ``global_rope_theta``/``local_rope_theta``, or a newer config's
    ``rope_parameters`` (only the default rotary positions, no scaling)."""
    thetas = {GLOBAL: _positive(extra, "global_rope_theta", source, float, 160000.0),
              LOCAL: _positive(extra, "local_rope_theta", source, float, 10000.0)}
    given = extra.get("rope_parameters")
    if given is None:
        return thetas[GLOBAL], thetas[LOCAL]
    if not isinstance(given, dict) or not all(isinstance(given.get(kind, {}), dict) for kind in (GLOBAL, LOCAL)):
        raise fail(ConfigError, f"{source}: rope_parameters", f'{{"{GLOBAL}": {{...}}, "{LOCAL}": {{...}}}}',
                   f"{given!r:.80}")
    for kind in (GLOBAL, LOCAL):
        params = given.get(kind) or {}
        if params.get("rope_type", "default") != "default":
            raise fail(ConfigError, f"{source}: rope_parameters.{kind}.rope_type", '"default"',
                       repr(params["rope_type"]), "kerasbert computes ModernBERT's rotary positions without scaling")
        if "rope_theta" in params:
            thetas[kind] = _positive(params, "rope_theta", f"{source}: rope_parameters.{kind}", float, None)
    return thetas[GLOBAL], thetas[LOCAL]


def _global_layers(extra: dict, layers: int, source: str) -> tuple[bool, ...]:
    """Per layer, whether it attends globally: ``i % global_attn_every_n_layers == 0``, which a newer config's
    ``layer_types`` must agree with."""
    every = _positive(extra, "global_attn_every_n_layers", source, int, 3)
    kinds = tuple(i % every == 0 for i in range(layers))
    given = extra.get("layer_types")
    if given is not None:
        expected = [GLOBAL if kind else LOCAL for kind in kinds]
        if list(given) != expected if isinstance(given, (list, tuple)) else True:
            raise fail(ConfigError, f"{source}: layer_types", f"{expected} (global_attn_every_n_layers {every})",
                       f"{given!r:.120}", "transformers windows a layer by global_attn_every_n_layers and turns its "
                       "rotary positions by layer_types; kerasbert builds configs where the two agree")
    return kinds


def options(extra: dict[str, Any], layers: int, source: str = "<dict>") -> ModernBertOptions:
    """The options of a ModernBERT config (its ``extra`` keys, ``layers`` its L), transformers' defaults where a key is
    absent; a ConfigError naming the key for a value the architecture cannot build (an odd or non-positive
    ``local_attention``, a θ ≤ 0, a bias flag that is not a bool, ``layer_types`` at odds with
    ``global_attn_every_n_layers``; `kerasbert.modeling.modernbert.options_of` checks ``classifier_activation``
    against kerasbert's activations).

    Example:
    >>> options({"local_attention": 5}, 3, "config.json")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: config.json: local_attention: expected an even positive window (a local layer's \
token sees local_attention / 2 keys each side), found 5. use the config.json that came with the checkpoint
    """
    window = extra.get("local_attention", 128)
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0 or window % 2:
        raise fail(ConfigError, f"{source}: local_attention", "an even positive window (a local layer's token sees "
                   "local_attention / 2 keys each side)", repr(window), "use the config.json that came with the "
                   "checkpoint")
    flags = {key: extra.get(key, ModernBertOptions.__dataclass_fields__[key].default) for key in _FLAGS}
    wrong = next((key for key, value in flags.items() if not isinstance(value, bool)), None)
    if wrong is not None:
        raise fail(ConfigError, f"{source}: {wrong}", "true or false", repr(flags[wrong]))
    activation = extra.get("classifier_activation", "gelu")  # its name is checked where the head is built
    if not isinstance(activation, str):
        raise fail(ConfigError, f"{source}: classifier_activation", "an activation's name", f"{activation!r:.60}")
    global_theta, local_theta = _thetas(extra, source)
    kinds = _global_layers(extra, layers, source) if isinstance(layers, int) else ()
    return ModernBertOptions(window, kinds, global_theta, local_theta, classifier_activation=activation, **flags)

