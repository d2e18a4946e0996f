"""Sentence-transformers folders: the modules a ``modules.json`` lists, read and checked as what kerasbert builds.

A sentence-transformers folder lists its modules in order in ``modules.json``, each with the folder it keeps its
files in (``path``) and its class (``type``). kerasbert reads the three that make a BERT sentence encoder:

- ``Transformer``: a Hugging Face folder (``config.json``, the weights, ``vocab.txt``), at the folder itself
  (``path: ""``) or in a sub-folder (``0_Transformer``); its ``sentence_bert_config.json`` gives
  ``max_seq_length`` (the word pieces a text keeps, ``[CLS]`` and ``[SEP]`` included) and ``do_lower_case``;
- ``Pooling``: its ``config.json`` says how the token vectors become one: ``pooling_mode_cls_token`` is
  kerasbert's ``"cls"`` pooling, ``pooling_mode_mean_tokens`` its ``"mean"`` (`kerasbert.modeling.heads.embedding`);
  ``word_embedding_dimension`` must be the encoder's hidden size;
- ``Normalize`` (optional): unit-length vectors.

The folder's ``config_sentence_transformers.json`` may declare ``prompts`` (``{"query": "query: ", ...}``: a text
put before each text, as multilingual-e5 expects) and a ``default_prompt_name``, the prompt used when none is
asked for (`read_prompts`); the Pooling module's ``include_prompt: false`` (the prompt's tokens left out of the
pooling) is read too.

Any other module (``Dense``, ``LayerNorm``, ...) or pooling mode (``max``, ``mean_sqrt_len``, ``weightedmean``,
``lasttoken``, or several modes concatenated) has no kerasbert layer: a ConfigError naming the file, what it asks
for and what kerasbert has, rather than vectors that differ from the folder's.

``do_lower_case: true`` lower-cases the text before the word pieces, as sentence-transformers does; kerasbert's
lower-casing is BERT's, which also strips accents (`kerasbert.text.tokenizer.Tokenizer`), so a cased vocabulary
with this flag set gives other pieces for accented words. Without the flag the case is the tokenizer's
(``tokenizer_config.json``).
"""

from __future__ import annotations

import dataclasses
import json
import os

from kerasbert.errors import CheckpointError, ConfigError, fail
from kerasbert.files import json_value

__all__ = ["MODULES", "POOLING_MODES", "PROMPTS", "SentenceTransformersFolder", "is_sentence_transformers",
           "read_prompts", "read_sentence_transformers"]

MODULES = "modules.json"
SETTINGS = "sentence_bert_config.json"  # the Transformer module's settings, in its folder
PROMPTS = "config_sentence_transformers.json"  # the folder's prompts and default prompt, beside modules.json
KNOWN = ("Transformer", "Pooling", "Normalize")  # the modules kerasbert builds, in this order
# sentence-transformers' pooling modes -> kerasbert's pooling (None: kerasbert has none); a mode a config leaves
# out takes the default of sentence-transformers' Pooling: mean on, every other mode off
POOLING_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                 "pooling_mode_max_tokens": None, "pooling_mode_mean_sqrt_len_tokens": None,
                 "pooling_mode_weightedmean_tokens": None, "pooling_mode_lasttoken": None}


@dataclasses.dataclass(frozen=True)
class SentenceTransformersFolder:
    """What a sentence-transformers folder declares, checked (`read_sentence_transformers`).

    Args:
        path: str. the folder.
        transformer: str. the Hugging Face folder of its ``Transformer`` module.
        pooling: str. kerasbert's pooling of its ``Pooling`` module: ``"cls"`` or ``"mean"``.
        normalize: bool. whether a ``Normalize`` module follows.
        maxlen: int or None. ``max_seq_length`` of ``sentence_bert_config.json``.
        lowercase: bool or None. its ``do_lower_case`` (None: not given).
        prompts: dict. the prompts of ``config_sentence_transformers.json``, by name (empty: none).
        default_prompt_name: str or None. the prompt used when none is asked for.
        include_prompt: bool. whether the prompt's tokens are pooled with the text's (the Pooling module's
            ``include_prompt``, true unless it says).
    """

    path: str
    transformer: str
    pooling: str
    normalize: bool
    maxlen: int | None
    lowercase: bool | None
    prompts: dict = dataclasses.field(default_factory=dict)
    default_prompt_name: str | None = None
    include_prompt: bool = True


