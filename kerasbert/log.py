"""The one logger kerasbert prints through (``logging.getLogger("kerasbert")``).

It prints plain lines to stderr at INFO, like Google's BERT scripts. Silence it with
``logging.getLogger("kerasbert").setLevel(logging.WARNING)``.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("kerasbert")
if not logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
