"""Whole-file fixtures: trainer-shaped code with known findings, and look-alikes that stay silent.

``fixtures/lint/flagged/*.py`` mark each expected finding with a trailing
``# expect: rule-name`` comment on the line the finding starts; the test
compares exact ``(line, rule)`` sets with every rule selected.
``fixtures/lint/lookalikes/*.py`` must produce no finding at all. The files
are read as text and never imported (the linter never executes code).
Settings come from ``fixtures/lint/pyproject.toml``, as they would for
``layoutcheck check fixtures/lint``.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from layoutcheck.config import validate_table
from layoutcheck.lint.engine import lint_source
from layoutcheck.lint.registry import all_rules, rule_by_name
from layoutcheck.lint.settings import LintSettings

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
FLAGGED = sorted((ROOT / "flagged").glob("*.py"))
LOOKALIKES = sorted((ROOT / "lookalikes").glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*([a-z0-9\-]+(?:\s*,\s*[a-z0-9\-]+)*)")


def _settings() -> LintSettings:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["layoutcheck"]
    return validate_table(table, ROOT / "pyproject.toml").settings()


def _lint(path: Path, settings: LintSettings | None = None):
    rel = path.relative_to(ROOT.parents[1]).as_posix()
    result = lint_source(path.read_text(), rel, list(all_rules()), settings or _settings())
    assert not result.errors, result.errors
    return result.findings


def _expected(path: Path) -> set[tuple[int, str]]:
    out = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        found = EXPECT.search(line)
        if found:
            out |= {(number, name.strip()) for name in found.group(1).split(",")}
    return out


@pytest.mark.parametrize("path", FLAGGED, ids=lambda p: p.stem)
def test_flagged_fixture_has_exactly_the_marked_findings(path: Path) -> None:
    found = _lint(path)
    assert {(f.line, f.rule) for f in found} == _expected(path), [
        f"{f.line}:{f.column} {f.rule}: {f.message}" for f in found
    ]


@pytest.mark.parametrize("path", LOOKALIKES, ids=lambda p: p.stem)
def test_lookalike_fixture_is_silent(path: Path) -> None:
    found = _lint(path)
    assert found == [], [f"{f.line}:{f.column} {f.rule}: {f.message}" for f in found]


def test_fixture_sets_are_balanced_and_cover_every_rule() -> None:
    assert len(LOOKALIKES) >= len(FLAGGED) >= 8
    marked = {rule for path in FLAGGED for _, rule in _expected(path)}
    for name in marked:
        rule_by_name(name)  # a misspelt marker fails here, not silently
    assert marked == {rule.name for rule in all_rules()}
    assert any(not _expected(path) for path in FLAGGED), "keep clean owners and consumers among the flagged"


def test_configured_owner_is_what_keeps_the_packer_clean() -> None:
    path = ROOT / "flagged" / "packing.py"
    clean = {(f.line, f.rule) for f in _lint(path)}
    unconfigured = {(f.line, f.rule) for f in _lint(path, LintSettings())}
    gained = unconfigured - clean
    assert gained and {rule for _, rule in gained} == {"padding-outside-owner"}


def test_fixtures_are_never_imported() -> None:
    imported = [
        name for name, module in list(sys.modules.items())
        if str(getattr(module, "__file__", None) or "").startswith(str(ROOT))
    ]
    assert imported == []
