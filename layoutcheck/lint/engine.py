"""Lints one file: prefilter, parse, one traversal running every rule, findings.

The order is chosen for speed (DESIGN.md section 9):

1. each rule's text prefilter (`LintRule.could_match`) runs on the source; a
   file no selected rule can match is never parsed;
2. libcst parses the file once; a `MetadataWrapper` (without its deep copy)
   resolves only the metadata providers the active rules declare;
3. every active rule runs in one batched, read-only traversal
   (`layoutcheck.lint.walk`: libcst's order and callbacks without rebuilding
   the tree); a file no rule needs is only syntax-checked, with CPython's
   much faster parser (a syntax error is a finding wherever it is);
4. positions (a code-generation pass) are computed only for files with
   findings;
5. suppression comments are read with `tokenize` only when the text holds
   one (`layoutcheck.lint.suppressions`).

An exception inside a rule becomes an error for that file naming the rule;
the file is walked again without it, so the other rules' findings stand.
Nothing here reads or writes files: `lint_source` works on text (the rules'
example tests call it) and `lint_bytes` on a file's bytes.
"""

from __future__ import annotations

import ast
import re
import symtable
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from layoutcheck.lint.findings import INTERNAL, INVALID_INPUT, FileError, FileResult, Finding
from layoutcheck.lint.rule import LintContext, LintRule, Report
from layoutcheck.lint.settings import LintSettings
from layoutcheck.lint.sources import SourceDecodeError, decode_source
from layoutcheck.lint.suppressions import MARKER, UnusedSuppression, parse_suppressions, rule_names
from layoutcheck.lint.walk import walk_batched

__all__ = ["Analysis", "FileResult", "analyse", "check_syntax", "lint_bytes", "lint_source", "parse_module"]


