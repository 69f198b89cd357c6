"""Loading backend plugins (entry-point group ``pypto``) and choosing an executor.

Plugins load lazily, the first time pypto needs a backend: ``import pypto`` reads no entry points.
A plugin that fails to import, or that was built for another major plugin-API version, is skipped
with a :class:`~pypto.errors.PluginWarning` naming it (``PYPTO_STRICT_PLUGINS=1`` raises
:class:`~pypto.errors.PluginError` instead). ``PYPTO_DISABLE_PLUGINS`` lists entry-point or
distribution names not to load (``all`` disables every third-party plugin).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import pluggy

from . import hookspecs
from .backend_api import PLUGIN_API_VERSION, Availability, BackendSpec
from .errors import BackendNotFound, BackendUnavailable, PluginError, PluginWarning

ENTRY_POINT_GROUP = "pypto"

KNOWN_PACKAGES = {
    "openmp": "pypto-backend-openmp",
    "tbb": "pypto-backend-tbb",
    "cuda": "pypto-backend-cuda",
    "opencl": "pypto-backend-opencl",
}


def _major(version: str) -> str:
    return str(version).split(".", 1)[0]


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


@dataclass
class BackendEntry:
    """A declared backend, the plugin that declared it, and its (lazily probed) availability."""

    spec: BackendSpec
    plugin: str
    distribution: str | None = None
    _availability: Availability | None = field(default=None, repr=False)

    @property
    def availability(self) -> Availability:
        if self._availability is None:
            try:
                self._availability = self.spec.probe()
            except Exception as e:  # a probe must never take pypto down
                self._availability = Availability(False, f"availability probe failed: {type(e).__name__}: {e}")
        return self._availability


@dataclass
class SkippedPlugin:
    name: str
    distribution: str | None
    reason: str


class Registry:
    """The plugin manager, the declared backends and the plugins that were skipped."""

    def __init__(self, rescan: bool = False) -> None:
        self._rescan = rescan
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.backends: dict[str, BackendEntry] = {}
        self.skipped: list[SkippedPlugin] = []
        self.plugin_dists: dict[str, str | None] = {}
        self._load()

    # -- loading ---------------------------------------------------------------------------------
    def _problem(self, name: str, dist: str | None, reason: str) -> None:
        self.skipped.append(SkippedPlugin(name, dist, reason))
        origin = f" (from distribution '{dist}')" if dist else ""
        text = f"pypto plugin '{name}'{origin} was skipped: {reason}"
        if _env_flag("PYPTO_STRICT_PLUGINS"):
            raise PluginError(text + "\n  (PYPTO_STRICT_PLUGINS=1 turns this warning into an error)")
        warnings.warn(text, PluginWarning, stacklevel=4)

    def register(self, plugin: object, name: str, dist: str | None = None) -> bool:
        """Register a plugin object after checking its declared plugin API version."""
        api = getattr(plugin, "PYPTO_PLUGIN_API", None)
        if api is not None and _major(api) != _major(PLUGIN_API_VERSION):
            self._problem(
                name,
                dist,
                f"it was built for plugin API {api}, this pypto-core implements "
                f"{PLUGIN_API_VERSION}; install a matching version",
            )
            return False
        try:
            self.pm.register(plugin, name=name)
        except Exception as e:
            self._problem(name, dist, f"registration failed: {type(e).__name__}: {e}")
            return False
        self.plugin_dists[name] = dist
        return True

    def _load(self) -> None:
        from .backends import reference
        from .cache import cache_plugins

        self.register(reference, "reference", "pypto-core")
        for i, p in enumerate(cache_plugins()):
            self.pm.register(p, name=f"pypto-cache-{i}")
        disabled = {
            s.strip() for s in os.environ.get("PYPTO_DISABLE_PLUGINS", "").replace(";", ",").split(",") if s.strip()
        }
        for ep in _entry_points(rescan=self._rescan):
            dist = ep.distribution
            if {"all", "*", "1"} & disabled or ep.name in disabled or (dist and dist in disabled):
                self.skipped.append(SkippedPlugin(ep.name, dist, "disabled by PYPTO_DISABLE_PLUGINS"))
                continue
            if self.pm.has_plugin(ep.name):
                self._problem(ep.name, dist, "another plugin of that name is already registered")
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                self._problem(ep.name, dist, f"importing {ep.value} failed: {type(e).__name__}: {e}")
                continue
            self.register(plugin, ep.name, dist)
        self._declare()

    def add(self, plugin: object, name: str) -> list[str]:
        """Register a plugin object now (not through an entry point) and declare its backends."""
        if not self.register(plugin, name):
            return []
        before = set(self.backends)
        self._declare(only=name)
        return sorted(set(self.backends) - before)

    def _declare(self, only: str | None = None) -> None:
        for impl in self.pm.hook.pypto_declare_backends.get_hookimpls():
            name = impl.plugin_name
            if only is not None and name != only:
                continue
            dist = self.plugin_dists.get(name)
            try:
                specs = list(impl.function() or ())
            except Exception as e:
                self._problem(name, dist, f"pypto_declare_backends raised {type(e).__name__}: {e}")
                self.pm.unregister(name=name)
                continue
            for spec in specs:
                if not isinstance(spec, BackendSpec):
                    self._problem(name, dist, f"pypto_declare_backends returned {spec!r}, not a BackendSpec")
                    continue
                if _major(spec.plugin_api) != _major(PLUGIN_API_VERSION):
                    self._problem(
                        name,
                        dist,
                        f"backend '{spec.name}' was built for plugin API {spec.plugin_api}, "
                        f"this pypto-core implements {PLUGIN_API_VERSION}; install a matching version",
                    )
                    continue
                if spec.name in self.backends:
                    other = self.backends[spec.name]
                    self._problem(name, dist, f"backend '{spec.name}' is already provided by plugin '{other.plugin}'")
                    continue
                self.backends[spec.name] = BackendEntry(spec, name, dist)

    # -- queries -----------------------------------------------------------------------------------
    def ordered(self) -> list[BackendEntry]:
        """Backends by descending priority (ties by name)."""
        return sorted(self.backends.values(), key=lambda b: (-b.spec.priority, b.spec.name))

    def describe_installed(self) -> str:
        parts = []
        for b in self.ordered():
            av = b.availability
            parts.append(f"{b.spec.name} ({'available' if av.available else 'unavailable'})")
        return ", ".join(parts) or "none"

    def resolve(self, executor: str | None) -> BackendEntry:
        """The backend for ``executor``: a name, or None/"auto" for the best available one."""
        if executor is None:
            executor = os.environ.get("PYPTO_EXECUTOR", "").strip() or "auto"
        if executor == "auto":
            for b in self.ordered():
                if b.availability.available:
                    return b
            raise BackendUnavailable("no pypto backend is available; installed: " + self.describe_installed())
        entry = self.backends.get(executor)
        if entry is None:
            msg = f"executor '{executor}' is not an installed pypto backend. Installed: {self.describe_installed()}."
            close = difflib.get_close_matches(executor, list(self.backends) + list(KNOWN_PACKAGES), n=1)
            if close and close[0] != executor:
                msg += f" Did you mean '{close[0]}'?"
            wanted = executor if executor in KNOWN_PACKAGES else close[0] if close else None
            if wanted in KNOWN_PACKAGES and wanted not in self.backends:
                msg += f"\n  fix: pip install {KNOWN_PACKAGES[wanted]}"
            else:
                msg += "\n  fix: pass one of the installed names, or 'auto' for the best available"
            skipped = [s for s in self.skipped if s.name == executor]
            if skipped:
                msg += f"\n  note: a plugin named '{executor}' was skipped: {skipped[0].reason}"
            raise BackendNotFound(msg)
        av = entry.availability
        if not av.available:
            raise BackendUnavailable(f"backend '{executor}' is installed but unavailable: {av.reason}")
        return entry


@dataclass(frozen=True)
class PluginEntryPoint:
    """An entry point of group ``pypto``: its name, ``module:object`` value and distribution."""

    name: str
    value: str
    distribution: str | None

    def load(self) -> Any:
        return importlib.metadata.EntryPoint(self.name, self.value, ENTRY_POINT_GROUP).load()


_ENTRY_POINT_CACHE = "entry-points-v1.json"


def _path_stamp() -> list[list[Any]]:
    """Each ``sys.path`` directory with its modification time: installing, upgrading or removing a
    distribution adds or removes an entry of one of these directories, which changes its time."""
    stamp: list[list[Any]] = [[sys.version, sys.prefix]]
    for entry in sys.path:
        try:
            stamp.append([entry, os.stat(entry or ".").st_mtime_ns])
        except (OSError, ValueError):
            stamp.append([entry, None])
    return stamp


def _settled(stamp: list[list[Any]], now_ns: int) -> bool:
    # A time within the last two seconds may be shared with a change still to come (file times are
    # coarse), so such a stamp is not trusted for later processes.
    return all(t is None or now_ns - t > 2_000_000_000 for _, t in stamp[1:])


def _entry_points(rescan: bool = False) -> list[PluginEntryPoint]:
    """The installed entry points of group ``pypto``.

    Asking :mod:`importlib.metadata` reads the metadata of every installed distribution: about 5 ms in
    an environment of a hundred, a quarter of a new process's first call of a cached kernel. The
    answer is therefore kept in the cache directory, valid while no ``sys.path`` directory changes;
    ``pt.reload_plugins()`` and ``PYPTO_NO_CACHE=1`` always read the installed metadata.
    """
    import json

    from .cache import _atomic_write, cache_dir, cache_enabled

    use_cache = cache_enabled()
    stamp = _path_stamp()
    path = cache_dir() / _ENTRY_POINT_CACHE
    if use_cache and not rescan:
        try:
            data = json.loads(path.read_text())
            if data["stamp"] == stamp:
                return [
                    PluginEntryPoint(str(n), str(v), d if d is None else str(d)) for n, v, d in data["entry_points"]
                ]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    found = [
        PluginEntryPoint(ep.name, ep.value, ep.dist.name if getattr(ep, "dist", None) is not None else None)
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    ]
    if use_cache and _settled(stamp, time.time_ns()):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            entries = [[e.name, e.value, e.distribution] for e in found]
            _atomic_write(path, json.dumps({"stamp": stamp, "entry_points": entries}).encode())
        except OSError:
            pass  # a read-only cache directory only costs the scan
    return found


_registry: Registry | None = None
_lock = threading.Lock()


def get_registry() -> Registry:
    """The process-wide registry, loading plugins on first use."""
    global _registry
    if _registry is None:
        with _lock:
            if _registry is None:
                _registry = Registry()
    return _registry


def reload_plugins() -> Registry:
    """Forget loaded plugins and load them again (after installing one, or changing the env)."""
    global _registry
    with _lock:
        _registry = Registry(rescan=True)
    from .runtime import kernel as _kernel

    _kernel.invalidate_compiled()
    return _registry


def register_plugin(plugin: object, name: str | None = None) -> list[str]:
    """Register a plugin module or object in this process (no entry point needed); returns the names
    of the backends it declared. Useful in notebooks and tests; installed plugins use entry points."""
    from .runtime import kernel as _kernel

    label = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    added = get_registry().add(plugin, label)
    _kernel.invalidate_compiled()
    return added


def list_backends() -> list[str]:
    """Names of the installed backends, highest priority first (available or not)."""
    return [b.spec.name for b in get_registry().ordered()]
