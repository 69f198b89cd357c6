"""``pt.checkpoint(f)``: gradient checkpointing (rematerialisation), as ``torch.utils.checkpoint`` and
``jax.checkpoint``.

    def block(h, w1, w2):
        return pt.tanh(pt.tanh(h @ w1) @ w2)

    def loss(x, w1, w2, w3, w4):
        h = pt.checkpoint(block)(x, w1, w2)        # the inside of the block is not kept for the gradient
        return (pt.checkpoint(block)(h, w3, w4) ** 2).sum()

Inside a traced function the call traces ``f`` in place and returns one node standing for its result (the
array layer's ``custom`` node: its value is ``f``'s, its gradient given here). The gradient traces ``f`` again
on its arguments seen through identity nodes (so nothing of the first trace is reused) and differentiates
that copy: the backward reads the recomputed values, and the forward's values inside ``f`` are dead once
``f``'s result is computed. With the ``plan_memory`` pass (nests ordered so lives end early, and scratch
arrays of disjoint lifetimes in one buffer) that is memory saved: ``pt.check_memory`` shows it. The price is
computing ``f`` twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pypto.array.graph import Array, op_scope
from pypto.errors import ArgumentError, TracingError
from pypto.lang.control import rewrite


class Checkpoint:
    """``f`` whose values are recomputed for its gradient instead of kept (see the module docstring)."""

    def __init__(self, fn: Callable):
        if not callable(fn):
            raise ArgumentError(f"pt.checkpoint: expected a function of arrays, got {fn!r}", param="fn",
                                expected="a function of arrays returning one array", got=fn)  # fmt: skip
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.op_name = f"checkpoint({getattr(fn, '__name__', 'fn')})"
        self._jit: Any = None

    def __call__(self, *args: Any) -> Any:
        if not any(isinstance(a, Array) for a in args):  # called on NumPy arrays: nothing to keep or recompute
            if self._jit is None:
                from pypto.array.function import JitFunction

                self._jit = JitFunction(self.fn)
            return self._jit(*args)
        with op_scope(self.op_name):
            out = rewrite(self.fn, updates=True)(*args)
        if not isinstance(out, Array):
            raise TracingError(
                f"pt.checkpoint: {self.op_name} returned {type(out).__name__}, not one array",
                None,
                "checkpoint a function that returns one array (call pt.checkpoint once per result)",
            )
        arrays = tuple(a for a in args if isinstance(a, Array))
        return Array("custom", (out, *arrays), (self, args), out.shape, out.dtype)

    def vjp_fn(self, g: Array, *args: Any) -> tuple[Array, ...]:
        """The cotangents of the array arguments: ``f`` traced again on identities of them, differentiated."""
        from pypto.array.autodiff import backward

        fresh = [Array("stop", (a,), "recompute", a.shape, a.dtype) if isinstance(a, Array) else a for a in args]
        with op_scope(f"{self.op_name} recomputed"):
            out = rewrite(self.fn, updates=True)(*fresh)
        leaves = [a for a in fresh if isinstance(a, Array)]
        return tuple(backward([out], [g], leaves, leaves))

    def __repr__(self) -> str:
        return f"<pypto {self.op_name}>"


def checkpoint(fn: Callable) -> Checkpoint:
    """``fn`` (a function of arrays returning one array) whose inside is recomputed for the gradient instead of
    kept: less memory for one more forward of ``fn`` (see :mod:`pypto.array.checkpoint`)."""
    return Checkpoint(fn)
