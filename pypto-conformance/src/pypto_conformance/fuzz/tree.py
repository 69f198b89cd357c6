"""Random kernels as data: expression nodes over two axes ``i`` (size M) and ``j`` (size N).

Every node knows its dtype (by :mod:`.rules`), an interval bounding its values (for keeping
generated values in safe domains; for a complex node, an interval bounding its modulus), the axes it depends on, the axes a tensor it reads gives an
extent to, and the functions it calls. Builders compute all of that; ``render`` writes the node
as kernel-language source.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import rules


@dataclass(frozen=True)
class Tensor:
    """An input tensor: its dtype, how it is indexed (``pattern``) and how its values are drawn."""

    name: str
    dtype: str
    pattern: str
    profile: str

    @property
    def axes(self) -> frozenset[str]:
        return PATTERNS[self.pattern][2]

    @property
    def sized(self) -> frozenset[str]:
        return PATTERNS[self.pattern][3]

    def shape_source(self) -> str:
        dims = PATTERNS[self.pattern][0]
        return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"

    def index_source(self) -> str:
        return PATTERNS[self.pattern][1].format(ix=self.index_name)

    @property
    def index_name(self) -> str | None:
        """The integer tensor a gathered tensor is indexed through (``g3_ix`` in ``g3[g3_ix[i], j]``), or None."""
        return f"{self.name}_ix" if self.pattern in GATHER_INDEX else None

    def index_param(self) -> str:
        dims, dtype, _, _ = GATHER_INDEX[self.pattern]
        return f"{self.index_name}: pt.Tensor[pt.{dtype}, ({', '.join(dims)}{',' if len(dims) == 1 else ''})]"

    def index_values(self, rng: np.random.Generator, m: int, n: int) -> np.ndarray:
        """Random positions along the gathered dimension (negative ones count from the end)."""
        dims, dtype, lo, hi = GATHER_INDEX[self.pattern]
        shape = tuple({"M": m, "N": n}[d] for d in dims)
        return rng.integers(lo, hi, shape).astype(dtype)

    def shape(self, m: int, n: int) -> tuple[int, ...]:
        return PATTERN_SHAPES[self.pattern](m, n)

    def bounds(self) -> tuple[float, float]:
        return PROFILES[self.profile][0]

    def values(self, rng: np.random.Generator, m: int, n: int) -> np.ndarray:
        return PROFILES[self.profile][1](rng, self.shape(m, n)).astype(self.dtype)

    def view(self, array: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
        """The array as seen at (i, j): a view broadcastable to (M, N) (for a gathered one, through ``index``)."""
        if self.pattern in GATHER_INDEX:
            return GATHER_VIEWS[self.pattern](array, index)
        return PATTERN_VIEWS[self.pattern](array)


# pattern: (shape entries, index, axes it reads along, axes it indexes plainly and so gives an extent)
PATTERNS: dict[str, tuple[tuple[str, ...], str, frozenset[str], frozenset[str]]] = {
    "full": (("M", "N"), "[i, j]", frozenset("ij"), frozenset("ij")),
    "row": (("N",), "[j]", frozenset("j"), frozenset("j")),
    "col": (("M",), "[i]", frozenset("i"), frozenset("i")),
    "trans": (("N", "M"), "[j, i]", frozenset("ij"), frozenset("ij")),
    "shift": (("M", "N + 1"), "[i, j + 1]", frozenset("ij"), frozenset("i")),
    "rev": (("N",), "[N - 1 - j]", frozenset("j"), frozenset()),
    "stride": (("2 * M", "N"), "[2 * i + 1, j]", frozenset("ij"), frozenset("j")),
    # gathers: rows picked by an index per i (an embedding lookup), a column per (i, j) (take_along_axis)
    "gather": (("7", "N"), "[{ix}[i], j]", frozenset("ij"), frozenset("ij")),
    "pick": (("M", "5"), "[i, {ix}[i, j]]", frozenset("ij"), frozenset("ij")),
}
# a gathered pattern's index tensor: its shape, dtype and the range its values are drawn from
GATHER_INDEX: dict[str, tuple[tuple[str, ...], str, int, int]] = {
    "gather": (("M",), "int64", -7, 7),
    "pick": (("M", "N"), "int32", 0, 5),
}
GATHER_VIEWS = {
    "gather": lambda a, ix: a[ix],
    "pick": lambda a, ix: np.take_along_axis(a, ix.astype(np.intp), axis=1),
}
PATTERN_SHAPES = {
    "full": lambda m, n: (m, n),
    "row": lambda m, n: (n,),
    "col": lambda m, n: (m,),
    "trans": lambda m, n: (n, m),
    "shift": lambda m, n: (m, n + 1),
    "rev": lambda m, n: (n,),
    "stride": lambda m, n: (2 * m, n),
    "gather": lambda m, n: (7, n),
    "pick": lambda m, n: (m, 5),
}
PATTERN_VIEWS = {
    "full": lambda a: a,
    "row": lambda a: a[None, :],
    "col": lambda a: a[:, None],
    "trans": lambda a: a.T,
    "shift": lambda a: a[:, 1:],
    "rev": lambda a: a[::-1][None, :],
    "stride": lambda a: a[1::2, :],
}

# profile: ((lo, hi), generator of float64 values)
PROFILES = {
    "signed": ((-2.0, 2.0), lambda rng, shape: rng.uniform(-2.0, 2.0, shape)),
    "positive": ((0.5, 2.5), lambda rng, shape: rng.uniform(0.5, 2.5, shape)),
    "grid": ((-4.0, 4.0), lambda rng, shape: rng.integers(-16, 16, shape, endpoint=True) / 4.0),
    "int_signed": ((-20.0, 20.0), lambda rng, shape: rng.integers(-20, 20, shape, endpoint=True)),
    "int_positive": ((1.0, 20.0), lambda rng, shape: rng.integers(1, 20, shape, endpoint=True)),
    "mask": ((0.0, 1.0), lambda rng, shape: rng.random(shape) < 0.5),
    # complex profiles: bounds of the modulus; "complex_grid" has exact zero parts, ties and the negative real axis
    "complex_signed": (
        (0.0, 2.0 * math.sqrt(2.0)),
        lambda rng, shape: rng.uniform(-2.0, 2.0, shape) + 1j * rng.uniform(-2.0, 2.0, shape),
    ),
    "complex_grid": (
        (0.0, 2.0 * math.sqrt(2.0)),
        lambda rng, shape: (
            (rng.integers(-8, 8, shape, endpoint=True) + 1j * rng.integers(-8, 8, shape, endpoint=True)) / 4.0
        ),
    ),
}

# axis values usable in expressions: form -> (axis, bounds as a function of (M, N))
AXIS_FORMS = {
    "i": ("i", lambda m, n: (0, max(m - 1, 0))),
    "i + 1": ("i", lambda m, n: (1, max(m, 1))),
    "M - 1 - i": ("i", lambda m, n: (0, max(m - 1, 0))),
    "j": ("j", lambda m, n: (0, max(n - 1, 0))),
    "2 * j": ("j", lambda m, n: (0, max(2 * n - 2, 0))),
    "N - 1 - j": ("j", lambda m, n: (0, max(n - 1, 0))),
}


@dataclass(frozen=True, kw_only=True)
class Node:
    """What every expression node knows about itself."""

    dtype: str
    lo: float
    hi: float
    axes: frozenset[str] = frozenset()
    sized: frozenset[str] = frozenset()
    functions: frozenset[str] = frozenset()
    weak: str | None = None  # "int" / "float" / "complex" for Python scalars and axis values

    @property
    def bound(self) -> float:
        return max(abs(self.lo), abs(self.hi))


@dataclass(frozen=True, kw_only=True)
class Load(Node):
    tensor: Tensor


@dataclass(frozen=True, kw_only=True)
class Const(Node):
    value: float


@dataclass(frozen=True, kw_only=True)
class AxisValue(Node):
    form: str


@dataclass(frozen=True, kw_only=True)
class Unary(Node):
    op: str
    x: Node
    spelling: str = ""


@dataclass(frozen=True, kw_only=True)
class Binary(Node):
    op: str
    a: Node
    b: Node
    operand: str  # the type both operands are converted to


@dataclass(frozen=True, kw_only=True)
class Power(Node):
    x: Node
    k: int


@dataclass(frozen=True, kw_only=True)
class Select(Node):
    cond: Node
    a: Node
    b: Node


@dataclass(frozen=True, kw_only=True)
class Convert(Node):
    x: Node


@dataclass(frozen=True, kw_only=True)
class Reduce(Node):
    op: str
    x: Node
    over: tuple[str, ...]
    count: int  # elements reduced per result


def children(node: Node) -> tuple[Node, ...]:
    """The operands of a node."""
    if isinstance(node, (Unary, Power, Convert, Reduce)):
        return (node.x,)
    if isinstance(node, Binary):
        return (node.a, node.b)
    if isinstance(node, Select):
        return (node.cond, node.a, node.b)
    return ()


def _meta(*parts: Node) -> dict:
    return {
        "axes": frozenset().union(*(p.axes for p in parts)),
        "sized": frozenset().union(*(p.sized for p in parts)),
        "functions": frozenset().union(*(p.functions for p in parts)),
    }


# -- builders ------------------------------------------------------------------------------------


def load(t: Tensor) -> Load:
    lo, hi = t.bounds()
    return Load(dtype=t.dtype, lo=lo, hi=hi, axes=t.axes, sized=t.sized, tensor=t)


def const(value: float | complex) -> Const:
    if isinstance(value, complex):
        return Const(dtype="complex64", lo=abs(value), hi=abs(value), weak="complex", value=value)
    kind = "int" if isinstance(value, int) else "float"
    return Const(dtype="int32" if kind == "int" else "float32", lo=value, hi=value, weak=kind, value=value)


def axis_value(form: str, m: int, n: int) -> AxisValue:
    axis, bounds = AXIS_FORMS[form]
    lo, hi = bounds(m, n)
    return AxisValue(dtype="int64", lo=lo, hi=hi, axes=frozenset(axis), weak="int", form=form)


def operand_type(a: Node, b: Node) -> str:
    """The common type two operands are converted to (one of them may be weak, not both)."""
    if a.weak and b.weak:
        raise ValueError("the generator never combines two Python scalars or axis values")
    if a.weak:
        return rules.with_weak(b.dtype, a.weak, a.lo)
    if b.weak:
        return rules.with_weak(a.dtype, b.weak, b.lo)
    return rules.promote(a.dtype, b.dtype)


def modulus(x: Node) -> tuple[float, float]:
    """Bounds of ``abs(x)``: a complex node's own interval, or derived from a real node's."""
    if rules.is_complex(x.dtype):
        return x.lo, x.hi
    return (0.0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))), x.bound


def _complex_binary(op: str, a: Node, b: Node, t: str) -> Binary:
    """An operator on complex operands (either may be real): bounds of the result's modulus."""
    if op in ("eq", "ne"):
        return Binary(dtype="bool", lo=0, hi=1, op=op, a=a, b=b, operand=t, **_meta(a, b))
    (alo, ahi), (blo, bhi) = modulus(a), modulus(b)
    if op in ("add", "sub"):
        lo, hi = max(0.0, alo - bhi, blo - ahi), ahi + bhi
    elif op == "mul":
        lo, hi = alo * blo, ahi * bhi
    elif op == "div":
        if blo <= 0:
            raise ValueError("a divisor's modulus must be bounded away from 0")
        lo, hi = alo / bhi, ahi / blo
    else:
        raise ValueError(f"operator {op} is not defined for complex operands")
    return Binary(dtype=t, lo=lo, hi=hi, op=op, a=a, b=b, operand=t, **_meta(a, b))


