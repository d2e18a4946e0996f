"""BertConfig: read, validate and write a Google ``bert_config.json`` or a Hugging Face ``config.json``.

Symbols used across kerasbert (and in the annotated summary):

    V vocab_size   H hidden_size   L num_hidden_layers   A num_attention_heads
    I intermediate_size   P max_position_embeddings   T type_vocab_size   E embedding_size (H unless given)
"""

from __future__ import annotations

import dataclasses
import json
import os
from importlib import resources
from typing import Any

from kerasbert.choices import names_a_file
from kerasbert.errors import ConfigError, ModelError, fail
from kerasbert.files import write_text
from kerasbert.modeling.families import MODEL_TYPES, WRAP_HINT
from kerasbert.modeling.hf_configs import HF_MODEL_TYPES, from_hf, to_hf

# hidden_act spellings accepted in configs -> the activation kerasbert uses.
# "gelu" is the exact erf form (Google BERT, bert4keras, HF); the tanh approximation has
# several names across libraries (HF "gelu_new", "gelu_pytorch_tanh").
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_erf": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_tanh": "gelu_tanh",
    "gelu_approximate": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_python": "gelu",
    "relu": "relu",
    "swish": "swish",
    "silu": "swish",
}
# the sizes every config must give: no default fits a checkpoint of unknown shape
REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
# The largest value each size may take: far above every published BERT (vocabularies up to 250k tokens, hidden 4096,
# 48 layers, 16384 positions), far below what a typo (10**12, 2**20) would ask to allocate.
LIMITS = {"vocab_size": 1 << 22, "hidden_size": 1 << 15, "num_hidden_layers": 1 << 10, "num_attention_heads": 1 << 10,
          "intermediate_size": 1 << 17, "max_position_embeddings": 1 << 20, "type_vocab_size": 1 << 16}
MAX_WEIGHT_BYTES = 64 << 30  # float32 weights of the largest model a config may describe (16G parameters)


