"""The C fast path: a CPython entry point compiled into the same shared object as the kernel.

Validating arguments in Python costs microseconds; the entry point does the common case in C:
C-contiguous, aligned buffers of the declared types (buffer protocol: NumPy arrays and anything
exporting a buffer), Python numbers for scalars, no overlap between outputs and other arguments.
It binds the dims, evaluates every size and bounds check of the kernel, releases the GIL and
calls the kernel. For anything else it returns ``NotImplemented`` and the caller takes the full
Python path, which handles conversions and raises the precise, typed errors.

The shared object is not a Python extension module (CPython never unloads those): it exports
``pt_entry_new(owner)``, which returns the entry as a function object holding ``owner``, the loaded
library. The library is unloaded when the last such function object is gone, so a call in progress
always keeps its code mapped.
"""

from __future__ import annotations

from pypto.dtypes import DType
from pypto.ir.affine import Affine
from pypto.ir.contract import CallContract
from pypto.ir.kernel import AxisNotEmpty, DimAtMost, DimEqual, IndexInBounds, ScalarParam, TensorParam

# buffer-protocol format characters accepted for each dtype (native byte order)
# the exported C function that returns a new ``entry`` function object (see :mod:`pypto.targets.cpu.loader`)
ENTRY_SYMBOL = "pt_entry_new"

PAIRWISE_MAX = 8
"""Up to this many buffers, each output is tested against every other buffer inline; above it, by
``pt_overlap`` (sorted spans, one sweep)."""

OVERLAP_HELPER = """\
#include <stdint.h>
#include <stdlib.h>
typedef struct { uintptr_t lo, hi; int out; } pt_span;  /* a buffer's bytes [lo, hi); out: written */
static int pt_span_cmp(const void *a, const void *b) {
    uintptr_t x = ((const pt_span *)a)->lo, y = ((const pt_span *)b)->lo;
    return (x > y) - (x < y);
}
/* whether a written buffer shares a byte with another buffer (empty ones share none): spans sorted by start,
   each compared with the furthest end so far of every earlier span, or of the earlier written ones */
static int pt_overlap(pt_span *s, int n) {
    uintptr_t end_any = 0, end_out = 0;
    qsort(s, (size_t)n, sizeof *s, pt_span_cmp);
    for (int i = 0; i < n; i++) {
        if (s[i].lo == s[i].hi) continue;
        if (s[i].lo < (s[i].out ? end_any : end_out)) return 1;
        if (s[i].hi > end_any) end_any = s[i].hi;
        if (s[i].out && s[i].hi > end_out) end_out = s[i].hi;
    }
    return 0;
}"""

_FORMATS = {"float32": "f", "float64": "d", "int32": "il", "int64": "lq", "bool": "?", "float16": "e", "bfloat16": "E",
            "int8": "b", "int16": "h", "uint8": "B", "uint16": "H", "uint32": "IL", "uint64": "LQ",
            "complex64": "Zf", "complex128": "Zd"}  # fmt: skip
"""Buffer-protocol formats accepted per dtype (a bfloat16 array exports no buffer: it takes the checked path); a
complex type's is its two characters."""


def _c_affine(a: Affine, axis_value: dict[int, str] | None = None) -> str:
    parts = [f"{c}LL * pd_{d}" if c != 1 else f"pd_{d}" for d, c in a.dims]
    for ax, c in a.axes:
        v = (axis_value or {})[ax]
        parts.append(f"{c}LL * {v}" if c != 1 else v)
    if a.const or not parts:
        parts.append(f"{a.const}LL")
    return "(" + " + ".join(parts) + ")"