def _products(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    p = [x * y for x in a for y in b]
    return min(p), max(p)


def _int_bits_bound(a: Node, b: Node) -> float:
    m = max(a.bound, b.bound, 1.0)
    return float(2 ** math.ceil(math.log2(m + 1)))


def binary(op: str, a: Node, b: Node) -> Binary:
    t = operand_type(a, b)
    if rules.is_complex(t):
        return _complex_binary(op, a, b, t)
    A, Bv = (a.lo, a.hi), (b.lo, b.hi)
    if op in rules.COMPARE:
        return Binary(dtype="bool", lo=0, hi=1, op=op, a=a, b=b, operand=t, **_meta(a, b))
    if op in rules.LOGIC:
        if t == "bool":
            lo, hi = 0.0, 1.0
        else:
            p = _int_bits_bound(a, b)
            lo, hi = -p, p
        return Binary(dtype=t, lo=lo, hi=hi, op=op, a=a, b=b, operand=t, **_meta(a, b))
    result = rules.arith_result(op, t)
    if op == "add":
        lo, hi = A[0] + Bv[0], A[1] + Bv[1]
    elif op == "sub":
        lo, hi = A[0] - Bv[1], A[1] - Bv[0]
    elif op == "mul":
        lo, hi = _products(A, Bv)
    elif op == "div":
        if Bv[0] <= 0 <= Bv[1]:
            raise ValueError("a divisor's interval must exclude 0")
        lo, hi = _products(A, (1 / Bv[1], 1 / Bv[0]))
    elif op == "floordiv":
        if rules.is_float(t):
            if Bv[0] <= 0 <= Bv[1]:
                raise ValueError("a float divisor's interval must exclude 0")
            q = _products(A, (1 / Bv[1], 1 / Bv[0]))
            lo, hi = math.floor(q[0]), math.floor(q[1])
        else:
            lo, hi = -a.bound, a.bound  # |a // b| <= |a| for integers, and 0 when b == 0
    elif op == "mod":
        m = b.bound
        lo, hi = (0.0 if Bv[0] > 0 else -m), (0.0 if Bv[1] < 0 else m)
    elif op == "maximum":
        lo, hi = max(A[0], Bv[0]), max(A[1], Bv[1])
    elif op == "minimum":
        lo, hi = min(A[0], Bv[0]), min(A[1], Bv[1])
    else:
        raise ValueError(f"unknown operator {op}")
    return Binary(dtype=result, lo=lo, hi=hi, op=op, a=a, b=b, operand=t, **_meta(a, b))


def _monotone(f, lo: float, hi: float) -> tuple[float, float]:
    return f(lo), f(hi)


def _sigmoid(v: float) -> float:
    return 0.5 * (1 + math.tanh(v / 2))


def _complex_unary(op: str, x: Node, spelling: str) -> Unary:
    """A function of a complex operand: the parts (``abs``, ``angle``, ``real``, ``imag``) are real, bounded
    by the modulus; the rest are complex, with bounds of their modulus."""
    meta = _meta(x)
    lo, hi, dtype = x.lo, x.hi, x.dtype
    if op in rules.PARTS:
        dtype = rules.part(x.dtype)
        if op == "angle":
            lo, hi = -math.pi, math.pi
        elif op != "abs":
            lo = -hi
        return Unary(dtype=dtype, lo=lo, hi=hi, op=op, x=x, spelling=spelling or f"pt.{op}", **meta)
    if op in ("neg", "conj"):
        return Unary(dtype=dtype, lo=lo, hi=hi, op=op, x=x, spelling=spelling or f"pt.{op}", **meta)
    if op == "exp":  # |exp(z)| = exp(Re z), Re z within [-|z|, |z|]
        lo, hi = math.exp(-hi), math.exp(hi)
    elif op == "log":  # |log z| <= sqrt(log(|z|)**2 + pi**2)
        if lo <= 0:
            raise ValueError("log needs an operand bounded away from 0")
        lo, hi = 0.0, math.hypot(max(abs(math.log(lo)), abs(math.log(hi))), math.pi)
    elif op == "sqrt":
        lo, hi = math.sqrt(lo), math.sqrt(hi)
    else:
        raise ValueError(f"function {op} is not defined for complex operands")
    return Unary(dtype=dtype, lo=lo, hi=hi, op=op, x=x, **{**meta, "functions": meta["functions"] | {op}})


def unary(op: str, x: Node, spelling: str = "") -> Unary:
    if rules.is_complex(x.dtype):
        return _complex_unary(op, x, spelling)
    meta = _meta(x)
    if op == "neg":
        return Unary(dtype=x.dtype, lo=-x.hi, hi=-x.lo, op=op, x=x, **meta)
    if op == "abs":
        lo = 0.0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))
        return Unary(dtype=x.dtype, lo=lo, hi=x.bound, op=op, x=x, spelling=spelling or "abs", **meta)
    if op == "invert":
        if x.dtype == "bool":
            return Unary(dtype="bool", lo=0, hi=1, op=op, x=x, **meta)
        return Unary(dtype=x.dtype, lo=-x.hi - 1, hi=-x.lo - 1, op=op, x=x, **meta)
    ft = rules.function_type(x.dtype)
    if op == "exp":
        lo, hi = _monotone(math.exp, x.lo, x.hi)
    elif op == "log":
        if x.lo <= 0:
            raise ValueError("log needs a positive operand")
        lo, hi = _monotone(math.log, x.lo, x.hi)
    elif op == "sqrt":
        if x.lo < 0:
            raise ValueError("sqrt needs a non-negative operand")
        lo, hi = _monotone(math.sqrt, x.lo, x.hi)
    elif op == "rsqrt":
        if x.lo <= 0:
            raise ValueError("rsqrt needs a positive operand")
        lo, hi = 1 / math.sqrt(x.hi), 1 / math.sqrt(x.lo)
    elif op == "tanh":
        lo, hi = _monotone(math.tanh, x.lo, x.hi)
    elif op in ("sin", "cos"):
        lo, hi = -1.0, 1.0
    elif op == "erf":
        lo, hi = _monotone(math.erf, x.lo, x.hi)
    elif op == "sigmoid":
        lo, hi = _monotone(_sigmoid, x.lo, x.hi)
    else:
        raise ValueError(f"unknown function {op}")
    return Unary(dtype=ft, lo=lo, hi=hi, op=op, x=x, **{**meta, "functions": meta["functions"] | {op}})


