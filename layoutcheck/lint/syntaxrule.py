"""`SyntaxRule`: a rule that walks libcst's concrete syntax tree, for fixes that rewrite code.

The padding rules are queries on the project model (`layoutcheck.lint.rule.ModelRule`)
and need no concrete syntax. A rule that offers an autofix does: libcst keeps
every comment and space, so a replacement node prints back as code. All
selected syntax rules of a file run in one read-only batched traversal
(`layoutcheck.lint.walk`), so a syntax rule is a `libcst.BatchableCSTVisitor`:
it cannot prune the walk, and keeps any state it needs itself.

This module imports libcst; the engine imports it only when a selected
syntax rule's prefilter matches a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper

from layoutcheck.lint.findings import INTERNAL, INVALID_INPUT, FileError
from layoutcheck.lint.rule import LintRule, Report
from layoutcheck.lint.walk import node_positions, walk_batched

if TYPE_CHECKING:
    from layoutcheck.lint.settings import LintSettings

__all__ = ["LintContext", "SyntaxRule", "parse_module", "run_syntax_rules"]


@dataclass
class LintContext:
    """Per-file state shared by the syntax rules of one traversal."""

    path: str
    source: str
    settings: LintSettings
    module_name: str | None = None
    """Dotted module name of ``path`` when it can be derived."""
    reports: list[Report] = field(default_factory=list)


class SyntaxRule(LintRule, cst.BatchableCSTVisitor):
    """A libcst visitor rule (see the module docs); report nodes with `report`."""

    def __init__(self, context: LintContext) -> None:
        cst.BatchableCSTVisitor.__init__(self)
        self.context = context
        self.settings = context.settings

    def report(  # type: ignore[override]
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        replacement: cst.CSTNode | cst.RemovalSentinel | None = None,
    ) -> None:
        """Record a finding on ``node``; ``replacement`` only when the rewrite is provably safe."""
        self.context.reports.append(Report(type(self), None, message or self.message, node, replacement))


def parse_module(source: str, path: str) -> cst.Module | FileError:
    """``source`` parsed by libcst, or the `FileError` (kind `INVALID_INPUT`) saying why it does not parse."""
    try:
        return cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError) as exc:
        line = exc.raw_line if isinstance(exc, cst.ParserSyntaxError) else None
        column = exc.raw_column + 1 if isinstance(exc, cst.ParserSyntaxError) else None
        message = exc.message if isinstance(exc, cst.ParserSyntaxError) else str(exc)
        return FileError(path, line, f"syntax error: {message}", column=column, kind=INVALID_INPUT)
    except RecursionError:
        return FileError(path, None, "code is nested too deeply to parse", kind=INVALID_INPUT)


def _label(rule: type[LintRule]) -> str:
    return f"`{rule.name}` ({rule.code})"


def _raised_at(tb: TracebackType | None) -> str:
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return "unknown location"
    return f"{last.tb_frame.f_code.co_filename}:{last.tb_lineno}"


def crash(path: str, rule: type[LintRule], exc: BaseException, during: str) -> FileError:
    """A rule that raised, as an `INTERNAL` error naming it and where it raised."""
    return FileError(
        path, None,
        f"rule {_label(rule)} crashed {during}: {type(exc).__name__}: {exc} "
        f"({_raised_at(exc.__traceback__)}); its findings in this file are missing",
        kind=INTERNAL,
    )


def _culprit(exc: BaseException, instances: Sequence[SyntaxRule]) -> SyntaxRule | None:
    ids = {id(inst): inst for inst in instances}
    found = None
    tb = exc.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if candidate is not None and id(candidate) in ids and ids[id(candidate)] is candidate:
            found = candidate
        tb = tb.tb_next
    return found


def run_syntax_rules(
    module: cst.Module, rules: Sequence[type[SyntaxRule]], context: LintContext, errors: list[FileError],
) -> tuple[list[Report], Mapping[object, CodeRange], list[type[LintRule]]]:
    """Run ``rules`` over ``module`` in one walk; a rule that crashes is dropped and the walk redone.

    Returns the reports (their spans filled in), the positions of every node
    (for fixes) and the rules that crashed.
    """
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)  # rules never mutate: no deep copy
    remaining = list(rules)
    crashed: list[type[LintRule]] = []
    path = context.path
    while remaining:
        context.reports.clear()
        instances = []
        for rule in list(remaining):
            try:
                instances.append(rule(context))
            except Exception as exc:
                errors.append(crash(path, rule, exc, "while starting"))
                remaining.remove(rule)
                crashed.append(rule)
        try:
            walk_batched(wrapper, instances)
            break
        except RecursionError:
            context.reports.clear()
            errors.append(FileError(path, None, "code is nested too deeply to walk: not checked",
                                    kind=INVALID_INPUT))
            return [], {}, crashed
        except Exception as exc:
            culprit = _culprit(exc, instances)
            if culprit is None:
                context.reports.clear()
                errors.append(FileError(path, None, f"internal error while walking the file: "
                                        f"{type(exc).__name__}: {exc} ({_raised_at(exc.__traceback__)})",
                                        kind=INTERNAL))
                return [], {}, crashed
            errors.append(crash(path, type(culprit), exc, "on this file"))
            remaining.remove(type(culprit))
            crashed.append(type(culprit))
    if not context.reports:
        return [], {}, crashed
    positions = node_positions(wrapper)
    located = []
    for report in context.reports:
        where = positions.get(report.node)
        if where is None:
            errors.append(FileError(path, None, f"rule {_label(report.rule)} reported a node that "
                                    "is not in this file's tree; that finding is dropped", kind=INTERNAL))
            continue
        report.span = (where.start.line, where.start.column + 1, where.end.line, where.end.column + 1)
        located.append(report)
    return located, positions, crashed
