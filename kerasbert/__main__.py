"""``python -m kerasbert``: the same as the ``kerasbert`` console script."""

import sys

from kerasbert.cli import main

sys.exit(main())