def power(x: Node, k: int) -> Power:
    meta = _meta(x)
    if k == 0:
        return Power(dtype=x.dtype, lo=1, hi=1, x=x, k=k, **meta)
    if rules.is_complex(x.dtype):  # the modulus of z**k is |z|**k
        if k < 0 and x.lo <= 0:
            raise ValueError("a negative power needs an operand away from 0")
        lo, hi = (x.lo**k, x.hi**k) if k > 0 else (x.hi**k, x.lo**k)
        return Power(dtype=x.dtype, lo=lo, hi=hi, x=x, k=k, **meta)
    lo_x, hi_x = x.lo, x.hi
    if k < 0:
        if lo_x <= 0 <= hi_x:
            raise ValueError("a negative power needs an operand away from 0")
        lo_x, hi_x = 1 / hi_x, 1 / lo_x
        dtype = x.dtype if rules.is_float(x.dtype) else "float32"
    else:
        dtype = x.dtype
    n = abs(k)
    ends = [lo_x**n, hi_x**n]
    lo, hi = min(ends), max(ends)
    if n % 2 == 0 and lo_x <= 0 <= hi_x:
        lo = 0.0
    return Power(dtype=dtype, lo=lo, hi=hi, x=x, k=k, **meta)


def select(cond: Node, a: Node, b: Node) -> Select:
    t = operand_type(a, b)
    (alo, ahi), (blo, bhi) = (modulus(a), modulus(b)) if rules.is_complex(t) else ((a.lo, a.hi), (b.lo, b.hi))
    return Select(dtype=t, lo=min(alo, blo), hi=max(ahi, bhi), cond=cond, a=a, b=b, **_meta(cond, a, b))


