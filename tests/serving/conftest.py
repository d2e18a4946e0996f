"""The serving tests' language models: the generation tests' tiny random models, sources and end token."""

from generation.conftest import end_token, language_model, sources  # noqa: F401 - fixtures, found by their names
