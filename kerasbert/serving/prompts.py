"""Prompts: a text put before each text before it is embedded, as sentence-transformers'
``SentenceTransformer.encode(prompt_name=..., prompt=...)`` puts it.

A sentence-transformers folder declares its prompts by name in ``config_sentence_transformers.json``
(multilingual-e5: ``{"query": "query: ", "passage": "passage: "}``) and maybe a ``default_prompt_name``
(`kerasbert.weights.sentence_transformers.read_prompts`); an export of such a folder records both in
``kerasbert-export.json``. `choose_prompt` picks the text: ``prompt`` as given (``""``: none, the default left out
too), else the prompt named ``prompt_name``, else the default prompt, else none. The prompt is part of the text:
it is cut with it to ``maxlen`` word pieces, so its pieces count against ``max_seq_length`` as in
sentence-transformers. A checkpoint or a run declares no prompts; ``prompt`` works with every folder.
"""

from __future__ import annotations

import os

from kerasbert.errors import ConfigError, fail

__all__ = ["check_prompt_options", "choose_prompt", "declared_prompts"]


def check_prompt_options(prompt_name: str | None, prompt: str | None) -> None:
    """A ConfigError for a ``prompt_name`` or ``prompt`` that is not a string, or for both given.

    Example:
    >>> check_prompt_options("query", "query: ")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: prompt_name and prompt: expected one of them, found both. prompt is the text \
itself, prompt_name a name the folder declares
    """
    for name, value in (("prompt_name", prompt_name), ("prompt", prompt)):
        if value is not None and not isinstance(value, str):
            raise fail(ConfigError, name, "a string or None", f"a {type(value).__name__} {str(value)[:40]}")
    if prompt_name is not None and prompt is not None:
        raise fail(ConfigError, "prompt_name and prompt", "one of them", "both",
                   "prompt is the text itself, prompt_name a name the folder declares")


def choose_prompt(prompts: dict[str, str], default_name: str | None, prompt_name: str | None, prompt: str | None,
                  where: str) -> str:
    """The text put before each text (``""``: none).

    Args:
        prompts: dict. the prompts a folder declares, by name.
        default_name: str or None. the prompt used when neither ``prompt_name`` nor ``prompt`` is given.
        prompt_name: str or None. the name of one of ``prompts``.
        prompt: str or None. the text itself; ``""`` leaves the default prompt out.
        where: str. the file that declares ``prompts``, named in an error.

    Raises:
        ConfigError: a ``prompt_name`` the folder does not declare, naming ``where`` and the names it has.

    Example:
    >>> prompts = {"query": "query: ", "passage": "passage: "}
    >>> choose_prompt(prompts, None, "query", None, "e5/config_sentence_transformers.json")
    'query: '
    >>> choose_prompt(prompts, "passage", None, None, "e5/config_sentence_transformers.json")
    'passage: '
    >>> choose_prompt(prompts, None, "doc", None, "e5/config_sentence_transformers.json")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ConfigError: e5/config_sentence_transformers.json: expected a prompt named 'doc' among its \
prompts 'query', 'passage', found no such name. pass one of these names, or the text itself as prompt (--prompt)
    """
    check_prompt_options(prompt_name, prompt)
    if prompt is not None:
        return prompt
    if prompt_name is None:
        return prompts.get(default_name, "") if default_name is not None else ""
    if prompt_name not in prompts:
        names = ", ".join(repr(name) for name in prompts)
        raise fail(ConfigError, where, f"a prompt named {prompt_name!r}" + (f" among its prompts {names}" if names
                   else " (a config_sentence_transformers.json with \"prompts\")"),
                   "no such name" if names else "no prompts declared",
                   ("pass one of these names, or" if names else "pass") + " the text itself as prompt (--prompt)")
    return prompts[prompt_name]


def declared_prompts(path: str, kind: str) -> tuple[dict[str, str], str | None, str]:
    """The prompts a folder of ``kind`` (`kerasbert.serving.embed.folder_kind`) declares, its default prompt name and
    the file that declares them (the folder itself where none can).

    Example:
    >>> declared_prompts("/a/checkpoint", "checkpoint")
    ({}, None, '/a/checkpoint')
    """
    from kerasbert.serving.folder import EXPORT_INFO, read_info
    from kerasbert.weights.sentence_transformers import PROMPTS, read_prompts

    if kind == "sentence-transformers":
        return (*read_prompts(path), os.path.join(path, PROMPTS))
    if kind == "export":
        info = read_info(path)
        return dict(info.get("prompts") or {}), info.get("default_prompt_name"), os.path.join(path, EXPORT_INFO)
    return {}, None, path