def is_sentence_transformers(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder with a ``modules.json``.

    Example:
    >>> is_sentence_transformers("/no/such/folder")
    False
    """
    return os.path.isfile(os.path.join(os.fspath(path), MODULES))


def _json(path: str, expected: str):
    """The JSON in ``path``; a ConfigError naming the file when it is missing or not JSON."""
    if not os.path.isfile(path):
        raise fail(ConfigError, path, expected, "no such file", "download the sentence-transformers folder again")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise fail(ConfigError, path, expected, f"{type(e).__name__}: {str(e)[:80]}") from None
    return json_value(text, path, expected, ConfigError)


def _modules(folder: str) -> dict[str, str]:
    """``modules.json``'s modules as ``{Transformer, Pooling[, Normalize]: folder}``, each folder inside ``folder``."""
    where = os.path.join(folder, MODULES)
    listed = _json(where, 'a JSON list of modules, each with a "path" and a "type"')
    wanted = "Transformer, Pooling and optionally Normalize, in this order (the modules kerasbert builds)"
    if not isinstance(listed, list) or not all(isinstance(m, dict) and isinstance(m.get("type"), str)
                                               and isinstance(m.get("path", ""), str) for m in listed):
        raise fail(ConfigError, where, 'a JSON list of modules, each with a "path" and a "type"',
                   f"{json.dumps(listed)[:80]}")
    kinds = [module["type"].rsplit(".", 1)[-1] for module in listed]
    if kinds not in (list(KNOWN[:2]), list(KNOWN)):
        other = next((m for m, kind in zip(listed, kinds, strict=True) if kind not in KNOWN), None)
        found = (f"a {other['type']} module at {other.get('path', '')!r}, which kerasbert has no layer for"
                 if other else f"the modules {kinds}")
        raise fail(ConfigError, where, wanted, found, "kerasbert reads BERT encoders with cls or mean pooling")
    root = os.path.realpath(folder)
    out = {}
    for module, kind in zip(listed, kinds, strict=True):
        if "\x00" in module.get("path", ""):  # no file name holds a NUL: the operating system cannot be asked
            raise fail(CheckpointError, f"{where}: {kind}", "a folder name", f"{module['path']!r}, with a NUL "
                       "character", "the file is damaged: download the sentence-transformers folder again")
        inside = os.path.realpath(os.path.join(root, module.get("path", "")))
        if os.path.commonpath([root, inside]) != root:
            raise fail(ConfigError, f"{where}: {kind}", "a path inside the folder", repr(module.get("path")),
                       "refusing to read files outside the sentence-transformers folder")
        out[kind] = os.path.join(folder, module.get("path", ""))
    return out


def _pooling(folder: str) -> tuple[str, int | None, bool]:
    """The Pooling module's kerasbert pooling, its ``word_embedding_dimension`` and ``include_prompt``, from its
    ``config.json``."""
    where = os.path.join(folder, "config.json")
    config = _json(where, "a JSON object of pooling modes")
    if not isinstance(config, dict):
        raise fail(ConfigError, where, "a JSON object of pooling modes", type(config).__name__)
    modes = [key for key in POOLING_MODES if config.get(key, key == "pooling_mode_mean_tokens")]
    have = "one of pooling_mode_cls_token or pooling_mode_mean_tokens (kerasbert's cls and mean poolings)"
    if len(modes) != 1 or POOLING_MODES[modes[0]] is None:
        found = (" + ".join(modes) + " (concatenated)" if len(modes) > 1 else f"{modes[0]}" if modes
                 else "no pooling mode set")
        raise fail(ConfigError, where, have, found, "kerasbert has no layer for this pooling")
    dimension = config.get("word_embedding_dimension")
    if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int)):
        raise fail(ConfigError, f"{where}: word_embedding_dimension", "an integer", repr(dimension))
    include = config.get("include_prompt", True)
    if not isinstance(include, bool):
        raise fail(ConfigError, f"{where}: include_prompt", "true or false", repr(include))
    return POOLING_MODES[modes[0]], dimension, include


