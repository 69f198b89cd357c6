"""The C++/oneTBB backend of pypto: ``@pt.kernel(executor="tbb")``."""

__version__ = "0.1.0"