@dataclasses.dataclass
class BertConfig:
    """The hyper-parameters of a BERT encoder, as in Google's ``bert_config.json``.

    Args:
        vocab_size: int. V, rows of the word-piece embedding.
        hidden_size: int. H, width of every hidden state.
        num_hidden_layers: int. L, number of transformer blocks.
        num_attention_heads: int. A, heads per attention layer; must divide H.
        intermediate_size: int. I, width of the feed-forward inner layer.
        hidden_act: str or list. feed-forward activation: gelu (erf), gelu_tanh, relu or swish; a list
            ``[act, "linear"]`` (bert4keras's spelling, T5.1.1's gated GELU) gates it: ``act(x·W0) · (x·W1)``.
        hidden_dropout_prob: float. dropout after embeddings, attention and feed-forward.
        attention_probs_dropout_prob: float. dropout on the attention probabilities; a T5 config without it reads
            0, as bert4keras reads it (its T5 configs give ``hidden_dropout_prob`` only).
        max_position_embeddings: int. P, the longest sequence the model accepts.
        type_vocab_size: int. T, number of segment ids.
        initializer_range: float. stddev of the truncated-normal initializer.
        layer_norm_eps: float. epsilon of every LayerNormalization (Google uses 1e-12).
        embedding_size: int or None. E, the width of the embeddings where it differs from H (ALBERT,
            ELECTRA-small): ``Embedding-Mapping`` projects them to H. None: H.
        max_relative_position: int. NEZHA's largest relative distance; farther ones are clipped to it.
        attention_head_size: int or None. the width of one head where it is not H / A (T5's ``d_kv``); None: H / A.
        relative_attention_num_buckets: int or None. T5's relative position buckets (T5's configs give it, 32; None
            in any other family's).
        relative_attention_max_distance: int or None. T5's distance from which keys share the last bucket (None: 128,
            as bert4keras fixes it).
        extra: dict. keys of the source file kerasbert does not use, kept for `to_json`.

    Example:
    >>> cfg = BertConfig.from_preset("tiny")
    >>> cfg.hidden_size % cfg.num_attention_heads
    0
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    embedding_size: int | None = None
    max_relative_position: int = 64
    attention_head_size: int | None = None
    relative_attention_num_buckets: int | None = None
    relative_attention_max_distance: int | None = None
    extra: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)
    source: str = dataclasses.field(default="<dict>", repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    # ---------------------------------------------------------------- reading
    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "<dict>") -> "BertConfig":
        """Build a config from a dict with Google or Hugging Face keys (T5's, mT5's and GPT-2's renamed by
        `kerasbert.modeling.hf_configs.from_hf`)."""
        if not isinstance(values, dict):
            raise fail(ConfigError, source, "a JSON object of BERT hyper-parameters", type(values).__name__)
        values = dict(values)
        model_type = values.get("model_type", "bert")
        if model_type not in MODEL_TYPES:
            raise fail(ConfigError, f"{source}: model_type", f"one of {', '.join(map(repr, MODEL_TYPES))}",
                       repr(model_type), "kerasbert builds these Hugging Face model types")
        if model_type in HF_MODEL_TYPES:
            values = from_hf(values, source)
        position = values.get("position_embedding_type", "absolute")
        if MODEL_TYPES[model_type] in ("bert", "roberta_en", "xlm_roberta") and position != "absolute":
            raise fail(ConfigError, f"{source}: position_embedding_type", '"absolute"', repr(position),
                       "kerasbert builds BERT's learned absolute position embeddings only")
        fields = {f.name for f in dataclasses.fields(cls)} - {"extra", "source"}
        known = {k: values.pop(k) for k in list(values) if k in fields}
        if "relative_attention_num_buckets" in known:  # bert4keras's T5: no attention dropout unless given
            known.setdefault("attention_probs_dropout_prob", 0.0)
        missing = [key for key in REQUIRED if key not in known]
        if missing:
            raise fail(ConfigError, f"{source}: {missing[0]}", f"the keys {', '.join(REQUIRED)}",
                       f"no {', '.join(missing)} among keys {sorted(known) + sorted(values)}",
                       "is this a BERT config file?")
        return cls(**known, extra=values, source=source)

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "BertConfig":
        """Read a Google ``bert_config.json`` or a Hugging Face ``config.json``."""
        path = os.fspath(path)
        if os.path.isdir(path):
            for candidate in ("bert_config.json", "config.json"):
                if os.path.isfile(os.path.join(path, candidate)):
                    path = os.path.join(path, candidate)
                    break
        if not os.path.isfile(path):
            raise fail(ConfigError, path, "a bert_config.json file", "no such file",
                       "pass the path of the config that came with the checkpoint")
        try:
            with open(path, encoding="utf-8-sig") as f:  # a BOM, as some editors write, is dropped
                values = json.load(f)
        except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise fail(ConfigError, path, "valid UTF-8 JSON", f"{type(e).__name__}: {str(e)[:120]}") from None
        return cls.from_dict(values, source=path)

    @classmethod
    def from_preset(cls, name: str) -> "BertConfig":
        """Load a bundled preset, one of `preset_names` (``tiny``, ``bert_base_chinese``, ``albert_tiny_zh``, ...)."""
        names = preset_names()
        if name not in names:
            raise fail(ConfigError, "preset", f"one of {names}", repr(name))
        with resources.as_file(resources.files("kerasbert.configs") / f"{name}.json") as path:
            return cls.from_json(path)

    # ---------------------------------------------------------------- checking
    def validate(self) -> None:
        """Raise ConfigError on the first inconsistent value."""
        where = self.source
        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise fail(ConfigError, f"{where}: {key}", "a positive integer", repr(value))
        if self.embedding_size is not None and (isinstance(self.embedding_size, bool) or not isinstance(
                self.embedding_size, int) or not 0 < self.embedding_size <= LIMITS["hidden_size"]):
            raise fail(ConfigError, f"{where}: embedding_size", f"a positive integer up to {LIMITS['hidden_size']}",
                       repr(self.embedding_size))
        if isinstance(self.max_relative_position, bool) or not isinstance(self.max_relative_position, int) \
                or not 0 < self.max_relative_position <= LIMITS["max_position_embeddings"]:
            raise fail(ConfigError, f"{where}: max_relative_position",
                       f"a positive integer up to {LIMITS['max_position_embeddings']}",
                       repr(self.max_relative_position))
        if isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int) \
                or self.type_vocab_size < 0:
            raise fail(ConfigError, f"{where}: type_vocab_size", "an integer >= 0", repr(self.type_vocab_size))
        self._check_limits()
        self._check_heads_and_activation()
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise fail(ConfigError, f"{where}: {key}", "a number in [0, 1)", repr(value))
        if not isinstance(self.layer_norm_eps, (int, float)) or self.layer_norm_eps <= 0:
            raise fail(ConfigError, f"{where}: layer_norm_eps", "a positive number", repr(self.layer_norm_eps))

    def _check_heads_and_activation(self) -> None:
        """The head width and T5's bucket sizes where given, A dividing H otherwise, and ``hidden_act``."""
        where = self.source
        for key in ("attention_head_size", "relative_attention_num_buckets", "relative_attention_max_distance"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 0 < value <= LIMITS["hidden_size"]):
                raise fail(ConfigError, f"{where}: {key}", f"a positive integer up to {LIMITS['hidden_size']}",
                           repr(value))
        if self.attention_head_size is None and self.hidden_size % self.num_attention_heads:
            raise fail(ConfigError, f"{where}: num_attention_heads",
                       f"a divisor of hidden_size {self.hidden_size}", str(self.num_attention_heads),
                       "each head gets hidden_size / num_attention_heads dimensions")
        act = self.hidden_act
        gated = isinstance(act, (list, tuple)) and len(act) == 2 and act[1] == "linear"
        if not (gated or isinstance(act, str)) or (act[0] if gated else act) not in ACTIVATIONS:
            raise fail(ConfigError, f"{where}: hidden_act", f"one of {sorted(ACTIVATIONS)}, or [one of them, "
                       '"linear"] for a gated feed-forward', f"{act!r:.60}" if isinstance(act, str)
                       else f"a {type(act).__name__} {act!r:.40}")

    def weight_bytes(self) -> int:
        """Bytes of the encoder's float32 weights (embeddings, blocks, pooler), from the sizes alone.

        Example:
        >>> BertConfig.from_preset("bert_base_chinese").weight_bytes() // 4
        102267648
        """
        h, i, e = self.hidden_size, self.intermediate_size, self.embedding_width
        embeddings = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size + 2) * e
        mapping = (e * h + h) if e != h else 0
        block = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h  # attention, feed-forward, two LayerNorms
        return 4 * (embeddings + mapping + self.num_hidden_layers * block + h * h + h)

    def _check_limits(self) -> None:
        """Refuse, before anything is allocated, a size beyond `LIMITS` or weights beyond `MAX_WEIGHT_BYTES`."""
        need = _human_bytes(self.weight_bytes())
        for key, limit in LIMITS.items():
            if getattr(self, key) > limit:
                raise fail(ConfigError, f"{self.source}: {key}", f"at most {limit}",
                           f"{_short(getattr(self, key))}, a model that would need {need} of float32 weights",
                           "is the value a typo?")
        if self.weight_bytes() > MAX_WEIGHT_BYTES:
            key = max(("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size"),
                      key=lambda k: getattr(self, k) / LIMITS[k])
            raise fail(ConfigError, f"{self.source}: {key}", f"sizes whose weights fit in "
                       f"{_human_bytes(MAX_WEIGHT_BYTES)}", f"{key} {getattr(self, key)}, a model that would need "
                       f"{need} of float32 weights", "is the value a typo?")

    # ---------------------------------------------------------------- derived
    @property
    def head_size(self) -> int:
        """The width of one attention head: ``attention_head_size`` where given, else H / A."""
        return self.attention_head_size or self.hidden_size // self.num_attention_heads

    @property
    def embedding_width(self) -> int:
        """E: the embedding size, H unless the config gives another."""
        return self.hidden_size if self.embedding_size is None else self.embedding_size

    @property
    def pad_id(self) -> int:
        """The id that pads a row: a Hugging Face config's ``pad_token_id`` (RoBERTa's and XLM-R's 1, ModernBERT's
        50283), 0 (BERT's ``[PAD]``) where the config gives none; a ConfigError for an id outside the vocabulary.

        Example:
        >>> BertConfig.from_preset("tiny").pad_id
        0
        """
        value = self.extra.get("pad_token_id", 0)
        if value is None:
            return 0
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.vocab_size:
            raise fail(ConfigError, f"{self.source}: pad_token_id", f"an id in [0, {self.vocab_size})", repr(value))
        return value

    @property
    def model_type(self) -> str | None:
        """The Hugging Face ``model_type`` the config file gave, None for a Google config."""
        return self.extra.get("model_type")

    @property
    def hugging_face(self) -> bool:
        """Whether it is a Hugging Face T5, mT5, GPT-2 or DistilBERT ``config.json`` (its ``model_type``), in keys of
        its own: the model then computes transformers' numbers where they differ from bert4keras's (the config's
        norm ε; T5's `kerasbert.modeling.t5.T5Options`)."""
        return self.model_type in HF_MODEL_TYPES

    @property
    def activation(self) -> str:
        """The canonical activation name: gelu (erf), gelu_tanh, relu or swish (a gated one's first)."""
        return ACTIVATIONS[self.hidden_act if isinstance(self.hidden_act, str) else self.hidden_act[0]]

    @property
    def gated(self) -> bool:
        """Whether the feed-forward is gated, ``act(x·W0) · (x·W1)`` (``hidden_act`` ``[act, "linear"]``)."""
        return not isinstance(self.hidden_act, str)

    def replace(self, **changes: Any) -> "BertConfig":
        """A copy with some fields changed (validated again)."""
        fields = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - fields)
        if unknown:
            raise fail(ConfigError, "config override", f"one of {sorted(fields - {'extra', 'source'})}",
                       ", ".join(unknown))
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- writing
    def to_dict(self) -> dict[str, Any]:
        """Google's key set (plus layer_norm_eps and any extra keys read in); a Hugging Face T5, mT5 or GPT-2
        config's own keys (`kerasbert.modeling.hf_configs.to_hf`)."""
        defaults = {"embedding_size": None, "max_relative_position": 64,  # written only where a family sets them
                    "attention_head_size": None, "relative_attention_num_buckets": None,
                    "relative_attention_max_distance": None}
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("extra", "source")
               and not (f.name in defaults and getattr(self, f.name) == defaults[f.name])}
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return to_hf(out, self.activation) if self.hugging_face else out

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """Return the JSON text; also write it (atomically) when ``path`` is given."""
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
        if path is not None:
            write_text(path, text)
        return text


