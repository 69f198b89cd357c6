"""``@pt.jit``: functions of whole arrays, traced per input signature and compiled into one kernel.

    @pt.jit
    def mlp(x, w, b):
        return pt.gelu(x @ w + b)

    y = mlp(x, w, b)             # traced for these shapes and dtypes, compiled, run; a new array

The first call with a new signature (each array's shape and dtype, each Python number's value)
runs the function on :class:`~pypto.array.graph.Array` values, which record the operations;
:func:`~pypto.array.lower.lower` turns the program into one kernel (its outputs, plus the
temporaries it needs, are the kernel's output parameters), and the kernel goes through the
compiler's stages and the backend like any ``@pt.kernel``. Later calls with the same signature
allocate the results (64-byte aligned) and call the compiled kernel.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import numbers
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.array.graph import Array, input_array
from pypto.array.lower import Buffer, Plan, lower
from pypto.errors import ArgumentError, DTypeError, ShapeError, TracingError
from pypto.ir.schedule import Schedule
from pypto.lang.values import _RESERVED
from pypto.runtime.kernel import Kernel


class _PlanKernel(Kernel):
    """The kernel of one traced signature: its IR comes from the array program, not from tracing a body."""

    def __init__(self, plan: Plan, fn: Callable, **options: Any):
        super().__init__(fn, **options)
        self._traced = plan.kernel


def _param_name(name: str, k: int, taken: set[str]) -> str:
    ok = name.isidentifier() and name.isascii() and not name.startswith("_") and not keyword.iskeyword(name)
    base = name if ok and name not in _RESERVED else f"arg{k}"
    out = base
    while out in taken or out in _RESERVED:
        out += "_"
    taken.add(out)
    return out


POOL_SIZE = 2  # buffers kept per result or temporary for reuse (see Compiled.take)


def _aligned(nbytes: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.empty(nbytes + 64, np.uint8)
    off = (-raw.__array_interface__["data"][0]) % 64
    return raw[off : off + nbytes].view(dtype).reshape(shape)


class Compiled:
    """One signature's program: the plan, its kernel, and how a call binds to it.

    Results and temporaries come from a small pool per buffer: a buffer is handed out again only
    when nothing outside the pool refers to it any more (the caller dropped the result, or the
    temporary's call returned), so steady loops such as ``y = f(x)`` stop paying for fresh pages.
    """

    def __init__(self, plan: Plan, kernel: Kernel, inputs: list[int], single: bool):
        self.plan = plan
        self.kernel = kernel
        self.single = single  # the function returned one array (not a tuple)
        by_name = {b.name: k for k, b in enumerate(plan.buffers)}
        self.n = len(plan.buffers)
        self.feeds: list[tuple[int, int, tuple[int, ...] | None]] = []  # (buffer, argument, reshape to)
        self.allocs: list[tuple[int, int, np.dtype, tuple[int, ...]]] = []  # (buffer, bytes, dtype, shape)
        self.views: list[tuple[int, int]] = []  # (flat view buffer, buffer it views)
        args = iter(inputs)
        for k, b in enumerate(plan.buffers):
            if b.kind == "input" and b.source is None:
                node = b.node
                assert node is not None
                self.feeds.append((k, next(args), b.shape if node.shape != b.shape else None))
            elif b.kind == "input":
                self.views.append((k, by_name[b.source]))  # type: ignore[index]
            else:
                self.allocs.append((k, b.nbytes, np.dtype(b.dtype.numpy), b.shape))
        self.results = [(pos, plan.buffers[pos].node.shape) for pos in plan.outputs]  # type: ignore[union-attr]
        self.pools: dict[int, list[np.ndarray]] = {k: [] for k, *_ in self.allocs}
        self.lock = threading.Lock()

    def take(self, k: int, nbytes: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """A buffer for ``k``: a pooled one nothing else refers to, else a new 64-byte aligned one."""
        pool = self.pools[k]
        with self.lock:
            for a in pool:
                if sys.getrefcount(a) == 3:  # the pool's list, this loop, getrefcount's argument
                    return a
            a = _aligned(nbytes, dtype, shape)
            if len(pool) < POOL_SIZE:
                pool.append(a)
            return a

    def run(self, args: tuple, given: dict[int, np.ndarray]) -> Any:
        bound: list[Any] = [None] * self.n
        for k, src, shape in self.feeds:
            a = args[src]
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            bound[k] = a if shape is None else a.reshape(shape)
        for k, nbytes, dtype, shape in self.allocs:
            o = given.get(k) if given else None
            bound[k] = self.take(k, nbytes, dtype, shape) if o is None else o.reshape(shape)
        for k, s in self.views:
            bound[k] = np.asarray(bound[s]).reshape(-1)
        self.kernel(*bound)
        if self.single:
            pos, shape = self.results[0]
            if given:
                return given[pos]
            r = bound[pos]
            return r if r.shape == shape else r.reshape(shape)
        out = []
        for pos, shape in self.results:
            r = given[pos] if given else bound[pos]
            out.append(r if r.shape == shape else r.reshape(shape))
        return tuple(out)


class JitFunction:
    """A ``@pt.jit`` function: call it with arrays; it returns new arrays (or fills ``out=``)."""

    def __init__(self, fn: Callable, *, executor: str | None = None, fastmath: bool = False,
                 schedule: Schedule | dict | None = None):  # fmt: skip
        if not callable(fn):
            raise ArgumentError(f"pt.jit: expected a function, got {fn!r}", param="fn", expected="a function", got=fn)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.options: dict[str, Any] = {"executor": executor, "fastmath": fastmath, "schedule": schedule}
        self._cache: dict[tuple, Compiled] = {}
        self._lock = threading.Lock()
        try:
            self._params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            self._params = []
        variadic = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in self._params)
        positional = [p for p in self._params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = sum(p.default is p.empty for p in positional)
        self._nargs: tuple[int, int] | None = None if variadic else (required, len(positional))

    # -- signatures ----------------------------------------------------------------------------------------
    def _key_of(self, k: int, a: Any) -> tuple:
        """The signature entry of argument ``k``: shape and dtype of an array, type and value of a number."""
        if isinstance(a, np.ndarray):
            return (a.shape, a.dtype)
        if isinstance(a, (bool, np.bool_, numbers.Number)) and not isinstance(a, complex):
            return ("scalar", type(a).__name__, a.item() if isinstance(a, np.generic) else a)
        if hasattr(a, "__array_interface__") or hasattr(a, "__array__"):
            arr = np.asarray(a)
            return (arr.shape, arr.dtype)
        raise ArgumentError(
            f"{self.__name__}: argument {self._arg_name(k)} is a {type(a).__name__}",
            param=self._arg_name(k),
            expected="a NumPy array (or an object with __array_interface__) or a Python number",
            got=type(a).__name__,
            fix="convert it with np.asarray(...) first",
        )

    def _key(self, args: tuple) -> tuple:
        return tuple(self._key_of(k, a) for k, a in enumerate(args))

    def _arg_name(self, k: int) -> str:
        return self._params[k].name if k < len(self._params) else f"#{k}"

    def _compile(self, args: tuple, key: tuple) -> Compiled:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            taken: set[str] = set()
            traced: list[Any] = []
            inputs: list[tuple[str, Array]] = []
            positions: list[int] = []
            for k, a in enumerate(args):
                if isinstance(key[k][0], str):  # a Python number: a constant of this signature
                    traced.append(key[k][2])
                    continue
                arr = np.asarray(a)
                dt = dtypes.from_numpy(arr.dtype)
                if dt is None:
                    raise DTypeError(
                        f"{self.__name__}: argument {self._arg_name(k)} has dtype {arr.dtype}",
                        param=self._arg_name(k),
                        expected="float32, float64, int32, int64 or bool",
                        got=str(arr.dtype),
                        fix="convert it with .astype(np.float32) (or another supported dtype)",
                    )
                name = _param_name(self._arg_name(k), k, taken)
                node = input_array(name, arr.shape, dt)
                traced.append(node)
                inputs.append((name, node))
                positions.append(k)
            result = self.fn(*traced)
            single = not isinstance(result, (tuple, list))
            results = [result] if single else list(result)
            if not results:
                raise TracingError(f"@pt.jit function '{self.__name__}' returned nothing", None,
                                   "return the array (or a tuple of arrays) it computes")  # fmt: skip
            outs: list[tuple[str, Array]] = []
            for k, r in enumerate(results):
                if not isinstance(r, Array):
                    raise TracingError(
                        f"@pt.jit function '{self.__name__}' returned a {type(r).__name__} as result {k}",
                        None,
                        "return arrays computed from the arguments (a tuple of them for several results)",
                    )
                outs.append((_param_name(f"out{k}" if len(results) > 1 else "out", k, taken), r))
            plan = lower(_kernel_name(self.__name__), inputs, outs)
            opts = {k: v for k, v in self.options.items() if v is not None}
            kern = _PlanKernel(plan, self.fn, **opts)
            compiled = Compiled(plan, kern, positions, single)
            self._cache[key] = compiled
            return compiled

    def compiled(self, *args: Any) -> Compiled:
        key = self._key(args)
        hit = self._cache.get(key)
        return hit if hit is not None else self._compile(args, key)

    # -- calls ---------------------------------------------------------------------------------------------
    def __call__(self, *args: Any, out: Any = None) -> Any:
        key = tuple((a.shape, a.dtype) if type(a) is np.ndarray else self._key_of(k, a) for k, a in enumerate(args))
        c = self._cache.get(key)
        if c is None:
            if self._nargs is not None and not self._nargs[0] <= len(args) <= self._nargs[1]:
                lo, hi = self._nargs
                want = str(lo) if lo == hi else f"{lo} to {hi}"
                raise ArgumentError(
                    f"{self.__name__}() takes {want} argument(s), {len(args)} were given",
                    param="args",
                    expected=f"{want} arrays or numbers",
                    got=len(args),
                )
            c = self._compile(args, key)
        return c.run(args, self._outs(out, c) if out is not None else {})

    def _outs(self, out: Any, c: Compiled) -> dict[int, np.ndarray]:
        if out is None:
            return {}
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(c.plan.outputs):
            raise ArgumentError(
                f"{self.__name__}: out= has {len(outs)} array(s), the function returns {len(c.plan.outputs)}",
                param="out",
                expected=f"{len(c.plan.outputs)} array(s)",
                got=len(outs),
            )
        given = {}
        for k, (pos, o) in enumerate(zip(c.plan.outputs, outs)):
            b: Buffer = c.plan.buffers[pos]
            assert b.node is not None
            if not isinstance(o, np.ndarray):
                raise ArgumentError(f"{self.__name__}: out[{k}] is a {type(o).__name__}", param="out",
                                    expected="a NumPy array", got=type(o).__name__)  # fmt: skip
            if o.shape != b.node.shape:
                raise ShapeError(
                    f"{self.__name__}: out[{k}] has shape {o.shape}, the result has {b.node.shape}",
                    param="out",
                    expected=str(b.node.shape),
                    got=o.shape,
                    fix=f"pass pt.empty({b.node.shape}, {b.dtype.name})",
                )
            if o.dtype != b.dtype.numpy:
                raise DTypeError(
                    f"{self.__name__}: out[{k}] has dtype {o.dtype}, the result is {b.dtype.name}",
                    param="out",
                    expected=b.dtype.name,
                    got=str(o.dtype),
                )
            given[pos] = o
        return given

    # -- introspection -------------------------------------------------------------------------------------
    def get_code(self, *args: Any, backend: str | None = None) -> str:
        """The source of the kernel compiled for these arguments' signature."""
        return self.compiled(*args).kernel.get_code(backend)

    def ir(self, *args: Any, stage: str | None = None, backend: str | None = None) -> str:
        """The kernel's IR after ``stage`` (default: the last) for these arguments' signature."""
        return self.compiled(*args).kernel.ir(stage, backend)

    def kernel(self, *args: Any) -> Kernel:
        """The :class:`~pypto.Kernel` compiled for these arguments' signature."""
        return self.compiled(*args).kernel

    def __repr__(self) -> str:
        return f"<pypto jit function {getattr(self.fn, '__qualname__', self.fn)}>"


def _kernel_name(name: str) -> str:
    from pypto.lang.tracer import _c_identifier

    return _c_identifier(name)


def jit(fn: Callable | None = None, *, executor: str | None = None, fastmath: bool = False,
        schedule: Schedule | dict | None = None) -> Any:  # fmt: skip
    """Compile a function of whole arrays (``@pt.jit`` or ``@pt.jit(executor="openmp")``)."""
    if fn is None:
        return lambda f: JitFunction(f, executor=executor, fastmath=fastmath, schedule=schedule)
    return JitFunction(fn, executor=executor, fastmath=fastmath, schedule=schedule)
