"""Rule documentation, rendered from the rule classes themselves.

``layoutcheck rules``, ``layoutcheck rule NAME`` and the docs' rules page
all come from here, so docs are written once, in the rule's docstring, and
never retyped (no list is kept by hand in several places).
"""

from __future__ import annotations

import inspect
import json
import textwrap
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from layoutcheck.lint.rule import LintRule

__all__ = ["DOC_FORMATS", "fix_label", "precision_label", "render_rule", "render_rules", "rule_record", "status_label",
           "status_sentence", "summary"]

DOC_FORMATS = ("text", "json", "markdown")


def docs(rule: type[LintRule]) -> str:
    """The rule's docstring, dedented: its user documentation."""
    return inspect.cleandoc(rule.__doc__ or "")


def summary(rule: type[LintRule]) -> str:
    """The first line of the docs: a one-line description."""
    text = docs(rule)
    return text.splitlines()[0].strip() if text else rule.message


def rule_record(rule: type[LintRule]) -> dict[str, Any]:
    """Everything known about a rule, as JSON-ready data."""
    return {
        "code": rule.code,
        "name": rule.name,
        "message": rule.message,
        "summary": summary(rule),
        "default_enabled": rule.on_by_default(),
        "status": status_label(rule),
        "precision": None if rule.measured is None else {
            "findings": rule.measured.findings, "true": rule.measured.true, "precision": rule.measured.precision,
        },
        "fixable": rule.has_autofix(),
        "fix_applicability": list(rule.fix_applicabilities()),
        "docs": docs(rule),
        "examples": {
            "valid": [asdict(case) for case in rule.valid],
            "invalid": [asdict(case) for case in rule.invalid],
        },
    }


def _yes(flag: bool, yes: str = "yes", no: str = "no") -> str:
    return yes if flag else no


def status_label(rule: type[LintRule]) -> str:
    """``stable`` or ``preview`` (`layoutcheck.lint.precision`)."""
    return "preview" if rule.preview else "stable"


def precision_label(rule: type[LintRule]) -> str:
    """The measured precision on the corpus: ``6/19 (32%)``, ``0/0`` (no finding), ``-`` (not measured)."""
    measured = rule.measured
    if measured is None:
        return "-"
    if not measured.findings:
        return "0/0"
    return f"{measured.true}/{measured.findings} ({100 * measured.true / measured.findings:.0f}%)"


def fix_label(rule: type[LintRule]) -> str:
    """The Fix column: ``no``, or the applicabilities its examples' fixes have (``safe``, ``unsafe``,
    ``safe/unsafe``): derived from the examples, never written by hand."""
    return "/".join(rule.fix_applicabilities()) or "no"


def _table(rules: Sequence[type[LintRule]]) -> str:
    rows = [("Code", "Name", "Status", "Default", "Precision", "Fix", "Summary")]
    rows += [(r.code, r.name, status_label(r), _yes(r.on_by_default(), "on", "off"), precision_label(r), fix_label(r),
              summary(r)) for r in rules]
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:6], widths)) + "  " + row[6] for row in rows
    ) + "\n\n" + _PREVIEW_NOTE


_PREVIEW_NOTE = (
    "Precision: true findings over all findings on the precision corpus (17 trainers, no configuration, every\n"
    "finding read; benchmarks/lint_truth.toml). A rule below 90% or with no finding there is in preview: it runs\n"
    "with --preview (or `preview = true`), or when selected by its exact code or name."
)


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown_table(rules: Sequence[type[LintRule]]) -> str:
    lines = ["| Code | Name | Status | Default | Precision | Fix | Summary |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rules:
        lines.append(
            f"| {r.code} | `{r.name}` | {status_label(r)} | {_yes(r.on_by_default(), 'on', 'off')} | "
            f"{precision_label(r)} | {fix_label(r)} | {_markdown_cell(summary(r))} |"
        )
    return "\n".join(lines)


def _examples_text(rule: type[LintRule]) -> list[str]:
    out = []
    for title, cases in (("Flagged", rule.invalid), ("Not flagged", rule.valid)):
        for number, case in enumerate(cases, start=1):
            out.append(f"{title} ({number}):")
            out.append(textwrap.indent(case.code.strip("\n"), "    "))
            fixed = getattr(case, "replacement", None)
            if fixed is not None:
                out.append(f"  fixed to ({case.applicability} fix):")
                out.append(textwrap.indent(fixed.strip("\n"), "    "))
            out.append("")
    return out


def _suppress_hint(rule: type[LintRule]) -> str:
    from layoutcheck.lint.suppressions import UnusedSuppression

    if rule is UnusedSuppression:  # judged after suppressions apply: only per-file-ignores silence it
        return "Silence with `per-file-ignores`."
    return f"Suppress with `# noqa: {rule.code}` or `# layoutcheck: ignore[{rule.name}]`."


def _autofix(rule: type[LintRule]) -> str:
    kinds = rule.fix_applicabilities()
    if not kinds:
        return "no"
    return " or ".join(f"{kind} (--fix{' --unsafe-fixes' if kind == 'unsafe' else ''})" for kind in kinds)


def status_sentence(rule: type[LintRule]) -> str:
    """``Status: stable (precision on the corpus: 8/8 true (100%)).``, or for a preview rule how to run it."""
    measured = rule.measured
    evidence = "" if measured is None else f" (precision on the corpus: {measured.describe()})"
    if rule.preview:
        return (f"Status: preview{evidence}: runs with --preview, or when selected as {rule.code} or {rule.name}.")
    return f"Status: stable{evidence}."


def _rule_text(rule: type[LintRule]) -> str:
    lines = [
        f"{rule.name} ({rule.code})",
        status_sentence(rule),
        f"Default: {_yes(rule.on_by_default(), 'on', 'off')}. Autofix: {_autofix(rule)}. "
        + _suppress_hint(rule),
        "",
        docs(rule),
        "",
        "Message:",
        f"    {rule.message}",
        "",
    ]
    if rule.invalid or rule.valid:
        lines += ["Examples:", "", *_examples_text(rule)]
    return "\n".join(lines).rstrip() + "\n"


def _rule_markdown(rule: type[LintRule]) -> str:
    lines = [f"## `{rule.name}` ({rule.code})", "", status_sentence(rule), "", docs(rule), "",
             f"Message: {rule.message}", ""]
    for title, cases in (("Flagged", rule.invalid), ("Not flagged", rule.valid)):
        if cases:
            lines += [f"### {title}", ""]
            for case in cases:
                lines += ["```python", case.code.strip("\n"), "```", ""]
                fixed = getattr(case, "replacement", None)
                if fixed is not None:
                    lines += [f"Fixed to ({case.applicability} fix):", "", "```python", fixed.strip("\n"), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def render_rule(rule: type[LintRule], output_format: str = "text") -> str:
    """One rule's docs, message and examples in ``output_format`` (`DOC_FORMATS`)."""
    if output_format == "json":
        return json.dumps(rule_record(rule), indent=2, ensure_ascii=False)
    if output_format == "markdown":
        return _rule_markdown(rule)
    return _rule_text(rule)


def render_rules(rules: Sequence[type[LintRule]], output_format: str = "text") -> str:
    """Every rule: a table (text, or markdown) or a JSON list of records."""
    if output_format == "json":
        return json.dumps([rule_record(r) for r in rules], indent=2, ensure_ascii=False)
    if output_format == "markdown":
        return _markdown_table(rules)
    return _table(rules)
