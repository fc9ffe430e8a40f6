"""Autofix: compute each finding's fix with libcst, apply those that do not overlap, lint again, repeat.

A rule offers fixes only when its examples show one (`LintRule.has_autofix`),
and only unsuppressed findings get one. Each pass, per file:

1. the file is parsed once by libcst (`layoutcheck.lint.fixsite.SourceTree`)
   and each fixable finding's fix is computed from its location: a model
   rule's ``fix`` method, or a syntax rule's replacement node;
2. the fixes the run allows (safe ones; unsafe ones too with
   ``--unsafe-fixes``) are applied as text edits, skipping any that overlap
   one already taken (`layoutcheck.lint.edits.apply_fixes`);
3. the new text must parse, or the pass is dropped for that file and the
   error names the rules whose fixes broke it.

Then the whole project is linted again (a fix in one file can change what a
rule concludes in another) and the next pass starts, until a pass applies
nothing or `MAX_PASSES` is reached. So a second ``--fix`` changes nothing,
and fixes that touch the same code go in one after the other, each computed
on the text the previous one left, never merged blindly (ruff does the same).

This module imports libcst (through `fixsite`): the engine never imports it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from layoutcheck.lint.edits import SAFE, UNSAFE, Edit, Fix, apply_fixes
from layoutcheck.lint.engine import Analysis, ProjectFile, analyse_project, source_project
from layoutcheck.lint.findings import INTERNAL, FileError, FileResult, Finding, FixOutcome
from layoutcheck.lint.fixsite import FixSite, SourceTree
from layoutcheck.lint.rule import LintRule, ModelRule, Report
from layoutcheck.lint.settings import LintSettings
from layoutcheck.lint.syntaxrule import crash, parse_module

__all__ = ["MAX_PASSES", "FixRun", "file_fixes", "fix_project", "fix_source"]

MAX_PASSES = 10
"""Passes of fix-and-lint per run; fixes still pending after them stay reported (ruff stops at 100)."""


@dataclass
class FixRun:
    """What a fix run did to a project."""

    analyses: dict[str, Analysis]
    """Every checked file's findings on its final text (each finding's `Finding.fix` filled in)."""
    outcomes: dict[str, FixOutcome] = field(default_factory=dict)
    """The files a fix changed: original and fixed text, how many fixes went in."""
    errors: dict[str, list[FileError]] = field(default_factory=dict)
    """Fixes that crashed or did not parse (`INTERNAL`), by file."""
    hidden: int = 0
    """Findings left with an unsafe fix that this run did not apply (``--unsafe-fixes`` would)."""


def _syntax_fix(tree: SourceTree, report: Report) -> Fix | None:
    """A syntax rule's replacement node as a text edit of the node's range."""
    where = report.where
    if where is None or report.replacement is None:
        return None
    start = tree.offset(where.start.line, where.start.column)
    end = tree.offset(where.end.line, where.end.column)
    import libcst as cst

    content = "" if isinstance(report.replacement, cst.RemovalSentinel) else tree.render(report.replacement)
    return Fix((Edit(start, end, content),), SAFE, f"apply `{report.rule.name}`'s replacement")


def file_fixes(
    source: str, display: str, candidates: Sequence[tuple[Finding, Report | None]], settings: LintSettings,
) -> tuple[list[tuple[Finding, Fix]], list[FileError]]:
    """Each candidate finding's fix, computed on ``source`` (the text the findings were made on).

    A fix method that raises is an `INTERNAL` error naming the rule; the
    other findings' fixes stand.
    """
    wanted = [(f, r) for f, r in candidates if r is not None and r.rule.has_autofix()]
    if not wanted:
        return [], []
    parsed = parse_module(source, display)
    if isinstance(parsed, FileError):
        return [], []  # the engine reports the syntax error
    tree = SourceTree(source, parsed)
    out: list[tuple[Finding, Fix]] = []
    errors: list[FileError] = []
    for finding, report in wanted:
        assert report is not None
        rule: type[LintRule] = report.rule
        try:
            if issubclass(rule, ModelRule):
                fix = rule(settings).fix(FixSite(tree, finding, settings))
            else:
                fix = _syntax_fix(tree, report)
        except Exception as exc:  # a bug in a fix: that finding keeps no fix, the others go on
            errors.append(crash(display, rule, exc, "while computing a fix"))
            continue
        if fix is not None:
            out.append((finding, fix))
    return out, errors


def _where(error: FileError) -> str:
    """A parse error of fixed code, with its place: the fixed text is never shown, so say where."""
    if error.line is None:
        return error.message
    return f"{error.message}, at line {error.line} of the fixed code"


def _label(fixes: Sequence[Fix], by_fix: Mapping[int, Finding]) -> str:
    return ", ".join(sorted({f"`{by_fix[id(fix)].rule}`" for fix in fixes}))


def fix_project(
    files: Sequence[ProjectFile],
    analyses: Mapping[str, Analysis],
    settings: LintSettings,
    *,
    unsafe: bool = False,
    known_rules: Collection[str] | None = None,
    all_rules: Sequence[type[LintRule]] = (),
) -> FixRun:
    """Fix the checked ``files`` (their ``source`` is updated in place), starting from ``analyses``.

    ``unsafe`` applies unsafe fixes too. Returns the final analyses, what
    changed, the fix errors and how many unsafe fixes were left out.
    """
    current = dict(analyses)
    stale = [f for f in files if f.checked and f.display in current
             and any(report is None for _, report in current[f.display].candidates)]
    if stale:
        # Syntax-rule findings from the cache (or a worker) carry no replacement node: run those
        # rules again here, where their reports are kept.
        for file in stale:
            file.local = None
        current, _ = analyse_project(files, settings, known_rules=known_rules, all_rules=all_rules)
    originals: dict[str, str] = {}
    applied: dict[str, int] = {}
    errors: dict[str, list[FileError]] = {}
    stopped: set[str] = set()
    hidden = 0
    computed: dict[tuple[object, ...], tuple[list[tuple[Finding, Fix]], list[FileError]]] = {}
    for number in range(MAX_PASSES + 1):
        last = number == MAX_PASSES  # compute, count and mark, but apply nothing more
        changed = False
        hidden = 0
        found: dict[Finding, Fix] = {}
        for file in files:
            analysis = current.get(file.display)
            if not file.checked or analysis is None or file.source is None or not analysis.candidates:
                continue
            # A file no pass changed, with the same findings, has the same fixes: reuse them.
            key = (file.display, file.source, tuple(f for f, _ in analysis.candidates))
            if key not in computed:
                computed[key] = file_fixes(file.source, file.display, analysis.candidates, settings)
            fixes, crashed = computed[key]
            for error in crashed:
                if error not in errors.get(file.display, []):
                    errors.setdefault(file.display, []).append(error)
            for finding, fix in fixes:
                found[finding] = fix
            allowed = [fix for _, fix in fixes if fix.applicability == SAFE or unsafe]
            hidden += sum(fix.applicability == UNSAFE and not unsafe for _, fix in fixes)
            if last or file.display in stopped or not allowed:
                continue
            text, chosen = apply_fixes(file.source, allowed)
            if not chosen or text == file.source:
                continue
            reparsed = parse_module(text, file.display)
            if isinstance(reparsed, FileError):  # a fix must never leave code that does not parse
                by_fix = {id(fix): finding for finding, fix in fixes}
                errors.setdefault(file.display, []).append(FileError(
                    file.display, None,
                    f"autofix by {_label(chosen, by_fix)} failed ({_where(reparsed)}); the file was left "
                    + ("unchanged" if file.display not in originals else "as the previous fixes left it"),
                    kind=INTERNAL,
                ))
                stopped.add(file.display)
                continue
            originals.setdefault(file.display, file.source)
            applied[file.display] = applied.get(file.display, 0) + len(chosen)
            file.source, file.facts, file.local = text, None, None
            changed = True
        _mark(current, found, unsafe)
        if not changed:
            break
        current, _ = analyse_project(files, settings, known_rules=known_rules, all_rules=all_rules)
    run = FixRun(current, hidden=hidden, errors=errors)
    for file in files:
        if file.display in originals and file.source is not None and file.source != originals[file.display]:
            run.outcomes[file.display] = FixOutcome(originals[file.display], file.source, "utf-8",
                                                    applied[file.display])
    return run


def _mark(analyses: Mapping[str, Analysis], found: Mapping[Finding, Fix], unsafe: bool) -> None:
    """Fill in each finding's `Finding.fix`: the applicability of its fix, or None when it has none."""
    for analysis in analyses.values():
        if not analysis.candidates:
            continue
        marked = {}
        for finding, _ in analysis.candidates:
            fix = found.get(finding)
            marked[finding] = replace(
                finding, fix=fix.applicability if fix else None,
                fixable=fix is not None and (fix.applicability == SAFE or unsafe),
            )
        analysis.findings = sorted(marked.get(f, f) for f in analysis.findings)
        analysis.candidates = [(marked[f], r) for f, r in analysis.candidates]


def fix_source(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    unsafe: bool = False,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
    files: Mapping[str, str] | None = None,
    encoding: str = "utf-8",
) -> FileResult:
    """Fix ``source`` (the text of ``path``) as far as the rules' fixes allow; the result reports what is left.

    ``files`` are other files of the same project, read for context (as in
    `layoutcheck.lint.engine.lint_source`); ``unsafe`` applies unsafe fixes
    too. ``result.fix`` holds the original and fixed text when anything changed.
    """
    entries = source_project(source, path, rules, module_name=module_name, files=files)
    analyses, _ = analyse_project(entries, settings, known_rules=known_rules, all_rules=rules)
    run = fix_project(entries, analyses, settings, unsafe=unsafe, known_rules=known_rules, all_rules=rules)
    result = run.analyses[path].result()
    result.errors.extend(run.errors.get(path, []))
    outcome = run.outcomes.get(path)
    if outcome is not None:
        result.fix = replace(outcome, encoding=encoding)
    return result
