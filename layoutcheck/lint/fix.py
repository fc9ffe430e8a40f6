"""Autofix: apply the replacements that safe rules offer, until nothing changes.

A rule offers a fix only when its examples prove it (`LintRule.has_autofix`),
and only for findings no suppression covers; only syntax rules
(`layoutcheck.lint.syntaxrule`) can, since a fix rewrites concrete syntax. Each round replaces the
reported nodes (by identity, in one transformer pass), regenerates the code
and reparses it: a fix whose output does not parse is an internal error and
the file is left as it was. Rounds repeat until no fixable finding remains
(at most `MAX_ROUNDS`), so a second ``--fix`` changes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import libcst as cst
from libcst.metadata import CodeRange

from layoutcheck.lint.engine import Analysis, analyse_source
from layoutcheck.lint.findings import INTERNAL, FileError, FileResult, FixOutcome
from layoutcheck.lint.rule import LintRule, Report
from layoutcheck.lint.settings import LintSettings
from layoutcheck.lint.syntaxrule import parse_module

__all__ = ["MAX_ROUNDS", "apply_fixes", "fix_source"]

MAX_ROUNDS = 4
"""Fixes that keep producing new fixable findings stop here (and stay reported)."""


class _Replace(cst.CSTTransformer):
    """Swaps nodes for their replacements, matched by identity (never by equality)."""

    def __init__(self, table: dict[int, tuple[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel]]):
        super().__init__()
        self.table = table

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def, override]
        entry = self.table.get(id(original_node))
        if entry is not None and entry[0] is original_node:
            return entry[1]
        return updated_node


def _contains(outer: CodeRange, inner: CodeRange) -> bool:
    return (outer.start.line, outer.start.column) <= (inner.start.line, inner.start.column) and (
        (inner.end.line, inner.end.column) <= (outer.end.line, outer.end.column)
    )


def _overlap(a: CodeRange, b: CodeRange) -> bool:
    return (a.start.line, a.start.column) < (b.end.line, b.end.column) and (
        (b.start.line, b.start.column) < (a.end.line, a.end.column)
    )


def apply_fixes(module: cst.Module, fixes: Sequence[tuple[Report, CodeRange]]) -> tuple[str, int]:
    """The fixed code and how many fixes went in.

    Overlapping fixes are not combined: the first (by position) goes in and the
    others wait for the next round, when they are reported again on the new tree.
    """
    table: dict[int, tuple[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel]] = {}
    taken: list[CodeRange] = []
    ordered = sorted(fixes, key=lambda f: (f[1].start.line, f[1].start.column, f[0].rule.code))
    for report, where in ordered:
        if report.replacement is None or id(report.node) in table:
            continue
        if any(_overlap(where, t) or _contains(where, t) or _contains(t, where) for t in taken):
            continue
        table[id(report.node)] = (report.node, report.replacement)
        taken.append(where)
    if not table:
        return module.code, 0
    return module.visit(_Replace(table)).code, len(table)


def _where(error: FileError) -> str:
    """A parse error of fixed code, with its place: the fixed text is never shown, so say where."""
    if error.line is None:
        return error.message
    return f"{error.message}, at line {error.line} of the fixed code"


def fix_source(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
    encoding: str = "utf-8",
) -> FileResult:
    """Fix ``source`` as far as safe rules allow; the result reports what is left.

    ``result.fix`` holds the original and fixed text when anything changed.
    """

    def lint(code: str) -> Analysis:
        return analyse_source(code, path, rules, settings, module_name=module_name, known_rules=known_rules)

    current, applied = source, 0
    analysis = lint(current)
    for _ in range(MAX_ROUNDS):
        if not analysis.fixes or analysis.module is None:
            break
        try:
            fixed, count = apply_fixes(analysis.module, analysis.fixes)  # type: ignore[arg-type]
        except Exception as exc:  # a replacement libcst cannot place or print
            failure: str | None = f"{type(exc).__name__}: {exc}"
        else:
            reparsed = parse_module(fixed, path)  # a fix must never leave code that does not parse
            failure = _where(reparsed) if isinstance(reparsed, FileError) else None
        if failure is not None:
            names = ", ".join(sorted({f"`{r.rule.name}`" for r, _ in analysis.fixes}))
            analysis.errors.append(FileError(
                path, None, f"autofix by {names} failed ({failure}); the file was left unchanged", kind=INTERNAL,
            ))
            break
        if count == 0 or fixed == current:
            break
        current, applied = fixed, applied + count
        analysis = lint(current)
    result = analysis.result()
    if current != source:
        result.fix = FixOutcome(source, current, encoding, applied)
    return result
