"""What happens to violations: raise, warn or record.

The checks return ``list[Violation]`` and decide nothing; `report` applies a
mode. A `Recorder` keeps every violation it is given (in every mode), so a
user can inspect or summarise them after a run, and the notes of checks that
could not run (warn and record modes never let a check crash training).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from layoutcheck.errors import (
    MESSAGE_LIMIT,
    LayoutError,
    LayoutSpecError,
    Violation,
    describe_value,
    format_violations,
    invariant_counts,
)

__all__ = [
    "MODES",
    "LayoutWarning",
    "Mode",
    "Recorder",
    "check_mode",
    "format_violations",
    "report",
    "user_stacklevel",
]

Mode = Literal["raise", "warn", "record"]
MODES: tuple[str, ...] = ("raise", "warn", "record")


class LayoutWarning(UserWarning):
    """The warning category of ``mode="warn"``; filter it like any warning."""


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../layoutcheck/


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller point at the first frame outside layoutcheck.

    The wrappers nest checks a few frames deep, and how deep varies; the
    user's line (their call of a wrapped function) is what a warning should show.
    """
    level, frame = 2, sys._getframe(2)  # level 1 is our caller (the function that warns), 2 its caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def check_mode(mode: str) -> Mode:
    """Return ``mode`` if it is a known mode, else raise `LayoutSpecError`."""
    if mode not in MODES:
        raise LayoutSpecError(f"unknown mode {describe_value(mode, quote=True)}: expected one of {', '.join(MODES)}")
    return mode  # type: ignore[return-value]


class Recorder:
    """Keeps violations for later inspection (``mode="record"``; also fed in the other modes)."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.notes: list[str] = []
        """Checks that could not run, and why (warn and record modes; raise mode raises instead)."""

    def add(self, violations: Iterable[Violation]) -> None:
        self.violations.extend(violations)

    def add_note(self, note: str) -> None:
        """Keep one sentence about a check that could not run."""
        self.notes.append(note)

    def clear(self) -> None:
        self.violations.clear()
        self.notes.clear()

    def __len__(self) -> int:
        return len(self.violations)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.violations)

    def by_invariant(self) -> dict[str, int]:
        """Violation counts per invariant id, sorted by id."""
        return dict(sorted(Counter(v.invariant for v in self.violations).items()))

    def summary(self) -> str:
        """One line: the count, per invariant, and where they were seen; then checks that could not run."""
        if not self.violations:
            text = "no layout violations"
        else:
            where = ", ".join(sorted({v.where for v in self.violations}))
            n = len(self.violations)
            text = f"{n} layout violation{'s' if n != 1 else ''} ({invariant_counts(self.violations)}) in {where}"
        if self.notes:
            k = len(self.notes)
            text += f"; {k} check{'s' if k != 1 else ''} could not run"
        return text

    def format(self, *, limit: int | None = 5) -> str:
        """The recorded violations, rendered as `format_violations` does."""
        return format_violations(self.violations, limit=limit)


def report(
    violations: Sequence[Violation],
    mode: str = "raise",
    *,
    recorder: Recorder | None = None,
    stacklevel: int | None = None,
) -> list[Violation]:
    """Apply ``mode`` to ``violations`` and return them.

    The recorder (if any) gets them first, in every mode. Then ``"raise"``
    raises one `LayoutError` holding all of them, ``"warn"`` issues one
    `LayoutWarning` whose message is the formatted list, ``"record"`` does
    nothing more. No violations: nothing happens. Messages show the first
    `~layoutcheck.errors.MESSAGE_LIMIT` violations in full.
    """
    check_mode(mode)
    found = list(violations)
    if not found:
        return found
    if recorder is not None:
        recorder.add(found)
    if mode == "raise":
        raise LayoutError(found)
    if mode == "warn":
        level = user_stacklevel() if stacklevel is None else stacklevel + 1
        warnings.warn(format_violations(found, limit=MESSAGE_LIMIT), LayoutWarning, stacklevel=level)
    return found
