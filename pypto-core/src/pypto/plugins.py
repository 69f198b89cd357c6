"""Loading backend plugins (entry-point group ``pypto``) and choosing a backend by name.

The registry maps each backend name to its :class:`~pypto.backend_api.Backend` object (from the
``pypto_backends`` hook) and each target name to its :class:`~pypto.targets.Target` (from
``pypto_targets``), and holds the plugin manager whose ``pypto_compile`` and ``pypto_launch`` hooks
the core calls (:mod:`pypto.hookspecs`). The core's own backend (``reference``), targets
(``cpu-simd``, ``simt``) and the implementations of those two hooks are registered as plugins like
any other. It knows nothing of kernels: they subscribe with :func:`on_reload` to drop what they
compiled when plugins change.

Plugins load lazily, the first time pypto needs a backend: ``import pypto`` reads no entry points.
A plugin that fails to import, or that was built for another major plugin-API version, is skipped
with a :class:`~pypto.errors.PluginWarning` naming it (``PYPTO_STRICT_PLUGINS=1`` raises
:class:`~pypto.errors.PluginError` instead). ``PYPTO_DISABLE_PLUGINS`` lists entry-point or
distribution names not to load (``all`` disables every third-party plugin).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from pypto import _env, hookspecs
from pypto.backend_api import PLUGIN_API_VERSION, Availability, Backend, BackendSpec, Launcher, Program
from pypto.errors import BackendNotFound, BackendUnavailable, CompileError, PluginError, PluginWarning
from pypto.targets import Target

ENTRY_POINT_GROUP = "pypto"

ALIASES = {"omp": "openmp"}
"""Other names an executor is known by (``executor="omp"``, as OpenMP users spell it)."""

KNOWN_PACKAGES = {
    "openmp": "pypto-backend-openmp",
    "tbb": "pypto-backend-tbb",
    "cuda": "pypto-backend-cuda",
    "opencl": "pypto-backend-opencl",
}


def _major(version: str) -> str:
    return str(version).split(".", 1)[0]


@dataclass
class BackendEntry:
    """A declared backend, the plugin that declared it, and its (lazily probed) availability."""

    spec: BackendSpec
    plugin: str
    distribution: str | None
    backend: Backend = field(repr=False)
    _availability: Availability | None = field(default=None, repr=False)

    @property
    def availability(self) -> Availability:
        if self._availability is None:
            try:
                self._availability = self.spec.probe()
            except Exception as e:  # a probe must never take pypto down
                self._availability = Availability(False, f"availability probe failed: {type(e).__name__}: {e}")
        return self._availability


@dataclass(frozen=True)
class TargetEntry:
    """A declared target and the plugin that declared it."""

    target: Target
    plugin: str


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
        self.targets: dict[str, TargetEntry] = {}
        self.skipped: list[SkippedPlugin] = []
        self.plugin_dists: dict[str, str | None] = {}
        self._load()

    # -- loading ---------------------------------------------------------------------------------
    def _problem(self, name: str, dist: str | None, reason: str) -> None:
        self.skipped.append(SkippedPlugin(name, dist, reason))
        origin = f" (from distribution '{dist}')" if dist else ""
        text = f"pypto plugin '{name}'{origin} was skipped: {reason}"
        if _env.flag("PYPTO_STRICT_PLUGINS"):
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
        marker = f"{hookspecs.PROJECT}_impl"  # what @pypto.hookimpl sets on a hook implementation
        try:
            hooks = [n for n in dir(plugin) if n.startswith("pypto_") and hasattr(getattr(plugin, n, None), marker)]
        except Exception:
            hooks = []
        known = {n for n in dir(hookspecs) if n.startswith("pypto_")}
        unknown = sorted(set(hooks) - known)
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            what = "is not a pypto hook" if len(unknown) == 1 else "are not pypto hooks"
            hint = f" (did you mean {close[0]}?)" if close else ""
            self._problem(
                name,
                dist,
                f"it implements {', '.join(unknown)}, which {what}{hint}; the hooks of plugin API "
                f"{PLUGIN_API_VERSION} are {', '.join(sorted(known))}",
            )
            return False
        if not hooks:
            self._problem(
                name,
                dist,
                f"its object ({type(plugin).__name__} {plugin!r:.60}) has no @pypto.hookimpl functions; the entry "
                "point must name a module or object defining pypto hooks such as pypto_backends (see 'Write a backend plugin')",
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
        from pypto import compiler
        from pypto.backends import reference
        from pypto.targets import builtin

        self.register(compiler, "pypto-core-compile", "pypto-core")  # pypto_compile and pypto_launch
        self.register(builtin, "pypto-core-targets", "pypto-core")  # cpu-simd, simt
        self.register(reference, "reference", "pypto-core")
        disabled = {
            s.strip() for s in os.environ.get("PYPTO_DISABLE_PLUGINS", "").replace(";", ",").split(",") if s.strip()
        }
        for ep in _entry_points(rescan=self._rescan):
            dist = ep.distribution
            if {"all", "*", "1"} & disabled or ep.name in disabled or (dist and dist in disabled):
                self.skipped.append(SkippedPlugin(ep.name, dist, "disabled by PYPTO_DISABLE_PLUGINS"))
                continue
            if self.pm.has_plugin(ep.name):
                other = self.plugin_dists.get(ep.name)
                self._problem(ep.name, dist, "another plugin of that name is already registered"
                              + (f" (from distribution '{other}')" if other else ""))  # fmt: skip
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                self._problem(ep.name, dist, f"importing {ep.value} failed: {type(e).__name__}: {e}")
                continue
            self.register(plugin, ep.name, dist)
        self._declare()

    def add(self, plugin: object, name: str) -> list[str]:
        """Register a plugin object now (not through an entry point) and declare its backends and
        targets; returns the names of the backends and targets it added."""
        if not self.register(plugin, name):
            return []
        before = set(self.backends) | set(self.targets)
        self._declare(only=name)
        return sorted((set(self.backends) | set(self.targets)) - before)

    def remove(self, name: str) -> None:
        """Unregister the plugin called ``name`` with its backends and targets (nothing if unknown)."""
        if self.pm.get_plugin(name) is not None:
            self.pm.unregister(name=name)
        self.plugin_dists.pop(name, None)
        self.backends = {k: v for k, v in self.backends.items() if v.plugin != name}
        self.targets = {k: v for k, v in self.targets.items() if v.plugin != name}
        self._observe()

    def _observe(self) -> None:
        """Whether any plugin wraps ``pypto_launch``: kernels consult the hook only then."""
        global launch_observed
        observed = any(impl.wrapper or impl.hookwrapper for impl in self.pm.hook.pypto_launch.get_hookimpls())
        if observed != launch_observed:
            launch_observed = observed
            for fn in list(_observe_listeners):
                fn(observed)

    def _declared(self, hook_name: str, only: str | None) -> list[tuple[str, str | None, list[Any]]]:
        """What each plugin's implementation of ``hook_name`` returns: (plugin, distribution, items); a
        plugin whose hook raises is reported and unregistered."""
        out = []
        for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
            name = impl.plugin_name
            if only is not None and name != only:
                continue
            dist = self.plugin_dists.get(name)
            try:
                out.append((name, dist, list(impl.function() or ())))
            except Exception as e:
                self._problem(name, dist, f"{hook_name} raised {type(e).__name__}: {e}")
                self.remove(name)
        return out

    def _declare(self, only: str | None = None) -> None:
        for name, dist, declared in self._declared("pypto_targets", only):
            for target in declared:
                if not isinstance(target, Target):
                    self._problem(name, dist, f"pypto_targets returned {target!r}, not a pypto.targets.Target")
                elif target.name in self.targets:
                    other = self.targets[target.name].plugin
                    self._problem(name, dist, f"target '{target.name}' is already provided by plugin '{other}'")
                else:
                    self.targets[target.name] = TargetEntry(target, name)
        for name, dist, declared in self._declared("pypto_backends", only):
            for backend in declared:
                if not isinstance(backend, Backend):
                    self._problem(name, dist, f"pypto_backends returned {backend!r}, not a pypto.backend_api.Backend")
                    continue
                try:
                    spec = backend.spec
                except Exception as e:
                    self._problem(name, dist, f"reading the spec of {backend!r} raised {type(e).__name__}: {e}")
                    continue
                if not isinstance(spec, BackendSpec):
                    self._problem(name, dist, f"the spec of {backend!r} is {spec!r}, not a BackendSpec")
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
                self.backends[spec.name] = BackendEntry(spec, name, dist, backend)
        self._observe()

    # -- the hooks the core calls -------------------------------------------------------------------
    def compile(self, backend: Backend, program: Program) -> Launcher:
        """The launcher of ``program`` for ``backend``: the ``pypto_compile`` hook, its wrappers included."""
        launcher = self.pm.hook.pypto_compile(backend=backend, program=program)
        if launcher is None:
            raise CompileError(f"backend '{backend.name}' could not load the compiled kernel '{program.name}'")
        return launcher

    def launch(self, kernel: Any, args: tuple, kwargs: dict, call: Callable[[], Any]) -> Any:
        """One kernel call through the ``pypto_launch`` hook (used while a plugin wraps it)."""
        return self.pm.hook.pypto_launch(kernel=kernel, args=args, kwargs=kwargs, call=call)

    # -- queries -----------------------------------------------------------------------------------
    def ordered(self) -> list[BackendEntry]:
        """Backends by descending priority (ties by name)."""
        return sorted(self.backends.values(), key=lambda b: (-b.spec.priority, b.spec.name))

    def target(self, name: str | None) -> Target | None:
        """The target called ``name`` (``None`` for a backend that declares none)."""
        if name is None:
            return None
        entry = self.targets.get(name)
        if entry is None:
            import difflib

            close = difflib.get_close_matches(name, list(self.targets), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise BackendNotFound(
                f"unknown target '{name}'.{hint} Known targets: {', '.join(self.targets) or 'none'}"
                "\n  fix: install the plugin that declares it (its pypto_targets hook), or name a known one"
            )
        return entry.target

    def describe_installed(self) -> str:
        parts = []
        for b in self.ordered():
            av = b.availability
            parts.append(f"{b.spec.name} ({'available' if av.available else 'unavailable'})")
        return ", ".join(parts) or "none"

    def backend(self, name: str) -> Backend:
        """The backend called ``name`` (installed; it may be unavailable here)."""
        name = ALIASES.get(name, name)
        entry = self.backends.get(name)
        if entry is None:
            self.resolve(name)  # raises BackendNotFound with the installed names and the fix
        assert entry is not None
        return entry.backend

    def resolve(self, executor: str | None) -> BackendEntry:
        """The backend for ``executor``: a name, or None/"auto" for the best available one."""
        if executor is None:
            executor = _env.executor()
        executor = ALIASES.get(executor, executor)
        if executor == "auto":
            for b in self.ordered():
                if b.availability.available:
                    return b
            raise BackendUnavailable("no pypto backend is available; installed: " + self.describe_installed())
        entry = self.backends.get(executor)
        if entry is None:
            msg = f"executor '{executor}' is not an installed pypto backend. Installed: {self.describe_installed()}."
            import difflib

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
        # "module:attr" loaded directly: importlib.metadata (tens of ms to import) is needed only to scan
        module, _, attr = self.value.split("[", 1)[0].partition(":")  # extras ("[...]") do not name objects
        import importlib

        obj: Any = importlib.import_module(module.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
        return obj


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

    from pypto.cache import _atomic_write, cache_dir, cache_enabled

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
    import importlib.metadata

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


launch_observed = False  # some plugin wraps pypto_launch: kernel calls go through the hook (Registry._observe)
_observe_listeners: list[Callable[[bool], None]] = []


def on_observe(fn: Callable[[bool], None]) -> Callable[[bool], None]:
    """Call ``fn(observed)`` whenever plugins start or stop wrapping ``pypto_launch`` (kernels keep the flag
    in a global of their own: their calls test it first)."""
    _observe_listeners.append(fn)
    fn(launch_observed)
    return fn


_registry: Registry | None = None
_lock = threading.Lock()
_reload_listeners: list[Callable[[], None]] = []


def on_reload(fn: Callable[[], None]) -> Callable[[], None]:
    """Call ``fn`` whenever plugins are reloaded or added (kernels drop the launchers made before)."""
    _reload_listeners.append(fn)
    return fn


def _reloaded() -> None:
    for fn in list(_reload_listeners):
        fn()


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
    _reloaded()
    return _registry


def register_plugin(plugin: object, name: str | None = None) -> list[str]:
    """Register a plugin module or object in this process (no entry point needed); returns the names
    of the backends and targets it declared. Useful in notebooks and tests, and for tools that wrap
    ``pypto_compile``/``pypto_launch`` for a while; installed plugins use entry points."""
    label = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    added = get_registry().add(plugin, label)
    if added:
        _reloaded()
    return added


def unregister_plugin(name: str) -> None:
    """Remove a plugin registered with :func:`register_plugin` (its backends and targets too)."""
    reg = get_registry()
    declared = any(e.plugin == name for e in (*reg.backends.values(), *reg.targets.values()))
    reg.remove(name)
    if declared:
        _reloaded()


def targets() -> dict[str, Target]:
    """Every target the installed plugins declare (the core's ``cpu-simd`` and ``simt`` among them)."""
    return {name: e.target for name, e in get_registry().targets.items()}


def get_target(name: str | None) -> Target | None:
    """The target called ``name`` (``None`` for a backend that declares none); raises
    :class:`~pypto.errors.BackendNotFound` naming the known targets for an unknown one."""
    return get_registry().target(name)


def list_backends() -> list[str]:
    """Names of the installed backends, highest priority first (available or not)."""
    return [b.spec.name for b in get_registry().ordered()]
