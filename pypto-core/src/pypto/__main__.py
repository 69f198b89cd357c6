"""``python -m pypto`` runs the ``pypto`` command."""

from .cli import main

raise SystemExit(main())