@dataclass
class Analysis:
    """One pass over one source text: findings, plus what a fix needs."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    parsed: bool = False
    module: cst.Module | None = None
    fixes: list[tuple[Report, CodeRange]] = field(default_factory=list)
    """Unsuppressed reports whose rule offers a safe fix, with their ranges."""

    def result(self) -> FileResult:
        return FileResult(self.path, self.findings, self.errors, parsed=self.parsed)


def _rule_label(rule: type[LintRule]) -> str:
    return f"`{rule.name}` ({rule.code})"


def _raised_at(tb: TracebackType | None) -> str:
    """``file:line`` of the innermost frame of a traceback: where a rule crashed."""
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return "unknown location"
    return f"{last.tb_frame.f_code.co_filename}:{last.tb_lineno}"


def _crash(path: str, rule: type[LintRule], exc: BaseException, during: str) -> FileError:
    return FileError(
        path, None,
        f"rule {_rule_label(rule)} crashed {during}: {type(exc).__name__}: {exc} "
        f"({_raised_at(exc.__traceback__)}); its findings in this file are missing",
        kind=INTERNAL,
    )


def _culprit(exc: BaseException, instances: Sequence[LintRule]) -> LintRule | None:
    """The rule whose code raised ``exc``: the innermost traceback frame whose ``self`` is one."""
    ids = {id(inst): inst for inst in instances}
    found = None
    tb = exc.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if candidate is not None and id(candidate) in ids and ids[id(candidate)] is candidate:
            found = candidate
        tb = tb.tb_next
    return found


def _traverse(
    wrapper: MetadataWrapper, rules: list[type[LintRule]], context: LintContext, path: str
) -> list[FileError]:
    """Run ``rules`` in one batched walk; drop a rule that crashes and walk again without it."""
    errors: list[FileError] = []
    while rules:
        context.reports.clear()
        instances = []
        for rule in list(rules):
            try:
                instances.append(rule(context))
            except Exception as exc:
                errors.append(_crash(path, rule, exc, "while starting"))
                rules.remove(rule)
        try:
            walk_batched(wrapper, instances)
            return errors
        except RecursionError:
            context.reports.clear()
            errors.append(FileError(path, None, "code is nested too deeply to walk: not checked",
                                    kind=INVALID_INPUT))
            return errors
        except Exception as exc:
            culprit = _culprit(exc, instances)
            if culprit is None:  # libcst or a metadata provider, not a rule
                context.reports.clear()
                errors.append(FileError(path, None, f"internal error while walking the file: "
                                        f"{type(exc).__name__}: {exc} ({_raised_at(exc.__traceback__)})",
                                        kind=INTERNAL))
                return errors
            errors.append(_crash(path, type(culprit), exc, "on this file"))
            rules.remove(type(culprit))
    return errors


_LIBCST_AT = re.compile(r"error at (\d+):(\d+): (.*)", re.DOTALL)


def syntax_error(source: str, path: str, exc: cst.ParserSyntaxError | cst.CSTValidationError) -> FileError:
    """A syntax error as a `FileError`, with CPython's wording and position where it has one.

    libcst's native parser often points past the real error ("error at 2:2:
    expected one of ..."); `ast.parse`, run only on files that failed, names
    the right place and says it the way Python users know. libcst's message is
    kept when CPython accepts the code (syntax newer than libcst knows).
    """
    if isinstance(exc, cst.ParserSyntaxError):
        line, column, message = exc.raw_line, exc.raw_column + 1, exc.message
    else:  # parsed, but libcst's node validation refused it (`"a" b"b"`)
        line, column, message = None, None, str(exc)
    found = _LIBCST_AT.search(message)
    if found:
        line, column, message = int(found[1]), int(found[2]), found[3]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source, filename=path)
    except SyntaxError as py:
        message = py.msg
        if py.lineno is not None:
            line, column = py.lineno, py.offset or 1
        elif "\0" in source:
            before = source[: source.index("\0")]
            line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    except (ValueError, RecursionError, MemoryError):
        pass
    return FileError(path, line, f"syntax error: {message}", column=column, kind=INVALID_INPUT)


def check_syntax(source: str, path: str) -> FileError | None:
    """A syntax error in ``source`` without a libcst parse (for files no rule needs).

    CPython's parser and symbol table (`symtable`: no AST objects built, about
    15x cheaper than a libcst parse and 2.5x cheaper than `ast.parse`) clear
    nearly every file. Code they reject is confirmed with libcst, so the
    verdict is libcst's, as for parsed files: syntax newer than the running
    interpreter, or a symbol-table-only error, is not reported.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes etc. are not ours to report
            symtable.symtable(source, path, "exec")
        return None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    parsed = parse_module(source, path)
    return parsed if isinstance(parsed, FileError) else None


def parse_module(source: str, path: str) -> cst.Module | FileError:
    """``source`` parsed by libcst, or the `FileError` (kind `INVALID_INPUT`) saying why it does not parse.

    The one place a libcst parse failure becomes an error: the engine's parse,
    `check_syntax`'s confirmation and the fixer's reparse of its output all use it.
    """
    try:
        return cst.parse_module(source)
    except (cst.ParserSyntaxError, cst.CSTValidationError) as exc:
        return syntax_error(source, path, exc)
    except RecursionError:
        return FileError(path, None, "code is nested too deeply to parse", kind=INVALID_INPUT)


