"""Pinned checkouts of trainers that are not on PyPI (Miles, slime), named by environment variables.

``LAYOUTCHECK_MILES_CHECKOUT`` and ``LAYOUTCHECK_SLIME_CHECKOUT`` each hold
one or more checkouts separated by ``os.pathsep`` (``:``). An entry is a git
work tree (its commit is read with ``git rev-parse HEAD``) or
``COMMIT=PATH`` for a folder without git metadata (``git archive`` output).
`find_checkout` picks the entry at the pinned commit (`trainers.pins`) and
skips the test when the variable is unset or names no checkout of that
commit; a named path that does not exist is an error (a typo must not look
like a skip).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainers.pins import MILES, SLIME

__all__ = ["ENV", "Checkout", "find_checkout", "parse_entries"]

ENV = {"miles": "LAYOUTCHECK_MILES_CHECKOUT", "slime": "LAYOUTCHECK_SLIME_CHECKOUT"}
PINS = {"miles": MILES, "slime": SLIME}


@dataclass(frozen=True)
class Checkout:
    """One pinned checkout: which trainer, which pin (``buggy``/``fixed``), its full commit and folder."""

    trainer: str
    which: str
    commit: str
    path: Path


def _head(path: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def parse_entries(value: str, variable: str) -> list[tuple[str | None, Path]]:
    """``(commit or None, path)`` of every entry of ``value``; an entry whose path is missing raises."""
    entries = []
    for entry in filter(None, value.split(os.pathsep)):
        commit, _, path = entry.rpartition("=")
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise FileNotFoundError(f"{variable}: {folder} is not a folder (entries are PATH or COMMIT=PATH, "
                                    f"separated by {os.pathsep!r})")
        entries.append((commit or _head(folder), folder))
    return entries


def find_checkout(trainer: str, which: str) -> Checkout:
    """The checkout of ``trainer`` at its pinned ``which`` commit; skips the test when there is none."""
    variable, pinned = ENV[trainer], PINS[trainer][which]
    value = os.environ.get(variable)
    if not value:
        pytest.skip(f"{variable} is unset: set it to a checkout of {trainer} at {pinned[:9]} ({which}); "
                    "see tests/trainers/README.md")
    for commit, path in parse_entries(value, variable):
        if commit and len(commit) >= 7 and pinned.startswith(commit):
            return Checkout(trainer, which, pinned, path)
    pytest.skip(f"{variable} names no checkout of {trainer} at {pinned[:9]} ({which})")
