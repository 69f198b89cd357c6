"""Data types of the kernel language and the rules that combine them.

``float`` in an annotation means float32 and ``int`` means int32: the precisions SIMD units and
GPUs run fastest. Promotion never invents float64: mixing an integer with a float gives that float
type, and Python scalars are *weak* (``x * 2.0`` keeps ``x``'s type). Integers of mixed signedness
follow NumPy 2 (``int8 + uint8 -> int16``, ``int64 + uint64 -> float64``); integer arithmetic wraps
around in every type. Complex numbers (complex64, complex128) beat every real kind; a complex value with a
float of another width takes the wider part (``complex64 + float64 -> complex128``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pypto.errors import DTypeError


@dataclass(frozen=True)
class DType:
    """A scalar element type: ``kind`` is 'b' (bool), 'i' (signed integer), 'u' (unsigned integer), 'f' (float)
    or 'c' (complex: ``bits`` counts both parts)."""

    name: str
    kind: str
    bits: int

    @property
    def numpy(self) -> np.dtype:
        if self.name == "bfloat16":
            return _bfloat16_numpy()
        return np.dtype(self.name if self.name != "bool" else np.bool_)

    @property
    def is_half(self) -> bool:
        """A 16-bit float (float16, bfloat16): stored in 16 bits, computed in float32 (see :data:`compute`)."""
        return self.kind == "f" and self.bits == 16

    @property
    def compute(self) -> DType:
        """The type its values are computed in: float32 for the 16-bit floats, else itself."""
        return float32 if self.is_half else self

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_inexact(self) -> bool:
        """A float or a complex type (the array API's "floating-point": true division, transcendentals)."""
        return self.kind in "fc"

    @property
    def part(self) -> DType:
        """The type of each part of a complex type (complex64 -> float32); a real type's own type."""
        return _PARTS.get(self, self)

    @property
    def is_int(self) -> bool:
        """Any integer type, signed or unsigned."""
        return self.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def is_narrow_int(self) -> bool:
        """An integer type narrower than 32 bits: C-family languages compute its arithmetic in ``int``, so
        printers convert each result back to wrap it around as NumPy does."""
        return self.kind in "iu" and self.bits < 32

    @property
    def bounds(self) -> tuple[int, int]:
        """The least and the greatest value of an integer type."""
        if self.kind == "u":
            return 0, 2**self.bits - 1
        if self.kind == "i":
            return -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        raise TypeError(f"{self.name} is not an integer type")

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    def __repr__(self) -> str:
        return f"pt.{self.name if self.name != 'bool' else 'bool_'}"

    def __str__(self) -> str:
        return self.name


bool_ = DType("bool", "b", 8)
int8 = DType("int8", "i", 8)
int16 = DType("int16", "i", 16)
int32 = DType("int32", "i", 32)
int64 = DType("int64", "i", 64)
uint8 = DType("uint8", "u", 8)
uint16 = DType("uint16", "u", 16)
uint32 = DType("uint32", "u", 32)
uint64 = DType("uint64", "u", 64)
float32 = DType("float32", "f", 32)
float64 = DType("float64", "f", 64)
float16 = DType("float16", "f", 16)
bfloat16 = DType("bfloat16", "f", 16)
complex64 = DType("complex64", "c", 64)
complex128 = DType("complex128", "c", 128)

ALL_DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64, float16, bfloat16,
              complex64, complex128)  # fmt: skip
COMPLEX_DTYPES = (complex64, complex128)
_PARTS = {complex64: float32, complex128: float64}
HALF_DTYPES = (float16, bfloat16)
SMALL_INT_DTYPES = (int8, int16, uint8, uint16, uint32, uint64)
"""The integer types beside the default int32 and int64."""
INTEGER_DTYPES = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)


def integer_spellings(names: dict[int, str], unsigned: str) -> dict[DType, str]:
    """A language's names of the integer types, from its signed name per width and its unsigned prefix:
    ``integer_spellings({8: "char", 16: "short", 32: "int", 64: "long"}, "u")`` spells OpenCL's."""
    return {d: (unsigned if d.is_unsigned else "") + names[d.bits] for d in INTEGER_DTYPES}


DEFAULT_FLOAT = float32
DEFAULT_INT = int32
INDEX = int64  # the type of axis values and dimension values used in expressions

_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NAME.update({"bool_": bool_, "float": float32, "int": int32, "double": float64})


_NAMES = ", ".join(repr(d) for d in ALL_DTYPES)


