"""Lints a project: per-file facts, the project model, the rules' queries, suppressions.

The order is chosen for speed (docs/development.md#what-the-linter-avoids):

1. per file, the selected model rules' text prefilters run on the source; a
   file none of them can match is only syntax-checked (CPython's symbol
   table: no tree built), otherwise `layoutcheck.model.extract` parses it
   with `ast` and walks it once into its facts (the runner caches them by
   content, so an unchanged file is never parsed again);
2. the project phase (`layoutcheck.model.project.Project`) joins every
   file's facts: imports, calls bound to their ``def`` s, CP helpers' own
   signatures, owners, the call graph;
3. each model rule queries the model for each checked file
   (`layoutcheck.model.queries.FileQueries`); a syntax rule (libcst)
   walks the files its prefilter lets through, in one batched traversal
   per file;
4. suppression comments (``# layoutcheck: ignore``, ``# noqa``) are read
   with `tokenize`, only in files whose text holds one
   (`layoutcheck.lint.suppressions`).

An exception inside a rule becomes an error for that file naming the rule;
the other rules' findings stand. Nothing here reads or writes files:
`lint_source` works on text (the rules' example tests call it). Fixes are
`layoutcheck.lint.fix`'s, which calls this module (never the reverse): the
engine only marks the findings whose rule offers one (`Analysis.candidates`).
"""

from __future__ import annotations

import symtable
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from layoutcheck.lint.edits import SAFE
from layoutcheck.lint.findings import INTERNAL, INVALID_INPUT, UNKNOWN_FIX, FileError, FileResult, Finding
from layoutcheck.lint.rule import LintRule, ModelRule, Report
from layoutcheck.lint.settings import LintSettings
from layoutcheck.lint.sources import SourceDecodeError, decode_source
from layoutcheck.lint.suppressions import UnusedSuppression, may_suppress, parse_suppressions, rule_names

if TYPE_CHECKING:
    from layoutcheck.model.facts import FileFacts
    from layoutcheck.model.project import Project

__all__ = [
    "Analysis", "ProjectFile", "analyse_project", "analyse_source", "check_syntax", "file_facts", "lint_bytes",
    "lint_source", "module_name_of", "run_local", "source_project",
]


@dataclass
class ProjectFile:
    """One file of a run: checked (its findings are reported) or read for context only."""

    display: str
    relpath: str
    module: str | None
    source: str | None
    """The text (None when only cached facts are at hand, for a context file)."""
    facts: FileFacts | None = None
    checked: bool = True
    rules: tuple[type[LintRule], ...] = ()
    """The rules to run on it (after `per-file-ignores`); `UnusedSuppression` switches that report on."""
    is_package: bool = False
    local: tuple[list[Finding], list[FileError], bool] | None = None
    """The syntax rules' findings and errors and whether libcst parsed it (from the cache), unfiltered
    by suppressions; None to run them. Set by `analyse_project` when it runs them."""
    light: bool = False
    """A `test-paths` file: its facts are only its imports (and its syntax) unless the project finds
    trainer code importing it, which makes it trainer code to be read in full."""


