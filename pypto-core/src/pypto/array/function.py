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
allocate the results (64-byte aligned) and call the compiled kernel. A function keeps the programs of
its ``JIT_CACHE_SIZE`` most recently used signatures; an older one, called again, is traced again and
its kernel loaded from the disk cache (no compilation).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import keyword
import math
import numbers
import sys
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pypto import dtypes
from pypto._lru import LRUCache
from pypto.array.graph import Array, capturing, input_array, runtime_scalars, scalar_input
from pypto.array.lower import Buffer, Plan, lower
from pypto.array.precision import check_precision, get_precision
from pypto.array.precision import done as precision_done
from pypto.array.precision import tracing as precision_tracing
from pypto.array.sizes import Size, has_sizes, symbolic_trace
from pypto.compiler import progress
from pypto.errors import ArgumentError, DTypeError, ShapeError, SpecializationWarning, TracingError
from pypto.ir.schedule import Schedule
from pypto.lang.control import rewrite
from pypto.lang.values import _RESERVED, Dim
from pypto.runtime.device_arrays import describe, empty_like_device, is_device_array, probe
from pypto.runtime.foreign import is_dask_array
from pypto.runtime.kernel import Kernel

_ELSEWHERE = ("elsewhere",)
"""The signature entry of a value the call does not run on here (a traced or a dask array): the call goes
to the traced program or to :mod:`pypto.dask` (:meth:`JitFunction._call_elsewhere`)."""


def _param_name(name: str, k: int, taken: set[str]) -> str:
    from pypto.lang.tracer import _CALLED

    ok = name.isidentifier() and name.isascii() and not name.startswith("_") and not keyword.iskeyword(name)
    ok = ok and name not in _CALLED and name.rstrip("f") not in _CALLED and not name.startswith("pt_")
    base = name if ok and name not in _RESERVED else f"arg{k}"
    out = base
    while out in taken or out in _RESERVED:
        out += "_"
    taken.add(out)
    return out


Spec = tuple  # a shape in a call's sizes: each entry an int, or ``(c,)`` for the c-th symbolic size