def convert(x: Node, target: str) -> Convert:
    lo, hi = modulus(x) if rules.is_complex(target) else (x.lo, x.hi)
    if rules.KIND[target] == 1 and rules.is_float(x.dtype):
        lo, hi = float(math.trunc(lo)), float(math.trunc(hi))
    if target == "bool":
        lo, hi = 0.0, 1.0
    return Convert(dtype=target, lo=lo, hi=hi, x=x, **_meta(x))


def reduce(op: str, x: Node, over: tuple[str, ...], m: int, n: int) -> Reduce:
    count = 1
    for a in over:
        count *= m if a == "i" else n
    meta = _meta(x)
    meta["axes"] = meta["axes"] - set(over)
    dtype = x.dtype
    lo, hi = x.lo, x.hi
    if rules.is_complex(dtype):  # sum and mean: bounds of the modulus
        lo, hi = 0.0, (count * hi if op == "sum" else hi)
    elif op == "sum":
        lo, hi = (count * lo, count * hi) if count else (0.0, 0.0)
    elif op == "mean":
        dtype = x.dtype if rules.is_float(x.dtype) else "float32"
    elif op == "prod":
        if lo >= 0:
            lo, hi = lo**count, hi**count
        else:
            lo, hi = -(x.bound**count), x.bound**count
    return Reduce(dtype=dtype, lo=lo, hi=hi, op=op, x=x, over=over, count=count, **meta)


