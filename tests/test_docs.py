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

import docblocks
import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_hook():
    spec = importlib.util.spec_from_file_location("reference_hook", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_docs")


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


def test_the_committed_reference_sections_are_what_the_code_generates_now():
    # The generated sections are committed so that the pages read right on GitHub; this fails while one is stale
    # (after a change to a rule, a key, an environment variable, a check's message or an option).
    hook = load_hook()
    stale = hook.stale_sections()
    assert not stale, (f"stale generated sections {({str(p.relative_to(ROOT)): n for p, n in stale.items()})}: "
                       f"run `{hook.REGENERATE}` and commit the result")
    names = {m["name"] for path in hook.pages() for m in hook.OPEN.finditer(path.read_text(encoding="utf-8"))}
    assert names == set(hook.GENERATORS)  # every generator has its section, and every section its end marker
    # the command the docs give for it is the one that checks and writes
    proc = subprocess.run([sys.executable, "docs/hooks/reference.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0 and "up to date" in proc.stdout, proc.stdout + proc.stderr
    assert hook.REGENERATE in (ROOT / "docs" / "development.md").read_text()


def test_a_stale_section_is_found_and_rewritten_and_bad_markers_are_errors():
    hook = load_hook()
    fresh = hook.configuration().strip()
    page = "intro\n<!-- generate: configuration -->\n| Key | old |\n<!-- end generate -->\nafter\n"
    text, stale = hook.regenerate(page, "page.md")
    assert stale == ["configuration"]
    assert text == f"intro\n<!-- generate: configuration -->\n\n{fresh}\n\n<!-- end generate -->\nafter\n"
    assert hook.regenerate(text, "page.md") == (text, [])
    with pytest.raises(hook.MarkerError, match=r"page.md:1: no generator for `<!-- generate: nothing -->`"):
        hook.regenerate("<!-- generate: nothing -->\n<!-- end generate -->", "page.md")
    with pytest.raises(hook.MarkerError, match=r"page.md:2: `<!-- generate: cli -->` has no `<!-- end generate -->`"):
        hook.regenerate("a\n<!-- generate: cli -->\nb\n<!-- generate: rules -->\n<!-- end generate -->", "page.md")


def test_the_site_build_warns_on_a_stale_section(caplog):
    hook = load_hook()

    class File:
        src_uri = "configuration.md"

    class Page:
        file = File()

    stale = "<!-- generate: environment -->\n| old |\n<!-- end generate -->\n"
    with caplog.at_level("WARNING", logger="mkdocs.hooks.reference"):
        built = hook.on_page_markdown(stale, Page(), None, None)
    assert "`LAYOUTCHECK_CONFIG`" in built and "| old |" not in built  # the site shows the code's text
    assert "configuration.md: generated section(s) environment differ from the code" in caplog.text


def test_the_404_page_links_from_the_site_path(site):
    # Without site_url, MkDocs writes the 404 page's links relative to the root, which breaks when the site is
    # served under a sub-path (a GitHub Pages project site): they must be absolute, under site_url's path.
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!ENV", lambda loader, node: loader.construct_sequence(node)[-1])
    url = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)["site_url"]
    path = re.match(r"https?://[^/]+(/.*)$", url)[1]
    assert path.endswith("/") and path != "/"
    links = re.findall(r'(?:href|src)="([^"#]+)"', (site / "404.html").read_text(encoding="utf-8"))
    local = [link for link in links if not link.startswith(("http:", "https:", "data:"))]
    assert local and all(link.startswith(path) for link in local), local


# --- the commands of the README and the docs, and the paths they cite ----------------------------------


def test_every_command_block_runs_or_says_why_not():
    # Commands are `console` blocks (run by the tests below and test_readme.py) or `sh` blocks, each marked with
    # the reason it cannot run here; a reason that names a test must name one that exists.
    found = {"console": 0, "sh": 0}
    for path in docblocks.pages():
        for block in docblocks.blocks(path):
            assert block.lang in {"", "text", "sh", "console", "toml", "yaml", "python"}, str(block)
            if block.lang == "sh":
                assert block.why, f"{block}: an sh block without `<!-- not run: why -->` before it: {block.body!r}"
                for named in re.findall(r"tests/[\w/]+\.py", block.why):
                    assert (ROOT / named).is_file(), (str(block), named)
            if block.lang == "console":
                assert block.why is None and block.body.startswith("$ "), str(block)
                docblocks.commands(block.body)
            if block.lang in found:
                found[block.lang] += 1
    assert found["console"] >= 3 and found["sh"] >= 10, found


DOC_CONSOLES = [path for path in docblocks.pages()[1:]
                if any(b.lang == "console" for b in docblocks.blocks(path))]


@pytest.mark.parametrize("path", DOC_CONSOLES, ids=lambda p: p.name)
def test_the_console_blocks_of_a_page_run_as_written(path, tmp_path):
    # Each page's console blocks run in order in a fresh copy of the checkout, as a reader in a clone runs them.
    clone = docblocks.copy_of_checkout(tmp_path / "clone")
    for block in docblocks.blocks(path):
        if block.lang == "console":
            docblocks.run_console_block(block, clone)


def test_the_console_excerpts_are_compared_line_for_line():
    # The comparison the two tests above rely on: `...` elides lines, and nothing else does.
    seen = ["a", "b", "c", "d"]
    assert docblocks.mismatch(["a", "b", "...", "d"], seen) is None
    assert docblocks.mismatch(["...", "c", "d"], seen) is None
    assert docblocks.mismatch(["a", "...", "d ..."], ["a", "x", "d /tmp/run.json"]) is None
    assert docblocks.mismatch(["a", "c", "..."], seen)  # b is not shown and not elided
    assert docblocks.mismatch(["b", "..."], seen)  # the first line shown is the first printed
    assert docblocks.mismatch(["a", "..."], []) and docblocks.mismatch(["a", "b"], seen)  # nor d after b


REPOSITORY_PATH = re.compile(r"(?<![\w./-])(?:\.ci|benchmarks|docs|fixtures|layoutcheck|rules|startup|tests)/[\w./+-]*")


def cited_paths(path: Path) -> list[str]:
    """The repository paths a page cites: in inline code, in `not run` reasons, and as relative links."""
    text = re.sub(r"^```.*?^```$", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    cited = []
    for span in re.findall(r"`([^`\n]+)`", text) + re.findall(r"<!-- not run: (.*?) -->", text):
        cited += [m.rstrip(".") for m in REPOSITORY_PATH.findall(span) if not re.search(r"[*<>{]", m)]
    for link in re.findall(r"\]\(([^)\s#]+)", text):
        if not re.match(r"[a-z]+:", link):
            cited.append(str((path.parent / link).resolve().relative_to(ROOT)))
    return cited


def test_every_repository_path_the_docs_cite_exists():
    pages = [*docblocks.pages(), ROOT / "benchmarks" / "README.md", ROOT / "tests" / "trainers" / "README.md"]
    cited = {(str(page.relative_to(ROOT)), name) for page in pages for name in cited_paths(page)}
    assert len(cited) > 100 and ("docs/boundaries.md", "tests/trainers/test_presets.py") in cited
    missing = sorted((page, name) for page, name in cited if not (ROOT / name).exists())
    assert not missing, f"pages cite paths that do not exist: {missing}"


def model_modules_table(text: str) -> set[str]:
    """The modules named in the rows of docs/development.md's table of `layoutcheck/model/`."""
    section = text.split("\n## The modules of `layoutcheck/model/`\n", 1)
    assert len(section) == 2, "docs/development.md has no section 'The modules of `layoutcheck/model/`'"
    body = section[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(\w+\.py)` \| \S", body, flags=re.M))


def test_every_module_of_the_model_has_a_line_in_the_development_page():
    # A new stage of the engine is findable by name, with what it holds; a row for a module that is
    # gone is stale. Both directions fail.
    modules = {p.name for p in (ROOT / "layoutcheck" / "model").glob("*.py")} - {"__init__.py"}
    named = model_modules_table((ROOT / "docs" / "development.md").read_text(encoding="utf-8"))
    assert len(modules) > 50 and {"reuse.py", "callables.py", "unitpartners.py"} <= modules
    assert not modules - named, f"modules of layoutcheck/model/ missing from docs/development.md's table: {sorted(modules - named)}"
    assert not named - modules, f"docs/development.md's table names modules that do not exist: {sorted(named - modules)}"
    stripped = "\n## The modules of `layoutcheck/model/`\n| Module | Holds |\n|---|---|\n| `reuse.py` | x |\n## Next"
    assert model_modules_table(stripped) == {"reuse.py"}  # a module left out of a table is found missing


STATUS_CLAIM = re.compile(r"\b(LC\d{3})\)?,? (?:is |are )?\(?(stable|preview)\b")
"""A rule's status stated in prose: ``LC133 (preview)``, ``LC132 is stable``."""


def status_claims(text: str) -> list[tuple[str, str]]:
    return STATUS_CLAIM.findall(text)


def test_every_rule_status_a_page_states_is_the_precision_tables():
    # The release rule moves rules between preview and stable (`layoutcheck/lint/precision.py`); prose that
    # names a status must move with it. benchmarks/README.md is history (a status then) and rules.md is
    # generated from the table.
    from layoutcheck.lint.precision import MEASURED

    pages = [p for p in docblocks.pages() if p.name != "rules.md"]
    claims = [(p.name, code, status) for p in pages for code, status in status_claims(p.read_text(encoding="utf-8"))]
    assert claims, "no page states a rule's status any more: drop this test or its pattern"
    wrong = [(page, code, status, MEASURED[code].status) for page, code, status in claims if MEASURED[code].status != status]
    assert not wrong, f"pages state a status the precision table does not give (page, rule, stated, actual): {wrong}"
    assert status_claims("flagged by LC133 (preview). LC132 is stable") == [("LC133", "preview"), ("LC132", "stable")]


def test_the_install_page_gives_the_readme_commands():
    # docs/install.md repeats the README's install and set-up commands, which tests/test_readme.py runs or checks.
    readme = {b.body for b in docblocks.blocks(ROOT / "README.md") if b.lang == "sh"}
    install = [b.body for b in docblocks.blocks(ROOT / "docs" / "install.md") if b.lang == "sh"]
    setup = [b.body for b in docblocks.blocks(ROOT / "README.md") if b.lang == "sh" and "pip install -e" in b.body]
    assert len(install) == 3 and install[0] in readme and install[1] in readme
    assert install[2] == "".join(setup), (install[2], setup)


def test_ci_installs_layoutcheck_as_the_install_page_does():
    # There is no release on a package index: a job that installs `layoutcheck` by name fails.
    readme = (ROOT / "README.md").read_text()
    (requirement,) = set(re.findall(r'"(layoutcheck @ git\+https://[^"]+)"', readme))
    installs = [line for line in (ROOT / "docs" / "ci.md").read_text().splitlines() if "pip install" in line]
    assert installs
    for line in installs:
        assert f'"{requirement}"' in line and not re.search(r"\slayoutcheck(\s|$)", line), line


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