@dataclass
class Analysis:
    """What the engine learnt about one checked file, plus what a fix needs."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    parsed: bool = False
    candidates: list[tuple[Finding, Report | None]] = field(default_factory=list)
    """The unsuppressed findings whose rule offers fixes, with the reports that made them (None for a
    cached syntax-rule finding): what a fix run computes fixes for (`layoutcheck.lint.fix`)."""

    def result(self) -> FileResult:
        return FileResult(self.path, self.findings, self.errors, parsed=self.parsed)


def module_name_of(path: str) -> str:
    """``pkg.data`` for ``pkg/data.py`` (examples and tests name modules by their paths)."""
    text = path.replace("\\", "/")
    if text.endswith((".py", ".pyi")):
        text = text.rsplit(".", 1)[0]
    if text.endswith("/__init__"):
        text = text[: -len("/__init__")]
    return text.strip("/").replace("/", ".")


def _model_rules(rules: Sequence[type[LintRule]]) -> list[type[ModelRule]]:
    return [r for r in rules if isinstance(r, type) and issubclass(r, ModelRule)]


def _syntax_rules(rules: Sequence[type[LintRule]]) -> list[type[LintRule]]:
    return [r for r in rules if not issubclass(r, ModelRule) and r is not UnusedSuppression]


def check_syntax(source: str, path: str) -> FileError | None:
    """A syntax error in ``source`` without building a tree (for files no rule needs).

    CPython's parser and symbol table (`symtable`: about 2.5x cheaper than
    `ast.parse`) clear nearly every file; code they reject is parsed with
    `ast` for the error's wording and place.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes etc. are not ours to report
            symtable.symtable(source, path, "exec")
        return None
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    from layoutcheck.model.extract import extract

    facts = extract(source, LintSettings())
    return _syntax_error(facts, path, source)


def _syntax_error(facts: FileFacts, path: str, source: str) -> FileError | None:
    if facts.syntax_error is None:
        return None
    line, column, message = facts.syntax_error
    if line is None and "\0" in source:
        before = source[: source.index("\0")]
        line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    if not message.startswith("code is nested"):
        from layoutcheck.lint.newsyntax import hint

        # Code a newer Python accepts (`f"{x["a"]}"` under 3.11) says so, naming the versions.
        message = f"syntax error: {message}{hint(source, line)}"
    return FileError(path, line, message, column=column, kind=INVALID_INPUT)


