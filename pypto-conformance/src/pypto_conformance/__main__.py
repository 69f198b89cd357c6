"""``python -m pypto_conformance``: the same as the ``pypto-conformance`` command."""

import sys

from .cli import main

sys.exit(main())
