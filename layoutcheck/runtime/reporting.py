"""What happens to violations: raise, warn or record.

The checks return ``list[Violation]`` and decide nothing; `report` applies a
mode. A `Recorder` keeps every violation it is given (in every mode), so a
user can inspect or summarise them after a run.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from layoutcheck.errors import LayoutError, LayoutSpecError, Violation

__all__ = ["MODES", "LayoutWarning", "Mode", "Recorder", "check_mode", "format_violations", "report"]

Mode = Literal["raise", "warn", "record"]
MODES: tuple[str, ...] = ("raise", "warn", "record")


class LayoutWarning(UserWarning):
    """The warning category of ``mode="warn"``; filter it like any warning."""


def check_mode(mode: str) -> Mode:
    """Return ``mode`` if it is a known mode, else raise `LayoutSpecError`."""
    if mode not in MODES:
        raise LayoutSpecError(f"unknown mode {mode!r}: expected one of {', '.join(MODES)}")
    return mode  # type: ignore[return-value]


def format_violations(violations: Sequence[Violation], *, limit: int | None = None) -> str:
    """The first ``limit`` violations in full, then a one-line count of the rest by invariant."""
    n = len(violations)
    shown = violations if limit is None else violations[:limit]
    head = f"{n} layout violation{'s' if n != 1 else ''}"
    lines = [head, *(v.format() for v in shown)]
    rest = violations[len(shown) :]
    if rest:
        lines.append(f"... and {len(rest)} more ({_by_invariant(rest)})")
    return "\n".join(lines)


def _by_invariant(violations: Iterable[Violation]) -> str:
    counts = Counter(v.invariant for v in violations)
    return ", ".join(f"{inv} x{k}" for inv, k in sorted(counts.items()))


class Recorder:
    """Keeps violations for later inspection (``mode="record"``; also fed in the other modes)."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []

    def add(self, violations: Iterable[Violation]) -> None:
        self.violations.extend(violations)

    def clear(self) -> None:
        self.violations.clear()

    def __len__(self) -> int:
        return len(self.violations)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.violations)

    def by_invariant(self) -> dict[str, int]:
        """Violation counts per invariant id, sorted by id."""
        return dict(sorted(Counter(v.invariant for v in self.violations).items()))

    def summary(self) -> str:
        """One line: the count, per invariant, and where they were seen."""
        if not self.violations:
            return "no layout violations"
        where = ", ".join(sorted({v.where for v in self.violations}))
        n = len(self.violations)
        return f"{n} layout violation{'s' if n != 1 else ''} ({_by_invariant(self.violations)}) in {where}"

    def format(self, *, limit: int | None = 5) -> str:
        """The recorded violations, rendered as `format_violations` does."""
        return format_violations(self.violations, limit=limit)


def report(
    violations: Sequence[Violation],
    mode: str = "raise",
    *,
    recorder: Recorder | None = None,
    stacklevel: int = 2,
) -> list[Violation]:
    """Apply ``mode`` to ``violations`` and return them.

    The recorder (if any) gets them first, in every mode. Then ``"raise"``
    raises one `LayoutError` holding all of them, ``"warn"`` issues one
    `LayoutWarning` whose message is the formatted list, ``"record"`` does
    nothing more. No violations: nothing happens.
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
        warnings.warn(format_violations(found), LayoutWarning, stacklevel=stacklevel + 1)
    return found