def _settings(folder: str) -> tuple[int | None, bool | None]:
    """``max_seq_length`` and ``do_lower_case`` of the Transformer module's ``sentence_bert_config.json``."""
    where = os.path.join(folder, SETTINGS)
    if not os.path.isfile(where):
        return None, None
    settings = _json(where, "a JSON object")
    if not isinstance(settings, dict):
        raise fail(ConfigError, where, "a JSON object", type(settings).__name__)
    maxlen, lowercase = settings.get("max_seq_length"), settings.get("do_lower_case")
    if maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 2):
        raise fail(ConfigError, f"{where}: max_seq_length", "an integer >= 2 (word pieces, [CLS] and [SEP] "
                   "included)", repr(maxlen))
    if lowercase is not None and not isinstance(lowercase, bool):
        raise fail(ConfigError, f"{where}: do_lower_case", "true or false", repr(lowercase))
    return maxlen, lowercase


def read_prompts(path: str | os.PathLike) -> tuple[dict[str, str], str | None]:
    """The ``prompts`` and ``default_prompt_name`` a sentence-transformers folder's
    ``config_sentence_transformers.json`` declares (``{}`` and None without the file or the keys).

    Raises:
        ConfigError: prompts that are not a JSON object of strings, or a default prompt name it does not declare.

    Example:
    >>> read_prompts("/no/such/folder")
    ({}, None)
    """
    where = os.path.join(os.fspath(path), PROMPTS)
    if not os.path.isfile(where):
        return {}, None
    config = _json(where, "a JSON object")
    if not isinstance(config, dict):
        raise fail(ConfigError, where, "a JSON object", type(config).__name__)
    prompts, default = config.get("prompts") or {}, config.get("default_prompt_name")
    if not isinstance(prompts, dict) or not all(isinstance(text, str) for text in prompts.values()):
        raise fail(ConfigError, f"{where}: prompts", 'a JSON object of names and texts, e.g. {"query": "query: "}',
                   json.dumps(prompts)[:80])
    if default is not None and default not in prompts:
        raise fail(ConfigError, f"{where}: default_prompt_name", "one of its prompts: " + (
                   ", ".join(prompts) or "it declares none"), repr(default))
    return dict(prompts), default


def read_sentence_transformers(path: str | os.PathLike) -> SentenceTransformersFolder:
    """Read and check what a sentence-transformers folder declares, without loading weights.

    Raises:
        ConfigError: a module or pooling mode kerasbert has no layer for, a ``word_embedding_dimension`` other
            than the encoder's hidden size, or a file that is missing or not the JSON it should be.

    Example:
    >>> read_sentence_transformers("/no/such/folder")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: /no/such/folder/modules.json: expected a JSON list ..., found no such file...
    """
    from kerasbert.modeling.config import BertConfig

    folder = os.fspath(path)
    modules = _modules(folder)
    pooling, dimension, include_prompt = _pooling(modules["Pooling"])
    hidden = BertConfig.from_json(modules["Transformer"]).hidden_size
    if dimension is not None and dimension != hidden:
        raise fail(ConfigError, os.path.join(modules["Pooling"], "config.json") + ": word_embedding_dimension",
                   f"the encoder's hidden_size, {hidden}", str(dimension),
                   "the pooling belongs to another model: download the folder again")
    maxlen, lowercase = _settings(modules["Transformer"])
    prompts, default = read_prompts(folder)
    return SentenceTransformersFolder(folder, modules["Transformer"], pooling, "Normalize" in modules, maxlen,
                                      lowercase, prompts, default, include_prompt)
