"""The CUDA backend of pypto: ``@pt.kernel(executor="cuda")``."""

__version__ = "0.1.0"