def _short(value: int) -> str:
    """An integer as written, or as ``1.00e+400`` when it has more than 15 digits."""
    digits = str(value)
    return digits if len(digits) <= 15 else f"{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"


def _human_bytes(count: int) -> str:
    """``count`` bytes in GiB or TiB (or as a power of ten beyond a million TiB).

    Example:
    >>> _human_bytes(3 << 30), _human_bytes(10 ** 400)
    ('3.0 GiB', '1.00e+400 bytes')
    """
    if count < 1 << 40:
        return f"{count / (1 << 30):.1f} GiB"
    if count < 1 << 60:
        return f"{count / (1 << 40):.1f} TiB"
    return f"{_short(count)} bytes"


def preset_names() -> list[str]:
    """Names of the bundled presets in ``configs/``."""
    files = resources.files("kerasbert.configs").iterdir()
    return sorted(p.name[:-5] for p in files if p.name.endswith(".json"))


def resolve_config(config: "BertConfig | str | os.PathLike | dict | None") -> BertConfig:
    """Accept a BertConfig, a dict, a preset name or a path to a config file."""
    if isinstance(config, BertConfig):
        return config
    if isinstance(config, dict):
        return BertConfig.from_dict(config)
    if config is None:
        raise fail(ConfigError, "config_path", "a bert_config.json path, a preset name or a BertConfig", "None")
    text = os.fspath(config)
    if text in preset_names() and not os.path.exists(text):
        return BertConfig.from_preset(text)
    if not names_a_file(text):
        raise fail(ConfigError, "config", f"a config file or one of the presets {', '.join(preset_names())}",
                   repr(text), "no file and no preset has that name")
    return BertConfig.from_json(text)



# ---------------------------------------------------------------- the config a model carries
def config_of(model) -> BertConfig:
    """The `BertConfig` a kerasbert model was built from: the one way to read a model's sizes.

    A model from `kerasbert.build_transformer_model` or `kerasbert.modeling.heads` carries its config as
    ``model.bert_config`` (kept through ``get_config``, ``.keras`` files and `kerasbert.modeling.backbone.clone`);
    a model that holds one as a layer gives that one's. A model without one (a plain ``keras.Model`` of
    kerasbert's layers) is a `ModelError` that says how to get one: a config is never guessed from layer names.

    Args:
        model: keras.Model. a model with kerasbert's layers.

    Returns:
        The model's BertConfig.

    Example:
    >>> from kerasbert import build_transformer_model
    >>> config_of(build_transformer_model("tiny", verbose=False)).num_hidden_layers
    2
    """
    for candidate in (model, *getattr(model, "layers", ())):
        stored = getattr(candidate, "bert_config", None)
        if isinstance(stored, BertConfig):
            return stored
    raise fail(ModelError, f"model {getattr(model, 'name', model)!r}", "a kerasbert model that carries its config",
               "a keras.Model without one", WRAP_HINT)
