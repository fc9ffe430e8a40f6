"""File discovery: what is walked, what is skipped, module names, bad paths; and the globs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from layoutcheck.lint.discovery import discover
from layoutcheck.lint.findings import INVALID_INPUT, MISSING_PATH
from layoutcheck.globs import compile_glob


def touch(root: Path, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def shown(found) -> list[str]:
    return [f.display for f in found.files]


def test_walks_python_files_in_name_order_and_skips_tool_folders(tmp_path):
    touch(tmp_path, "b.py", "a.pyi", "c.txt", "pkg/z.py", "pkg/a.py",
          ".git/hook.py", "__pycache__/m.py", "build/gen.py", "dist/d.py", ".tox/t.py",
          "node_modules/n.py", "x.egg-info/e.py", "env/pyvenv.cfg", "env/lib/site.py",
          "cache/CACHEDIR.TAG", "cache/c.py", ".layoutcheck_cache/k.py", "venv/v.py")
    found = discover(["."], root=tmp_path, cwd=tmp_path)
    assert shown(found) == ["a.pyi", "b.py", "pkg/a.py", "pkg/z.py"]
    assert found.errors == []


def test_exclude_globs_are_relative_to_the_root(tmp_path):
    touch(tmp_path, "src/keep.py", "src/gen/out.py", "src/x_pb2.py", "tests/fixtures/f.py", "tests/t.py",
          "other/tests/fixtures/o.py")
    found = discover(["."], root=tmp_path, cwd=tmp_path,
                     exclude=["gen", "*_pb2.py", "tests/fixtures/"])
    assert shown(found) == ["other/tests/fixtures/o.py", "src/keep.py", "tests/t.py"]


def test_explicit_files_are_checked_even_when_excluded(tmp_path):
    touch(tmp_path, "build/gen.py", "gen/x.py", ".venv/pyvenv.cfg", ".venv/y.py")
    found = discover(["build/gen.py", "gen/x.py", ".venv/y.py"], root=tmp_path, cwd=tmp_path, exclude=["gen"])
    assert shown(found) == [".venv/y.py", "build/gen.py", "gen/x.py"]


def test_force_exclude_applies_exclude_to_named_files_and_folders(tmp_path):
    # pre-commit names every staged file: with --force-exclude the project's
    # `exclude` must still keep vendored code out, as in ruff.
    touch(tmp_path, "vendored/lib.py", "vendored/deep/x.py", "gen/x.py", "src/a.py", "src/gen/b.py",
          "src/c_pb2.py", "build/keep.py")
    exclude = ["vendored", "gen", "*_pb2.py"]
    named = ["vendored/lib.py", "vendored/deep/x.py", "gen", "src", "src/c_pb2.py", "build/keep.py"]
    found = discover(named, root=tmp_path, cwd=tmp_path, exclude=exclude, force_exclude=True)
    # Inside a named folder the patterns still apply; only `exclude` is forced,
    # not the built-in skips (`build` named explicitly is still checked).
    assert shown(found) == ["build/keep.py", "src/a.py"]
    assert found.errors == []
    unforced = discover(named, root=tmp_path, cwd=tmp_path, exclude=exclude)
    assert shown(unforced) == ["build/keep.py", "gen/x.py", "src/a.py", "src/c_pb2.py",
                               "vendored/deep/x.py", "vendored/lib.py"]


def test_force_exclude_matches_against_the_config_root_not_the_working_folder(tmp_path):
    touch(tmp_path, "proj/third_party/t.py", "proj/pkg/m.py")
    found = discover(["third_party/t.py", "pkg/m.py"], root=tmp_path / "proj", cwd=tmp_path / "proj",
                     exclude=["/third_party"], force_exclude=True)
    assert shown(found) == ["pkg/m.py"]
    from_above = discover(["proj/third_party/t.py", "proj/pkg/m.py"], root=tmp_path / "proj", cwd=tmp_path,
                          exclude=["/third_party"], force_exclude=True)
    assert shown(from_above) == ["proj/pkg/m.py"]


def test_force_exclude_still_reports_a_missing_path(tmp_path):
    found = discover(["vendored/gone.py"], root=tmp_path, cwd=tmp_path, exclude=["vendored"], force_exclude=True)
    assert [(e.path, e.kind) for e in found.errors] == [("vendored/gone.py", MISSING_PATH)]


def test_the_cache_dir_is_never_walked(tmp_path):
    touch(tmp_path, "a.py", "var/cache/x.py")
    found = discover(["."], root=tmp_path, cwd=tmp_path, skip_dirs=[tmp_path / "var" / "cache"])
    assert shown(found) == ["a.py"]


def test_duplicates_are_checked_once(tmp_path):
    touch(tmp_path, "pkg/a.py")
    found = discover(["pkg", "pkg/a.py", "./pkg/a.py"], root=tmp_path, cwd=tmp_path)
    assert shown(found) == ["pkg/a.py"]


def test_module_names_walk_up_while_init_exists(tmp_path):
    touch(tmp_path, "top/pkg/__init__.py", "top/pkg/sub/__init__.py", "top/pkg/sub/mod.py",
          "top/pkg/sub/stub.pyi", "top/script.py", "top/pkg/nopkg/loose.py")
    found = discover(["top"], root=tmp_path, cwd=tmp_path)
    names = {f.display: f.module_name for f in found.files}
    assert names == {
        "top/pkg/__init__.py": "pkg",
        "top/pkg/sub/__init__.py": "pkg.sub",
        "top/pkg/sub/mod.py": "pkg.sub.mod",
        "top/pkg/sub/stub.pyi": "pkg.sub.stub",
        "top/script.py": "script",
        "top/pkg/nopkg/loose.py": "loose",
    }
    # The module name does not depend on which path was given.
    direct = discover(["top/pkg/sub/mod.py"], root=tmp_path, cwd=tmp_path)
    assert direct.files[0].module_name == "pkg.sub.mod"


def test_paths_outside_the_working_folder_are_shown_absolute(tmp_path):
    touch(tmp_path, "elsewhere/a.py", "here/b.py")
    found = discover([str(tmp_path / "elsewhere"), "b.py"], root=tmp_path, cwd=tmp_path / "here")
    assert shown(found) == [str(tmp_path / "elsewhere" / "a.py"), "b.py"]
    assert found.files[0].relpath == "elsewhere/a.py"


def test_missing_path_is_an_error_and_the_rest_is_still_found(tmp_path):
    touch(tmp_path, "a.py")
    found = discover(["nope.py", "a.py"], root=tmp_path, cwd=tmp_path)
    assert shown(found) == ["a.py"]
    [error] = found.errors
    assert (error.path, error.kind) == ("nope.py", MISSING_PATH) and "no such file" in error.message


def test_broken_links_and_special_files_are_reported(tmp_path):
    touch(tmp_path, "ok.py")
    (tmp_path / "dangling.py").symlink_to(tmp_path / "gone.py")
    os.mkfifo(tmp_path / "pipe.py")  # never opened: reading a FIFO would block
    found = discover(["."], root=tmp_path, cwd=tmp_path)
    assert shown(found) == ["ok.py"]
    assert [(e.path, e.kind) for e in found.errors] == [("dangling.py", INVALID_INPUT)]
    explicit = discover(["pipe.py", "dangling.py"], root=tmp_path, cwd=tmp_path)
    assert sorted((e.path, e.message) for e in explicit.errors) == [
        ("dangling.py", "broken symbolic link: not checked"),
        ("pipe.py", "not a regular file: not checked"),
    ]


def test_unreadable_folder_is_reported_and_the_walk_goes_on(tmp_path, monkeypatch):
    touch(tmp_path, "a/x.py", "locked/y.py", "z/w.py")
    real = os.scandir

    def scandir(path):
        if os.path.basename(path) == "locked":
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    # Simulated: the tests run as root, for whom chmod 000 locks nothing.
    monkeypatch.setattr(os, "scandir", scandir)
    found = discover(["."], root=tmp_path, cwd=tmp_path)
    assert shown(found) == ["a/x.py", "z/w.py"]
    [error] = found.errors
    assert error.path == "locked" and "cannot read directory: Permission denied" in error.message


@pytest.mark.parametrize(("pattern", "path", "matches"), [
    ("build", "build/", True), ("build", "a/build/x.py", True), ("build", "builds/x.py", False),
    ("*_pb2.py", "a/b/x_pb2.py", True), ("tests/*", "tests/a.py", True), ("tests/*", "x/tests/a.py", False),
    ("/tests", "tests/a.py", True), ("**/gen/*.py", "a/b/gen/c.py", True), ("**/gen/*.py", "gen/c.py", True),
    ("build/", "build", False), ("build/", "build/", True), ("x[0-9].py", "x1.py", True),
    ("x[!0-9].py", "x1.py", False), ("./a/b.py", "a/b.py", True), ("src/**/*.py", "src/x.py", True),
    ("a?.py", "ab.py", True), ("a?.py", "a/.py", False), ("*.py", "dir/file.py", True),
])
def test_glob_semantics(pattern, path, matches):
    assert compile_glob(pattern).matches(path) is matches


# ---------------------------------------------------------------- .gitignore and .ignore


def ignore_file(root: Path, name: str, *lines: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def test_what_gitignore_ignores_is_not_linted_and_with_the_setting_off_it_is(tmp_path):
    # The everyday case: run outputs, experiment logs and generated code sit in the tree, ignored by git.
    from layoutcheck.configfile import resolve_config
    from layoutcheck.lint.runner import run

    touch(tmp_path, "trainer/step.py", "outputs/run1/dump.py", "wandb/latest/code.py", "trainer/model.gen.py",
          "trainer/outputs.py")
    ignore_file(tmp_path, ".gitignore", "# run artefacts", "outputs/", "wandb/", "*.gen.py")
    assert shown(discover(["."], root=tmp_path, cwd=tmp_path)) == ["trainer/outputs.py", "trainer/step.py"]
    every = ["outputs/run1/dump.py", "trainer/model.gen.py", "trainer/outputs.py", "trainer/step.py",
             "wandb/latest/code.py"]
    assert shown(discover(["."], root=tmp_path, cwd=tmp_path, respect_gitignore=False)) == every

    def checked(**kwargs) -> list[str]:
        result = run(["."], cwd=tmp_path, loaded=resolve_config(["."], cwd=tmp_path), use_cache=False, **kwargs)
        return [f.path for f in result.files]

    assert checked() == ["trainer/outputs.py", "trainer/step.py"]
    assert checked(respect_gitignore=False) == every
    touch(tmp_path, "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.layoutcheck]\nrespect-gitignore = false\n")
    assert checked() == every
    assert checked(respect_gitignore=True) == ["trainer/outputs.py", "trainer/step.py"]


def test_nested_ignore_files_negations_and_their_precedence(tmp_path):
    touch(tmp_path, "a.py", "b.py", "lib/c.py", "lib/d.py", "lib/deep/e.py", "lib/deep/f.py", "gen/g.py")
    ignore_file(tmp_path, ".gitignore", "*.py", "!a.py", "!lib/", "!*/", "gen/")
    ignore_file(tmp_path, "lib/.gitignore", "!c.py", "deep/f.py")  # deeper files decide over shallower ones
    ignore_file(tmp_path, "lib/deep/.gitignore", "!*.py")
    ignore_file(tmp_path, "lib/deep/.ignore", "f.py")  # `.ignore` over `.gitignore` in one folder
    assert shown(discover(["."], root=tmp_path, cwd=tmp_path)) == ["a.py", "lib/c.py", "lib/deep/e.py"]


def test_a_file_inside_an_ignored_folder_cannot_be_re_included(tmp_path):
    touch(tmp_path, "out/keep.py", "src/s.py")
    ignore_file(tmp_path, ".gitignore", "out/", "!out/keep.py")
    assert shown(discover(["."], root=tmp_path, cwd=tmp_path)) == ["src/s.py"]


def test_ignore_files_above_a_checked_folder_apply_up_to_the_repository_root(tmp_path):
    # `check pkg` sees what `check .` sees in pkg: the ignore files above it count, up to `.git`.
    touch(tmp_path, "repo/pkg/a.py", "repo/pkg/tmp_b.py", "repo/pkg/sub/c.py")
    (tmp_path / "repo" / ".git" / "info").mkdir(parents=True)
    (tmp_path / "repo" / ".git" / "info" / "exclude").write_text("sub/\n")
    ignore_file(tmp_path, "repo/.gitignore", "tmp_*.py")
    ignore_file(tmp_path, ".gitignore", "a.py")  # above the repository: not its business
    whole = discover(["."], root=tmp_path / "repo", cwd=tmp_path / "repo")
    part = discover(["pkg"], root=tmp_path / "repo", cwd=tmp_path / "repo")
    assert shown(whole) == shown(part) == ["pkg/a.py"]


def test_a_nested_repository_has_its_own_ignore_files(tmp_path):
    touch(tmp_path, "vendor/lib/x.py", "vendor/lib/y.py", "y.py")
    (tmp_path / "vendor" / "lib" / ".git").mkdir()
    ignore_file(tmp_path, ".gitignore", "y.py")
    ignore_file(tmp_path, "vendor/lib/.gitignore", "x.py")
    assert shown(discover(["."], root=tmp_path, cwd=tmp_path)) == ["vendor/lib/y.py"]


def test_files_named_on_the_command_line_are_checked_even_when_ignored(tmp_path):
    touch(tmp_path, "outputs/dump.py", "gen/x.gen.py", "gen/y.py")
    ignore_file(tmp_path, ".gitignore", "outputs/", "*.gen.py")
    named = ["outputs/dump.py", "gen/x.gen.py"]
    assert shown(discover(named, root=tmp_path, cwd=tmp_path)) == ["gen/x.gen.py", "outputs/dump.py"]
    assert shown(discover(named, root=tmp_path, cwd=tmp_path, force_exclude=True)) == named[::-1]
    # A named folder is walked, and the patterns still apply to what is inside it.
    assert shown(discover(["outputs", "gen"], root=tmp_path, cwd=tmp_path)) == ["gen/y.py", "outputs/dump.py"]


def test_a_folder_named_inside_a_tree_that_ignore_files_above_it_ignore_is_checked(tmp_path):
    # A package installed under `.pytest_cache/` (whose `.gitignore` pytest writes as `*`), or an `outputs/`
    # run folder, checked by name from inside: the patterns above would ignore everything below it.
    touch(tmp_path, "repo/.pytest_cache/d/site/pkg/a.py", "repo/.pytest_cache/d/site/pkg/sub/b.py",
          "repo/.pytest_cache/d/site/pkg/sub/c.gen.py", "repo/outputs/run/pkg/d.py")
    (tmp_path / "repo" / ".git").mkdir()
    ignore_file(tmp_path, "repo/.gitignore", ".pytest_cache/", "outputs/")
    ignore_file(tmp_path, "repo/.pytest_cache/.gitignore", "*")
    ignore_file(tmp_path, "repo/.pytest_cache/d/site/pkg/.gitignore", "*.gen.py")  # its own still apply
    site = tmp_path / "repo" / ".pytest_cache" / "d" / "site"
    assert shown(discover(["pkg"], root=site, cwd=site)) == ["pkg/a.py", "pkg/sub/b.py"]
    run_folder = tmp_path / "repo" / "outputs" / "run"
    assert shown(discover(["pkg"], root=run_folder, cwd=run_folder)) == ["pkg/d.py"]
    # From the repository's root the same trees stay ignored.
    assert shown(discover(["."], root=tmp_path / "repo", cwd=tmp_path / "repo")) == []


@pytest.mark.parametrize(("pattern", "matches", "misses"), [
    ("build", ["build", "a/build", "a/b/build"], ["builds", "a/build.py"]),
    ("/top.py", ["top.py"], ["a/top.py"]),
    ("a/b.py", ["a/b.py"], ["x/a/b.py"]),  # a slash in the middle anchors it
    ("*.gen.py", ["m.gen.py", "a/b/m.gen.py"], ["m.gen.pyc", "gen.py"]),
    ("a/*/c", ["a/b/c"], ["a/b/x/c", "a/c"]),
    ("**/logs", ["logs", "a/logs", "a/b/logs"], ["alogs"]),
    ("a/**/z.py", ["a/z.py", "a/b/z.py", "a/b/c/z.py"], ["b/a/z.py"]),
    ("data/**", ["data/x", "data/x/y.py"], ["data", "xdata/y"]),
    ("ba**ar.py", ["baar.py", "bazzar.py"], ["b/ar.py"]),  # not at a slash: ordinary stars
    ("file?.py", ["file1.py"], ["file10.py", "file/.py"]),
    ("run[0-9].py", ["run3.py"], ["runx.py"]),
    ("run[!0-9].py", ["runx.py"], ["run3.py", "run/.py"]),
    ("\\#notes.py", ["#notes.py"], []),
    ("\\!bang.py", ["!bang.py"], []),
    ("trailing.py   ", ["trailing.py"], ["trailing.py   "]),
    ("space.py\\ ", ["space.py "], ["space.py"]),
])
def test_gitignore_patterns_match_as_git_matches_them(pattern, matches, misses):
    from layoutcheck.lint.ignorefiles import compile_line

    from layoutcheck.lint.ignorefiles import IgnoreRules

    compiled = compile_line(pattern)
    assert compiled is not None and not compiled.negated
    rules = IgnoreRules().inside("/r", [compiled])  # the walk's way: the folder's patterns at once
    for path in matches:
        assert compiled.regex.match(path), (pattern, path)
        assert rules.ignored(f"/r/{path}", is_dir=False) and rules.ignored(f"/r/{path}", is_dir=True), (pattern, path)
    for path in misses:
        assert not compiled.regex.match(path), (pattern, path)
        assert not rules.ignored(f"/r/{path}", is_dir=False), (pattern, path)


def test_a_folders_patterns_tested_at_once_decide_as_each_tried_in_turn():
    """The walk tests a folder's patterns together, by runs that all ignore or all re-include (plain
    names as a set, name patterns against the last component, the rest against the path): the same
    answers as trying each pattern in turn, the last match winning."""
    from layoutcheck.lint.ignorefiles import IgnoreRules, parse_ignore_file

    text = ("**/*.pt\n**/checkpoints\n**/_build/\n__pycache__/\n*.py[cod]\n*$py.class\ndataset/*\n.idea/\n"
            "build/\n*.egg-info/\n.coverage.*\n*,cover\ndocs/_build/\n*~\nlogs\n/top.py\na/**/z.py\n"
            "ba**ar.py\nrun[!0-9].py\nspace.py\\ \n\\#notes.py\ndata/**\n!keep.pt\n!a/build\n!logs/\n"
            "!dataset/keep\nkeep2.pt\n")
    patterns = parse_ignore_file(text)
    rules = IgnoreRules().inside("/r", patterns)
    paths = ["x.pt", "a/b/x.pt", "checkpoints", "a/checkpoints", "_build", "a/_build", "__pycache__", "m.pyc",
             "a/m.pyo", "m.py", "x$py.class", "dataset/x", "a/dataset/x", ".idea", "build", "a/build", "builds",
             "p.egg-info", ".coverage.1", "f,cover", "docs/_build", "a/docs/_build", "f~", "logs", "a/logs",
             "top.py", "a/top.py", "a/z.py", "a/b/z.py", "b/a/z.py", "bazzar.py", "b/ar.py", "runx.py", "run3.py",
             "space.py ", "space.py", "#notes.py", "data/x", "data", "ok/fine.py", "keep.pt", "a/keep.pt",
             "keep2.pt", "dataset/keep", "b/a/build", "logs/x"]
    for path in paths:
        for is_dir in (False, True):
            expected = False
            for pattern in reversed(patterns):
                if (not pattern.dir_only or is_dir) and pattern.regex.match(path):
                    expected = not pattern.negated
                    break
            assert rules.ignored(f"/r/{path}", is_dir) == expected, (path, is_dir)


def test_comments_blank_lines_negations_and_folder_only_patterns():
    from layoutcheck.lint.ignorefiles import IgnoreRules, compile_line, parse_ignore_file

    assert compile_line("# a comment") is None and compile_line("   ") is None and compile_line("/") is None
    patterns = parse_ignore_file("# runs\n\ncache/\n!keep.py\n*.py\n!main.py\n")
    assert [p.text for p in patterns] == ["cache/", "!keep.py", "*.py", "!main.py"]
    rules = IgnoreRules().inside("/r", patterns)
    assert rules.ignored("/r/cache", is_dir=True) and not rules.ignored("/r/cache", is_dir=False)
    assert rules.ignored("/r/x/keep.py", is_dir=False)  # `*.py` comes after `!keep.py`: the last match wins
    assert not rules.ignored("/r/x/main.py", is_dir=False)
    assert not rules.ignored("/elsewhere/a.py", is_dir=False)


def test_the_configuration_reference_lists_every_folder_discovery_skips():
    from layoutcheck.lint.discovery import DEFAULT_EXCLUDED_DIRS

    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    section = page.split("## Which files are checked", 1)[1].split("\n## ", 1)[0]
    for name in [*DEFAULT_EXCLUDED_DIRS, "*.egg-info", "pyvenv.cfg", "CACHEDIR.TAG", ".gitignore", ".ignore",
                 ".git/info/exclude", "respect-gitignore", "--no-respect-gitignore"]:
        assert f"`{name}`" in section, name
