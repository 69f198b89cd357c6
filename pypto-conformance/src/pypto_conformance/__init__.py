"""pypto-conformance: the conformance suite every pypto backend must pass.

Run it with the ``pypto-conformance`` command or ``pytest --pyargs pypto_conformance.suite``
(options ``--pypto-backend``, ``--pypto-xfails``, ``--pypto-tolerances``, ``--pypto-max-examples``,
``--pypto-report``); ``docs/conformance.md`` explains how a backend author runs it, reads the
report and declares capabilities and tolerances. The catalogue is :mod:`pypto_conformance.cases`,
the differential fuzzer :mod:`pypto_conformance.fuzz`.
"""

from ._version import __version__

__all__ = ["__version__"]
