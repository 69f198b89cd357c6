"""``@pt.custom_op``: a user's function of arrays that becomes a named operation.

    @pt.custom_op
    def gelu(x):
        return 0.5 * x * (1 + pt.tanh(pt.sqrt(2 / pt.pi) * (x + 0.044715 * x**3)))

Inside a ``@pt.jit`` function, ``gelu(h)`` traces its body in place: its operations are fused with
their neighbours like any others and are marked with the op's name in :func:`pypto.show_graph`.
Called with NumPy arrays, it compiles and runs on its own, as a jit function named after it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pypto.array.function import JitFunction
from pypto.array.graph import Array, op_scope
from pypto.errors import ArgumentError, TracingError
from pypto.lang.control import rewrite


class CustomOp:
    """A named operation on arrays, defined by a Python function of arrays."""

    def __init__(self, fn: Callable, name: str | None = None, vjp: Callable | None = None, **jit_options: Any):
        if not callable(fn):
            raise ArgumentError(f"pt.custom_op: expected a function, got {fn!r}", param="fn",
                                expected="a function of arrays", got=fn)  # fmt: skip
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.op_name = name or getattr(fn, "__name__", "custom_op")
        self.vjp_fn: Callable | None = None
        if vjp is not None:
            self.def_vjp(vjp)
        self._standalone = JitFunction(self._traced, **jit_options)
        functools.update_wrapper(self._standalone, fn)

    def _traced(self, *args: Any, **kwargs: Any) -> Any:
        with op_scope(self.op_name):
            out = rewrite(self.fn, updates=True)(*args, **kwargs)
            if self.vjp_fn is None:
                return out
            if kwargs or not isinstance(out, Array):
                raise TracingError(
                    f"custom op '{self.op_name}' has a vjp, so it must take positional arguments and return one array",
                    None,
                    "pass arguments positionally; split an op with several results into several ops",
                )
            # one node standing for the op: its value is the body's, its gradient the user's vjp
            return Array("custom", (out, *(a for a in args if isinstance(a, Array))), (self, args), out.shape,
                         out.dtype)  # fmt: skip

    def def_vjp(self, vjp: Callable) -> Callable:
        """Give the op a hand-written backward, used by ``pt.grad`` instead of differentiating its body::

        @gelu.def_vjp
        def gelu_vjp(g, x):        # the result's cotangent, then the op's arguments
            return g * ...         # one cotangent per array argument (a tuple for several)
        """
        if not callable(vjp):
            raise ArgumentError(f"custom op '{self.op_name}': def_vjp expects a function, got {vjp!r}",
                                param="vjp", expected="a function (g, *args) -> cotangents", got=vjp)  # fmt: skip
        self.vjp_fn = vjp
        return vjp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any(isinstance(a, Array) for a in (*args, *kwargs.values())):
            return self._traced(*args, **kwargs)
        if kwargs:
            raise ArgumentError(
                f"custom op '{self.op_name}' called on arrays takes positional arguments only",
                param=next(iter(kwargs)),
                expected="positional arrays",
                got=sorted(kwargs),
            )
        return self._standalone(*args)

    def get_code(self, *args: Any, backend: str | None = None) -> str:
        """The source of the kernel the op compiles to on its own, for these arguments."""
        return self._standalone.get_code(*args, backend=backend)

    def __repr__(self) -> str:
        return f"<pypto custom op {self.op_name}>"


def custom_op(fn: Callable | None = None, *, name: str | None = None, executor: str | None = None,
              vjp: Callable | None = None) -> Any:  # fmt: skip
    """Make ``fn`` (a function of arrays) a named operation, usable in ``@pt.jit`` and on its own;
    ``vjp`` (or ``@op.def_vjp``) gives it a hand-written gradient."""
    if fn is None:
        return lambda f: CustomOp(f, name, vjp, executor=executor)
    return CustomOp(fn, name, vjp, executor=executor)
