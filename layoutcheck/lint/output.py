"""Renders findings and file errors in the formats ``--output-format`` offers.

Formats (``OUTPUT_FORMATS``):

* ``concise``: one ``path:line:col: CODE [name] message`` line per finding,
  made to be grepped and parsed by editors.
* ``text``: the concise line, then the source line with a caret underline
  (read from the file when it is readable; skipped when it is not). The first
  line of every entry is the concise line, so ``text`` greps as well as
  ``concise`` does, and a person sees the offending code without opening it.
* ``json``: a list of objects with the same keys in the same order (see
  `finding_to_json`), each with its ``fix`` in ruff's shape
  (`layoutcheck.lint.fixdetail.fix_json`: applicability, message, edits)
  or ``null``; a file error is an object of the same shape whose
  ``rule`` is the error's kind (``invalid-input``, ``missing-path``,
  ``internal``) and whose ``code`` is ``null``, much as ruff reports syntax
  errors.
* ``sarif``: a SARIF 2.1.0 log with the rules' metadata and docs, for code
  scanning services. A file that could not be checked because of what it
  holds (``invalid-input``: a syntax error, not UTF-8, too large) is a result
  of the rule ``invalid-input``, so code-scanning UIs show it where they show
  findings; a missing path or an internal error is a tool execution
  notification, and marks the invocation unsuccessful.
* ``github``: GitHub Actions workflow commands (``::error ...::message``),
  which GitHub shows as annotations on the pull request.

File errors (a syntax error, an unreadable or non-UTF-8 file, a missing path)
print as ``path[:line[:col]]: error: message`` in the line formats. Every
format lists entries in a stable order: path, then line, then column, then
rule; an error without a line comes first in its file.

The functions return text without a trailing newline; line formats return
``""`` when there is nothing to report, ``json`` and ``sarif`` always return
a complete document.
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from layoutcheck.version import __version__
from layoutcheck.lint.findings import INVALID_INPUT, FileError, Finding

if TYPE_CHECKING:
    from layoutcheck.lint.fixdetail import FixView
    from layoutcheck.lint.rule import LintRule

OUTPUT_FORMATS: tuple[str, ...] = ("text", "concise", "json", "sarif", "github")

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
SRCROOT = "%SRCROOT%"

_BOLD = "\x1b[1m"
_RED = "\x1b[31m"
_CYAN = "\x1b[36m"
_RESET = "\x1b[0m"

_Entry = Finding | FileError


# ---------------------------------------------------------------- ordering


def _sort_key(entry: _Entry) -> tuple[str, int, int, str]:
    """Path, line, column, rule: a file error without a line sorts first in its file."""
    if isinstance(entry, Finding):
        return (entry.path, entry.line, entry.column, entry.rule)
    return (entry.path, entry.line or 0, entry.column or 0, entry.kind)


def _ordered(findings: Iterable[Finding], errors: Iterable[FileError]) -> list[_Entry]:
    entries: list[_Entry] = [*findings, *errors]
    entries.sort(key=_sort_key)
    return entries


# ---------------------------------------------------------------- line formats


def _paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{_RESET}" if color else text


def concise_line(finding: Finding, *, color: bool = False) -> str:
    """``path:line:col: CODE [name] message``: the line every line format starts with."""
    where = _paint(f"{finding.path}:{finding.line}:{finding.column}:", _BOLD, color)
    code = _paint(finding.code, _BOLD + _RED, color)
    return f"{where} {code} [{finding.rule}] {finding.message}"


def error_line(error: FileError, *, color: bool = False) -> str:
    """``path[:line[:col]]: error: message`` for a file that could not be checked."""
    where = error.path
    if error.line is not None:
        where += f":{error.line}" if error.column is None else f":{error.line}:{error.column}"
    return f"{_paint(where + ':', _BOLD, color)} {_paint('error:', _BOLD + _RED, color)} {error.message}"


class _SourceLines:
    """Reads each file with findings at most once, for the ``text`` context lines."""

    def __init__(self) -> None:
        self._files: dict[str, list[str] | None] = {}

    def line(self, path: str, number: int) -> str | None:
        if path not in self._files:
            try:
                with open(path, encoding="utf-8", errors="replace", newline=None) as handle:
                    self._files[path] = handle.read().splitlines()
            except OSError:
                self._files[path] = None
        lines = self._files[path]
        if lines is None or not 1 <= number <= len(lines):
            return None
        return lines[number - 1]


def _context(finding: Finding, source: str, *, color: bool) -> list[str]:
    """The source line and a caret underline of the finding's range on it.

    A range that continues on later lines is underlined to the end of its
    first line. Tabs before the range are kept so the carets line up.
    """
    start = min(finding.column - 1, len(source))
    end = finding.end_column - 1 if finding.end_line == finding.line else len(source)
    end = max(start + 1, min(end, len(source)))
    pad = "".join(ch if ch == "\t" else " " for ch in source[:start])
    gutter = f"{finding.line:>5} | "
    blank = " " * (len(gutter) - 2) + "| "
    carets = _paint("^" * (end - start), _RED, color)
    return [_paint(gutter, _CYAN, color) + source, _paint(blank, _CYAN, color) + pad + carets]


def format_concise(findings: Sequence[Finding], errors: Sequence[FileError], *, color: bool = False) -> str:
    """One line per finding or error, nothing else."""
    return "\n".join(
        concise_line(e, color=color) if isinstance(e, Finding) else error_line(e, color=color)
        for e in _ordered(findings, errors)
    )


def format_text(findings: Sequence[Finding], errors: Sequence[FileError], *, color: bool = False) -> str:
    """The concise line of each entry, then its source line with carets when the file is readable."""
    sources = _SourceLines()
    blocks: list[str] = []
    for entry in _ordered(findings, errors):
        if isinstance(entry, FileError):
            blocks.append(error_line(entry, color=color))
            continue
        lines = [concise_line(entry, color=color)]
        source = sources.line(entry.path, entry.line)
        if source is not None:
            lines.extend(_context(entry, source, color=color))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# ---------------------------------------------------------------- json


def finding_to_json(finding: Finding, fix: FixView | None = None) -> dict[str, Any]:
    """A finding as the ``json`` format writes it; the key order is part of the format.

    ``fixable``: it has a fix that this run's flags apply (``--fix``, or
    ``--unsafe-fixes`` for an unsafe one); ``fix``: that fix, whatever its
    applicability (`layoutcheck.lint.fixdetail.describe_fixes` computes it), or null.
    """
    from layoutcheck.lint.fixdetail import fix_json  # the json formats only: a text run never needs it

    return {
        "rule": finding.rule,
        "code": finding.code,
        "path": finding.path,
        "line": finding.line,
        "column": finding.column,
        "end_line": finding.end_line,
        "end_column": finding.end_column,
        "message": finding.message,
        "fixable": finding.fixable,
        "fix": fix_json(fix),
    }


def error_to_json(error: FileError) -> dict[str, Any]:
    """A file error with the finding keys: ``rule`` is its kind, ``code`` and the end are null."""
    return {
        "rule": error.kind,
        "code": None,
        "path": error.path,
        "line": error.line,
        "column": error.column,
        "end_line": None,
        "end_column": None,
        "message": error.message,
        "fixable": False,
        "fix": None,
    }


def format_json(findings: Sequence[Finding], errors: Sequence[FileError],
                fixes: Mapping[Finding, FixView] | None = None) -> str:
    """A JSON list of finding and file-error objects, in the stable order; ``fixes``: each finding's fix."""
    fixes = fixes or {}
    items = [
        finding_to_json(e, fixes.get(e)) if isinstance(e, Finding) else error_to_json(e)
        for e in _ordered(findings, errors)
    ]
    return json.dumps(items, indent=2, ensure_ascii=False)


