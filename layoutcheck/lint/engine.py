"""Lints one file: prefilter, parse, one traversal running every rule, findings.

(Minimal first version: the engine owner extends it with suppressions,
fixes, caching and parallelism; `lint_source` stays the in-memory entry
point the rule-example tests use.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from layoutcheck.lint.findings import Finding
from layoutcheck.lint.rule import LintContext, LintRule
from layoutcheck.lint.settings import LintSettings


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None


def lint_source(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
) -> FileResult:
    """Lint ``source`` (the text of ``path``) with ``rules``; never executes it."""
    result = FileResult(path)
    active = [r for r in rules if r.could_match(source, settings)]
    if not active:
        return result
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        result.error = f"syntax error at line {exc.raw_line}, column {exc.raw_column + 1}: {exc.message}"
        return result
    context = LintContext(path=path, source=source, settings=settings, module_name=module_name)
    # unsafe_skip_copy: the deep copy costs ~16% of a run and we never mutate.
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    wrapper.visit_batched([rule(context) for rule in active])
    if context.reports:
        # Positions cost a full code-generation pass: only files with findings pay it.
        positions = wrapper.resolve(PositionProvider)
        for report in context.reports:
            pos = positions[report.node]
            result.findings.append(
                Finding(
                    path=path,
                    line=pos.start.line,
                    column=pos.start.column + 1,
                    rule=report.rule.name,
                    code=report.rule.code,
                    end_line=pos.end.line,
                    end_column=pos.end.column + 1,
                    message=report.message,
                    fixable=report.replacement is not None,
                )
            )
        result.findings.sort()
    return result
