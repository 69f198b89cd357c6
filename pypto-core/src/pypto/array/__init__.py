"""The array-level API: ``@pt.jit`` functions of whole arrays, compiled through the kernel pipeline."""
