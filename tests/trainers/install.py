"""Pinned packages from PyPI in a folder of their own, installed once and reused.

A real trainer's code runs in a subprocess whose ``PYTHONPATH`` points at such
a folder: the test venv stays as it is (its torch, numpy, pytest), and the
trainer sees exactly the versions pinned here. ``pip install --no-deps
--target`` with exact pins: nothing is resolved, so what imports is what the
pin list says, on every machine.

The folder is keyed by the pins (name plus a hash of the list), so changing a
pin installs a new folder and never reuses a stale one. A file lock makes
concurrent installers (pytest-xdist workers, two suites on one machine) wait
for one install instead of racing; a half-finished install is never visible
(it is renamed into place when pip succeeds).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["InstallError", "PinnedSet", "install"]

_DONE = ".installed"
"""Marker file written last: a folder without it is not an install."""


class InstallError(RuntimeError):
    """pip could not install a pinned set (no network to PyPI, a pin that does not exist, ...)."""


@dataclass(frozen=True)
class PinnedSet:
    """A named list of exact requirements (``pkg==1.2.3``), installed together without dependency resolution."""

    name: str
    requirements: tuple[str, ...]

    def __post_init__(self) -> None:
        loose = [r for r in self.requirements if "==" not in r]
        if loose:
            raise ValueError(f"{self.name}: every requirement must be an exact pin (pkg==version), not {loose}")

    @property
    def key(self) -> str:
        """Folder name: the set's name and a digest of its pins (a changed pin is a new folder)."""
        digest = hashlib.sha256("\n".join(sorted(self.requirements)).encode()).hexdigest()[:12]
        return f"{self.name}-{digest}"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def install(pins: PinnedSet, root: Path, *, timeout: float = 900.0) -> Path:
    """The folder holding ``pins`` under ``root``: installed now if it is not there yet, else reused.

    Raises `InstallError` with pip's output when pip fails.
    """
    root.mkdir(parents=True, exist_ok=True)
    target = root / pins.key
    if (target / _DONE).exists():
        return target
    with _locked(root / f"{pins.key}.lock"):
        if (target / _DONE).exists():  # another process installed it while we waited
            return target
        partial = root / f"{pins.key}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        command = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(partial),
                   "--disable-pip-version-check", "--no-input", "--quiet", *pins.requirements]
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise InstallError(f"pip could not install {pins.name} ({' '.join(pins.requirements)}) into {root}; "
                               f"PyPI must be reachable. pip said:\n{(done.stdout + done.stderr)[-3000:]}")
        (partial / _DONE).write_text(f"{time.monotonic() - started:.1f} s\n" + "\n".join(pins.requirements) + "\n")
        partial.rename(target)
    return target
