"""A cache can never change an answer: cached runs print exactly what uncached runs print.

Seeded random sequences of the everyday loop on real trees: lint, edit a
file (append a line, delete a function, rename a file, add a file, ignore or
un-ignore a path in ``.gitignore``), lint the root, a folder or one file
again. After every step ``layoutcheck check`` runs twice in this process, as
a user runs it: once with the cache (result cache, file entries and the
replay of an unchanged run all in play) and once with ``--no-cache``; their
exit status, stdout and stderr must be equal, and no rule may crash.

The trees: the lint fixtures (``fixtures/lint``, every flagged project and
look-alike) and a pinned real trainer, verl's source from PyPI installed as
the trainer tests install it (`trainers.verl_harness.install_verl`), a few
of its packages copied to a temporary folder (skipped, saying why, when
the install is not possible).
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from layoutcheck.cli import main
from layoutcheck.lint.replay import replay

ROOT = Path(__file__).resolve().parents[1]

VERL_PARTS = ("verl/utils/*.py", "verl/utils/megatron", "verl/utils/dataset", "verl/models/mcore")
"""The parts of verl copied (about 60 files, a few seconds a sequence): its padding, packing and
sequence-balancing code, and the modules around them."""


def age(root: Path, seconds: float = 10.0) -> None:
    """Set every time under ``root`` back, as a checkout's are by the time it is linted: a run whose
    inputs changed within the file system's clock tick stores no replay (`layoutcheck.lint.replay`)."""
    past = time.time() - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)


class Session:
    """``layoutcheck check`` run in this process, from ``root``, with and without the cache."""

    def __init__(self, root: Path):
        self.root = root
        self.replayed = 0
        self.runs = 0

    def _check(self, args: list[str]) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                if "--no-cache" not in args:
                    # What `main` does first; done here as well to count the replays.
                    code = replay(["check", *args])
                    if code is not None:
                        self.replayed += 1
                        return code, out.getvalue(), err.getvalue()
                code = main(["check", *args])
        finally:
            os.chdir(cwd)
        return code, out.getvalue(), err.getvalue()

    def compare(self, target: str) -> None:
        """Check ``target`` with the cache twice (the second finds everything cached or replays), then
        without: all three alike."""
        args = ["--jobs", "1", "--preview", target]  # every rule: a preview rule reads the cache as well
        cached = self._check(args)
        again = self._check(args)
        fresh = self._check(["--no-cache", *args])
        self.runs += 1
        assert "crashed" not in fresh[2], fresh[2]
        assert cached == fresh, f"check {target}: the cached run differs from the uncached one"
        assert again == fresh, f"check {target}: the cached run's repeat differs from the uncached one"


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".layoutcheck_cache" not in p.parts)


def _delete_function(path: Path, rng: random.Random) -> bool:
    """Replace one ``def`` (decorators included) with ``pass`` at its indentation."""
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        return False
    node = rng.choice(defs)
    lines = text.splitlines(keepends=True)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    last = node.end_lineno or node.lineno
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    lines[first:last] = [f"{indent}pass\n"]
    path.write_text("".join(lines), encoding="utf-8")
    return True


def edit(root: Path, rng: random.Random, step: int) -> str:
    """One random edit of the tree; what it did."""
    files = _python_files(root)
    path = rng.choice(files)
    kind = rng.choice(["append", "append", "delete", "rename", "add", "ignore"])
    if kind == "delete" and _delete_function(path, rng):
        return f"deleted a function of {path.relative_to(root)}"
    if kind == "rename":
        target = path.with_name(f"renamed_{step}_{path.name}")
        path.rename(target)
        return f"renamed {path.relative_to(root)}"
    if kind == "add":
        source = rng.choice(files)
        target = path.with_name(f"added_{step}.py")
        target.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
        return f"added {target.relative_to(root)} (a copy of {source.relative_to(root)})"
    if kind == "ignore":
        ignore = root / ".gitignore"
        lines = ignore.read_text().splitlines() if ignore.exists() else []
        if lines and rng.random() < 0.5:
            lines.pop(rng.randrange(len(lines)))
            done = "un-ignored a path"
        else:
            pattern = str(rng.choice([path, path.parent]).relative_to(root)).replace(os.sep, "/")
            lines.append("/" + pattern if pattern != "." else "*.gen.py")
            done = f"ignored {lines[-1]}"
        ignore.write_text("".join(f"{line}\n" for line in lines))
        return done
    line = rng.choice(["# an edit\n", f"EDITED_{step} = {step}\n"])
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
    return f"appended to {path.relative_to(root)}"


def target(root: Path, rng: random.Random) -> str:
    """The root, a folder holding Python files, or one file (relative to the root, as a user types it)."""
    files = _python_files(root)
    choice = rng.random()
    if choice < 0.3:
        return "."
    if choice < 0.65:
        folders = sorted({p.parent for p in files})
        return str(rng.choice(folders).relative_to(root))
    return str(rng.choice(files).relative_to(root))


def loop(root: Path, seed: int, steps: int) -> Session:
    rng = random.Random(seed)
    session = Session(root)
    age(root)
    session.compare(".")
    for step in range(steps):
        what = edit(root, rng, step)
        if rng.random() < 0.7:
            age(root)
        where = target(root, rng)
        try:
            session.compare(where)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}, step {step}: {what}; then {exc}") from None
    return session


@pytest.mark.parametrize("seed", [1, 2])
def test_cached_runs_equal_uncached_runs_on_the_fixtures(tmp_path, seed):
    tree = tmp_path / "lint"
    shutil.copytree(ROOT / "fixtures" / "lint", tree, ignore=shutil.ignore_patterns(".layoutcheck_cache"))
    session = loop(tree, seed, steps=12)
    assert session.replayed, "no run replayed: the replay was never tested"


@pytest.fixture(scope="module")
def verl_source(request: pytest.FixtureRequest) -> Path:
    """verl's package folder at the pinned release, installed as the trainer tests install it."""
    from trainers.install import InstallError
    from trainers.pins import VERL_FIXED
    from trainers.verl_harness import install_verl

    given = os.environ.get("LAYOUTCHECK_TRAINERS_CACHE")
    cache = getattr(request.config, "cache", None)
    if given:
        where = Path(given)
    elif cache is not None:
        where = Path(cache.mkdir("layoutcheck-trainers"))
    else:
        where = Path(tempfile.gettempdir()) / "layoutcheck-trainers"
    try:
        folder = install_verl(VERL_FIXED, where)
    except (InstallError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"verl {VERL_FIXED} could not be installed from PyPI into {where}: {exc}")
    return folder


def test_cached_runs_equal_uncached_runs_on_verl(tmp_path, verl_source):
    tree = tmp_path / "verl"
    for part in VERL_PARTS:
        for source in sorted(verl_source.glob(part)):
            destination = tree / source.relative_to(verl_source)
            if source.is_dir():
                shutil.copytree(source, destination, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, destination)
    assert len(_python_files(tree)) > 50
    (tree / "verl" / "__init__.py").write_text("")
    (tree / "verl" / "models" / "__init__.py").write_text("")
    session = loop(tree, 3, steps=10)
    assert session.replayed
