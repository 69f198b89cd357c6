"""``pt.Parameter`` and ``@pt.module``: models made of named arrays and a jit-compiled ``forward``.

    @pt.module
    class Dense:
        def __init__(self, n_in, n_out):
            self.w = pt.Parameter(np.zeros((n_in, n_out), np.float32), "w")
            self.b = pt.Parameter(np.zeros(n_out, np.float32), "b")

        def forward(self, x):
            return pt.relu(x @ self.w + self.b)

    layer = Dense(64, 32)
    y = layer(x)                      # forward, compiled with @pt.jit; the parameters are its inputs
    [name for name, _ in layer.named_parameters()]   # ['w', 'b']

Parameters are inputs of the compiled program, not constants baked into it: assigning new values
(``layer.w.data[...] = ...``) needs no recompilation, and one compiled program serves every
instance whose parameters have the same shapes and dtypes. The module's other attributes (``self.eps``,
``self.heads``, an array that is not a parameter) are constants of the program (:func:`constants`): a new value
compiles it again, never a stale result.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pypto.array.function import JitFunction
from pypto.errors import ArgumentError
from pypto.lang.control import rewrite


class Parameter:
    """A named array of a module (a weight, a bias); ``.data`` is the NumPy array."""

    def __init__(self, data: Any, name: str | None = None):
        if isinstance(data, tuple) and data and all(isinstance(v, int) and not isinstance(v, bool) for v in data):
            raise ArgumentError(
                f"pt.Parameter({data!r}): a tuple of ints reads as a shape, but a parameter takes its initial values",
                param="data",
                expected="an array of the parameter's values",
                got=repr(data),
                fix=f"pt.Parameter(rng.standard_normal({data!r}).astype(np.float32) * scale), or np.zeros({data!r}, "
                "np.float32); a vector of those ints: pt.Parameter(np.array([...]))",
            )
        arr = np.asarray(data)
        if not isinstance(data, np.ndarray) and arr.dtype == np.float64:
            arr = arr.astype(np.float32)  # a Python list: the kernel language's default float
        self.data = np.ascontiguousarray(arr)
        self.name = name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"Parameter({self.name or ''}{': ' if self.name else ''}{self.data.dtype}{list(self.data.shape)})"


Path = tuple[tuple[str, Any], ...]  # ("attr", name) / ("item", index) steps from the module


def _walk(obj: Any, path: Path, seen: set[int]) -> Iterator[tuple[Path, Parameter]]:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Parameter):
        yield path, obj
    elif isinstance(obj, (list, tuple)):
        for k, v in enumerate(obj):
            yield from _walk(v, (*path, ("item", k)), seen)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _walk(v, (*path, ("item", k)), seen)
    elif getattr(type(obj), "__pypto_module__", False):
        for k, v in vars(obj).items():
            if not k.startswith("_"):
                yield from _walk(v, (*path, ("attr", k)), seen)


def constants(module: Any) -> tuple:
    """A key of what a trace of ``module`` may read besides its parameters: its other attributes (submodules',
    lists' and dicts' included), numbers, strings and other hashable values by value, anything else (an array that
    is not a parameter, a mutable object) by identity. A compiled program is specific to them: a module whose
    ``scale`` or ``eps`` changes, or another instance with other values, gets a program of its own (a non-parameter
    array is an input of the program, read at each call: new values in it need no new program, a new array does)."""
    out: list[Any] = []
    _constants(module, (), set(), out)
    return tuple(out)


def _constants(obj: Any, path: tuple, seen: set[int], out: list[Any]) -> None:
    if isinstance(obj, Parameter):
        return
    if isinstance(obj, (bool, int, float, complex, str, bytes, type(None), np.generic)):
        out.append((path, type(obj).__name__, obj))
        return
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (list, tuple)):
        out.append((path, type(obj).__name__, len(obj)))
        for k, v in enumerate(obj):
            _constants(v, (*path, k), seen, out)
    elif isinstance(obj, dict):
        out.append((path, "dict", tuple(obj)))
        for k, v in obj.items():
            _constants(v, (*path, k), seen, out)
    elif getattr(type(obj), "__pypto_module__", False):
        out.append((path, "module", type(obj)))
        for k, v in vars(obj).items():
            if not k.startswith("_pt_"):  # (pypto's own caches)
                _constants(v, (*path, k), seen, out)
    else:
        try:
            hash(obj)
            out.append((path, "value", obj))  # (a hashable object compares by value, or by identity by default)
        except TypeError:
            out.append((path, "id", id(obj)))


def _path_name(path: Path) -> str:
    return ".".join(str(step[1]) for step in path)


def _set(root: Any, path: Path, value: Any) -> None:
    obj = root
    for kind, key in path[:-1]:
        obj = getattr(obj, key) if kind == "attr" else obj[key]
    kind, key = path[-1]
    if kind == "attr":
        object.__setattr__(obj, key, value)
    elif isinstance(obj, tuple):
        raise ArgumentError("parameters inside tuples cannot be traced; use a list", param=_path_name(path))
    else:
        obj[key] = value


class Module:
    """What ``@pt.module`` adds to a class: parameter listing and a compiled ``__call__``."""

    __pypto_module__ = True

    def named_parameters(self) -> list[tuple[str, Parameter]]:
        """``(dotted path, parameter)`` for every parameter, submodules' included, in definition order."""
        return [(_path_name(p), prm) for p, prm in _walk(self, (), set())]

    def parameters(self) -> list[Parameter]:
        return [prm for _, prm in self.named_parameters()]

    def __call__(self, *args: Any) -> Any:
        paths = [p for p, _ in _walk(self, (), set())]
        params = [prm for _, prm in _walk(self, (), set())]
        key = (tuple(paths), constants(self))  # (the other attributes are constants of the program)
        cache = self.__dict__.setdefault("_pt_compiled", {})
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = self._compile(paths, len(args))
        return rewrite(fn, updates=True)(*(p.data for p in params), *args)

    def _compile(self, paths: list[Path], n_args: int) -> JitFunction:
        forward = type(self).forward
        module = self

        def run(*arrays: Any) -> Any:
            params, inputs = arrays[: len(paths)], arrays[len(paths) :]
            with bound(module, paths, params):
                return forward(module, *inputs)

        sig = inspect.signature(forward)
        inputs = list(sig.parameters.values())[1:]
        names = [_path_name(p).replace(".", "_") for p in paths]
        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
            + [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_ONLY) for p in inputs[:n_args]]
        )
        run.__name__ = run.__qualname__ = type(self).__name__
        return JitFunction(run, **getattr(type(self), "__pypto_jit_options__", {}))


