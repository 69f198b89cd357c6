"""Tracing: run the kernel's Python body once on symbolic values and record its stores."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

from pypto import dtypes
from pypto.errors import SourceLoc, TracingError
from pypto.ir.affine import Affine
from pypto.ir.kernel import AxisInfo, AxisNotEmpty, KernelIR, ScalarParam, TensorParam
from pypto.ir.nodes import Expr, Gather, Index, Load, Scalar, Scatter, Store, postorder
from pypto.ir.ops import FUNCTIONS
from pypto.lang import functions as _functions  # noqa: F401  (fills values.NUMPY_UFUNCS before any trace)
from pypto.lang.context import active_tracer, set_active_tracer
from pypto.lang.control import rewrite
from pypto.lang.source import function_tree
from pypto.lang.tensor import TensorType
from pypto.lang.values import _RESERVED, ExprProxy, TensorProxy


def _fn_loc(fn: Callable) -> SourceLoc | None:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return SourceLoc(code.co_filename, code.co_firstlineno)


def _scalar_dtype(annotation: Any) -> dtypes.DType | None:
    if annotation in (float, int, bool) or isinstance(annotation, dtypes.DType):
        return dtypes.as_dtype(annotation)
    return None


def _axis_names_from_source(fn: Callable) -> dict[int, str]:
    """Map axis numbers to the variable names the source gives them (``row = pt.axis(0)``)."""
    try:
        tree = function_tree(fn)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return {}

    def axis_number(v: ast.AST) -> int | None:
        if (
            isinstance(v, ast.Call)
            and (
                (isinstance(v.func, ast.Attribute) and v.func.attr == "axis")
                or (isinstance(v.func, ast.Name) and v.func.id == "axis")
            )
            and len(v.args) == 1
            and isinstance(v.args[0], ast.Constant)
            and isinstance(v.args[0].value, int)
        ):
            return v.args[0].value
        return None

    names: dict[int, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(target, ast.Name):
                pairs.append((target, node.value))
            elif (
                isinstance(target, ast.Tuple)
                and isinstance(node.value, ast.Tuple)
                and len(target.elts) == len(node.value.elts)
            ):
                pairs.extend(zip(target.elts, node.value.elts))
            for t, v in pairs:
                k = axis_number(v)
                if k is not None and isinstance(t, ast.Name):
                    names.setdefault(k, t.id)
    return names


# C library names a generated function must not take (math.h, stdlib.h, string.h, CUDA/OpenCL builtins)
_LIBC = frozenset(
    """
    abs acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 expm1 fabs fdim floor
    fma fmax fmin fmod frexp hypot ldexp lgamma log log10 log1p log2 logb lrint lround modf nan nearbyint nextafter
    pow remainder remquo rint round scalbn sin sinh sqrt tan tanh tgamma trunc rsqrt sigmoid isnan isinf signbit
    malloc calloc realloc free memcpy memmove memset strlen printf abort exit main div labs qsort rand
    max min clamp mix select barrier
