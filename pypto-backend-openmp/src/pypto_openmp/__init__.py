"""The C/OpenMP backend of pypto: ``@pt.kernel(executor="openmp")``."""

__version__ = "0.1.0"
