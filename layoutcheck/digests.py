"""`sha256_hex`: the SHA-256 digests the linter keys its cache with, without importing `hashlib` for a few.

`hashlib` loads OpenSSL when imported (about 2.5 ms, 1% of a one-file
pre-commit run, which hashes one file and a few hundred short keys).
CPython's own SHA-256 module (``_sha256``; ``_sha2`` from 3.12) imports in a
tenth of that and gives the same digests, but hashes large inputs about four
times slower than OpenSSL. So a process hashes with it until it has hashed a
megabyte, and with `hashlib` after: a cold run, which hashes every file,
pays the import once and hashes at OpenSSL's speed. Importing this module
costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["sha256_hex"]

_SMALL = 1 << 20
"""Bytes hashed before this process switches to `hashlib`."""

_hashed = 0
_builtin: Callable[[bytes], Any] | None | bool = False
"""The interpreter's own ``sha256`` once looked up; None where this build has none."""


def _own_sha256() -> Callable[[bytes], Any] | None:
    for name in ("_sha256", "_sha2"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        found = getattr(module, "sha256", None)
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None


def sha256_hex(data: bytes) -> str:
    """The SHA-256 digest of ``data``, in hex (the same whichever module computes it)."""
    global _hashed, _builtin
    _hashed += len(data)
    if _builtin is False:
        _builtin = _own_sha256()
    if _hashed > _SMALL or _builtin is None:
        import hashlib

        return hashlib.sha256(data).hexdigest()
    return _builtin(data).hexdigest()  # type: ignore[operator]