""".split()
)


# what generated code calls by name (C's math library with its ``f`` forms, OpenCL built-ins, allocation): a
# parameter of that name would hide the function (see ``math_names`` in pypto.targets.cstyle)
_CALLED = frozenset("fabs floor fmod copysign max select barrier malloc free".split()) | {
    f.c_name for f in FUNCTIONS if f.c_name
}


def _ascii_identifier(name: str) -> str:
    """``name`` with every character outside ASCII letters, digits and ``_`` spelled ``u<hex>`` (a letter
    or digit) or ``_``: generated code and module names stay ASCII (``ядро`` -> ``u44fu434u440u43e``)."""
    out = []
    for ch in name:
        if ch.isascii() and (ch.isalnum() or ch == "_"):
            out.append(ch)
        elif ch.isalnum():
            out.append(f"u{ord(ch):x}")
        else:
            out.append("_")
    return "".join(out)


def _c_identifier(name: str) -> str:
    s = _ascii_identifier(name)
    if not s or s[0].isdigit() or s[0] == "_":
        s = "k" + s if s.startswith("_") else "k_" + s
    if s in _RESERVED or s in _LIBC or s.rstrip("f") in _LIBC or s.startswith("pt_"):
        s += "_kernel"
    return s


class Tracer:
    """Runs a kernel function once with symbolic arguments and builds its :class:`KernelIR`."""

    def __init__(self, fn: Callable, name: str | None = None):
        self.fn = fn
        self.name = _c_identifier(name or getattr(fn, "__name__", "kernel"))
        self.stores: list[Store] = []
        self.scatters: list[Scatter] = []
        self.nonempty: list[AxisNotEmpty] = []  # axes a reduction needs a point of (pt.argmax)
        self.derived: dict[int, tuple[int, str]] = {}  # axes made by the tracer: (the user's axis, name suffix)
        self.loops: dict[int, tuple[str, Affine, str]] = {}  # sequential loops' axes: (name, extent, where from)
        self.params: list[TensorParam | ScalarParam] = []
        self.loc = _fn_loc(fn)

    def derived_axis(self, base: int, suffix: str) -> int:
        """A new axis (numbered after the user's, 0..15) named after ``base``: ``pt.sort`` reads its row along
        one while the user's axis numbers the result."""
        for index, named in self.derived.items():  # (the sorts of one row share it: one nest computes them)
            if named == (base, suffix):
                return index
        index = 16 + len(self.derived) + len(self.loops)
        self.derived[index] = (base, suffix)
        return index

    def loop_axis(self, name: str, extent: Affine, source: str, loc: SourceLoc | None) -> int:
        """A new axis for the steps of a sequential loop (``for t in pt.range(n)``), of extent ``extent``."""
        index = 16 + len(self.derived) + len(self.loops)
        self.loops[index] = (name, extent, source)
        return index

    # -- called by the proxies --------------------------------------------------------------
    def check_active(self, proxy: TensorProxy) -> None:
        if active_tracer() is not self:
            raise TracingError(
                f"tensor parameter '{proxy.name}' of kernel '{self.name}' was used outside its kernel body",
                hint="do not keep references to kernel parameters after the kernel function returns",
            )

    def record_store(self, tensor: str, index: tuple[Affine, ...], value: Expr, loc: SourceLoc | None) -> None:
        if self.scatters:
            raise TracingError(
                f"kernel '{self.name}': a store into '{tensor}' follows a scatter; a kernel's scatters run after its "
                "stores",
                loc,
                "write the stores first, then the scatters (or use two kernels)",
            )
        self.stores.append(Store(tensor, index, value, loc=loc))

    def record_scatter(self, tensor: str, index: tuple[Expr, ...], value: Expr, op: str,
                       loc: SourceLoc | None) -> None:  # fmt: skip
        self.scatters.append(Scatter(tensor, index, value, op, loc=loc))

    # -- tracing ------------------------------------------------------------------------------
    def _signature(self) -> list[Any]:
        fn = self.fn
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise TracingError(f"cannot read the signature of {fn!r}: {e}", self.loc) from None
        try:
            ann = inspect.get_annotations(fn, eval_str=True)
        except Exception as e:  # a string annotation naming something not in the module's globals
            raise TracingError(
                f"kernel '{self.name}': cannot evaluate the parameter annotations ({type(e).__name__}: {e})",
                self.loc,
                "define the dims used in annotations (pt.dim) at module level",
            ) from None
        proxies: list[Any] = []
        seen_names: set[str] = set()
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TracingError(f"kernel '{self.name}': *args / **kwargs parameters are not supported", self.loc)
            if p.name.startswith("_") or p.name in _RESERVED:
                raise TracingError(
                    f"kernel '{self.name}': parameter name '{p.name}' is reserved in generated code",
                    self.loc,
                    "rename the parameter (names may not start with '_' or be C keywords)",
                )
            if p.name in _CALLED or p.name.rstrip("f") in _CALLED or p.name.startswith("pt_"):
                raise TracingError(
                    f"kernel '{self.name}': parameter name '{p.name}' is a function the generated code calls "
                    "(C's math library, OpenCL's built-ins or pypto's runtime)",
                    self.loc,
                    f"rename the parameter (e.g. '{p.name}_in' or 'x_{p.name}')",
                )
            a = ann.get(p.name, inspect.Parameter.empty)
            if isinstance(a, TensorType):
                self.params.append(TensorParam(p.name, a.dtype, a.shape))
                proxies.append(TensorProxy(p.name, a.dtype, a.shape, self))
            elif (dt := _scalar_dtype(a)) is not None:
                self.params.append(ScalarParam(p.name, dt))
                proxies.append(ExprProxy(Scalar(p.name, dtype=dt, loc=self.loc)))
            elif a is inspect.Parameter.empty:
                raise TracingError(
                    f"kernel '{self.name}': parameter '{p.name}' has no type annotation",
                    self.loc,
                    f"declare it, e.g. {p.name}: pt.Tensor[float, (N,)] for an array or {p.name}: float for a scalar",
                )
            else:
                raise TracingError(
                    f"kernel '{self.name}': parameter '{p.name}' is annotated with {a!r}",
                    self.loc,
                    "use pt.Tensor[dtype, shape] for arrays, or float / int / bool / pt.float64 ... for scalars",
                )
            seen_names.add(p.name)
        return proxies

    def trace(self) -> KernelIR:
        proxies = self._signature()
        previous = set_active_tracer(self)
        try:
            result = rewrite(self.fn)(*proxies)  # if/and/or/not on traced values: selects
        finally:
            set_active_tracer(previous)
        if result is not None:
            raise TracingError(
                f"kernel '{self.name}' returned a value; kernels write their results into output parameters",
                self.loc,
                "assign to an output: y[i] = ...  (destination passing)",
            )
        if not self.stores and not self.scatters:
            raise TracingError(
                f"kernel '{self.name}' stores nothing",
                self.loc,
                "assign to an output parameter, e.g. c[i] = a[i] + b[i]",
            )
        return self._build()

    def _build(self) -> KernelIR:
        stored = {s.tensor for s in self.stores} | {s.tensor for s in self.scatters}
        loaded: set[str] = {s.tensor for s in self.scatters}  # a scatter reads the elements it lands on
        dims: list[str] = []
        axes: set[int] = set(self.loops)
        for p in self.params:
            if isinstance(p, TensorParam):
                for s in p.shape:
                    for d in s.dim_set():
                        if d not in dims:
                            dims.append(d)
        for _, extent, _ in self.loops.values():
            self._check_dims(extent.dim_set(), dims, self.loc)
        for s in (*self.stores, *self.scatters):
            if isinstance(s, Store):
                for ix in s.index:
                    axes |= ix.axis_set()
                    self._check_dims(ix.dim_set(), dims, s.loc)
            for e in postorder(s):
                if isinstance(e, Load):
                    loaded.add(e.tensor)
                    for ix in e.index:
                        axes |= ix.axis_set()
                        self._check_dims(ix.dim_set(), dims, e.loc)
                elif isinstance(e, Index):
                    axes |= e.affine.axis_set()
                    self._check_dims(e.affine.dim_set(), dims, e.loc)
                elif isinstance(e, Gather):
                    loaded.add(e.tensor)
        params = []
        for p in self.params:
            if isinstance(p, TensorParam) and p.name in stored:
                p = TensorParam(p.name, p.dtype, p.shape, "inout" if p.name in loaded else "out")
            params.append(p)
        taken = {p.name for p in params} | set(dims) | _RESERVED
        src_names = _axis_names_from_source(self.fn)
        axis_infos = []
        for k in sorted(axes):
            nm = src_names.get(k, f"i{k}")
            if k in self.derived:
                base, suffix = self.derived[k]
                nm = f"{src_names.get(base, f'i{base}')}_{suffix}"
            extent, source = None, ""
            if k in self.loops:
                nm, extent, source = self.loops[k]
            if nm in taken or not nm.isidentifier() or nm.startswith("_"):
                nm = f"{nm}_ax{k}" if nm.isidentifier() and not nm.startswith("_") else f"i{k}"
                while nm in taken:
                    nm += "_"
            taken.add(nm)
            axis_infos.append(AxisInfo(k, nm, extent, source))
        return KernelIR(self.name, tuple(params), tuple(dims), tuple(axis_infos), tuple(self.stores), loc=self.loc,
                        scatters=tuple(self.scatters), checks=tuple(dict.fromkeys(self.nonempty)))  # fmt: skip

    def _check_dims(self, used: frozenset[str], declared: list[str], loc: SourceLoc | None) -> None:
        for d in used:
            if d not in declared:
                raise TracingError(
                    f"dimension '{d}' is used in kernel '{self.name}' but no parameter's shape contains it",
                    loc,
                    "a dim's size is read from the arrays: declare it in a parameter's pt.Tensor shape",
                )


def trace(fn: Callable, name: str | None = None) -> KernelIR:
    """Trace ``fn`` into a :class:`KernelIR` (the stage called ``traced``)."""
    return Tracer(fn, name).trace()