def _resolve(spec: Spec, sizes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(e if type(e) is int else sizes[e[0]] for e in spec)


POOL_SIZE = 2  # buffers kept per result or temporary for reuse (see Compiled.take)
JIT_CACHE_SIZE = 64  # programs (signatures) a jit function keeps, the least recently used dropped first


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

    def __init__(self, plan: Plan, kernel: Kernel, inputs: list[int], single: bool,
                 specs: dict[int, tuple[Spec, Spec]] | None = None, steps: Sequence[Compiled] = ()):  # fmt: skip
        self.plan = plan
        self.kernel = kernel
        # the programs of ``plan.steps``, run first: their results follow the call's arguments (``inputs`` counts
        # them as arguments len(args), len(args) + 1, ...)
        self.steps = list(steps)
        self.single = single  # the function returned one array (not a tuple)
        self.captured: tuple = ()  # NumPy arrays the traced function read from outside it (passed after the args)
        # Shape-generic programs (``pt.jit(dims=...)``): buffer -> (its declared shape, the shape of the value it
        # holds), each entry a size or ``(c,)`` for the call's c-th symbolic size.
        self.specs = specs
        by_name = {b.name: k for k, b in enumerate(plan.buffers)}
        self.n = len(plan.buffers)
        self.feeds: list[tuple[int, int, tuple[int, ...] | None]] = []  # (buffer, argument, reshape to)
        self.numbers: dict[int, np.dtype] = {}  # buffer -> the dtype a number argument is passed in
        # (buffer, bytes, dtype, declared shape, shape of the value: what the caller gets, () for a 0-d result)
        self.allocs: list[tuple[int, int, np.dtype, tuple[int, ...], tuple[int, ...]]] = []
        self.views: list[tuple[int, int, tuple[int, ...]]] = []  # (flat view buffer, buffer it views, its shape)
        args = iter(inputs)
        for k, b in enumerate(plan.buffers):
            if b.kind == "input" and b.source is None:
                node = b.node
                assert node is not None
                self.feeds.append((k, next(args), b.shape if node.shape != b.shape else None))
                if node.argument is not None:
                    self.numbers[k] = np.dtype(b.dtype.numpy)
            elif b.kind == "input":
                self.views.append((k, by_name[b.source], b.shape))  # type: ignore[index]
            else:
                held = b.node.shape if b.kind == "output" and b.node is not None else b.shape
                self.allocs.append((k, b.nbytes, np.dtype(b.dtype.numpy), b.shape, held))
        self.results = [(pos, plan.buffers[pos].node.shape) for pos in plan.outputs]  # type: ignore[union-attr]
        self.pools: dict[int, list[np.ndarray]] = {k: [] for k, *_ in self.allocs}
        self.lock = threading.Lock()
        self._shared: dict[int, int] | None = None

    @property
    def shared(self) -> dict[int, int]:
        """Temporaries the kernel keeps in another's memory (``plan_memory``): buffer -> the buffer whose array
        is passed for it (one allocation; the kernel never touches the first)."""
        if self._shared is None:
            by_name = {b.name: k for k, b in enumerate(self.plan.buffers)}
            pairs = self.kernel.shared_buffers()
            self._shared = {by_name[b]: by_name[a] for b, a in pairs.items() if b in by_name and a in by_name}
        return self._shared

    def take(self, k: int, nbytes: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """A buffer for ``k``: a pooled one nothing else refers to, else a new 64-byte aligned one.

        The pooled array is the very object a caller gets as a result, so its reference count tells whether
        the caller still holds it; a view the caller took of it (``f(x)[0]``, ``f(x).T``) refers to the memory's
        owner instead (NumPy points every view at the array that owns the memory, here the aligned byte
        buffer), so the owner's count must show no such view either."""
        pool = self.pools[k]
        with self.lock:
            for a in pool:
                # refs of the array: the pool, this loop, the argument; of its owner: the array, the argument
                if sys.getrefcount(a) == 3 and (a.base is None or sys.getrefcount(a.base) == 2) and a.shape == shape:
                    return a
            a = _aligned(nbytes, dtype, shape)
            if len(pool) < POOL_SIZE:
                pool.append(a)
            elif self.specs is not None:  # sizes change from call to call: keep the newest
                pool.pop(0)
                pool.append(a)
            return a

    def declared_shape(self, k: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
        """The declared shape of buffer ``k`` at a call of a shape-generic program whose symbolic dims have ``sizes``."""
        assert self.specs is not None
        return _resolve(self.specs[k][0], sizes)

    def shape_of(self, k: int, sizes: tuple[int, ...] | None) -> tuple[int, ...]:
        """The shape of the value buffer ``k`` holds at a call whose symbolic dims have ``sizes``."""
        if sizes is None or self.specs is None:
            node = self.plan.buffers[k].node
            assert node is not None
            return node.shape
        return _resolve(self.specs[k][1], sizes)

    @property
    def kernels(self) -> list[Kernel]:
        """Every kernel a call runs, in order (one, unless the program reads a scatter's result)."""
        return [*(s.kernel for s in self.steps), self.kernel]

    def run(self, args: tuple, given: dict[int, np.ndarray], sizes: tuple[int, ...] | None = None) -> Any:
        if self.captured:  # the arrays the function read from outside it, after the call's own
            args = (*args, *self.captured)
        for step in self.steps:  # scatter results the program reads, computed first
            args = (*args, *step.run(args, {}, sizes))
        bound: list[Any] = [None] * self.n
        device = None  # the first argument in a GPU's memory: results are allocated like it, on its device
        for k, src, shape in self.feeds:
            a = args[src]
            if type(a) is not np.ndarray:
                if is_device_array(a):
                    device = a if device is None else device
                elif k in self.numbers:  # a runtime number, in the type the program reads it in
                    a = np.asarray(a, dtype=self.numbers[k])
                else:
                    a = dtypes.python_array(a) if isinstance(a, (list, tuple)) else np.asarray(a)
            bound[k] = a if shape is None else a.reshape(shape)
        if device is not None:
            return self._run_device(bound, device, given, sizes)
        held: dict[int, np.ndarray] = {}
        shared = self.shared
        for k, nbytes, dtype, shape, value_shape in self.allocs:
            if k in shared:  # (bound below, to the array of the temporary whose memory it uses)
                continue
            if sizes is not None:
                shape = _resolve(self.specs[k][0], sizes)  # type: ignore[index]
                value_shape = _resolve(self.specs[k][1], sizes)  # type: ignore[index]
                nbytes = math.prod(shape) * dtype.itemsize
            o = given.get(k) if given else None
            if o is None:
                o = held[k] = self.take(k, nbytes, dtype, value_shape)
            bound[k] = o if o.shape == shape else o.reshape(shape)
        for k, owner in shared.items():
            bound[k] = bound[owner]
        for k, s, shape in self.views:
            if sizes is not None:
                shape = _resolve(self.specs[k][0], sizes)  # type: ignore[index]
            bound[k] = np.asarray(bound[s]).reshape(shape)
        self.kernel(*bound)
        if self.single:
            pos = self.results[0][0]
            return given[pos] if given else held[pos]
        return tuple(given[pos] if given else held[pos] for pos, _ in self.results)

    def _run_device(self, bound: list[Any], template: Any, given: dict[int, Any], sizes: tuple[int, ...] | None) -> Any:
        """A call on device arrays: results and temporaries are new arrays of the arguments' library on their
        device (that library's allocator pools them), and the kernel runs where the arrays are."""
        held: dict[int, Any] = {}
        shared = self.shared
        for k, _nbytes, dtype, shape, value_shape in self.allocs:
            if k in shared:
                continue
            if sizes is not None:
                shape = _resolve(self.specs[k][0], sizes)  # type: ignore[index]
                value_shape = _resolve(self.specs[k][1], sizes)  # type: ignore[index]
            o = given.get(k) if given else None
            if o is None:
                o = held[k] = empty_like_device(template, value_shape, dtype)
            bound[k] = o if tuple(o.shape) == shape else o.reshape(shape)
        for k, owner in shared.items():
            bound[k] = bound[owner]
        for k, s, shape in self.views:
            if sizes is not None:
                shape = _resolve(self.specs[k][0], sizes)  # type: ignore[index]
            bound[k] = bound[s].reshape(shape)
        self.kernel(*bound)
        if self.single:
            pos = self.results[0][0]
            return given[pos] if given else held[pos]
        return tuple(given[pos] if given else held[pos] for pos, _ in self.results)


class JitFunction:
    """A ``@pt.jit`` function: call it with arrays; it returns new arrays (or fills ``out=``)."""

    def __init__(self, fn: Callable, *, executor: str | None = None, fastmath: bool = False,
                 schedule: Schedule | dict | None = None, dims: Any = None, precision: str | None = None,
                 static_argnames: Sequence[str] | str | None = None, **options: Any):  # fmt: skip
        if not callable(fn):
            raise ArgumentError(f"pt.jit: expected a function, got {fn!r}", param="fn", expected="a function", got=fn)
        functools.update_wrapper(self, fn)
        self.fn = fn
        if precision is not None:
            check_precision(precision, "pt.jit")
        self.options: dict[str, Any] = {"executor": executor, "fastmath": fastmath, "schedule": schedule,
                                        "precision": precision, **options}  # fmt: skip
        self._caches: dict[str, LRUCache[tuple, Compiled]] = {}  # one per precision mode
        self._lock = threading.Lock()
        try:
            self._params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            self._params = []
        variadic = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in self._params)
        positional = [p for p in self._params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = sum(p.default is p.empty for p in positional)
        self._nargs: tuple[int, int] | None = None if variadic else (required, len(positional))
        self._dims = _check_dims(dims, [p.name for p in positional], getattr(fn, "__name__", "function"))
        self._warned = False
        # the number arguments whose value the program is specific to: static_argnames=, and those a trace
        # needed the value of (a loop count, a shape); the others are runtime arguments
        self._static: set[int] = _check_static(static_argnames, [p.name for p in positional], self.__name__)

    # -- signatures ----------------------------------------------------------------------------------------
    def _key_of(self, k: int, a: Any) -> tuple:
        """The signature entry of argument ``k``: shape and dtype of an array, type and value of a number."""
        if isinstance(a, np.ma.MaskedArray):
            raise ArgumentError(
                f"{self.__name__}: argument {self._arg_name(k)} is a masked array; its mask would be ignored",
                param=self._arg_name(k),
                expected="a plain NumPy array",
                got="numpy.ma.MaskedArray",
                fix="pass .filled(value) (masked elements replaced), or .data to ignore the mask",
            )
        if isinstance(a, np.ndarray):
            return (a.shape, a.dtype)
        if isinstance(a, Array) or is_dask_array(a):
            return _ELSEWHERE
        if isinstance(a, (bool, np.bool_, numbers.Number)) and not isinstance(a, complex):
            if k in self._static or isinstance(a, (bool, np.bool_)):  # (a flag's value is always static)
                return ("scalar", type(a).__name__, a.item() if isinstance(a, np.generic) else a)
            return (RUNTIME, type(a).__name__, None)  # a runtime argument of this type
        described = describe(a)  # an array in a GPU's memory: run where it is
        if described is not None:
            return described
        if hasattr(a, "__array_interface__") or hasattr(a, "__array__") or isinstance(a, memoryview):
            arr = np.asarray(a)
            return (arr.shape, arr.dtype)
        if isinstance(a, (list, tuple)):  # Python numbers: the types pypto gives them (floats float32)
            arr = dtypes.python_array(a)
            if arr.dtype != object:
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

    def _symbolic_key(self, args: tuple) -> tuple[tuple, tuple[int, ...], tuple[str | None, ...]]:
        """The signature of a call under ``dims=``: symbolic sizes replaced by ``(c,)``, the c-th distinct one.

        Returns the key, the symbolic sizes (in order of first appearance) and the name given to each (None:
        unnamed). Sizes 0 and 1 stay in the key: broadcasting depends on them.
        """
        classes: dict[int, int] = {}
        names: list[str | None] = []
        seen: dict[str, tuple[int, str]] = {}
        key: list[tuple] = []
        for k, a in enumerate(args):
            entry = (a.shape, a.dtype) if type(a) is np.ndarray else self._key_of(k, a)
            if isinstance(entry[0], str):
                key.append(entry)
                continue
            shape, dtype = entry
            spec = self._axis_names(k, len(shape))
            out: list[Any] = []
            for d, n in enumerate(shape):
                name = spec[d]
                if name is None or n <= 1:
                    out.append(n)
                    continue
                if name:
                    where = f"{self._arg_name(k)}.shape[{d}]"
                    first = seen.setdefault(name, (n, where))
                    if first[0] != n:
                        raise ShapeError(
                            f"{self.__name__}: dim {name} is {first[0]} in {first[1]} but {n} in {where}",
                            param=self._arg_name(k),
                            expected=f"{where} == {first[0]} (both are dim {name} in dims=)",
                            got=n,
                            fix="pass arrays whose sizes agree, or give the two axes different names in dims=",
                        )
                c = classes.get(n)
                if c is None:
                    c = classes[n] = len(names)
                    names.append(name or None)
                elif names[c] is None and name:
                    names[c] = name
                out.append((c,))
            key.append((tuple(out), dtype))
        return tuple(key), tuple(classes), tuple(names)

    def _axis_names(self, k: int, ndim: int) -> tuple[str | None, ...]:
        """Per axis of argument ``k``: the name of its symbolic dim ("" unnamed), or None where it is static."""
        if self._dims == "symbolic":
            return ("",) * ndim
        assert isinstance(self._dims, dict)
        spec = self._dims.get(self._arg_name(k))
        if spec is None:
            return (None,) * ndim
        if len(spec) != ndim:
            raise ShapeError(
                f"{self.__name__}: dims= names {len(spec)} axes of {self._arg_name(k)}, which has {ndim}",
                param=self._arg_name(k),
                expected=f"an array of rank {len(spec)}",
                got=f"rank {ndim}",
                fix=f"give one entry per axis in dims={{'{self._arg_name(k)}': ...}} (None for a static size)",
            )
        return spec

    def _arg_name(self, k: int) -> str:
        return self._params[k].name if k < len(self._params) else f"#{k}"

    def _check_nargs(self, args: tuple) -> None:
        if self._nargs is not None and not self._nargs[0] <= len(args) <= self._nargs[1]:
            lo, hi = self._nargs
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise ArgumentError(
                f"{self.__name__}() takes {want} argument(s), {len(args)} were given",
                param="args",
                expected=f"{want} arrays or numbers",
                got=len(args),
            )

    def _param_names(self, key: tuple) -> tuple[dict[int, str], set[str]]:
        """The kernel's name for each array argument (position -> name), and the set of them."""
        taken: set[str] = set()
        return {
            k: _param_name(self._arg_name(k), k, taken)
            for k, e in enumerate(key)
            if not isinstance(e[0], str) or e[0] == RUNTIME
        }, taken

    def _trace(self, args: tuple, key: tuple, shapes: dict[int, tuple] | None = None, dims: Sequence[str] = ()):
        """Run the function on traced arrays (argument k with ``shapes[k]`` where given, else its own shape);
        ``dims`` are the names of symbolic dims, which the results' names avoid."""
        params, taken = self._param_names(key)
        taken.update(dims)
        traced: list[Any] = []
        inputs: list[tuple[str, Array]] = []
        positions: list[int] = []
        for k, a in enumerate(args):
            if key[k][0] == RUNTIME:  # a number passed at every call (a Python number's type is weak)
                weak = not isinstance(a, np.generic)
                dt = dtypes.from_numpy(np.asarray(a).dtype) if not weak else (
                    dtypes.float64 if isinstance(a, float) else dtypes.int64)  # fmt: skip
                node = scalar_input(params[k], k, a, dt, weak)
                traced.append(node)
                inputs.append((params[k], node))
                positions.append(k)
                continue
            if isinstance(key[k][0], str):  # a Python number: a constant of this signature
                traced.append(key[k][2])
                continue
            described = None if type(a) is np.ndarray else describe(a)
            arr = (a if type(a) is np.ndarray else probe(*described) if described else
                   dtypes.python_array(a) if isinstance(a, (list, tuple)) else np.asarray(a))  # fmt: skip
            dt = dtypes.from_numpy(arr.dtype)
            if dt is None:
                raise DTypeError(
                    f"{self.__name__}: argument {self._arg_name(k)} has dtype {arr.dtype}",
                    param=self._arg_name(k),
                    expected="float16, bfloat16, float32, float64, int32, int64 or bool",
                    got=str(arr.dtype),
                    fix="convert it with .astype(np.float32) (or another supported dtype)",
                )
            name = params[k]
            node = input_array(name, shapes[k] if shapes else arr.shape, dt)
            traced.append(node)
            inputs.append((name, node))
            positions.append(k)
        token = precision_tracing(self.precision)  # the mode its contractions record
        try:
            with capturing(taken) as captured, runtime_scalars() as scalars:  # NumPy arrays it reads from its
                result = rewrite(self.fn, updates=True)(*traced)  # closure or globals are inputs too
        finally:
            precision_done(token)
        self._needed = scalars.needed
        for j, node in enumerate(captured.nodes):  # (passed after the call's arguments)
            inputs.append((node.attrs, node))
            positions.append(len(args) + j)
        self._captured = tuple(captured.arrays)
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
        _narrow_scalars([node for _, node in inputs if node.argument is not None], [r for _, r in outs])
        return inputs, outs, positions, single, taken

    @property
    def precision(self) -> str:
        """The precision mode of its contractions: its own ``precision=``, else ``pt.set_precision``'s."""
        return self.options["precision"] or get_precision()

    @property
    def _cache(self) -> LRUCache[tuple, Compiled]:
        """The programs compiled in the current precision mode."""
        mode = self.precision
        cache = self._caches.get(mode)
        if cache is None:
            cache = self._caches[mode] = LRUCache(JIT_CACHE_SIZE)
        return cache

    def _build(self, plan: Plan, positions: list[int], single: bool, nargs: int, symbolic: bool = False) -> Compiled:
        """The program of ``plan`` (and of its steps) for calls with ``nargs`` arguments, the arrays at
        ``positions``; ``symbolic``: shapes hold :class:`Size` s resolved at each call."""
        opts = {k: v for k, v in self.options.items() if v is not None and k != "precision"}
        made = 0  # results of the steps so far: arguments nargs, nargs + 1, ...

        def build(p: Plan, single: bool, steps: list[Compiled]) -> Compiled:
            specs = {k: (_spec(b.shape), _spec(b.node.shape if b.node is not None else b.shape))
                     for k, b in enumerate(p.buffers)} if symbolic else None  # fmt: skip
            inputs = [*positions, *range(nargs, nargs + made)]
            return Compiled(p, Kernel.from_ir(p.kernel, fn=self.fn, **opts), inputs, single, specs, steps)

        steps = []
        for p in plan.steps:
            steps.append(build(p, False, []))
            made += len(p.outputs)
        return build(plan, single, steps)

    def _compile(self, args: tuple, key: tuple) -> Compiled:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            with progress(f"compiling {self.__name__}"):
                inputs, outs, positions, single, _ = self._trace(args, key)
                if self._needed - self._static:  # numbers whose value the program depends on: static from now
                    self._static |= self._needed
                    key = self._key(args)
                    hit = self._cache.get(key)
                    if hit is not None:
                        return hit
                captured = self._captured
                plan = lower(_kernel_name(self.__name__, self.fn), inputs, outs)
                compiled = self._build(plan, positions, single, len(args) + len(captured))
                compiled.captured = captured
            self._cache[key] = compiled
            return compiled

    def _compile_symbolic(self, args: tuple, key: tuple, sizes: tuple[int, ...], names: tuple) -> Compiled | list[str]:
        """One program for every call whose arrays have this pattern of sizes, or the reasons the function's
        program depends on the value of a symbolic size (it is then compiled for the call's sizes).

        The function is traced once, each symbolic axis of the arguments' shapes a :class:`Size` (see
        :mod:`pypto.array.sizes`), and lowered: each Size becomes a dim read from the arrays at run time, and
        every buffer's shape is known in terms of them. A trace or lowering that needed a size's value, or
        that fails with the Sizes (it then runs again with the sizes, to raise the error as a call would),
        gives a program per shape instead.
        """
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            plain = self._key(args)
            dims = _dim_names(names, self._param_names(plain)[1])
            symbols = [Size(n, c, name) for c, (n, name) in enumerate(zip(sizes, dims))]
            shapes = {
                k: tuple(symbols[e[0]] if type(e) is tuple else e for e in entry[0])
                for k, entry in enumerate(key)
                if not isinstance(entry[0], str)
            }
            with symbolic_trace() as needed:
                try:
                    inputs, outs, positions, single, _ = self._trace(args, plain, shapes, dims)
                    if self._needed - self._static:  # traced again with the numbers static
                        self._static |= self._needed
                        return self._compile_symbolic(args, self._symbolic_key(args)[0], sizes, names)
                    plan = lower(_kernel_name(self.__name__, self.fn), inputs, outs)
                except Exception as e:  # noqa: BLE001 - the per-shape trace raises it again where it is real
                    return needed or [f"the trace with symbolic sizes failed ({type(e).__name__}: {e})"]
                if not needed and any(has_sizes(p.kernel) for p in (*plan.steps, plan)):
                    needed.append("the kernel holds a symbolic size's value")
            if needed:
                return needed
            compiled = self._build(plan, positions, single, len(args) + len(self._captured), symbolic=True)
            compiled.captured = self._captured
            self._cache[key] = compiled
            return compiled

    def _compile_exact(self, args: tuple, key: tuple) -> Compiled:
        """The program for exactly these arguments' signature, compiled now (after checking their number)."""
        self._check_nargs(args)
        return self._compile(args, key)

    def lookup(self, args: tuple) -> tuple[Compiled, tuple[int, ...] | None]:
        """The program for these arguments, compiled on first use, and the sizes of its symbolic dims
        (``None`` for a program compiled for the arguments' exact shapes)."""
        if self._dims is None:
            key = tuple(self._key_of(k, a) for k, a in enumerate(args))
            return self._cache.get(key) or self._compile_exact(args, key), None
        key, sizes, names = self._symbolic_key(args)
        c = self._cache.get(key)
        if c is not None:  # (no symbolic size, every one 0 or 1: the program compiled for these exact shapes)
            return c, sizes or None
        exact = self._key(args)
        c = self._cache.get(exact)
        if c is not None:
            return c, None
        self._check_nargs(args)
        if not sizes:
            return self._compile(args, exact), None
        c = self._compile_symbolic(args, key, sizes, names)
        if isinstance(c, Compiled):
            return c, sizes
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.__name__}: the program depends on the value of a symbolic size ({'; '.join(c[:3])}); "
                "it is compiled for each new shape instead. Mark fewer axes symbolic in dims= to avoid this.",
                SpecializationWarning,
                stacklevel=3,
            )
        return self._compile(args, exact), None

    def compiled(self, *args: Any) -> Compiled:
        """The compiled program for these arguments' signature (compiled on first use)."""
        return self.lookup(args)[0]

    # -- calls ---------------------------------------------------------------------------------------------
    def __call__(self, *args: Any, out: Any = None) -> Any:
        if self._dims is None:  # the common case, kept to one signature and one dictionary lookup
            key = tuple((a.shape, a.dtype) if type(a) is np.ndarray else self._key_of(k, a) for k, a in enumerate(args))
            c = self._cache.get(key)
            if c is None:
                if _ELSEWHERE in key:
                    return self._call_elsewhere(args, out)
                c = self._compile_exact(args, key)
            return c.run(args, self._outs(out, c, None) if out is not None else {})
        if any(type(a) is not np.ndarray and (isinstance(a, Array) or is_dask_array(a)) for a in args):
            return self._call_elsewhere(args, out)
        c, sizes = self.lookup(args)
        return c.run(args, self._outs(out, c, sizes) if out is not None else {}, sizes)

    def _call_elsewhere(self, args: tuple, out: Any) -> Any:
        """A call on values that are not arrays to run here: traced arrays (inside another jit function or
        a gradient: the operations join the caller's program) or dask arrays (a dask graph is built)."""
        if any(isinstance(a, Array) for a in args):
            if out is not None:
                raise TracingError(f"{self.__name__}: out= inside a traced function", None,
                                   "return the array instead")  # fmt: skip
            return rewrite(self.fn, updates=True)(*args)
        from pypto import dask

        return dask.call_jit(self, args, out)

    def _outs(self, out: Any, c: Compiled, sizes: tuple[int, ...] | None) -> dict[int, np.ndarray]:
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
            described = None if isinstance(o, np.ndarray) else describe(o)
            if not isinstance(o, np.ndarray) and described is None:
                raise ArgumentError(f"{self.__name__}: out[{k}] is a {type(o).__name__}", param="out",
                                    expected="a NumPy array or an array in GPU memory", got=type(o).__name__)  # fmt: skip
            o_shape, o_dtype = (o.shape, o.dtype) if described is None else described
            shape = c.shape_of(pos, sizes)
            if o_shape != shape:
                raise ShapeError(
                    f"{self.__name__}: out[{k}] has shape {o.shape}, the result has {shape}",
                    param="out",
                    expected=str(shape),
                    got=o_shape,
                    fix=f"pass pt.empty({shape}, {b.dtype.name})",
                )
            if o_dtype != b.dtype.numpy:
                raise DTypeError(
                    f"{self.__name__}: out[{k}] has dtype {o_dtype}, the result is {b.dtype.name}",
                    param="out",
                    expected=b.dtype.name,
                    got=str(o_dtype),
                )
            given[pos] = o
        return given

    # -- introspection -------------------------------------------------------------------------------------
    def get_code(self, *args: Any, backend: str | None = None) -> str:
        """The source of the kernel compiled for these arguments' signature (of each kernel, in the order they
        run, for a program that reads a scatter's result)."""
        return "\n\n".join(k.get_code(backend) for k in self.compiled(*args).kernels)

    def ir(self, *args: Any, stage: str | None = None, backend: str | None = None) -> str:
        """The kernel's IR after ``stage`` (default: the last) for these arguments' signature (each kernel's,
        in the order they run, for a program that reads a scatter's result)."""
        return "\n\n".join(k.ir(stage, backend) for k in self.compiled(*args).kernels)

    def kernel(self, *args: Any) -> Kernel:
        """The :class:`~pypto.Kernel` compiled for these arguments' signature (the last one a call runs; see
        :attr:`Compiled.kernels` for all)."""
        return self.compiled(*args).kernel

    def __repr__(self) -> str:
        return f"<pypto jit function {getattr(self.fn, '__qualname__', self.fn)}>"


def _kernel_name(name: str, fn: Any = None) -> str:
    """The generated kernel's name: the function's, a lambda's after its line (``lambda_l12``: shown by
    ``pt.profile`` and in generated code)."""
    from pypto.lang.tracer import _c_identifier

    code = getattr(fn, "__code__", None)
    if name == "<lambda>" and code is not None:
        return _c_identifier(f"lambda_l{code.co_firstlineno}")
    return _c_identifier(name)


def jit(fn: Callable | None = None, *, executor: str | None = None, fastmath: bool = False,
        schedule: Schedule | dict | None = None, dims: Any = None, precision: str | None = None,
        static_argnames: Sequence[str] | str | None = None, **options: Any) -> Any:  # fmt: skip
    """Compile a function of whole arrays (``@pt.jit`` or ``@pt.jit(executor="openmp")``).

    ``dims`` chooses which sizes the compiled code is specialised for. By default (``None`` or ``"static"``)
    every new shape is traced and compiled again. ``dims="symbolic"`` makes every size other than 0 and 1 a
    dim read from the arrays at each call, and ``dims={"x": ("B", "T", None)}`` makes the named axes of
    ``x`` symbolic (axes named alike must have equal sizes; ``None`` keeps a size static): one program then
    serves every call with the same ranks, dtypes and pattern of equal sizes.

    ``precision`` ("float32", "mixed" or "highest") sets how its float32 contractions compute
    (:mod:`pypto.array.precision`); without it, the mode ``pt.set_precision`` set when it is called.

    Number arguments (Python and NumPy ints and floats) are runtime arguments: a new value runs the same
    program. A Python number is weakly typed (``x * lr`` keeps ``x``'s dtype, as a literal would). Where the
    trace needs a number's value (``range(n)``, a shape, an ``if`` on it, an exponent), the program is specific
    to that argument's value from then on, as for the names in ``static_argnames``; bools are always static.
    """
    if options:  # options a backend declares pass through to the kernels; anything else is refused here
        from pypto.runtime.options import JIT_OPTIONS, check_options

        check_options("pt.jit", options, JIT_OPTIONS)
    kw = dict(executor=executor, fastmath=fastmath, schedule=schedule, dims=dims, precision=precision,
              static_argnames=static_argnames)  # fmt: skip
    if fn is None:
        return lambda f: JitFunction(f, **kw, **options)
    return JitFunction(fn, **kw, **options)


RUNTIME = "runtime"  # the signature entry of a number passed at every call


def _check_static(names: Sequence[str] | str | None, params: list[str], fname: str) -> set[int]:
    """``static_argnames=`` as argument positions (an unknown name is an error naming the parameters)."""
    if names is None:
        return set()
    names = [names] if isinstance(names, str) else list(names)
    for n in names:
        if n not in params:
            close = difflib.get_close_matches(str(n), params, n=1)
            raise ArgumentError(
                f"pt.jit({fname}): static_argnames names {n!r}, which is not a parameter",
                param="static_argnames",
                expected=f"names among {params}",
                got=n,
                fix=f"did you mean {close[0]!r}?" if close else "name the function's positional parameters",
            )
    return {params.index(n) for n in names}


def _narrow_scalars(scalars: list[Array], outs: list[Array]) -> None:
    """A weak runtime scalar read only through conversions to one type (``x * lr`` with float32 ``x``) is passed
    in that type: its value converted at the call, as NumPy converts a Python number beside an array."""
    if not scalars:
        return
    uses: dict[int, list[Array]] = {id(s): [] for s in scalars}
    seen: set[int] = set()
    stack = list(outs)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for a in node.args:
            if isinstance(a, Array):
                if id(a) in uses:
                    uses[id(a)].append(node)
                stack.append(a)
    for s in scalars:
        if not s.weak:
            continue
        targets = {u.dtype for u in uses[id(s)] if u.op == "cast"}
        if len(targets) == 1 and all(u.op == "cast" for u in uses[id(s)]) and id(s) not in {id(o) for o in outs}:
            s.dtype = targets.pop()


def _check_dims(dims: Any, params: list[str], fname: str) -> str | dict[str, tuple[str | None, ...]] | None:
    """``pt.jit(dims=...)`` checked: None (static), "symbolic", or argument name -> per-axis dim names."""
    if dims is None or dims == "static":
        return None
    if dims == "symbolic":
        return "symbolic"
    if not isinstance(dims, Mapping):
        raise ArgumentError(
            f"pt.jit({fname}): dims={dims!r} is not understood",
            param="dims",
            expected='"static", "symbolic", or a dict such as {"x": ("B", None)} (argument -> a name per axis)',
            got=repr(dims),
        )
    out: dict[str, tuple[str | None, ...]] = {}
    for arg, spec in dims.items():
        if arg not in params:
            raise ArgumentError(
                f"pt.jit({fname}): dims= names argument {arg!r}, which {fname} does not have",
                param="dims",
                expected=f"one of {', '.join(params) or '(no arguments)'}",
                got=repr(arg),
            )
        if isinstance(spec, (str, Dim)) or not isinstance(spec, Sequence):
            raise ArgumentError(
                f"pt.jit({fname}): dims[{arg!r}] = {spec!r} is not a sequence of names",
                param="dims",
                expected="one entry per axis: a dim name, pt.dim(...), or None for a static size",
                got=repr(spec),
                fix=f'write dims={{"{arg}": ("N", None)}} for a rank-2 {arg}',
            )
        names: list[str | None] = []
        for e in spec:
            if e is None:
                names.append(None)
            elif isinstance(e, Dim):
                names.append(e.name)
            elif isinstance(e, str):
                try:
                    names.append(Dim(e).name)
                except TracingError as err:
                    raise ArgumentError(f"pt.jit({fname}): dims[{arg!r}]: {err}", param="dims",
                                        expected="a Python identifier not starting with '_'", got=repr(e)) from None  # fmt: skip
            else:
                raise ArgumentError(
                    f"pt.jit({fname}): dims[{arg!r}] has entry {e!r}",
                    param="dims",
                    expected="a dim name, pt.dim(...), or None for a static size",
                    got=repr(e),
                )
        out[arg] = tuple(names)
    return out


def _dim_names(names: tuple[str | None, ...], taken: set[str]) -> list[str]:
    """The names of the symbolic dims in generated code: the user's, else ``N0``, ``N1`` ..., never a parameter's."""
    out: list[str] = []
    for c, n in enumerate(names):
        name = n or f"N{c}"
        while name in taken or name in out or name in _RESERVED:
            name += "_"
        out.append(name)
    return out


def _spec(shape: tuple) -> Spec:
    """A traced shape as a :data:`Spec`: a Size as ``(its index,)``, a static size as itself."""
    return tuple((n.index,) if isinstance(n, Size) else int(n) for n in shape)
