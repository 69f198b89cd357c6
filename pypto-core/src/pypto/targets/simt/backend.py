"""What the GPU-style backends share: the plugin hooks and the device they open once per process.

A backend (CUDA, OpenCL) subclasses :class:`SimtBackend` and says how to open its device, how to
render, what its toolchain is, how to build the device source and how to load the result; the
launch plan's trip through the artifact (as data, next to the device code), the cache key's
code-generator digest and the lazily opened device (with the reason it is missing, remembered)
are here. The backend's plugin module returns the instance from its ``pypto_backends`` hook.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from pypto.backend_api import (
    Artifact,
    Availability,
    Backend,
    BackendSpec,
    Capabilities,
    Program,
    Source,
)

if TYPE_CHECKING:  # the renderer is imported when code is generated: plugin loading stays cheap
    from pypto.targets.simt.plan import LaunchPlan
    from pypto.targets.simt.render import SimtRenderer


class DeviceUnavailable(RuntimeError):
    """A backend's device cannot be used here; the message says why and how to fix it."""


class SimtBackend(Backend):
    """A backend rendering with the SIMT renderer (subclasses fill in the device and the toolchain)."""

    name = ""  # type: ignore[assignment]
    version = ""
    priority = 0
    package = ""
    description = ""
    renderer_module = ""  # its source is part of the cache key
    suffix = ".bin"  # of compiled artifacts
    target = "simt"  # the target whose passes run before rendering (a variant adds passes: simt-opencl)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._device: Any = None
        self._error: str | None = None

    # -- what a backend provides --------------------------------------------------------------------------
    def open_device(self) -> Any:
        """Open the device (called once); raise :class:`DeviceUnavailable` saying why it cannot be."""
        raise NotImplementedError

    def renderer(self, program: Program) -> SimtRenderer:
        """The renderer for ``program`` (it must work without the device)."""
        raise NotImplementedError

    def toolchain(self, program: Program) -> str:
        """The compiler, its version and the flags: what the cache key needs besides the generated code."""
        raise NotImplementedError

    def build_device_code(self, program: Program, code: str, plan: LaunchPlan) -> tuple[bytes, dict[str, Any]]:
        """Compile the device ``code``: the artifact's bytes and extra metadata (raise CompileError);
        a ``suffix`` entry in the metadata overrides :attr:`suffix`."""
        raise NotImplementedError

    def load(self, program: Program, artifact: Artifact) -> Any:
        """A launcher for a built artifact (its ``metadata["plan"]`` is the launch plan)."""
        raise NotImplementedError

    def capabilities(self) -> Capabilities:
        return Capabilities()

    def info(self) -> dict[str, Any]:
        return {}

    def availability(self) -> Availability:
        try:
            self.device()
        except DeviceUnavailable as e:
            return Availability(False, str(e))
        return Availability(True)

    # -- the device, opened once ------------------------------------------------------------------------------
    def device(self) -> Any:
        """The process's device (opened on first use; the reason it is missing is kept)."""
        if self._device is not None:
            return self._device
        with self._lock:
            if self._device is None:
                if self._error is not None:
                    raise DeviceUnavailable(self._error)
                try:
                    self._device = self.open_device()
                except DeviceUnavailable as e:
                    self._error = str(e)
                    raise
        return self._device

    @property
    def spec(self) -> BackendSpec:
        return BackendSpec.of(self, self.capabilities(), self.target)

    # -- the backend's steps -----------------------------------------------------------------------------------
    def render(self, program: Program) -> Source:
        """The device code, and the launch plan made with it (``get_code`` shows the plan as a comment)."""
        from pypto.targets.simt.render import PLAN_MARKER

        code, plan = self.renderer(program).render_device(program.loops)
        return Source(code, {"plan": plan}, code + "\n" + PLAN_MARKER + plan.to_json() + " */\n")

    def compile_key(self, program: Program) -> str:
        from pypto.targets.simt.render import codegen_digest

        return f"{self.toolchain(program)} codegen={codegen_digest(self.renderer_module)}"

    def build(self, program: Program, source: Source) -> Artifact:
        plan = source.extras["plan"]
        data, meta = self.build_device_code(program, source.text, plan)
        suffix = meta.pop("suffix", self.suffix)
        meta = {"kernel": program.name, "plan": json.loads(plan.to_json()), **meta}
        return Artifact(self.name, data, suffix, meta)
