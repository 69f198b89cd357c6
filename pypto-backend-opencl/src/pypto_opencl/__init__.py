"""The OpenCL backend of pypto: ``@pt.kernel(executor="opencl")``."""

__version__ = "0.1.0"