def render_entry(k: CallContract, function: str, c_types: dict[DType, str], arg_order: tuple[str, ...]) -> str:
    """C source of the fast entry ``entry(*args)`` that calls ``function``, made by ``ENTRY_SYMBOL(owner)``.

    ``k`` is the kernel's call contract (its dims, size and bounds checks are rendered as C);
    ``arg_order`` is the C function's argument order (buffers, scalars, dims); ``c_types`` maps
    dtypes to C type names.
    """
    params = k.params
    n = len(params)
    tensors = [p for p in params if isinstance(p, TensorParam)]
    idx = {p.name: i for i, p in enumerate(params)}
    L: list[str] = []
    w = L.append
    w("#define PY_SSIZE_T_CLEAN")
    w("#include <Python.h>")
    w("#include <string.h>")
    w("")
    if len(tensors) > PAIRWISE_MAX:
        L.extend(OVERLAP_HELPER.splitlines())
    w("static int pt_format_ok(const char *f, const char *accepted) {")
    w("    if (f == NULL) return 0;")
    w("    if (*f == '@' || *f == '=' || *f == '<') f++;")
    w("    if (accepted[0] == 'Z') return strcmp(f, accepted) == 0;")
    w("    return f[0] != 0 && f[1] == 0 && strchr(accepted, f[0]) != NULL;")
    w("}")
    w("")
    w("static PyObject *pt_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {")
    w("    (void)self;")
    for p in tensors:
        w(f"    Py_buffer pb_{p.name};")
    w("    int acquired = 0;")
    w("    int status = 0;")
    for d in k.dims:
        w(f"    long long pd_{d} = -1;")
    for p in k.params:
        if isinstance(p, ScalarParam):
            w(f"    {c_types[p.dtype.compute]} ps_{p.name} = 0;")
    w(f"    if (nargs != {n}) return Py_NewRef(Py_NotImplemented);")
    for p in tensors:
        i = idx[p.name]
        flags = "PyBUF_C_CONTIGUOUS | PyBUF_FORMAT" + (" | PyBUF_WRITABLE" if p.role != "in" else "")
        item = p.dtype.itemsize
        # only plain ndarrays take the fast path: subclasses (a masked array's mask) are checked in Python
        w(f'    if (strcmp(Py_TYPE(args[{i}])->tp_name, "numpy.ndarray") != 0) goto fallback;')
        w(f"    if (PyObject_GetBuffer(args[{i}], &pb_{p.name}, {flags}) != 0) {{ PyErr_Clear(); goto fallback; }}")
        w("    acquired++;")
        w(f"    if (pb_{p.name}.ndim != {p.ndim} || pb_{p.name}.itemsize != {item} "
          f"|| !pt_format_ok(pb_{p.name}.format, \"{_FORMATS[p.dtype.name]}\") "
          f"|| ((size_t)pb_{p.name}.buf % {item}) != 0) goto fallback;")  # fmt: skip
    # dims: plain entries first, then entries like N + 1 or 2 * N (the contract's order)
    for src in k.dim_sources:
        d, size = src.dim, f"(long long)pb_{src.param}.shape[{src.pos}]"
        if src.plain:
            w(f"    if (pd_{d} < 0) pd_{d} = {size};")
        else:
            c, k0 = src.coeff, src.const
            w(f"    if (pd_{d} < 0 && ({size} - {k0}LL) % {c}LL == 0 && ({size} - {k0}LL) / {c}LL >= 0) "
              f"pd_{d} = ({size} - {k0}LL) / {c}LL;")  # fmt: skip
    for d in k.dims:
        w(f"    if (pd_{d} < 0) goto fallback;")
    for p in tensors:
        for pos, e in enumerate(p.shape):
            w(f"    if ((long long)pb_{p.name}.shape[{pos}] != {_c_affine(e)}) goto fallback;")
    extents = dict(k.extents)
    for c in k.checks:
        if isinstance(c, DimEqual):
            w(f"    if ({_c_affine(c.a)} != {_c_affine(c.b)}) goto fallback;")
        elif isinstance(c, DimAtMost):
            w(f"    if ({_c_affine(c.a)} > {_c_affine(c.b)}) goto fallback;")
        elif isinstance(c, AxisNotEmpty):  # the Python path raises the error
            w(f"    if ({_c_affine(extents[c.axis])} <= 0) goto fallback;")  # type: ignore[arg-type]
        elif isinstance(c, IndexInBounds):
            base = _c_affine(c.index.without_axes())
            lo, hi, nonempty = [base], [base], []
            for ax, coeff in c.index.axes:
                ext = _c_affine(extents[ax])  # type: ignore[arg-type]
                nonempty.append(f"{ext} > 0")
                span = f"{coeff}LL * ({ext} - 1)"
                (hi if coeff > 0 else lo).append(span)
            cond = " && ".join(nonempty) or "1"
            w(
                f"    if (({cond}) && (({' + '.join(lo)}) < 0 || ({' + '.join(hi)}) >= {_c_affine(c.size)})) goto fallback;"
            )
    # outputs must not overlap any other buffer (the Python path decides whether an overlap is allowed); a
    # parameter the code never touches (kept in another's memory) is passed that other array on purpose
    checked = [p for p in tensors if p.name not in k.unread]
    if len(checked) > PAIRWISE_MAX and any(q.role != "in" for q in checked):
        # one sort and a sweep: pairwise tests grow with the square of the buffers (a training step's ~90
        # buffers gave 6,300 tests, which took gcc -O3 two minutes to compile)
        spans = ", ".join(f"{{(uintptr_t)pb_{p.name}.buf, (uintptr_t)pb_{p.name}.buf + (uintptr_t)pb_{p.name}.len, "
                          f"{int(p.role != 'in')}}}" for p in checked)  # fmt: skip
        w(f"    {{ pt_span pt_spans[{len(checked)}] = {{{spans}}};")
        w(f"      if (pt_overlap(pt_spans, {len(checked)})) goto fallback; }}")
    else:
        for q in checked:
            if q.role == "in":
                continue
            for p in checked:
                if p is q:
                    continue
                bq, bp = f"pb_{q.name}", f"pb_{p.name}"
                w(f"    if ({bq}.len > 0 && {bp}.len > 0 && (char *){bp}.buf < (char *){bq}.buf + {bq}.len "
                  f"&& (char *){bq}.buf < (char *){bp}.buf + {bp}.len) goto fallback;")  # fmt: skip
    for p in k.params:
        if not isinstance(p, ScalarParam):
            continue
        o = f"args[{idx[p.name]}]"
        if p.dtype.is_half:  # rounded to its type by the checked path
            w("    goto fallback;")
        elif p.dtype.is_bool:
            w(
                f"    if ({o} == Py_True) ps_{p.name} = 1; else if ({o} == Py_False) ps_{p.name} = 0; else goto fallback;"
            )
        elif p.dtype.is_int:
            lim = 2 ** (p.dtype.bits - 1)
            w(f"    if (!PyLong_CheckExact({o})) goto fallback;")
            w("    {")
            w("        int overflow = 0;")
            w(f"        long long v = PyLong_AsLongLongAndOverflow({o}, &overflow);")
            w("        if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); goto fallback; }")
            if p.dtype.bits == 32:
                w(f"        if (v < -{lim}LL || v > {lim - 1}LL) goto fallback;")
            w(f"        ps_{p.name} = ({c_types[p.dtype]})v;")
            w("    }")
        else:
            w(f"    if (PyFloat_CheckExact({o})) ps_{p.name} = ({c_types[p.dtype]})PyFloat_AS_DOUBLE({o});")
            w(
                f"    else if (PyLong_CheckExact({o})) {{ double v = PyLong_AsDouble({o}); "
                f"if (v == -1.0 && PyErr_Occurred()) {{ PyErr_Clear(); goto fallback; }} ps_{p.name} = ({c_types[p.dtype]})v; }}"
            )
            w("    else goto fallback;")
            if p.dtype.bits == 32:  # a finite value that overflowed the float: the checked path raises DTypeError
                w(f"    if (isinf(ps_{p.name}) && !isinf(PyFloat_CheckExact({o}) ? PyFloat_AS_DOUBLE({o}) : 0.0)) "
                  "goto fallback;")  # fmt: skip
    call_args = []
    by_name = {p.name: p for p in params}
    for a in arg_order:
        p = by_name.get(a)
        if isinstance(p, TensorParam):
            const = "const " if p.role == "in" else ""
            call_args.append(f"({const}{c_types[p.dtype.part]} *)pb_{a}.buf")  # a complex array: its parts
        elif isinstance(p, ScalarParam):
            call_args.append(f"ps_{a}")
        else:
            call_args.append(f"(int64_t)pd_{a}")
    w("    Py_BEGIN_ALLOW_THREADS")
    w(f"    status = {function}({', '.join(call_args)});")
    w("    Py_END_ALLOW_THREADS")
    for p in tensors:
        w(f"    PyBuffer_Release(&pb_{p.name});")
    w("    if (status != 0) {")
    w(f'        PyErr_SetString(PyExc_MemoryError, "kernel {k.name}: out of memory for temporary buffers");')
    w("        return NULL;")
    w("    }")
    outs = [p for p in tensors if p.role != "in"]
    if len(outs) == 1:
        w(f"    return Py_NewRef(args[{idx[outs[0].name]}]);")
    else:
        w(f"    return PyTuple_Pack({len(outs)}, {', '.join(f'args[{idx[p.name]}]' for p in outs)});")
    w("fallback:")
    for j, p in enumerate(tensors):
        w(f"    if (acquired > {j}) PyBuffer_Release(&pb_{p.name});")
    w("    return Py_NewRef(Py_NotImplemented);")
    w("}")
    w("")
    w("static PyMethodDef pt_entry_def = {")
    w(f'    "entry", (PyCFunction)(void (*)(void))pt_entry, METH_FASTCALL, "fast call of kernel {k.name}"}};')
    w("/* the loader's constructor of the entry: a function object holding `owner` (the loaded library), so")
    w("   the library stays loaded while the function (or a call of it) is alive */")
    w("#ifdef __cplusplus")
    w('extern "C"')
    w("#endif")
    w(f'__attribute__((visibility("default"))) PyObject *{ENTRY_SYMBOL}(PyObject *owner) {{')
    w("    return PyCFunction_NewEx(&pt_entry_def, owner, NULL);")
    w("}")
    return "\n".join(L) + "\n"
