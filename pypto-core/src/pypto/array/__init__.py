"""The array-level API: ``@pt.jit`` functions of whole arrays, compiled through the kernel pipeline."""

from pypto.array import ops, views  # noqa: F401, E402  (they give Array its [], @, transpose and reshape)
