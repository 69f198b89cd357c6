"""SHA-256 for cache keys and checksums, without importing :mod:`hashlib` on the warm path.

``import hashlib`` loads OpenSSL's libcrypto: about 3 ms, a sixth of a new process's first call of an
already-compiled kernel. CPython's own SHA-256 module (``_sha2`` from 3.12, ``_sha256`` before) gives
the same digests; :mod:`hashlib` is the fallback where neither exists.
"""

from __future__ import annotations

try:
    from _sha2 import sha256  # type: ignore[import-not-found]
except ImportError:  # Python 3.11
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,no-redef]
    except ImportError:  # pragma: no cover - interpreters without the builtin module
        from hashlib import sha256  # type: ignore[no-redef]

_digests: dict[tuple[str, ...], str] = {}


def source_digest(*modules: str) -> str:
    """A digest of the named modules' source files, for cache keys: a changed code generator never
    reuses binaries built from what an older one generated (computed once per process)."""
    digest = _digests.get(modules)
    if digest is None:
        import importlib.util

        h = sha256()
        for mod in modules:
            spec = importlib.util.find_spec(mod)
            if spec is not None and spec.origin:
                with open(spec.origin, "rb") as f:
                    h.update(f.read())
        digest = _digests[modules] = h.hexdigest()[:16]
    return digest


__all__ = ["sha256", "source_digest"]
