"""Kernels and ``@pt.jit`` functions on dask arrays: a dask graph built from the kernel's IR.

Calling a kernel (or a jit function) with ``dask.array`` arguments returns dask arrays; nothing runs
until the user computes them, on whatever scheduler is active (threads, processes, a
``dask.distributed`` cluster). The graph is made of generated pypto kernels, each run on NumPy blocks:

- a store whose value reads its inputs at plain axes (``x[i, j]``, ``x[j, i]``, broadcasts) is one
  ``blockwise`` layer over matching chunks;
- a reduction over an axis with several chunks is split: a *partial* kernel reduces each block (the
  reduced axis kept with one element per chunk), a *combine* kernel generated from the reducer (sum,
  prod, max, min; a mean is a sum and a count) merges partials in a dask tree reduction, and the
  store's kernel reads the combined value;
- a softmax-style ``sum(exp(x - max(x)))`` over a chunked axis keeps ``(max, sum)`` pairs per chunk
  and merges them with the online rescaling ``s = s1·exp(m1 - m) + s2·exp(m2 - m)``, so one pass
  over the data gives the right sum however long the row;
- a contraction (``matmul``, ``einsum``) is a sum of products: blockwise partial products, then a
  sum over the contracted chunks;
- a reduction nested in another one over a chunked axis (``sum((x - mean(x))**2)``) is computed first
  and read back by the outer one.

An axis read at a shifted, reversed or strided index (``x[i + 1]``), or whose index is used as a
value, cannot be cut into independent blocks: its inputs are rechunked to one chunk along it, with one
:class:`pypto.RechunkWarning` per kernel saying which. Generated kernels are compiled on the worker that
runs them, through the ordinary disk cache, with the executor resolved there (``PYPTO_EXECUTOR`` or
the best available backend) unless the kernel names one. :func:`explain` prints the plan.
"""

from __future__ import annotations

from pypto.dask.api import call_jit, call_kernel, explain
from pypto.dask.graph import KERNEL_CACHE_SIZE
from pypto.errors import RechunkWarning
from pypto.runtime.foreign import is_dask_array

__all__ = ["is_dask_array", "call_kernel", "call_jit", "explain", "RechunkWarning", "KERNEL_CACHE_SIZE"]