def _bfloat16_numpy() -> np.dtype:
    """NumPy's bfloat16: the ``ml_dtypes`` extension type (the one JAX and TensorFlow use)."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def as_dtype(spec: object, *, what: str = "dtype") -> DType:
    """Turn ``float``, ``int``, ``bool``, a :class:`DType`, a NumPy dtype or a name into a DType."""
    if isinstance(spec, DType):
        return spec
    if spec is float:
        return float32
    if spec is int:
        return int32
    if spec is bool:
        return bool_
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    try:
        npd = np.dtype(spec)  # type: ignore[arg-type]
    except TypeError:
        npd = None
    if npd is not None and npd.name in _BY_NAME and npd.byteorder in "=|":
        return _BY_NAME[npd.name]
    raise DTypeError(
        f"{what}: {spec!r} is not a pypto data type",
        param=what,
        expected=f"one of float, int, bool, {_NAMES}",
        got=spec,
        fix=f"use one of {_NAMES} (float means float32, int means int32)",
    )


def from_numpy(npd: np.dtype) -> DType | None:
    """The DType of a NumPy dtype, or None when pypto has no such type (e.g. float128, a big-endian type)."""
    if npd.byteorder not in "=|":
        return None
    return _BY_NAME.get(npd.name if npd.name != "bool" else "bool")


_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def complex_of(d: DType) -> DType:
    """The complex type whose parts hold ``d``'s values: complex128 for float64 (and complex128), else complex64."""
    return complex128 if d in (float64, complex128) else complex64


_SIGNED = {8: int8, 16: int16, 32: int32, 64: int64}


def promote(a: DType, b: DType) -> DType:
    """The common type of two strong (array-derived) operands: floats beat ints, wider beats narrower;
    float16 with bfloat16 is float32 (neither holds the other, as in NumPy with ml_dtypes and JAX); a signed
    and an unsigned integer meet in the narrowest signed type holding both (``int8 + uint8 -> int16``), and
    int64 with uint64 in float64 (no integer type holds both), as in NumPy 2."""
    if a == b:
        return a
    ka, kb = _RANK[a.kind], _RANK[b.kind]
    if ka != kb:
        if a.is_complex or b.is_complex:  # complex64 + float64 -> complex128, like NumPy
            c, r = (a, b) if a.is_complex else (b, a)
            return complex128 if r == float64 else c
        return a if ka > kb else b
    if a.kind != b.kind:  # a signed and an unsigned integer
        s, u = (a, b) if a.kind == "i" else (b, a)
        if s.bits > u.bits:
            return s
        return _SIGNED[2 * u.bits] if u.bits < 64 else float64
    if a.is_complex:
        return complex128
    if a.bits == b.bits:  # float16 and bfloat16
        return float32
    return a if a.bits >= b.bits else b


def weak_scalar_type(value: object) -> DType:
    """The kind a Python scalar asks for before it meets a typed operand."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int32 if -(2**31) <= value < 2**31 else int64
    if isinstance(value, complex):
        return complex64
    return float32


def python_array(value: list | tuple) -> np.ndarray:
    """A list (or tuple) of Python numbers as an array, its numbers taking the types pypto gives Python numbers
    (``jit`` arguments): bools bool, ints int64, floats float32, complex numbers complex64."""
    a = np.asarray(value)
    if a.dtype == np.float64:
        return a.astype(np.float32)
    if a.dtype == np.complex128:
        return a.astype(np.complex64)
    return a


def list_to(value: list | tuple, target: DType) -> np.ndarray | None:
    """A list of Python numbers converted to a parameter's type ``target`` as its numbers would convert in
    arithmetic (a Python number is weak): bools to anything, ints to integer and float types (an int that does
    not fit: None), floats to float types, complex numbers to complex types; None when a kind does not fit."""
    a = np.asarray(value)
    if a.dtype == object or not np.can_cast(a.dtype, target.numpy, "same_kind"):
        return None
    if a.dtype.kind in "iu" and target.kind in "iu" and a.size:
        info = np.iinfo(target.numpy)
        if a.min() < info.min or a.max() > info.max:
            return None
    return a.astype(target.numpy)


def promote_weak(strong: DType, value: object) -> DType:
    """The type of ``strong ⊕ python_scalar``: the scalar adapts unless it needs a higher kind."""
    if isinstance(value, bool):
        return strong
    if isinstance(value, int):
        if strong.is_bool:
            return weak_scalar_type(value)
        if strong == int32 and not -(2**31) <= value < 2**31:
            return int64
        if strong.is_int and strong != int32:
            lo, hi = strong.bounds
            if not lo <= value <= hi:  # NumPy 2 refuses too (OverflowError)
                raise DTypeError(
                    f"the Python integer {value} is out of bounds for {strong}",
                    param="scalar",
                    expected=f"an integer from {lo} to {hi} (a weak Python scalar takes the array's type {strong})",
                    got=value,
                    fix=f"cast the array first (pt.cast(x, pt.int64)) or use a value that fits {strong}",
                )
        return strong
    if isinstance(value, complex):  # x * 1j: the complex type of x's precision
        return strong if strong.is_complex else complex_of(strong)
    # a Python float
    return strong if strong.is_inexact else DEFAULT_FLOAT


def can_store(value: DType, target: DType) -> bool:
    """Whether a value may be stored implicitly into ``target`` (NumPy's same-kind rule)."""
    if value == target:
        return True
    return _KIND_ORDER[value.kind] <= _KIND_ORDER[target.kind]


_KIND_ORDER = {"b": 0, "u": 1, "i": 2, "f": 3, "c": 4}  # NumPy's: a signed value is not stored into an unsigned array


def float_type_for(d: DType) -> DType:
    """The type transcendental functions compute in for an operand of type ``d`` (a complex type keeps its own)."""
    return d if d.is_inexact else DEFAULT_FLOAT
