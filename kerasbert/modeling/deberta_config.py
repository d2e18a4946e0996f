"""DeBERTa's ``config.json`` keys: which disentangled attention a config describes (`DebertaOptions`), checked
against the one kerasbert builds, DeBERTa-v3's, without TensorFlow.

transformers' ``model_type`` ``"deberta-v2"`` covers DeBERTa-v2 and -v3; its configs say the attention by key
(``relative_attention``, ``pos_att_type``, ``share_att_key``, ``position_biased_input``, ``norm_rel_ebd``,
``conv_kernel_size``), and where a key is missing transformers' default applies, which is not DeBERTa-v3's. A
config of another ``model_type`` (a preset built with ``model="deberta_v3"``) gets DeBERTa-v3's.

Example:
>>> from kerasbert.modeling.config import BertConfig
>>> DebertaOptions.of(BertConfig.from_preset("tiny")).rows
64
"""

from __future__ import annotations

import dataclasses

from kerasbert.errors import ConfigError, fail
from kerasbert.modeling.config import BertConfig

MODEL_TYPE = "deberta-v2"  # transformers' model_type of DeBERTa-v2 and -v3
POSITION_ATTENTION = ("c2p", "p2c")  # content to position and position to content, in any order
# the attention kerasbert builds: config key -> its value, DeBERTa-v3's
BUILT = {"relative_attention": True, "share_att_key": True, "position_biased_input": False,
         "norm_rel_ebd": "layer_norm", "conv_kernel_size": 0}
# transformers' values for a deberta-v2 config.json that omits a key (DebertaV2Config and the model's getattr)
TRANSFORMERS_DEFAULTS = {"relative_attention": False, "share_att_key": False, "position_biased_input": True,
                         "norm_rel_ebd": "none", "conv_kernel_size": 0, "pos_att_type": None, "position_buckets": -1,
                         "max_relative_positions": -1}
_HINT = ("kerasbert builds DeBERTa-v3's disentangled attention (microsoft/deberta-v3-*, mdeberta-v3-base); use such "
         "a checkpoint's own config.json")


def _attention_types(value) -> tuple[str, ...] | None:
    """``pos_att_type`` as transformers reads it (a list, or ``"p2c|c2p"``), sorted; None where it is neither."""
    if isinstance(value, str):
        value = [part.strip() for part in value.lower().split("|")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(part, str) for part in value):
        return None
    return tuple(sorted(value))


def _positive(config: BertConfig, key: str, value, default: int) -> int:
    """A config's bucket count or distance: ``default`` where it is below 1 (transformers' -1), a ConfigError where
    it is no integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(ConfigError, f"{config.source}: {key}", "an integer (-1: none)", repr(value))
    return value if value > 0 else default


@dataclasses.dataclass(frozen=True)
class DebertaOptions:
    """The relative positions of a DeBERTa config.

    Args:
        position_buckets: int. N, the log buckets of the distances (``position_buckets``); 0: none, every distance
            up to ``max_relative_positions`` a row of its own.
        max_relative_positions: int. the distance the last bucket reaches (``max_relative_positions``, P where
            the config says -1).

    Example:
    >>> config = BertConfig.from_dict({"model_type": "deberta-v2", "vocab_size": 100, "hidden_size": 8,
    ...     "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16, "relative_attention": True,
    ...     "pos_att_type": "p2c|c2p", "share_att_key": True, "position_biased_input": False,
    ...     "norm_rel_ebd": "layer_norm", "position_buckets": 256, "max_relative_positions": -1})
    >>> DebertaOptions.of(config)
    DebertaOptions(position_buckets=256, max_relative_positions=512)
    >>> DebertaOptions.of(config.replace(extra={**config.extra, "share_att_key": False}))
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: <dict>: share_att_key: expected True (kerasbert builds DeBERTa-v3's attention), \
found False. kerasbert builds DeBERTa-v3's disentangled attention (microsoft/deberta-v3-*, mdeberta-v3-base); use \
such a checkpoint's own config.json
    """

    position_buckets: int
    max_relative_positions: int

    @classmethod
    def of(cls, config: BertConfig) -> DebertaOptions:
        """The options of ``config``: its own keys; a config of no DeBERTa ``model_type`` (a preset) gets
        DeBERTa-v3's (N = P/2). A ConfigError, naming the key, for an attention kerasbert does not build."""
        given = config.extra if config.model_type == MODEL_TYPE else {
            **BUILT, "pos_att_type": list(POSITION_ATTENTION),
            "position_buckets": config.max_position_embeddings // 2, **config.extra}
        for key, built in BUILT.items():
            found = given.get(key, TRANSFORMERS_DEFAULTS[key])
            if found != built or type(found) is not type(built):
                raise fail(ConfigError, f"{config.source}: {key}", f"{built!r} (kerasbert builds DeBERTa-v3's "
                           "attention)", repr(found), _HINT)
        found = given.get("pos_att_type")
        if _attention_types(found) != POSITION_ATTENTION:
            raise fail(ConfigError, f"{config.source}: pos_att_type", '["p2c", "c2p"] (kerasbert builds '
                       "DeBERTa-v3's attention)", repr(found), _HINT)
        if config.attention_head_size not in (None, config.hidden_size // config.num_attention_heads):
            raise fail(ConfigError, f"{config.source}: attention_head_size", f"hidden_size / num_attention_heads "
                       f"{config.hidden_size // config.num_attention_heads}", repr(config.attention_head_size))
        span = _positive(config, "max_relative_positions", given.get("max_relative_positions", -1),
                         config.max_position_embeddings)
        buckets = _positive(config, "position_buckets", given.get("position_buckets", -1), 0)
        if buckets and span - 1 == buckets // 2:  # log((P-1)/(N/2)) = 0: transformers' buckets divide by it
            raise fail(ConfigError, f"{config.source}: max_relative_positions", f"a distance other than "
                       f"position_buckets / 2 + 1 = {span}", str(span))
        return cls(buckets, span)

    @property
    def rows(self) -> int:
        """2N: the rows of the relative table (2·``max_relative_positions`` without buckets)."""
        return 2 * (self.position_buckets or self.max_relative_positions)

    def hf_keys(self) -> dict:
        """These options in a ``config.json``'s keys, with the attention kerasbert builds (`BUILT`)."""
        return {**BUILT, "pos_att_type": ["p2c", "c2p"], "position_buckets": self.position_buckets or -1,
                "max_relative_positions": self.max_relative_positions}