# ---------------------------------------------------------------- github


def _escape_data(value: str) -> str:
    # GitHub's workflow-command escaping (actions/toolkit, command.ts escapeData).
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    # Property values also escape the separators (command.ts escapeProperty).
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github_command(properties: Sequence[tuple[str, object]], message: str) -> str:
    """``::error key=value,...::message`` with GitHub's escaping; ``None`` values are left out."""
    props = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties if value is not None)
    return f"::error {props}::{_escape_data(message)}"


def format_github(findings: Sequence[Finding], errors: Sequence[FileError]) -> str:
    """One ``::error`` workflow command per finding or file error."""
    lines = []
    for entry in _ordered(findings, errors):
        if isinstance(entry, Finding):
            props: list[tuple[str, object]] = [
                ("file", entry.path),
                ("line", entry.line),
                ("col", entry.column),
                ("endLine", entry.end_line),
                ("endColumn", entry.end_column),
                ("title", f"{entry.code} {entry.rule}"),
            ]
        else:
            props = [("file", entry.path), ("line", entry.line), ("col", entry.column), ("title", entry.kind)]
        lines.append(github_command(props, entry.message))
    return "\n".join(lines)


# ---------------------------------------------------------------- sarif


def artifact_uri(path: str, *, root: Path | None = None) -> tuple[str, bool]:
    """The SARIF URI of ``path`` and whether it is relative to ``root`` (the current directory).

    Relative paths stay relative (forward slashes, percent-encoded); absolute
    paths under ``root`` are made relative; other absolute paths become
    ``file://`` URIs.
    """
    root = (root or Path.cwd()).resolve()
    pure = PurePath(path)
    if pure.is_absolute():
        try:
            pure = Path(path).resolve().relative_to(root)
        except ValueError:
            return Path(path).resolve().as_uri(), False
    return quote(pure.as_posix(), safe="/"), True


