"""``python -m pypto`` runs the ``pypto`` command."""

from pypto.cli import main

raise SystemExit(main())
