"""Optimizers: every parameter of a model updated by one compiled program per step.

    params = [w1, b1, w2, b2]                        # NumPy arrays (or pt.Parameters, or a pt.Module)
    opt = pt.optim.adamw(params, lr=1e-3, weight_decay=0.01)
    loss_and_grads = pt.value_and_grad(loss, argnums=(0, 1, 2, 3))
    for x, y in batches:
        value, grads = loss_and_grads(*params, x, y)
        opt.step(grads)                              # params (and the optimizer's moments) updated in place

``sgd``, ``adam`` and ``adamw`` follow ``torch.optim.SGD``, ``Adam`` and ``AdamW`` (same arguments, same
update formulas, same first step of momentum), so a model trained either way follows the same path within
rounding. The update of all parameters is one ``@pt.jit`` function (its program holds every parameter's
arithmetic, written into the parameters and the moments in place through ``out=``); the learning rate, the
step's bias corrections and the momentum's first-step factor are runtime numbers, so changing the learning
rate (a schedule) or taking the next step compiles nothing. The moments have the parameters' dtypes.

Parameters are leaves of a tree of lists, tuples and dicts (in that order: lists and tuples by position,
dicts by key), ``pt.Parameter`` objects (their ``.data``) or a ``pt.Module`` (its ``parameters()``); the
gradients have the same tree, with arrays (or anything ``np.asarray`` takes) as leaves.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np

from pypto.errors import ArgumentError, ShapeError


def leaves(tree: Any, what: str = "params") -> list[Any]:
    """The leaves of ``tree`` in order (see the module docstring); each a NumPy array, a ``pt.Parameter`` or
    another object the caller converts."""
    from pypto.array.module import Module, Parameter

    out: list[Any] = []

    def walk(t: Any) -> None:
        if isinstance(t, Module):
            out.extend(t.parameters())
        elif isinstance(t, (list, tuple)):
            for v in t:
                walk(v)
        elif isinstance(t, dict):
            for k in t:
                walk(t[k])
        elif t is None:
            raise ArgumentError(f"{what}: a leaf is None", param=what, expected="arrays", got="None")
        else:
            out.append(t)

    walk(tree)
    if not out and not isinstance(tree, Parameter):
        raise ArgumentError(f"{what}: no arrays in it", param=what, expected="a list, tuple or dict of arrays, or a "
                            "pt.Module", got=repr(tree)[:80])  # fmt: skip
    return out


def _storage(leaf: Any, k: int) -> np.ndarray:
    """The array an optimizer updates in place for parameter ``k``."""
    from pypto.array.module import Parameter

    a = leaf.data if isinstance(leaf, Parameter) else leaf
    if not isinstance(a, np.ndarray):
        raise ArgumentError(
            f"pt.optim: parameter {k} is a {type(a).__name__}",
            param=f"params[{k}]",
            expected="a NumPy array (updated in place) or a pt.Parameter",
            got=type(a).__name__,
            fix="keep the parameters as NumPy arrays: np.asarray(p, dtype=np.float32)",
        )
    if a.dtype.kind not in "fc":
        raise ArgumentError(f"pt.optim: parameter {k} has dtype {a.dtype}", param=f"params[{k}]",
                            expected="a floating-point or complex array", got=str(a.dtype))  # fmt: skip
    if not (a.flags.c_contiguous and a.flags.writeable):
        raise ArgumentError(f"pt.optim: parameter {k} is not a writable C-ordered array", param=f"params[{k}]",
                            expected="a writable C-ordered array (the optimizer writes it in place)",
                            got="a view" if a.base is not None else "a read-only or strided array",
                            fix="np.ascontiguousarray(p) once, and keep that array")  # fmt: skip
    return a


def _positive(name: str, value: float, *, zero: bool = True) -> float:
    v = float(value)
    if not (v >= 0 if zero else v > 0) or v != v:
        raise ArgumentError(f"pt.optim: {name}={value!r}", param=name,
                            expected="a number >= 0" if zero else "a number > 0", got=repr(value))  # fmt: skip
    return v


def _fraction(name: str, value: float) -> float:
    v = float(value)
    if not 0.0 <= v < 1.0:
        raise ArgumentError(f"pt.optim: {name}={value!r}", param=name, expected="a number in [0, 1)", got=repr(value))
    return v


class Optimizer:
    """An optimizer over a fixed list of parameters (see the module docstring); made by :func:`sgd`,
    :func:`adam` or :func:`adamw`."""

    slots: tuple[str, ...] = ()  # the per-parameter state arrays

    def __init__(self, params: Any, lr: float):
        self.params = [_storage(p, k) for k, p in enumerate(leaves(params))]
        self.lr = _positive("lr", lr)
        self.steps = 0
        self.state: dict[str, list[np.ndarray]] = {s: [np.zeros_like(p) for p in self.params] for s in self.slots}
        self._update = self._compile()

    # -- what each optimizer defines ----------------------------------------------------------------------------
    def rule(self, p: Any, g: Any, state: dict[str, Any], scalars: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """One parameter's new value and state from its gradient (traced arrays; scalars are runtime numbers)."""
        raise NotImplementedError

    def scalars(self) -> dict[str, float]:
        """The runtime numbers of this step (the learning rate, bias corrections ...)."""
        return {"lr": self.lr}

    # -- the compiled update ------------------------------------------------------------------------------------
    def _compile(self) -> Any:
        from pypto.array.function import JitFunction

        n, slots, names = len(self.params), self.slots, list(self.scalars())

        def update(*arrays: Any) -> tuple:
            ps, gs = arrays[:n], arrays[n : 2 * n]
            st = {s: arrays[2 * n + i * n : 2 * n + (i + 1) * n] for i, s in enumerate(slots)}
            sc = dict(zip(names, arrays[2 * n + len(slots) * n :]))
            out = []  # each parameter with its state, next to one another: one loop nest updates them together
            for k in range(n):
                p, state = self.rule(ps[k], gs[k], {s: st[s][k] for s in slots}, sc)
                out += [p.astype(self.params[k].dtype)] + [state[s].astype(self.params[k].dtype) for s in slots]
            return tuple(out)

        params = [f"p{k}" for k in range(n)] + [f"g{k}" for k in range(n)]
        params += [f"{s}{k}" for s in slots for k in range(n)] + names
        update.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(p, inspect.Parameter.POSITIONAL_ONLY) for p in params]
        )
        update.__name__ = update.__qualname__ = f"{type(self).__name__.lower()}_step"
        return JitFunction(update)

    def step(self, grads: Any) -> None:
        """Update every parameter in place from ``grads`` (the parameters' tree, arrays as leaves)."""
        gs = leaves(grads, "grads")
        if len(gs) != len(self.params):
            raise ArgumentError(f"pt.optim: {len(gs)} gradient(s) for {len(self.params)} parameter(s)",
                                param="grads", expected=f"{len(self.params)} arrays, in the parameters' order",
                                got=f"{len(gs)}")  # fmt: skip
        arrays = []
        for k, (g, p) in enumerate(zip(gs, self.params)):
            g = np.asarray(g)
            if g.shape != p.shape:
                raise ShapeError(f"pt.optim: gradient {k} has shape {g.shape}, its parameter {p.shape}")
            arrays.append(g if g.dtype == p.dtype else g.astype(p.dtype))
        self.steps += 1
        state = [a for s in self.slots for a in self.state[s]]
        outs = [a for k, p in enumerate(self.params) for a in (p, *(self.state[s][k] for s in self.slots))]
        self._update(*self.params, *arrays, *state, *self.scalars().values(), out=outs)

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state (step count, moments, hyperparameters): copies, for saving."""
        return {"steps": self.steps, "lr": self.lr, "state": {s: [a.copy() for a in v] for s, v in self.state.items()}}

    def load_state_dict(self, d: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (into this optimizer's arrays)."""
        for s in self.slots:
            for dst, src in zip(self.state[s], d["state"][s]):
                np.copyto(dst, src)
        self.steps, self.lr = int(d["steps"]), float(d["lr"])

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter(self.params)


