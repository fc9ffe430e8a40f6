"""Each finding's fix as ruff reports it, for runs that show findings (not ``--diff``, not ``--add-noqa``).

A lint pass marks a finding whose rule offers fixes as "unknown"
(`UNKNOWN_FIX`): the engine never imports libcst, and the fix may not exist
at that place (a rule offers fixes for some of its findings only). Before
the findings are shown, `describe_fixes` computes the fix of each such
finding on the text on disk (the text the findings were made on, or that
``--fix`` left), with the rule's own ``fix`` method, so that:

* ``fixable`` is true only for a finding with a fix that this run's flags
  apply (``--fix``: safe fixes; with ``--unsafe-fixes``, unsafe ones too),
  in every output format and in ``--statistics``;
* the unsafe fixes left out are counted ("N fixes available with --unsafe-fixes");
* ``--output-format json`` carries each fix in ruff's shape (`fix_json`):
  ``{"applicability", "message", "edits": [{"content", "location",
  "end_location"}]}``, or ``null``.

Only files holding such a finding are read and parsed. This module imports
libcst (through `fixsite`) when it has something to compute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from layoutcheck.lint.edits import SAFE, UNSAFE
from layoutcheck.lint.findings import UNKNOWN_FIX, FileError, Finding

if TYPE_CHECKING:  # the output formats import `fix_json` only: no rules, no settings
    from layoutcheck.lint.rule import LintRule
    from layoutcheck.lint.settings import LintSettings

__all__ = ["FixView", "describe_fixes", "fix_json"]


@dataclass(frozen=True)
class FixView:
    """One finding's fix, as output shows it: edits as 1-based rows and columns."""

    applicability: str
    message: str
    edits: tuple[tuple[int, int, int, int, str], ...]
    """``(row, column, end_row, end_column, content)``."""


def fix_json(view: FixView | None) -> dict[str, Any] | None:
    """ruff's ``fix`` object of a JSON finding (``None``: no fix)."""
    if view is None:
        return None
    return {
        "applicability": view.applicability,
        "message": view.message,
        "edits": [{"content": content, "location": {"row": row, "column": column},
                   "end_location": {"row": end_row, "column": end_column}}
                  for row, column, end_row, end_column, content in view.edits],
    }


def _read(path: str) -> str | None:
    from layoutcheck.lint.sources import SourceDecodeError, decode_source

    try:
        with open(path, "rb") as handle:
            text, _ = decode_source(handle.read())
    except (OSError, SourceDecodeError):
        return None
    return text


def _position(starts: Sequence[int], offset: int) -> tuple[int, int]:
    from bisect import bisect_right

    row = bisect_right(starts, offset)
    return row, offset - starts[row - 1] + 1


def describe_fixes(
    findings: Sequence[Finding],
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    unsafe: bool = False,
    read: Callable[[str], str | None] = _read,
) -> tuple[list[Finding], dict[Finding, FixView], int]:
    """``findings`` with `Finding.fix` and `Finding.fixable` as their fixes say, each fix, and how many
    unsafe fixes ``unsafe=False`` leaves out.

    A finding whose rule offers no fix, or whose fix cannot be computed (its
    file changed or unreadable, a fix method that raises), has none.
    ``read(path)`` gives a file's text (default: from disk).
    """
    from layoutcheck.lint.rule import ModelRule

    by_name = {rule.name: rule for rule in rules}
    wanted: dict[str, list[Finding]] = {}
    for finding in findings:
        rule = by_name.get(finding.rule)
        if finding.fix is not None and rule is not None and issubclass(rule, ModelRule) and rule.has_autofix():
            wanted.setdefault(finding.path, []).append(finding)
    views: dict[Finding, FixView] = {}
    if wanted:
        try:
            from layoutcheck.lint.fixsite import FixSite, SourceTree
            from layoutcheck.lint.syntaxrule import parse_module
        except ModuleNotFoundError as exc:  # libcst, a dependency, left out of the install: nothing to say
            if exc.name != "libcst":
                raise
            return list(findings), {}, 0

        for path, found in wanted.items():
            text = read(path)
            parsed = parse_module(text, path) if text is not None else None
            if text is None or parsed is None or isinstance(parsed, FileError):
                continue  # unreadable, or no longer parses: no fix can be shown
            tree = SourceTree(text, parsed)
            starts = [0]
            for line in text.splitlines(keepends=True):
                starts.append(starts[-1] + len(line))
            for finding in found:
                try:
                    fix = by_name[finding.rule](settings).fix(FixSite(tree, finding, settings))  # type: ignore[attr-defined]
                except Exception:  # noqa: BLE001 - a fix that crashes is no fix to show (`--fix` reports it)
                    fix = None
                if fix is None:
                    continue
                edits = tuple((*_position(starts, e.start), *_position(starts, e.end), e.content)
                              for e in sorted(fix.edits))
                views[finding] = FixView(fix.applicability, fix.title, edits)
    out: list[Finding] = []
    hidden = 0
    for finding in findings:
        view = views.get(finding)
        if finding.fix in (UNKNOWN_FIX, SAFE, UNSAFE) and finding.rule in by_name and (
                issubclass(by_name[finding.rule], ModelRule) and by_name[finding.rule].has_autofix()):
            applicability = view.applicability if view is not None else None
            fixable = applicability == SAFE or (applicability == UNSAFE and unsafe)
            hidden += applicability == UNSAFE and not unsafe
            finding = replace(finding, fix=applicability, fixable=fixable)
            if view is not None:
                views[finding] = view
        out.append(finding)
    return out, views, hidden