def _artifact_location(path: str, root: Path) -> dict[str, Any]:
    uri, relative = artifact_uri(path, root=root)
    return {"uri": uri, "uriBaseId": SRCROOT} if relative else {"uri": uri}


def _rule_docs(rule: type[LintRule]) -> str:
    return inspect.cleandoc(rule.__doc__) if rule.__doc__ else rule.message


def _rule_descriptor(rule: type[LintRule]) -> dict[str, Any]:
    docs = _rule_docs(rule)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.message},
        "fullDescription": {"text": docs, "markdown": docs},
        "help": {"text": docs, "markdown": docs},
        "defaultConfiguration": {"enabled": rule.on_by_default(), "level": "error"},
        "properties": {"fixable": rule.has_autofix()},
    }


def _bare_descriptor(code: str, name: str) -> dict[str, Any]:
    """For a finding whose rule was not passed in: SARIF still wants every ruleIndex to resolve."""
    return {"id": code, "name": name, "defaultConfiguration": {"level": "error"}}


_INVALID_INPUT_HELP = (
    "A file that could not be checked: a syntax error, a file that is not UTF-8 (or not in the "
    "encoding it declares), too large, or unreadable. Like a finding, it fails the check (exit 1); "
    "fix the file, or exclude it."
)


def _invalid_input_descriptor() -> dict[str, Any]:
    """The pseudo-rule that file errors of kind `INVALID_INPUT` are results of."""
    return {
        "id": INVALID_INPUT,
        "name": INVALID_INPUT,
        "shortDescription": {"text": "a file that could not be checked"},
        "fullDescription": {"text": _INVALID_INPUT_HELP},
        "help": {"text": _INVALID_INPUT_HELP},
        "defaultConfiguration": {"enabled": True, "level": "error"},
        "properties": {"fixable": False},
    }


def _region(line: int, column: int | None = None, end_line: int | None = None,
            end_column: int | None = None) -> dict[str, int]:
    region = {"startLine": line}
    if column is not None:
        region["startColumn"] = column
    if end_line is not None:
        region["endLine"] = end_line
    if end_column is not None:
        region["endColumn"] = end_column
    return region


