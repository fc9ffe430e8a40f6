"""Rename invariance: the linter finds layout bugs by what code does, not by what it is named.

Every lint fixture project is copied with every identifier it defines renamed
consistently (`tests/renaming.py`: functions, classes, parameters, methods'
receivers ``self``/``cls``, locals, attributes, keyword arguments, field-name
strings, module files; one bijection for the whole project, so the code means
exactly what it meant) and linted with
no configuration beyond the fixture's own, itself renamed. The findings must be
the same: same files (by their original names), lines and rules. A rule that
needed a name to fire finds nothing on the copy and fails here. The corpus of
real fixes (``fixtures/lint/corpus``) is renamed and linted the same way, each
file alone in its own project.

A real tree can be checked too: point ``LAYOUTCHECK_RENAME_TREE`` at a checkout
(Miles at 31f1ca961, extracted outside the repository); the test is skipped
without it. Renaming a tree of that size takes minutes (libcst), so it is a
test to run on demand.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from layoutcheck.configfile import TABLE, LoadedConfig
from layoutcheck.lint.runner import run
from layoutcheck.lint.selection import SelectionOverrides

from renaming import Renaming, rename_project

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
PAIRS = sorted(p for p in (ROOT / "pairs").iterdir() if p.is_dir())
PROJECTS = ["flagged", "lookalikes", *(f"pairs/{p.name}/{half}" for p in PAIRS for half in ("flagged", "lookalike"))]


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_rename_invariance")


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Renaming]:
    out = tmp_path_factory.mktemp("renamed") / "lint"
    return out, rename_project(ROOT, out)


def _findings(root: Path, project: str, renaming: Renaming | None) -> set[tuple[str, int, str]]:
    # --preview: every rule, stable or not, must be blind to names.
    result = run([root / project], cwd=root, use_cache=False, jobs=1, overrides=SelectionOverrides(preview=True))
    assert not result.errors, result.errors
    back = {new: old for old, new in renaming.modules.items()} if renaming is not None else {}
    out = set()
    for finding in result.findings:
        path = Path(finding.path)
        out.add(((path.parent / back.get(path.stem, path.stem)).as_posix(), finding.line, finding.rule))
    return out


def test_the_renamer_renames_names_fields_and_modules(renamed: tuple[Path, Renaming]) -> None:
    """The copy really is renamed: no defined name, field string or module survives (a test that
    compared a tree with itself would pass whatever the rules do)."""
    out, renaming = renamed
    text = (out / "flagged" / f"{renaming.modules['rollout_producer']}.py").read_text()
    text = text.split('"""', 2)[2]  # the code, past the module docstring (docstrings keep their words)
    for name in ("get_rollout_data", "max_seq_lens", "total_lengths", "pad_size", "slice_log_prob_with_cp"):
        assert name not in text, name
    assert "torch.cuda.current_device()" in text and '"bshd"' in text  # the outside world's names stay
    # methods' receivers too: the linter knows a receiver by its place, not by the name `self`
    methods = (out / "flagged" / f"{renaming.modules['batch_builder']}.py").read_text().split('"""', 2)[2]
    assert "def " in methods and re.search(r"\bself\b", methods) is None
    assert {"rollout_producer", "cp_utils", "batch_builder"} <= set(renaming.modules)
    assert len(renaming.names) > 300


def test_a_name_imported_from_a_sibling_module_is_renamed_with_its_definition(tmp_path: Path) -> None:
    """`from finisher import Finisher` between two top-level modules: the imported name is renamed as
    its class is (else the renamed copy imports a name that no longer exists, and a finding that follows
    the import is lost from the copy for a reason that has nothing to do with names)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "finisher.py").write_text("class Finisher:\n    def attach(self, sample):\n        return sample\n")
    (src / "derived.py").write_text("from finisher import Finisher\n\n\nclass Derived(Finisher):\n    pass\n")
    renaming = rename_project(src, tmp_path / "out")
    derived = (tmp_path / "out" / f"{renaming.modules['derived']}.py").read_text()
    new_name = renaming.names["Finisher"]
    assert f"import {new_name}" in derived and f"({new_name})" in derived and "Finisher" not in derived


@pytest.mark.parametrize("project", PROJECTS)
def test_findings_do_not_depend_on_names(renamed: tuple[Path, Renaming], project: str) -> None:
    out, renaming = renamed
    original = _findings(ROOT, project, None)
    copy = _findings(out, project, renaming)
    assert copy == original, {"only on the original": sorted(original - copy), "only on the copy": sorted(copy - original)}


@pytest.mark.skipif(not os.environ.get("LAYOUTCHECK_RENAME_TREE"),
                    reason="set LAYOUTCHECK_RENAME_TREE to a checkout (Miles at 31f1ca961) to rename and lint it")
def test_a_real_tree_has_the_same_findings_renamed(tmp_path: Path) -> None:
    tree = Path(os.environ["LAYOUTCHECK_RENAME_TREE"]).resolve()
    copy = tmp_path / tree.name
    renaming = rename_project(tree, copy)

    def findings(root: Path, back: dict[str, str]) -> set[tuple[str, int, str]]:
        loaded = LoadedConfig(None, root, {}, TABLE)  # no configuration: as a new user would
        result = run([root], cwd=root, use_cache=False, jobs=2, loaded=loaded,
                     overrides=SelectionOverrides(preview=True))
        return {((Path(f.path).parent / back.get(Path(f.path).stem, Path(f.path).stem)).as_posix(), f.line, f.rule)
                for f in result.findings}

    original = findings(tree, {})
    renamed_findings = findings(copy, {new: old for old, new in renaming.modules.items()})
    assert original, "the tree has findings to compare"
    assert renamed_findings == original, {"only on the original": sorted(original - renamed_findings),
                                          "only on the copy": sorted(renamed_findings - original)}


CORPUS = ROOT / "corpus"


def test_corpus_findings_do_not_depend_on_names(tmp_path: Path) -> None:
    """Each file of the corpus of real fixes (`tests/test_lint_corpus.py`), alone in its own project with
    no configuration, renamed consistently: the same findings, lines and rules (and the copy is renamed)."""
    src, out = tmp_path / "src", tmp_path / "out"
    projects = []
    for pair in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        for half in ("before", "after"):
            project = src / pair.name / half
            project.mkdir(parents=True)
            (project / f"{half}.py").write_text((pair / f"{half}.py").read_text())
            (project / "layoutcheck.toml").write_text("")
            projects.append(f"{pair.name}/{half}")
    renaming = rename_project(src, out, rename_modules=False)
    assert len(renaming.names) > 300
    code = (out / "specforge_20924186_shift_applied_twice" / "before" / "before.py").read_text().split('"""', 2)[2]
    assert "step_left" not in code and '"ids"' not in code and "torch.cat" in code  # renamed, the library kept
    flagged = 0
    for project in projects:
        original = _findings(src, project, None)
        copy = _findings(out, project, None)
        assert copy == original, (project, {"only on the original": sorted(original - copy),
                                            "only on the copy": sorted(copy - original)})
        flagged += bool(original)
    assert flagged >= 20, "the corpus has findings to compare"
