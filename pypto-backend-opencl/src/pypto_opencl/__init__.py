"""The OpenCL backend of pypto: ``@pt.kernel(executor="opencl")``."""

__version__ = "0.1.0"


def context():
    """The OpenCL context pypto's kernels run in: create ``pyopencl.array`` arguments in it."""
    from .device import context

    return context()


def queue():
    """The command queue pypto's kernels run on (``pyopencl.array.to_device(pypto_opencl.queue(), a)``)."""
    from .device import queue

    return queue()