def analyse(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
) -> Analysis:
    """Lint ``source`` and keep what a fix needs (the tree and the fixable reports).

    ``rules`` are the rules to run on this file; `UnusedSuppression` among
    them switches on the unused-suppression report. ``known_rules`` (names and
    lower-case codes of every rule) lets that report flag misspelt names.
    """
    out = Analysis(path)
    report_unused = UnusedSuppression in rules
    visitors = [r for r in rules if r is not UnusedSuppression]
    active: list[type[LintRule]] = []
    crashed: set[type[LintRule]] = set()
    for rule in visitors:
        try:
            if rule.could_match(source, settings):
                active.append(rule)
        except Exception as exc:
            out.errors.append(_crash(path, rule, exc, "in its prefilter"))
            crashed.add(rule)

    pairs: list[tuple[Finding, Report, CodeRange]] = []
    # With no rule that can match, libcst never runs; a syntax error is still a finding (ruff).
    parsed = parse_module(source, path) if active else check_syntax(source, path)
    if isinstance(parsed, FileError):
        out.errors.append(parsed)
        return out
    if parsed is not None:
        out.parsed, out.module = True, parsed
        context = LintContext(path=path, source=source, settings=settings, module_name=module_name)
        # unsafe_skip_copy: the deep copy costs ~16% of a run, and rules never mutate.
        wrapper = MetadataWrapper(parsed, unsafe_skip_copy=True)
        walked = list(active)
        out.errors.extend(_traverse(wrapper, walked, context, path))
        crashed.update(set(active) - set(walked))
        if context.reports:
            pairs = _locate(wrapper, context.reports, path, out.errors)

    findings = [p[0] for p in pairs]
    if (findings or report_unused) and MARKER in source:
        suppressions = parse_suppressions(source)
        if suppressions is not None:
            kept = set(map(id, suppressions.filter(findings)))
            pairs = [p for p in pairs if id(p[0]) in kept]
            findings = [p[0] for p in pairs]
            if report_unused:
                # A crashed rule's findings are missing: its suppressions cannot be judged.
                ran = rule_names([r for r in visitors if r not in crashed])
                findings.extend(suppressions.unused(path, ran, known_rules))
    out.findings = sorted(findings)
    out.fixes = [(report, where) for finding, report, where in pairs if finding.fixable]
    return out


def _positions(wrapper: MetadataWrapper) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node's range: one code-generation pass.

    ``wrapper.resolve(PositionProvider)`` would also walk the whole tree once
    more for batchable providers, even when there are none (libcst 1.x), which
    is about 40% of its cost; the provider's own pass (`_gen`, what `resolve`
    calls) is all positions need.
    """
    gen = getattr(PositionProvider(), "_gen", None)
    if gen is None:  # pragma: no cover - a libcst without the hook: the public way
        return wrapper.resolve(PositionProvider)
    return gen(wrapper)


def _locate(
    wrapper: MetadataWrapper, reports: Sequence[Report], path: str, errors: list[FileError]
) -> list[tuple[Finding, Report, CodeRange]]:
    """Findings for ``reports``; positions cost a code-generation pass, paid only here."""
    positions = _positions(wrapper)
    fixable: dict[type[LintRule], bool] = {}
    located = []
    for report in reports:
        where = positions.get(report.node)
        if where is None:
            errors.append(FileError(path, None, f"rule {_rule_label(report.rule)} reported a node that "
                                    "is not in this file's tree; that finding is dropped", kind=INTERNAL))
            continue
        if report.rule not in fixable:
            fixable[report.rule] = report.rule.has_autofix()
        finding = Finding(
            path=path,
            line=where.start.line,
            column=where.start.column + 1,
            rule=report.rule.name,
            code=report.rule.code,
            end_line=where.end.line,
            end_column=where.end.column + 1,
            message=report.message,
            # Only a rule whose examples prove a fix may offer one (rule.py).
            fixable=report.replacement is not None and fixable[report.rule],
        )
        located.append((finding, report, where))
    return located


def lint_source(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
) -> FileResult:
    """Lint ``source`` (the text of ``path``) with ``rules``; never executes it."""
    return analyse(source, path, rules, settings, module_name=module_name, known_rules=known_rules).result()


def lint_bytes(
    data: bytes,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
    fix: bool = False,
) -> FileResult:
    """Decode a file's bytes as Python does, then lint (and with ``fix``, fix) it."""
    try:
        source, encoding = decode_source(data)
    except SourceDecodeError as exc:
        return FileResult(path, errors=[FileError(path, exc.line, str(exc), column=exc.column)])
    if fix:
        from layoutcheck.lint.fix import fix_source

        return fix_source(source, path, rules, settings, module_name=module_name,
                          known_rules=known_rules, encoding=encoding)
    return lint_source(source, path, rules, settings, module_name=module_name, known_rules=known_rules)
