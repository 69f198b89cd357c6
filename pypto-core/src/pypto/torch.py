"""PyTorch integration: a pypto function of arrays as a ``torch.library`` operator with its gradient.

    import torch
    import pypto as pt

    @pt.jit
    def scaled_softmax(x, w):
        return pt.softmax(x * w, dim=-1)

    op = pt.torch.op(scaled_softmax)          # torch.ops.pypto.scaled_softmax_0
    y = op(tx, tw)                           # CPU tensors in, a tensor out, differentiable
    y.sum().backward()                       # the backward pass is pypto's gradient kernel

    net = pt.torch.module(model)             # a pt.Module as a torch.nn.Module (parameters shared)
    torch.optim.Adam(net.parameters())       # torch's optimizers, DDP, state_dict() work on it

The operator is registered with ``torch.library.custom_op``: its forward is the compiled jit function,
its autograd formula is the compiled pullback of :func:`pypto.vjp` (one kernel), and its fake
implementation gives the result shapes by tracing, so it works inside ``torch.nn.Module``\\ s, under
``torch.autograd.gradcheck`` and in graphs ``torch.compile`` captures (once the operator has been called
eagerly with as many tensors: that call registers it). Tensors reach the kernels
without copies: ``Tensor.numpy()`` views of CPU tensors (results wrapped with ``torch.from_numpy``),
CUDA tensors by pointer to the CUDA backend, on torch's current stream, with CUDA tensors as results.
Install with ``pip install pypto-core[torch]``.
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Any

import numpy as np

from pypto import dtypes
from pypto.errors import ArgumentError

_counter = itertools.count()
_lock = threading.Lock()


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the environment
        raise ArgumentError(
            "pt.torch needs PyTorch",
            param="torch",
            expected="PyTorch 2.4 or newer installed",
            got="no module named 'torch'",
            fix="pip install pypto-core[torch]",
        ) from None
    return torch


class TorchOp:
    """A pypto function of arrays registered as a PyTorch operator (see the module doc)."""

    def __init__(self, fn: Any, name: str | None = None):
        from pypto.array.autodiff import _function_of, _named_like, _Pullbacks
        from pypto.array.function import JitFunction

        self.torch = _torch()
        self.fn, options = _function_of(fn, "pt.torch.op")
        base = re.sub(r"\W", "_", name or getattr(self.fn, "__name__", "op")).strip("_") or "op"
        self.name = f"{base}_{next(_counter)}"
        clean = {k: v for k, v in options.items() if v is not None}
        self.forward = JitFunction(_named_like(self.fn, self.fn, base), **clean)
        self.pullbacks = _Pullbacks(self.fn, options)
        self._ops: dict[tuple[int, int, bool], Any] = {}
        self._by_arity: dict[int, Any] = {}  # the operator last called with this many tensors

    # -- tensors <-> arrays -----------------------------------------------------------------------------------
    def _array(self, t: Any, k: int) -> np.ndarray:
        torch = self.torch
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(
                f"pt.torch.op {self.name}: argument {k} is a {type(t).__name__}",
                param=f"#{k}",
                expected="a torch.Tensor",
                got=type(t).__name__,
                fix="pass tensors (torch.as_tensor(...)); Python numbers belong inside the function",
            )
        if t.device.type == "cuda":  # passed by pointer to a GPU backend (results are CUDA tensors too)
            return t.detach().contiguous()
        if t.device.type != "cpu":
            raise ArgumentError(
                f"pt.torch.op {self.name}: argument {k} is on {t.device}",
                param=f"#{k}",
                expected="a CPU or CUDA tensor",
                got=str(t.device),
                fix="move it with .cpu() or .cuda()",
            )
        t = t.detach().contiguous()
        if t.dtype == self.torch.bfloat16:  # NumPy has no bfloat16 of its own: the same memory as ml_dtypes'
            return t.view(self.torch.int16).numpy().view(dtypes.bfloat16.numpy)
        return t.numpy()

    def _tensor(self, a: Any) -> Any:
        if isinstance(a, self.torch.Tensor):
            return a
        a = np.ascontiguousarray(a)
        if a.dtype == dtypes.bfloat16.numpy:
            return self.torch.from_numpy(a.view(np.int16)).view(self.torch.bfloat16)
        return self.torch.from_numpy(a)

    # -- the operator ---------------------------------------------------------------------------------------
    def _signature(self, arrays: list[np.ndarray], keep: bool) -> tuple[int, bool, int]:
        """The number of results, whether the function returns one array, and (``keep``: a call whose backward
        will run) the number of residuals the forward keeps for it."""
        c = self.forward.compiled(*arrays)
        n_out = len(c.plan.outputs)
        if not keep:
            return n_out, c.single, 0
        kept = self.pullbacks.residual_jits(len(arrays), n_out).compiled(*arrays)
        return n_out, c.single, len(kept.plan.outputs) - n_out

    def _make(self, n_in: int, n_out: int, single: bool, n_res: int) -> Any:
        """The operator for ``n_in`` tensors; with ``n_res`` residuals it returns them after the results (the
        backward reads them instead of computing the forward again)."""
        torch = self.torch
        args = ", ".join(f"Tensor x{k}" for k in range(n_in))
        outs = "Tensor" if single and not n_res else "(" + ", ".join(["Tensor"] * (n_out + n_res)) + ")"
        qualified = f"pypto::{self.name}_{n_in}_{n_out}" + (f"_keeping_{n_res}" if n_res else "")
        me = self

        def impl(*ts: Any) -> Any:
            arrays = [me._array(t, k) for k, t in enumerate(ts)]
            if n_res:
                return tuple(me._tensor(r) for r in me.pullbacks.residual_jits(n_in, n_out)(*arrays))
            res = me.forward(*arrays)
            return me._tensor(res) if single else tuple(me._tensor(r) for r in res)

        op = torch.library.custom_op(qualified, impl, mutates_args=(), schema=f"({args}) -> {outs}")

        @op.register_fake
        def fake(*ts: Any) -> Any:
            probes = [np.lib.stride_tricks.as_strided(np.zeros(1, _numpy_dtype(t)), tuple(t.shape), (0,) * t.dim())
                      for t in ts]  # fmt: skip
            c = me.forward.compiled(*probes)
            shapes = [c.shape_of(pos, None) for pos in c.plan.outputs]
            dts = [_torch_dtype(torch, c.plan.buffers[pos].dtype.numpy) for pos in c.plan.outputs]
            if n_res:
                kept = me.pullbacks.residual_jits(n_in, n_out).compiled(*probes)
                shapes = [kept.shape_of(pos, None) for pos in kept.plan.outputs]
                dts = [_torch_dtype(torch, kept.plan.buffers[pos].dtype.numpy) for pos in kept.plan.outputs]
            made = [ts[0].new_empty(s, dtype=d) for s, d in zip(shapes, dts)]
            return made[0] if single and not n_res else tuple(made)

        def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
            # a result no gradient reached comes as None, not as zeros torch fills (the residuals never get one:
            # zero-filling them took ~0.45 ms of the training block's backward)
            ctx.set_materialize_grads(False)
            if n_res:  # the results and the residuals too: the backward reads them
                ctx.mark_non_differentiable(*output[n_out:])
                ctx.save_for_backward(*inputs, *output)
            else:
                ctx.save_for_backward(*inputs)

        def backward(ctx: Any, *grads: Any) -> tuple:
            saved = ctx.saved_tensors
            inputs, kept = saved[:n_in], saved[n_in:]
            arrays = [me._array(t, k) for k, t in enumerate(inputs)]
            outs_meta = me.forward.compiled(*arrays)
            cts = []
            for pos, g in zip(outs_meta.plan.outputs, grads[:n_out]):
                if g is None:
                    b = outs_meta.plan.buffers[pos]
                    zero = np.zeros(outs_meta.shape_of(pos, None), b.dtype.numpy)
                    cts.append(torch.from_numpy(zero).to(inputs[0].device) if inputs[0].is_cuda else zero)
                else:  # torch's complex gradients are the conjugates of pypto's (JAX's convention)
                    cts.append(_conj(me._array(g, 0)))
            if n_res:
                values = [me._array(t, k) for k, t in enumerate(kept)]
                res = me.pullbacks.residual_jits(n_in, n_out, n_res)(*arrays, *values, *cts)
            else:
                res = me.pullbacks.pullback_jit(n_in, n_out)(*arrays, *cts)
            res = list(res) if isinstance(res, tuple) else [res]
            out: list[Any] = []
            for t in inputs:
                differentiable = t.dtype.is_floating_point or t.dtype.is_complex
                out.append(me._tensor(_conj(res.pop(0))) if differentiable else None)
            return tuple(out)

        op.register_autograd(backward, setup_context=setup_context)
        return op

    def __call__(self, *tensors: Any) -> Any:
        if self.torch.compiler.is_compiling():  # inside torch.compile: the operator, nothing of ours to trace
            op = self._by_arity.get(len(tensors))
            if op is not None:
                return op(*tensors)
        arrays = [self._array(t, k) for k, t in enumerate(tensors)]
        # a call whose backward will run keeps the forward's costly values for it (KEEP_RESIDUALS)
        keep = KEEP_RESIDUALS and self.torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        n_out, single, n_res = self._signature(arrays, keep)
        key = (len(tensors), n_out, single, n_res)
        with _lock:
            op = self._ops.get(key)
            if op is None:
                op = self._ops[key] = self._make(*key)
            if not n_res:
                self._by_arity[len(tensors)] = op
        if not n_res:
            return op(*tensors)
        out = op(*tensors)
        return out[0] if single else tuple(out[:n_out])

    def __repr__(self) -> str:
        return f"<pypto torch operator pypto::{self.name}>"


KEEP_RESIDUALS = True
"""Whether a call of a ``pt.torch.op`` operator that needs a gradient keeps the forward's costly values (its
contractions, reductions, scans, sorts and gathers the backward reads) for the backward, which then does not
compute the forward again: more memory between the two calls (torch's autograd keeps its saved tensors alike),
less time in the backward. False: the backward recomputes the forward (``pt.vjp``'s pullback)."""


def _conj(a: Any) -> Any:
    """The conjugate of a complex array (what converts between torch's and pypto's complex gradients)."""
    return np.conj(a) if np.iscomplexobj(a) else a


def _numpy_dtype(t: Any) -> np.dtype:
    return dtypes.as_dtype(str(t.dtype).removeprefix("torch.")).numpy


def _torch_dtype(torch: Any, dt: Any) -> Any:
    return getattr(torch, np.dtype(dt).name)


def op(fn: Any, *, name: str | None = None) -> TorchOp:
    """``fn`` (a ``@pt.jit`` function, a custom op or a function of arrays) as a PyTorch operator with autograd."""
    return TorchOp(fn, name)


# -- pt.Module <-> torch.nn.Module ------------------------------------------------------------------------------


def _tensor_sharing(torch: Any, a: np.ndarray) -> Any:
    """A tensor on the memory of NumPy array ``a`` (bfloat16 through an int16 view)."""
    if a.dtype == dtypes.bfloat16.numpy:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _module_class(torch: Any) -> type:
    """The ``torch.nn.Module`` subclass :func:`module` makes (defined once torch is imported)."""
    global _MODULE_CLASS
    if _MODULE_CLASS is not None:
        return _MODULE_CLASS
    from pypto.array.module import constants, parameter_paths

    class PyptoModule(torch.nn.Module):
        """A ``pt.Module`` as a ``torch.nn.Module``: its parameters are ``torch.nn.Parameter``\\ s on the pypto
        parameters' memory, its forward one pypto operator (forward and backward compiled by pypto)."""

        def __init__(self, model: Any):
            super().__init__()
            object.__setattr__(self, "pypto_module", model)  # not a submodule: no parameters of torch's there
            self._names: list[str] = []
            self._ops: dict[tuple, TorchOp] = {}
            for name, prm in model.named_parameters():
                a = prm.data
                if a.dtype.kind not in "fc" or not (a.flags.c_contiguous and a.flags.writeable):
                    raise ArgumentError(
                        f"pt.torch.module: parameter '{name}' is a {a.dtype} array"
                        + ("" if a.flags.c_contiguous and a.flags.writeable else " that is not writable and C-ordered"),
                        param=name,
                        expected="writable C-ordered floating-point parameters (torch trains them in place)",
                        got=f"{a.dtype}, shape {a.shape}",
                        fix="pt.Parameter(np.ascontiguousarray(values, dtype=np.float32), name)",
                    )
                *path, leaf = name.split(".")
                holder: Any = self
                for part in path:  # submodules named as in pt.Module.named_parameters(): state_dict keys match
                    if part not in holder._modules:
                        holder.add_module(part, torch.nn.Module())
                    holder = holder._modules[part]
                holder.register_parameter(leaf, torch.nn.Parameter(_tensor_sharing(torch, a)))
                self._names.append(name)

        def forward(self, *inputs: Any) -> Any:
            m = self.pypto_module
            key = (len(inputs), constants(m))  # (the module's other attributes are constants of the operator)
            op = self._ops.get(key)
            if op is None:
                op = self._ops[key] = TorchOp(m._compile(parameter_paths(m), len(inputs)), type(m).__name__)
            params = [self.get_parameter(name) for name in self._names]
            return op(*params, *inputs)

        def extra_repr(self) -> str:
            return f"pypto module {type(self.pypto_module).__name__}, {len(self._names)} parameter(s)"

    _MODULE_CLASS = PyptoModule
    return PyptoModule


_MODULE_CLASS: type | None = None


def module(model: Any) -> Any:
    """``model`` (a ``@pt.module`` instance) as a ``torch.nn.Module`` for torch's tools: its parameters are
    ``torch.nn.Parameter``\\ s sharing memory with the pypto parameters (an optimizer step on one is seen by the
    other; ``state_dict()`` keys are the names of ``model.named_parameters()``), and calling it runs ``model``'s
    ``forward`` as one pypto operator whose backward is pypto's gradient kernel, so ``torch.optim``,
    ``torch.nn.parallel.DistributedDataParallel`` and ``loss.backward()`` work on it unchanged. Assigning a new
    array to a pypto parameter's ``.data`` breaks the sharing (copy into it instead)."""
    from pypto.array.module import Module

    torch = _torch()
    if not isinstance(model, Module):
        raise ArgumentError(
            f"pt.torch.module takes a pt.Module, got {type(model).__name__}",
            param="model",
            expected="an instance of a @pt.module class",
            got=type(model).__name__,
            fix="decorate the model's class with @pt.module; a function of arrays: pt.torch.op(f)",
        )
    return _module_class(torch)(model)


def load_state_dict(model: Any, state: Any, *, strict: bool = True) -> None:
    """Copy weights into ``model``'s (a ``pt.Module``) parameters, by name: ``state`` is a ``torch.nn.Module``, its
    ``state_dict()``, or a mapping of names to arrays. With ``strict``, a name missing on either side is an error
    (checked before anything is copied); shapes must match, dtypes convert as NumPy's same-kind casting allows."""
    params = dict(model.named_parameters())
    if hasattr(state, "state_dict") and callable(state.state_dict):
        state = state.state_dict()
    values = {k: (v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)) for k, v in state.items()}
    missing, unexpected = sorted(params.keys() - values.keys()), sorted(values.keys() - params.keys())
    if strict and (missing or unexpected):
        raise ArgumentError(
            "pt.torch.load_state_dict: the names do not match"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unexpected: {', '.join(unexpected)}" if unexpected else ""),
            param="state",
            expected=f"the parameters {', '.join(params)}",
            got=", ".join(values),
            fix="rename the keys to the pypto module's named_parameters(), or pass strict=False",
        )
    for name in params.keys() & values.keys():
        if values[name].shape != params[name].data.shape:
            raise ArgumentError(
                f"pt.torch.load_state_dict: '{name}' has shape {values[name].shape}, the parameter {params[name].shape}",
                param=name, expected=str(params[name].shape), got=str(values[name].shape),
            )  # fmt: skip
    for name in params.keys() & values.keys():
        np.copyto(params[name].data, values[name], casting="same_kind")
