"""pypto: write tensor kernels in a few lines of Python, run them as native parallel code.

    import pypto as pt

    N = pt.dim("N")

    @pt.kernel
    def vector_add(a: pt.Tensor[float, (N,)], b: pt.Tensor[float, (N,)], c: pt.Tensor[float, (N,)]):
        i = pt.axis(0)
        c[i] = a[i] + b[i]

Backends (OpenMP, TBB, CUDA, OpenCL, and the always-available NumPy ``reference``) are plugins;
see :func:`list_backends` and :func:`get_runtime_info`. ``import pypto`` loads nothing but this
module: each public name is imported the first time it is used.
"""

from typing import TYPE_CHECKING

from pypto._version import __version__

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load on first use
    from pypto.array.autodiff import GradFunction, grad, grad_enabled, is_grad_enabled, no_grad, value_and_grad, vjp
    from pypto.array.checkpoint import checkpoint
    from pypto.array.custom import CustomOp, custom_op
    from pypto.array.function import JitFunction, jit
    from pypto.array.graph import stop_gradient
    from pypto.array.introspect import check_memory, show_graph
    from pypto.array.module import Module, Parameter, module
    from pypto.array.ops import (
        concat,
        e,
        einsum,
        gelu,
        layer_norm,
        log_softmax,
        matmul,
        pi,
        relu,
        rms_norm,
        silu,
        softmax,
        stack,
    )
    from pypto.array.precision import get_precision, set_precision
    from pypto.array.views import embedding, take, take_along_axis
    from pypto.distributed import DistributedDataParallel, get_rank, get_world_size, init_distributed
    from pypto.dtypes import (
        DType,
        bfloat16,
        bool_,
        complex64,
        complex128,
        float16,
        float32,
        float64,
        int8,
        int16,
        int32,
        int64,
        uint8,
        uint16,
        uint32,
        uint64,
    )
    from pypto.errors import (
        AliasingError,
        ArgumentError,
        BackendNotFound,
        BackendUnavailable,
        CacheWarning,
        CompileError,
        DTypeError,
        IndexError,
        IRVerificationError,
        LaunchError,
        PerformanceWarning,
        PluginError,
        PluginWarning,
        PyptoError,
        RechunkWarning,
        ScheduleError,
        ShapeError,
        SpecializationWarning,
        TracingError,
    )
    from pypto.hookspecs import hookimpl
    from pypto.ir.schedule import Schedule
    from pypto.lang.functions import (
        abs,
        angle,
        arctan2,
        atan,
        atan2,
        axis,
        cast,
        conj,
        conjugate,
        cos,
        cosh,
        cummax,
        cummin,
        cumprod,
        cumsum,
        dim,
        dims,
        erf,
        exp,
        expm1,
        hypot,
        imag,
        log,
        log1p,
        log2,
        log10,
        maximum,
        minimum,
        real,
        reduce_max,
        reduce_mean,
        reduce_min,
        reduce_prod,
        reduce_sum,
        rsqrt,
        scatter,
        scatter_add,
        scatter_max,
        scatter_min,
        sigmoid,
        sin,
        sinh,
        sqrt,
        tan,
        tanh,
        where,
    )
    from pypto.lang.kernel import kernel, tile
    from pypto.lang.tensor import Tensor
    from pypto.lang.values import Axis, Dim
    from pypto.plugins import list_backends, register_plugin, reload_plugins, unregister_plugin
    from pypto.runtime.benchmark import BenchmarkResult, benchmark
    from pypto.runtime.info import get_runtime_info
    from pypto.runtime.kernel import Kernel
    from pypto.runtime.memory import empty, empty_like, zeros, zeros_like
    from pypto.runtime.profile import profile
    from pypto.runtime.stream import current_stream, stream
    from pypto.runtime.threads import get_num_threads, set_num_threads