def sarif_log(
    findings: Sequence[Finding],
    errors: Sequence[FileError],
    rules: Sequence[type[LintRule]],
    *,
    root: Path | None = None,
) -> dict[str, Any]:
    """The SARIF 2.1.0 log as a dict: one run, rules as ``tool.driver.rules``.

    Columns are 1-based Unicode code points (``columnKind``) and ``endColumn``
    is exclusive, as SARIF defines it. Relative URIs are resolved against
    ``%SRCROOT%``, which ``originalUriBaseIds`` maps to ``root`` (default: the
    current directory). Bad input (a file error of kind ``invalid-input``,
    such as a syntax error in checked code) is an exit-1 condition like a
    finding, so it is a result too, of the pseudo-rule ``invalid-input``
    (listed among the rules when it occurs), at the error's line when known.
    Tool and usage errors (a missing path, an internal error: exit 2) are
    error-level notifications named by their kind, and make the invocation
    unsuccessful.
    """
    root = (root or Path.cwd()).resolve()
    descriptors = [_rule_descriptor(rule) for rule in sorted(rules, key=lambda r: r.code)]
    index = {d["id"]: i for i, d in enumerate(descriptors)}

    def rule_index(rule_id: str, name: str) -> int:
        """The rule's place among the descriptors, adding one for a rule not passed in."""
        if rule_id not in index:
            index[rule_id] = len(descriptors)
            descriptors.append(_invalid_input_descriptor() if rule_id == INVALID_INPUT
                               else _bare_descriptor(rule_id, name))
        return index[rule_id]

    def location(path: str, region: dict[str, int] | None) -> dict[str, Any]:
        physical: dict[str, Any] = {"artifactLocation": _artifact_location(path, root)}
        if region is not None:
            physical["region"] = region
        return {"physicalLocation": physical}

    results = []
    notifications = []
    for entry in _ordered(sorted(findings), errors):
        if isinstance(entry, Finding):
            rule_id, name, fixable = entry.code, entry.rule, entry.fixable
            region = _region(entry.line, entry.column, entry.end_line, entry.end_column)
        else:
            region = _region(entry.line, entry.column) if entry.line is not None else None
            if entry.kind != INVALID_INPUT:
                notifications.append({
                    "level": "error",
                    "message": {"text": entry.message},
                    "descriptor": {"id": entry.kind},
                    "locations": [location(entry.path, region)],
                })
                continue
            rule_id = name = INVALID_INPUT
            fixable = False
        results.append({
            "ruleId": rule_id,
            "ruleIndex": rule_index(rule_id, name),
            "level": "error",
            "message": {"text": entry.message},
            "locations": [location(entry.path, region)],
            "properties": {"name": name, "fixable": fixable},
        })
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {
                "driver": {
                    "name": "layoutcheck",
                    "version": __version__,
                    "semanticVersion": __version__,
                    "rules": descriptors,
                },
            },
            "invocations": [{
                "executionSuccessful": all(e.kind == INVALID_INPUT for e in errors),
                "toolExecutionNotifications": notifications,
            }],
            "originalUriBaseIds": {SRCROOT: {"uri": root.as_uri().rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }


def format_sarif(
    findings: Sequence[Finding], errors: Sequence[FileError], rules: Sequence[type[LintRule]]
) -> str:
    """`sarif_log` as indented JSON."""
    return json.dumps(sarif_log(findings, errors, rules), indent=2, ensure_ascii=False)


# ---------------------------------------------------------------- entry points


def format_findings(
    findings: Sequence[Finding],
    errors: Sequence[FileError],
    *,
    output_format: str,
    rules: Sequence[type[LintRule]],
    color: bool = False,
    fixes: Mapping[Finding, FixView] | None = None,
) -> str:
    """Render ``findings`` and ``errors`` in ``output_format`` (one of `OUTPUT_FORMATS`).

    ``rules`` are the selected rules (SARIF lists their metadata); ``color``
    adds ANSI colours to the line formats and is for terminals only;
    ``fixes``: each finding's fix (`layoutcheck.lint.fixdetail.describe_fixes`), shown by ``json``.
    """
    renderers: dict[str, Callable[[], str]] = {
        "text": lambda: format_text(findings, errors, color=color),
        "concise": lambda: format_concise(findings, errors, color=color),
        "json": lambda: format_json(findings, errors, fixes),
        "sarif": lambda: format_sarif(findings, errors, rules),
        "github": lambda: format_github(findings, errors),
    }
    try:
        render = renderers[output_format]
    except KeyError:
        raise ValueError(
            f"unknown output format {output_format!r}; choose one of {', '.join(OUTPUT_FORMATS)}"
        ) from None
    return render()


STATISTICS_FORMATS = ("text", "concise", "json")
"""The output formats ``--statistics`` has a form in (ruff's too: it refuses github and sarif)."""


def format_statistics(findings: Sequence[Finding], output_format: str = "text") -> str:
    """Counts per rule, like ``ruff --statistics``: count, code, name, then ``[*]`` if fixable.

    Sorted by count (most first), then code. The fixable column appears only
    when some finding is fixable; a rule is marked when any of its findings is.
    ``json`` is ruff's list of ``{code, name, count, fixable, fixable_count}``
    (``[]`` when there is nothing to count); ``text`` and ``concise`` are the table.
    """
    if output_format not in STATISTICS_FORMATS:
        raise ValueError(f"--statistics has no {output_format} form; use one of {', '.join(STATISTICS_FORMATS)}")
    counts = Counter((f.code, f.rule) for f in findings)
    fixable_counts = Counter(f.code for f in findings if f.fixable)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0][0]))
    if output_format == "json":
        return json.dumps([{"code": code, "name": name, "count": count, "fixable": fixable_counts[code] > 0,
                            "fixable_count": fixable_counts[code]} for (code, name), count in rows], indent=2)
    if not counts:
        return ""
    fixable = set(fixable_counts)
    count_width = max(len(str(n)) for n in counts.values())
    code_width = max(len(code) for code, _ in counts)
    lines = []
    for (code, name), count in rows:
        marker = ("[*] " if code in fixable else "[ ] ") if fixable else ""
        lines.append(f"{count:>{count_width}}\t{code:<{code_width}}\t{marker}{name}")
    return "\n".join(lines)


__all__ = [
    "OUTPUT_FORMATS",
    "STATISTICS_FORMATS",
    "artifact_uri",
    "concise_line",
    "error_line",
    "finding_to_json",
    "format_findings",
    "format_statistics",
    "github_command",
    "sarif_log",
]
