"""pypto: write tensor kernels in a few lines of Python, run them as native parallel code.

    import pypto as pt

    N = pt.dim("N")

    @pt.kernel
    def vector_add(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] + b[i]

Backends (OpenMP, TBB, CUDA, OpenCL, and the always-available NumPy ``reference``) are plugins;
see :func:`list_backends` and :func:`get_runtime_info`.
"""

from ._version import __version__
from .dtypes import DType, bool_, float32, float64, int32, int64
from .errors import (
    AliasingError,
    ArgumentError,
    BackendNotFound,
    BackendUnavailable,
    CompileError,
    DTypeError,
    IRVerificationError,
    PluginError,
    PluginWarning,
    PyptoError,
    ShapeError,
    TracingError,
)
from .hookspecs import hookimpl
from .lang.functions import (
    abs,
    axis,
    cast,
    cos,
    dim,
    dims,
    erf,
    exp,
    log,
    maximum,
    minimum,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    where,
)
from .lang.tensor import Tensor
from .lang.values import Axis, Dim
from .plugins import list_backends, register_plugin, reload_plugins
from .runtime.benchmark import BenchmarkResult, benchmark
from .runtime.info import get_runtime_info
from .runtime.kernel import Kernel, kernel
from .runtime.memory import empty, empty_like, zeros, zeros_like

__all__ = [
    "__version__",
    # types
    "DType", "bool_", "float32", "float64", "int32", "int64", "Tensor", "Axis", "Dim",
    # language
    "kernel", "Kernel", "axis", "dim", "dims", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf",
    "sigmoid", "abs", "maximum", "minimum", "where", "cast",
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_mean",
    # runtime
    "empty", "zeros", "empty_like", "zeros_like", "benchmark", "BenchmarkResult", "get_runtime_info",
    "list_backends", "register_plugin", "reload_plugins", "hookimpl",
    # errors
    "PyptoError", "TracingError", "DTypeError", "ShapeError", "AliasingError", "ArgumentError", "BackendNotFound",
    "BackendUnavailable", "CompileError", "PluginError", "PluginWarning", "IRVerificationError",
]  # fmt: skip