class SGD(Optimizer):
    """``torch.optim.SGD``: ``g += weight_decay * p``; with momentum ``buf = momentum * buf + (1 - dampening) *
    g`` (``buf = g`` on the first step), ``g = g + momentum * buf`` (Nesterov) or ``buf``; ``p -= lr * g``."""

    def __init__(self, params: Any, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):  # fmt: skip
        self.momentum = _positive("momentum", momentum)
        self.dampening = _positive("dampening", dampening)
        self.weight_decay = _positive("weight_decay", weight_decay)
        self.nesterov = bool(nesterov)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ArgumentError("pt.optim.sgd: nesterov=True needs momentum > 0 and dampening = 0",
                                param="nesterov", expected="momentum > 0, dampening = 0",
                                got=f"momentum={momentum}, dampening={dampening}")  # fmt: skip
        self.slots = ("momentum_buffer",) if self.momentum else ()
        super().__init__(params, lr)

    def scalars(self) -> dict[str, float]:
        # the first step takes the gradient itself as the buffer (torch's rule): a factor of 1 on a zero buffer
        if not self.momentum:
            return {"lr": self.lr}
        return {"lr": self.lr, "fresh": 1.0 if self.steps <= 1 else 1.0 - self.dampening}

    def rule(self, p, g, state, sc):  # noqa: ANN001, ANN201
        if self.weight_decay:
            g = g + self.weight_decay * p
        if not self.momentum:
            return p - sc["lr"] * g, {}
        buf = self.momentum * state["momentum_buffer"] + sc["fresh"] * g
        d = g + self.momentum * buf if self.nesterov else buf
        return p - sc["lr"] * d, {"momentum_buffer": buf}


