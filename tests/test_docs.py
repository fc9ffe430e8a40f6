"""The documentation site builds with ``mkdocs build --strict``, and its reference pages come from the code.

The build runs the real MkDocs (Material theme) with the hook of
``docs/hooks/reference.py``, into a temporary folder: a broken link, a
missing anchor, a page left out of the navigation or a marker with no
generator fails it. The generated pages are then read back and checked
against the objects they are generated from.
"""

from __future__ import annotations

import dataclasses
import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_hook():
    spec = importlib.util.spec_from_file_location("reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    return out


def page(site: Path, name: str) -> str:
    """A built page's text, tags stripped (what a reader sees, near enough)."""
    raw = (site / name / "index.html").read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def test_every_rule_has_its_docs_and_examples_on_the_rules_page(site):
    from layoutcheck.lint.registry import all_rules
    from layoutcheck.lint.ruledocs import summary

    text = page(site, "rules")
    for rule in all_rules():
        assert f"{rule.name} ({rule.code})" in text and summary(rule).replace("`", "") in text, rule.name
        for case in [*rule.invalid, *rule.valid]:
            first = next(line.strip() for line in case.code.splitlines() if line.strip())
            assert first in text, (rule.name, first)


def test_every_configuration_key_and_environment_variable_is_documented(site):
    from layoutcheck.lint.configdocs import keys
    from layoutcheck.runtime.hooks import settings

    text = page(site, "configuration")
    for key in keys():
        assert key.name in text and key.type.replace("`", "") in text, key.name
    debug = page(site, "debug-run")
    for name in ("ENV_MODE", "ENV_CONFIG", "ENV_REPORT", "ENV_TRACE"):
        assert getattr(settings, name) in debug, name


def test_every_invariant_and_command_is_documented(site):
    from layoutcheck.cli import build_parser
    from layoutcheck.runtime.contract import common

    text = page(site, "runtime-checks")
    for code in [f"O{i}" for i in range(1, 6)] + [f"G{i}" for i in range(1, 7)] + ["X1"]:
        assert re.search(rf"^{code}¶?$", text, flags=re.M), code
    assert common.HINTS["O3"] in text and "owner.check_rollout" in text
    cli = page(site, "cli")
    import argparse

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert len(commands) >= 8
    for command in commands:
        assert f"layoutcheck {command}" in cli, command
    assert "usage: layoutcheck check" in cli and "--statistics" in cli


def test_the_figures_page_is_the_benchmarks_readme(site):
    text = page(site, "figures")
    for script in sorted(p.name for p in (ROOT / "benchmarks").glob("*.py")
                         if f"## `{p.name}`" in (ROOT / "benchmarks" / "README.md").read_text()):
        assert script in text, script
    assert "3.12 s" in text and "Measured" in text  # report_ranks.py's 128-rank row, and the measured sections


def test_a_marker_without_a_generator_fails_the_build():
    hook = load_hook()
    assert hook.on_page_markdown("a\n<!-- generate: configuration -->\nb", None, None, None).startswith("a\n| Key |")
    with pytest.raises(KeyError, match="no generator for `<!-- generate: nothing -->`"):
        hook.on_page_markdown("<!-- generate: nothing -->", "page.md", None, None)


CITED_ELSEWHERE = ("DESIGN.md", "STYLE.md", "shared/")
"""Files of the notes the project grew from, which the repository does not have."""


def test_no_file_outside_the_repository_is_cited():
    # docs/design.md and docs/development.md say in their own words what those notes said; code, rule
    # docs, fixtures and tests cite their anchors. This module and test_readme.py name the files to
    # forbid them.
    exempt = {Path(__file__).resolve(), ROOT / "tests" / "test_readme.py"}
    skipped_folders = {".git", "site", "build", "dist", "__pycache__", "node_modules"}
    suffixes = {".py", ".md", ".toml", ".yaml", ".yml", ".cfg", ".txt", ".ini", ".json"}
    checked = 0
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if any(part in skipped_folders or part.startswith(".") and part != ".ci" for part in parts[:-1]):
            continue
        if path.suffix not in suffixes or not path.is_file() or path in exempt or "egg-info" in str(path):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        checked += 1
        for name in CITED_ELSEWHERE:
            assert name not in text, f"{path.relative_to(ROOT)} cites {name}"
    assert checked > 300, checked


def test_docs_and_test_extras_install_mkdocs_as_ranges():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the core dependency tomli is the backport
        import tomli as tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("docs", "test"):
        names = {re.split(r"[<>=!~ \[]", req, maxsplit=1)[0]: req for req in extras[extra]}
        for name in ("mkdocs", "mkdocs-material"):
            assert name in names and re.search(r">=.*,<", names[name]), (extra, names.get(name))


def test_the_settings_the_reference_reads_are_the_ones_the_linter_reads():
    # The configuration page is generated from the same dataclasses `layoutcheck check` reads.
    from layoutcheck.lint.configdocs import keys
    from layoutcheck.lint.settings import CheckSettings

    assert {k.field for k in keys() if k.field} == {f.name for f in dataclasses.fields(CheckSettings)}