_LAZY: dict[str, str] = {
    # .dtypes
    "DType": ".dtypes",
    "bool_": ".dtypes",
    "float16": ".dtypes",
    "bfloat16": ".dtypes",
    "complex64": ".dtypes",
    "complex128": ".dtypes",
    "float32": ".dtypes",
    "float64": ".dtypes",
    "int8": ".dtypes",
    "int16": ".dtypes",
    "int32": ".dtypes",
    "int64": ".dtypes",
    "uint8": ".dtypes",
    "uint16": ".dtypes",
    "uint32": ".dtypes",
    "uint64": ".dtypes",
    # .errors
    "AliasingError": ".errors",
    "ArgumentError": ".errors",
    "BackendNotFound": ".errors",
    "BackendUnavailable": ".errors",
    "CompileError": ".errors",
    "DTypeError": ".errors",
    "IRVerificationError": ".errors",
    "LaunchError": ".errors",
    "PluginError": ".errors",
    "PluginWarning": ".errors",
    "PerformanceWarning": ".errors",
    "SpecializationWarning": ".errors",
    "RechunkWarning": ".errors",
    "CacheWarning": ".errors",
    "PyptoError": ".errors",
    "ScheduleError": ".errors",
    "ShapeError": ".errors",
    "IndexError": ".errors",
    "TracingError": ".errors",
    # .hookspecs
    "hookimpl": ".hookspecs",
    # .array (the array-level API)
    "jit": ".array.function",
    "set_precision": ".array.precision",
    "get_precision": ".array.precision",
    "grad": ".array.autodiff",
    "stop_gradient": ".array.graph",
    "value_and_grad": ".array.autodiff",
    "vjp": ".array.autodiff",
    "no_grad": ".array.autodiff",
    "grad_enabled": ".array.autodiff",
    "is_grad_enabled": ".array.autodiff",
    "GradFunction": ".array.autodiff",
    "custom_op": ".array.custom",
    "CustomOp": ".array.custom",
    "checkpoint": ".array.checkpoint",
    "show_graph": ".array.introspect",
    "check_memory": ".array.introspect",
    "Parameter": ".array.module",
    "Module": ".array.module",
    "module": ".array.module",
    # .distributed (on torch.distributed)
    "init_distributed": ".distributed",
    "DistributedDataParallel": ".distributed",
    "get_rank": ".distributed",
    "get_world_size": ".distributed",
    "profile": ".runtime.profile",
    "JitFunction": ".array.function",
    "e": ".array.ops",
    "concat": ".array.ops",
    "stack": ".array.ops",
    "einsum": ".array.ops",
    "gelu": ".array.ops",
    "layer_norm": ".array.ops",
    "log_softmax": ".array.ops",
    "matmul": ".array.ops",
    "pi": ".array.ops",
    "relu": ".array.ops",
    "rms_norm": ".array.ops",
    "silu": ".array.ops",
    "softmax": ".array.ops",
    "take": ".array.views",
    "one_hot": ".array.ops",
    "index_add": ".array.views",
    "bincount": ".array.views",
    "histogram": ".array.views",
    "cross_entropy": ".array.ops",
    "take_along_axis": ".array.views",
    "embedding": ".array.views",
    # .lang.functions
    "abs": ".lang.functions",
    "angle": ".lang.functions",
    "arctan2": ".lang.functions",
    "isnan": ".lang.functions",
    "isinf": ".lang.functions",
    "isfinite": ".lang.functions",
    "sign": ".lang.functions",
    "arange": ".array.ops",
    "linspace": ".array.ops",
    "eye": ".array.ops",
    "tril": ".array.ops",
    "triu": ".array.ops",
    "logsumexp": ".array.ops",
    "arcsin": ".lang.functions",
    "arcsinh": ".lang.functions",
    "arccosh": ".lang.functions",
    "arctanh": ".lang.functions",
    "arccos": ".lang.functions",
    "arctan": ".lang.functions",
    "atan2": ".lang.functions",
    "conj": ".lang.functions",
    "conjugate": ".lang.functions",
    "hypot": ".lang.functions",
    "copysign": ".lang.functions",
    "fmod": ".lang.functions",
    "signbit": ".lang.functions",
    "logaddexp": ".lang.functions",
    "imag": ".lang.functions",
    "real": ".lang.functions",
    "axis": ".lang.functions",
    "cast": ".lang.functions",
    "dim": ".lang.functions",
    "range": ".lang.sequential",  # (not in __all__: a star import must not hide Python's range)
    "dims": ".lang.functions",
    "maximum": ".lang.functions",
    "minimum": ".lang.functions",
    "reduce_max": ".lang.functions",
    "argmax": ".lang.functions",
    "cumsum": ".lang.functions",
    "associative_scan": ".lang.functions",
    "sort": ".lang.functions",
    "argsort": ".lang.functions",
    "topk": ".lang.functions",
    "cumprod": ".lang.functions",
    "cummax": ".lang.functions",
    "cummin": ".lang.functions",
    "argmin": ".lang.functions",
    "reduce_mean": ".lang.functions",
    "reduce_min": ".lang.functions",
    "reduce_prod": ".lang.functions",
    "reduce_sum": ".lang.functions",
    "where": ".lang.functions",
    "scatter": ".lang.functions",
    "scatter_add": ".lang.functions",
    "scatter_max": ".lang.functions",
    "scatter_min": ".lang.functions",
    # .lang.tensor
    "Tensor": ".lang.tensor",
    # .lang.values
    "Axis": ".lang.values",
    "Dim": ".lang.values",
    # .plugins
    "list_backends": ".plugins",
    "register_plugin": ".plugins",
    "reload_plugins": ".plugins",
    "unregister_plugin": ".plugins",
    # .runtime.benchmark
    "BenchmarkResult": ".runtime.benchmark",
    "benchmark": ".runtime.benchmark",
    # .runtime.stream
    "stream": ".runtime.stream",
    "current_stream": ".runtime.stream",
    # .runtime.info
    "get_runtime_info": ".runtime.info",
    # .runtime.threads
    "set_num_threads": ".runtime.threads",
    "get_num_threads": ".runtime.threads",
    # .runtime.kernel
    "Kernel": ".runtime.kernel",
    "kernel": ".lang.kernel",
    "tile": ".lang.kernel",
    # .ir.schedule
    "Schedule": ".ir.schedule",
    # .runtime.memory
    "empty": ".runtime.memory",
    "empty_like": ".runtime.memory",
    "zeros": ".runtime.memory",
    "zeros_like": ".runtime.memory",
}