class Adam(Optimizer):
    """``torch.optim.Adam`` (``decoupled=False``) and ``AdamW`` (``decoupled=True``): ``m = b1 m + (1 - b1) g``,
    ``v = b2 v + (1 - b2) g^2``, ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``; weight decay added
    to the gradient (Adam) or ``p *= 1 - lr * weight_decay`` first (AdamW)."""

    slots = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled: bool = False):  # fmt: skip
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise ArgumentError(f"pt.optim: betas={betas!r}", param="betas", expected="two numbers in [0, 1)",
                                got=repr(betas))  # fmt: skip
        self.b1, self.b2 = _fraction("betas[0]", betas[0]), _fraction("betas[1]", betas[1])
        self.eps = _positive("eps", eps)
        self.weight_decay = _positive("weight_decay", weight_decay)
        self.decoupled = decoupled
        super().__init__(params, lr)

    def scalars(self) -> dict[str, float]:
        t = max(self.steps, 1)
        bc1, bc2 = 1.0 - self.b1**t, 1.0 - self.b2**t
        return {"lr": self.lr, "step_size": self.lr / bc1, "bc2_sqrt": bc2**0.5}

    def rule(self, p, g, state, sc):  # noqa: ANN001, ANN201
        if self.weight_decay and self.decoupled:
            p = p * (1.0 - sc["lr"] * self.weight_decay)
        elif self.weight_decay:
            g = g + self.weight_decay * p
        m = self.b1 * state["exp_avg"] + (1.0 - self.b1) * g
        v = self.b2 * state["exp_avg_sq"] + (1.0 - self.b2) * (g * g)
        denom = np.sqrt(v) / sc["bc2_sqrt"] + self.eps
        return p - sc["step_size"] * (m / denom), {"exp_avg": m, "exp_avg_sq": v}


def sgd(params: Any, lr: float, momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
        nesterov: bool = False) -> SGD:  # fmt: skip
    """Stochastic gradient descent as ``torch.optim.SGD`` (see :class:`SGD`)."""
    return SGD(params, lr, momentum, dampening, weight_decay, nesterov)


def adam(params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
         weight_decay: float = 0.0) -> Adam:  # fmt: skip
    """Adam as ``torch.optim.Adam`` (see :class:`Adam`)."""
    return Adam(params, lr, betas, eps, weight_decay, decoupled=False)


def adamw(params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
          weight_decay: float = 1e-2) -> Adam:  # fmt: skip
    """AdamW as ``torch.optim.AdamW`` (decoupled weight decay; see :class:`Adam`)."""
    return Adam(params, lr, betas, eps, weight_decay, decoupled=True)


__all__ = ["Optimizer", "SGD", "Adam", "sgd", "adam", "adamw", "leaves"]