_binding = threading.RLock()


@contextlib.contextmanager
def bound(module: Any, paths: list[Path], values: Sequence[Any]) -> Iterator[None]:
    """``module`` with the parameters at ``paths`` replaced by ``values`` (traced arrays, while a program is traced),
    restored afterwards; one tracing at a time rebinds parameters."""
    with _binding:
        saved = [(p, _get(module, p)) for p in paths]
        try:
            for p, a in zip(paths, values):
                _set(module, p, a)
            yield
        finally:
            for p, v in saved:
                _set(module, p, v)


def parameter_paths(module: Any) -> list[Path]:
    """Where ``module``'s parameters are (the order of ``named_parameters()``)."""
    return [p for p, _ in _walk(module, (), set())]


def _get(root: Any, path: Path) -> Any:
    obj = root
    for kind, key in path:
        obj = getattr(obj, key) if kind == "attr" else obj[key]
    return obj


def module(cls: type | None = None, *, executor: str | None = None, dims: Any = None) -> Any:
    """Make a class with a ``forward(self, ...)`` method a module (see the module doc); ``executor`` and
    ``dims`` (keyed by ``forward``'s argument names) are those of :func:`pypto.jit`."""

    def wrap(c: type) -> type:
        if not callable(getattr(c, "forward", None)):
            raise ArgumentError(
                f"@pt.module: class {c.__name__} has no forward method",
                param="cls",
                expected="a class defining forward(self, *arrays)",
                got=c.__name__,
            )
        new = type(c.__name__, (c, Module), {"__module__": c.__module__, "__qualname__": c.__qualname__,
                                             "__doc__": c.__doc__, "__pypto_jit_options__": {"executor": executor, "dims": dims}})  # fmt: skip
        return new

    return wrap(cls) if cls is not None else wrap
