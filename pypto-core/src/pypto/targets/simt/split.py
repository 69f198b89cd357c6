"""The ``split_kernels`` pass of the ``simt`` target: the loop IR as a sequence of device kernels.

The top-level statements are grouped into steps (see :mod:`pypto.targets.simt.render` for how each
kind is rendered): a top-level parallel loop without reductions whose bounds the host knows is a
step of its own (a ``map`` or ``groups`` kernel); every other run of statements is a ``single``
kernel. A branch on values of the dims is taken on the host: each branch's steps carry its
condition. Temporaries become device buffers; scalars a step computes and a later step reads get a
one-element device buffer (a *slot*). The result is recorded as :class:`~pypto.ir.device.DeviceSplit`.
"""

from __future__ import annotations

from dataclasses import replace

from pypto.dtypes import DType
from pypto.ir.device import DeviceSplit, DeviceStep
from pypto.ir.loops import Alloc, Block, Comment, Declare, If, Let, Loop, LoopKernel, Stmt
from pypto.ir.nodes import Expr
from pypto.targets.simt import analysis as ana
from pypto.targets.simt.plan import HostExpressionError, host_names, py_expr

PARALLEL = ("parallel", "parallel_vector")


class _Splitter:
    def __init__(self, k: LoopKernel):
        self.temps: dict[str, tuple[DType, tuple[Expr, ...]]] = {}
        self.pure: dict[str, Let] = {}
        self.inputs = [a.name for a in k.args if a.kind == "dim"] + [a.name for a in k.args if a.kind == "scalar"]
        self.host: dict[str, str] = host_names(self.inputs)

    def flatten(self, s: Stmt) -> list[Stmt]:
        """The top-level statements, with temporaries registered as device buffers."""
        if isinstance(s, Block):
            return [x for b in s.body for x in self.flatten(b)]
        if isinstance(s, Alloc):
            self.temps[s.buffer] = (s.dtype, s.shape)
            return self.flatten(s.body)
        return [s]

    def find_pure(self, flat: list[Stmt], known: set[str]) -> None:
        """Lets computed from dims and scalars alone (also in branches the host decides)."""
        for s in flat:
            if isinstance(s, Let) and ana.only(s.value, known):
                self.pure[s.name] = s
                known.add(s.name)
            elif isinstance(s, If) and ana.only(s.cond, known):
                self.find_pure(self.flatten(s.then), known)
                if s.orelse is not None:
                    self.find_pure(self.flatten(s.orelse), known)

    def steps(self, flat: list[Stmt], known: set[str], when: tuple[tuple[Expr, bool], ...] = ()) -> list[DeviceStep]:
        flat = ana.sink_declares([s for s in flat if not (isinstance(s, Let) and s.name in self.pure)], known)
        steps: list[DeviceStep] = []
        run: list[Stmt] = []
        comments: list[str] = []
        for s in flat:
            if isinstance(s, Comment) and not run:
                comments.append(s.text)
                continue
            if isinstance(s, If) and ana.only(s.cond, set(self.host)) and not ana.declares(s, set(self.pure)):
                if run:
                    steps.append(DeviceStep(tuple(run), None, tuple(comments), when))
                    run, comments = [], []
                steps += self.steps(self.flatten(s.then), known, (*when, (s.cond, True)))
                if s.orelse is not None:
                    steps += self.steps(self.flatten(s.orelse), known, (*when, (s.cond, False)))
                continue
            if (
                isinstance(s, Loop)
                and s.kind in PARALLEL
                and not s.reductions
                and ana.only_all((s.start, s.stop), known)
            ):
                if run:
                    steps.append(DeviceStep(tuple(run), None, (), when))
                    run = []
                steps.append(DeviceStep((s,), s, tuple(comments), when))
                comments = []
                continue
            run.append(s)
        if run:
            steps.append(DeviceStep(tuple(run), None, tuple(comments), when))
        return steps

    def split(self, k: LoopKernel) -> DeviceSplit:
        flat = self.flatten(k.body)
        known = set(self.inputs)
        self.find_pure(flat, known)
        host_lets = []
        for name, let in self.pure.items():
            try:
                py_expr(let.value, self.host)
            except HostExpressionError:
                continue
            self.host[name] = host_names([name])[name]
            host_lets.append(name)
        steps = self.steps(flat, known)
        # scalars defined by one kernel and used by another get one-element device buffers
        owner: dict[str, int] = {}
        declared: dict[str, DType] = {}
        for i, step in enumerate(steps):
            for s in step.stmts:
                if isinstance(s, (Declare, Let)) and step.loop is None:
                    owner[s.name] = i
                    declared[s.name] = s.dtype if isinstance(s, Declare) else s.value.dtype  # type: ignore[assignment]
        slots: dict[str, DType] = {}
        for i, step in enumerate(steps):
            for n in sorted(ana.names(step.stmts)):  # sorted: the same code in every process (cache keys)
                if n in owner and owner[n] != i:
                    slots[n] = declared[n]
        return DeviceSplit(
            tuple(steps),
            tuple((n, dt, shape) for n, (dt, shape) in self.temps.items()),
            tuple(self.pure.values()),
            tuple(host_lets),
            tuple(slots.items()),
            tuple(declared.items()),
        )


def split_kernels(k: LoopKernel) -> LoopKernel:
    """Record how ``k`` splits into device kernels (see the module docstring)."""
    return replace(k, device=_Splitter(k).split(k))
