"""Plain data types the engine produces and the output formats consume."""

from __future__ import annotations

from dataclasses import asdict, field
from layoutcheck.records import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    """One lint finding. Lines and columns are 1-based, as in ruff and flake8.

    Field order is the sort order: path, line, column, rule.
    """

    path: str
    line: int
    column: int
    rule: str
    code: str
    end_line: int
    end_column: int
    message: str
    fixable: bool = False
    """A fix that this run's flags apply is at hand (``--fix`` would apply it)."""
    fix: str | None = None
    """The applicability of the fix found for it: ``"safe"`` or ``"unsafe"``
    (`layoutcheck.lint.edits`); `UNKNOWN_FIX` when its rule offers fixes but
    this run did not compute them (a plain check never imports libcst); None
    when it has none."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


UNKNOWN_FIX = "unknown"
"""`Finding.fix` of a finding whose rule offers fixes, in a run that did not compute them."""

INVALID_INPUT = "invalid-input"
"""A syntax error, a file that is not UTF-8, too large or unreadable: like a finding, exit 1."""
MISSING_PATH = "missing-path"
"""A path given on the command line that does not exist: exit 2, as in ruff."""
INTERNAL = "internal"
"""A rule crashed or a fix did not reparse: a tool error, exit 2."""


@dataclass(frozen=True, order=True)
class FileError:
    """A file that could not be checked: syntax error, unreadable, not UTF-8, missing.

    ``line`` is 1-based when the error has a position (a syntax error), else None;
    ``column`` likewise. ``kind`` decides the exit status: `INVALID_INPUT`
    (the checked code or file is bad: counts like a finding, exit 1),
    `MISSING_PATH` and `INTERNAL` (a usage or tool error, exit 2).
    """

    path: str
    line: int | None
    message: str
    column: int | None = None
    kind: str = "invalid-input"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class FixOutcome:
    """What ``--fix`` / ``--diff`` did to one file (kept out of the cache)."""

    original: str
    fixed: str
    encoding: str
    """The file's encoding, so a fix is written back the way it was read."""
    applied: int
    """How many findings the fixes resolved."""


@dataclass
class FileResult:
    """Everything the engine learnt about one file."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    parsed: bool = False
    """libcst parsed the file (the text prefilter let at least one rule through)."""
    cached: bool = False
    """The result came from the result cache: nothing was read past the file's bytes."""
    fix: FixOutcome | None = None

    @property
    def error(self) -> str | None:
        """The first error's message, or None when the file was checked."""
        return self.errors[0].message if self.errors else None
