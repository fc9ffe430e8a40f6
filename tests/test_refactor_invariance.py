"""Refactoring invariance: the linter follows values the way real code moves them (issue 28, point 4).

Beside the rename test (`tests/test_rename_invariance.py`): every lint fixture
project and every file of the corpus of real fixes (each alone in its own
project, no configuration) is rewritten in ways that keep its meaning
(`tests/refactoring.py`: a slice bound, index or pad width hoisted into a local;
a comprehension built by a loop with ``append`` or ``extend``, and such a loop
written as the comprehension; ``zip`` as ``enumerate`` plus
indexing; a statement under a constant flag's ``if``; a function's result
returned in a tuple and unpacked) and linted again. The findings must be the
same: same files, rules, and statements (each finding's line mapped back to the
original and taken to the first line of its statement, so a finding that moves
from a bound to the local it was hoisted into is the same one).

A rewrite the engine does not follow yet is an expected failure (strict, with
the reason): whoever makes one pass removes its mark. Each test also checks the
rewrite changed enough sites, so a rewrite that found nothing to do cannot pass.

A real tree can be checked too: point ``LAYOUTCHECK_REFACTOR_TREE`` at a checkout
that has findings (torchtitan at b5bcd76c6: about a minute; Miles at 31f1ca961: about a
minute and a half; SpecForge at a6b6b023 has none since owners are read by the flow of values),
with ``LAYOUTCHECK_REFACTOR_TRANSFORMS`` naming the rewrites (default: the ones
that pass on the fixtures); the test is skipped without it.
"""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import pytest

from layoutcheck.configfile import TABLE, LoadedConfig
from layoutcheck.lint.runner import run
from layoutcheck.lint.selection import SelectionOverrides

from refactoring import TRANSFORMS, Rewrite, anchor, rewrite

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
CORPUS = ROOT / "corpus"
PAIRS = sorted(p for p in (ROOT / "pairs").iterdir() if p.is_dir())
PROJECTS = ["flagged", "lookalikes", *(f"pairs/{p.name}/{half}" for p in PAIRS for half in ("flagged", "lookalike"))]

Key = tuple[str, int, str]

PENDING: dict[tuple[str, str], str] = {
    # (transform, "corpus" | "fixtures") -> why the engine does not follow it yet
}
"""Rewrites not followed yet, with the reason; each is a strict expected failure."""


def _marks(transform: str, group: str) -> list[pytest.MarkDecorator]:
    reason = PENDING.get((transform, group))
    return [pytest.mark.xfail(reason=reason, strict=True)] if reason else []


def _findings(root: Path, project: str, maps: dict[str, tuple[ast.Module, Rewrite | None]]) -> set[Key]:
    """``project``'s findings as (file, first line of the original statement, rule)."""
    # --preview: every rule, stable or not, must keep its findings through a rewrite.
    result = run([root / project], cwd=root, use_cache=False, jobs=1, overrides=SelectionOverrides(preview=True))
    assert not result.errors, result.errors
    out: set[Key] = set()
    for finding in result.findings:
        path = Path(finding.path).as_posix()
        # The path is relative to the project's configuration root (the project or a folder above it).
        prefixes = [Path(project), *Path(project).parents]
        key = next((k for k in (path, *((prefix / path).as_posix() for prefix in prefixes)) if k in maps), None)
        line = finding.line
        if key is not None:
            tree, done = maps[key]
            if done is not None:
                line = done.origin[line] if line < len(done.origin) else line
            line = anchor(tree, line)
        out.add((key or path, line, finding.rule))
    return out


def _folded(found: set[Key], maps: dict[str, tuple[ast.Module, Rewrite | None]]) -> set[Key]:
    """``found`` with each line inside a span a rewrite replaced taken to the span's first line."""
    out = set()
    for path, line, rule in found:
        done = maps.get(path, (None, None))[1]
        out.add((path, done.fold(line) if done is not None else line, rule))
    return out


def _copy(src: Path, dst: Path, transform: str | None) -> tuple[dict[str, tuple[ast.Module, Rewrite | None]], int]:
    """Copy the folder ``src`` to ``dst``, each Python file rewritten by ``transform`` (None: as is);
    the original tree and the rewrite of each file (by its path relative to ``dst``'s parent
    projects), and the sites changed in all."""
    shutil.copytree(src, dst)
    maps: dict[str, tuple[ast.Module, Rewrite | None]] = {}
    sites = 0
    for path in sorted(dst.rglob("*.py")):
        source = path.read_text()
        done = rewrite(source, transform) if transform else None
        if done is not None:
            path.write_text(done.text)
            sites += done.sites
        maps[path.relative_to(dst).as_posix()] = (ast.parse(source), done)
    return maps, sites


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_refactor_invariance")


@pytest.fixture(scope="module")
def corpus_projects(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    src = tmp_path_factory.mktemp("corpus_src")
    projects = []
    for pair in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        for half in ("before", "after"):
            project = src / pair.name / half
            project.mkdir(parents=True)
            (project / f"{half}.py").write_text((pair / f"{half}.py").read_text())
            (project / "layoutcheck.toml").write_text("")
            projects.append(f"{pair.name}/{half}")
    return src, projects


@pytest.fixture(scope="module")
def corpus_original(corpus_projects: tuple[Path, list[str]]) -> dict[str, set[Key]]:
    src, projects = corpus_projects
    maps = {p.relative_to(src).as_posix(): (ast.parse(p.read_text()), None) for p in src.rglob("*.py")}
    return {project: _findings(src, project, maps) for project in projects}


@pytest.fixture(scope="module")
def fixtures_original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, set[Key]]]:
    root = tmp_path_factory.mktemp("fixtures_src") / "lint"
    maps, _ = _copy(ROOT, root, None)
    return root, {project: _findings(root, project, maps) for project in PROJECTS}