def file_facts(
    source: str, settings: LintSettings, rules: Sequence[type[LintRule]], *, checked: bool = True,
    light: bool = False, memo: Any = None,
) -> FileFacts:
    """The facts of one file: extracted when a selected model rule's prefilter (or the model's own
    needles, or an assignment of a function onto a class: `may_assign_methods`) lets it through; else only its imports, by a text scan, and for a checked file its
    syntax (a syntax error is a finding wherever it is). ``light`` (a test or benchmark) asks
    for imports and syntax only (`ProjectFile.light`)."""
    from layoutcheck.model.calls import may_assign_methods
    from layoutcheck.model.extract import extract
    from layoutcheck.model.facts import FileFacts, Function
    from layoutcheck.model.imports import scan_aliases, scan_imports
    from layoutcheck.model.vocabulary import vocabulary

    model_rules = _model_rules(rules)
    if not light and model_rules and (
        vocabulary(settings).matters(source) or any(rule.could_match(source, settings) for rule in model_rules)
        # a patch module (``Cls.forward = fn``, no call) links a function to the class's callers elsewhere
        or may_assign_methods(source)
    ):
        return extract(source, settings, memo)
    if checked:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                symtable.symtable(source, "<file>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return extract(source, settings)  # for the error's wording and place
    return FileFacts(functions=[Function("<module>", (1, 1, 1, 1))], imported=scan_imports(source),
                     imports=scan_aliases(source))


_DEMAND_ROUNDS = 4
"""How many times the project phase may ask for more files' facts (callers of callers...)."""


def _demanded(project: Project, files: Sequence[ProjectFile], settings: LintSettings) -> list[int]:
    """Files the prefilter cleared whose facts the project needs after all: those that mention a
    function whose rewrites of the owner's inputs have no caller the model sees yet (a chain of
    calls through modules that name no length may still run them after the owner).

    Tests and benchmarks are never asked for: their calls are not the trainer's
    (`ProjectGraph.callers_of` leaves them out), so their order says nothing about
    whether the trainer runs a rewrite after the owner."""
    import re

    from layoutcheck.model.queries import FileQueries

    candidates = [
        i for i, (file, model) in enumerate(zip(files, project.files))
        if not model.is_test and not model.facts.extracted and model.facts.syntax_error is None
        and file.source and "(" in file.source
    ]
    if not candidates:
        return []
    wanted: set[str] = set()
    for i, model in enumerate(project.files):
        if model.is_test or not model.facts.rewrites:
            continue
        decided = {found.function for found in FileQueries(project, i).stale_rewrites()}
        for rewrite in model.facts.rewrites:
            ref = (i, rewrite.function)
            if rewrite.function == 0 or ref in decided:
                continue  # reported already: no caller could take it back
            stack, seen = [ref], {ref}
            while stack:
                target = stack.pop()
                # Its own name, and the names a call reaches it under otherwise (`self.offsets(t)` for
                # `Loss.offsets = chunk_offsets`, known once the module that assigns it is read).
                own = project.function(target).qualname.rsplit(".", 1)[-1]
                for name in (own, *project.other_names(target)):
                    if len(name) >= 4 and not name.startswith("__"):  # `__init__`, `run`: too common to search for
                        wanted.add(name)
                for caller, _ in project.callers_of(target):
                    if caller not in seen and caller[1]:
                        seen.add(caller)
                        stack.append(caller)
    candidates = [i for i in candidates if any(name in (files[i].source or "") for name in wanted)]
    if not candidates:
        return []
    names = "|".join(sorted(map(re.escape, wanted)))
    # A call of one of them, or an import of it (a call through an alias follows the import).
    pattern = re.compile(rf"\b(?:{names})\s*\(|^[ \t]*(?:from|import)\b[^\n]*\b(?:{names})\b", re.MULTILINE)
    return [i for i in candidates if pattern.search(files[i].source or "")]


def _promoted(project: Project, files: Sequence[ProjectFile]) -> list[int]:
    """Test-path files that trainer code imports: trainer code, so their facts are read in full."""
    return [
        i for i, (file, model) in enumerate(zip(files, project.files))
        if file.light and not model.is_test and not model.facts.extracted and model.facts.syntax_error is None
        and file.source is not None
    ]


def analyse_project(
    files: Sequence[ProjectFile],
    settings: LintSettings,
    *,
    known_rules: Collection[str] | None = None,
    all_rules: Sequence[type[LintRule]] = (),
    extract_many: Callable[[Sequence[str]], list[FileFacts]] | None = None,
) -> tuple[dict[str, Analysis], Project]:
    """Lint every checked file of ``files`` against the project they make together.

    ``all_rules`` are the run's selected rules (for the text prefilter of
    files read only for context); each checked file runs its own ``rules``.
    ``extract_many`` extracts the texts of the files the project asks for
    (the runner's worker processes); by default, here, one after another.
    """
    from layoutcheck.model.project import FileModel, Project
    from layoutcheck.model.queries import FileQueries

    prefilter_rules = list(all_rules) or sorted({r for f in files for r in f.rules}, key=lambda r: r.code)
    models = []
    errors: dict[str, list[FileError]] = {}
    for file in files:
        facts = file.facts
        if facts is None:
            assert file.source is not None, "a project file needs its text or its facts"
            try:
                facts = file_facts(file.source, settings, file.rules if file.checked else prefilter_rules,
                                   checked=file.checked, light=file.light)
            except Exception as exc:  # a bug in the extractor: the file is unchecked, the run goes on
                from layoutcheck.model.facts import FileFacts

                facts = FileFacts()
                errors.setdefault(file.display, []).append(FileError(
                    file.display, None, f"internal error while reading the file: {type(exc).__name__}: {exc}",
                    kind=INTERNAL))
            file.facts = facts
        models.append(FileModel(file.display, file.relpath, file.module, facts, file.checked,
                                is_package=file.is_package))
    project = Project(models, settings)

    def read_in_full(more: list[int]) -> Project:
        if extract_many is None:
            from layoutcheck.model.extract import extract

            found = [extract(files[i].source or "", settings) for i in more]
        else:
            found = extract_many([files[i].source or "" for i in more])
        for i, facts in zip(more, found):
            files[i].facts = models[i].facts = facts
        return Project(models, settings)

    # Which tests trainer code imports is known from the imports alone: read them before anything
    # is asked of the project, so the analysis is built once when nothing else is demanded.
    promoted = _promoted(project, files)
    if promoted:
        project = read_in_full(promoted)
    for _ in range(_DEMAND_ROUNDS):
        more = _demanded(project, files, settings)
        if not more:
            break
        project = read_in_full(more)
    out: dict[str, Analysis] = {}
    for index, file in enumerate(files):
        if not file.checked:
            continue
        analysis = Analysis(file.display, errors=errors.get(file.display, []))
        out[file.display] = analysis
        facts = project.files[index].facts
        syntax = _syntax_error(facts, file.display, file.source or "")
        if syntax is not None:
            analysis.errors.append(syntax)
            continue
        analysis.parsed = facts.extracted
        reports: list[Report] = []
        crashed: set[type[LintRule]] = set()
        if project.files[index].is_test:
            # Not the trainer (`test-paths`): the model rules do not run, so their
            # suppressions here cannot be judged either.
            crashed.update(_model_rules(file.rules))
        else:
            queries = FileQueries(project, index)
            for rule in _model_rules(file.rules):
                try:
                    reports.extend(rule(settings).check(queries))
                except Exception as exc:
                    from layoutcheck.lint.syntaxrule import crash

                    analysis.errors.append(crash(file.display, rule, exc, "on this file"))
                    crashed.add(rule)
        pairs = [(_finding(file.display, report), report) for report in reports if report.span is not None]
        syntax_rules = _syntax_rules(file.rules)
        if file.local is None and syntax_rules and file.source is not None:
            local_errors: list[FileError] = []
            syntax_reports, parsed = _run_syntax(file, syntax_rules, settings, analysis, local_errors, crashed)
            file.local = ([_finding(file.display, r) for r in syntax_reports], local_errors, parsed)
            pairs.extend(zip(file.local[0], syntax_reports))
        elif file.local is not None:
            pairs.extend((finding, None) for finding in file.local[0])
        if file.local is not None:
            analysis.errors.extend(file.local[1])
            analysis.parsed = analysis.parsed or file.local[2]
        _finish(analysis, file, pairs, crashed, known_rules)
    return out, project


def run_local(file: ProjectFile, settings: LintSettings) -> tuple[list[Finding], list[FileError], bool]:
    """What ``file`` says on its own: its syntax rules' findings (unfiltered by suppressions), their
    errors, and whether libcst parsed it. It depends on the file alone, so the cache keeps it."""
    errors: list[FileError] = []
    rules = _syntax_rules(file.rules)
    if not rules or file.source is None:
        return [], errors, False
    reports, parsed = _run_syntax(file, rules, settings, Analysis(file.display), errors, set())
    return [_finding(file.display, r) for r in reports], errors, parsed


def _finding(display: str, report: Report) -> Finding:
    assert report.span is not None
    line, column, end_line, end_column = report.span
    # Only a rule whose examples prove a fix may offer one (rule.py). A syntax rule's replacement is
    # known now and safe; a model rule's fix is computed only by a fix run (with libcst), so until
    # then it is "unknown".
    offers = report.rule.has_autofix()
    replaced = offers and report.replacement is not None
    return Finding(
        path=display, line=line, column=column, rule=report.rule.name, code=report.rule.code,
        end_line=end_line, end_column=end_column, message=report.message,
        fixable=replaced, fix=SAFE if replaced else (UNKNOWN_FIX if offers and issubclass(report.rule, ModelRule) else None),
    )


def _run_syntax(file: ProjectFile, rules: Sequence[type[LintRule]], settings: LintSettings, analysis: Analysis,
                errors: list[FileError], crashed: set[type[LintRule]]) -> tuple[list[Report], bool]:
    """Run the syntax rules whose prefilter matches (one libcst parse and walk); their reports."""
    source = file.source or ""
    active = []
    for rule in rules:
        try:
            if rule.could_match(source, settings):
                active.append(rule)
        except Exception as exc:
            from layoutcheck.lint.syntaxrule import crash

            errors.append(crash(file.display, rule, exc, "in its prefilter"))
            crashed.add(rule)
    if not active:
        return [], False
    from layoutcheck.lint.syntaxrule import LintContext, parse_module, run_syntax_rules

    module = parse_module(source, file.display)
    if isinstance(module, FileError):
        errors.append(module)
        return [], False
    context = LintContext(path=file.display, source=source, settings=settings, module_name=file.module)
    located, positions, failed = run_syntax_rules(module, active, context, errors)  # type: ignore[arg-type]
    crashed.update(failed)
    for report in located:
        report.where = positions.get(report.node)
    return located, True


def _finish(analysis: Analysis, file: ProjectFile, pairs: list[tuple[Finding, Report | None]],
            crashed: set[type[LintRule]], known_rules: Collection[str] | None) -> None:
    # One finding per place and message: two paths to the same conclusion are one finding.
    unique: dict[tuple[object, ...], tuple[Finding, Report | None]] = {}
    for finding, report in pairs:
        unique.setdefault((finding.line, finding.column, finding.rule, finding.message), (finding, report))
    pairs = list(unique.values())
    findings = [p[0] for p in pairs]
    report_unused = UnusedSuppression in file.rules
    source = file.source or ""
    if (findings or report_unused) and may_suppress(source):
        suppressions = parse_suppressions(source)
        if suppressions is not None:
            kept = set(map(id, suppressions.filter(findings)))
            pairs = [p for p in pairs if id(p[0]) in kept]
            findings = [p[0] for p in pairs]
            if report_unused:
                # A crashed rule's findings are missing: its suppressions cannot be judged.
                ran = rule_names([r for r in file.rules if r not in crashed and r is not UnusedSuppression])
                findings.extend(suppressions.unused(file.display, ran, known_rules))
    analysis.findings = sorted(findings)
    analysis.candidates = [(finding, report) for finding, report in pairs if finding.fix is not None]


def lint_source(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
    files: Mapping[str, str] | None = None,
) -> FileResult:
    """Lint ``source`` (the text of ``path``) with ``rules``; never executes it.

    ``files`` are other files of the same project (path -> text), read for
    context: their definitions, owners and calls count, their findings are
    not reported.
    """
    return analyse_source(source, path, rules, settings, module_name=module_name, known_rules=known_rules,
                          files=files).result()


def analyse_source(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
    files: Mapping[str, str] | None = None,
) -> Analysis:
    """`lint_source`, keeping what a fix needs."""
    entries = source_project(source, path, rules, module_name=module_name, files=files)
    out, _ = analyse_project(entries, settings, known_rules=known_rules, all_rules=rules)
    return out[path]


def source_project(
    source: str,
    path: str,
    rules: Sequence[type[LintRule]],
    *,
    module_name: str | None = None,
    files: Mapping[str, str] | None = None,
) -> list[ProjectFile]:
    """The project of one checked text and its context files (path -> text), as `analyse_project` takes it."""
    entries = [ProjectFile(path, path, module_name or module_name_of(path), source, rules=tuple(rules),
                           is_package=path.endswith("__init__.py"))]
    for other, text in (files or {}).items():
        entries.append(ProjectFile(other, other, module_name_of(other), text, checked=False,
                                   is_package=other.endswith("__init__.py")))
    return entries


def lint_bytes(
    data: bytes,
    path: str,
    rules: Sequence[type[LintRule]],
    settings: LintSettings,
    *,
    module_name: str | None = None,
    known_rules: Collection[str] | None = None,
) -> FileResult:
    """Decode a file's bytes as Python does, then lint it on its own (`layoutcheck.lint.fix` fixes)."""
    try:
        source, _ = decode_source(data)
    except SourceDecodeError as exc:
        return FileResult(path, errors=[FileError(path, exc.line, str(exc), column=exc.column)])
    return lint_source(source, path, rules, settings, module_name=module_name, known_rules=known_rules)
