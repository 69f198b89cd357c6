"""The compiler driver: kernel IR and a backend in, a compiled kernel out, through every stage.

    compiled = pypto.driver.compile(ir, "openmp")
    compiled.launcher(x, y, out, n)   # validated arguments in loop-IR order (compiled.program.contract)

The stages, in order (:func:`stages`, then :func:`program`, then :func:`launcher`):

1. the core's tensor and loop passes (:data:`pypto.passes.PASSES`, :data:`pypto.passes.LOOP_PASSES`), the
   schedule made for the machine of the backend's target, each stage verified (the loop stages before code is
   generated from them: a kernel the disk cache holds was built from the same, verified IR) and printed under
   ``PYPTO_DUMP_IR``;
2. the passes of the backend's target (:class:`pypto.targets.Target`, from the ``pypto_targets`` hook);
3. codegen, compile (through the disk cache) and load, through the ``pypto_compile`` hook, which plugins
   may wrap (:mod:`pypto.compiler` implements it).

Every front end hands IR to these functions and nothing else: ``@pt.kernel`` traces a body
(:mod:`pypto.lang.kernel`), ``@pt.jit`` lowers its array graph per signature, ``pt.grad`` and
``kernel.vjp`` build the gradient's graph and lower it, ``pypto.dask`` lowers each layer of a plan. A
:class:`~pypto.runtime.kernel.Kernel` keeps their results (one compilation per target, one launcher per
backend) and binds calls; :func:`compile` is the same road in one call, without that bookkeeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from pypto import plugins
from pypto.backend_api import KernelOptions, Launcher, Program
from pypto.errors import DTypeError
from pypto.ir.contract import CallContract, alias_safe_pairs
from pypto.ir.kernel import GatherInBounds, KernelIR
from pypto.ir.nodes import postorder
from pypto.ir.printer import format_loops
from pypto.ir.schedule import Schedule
from pypto.passes import REFERENCE_STAGE, Compilation, run_pipeline
from pypto.targets import Target


def stages(ir: KernelIR, target: Target | None, *, noalias: bool = True, hints: Schedule | None = None,
           deterministic: bool = True) -> Compilation:  # fmt: skip
    """Every stage of ``ir`` for ``target``: the core's passes now (scheduled for the target's machine), the
    target's passes when a backend first asks for them (:meth:`Compilation.for_target`). ``deterministic=False``
    lets scatters use atomic updates."""
    machine = target.machine() if target is not None and target.machine is not None else None
    return run_pipeline(ir.replace(machine=machine, hints=hints, deterministic=deterministic), noalias=noalias)


def contract(compilation: Compilation, *, boundscheck: bool = True) -> CallContract:
    """The rules every call satisfies (dtypes, dims, bounds, aliasing), from the typed and shaped IR; with
    ``boundscheck``, the check of gathered indices (a NumPy function of the arguments) too."""
    shaped = compilation.stages["infer_shapes"]
    check = None
    if boundscheck and any(isinstance(c, GatherInBounds) for c in shaped.checks):
        from pypto.backends.numpy_source import compile_index_check

        check = compile_index_check(shaped)
    final = compilation.final
    return CallContract.of(shaped, alias_safe_pairs(final), check, frozenset(b for b, _ in final.shares))


def program(compilation: Compilation, target: Target | None, options: KernelOptions, *, noalias: bool = True,
            rules: CallContract | None = None) -> Program:  # fmt: skip
    """What a backend of ``target`` receives: the loop IR after the target's passes, with the tensor IR, the
    options and the call contract (``rules``, derived from ``compilation`` when not given)."""
    loops = compilation.for_target(target)
    return Program(
        name=loops.name,
        loops=loops,
        tensor_ir=compilation.final,
        reference_ir=compilation.stages[REFERENCE_STAGE],
        options=options,
        noalias=noalias,
        ir_text=format_loops(loops) + f"\n# options: {options!r}",
        target=target.name if target is not None else None,
        contract=rules if rules is not None else contract(compilation),
        verify=compilation.verify,
    )


def launcher(prog: Program, backend: str) -> Launcher:
    """Codegen, compile (through the disk cache) and load ``prog`` for the backend called ``backend``,
    through the ``pypto_compile`` hook and its wrappers."""
    reg = plugins.get_registry()
    return reg.compile(reg.backend(backend), prog)


def check_dtypes(ir: KernelIR, backend: str) -> None:
    """A :class:`DTypeError` naming the backend and its dtypes when ``ir`` uses a dtype the backend does not
    declare (:attr:`Capabilities.dtypes`); checked on the traced IR, before the backend's target sees it (its
    parameters and explicit casts hold every dtype a kernel can compute in)."""
    spec = plugins.get_registry().backend(backend).spec
    have = spec.capabilities.dtypes
    used = {p.dtype.name for p in (*ir.params, *ir.temps)}
    used |= {n.dtype.name for s in (*ir.stores, *ir.scatters) for n in postorder(s) if n.dtype is not None}
    missing = sorted(used - have)
    if missing:
        raise DTypeError(
            f"kernel {ir.name}: the {backend} backend has no {', '.join(missing)}",
            param="dtype",
            expected=f"the dtypes {backend} declares: {', '.join(sorted(have))}",
            got=", ".join(missing),
            fix="run it on a backend that has the dtype (pt.get_runtime_info()['backends'] lists each one's dtypes), "
            "or convert the arrays with .astype(np.float32)",
        )


@dataclass(frozen=True)
class Compiled:
    """What :func:`compile` returns: every stage's IR, the program the backend received, and its launcher."""

    backend: str
    compilation: Compilation
    program: Program
    launcher: Launcher


def compile(ir: KernelIR, backend: str | None = None, *, options: KernelOptions | None = None,  # noqa: A001
            noalias: bool = True, hints: Schedule | None = None) -> Compiled:  # fmt: skip
    """``ir`` (a traced kernel, :attr:`Kernel.traced`, or IR a front end built) compiled for ``backend``
    (a name; default ``$PYPTO_EXECUTOR``, else the best available) through every stage (module docstring)."""
    entry = plugins.get_registry().resolve(backend)
    target = plugins.get_target(entry.spec.target)
    check_dtypes(ir, entry.spec.name)
    deterministic = options.deterministic if options is not None else True
    comp = stages(ir, target, noalias=noalias, hints=hints, deterministic=deterministic)
    prog = program(comp, target, options if options is not None else KernelOptions(), noalias=noalias)
    return Compiled(entry.spec.name, comp, prog, launcher(prog, entry.spec.name))


__all__ = ["Compiled", "check_dtypes", "compile", "contract", "launcher", "program", "stages"]
