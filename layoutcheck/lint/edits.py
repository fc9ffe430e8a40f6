"""Fixes as text edits, and applying the ones that do not overlap (ruff's model).

A rule's fix is computed with libcst (`layoutcheck.lint.fixsite`), but what it
returns is plain data: character ranges of the file's text and what replaces
them. Everything outside the edits stays byte for byte as it was, comments
and formatting included, and two fixes can be checked for overlap without a
tree. This module imports neither libcst nor the rules.

Applicability, as in ruff: a *safe* fix keeps what the code means where it
was right, and applies with ``--fix``; an *unsafe* fix changes behaviour (a
guard that can raise, a rewrite of what a value is), and applies only with
``--unsafe-fixes``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from layoutcheck.records import dataclass

__all__ = ["APPLICABILITIES", "SAFE", "UNSAFE", "Edit", "Fix", "apply_fixes"]

SAFE = "safe"
UNSAFE = "unsafe"
APPLICABILITIES = (SAFE, UNSAFE)


@dataclass(frozen=True, order=True)
class Edit:
    """Replace ``text[start:end]`` (0-based character offsets) with ``content``; ``start == end`` inserts."""

    start: int
    end: int
    content: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"an edit needs 0 <= start <= end, got {self.start}..{self.end}")


@dataclass(frozen=True)
class Fix:
    """One finding's fix: its edits, its applicability, and what it does (one imperative line)."""

    edits: tuple[Edit, ...]
    applicability: str
    title: str
    isolation: Hashable = None
    """Fixes with the same key are never applied in the same pass: a guard for a list and a
    second read of that list in the same function would otherwise add the guard twice. The
    next pass lints again and sees the first guard."""

    def __post_init__(self) -> None:
        if self.applicability not in APPLICABILITIES:
            raise ValueError(f"applicability must be one of {APPLICABILITIES}, got {self.applicability!r}")
        if not self.edits:
            raise ValueError("a fix needs at least one edit")
        ordered = sorted(self.edits)
        for before, after in zip(ordered, ordered[1:], strict=False):
            if after.start < before.end:
                raise ValueError(f"the edits of one fix overlap: {before} and {after}")
        object.__setattr__(self, "edits", tuple(ordered))

    @property
    def start(self) -> int:
        return self.edits[0].start

    @property
    def end(self) -> int:
        return max(e.end for e in self.edits)


def _clashes(edit: Edit, taken: Sequence[Edit]) -> bool:
    for other in taken:
        if edit.start < other.end and other.start < edit.end:
            return True  # overlapping ranges
        if edit.start == edit.end == other.start == other.end:
            return True  # two insertions at one place: their order would be a guess
        if (edit.start == edit.end and other.start < edit.start < other.end) or (
            other.start == other.end and edit.start < other.start < edit.end
        ):
            return True  # an insertion inside a replaced range
    return False


def apply_fixes(text: str, fixes: Iterable[Fix]) -> tuple[str, list[Fix]]:
    """``text`` with every fix applied that clashes with none applied before it, and those fixes.

    Fixes are taken in order of their first edit (then by their last), so the
    outcome never depends on the order rules reported them; one whose edits
    overlap an applied one, or whose isolation key was used, waits for the
    next pass, when it is computed again on the new text (ruff does the same).
    """
    chosen: list[Fix] = []
    taken: list[Edit] = []
    keys: set[Hashable] = set()
    for fix in sorted(fixes, key=lambda f: (f.start, f.end, f.title)):
        if fix.end > len(text):
            continue  # computed on other text: never apply
        if fix.isolation is not None and fix.isolation in keys:
            continue
        if any(_clashes(edit, taken) for edit in fix.edits):
            continue
        chosen.append(fix)
        taken.extend(fix.edits)
        if fix.isolation is not None:
            keys.add(fix.isolation)
    if not chosen:
        return text, []
    parts: list[str] = []
    position = 0
    for edit in sorted(taken):
        parts.append(text[position:edit.start])
        parts.append(edit.content)
        position = edit.end
    parts.append(text[position:])
    return "".join(parts), chosen