_SUBMODULES = frozenset({"torch", "dask", "optim", "array_api"})


def __getattr__(name: str) -> object:
    """Load a public name on first use: ``import pypto`` itself costs about a millisecond."""
    import importlib

    if name in _SUBMODULES:  # pt.torch: the PyTorch integration, imported on first use
        value = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is None:
        from pypto.ir.ops import MATH  # pt.exp, pt.log1p ...: one function per entry of the op table

        if name not in MATH:
            raise AttributeError(f"module 'pypto' has no attribute {name!r}")
        module = ".lang.functions"

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    from pypto.ir.ops import MATH

    return sorted(set(globals()) | set(_LAZY) | _SUBMODULES | set(MATH))


__all__ = [
    "__version__",
    # types
    "DType", "bool_", "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "complex64", "complex128", "Tensor", "Axis", "Dim",
    # language
    "kernel", "Kernel", "tile", "Schedule", "axis", "dim", "dims", "abs", "maximum", "minimum", "where", "cast", "scatter", "scatter_add", "scatter_max", "scatter_min",
    # math functions (the op table, pypto.ir.ops)
    "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf", "sigmoid", "log1p", "expm1", "log2", "log10", "tan",
    "atan", "sinh", "cosh", "asin", "acos", "asinh", "acosh", "atanh", "cbrt", "exp2", "floor", "ceil", "trunc", "arcsin",
    "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "atan2",
    "arctan2", "hypot", "fmod", "copysign", "signbit", "logaddexp", "isnan", "isinf", "isfinite", "sign",  # (and pt.round: not here, so that a star import
    # keeps Python's round)
    "arange", "linspace", "eye", "tril", "triu", "logsumexp",
    # complex numbers
    "real", "imag", "conj", "conjugate", "angle",
    "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_mean", "argmax", "argmin",
    "cumsum", "cumprod", "cummax", "cummin", "associative_scan", "sort", "argsort", "topk",
    # array API
    "jit", "JitFunction", "grad", "stop_gradient", "value_and_grad", "vjp", "no_grad", "grad_enabled", "is_grad_enabled",
    "GradFunction", "matmul", "einsum", "softmax", "log_softmax", "layer_norm", "rms_norm", "gelu", "silu",
    "relu", "pi", "e", "concat", "stack", "take", "take_along_axis", "embedding", "one_hot", "cross_entropy", "index_add", "bincount", "histogram", "custom_op", "CustomOp", "checkpoint", "show_graph", "check_memory", "profile", "Parameter", "Module",
    "module",
    # training
    "init_distributed", "DistributedDataParallel", "get_rank", "get_world_size",
    # runtime
    "empty", "zeros", "empty_like", "zeros_like", "benchmark", "BenchmarkResult", "get_runtime_info",
    "set_precision", "get_precision",
    "set_num_threads", "get_num_threads", "stream", "current_stream",
    "list_backends", "register_plugin", "unregister_plugin", "reload_plugins", "hookimpl",
    # errors
    "PyptoError", "TracingError", "DTypeError", "ShapeError", "AliasingError", "ArgumentError", "BackendNotFound",
    "BackendUnavailable", "CompileError", "LaunchError", "PluginError", "PluginWarning", "SpecializationWarning", "CacheWarning", "IRVerificationError",
    "ScheduleError", "RechunkWarning", "PerformanceWarning", "IndexError",
]  # fmt: skip
