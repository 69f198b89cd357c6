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

__all__ = ["sha256"]