MINIMUM_SITES = {"hoist": 100, "loop": 20, "extend": 20, "unloop": 8, "enumerate": 10, "flag": 100, "tuple_return": 5}
"""Sites each rewrite must change over a group, so a rewrite that matched nothing cannot pass."""


@pytest.mark.parametrize("transform", [pytest.param(t, marks=_marks(t, "corpus")) for t in TRANSFORMS])
def test_corpus_findings_survive_refactoring(transform: str, corpus_projects: tuple[Path, list[str]],
                                             corpus_original: dict[str, set[Key]], tmp_path: Path) -> None:
    src, projects = corpus_projects
    maps, sites = _copy(src, tmp_path / "out", transform)
    assert sites >= MINIMUM_SITES[transform] // 4, f"{transform} changed only {sites} sites"
    differ = {}
    for project in projects:
        copy = _folded(_findings(tmp_path / "out", project, maps), maps)
        original = _folded(corpus_original[project], maps)
        if copy != original:
            differ[project] = {"only on the original": sorted(original - copy),
                               "only on the copy": sorted(copy - original)}
    assert not differ, differ


@pytest.mark.parametrize("transform", [pytest.param(t, marks=_marks(t, "fixtures")) for t in TRANSFORMS])
def test_fixture_findings_survive_refactoring(transform: str, fixtures_original: tuple[Path, dict[str, set[Key]]],
                                              tmp_path: Path) -> None:
    _, original = fixtures_original
    out = tmp_path / "lint"
    maps, sites = _copy(ROOT, out, transform)
    assert sites >= MINIMUM_SITES[transform], f"{transform} changed only {sites} sites"
    differ = {}
    for project in PROJECTS:
        copy = _folded(_findings(out, project, maps), maps)
        before = _folded(original[project], maps)
        if copy != before:
            differ[project] = {"only on the original": sorted(before - copy), "only on the copy": sorted(copy - before)}
    assert not differ, differ


def test_the_rewrites_keep_the_code_running() -> None:
    """Each rewrite of a small program computes what the program computed (the rewrites are
    meaning-preserving, so a difference in findings is the linter's)."""
    program = '''
def helper(xs, p):
    return [x * 2 for x in xs if x > p]


def evens(xs):
    found = []
    for x in xs:
        if x % 2 == 0:
            found.append(x * 3)
    return found


def main(rows, sizes, p):
    out = []
    for row, size in zip(rows, sizes):
        width = max(len(r) for r in rows)
        padded = row + [0] * (width - len(row))
        out.append(padded[size - 1 : width - p])
    return out, helper(sizes, p), sum(s for s in sizes), evens(sizes)
'''
    expected = _run(program)
    for transform in TRANSFORMS:
        done = rewrite(program, transform)
        assert done.sites, transform
        assert _run(done.text) == expected, (transform, done.text)
        assert len(done.origin) == len(done.text.splitlines()) + 1


def _run(text: str) -> object:
    scope: dict[str, object] = {}
    exec(compile(text, "<rewritten>", "exec"), scope)  # noqa: S102 - the test's own program
    return scope["main"]([[1, 2], [3, 4, 5], [6]], [1, 2, 1], 0)  # type: ignore[operator]


@pytest.mark.skipif(not os.environ.get("LAYOUTCHECK_REFACTOR_TREE"),
                    reason="set LAYOUTCHECK_REFACTOR_TREE to a checkout (torchtitan at b5bcd76c6) to rewrite and lint it")
def test_a_real_tree_has_the_same_findings_rewritten(tmp_path: Path) -> None:
    tree = Path(os.environ["LAYOUTCHECK_REFACTOR_TREE"]).resolve()
    wanted = os.environ.get("LAYOUTCHECK_REFACTOR_TRANSFORMS", "")
    transforms = wanted.split(",") if wanted else [t for t in TRANSFORMS if (t, "fixtures") not in PENDING]

    def findings(root: Path, maps: dict[str, tuple[ast.Module, Rewrite | None]]) -> set[Key]:
        loaded = LoadedConfig(None, root, {}, TABLE)  # no configuration: as a new user would
        result = run([root], cwd=root, use_cache=False, jobs=2, loaded=loaded, overrides=SelectionOverrides(preview=True))
        out = set()
        for f in result.findings:
            path = Path(f.path).as_posix()
            tree_and_map = maps.get(path)
            line = f.line
            if tree_and_map is not None:
                original, done = tree_and_map
                if done is not None and line < len(done.origin):
                    line = done.origin[line]
                line = anchor(original, line)
            out.add((path, line, f.rule))
        return out

    def copy(transform: str | None) -> tuple[Path, dict[str, tuple[ast.Module, Rewrite | None]]]:
        out = tmp_path / (transform or "original")
        shutil.copytree(tree, out, ignore=shutil.ignore_patterns(".git"))
        maps: dict[str, tuple[ast.Module, Rewrite | None]] = {}
        for path in out.rglob("*.py"):
            if not path.is_file():
                continue
            source = path.read_text(errors="replace")
            try:
                original = ast.parse(source)
            except SyntaxError:
                continue
            done = rewrite(source, transform) if transform else None
            if done is not None:
                path.write_text(done.text)
            maps[path.relative_to(out).as_posix()] = (original, done)
        return out, maps

    root, maps = copy(None)
    original = findings(root, maps)
    assert original, "the tree has findings to compare"
    differ = {}
    for transform in transforms:
        root, maps = copy(transform)
        got = _folded(findings(root, maps), maps)
        before = _folded(original, maps)
        if got != before:
            differ[transform] = {"only on the original": sorted(before - got), "only on the copy": sorted(got - before)}
    assert not differ, differ