# -- source --------------------------------------------------------------------------------------


def _dtype_source(dt: str) -> str:
    return "pt.bool_" if dt == "bool" else f"pt.{dt}"


def render(node: Node, hoisted: list[str] | None = None) -> str:
    """The node as kernel-language source (fully parenthesised). With ``hoisted``, each select is written as an
    ``if``/``else`` statement assigning a variable (appended to ``hoisted``, inner ones first), which the
    expression then names: the same program through the control-flow pass."""
    if hoisted is not None:
        return _render(node, lambda n: render(n, hoisted), hoisted)
    return _render(node, render, None)


def _render(node: Node, render: Callable[[Node], str], hoisted: list[str] | None) -> str:
    if isinstance(node, Load):
        return f"{node.tensor.name}{node.tensor.index_source()}"
    if isinstance(node, Const):
        if isinstance(node.value, complex):
            return f"({node.value!r})".replace("((", "(").replace("))", ")")
        return f"({node.value!r})" if node.value < 0 else repr(node.value)
    if isinstance(node, AxisValue):
        return node.form if node.form in ("i", "j") else f"({node.form})"
    if isinstance(node, Unary):
        x = render(node.x)
        if node.op == "neg":
            return f"(-{x})"
        if node.op == "invert":
            return f"(~{x})"
        if node.op == "abs" or node.spelling.startswith("pt."):
            return f"{node.spelling}({x})"
        if node.spelling.startswith("."):  # z.real, z.imag, z.conj()
            return f"{x}{node.spelling}"
        return f"pt.{node.op}({x})"
    if isinstance(node, Binary):
        a, b = render(node.a), render(node.b)
        if node.op in ("maximum", "minimum"):
            return f"pt.{node.op}({a}, {b})"
        return f"({a} {rules.SYMBOL[node.op]} {b})"
    if isinstance(node, Power):
        return f"({render(node.x)} ** {node.k})"
    if isinstance(node, Select):
        cond, a, b = render(node.cond), render(node.a), render(node.b)
        if hoisted is None:
            return f"pt.where({cond}, {a}, {b})"
        name = f"v{len(hoisted)}"
        hoisted.append(f"if {cond}:\n        {name} = {a}\n    else:\n        {name} = {b}")
        return name
    if isinstance(node, Convert):
        return f"pt.cast({render(node.x)}, {_dtype_source(node.dtype)})"
    if isinstance(node, Reduce):
        over = node.over[0] if len(node.over) == 1 else f"({', '.join(node.over)})"
        return f"pt.reduce_{node.op}({render(node.x)}, axis={over})"
    raise TypeError(f"unknown node {type(node).__name__}")


