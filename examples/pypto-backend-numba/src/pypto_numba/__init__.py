"""An example pypto backend: the loop IR rendered as Python and compiled by Numba.

Install it next to ``pypto-core`` and kernels can run with ``@pt.kernel(executor="numba")``.
The package is written against the public plugin API only (``pypto.hookspecs``,
``pypto.backend_api`` and the loop IR in ``pypto.ir.loops``); the documentation page
"Write a backend plugin" walks through it.
"""

__version__ = "0.1.0"
