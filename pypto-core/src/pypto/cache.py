"""The on-disk compile cache: a directory of artifacts addressed by key (used by
:func:`pypto.compiler.compile_program`, which computes the key once per kernel variant).

Key: sha256 of the loop IR text, the backend's name and version, the toolchain description from
``Backend.compile_key`` and the core version. The key does not need the generated source, so a warm
process finds its kernels without generating code at all. Entries live under
``$PYPTO_CACHE_DIR`` (default: the user cache directory, e.g. ``~/.cache/pypto``), one file of
data plus one JSON file with its checksum. Writes go to a temporary file that is renamed into
place (``os.replace``), so readers never see half an entry and processes compiling the same
kernel at once are safe; an entry whose checksum does not match is rebuilt.
``PYPTO_NO_CACHE=1`` bypasses the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from pypto import _env
from pypto._hashing import sha256
from pypto._version import __version__
from pypto.backend_api import Artifact, Program

FORMAT = 1


# Paths under the cache are handled as strings: CPython 3.11's pathlib interns every component it parses,
# so a Path per kernel key (or per temporary build directory) would churn the interpreter's table of
# interned strings, which then resizes to a larger size than the process needs (about 1 MiB once, seen
# over a few thousand kernels). The root is resolved again only when a variable it depends on changes.
_root: tuple[tuple[str | None, ...], Path] | None = None


def cache_dir() -> Path:
    """Where compiled artifacts are stored."""
    env, xdg = os.environ.get("PYPTO_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME")
    inputs = (env, xdg, os.environ.get("HOME"))  # HOME: what ~ expands to
    global _root
    memo = _root
    if memo is None or memo[0] != inputs:
        memo = _root = (inputs, _cache_dir(env, xdg))
    return memo[1]


def _cache_dir(env: str | None, xdg: str | None) -> Path:
    if env:
        return Path(env).expanduser()
    if sys.platform == "linux" and "ANDROID_DATA" not in os.environ:
        # the XDG base-directory rule, which is platformdirs' answer on Linux, without its 3 ms import
        # in every new process
        base = xdg or ""
        return Path(base if os.path.isabs(base) else os.path.expanduser("~/.cache"), "pypto")
    import platformdirs

    return Path(platformdirs.user_cache_dir("pypto", appauthor=False))


def cache_enabled() -> bool:
    return not _env.flag("PYPTO_NO_CACHE")


def cache_key(backend: str, backend_version: str, program: Program, toolchain: str) -> str:
    h = sha256()
    for part in (
        f"format={FORMAT}",
        f"core={__version__}",
        f"backend={backend}",
        f"version={backend_version}",
        f"toolchain={toolchain}",
        program.ir_text,
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class DiskCache:
    """A directory of artifacts addressed by key."""

    def __init__(self, root: Path | None = None):
        self.root = root or cache_dir()

    def _dir(self, backend: str, key: str) -> str:  # a string, not a Path: see _root
        return os.path.join(self.root, backend, key[:2])

    def get(self, backend: str, key: str) -> Artifact | None:
        d = self._dir(backend, key)
        try:
            with open(os.path.join(d, f"{key}.json"), "rb") as f:
                meta = json.loads(f.read())
            data_path = os.path.join(d, f"{key}{meta['suffix']}")
            with open(data_path, "rb") as f:
                data = f.read()
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if meta.get("format") != FORMAT or sha256(data).hexdigest() != meta.get("sha256"):
            return None  # corrupt or foreign entry: the caller rebuilds and overwrites it
        return Artifact(backend, data, meta["suffix"], meta.get("metadata", {}), data_path, True)

    def put(self, backend: str, key: str, artifact: Artifact) -> Artifact:
        """Store ``artifact`` under ``backend``'s key (where :meth:`get` looks for it)."""
        d = self._dir(backend, key)
        data_path, meta_path = os.path.join(d, f"{key}{artifact.suffix}"), os.path.join(d, f"{key}.json")
        try:
            os.makedirs(d, exist_ok=True)
            _atomic_write(data_path, artifact.data)
            meta = {
                "format": FORMAT,
                "suffix": artifact.suffix,
                "sha256": sha256(artifact.data).hexdigest(),
                "metadata": artifact.metadata,
                "core": __version__,
            }
            _atomic_write(meta_path, json.dumps(meta).encode())
        except OSError as e:  # a read-only or full disk only costs recompilation: said once per process
            _warn_unwritable(self.root, e)
            return artifact
        artifact.path = data_path
        return artifact

    def info(self) -> dict[str, object]:
        files = [p for p in self.root.rglob("*") if p.is_file()] if self.root.exists() else []
        return {
            "path": str(self.root),
            # compiled kernels: <root>/<backend>/<2 hex digits>/<key>.json (not probes or plugin lists)
            "entries": sum(1 for p in files if p.suffix == ".json" and len(p.relative_to(self.root).parts) == 3),
            "bytes": sum(p.stat().st_size for p in files),
        }

    def clear(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)


_warned_unwritable = False


def _warn_unwritable(root: Path, e: OSError) -> None:
    global _warned_unwritable
    if _warned_unwritable:
        return
    _warned_unwritable = True
    import warnings

    from pypto.errors import CacheWarning

    warnings.warn(
        f"pypto's cache directory {root} cannot be written ({type(e).__name__}: {e.strerror or e}); compiled "
        "kernels work but are not kept for the next process. Set PYPTO_CACHE_DIR to a writable directory "
        "(or PYPTO_NO_CACHE=1 to build without a cache).",
        CacheWarning,
        stacklevel=4,
    )


def _atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=os.path.splitext(path)[1])
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
