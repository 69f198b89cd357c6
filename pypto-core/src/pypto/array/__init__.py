"""The array-level API: ``@pt.jit`` functions of whole arrays, compiled through the kernel pipeline."""

from pypto.array import numpy_api, numpy_library, ops, updates, views  # noqa: F401, E402  (they give Array its [], @, transpose, reshape
# and NumPy's functions)
