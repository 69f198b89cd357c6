"""Differential fuzzing: random well-typed kernels, run on a backend and evaluated by NumPy."""

from __future__ import annotations

from .campaign import run_campaign
from .strategies import FAMILIES, programs

__all__ = ["FAMILIES", "programs", "run_campaign"]
