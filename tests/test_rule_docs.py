"""Rule metadata and documentation: what `layoutcheck rule NAME` prints must be complete.

Sections in ruff's style, unique codes in their ranges, kebab-case names
that match their modules, and one-line messages that say what is wrong and
end with an imperative sentence saying what to do. Checked for the class
message and for the messages the rules actually report on their examples.
"""

from __future__ import annotations

import inspect
import re

import pytest

from layoutcheck.lint.engine import lint_source
from layoutcheck.lint.registry import all_rules
from layoutcheck.lint.rule import LintRule
from layoutcheck.lint.settings import LintSettings

REQUIRED = ("## What it does", "## Why it matters", "## Example", "## How to fix")
OPTIONAL = ("## Known problems", "## Configuration", "## Fix safety")
RULES = all_rules()
# Code ranges by kind (as TorchFix reserves them): LC0xx internal, LC1xx padding
# ownership and geometry, LC2xx buckets and configuration literals.
RANGES = {"LC0": "internal", "LC1": "padding ownership", "LC2": "buckets and config literals"}
NOT_IMPERATIVE = {"the", "this", "that", "it", "a", "an", "there", "these", "those", "one", "each"}


def _docs(rule: type[LintRule]) -> str:
    return inspect.cleandoc(rule.__doc__ or "")


def _ids(rule: type[LintRule]) -> str:
    return rule.name


@pytest.mark.parametrize("rule", RULES, ids=_ids)
def test_docs_have_the_sections_in_order(rule: type[LintRule]) -> None:
    docs = _docs(rule)
    lines = docs.splitlines()
    headings = [line for line in lines if line.startswith("#")]
    assert [h for h in headings if h in REQUIRED] == list(REQUIRED)
    assert set(headings) <= set(REQUIRED + OPTIONAL), headings
    assert lines[0] and not lines[0].startswith("#"), "the first line is the one-line summary"
    for heading in REQUIRED:
        body = docs.split(heading, 1)[1].split("\n## ", 1)[0]
        assert body.strip(), f"{heading} is empty"
    assert "## Fix safety" in headings, "say why the fix is safe, or why there is none"
    fix_safety = docs.split("## Fix safety", 1)[1].split("\n## ", 1)[0].strip()
    if not rule.has_autofix():
        assert fix_safety.startswith("No autofix") and len(fix_safety.split(".")[0]) > len("No autofix")
    for applicability in rule.fix_applicabilities():  # the examples' fixes, each explained
        assert re.search(rf"\b{applicability}\b", fix_safety), (rule.name, applicability)


@pytest.mark.parametrize("rule", RULES, ids=_ids)
def test_code_name_and_module(rule: type[LintRule]) -> None:
    assert re.fullmatch(r"LC\d{3}", rule.code)
    assert rule.code[:3] in RANGES and rule.code[:3] != "LC0", "LC0xx is the engine's"
    assert re.fullmatch(r"[a-z]+(-[a-z]+)+", rule.name)
    assert rule.__module__.rsplit(".", 1)[-1] == rule.name.replace("-", "_")


def test_codes_and_names_are_unique() -> None:
    assert len({r.code for r in RULES}) == len(RULES)
    assert len({r.name for r in RULES}) == len(RULES)


def _check_message(text: str) -> None:
    assert "\n" not in text
    assert "`" in text, "name the concrete thing in backticks"
    sentences = [s for s in re.split(r"(?<=[.!])\s+(?=[A-Z])", text) if s]
    assert len(sentences) >= 2, f"what is wrong, then what to do: {text!r}"
    hint = sentences[-1]
    first = hint.split()[0].strip("`").lower()
    assert hint.endswith("."), text
    assert first not in NOT_IMPERATIVE and not first.endswith(("ing", "ed")), f"not imperative: {hint!r}"


@pytest.mark.parametrize("rule", RULES, ids=_ids)
def test_class_message_states_the_problem_then_the_fix(rule: type[LintRule]) -> None:
    _check_message(rule.message)


@pytest.mark.parametrize("rule", RULES, ids=_ids)
def test_reported_messages_state_the_problem_then_the_fix(rule: type[LintRule]) -> None:
    for case in rule.invalid:
        result = lint_source(case.code, case.path, [rule], LintSettings(**case.settings))
        for finding in result.findings:
            _check_message(finding.message)


@pytest.mark.parametrize("rule", RULES, ids=_ids)
def test_docs_use_the_geometry_vocabulary(rule: type[LintRule]) -> None:
    """Docs speak the design page's names (T, P, A, cp, the invariants) rather than restating formulas."""
    docs = _docs(rule)
    assert re.search(r"`(P|T|A|cp)`|invariant|geometry", docs), rule.name