def tensors_of(node: Node) -> list[Tensor]:
    """The tensors a node reads, each once, in first-use order."""
    seen: dict[str, Tensor] = {}
    stack = [node]
    order: list[Tensor] = []
    while stack:
        n = stack.pop()
        if isinstance(n, Load) and n.tensor.name not in seen:
            seen[n.tensor.name] = n.tensor
            order.append(n.tensor)
        stack.extend(reversed(children(n)))
    return order


@dataclass(frozen=True)
class Program:
    """A whole random kernel: sizes, the stored expression, and how it is stored."""

    m: int
    n: int
    root: Node  # for reduced stores, a Reduce over the axes the store drops
    store: str  # "full": out[i, j]; "trans": out[j, i]; "row": out[i]; "col": out[j]; "all": out[0]
    seed: int
    tensors: tuple[Tensor, ...] = field(default=())
    swapped: bool = False  # axes declared in the other order: ``j, i = pt.axis(0), pt.axis(1)``

    @property
    def out_dtype(self) -> str:
        return self.root.dtype

    def out_shape(self) -> tuple[int, ...]:
        return {"full": (self.m, self.n), "trans": (self.n, self.m), "row": (self.m,), "col": (self.n,), "all": (1,)}[
            self.store
        ]

    def source(self) -> str:
        """The kernel's Python source."""
        params = []
        for t in self.tensors:
            params.append(f"{t.name}: pt.Tensor[{_dtype_source(t.dtype)}, {t.shape_source()}]")
            if t.index_name is not None:
                params.append(t.index_param())
        out_shape = {"full": "(M, N)", "trans": "(N, M)", "row": "(M,)", "col": "(N,)", "all": "(1,)"}[self.store]
        params.append(f"out: pt.Tensor[{_dtype_source(self.out_dtype)}, {out_shape}]")
        target = {"full": "out[i, j]", "trans": "out[j, i]", "row": "out[i]", "col": "out[j]", "all": "out[0]"}[
            self.store
        ]
        axes = "j, i = pt.axis(0), pt.axis(1)" if self.swapped else "i, j = pt.axis(0), pt.axis(1)"
        hoisted: list[str] | None = [] if self.branchy else None
        value = render(self.root, hoisted)
        body = "".join(f"    {h}\n" for h in hoisted or ())
        return f"def fuzz_kernel({', '.join(params)}):\n    {axes}\n{body}    {target} = {value}\n"

    @property
    def branchy(self) -> bool:
        """Whether the source writes its selects as ``if``/``else`` statements (every other seed) instead of
        ``pt.where``: the same program, through the control-flow pass."""
        return self.seed % 2 == 1

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        return f"Program(M={self.m}, N={self.n}, seed={self.seed}):\n{self.source()}"
