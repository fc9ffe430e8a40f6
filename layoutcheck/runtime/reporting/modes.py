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
    """Keeps violations for later inspection (``mode="record"``; also fed in the other modes).

    At most ``limit`` violations are kept one by one (a long run with a
    persistent bug must not grow without bound); past that they are only
    counted per invariant (`dropped`), and `by_invariant` and `summary` count
    them too.
    """

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.violations: list[Violation] = []
        self.rollouts: list[int | None] = []
        """The rollout each kept violation was seen in (same order as `violations`; ``None``: not known)."""
        self.dropped: Counter[str] = Counter()
        """Violations past `limit`, per invariant id."""
        self.notes: list[str] = []
        """Checks that could not run, and why (one sentence each)."""

    def add(self, violations: Iterable[Violation], *, rollout: int | None = None) -> None:
        for v in violations:
            if len(self.violations) < self.limit:
                self.violations.append(v)
                self.rollouts.append(rollout)
            else:
                self.dropped[v.invariant] += 1

    def add_note(self, note: str) -> None:
        """Keep one sentence about a check that could not run."""
        self.notes.append(note)

    def clear(self) -> None:
        self.violations.clear()
        self.rollouts.clear()
        self.dropped.clear()
        self.notes.clear()

    def __len__(self) -> int:
        return len(self.violations)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.violations)

    def by_invariant(self) -> dict[str, int]:
        """Violation counts per invariant id (kept and dropped), sorted by id."""
        counts = Counter(v.invariant for v in self.violations) + self.dropped
        return dict(sorted(counts.items()))

    def summary(self) -> str:
        """One line: the count, per invariant, and where they were seen; then checks that could not run."""
        n = len(self.violations) + sum(self.dropped.values())
        if not n:
            text = "no layout violations"
        else:
            where = ", ".join(sorted({v.where for v in self.violations}))
            counts = ", ".join(f"{inv} x{k}" for inv, k in self.by_invariant().items())
            text = f"{n} layout violation{'s' if n != 1 else ''} ({counts}) in {where}"
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
    rollout: int | None = None,
) -> list[Violation]:
    """Apply ``mode`` to ``violations`` and return them.

    The recorder (if any) gets them first, in every mode. Then ``"raise"``
    raises one `LayoutError` holding all of them, ``"warn"`` issues one
    `LayoutWarning` whose message is the formatted list, ``"record"`` does
    nothing more. No violations: nothing happens. Messages show the first
    `~layoutcheck.errors.MESSAGE_LIMIT` violations in full. ``rollout`` is
    recorded with them (the rollout of the run they were seen in).
    """
    check_mode(mode)
    found = list(violations)
    if not found:
        return found
    if recorder is not None:
        recorder.add(found, rollout=rollout)
    if mode == "raise":
        raise LayoutError(found)
    if mode == "warn":
        level = user_stacklevel() if stacklevel is None else stacklevel + 1
        warnings.warn(format_violations(found, limit=MESSAGE_LIMIT), LayoutWarning, stacklevel=level)
    return found
