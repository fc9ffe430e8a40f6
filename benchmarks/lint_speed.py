"""Lint speed: layoutcheck against libcst's own parse time, side by side in one run.

Usage::

    python benchmarks/lint_speed.py [TREE] [--repeat N] [--files N] [--seed S] [--keep] [--strict]

Without TREE, a trainer-shaped tree (about 300 modules, 70k lines) is
generated into a temporary folder with a fixed seed (see
``benchmarks/synthetic_tree.py``). Every row is the best of ``--repeat``
runs; rows that include interpreter start-up run in fresh subprocesses.

Rows and targets (issue 3):

* libcst parse-only: ``libcst.parse_module`` on every file in one process,
  timed around the loop only (the baseline).
* ``ast.parse`` of every file, for reference.
* cold: ``layoutcheck check TREE --no-cache``, whole process; target <= 0.3x
  parse-only.
* warm: ``layoutcheck check TREE`` after a run that filled the cache; target
  <= 0.05x parse-only.
* one file: ``layoutcheck check FILE --no-cache`` on the largest file that
  mentions padding, against ``python -c "import libcst"``; target <= 1.5x.
  The two commands alternate, run for run, so drift on a busy machine
  affects both alike.

Subprocesses run as a user's installation does: with bytecode caching on
(``PYTHONDONTWRITEBYTECODE`` removed from their environment, should the
caller set it), and each timed command runs once untimed first, so every
module is compiled to a ``.pyc`` before it is timed.

It also runs ``layoutcheck check`` once with a sentinel ``torch`` package
first on ``PYTHONPATH`` (workers inherit it) and reports whether anything
tried to import torch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_tree import generate_tree  # noqa: E402  (a sibling script, not a package)

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "build", "dist", "__pycache__", ".tox", ".nox",
             "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".layoutcheck_cache"}
PADDING_MARKERS = ("max_seq_lens", "total_lengths", "seq_len", "pad")

# Runs in a fresh interpreter: parses every listed file, prints the loop's seconds.
_PARSE_SNIPPET = """
import sys, time
from pathlib import Path
kind = sys.argv[1]
paths = Path(sys.argv[2]).read_text().splitlines()
if kind == "libcst":
    import libcst
    parse = libcst.parse_module
else:
    import ast
    parse = ast.parse
start = time.perf_counter()
for path in paths:
    with open(path, encoding="utf-8") as handle:
        parse(handle.read())
print(time.perf_counter() - start)
"""

# A stand-in torch: importing it leaves a mark, then fails like a missing package.
_SENTINEL_TORCH = """
import os
with open(os.environ["LAYOUTCHECK_BENCH_TORCH_MARK"], "a") as handle:
    handle.write(str(os.getpid()) + "\\n")
raise ImportError("torch was imported by layoutcheck check (benchmark sentinel)")
"""


@dataclass(frozen=True)
class Row:
    """One line of the result table."""

    label: str
    seconds: float
    baseline: float | None = None
    target: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.baseline is None else self.seconds / self.baseline

    @property
    def verdict(self) -> str:
        if self.target is None or self.ratio is None:
            return ""
        return "PASS" if self.ratio <= self.target else "MISS"


def python_files(tree: Path) -> list[Path]:
    """The ``.py`` files under ``tree``, skipping VCS, virtualenv, build and cache folders."""
    found = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        found.extend(Path(dirpath) / name for name in sorted(filenames) if name.endswith(".py"))
    return found


def layoutcheck_command() -> list[str]:
    """The installed ``layoutcheck`` script, or the CLI's ``main`` through this interpreter."""
    script = Path(sys.executable).with_name("layoutcheck")
    if script.exists():
        return [str(script)]
    found = shutil.which("layoutcheck")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from layoutcheck.cli import main; sys.exit(main())"]


def subprocess_env() -> dict[str, str]:
    """This environment with bytecode caching on: users' installs have their ``.pyc`` files."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


BYTECODE_NOTE = ("bytecode caching on in the timed subprocesses (PYTHONDONTWRITEBYTECODE unset), "
                 "after one untimed warm-up run of each command")


def _wall(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def best_walls(cmds: Sequence[Sequence[str]], *, repeat: int, cwd: Path,
               warmup: bool = True) -> list[float]:
    """Best wall-clock seconds of ``repeat`` runs of each of ``cmds``, run in turn; output is discarded.

    With ``warmup``, each command runs once untimed first (it writes the ``.pyc`` files).
    """
    env = subprocess_env()
    if warmup:
        for cmd in cmds:
            _wall(cmd, cwd, env)
    best = [float("inf")] * len(cmds)
    for _ in range(repeat):
        for i, cmd in enumerate(cmds):
            best[i] = min(best[i], _wall(cmd, cwd, env))
    return best


def best_wall(cmd: Sequence[str], *, repeat: int, cwd: Path, warmup: bool = True) -> float:
    """Best wall-clock seconds of ``repeat`` runs of ``cmd`` (see `best_walls`)."""
    return best_walls([cmd], repeat=repeat, cwd=cwd, warmup=warmup)[0]


def best_parse(kind: str, file_list: Path, *, repeat: int) -> float:
    """Best in-process loop time of parsing every file with ``kind`` (libcst or ast)."""
    times = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", _PARSE_SNIPPET, kind, str(file_list)],
                              capture_output=True, text=True, check=True, env=subprocess_env())
        times.append(float(proc.stdout.strip()))
    return min(times)


def pick_one_file(files: Sequence[Path]) -> Path:
    """The largest file that mentions padding or lengths (it is surely parsed), else the largest."""
    def size(path: Path) -> int:
        return path.stat().st_size

    padded = [p for p in files if any(m in p.read_text(encoding="utf-8", errors="replace") for m in PADDING_MARKERS)]
    return max(padded or files, key=size)


def count_results(cmd: Sequence[str], tree: Path) -> tuple[int, int, int]:
    """Exit status, findings and file errors of one ``--output-format json`` run."""
    proc = subprocess.run([*cmd, "check", str(tree), "--no-cache", "--output-format", "json"],
                          cwd=tree, capture_output=True, text=True)
    try:
        items = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        return proc.returncode, -1, -1
    errors = sum(1 for item in items if item.get("code") is None)
    return proc.returncode, len(items) - errors, errors


def torch_imported(cmd: Sequence[str], tree: Path) -> bool:
    """Runs ``layoutcheck check`` with a sentinel torch first on the path; True if it was imported."""
    with tempfile.TemporaryDirectory(prefix="lc-torch-sentinel-") as tmp:
        package = Path(tmp) / "torch"
        package.mkdir()
        (package / "__init__.py").write_text(_SENTINEL_TORCH)
        mark = Path(tmp) / "imported"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tmp, env.get("PYTHONPATH")]))
        env["LAYOUTCHECK_BENCH_TORCH_MARK"] = str(mark)
        subprocess.run([*cmd, "check", str(tree), "--no-cache"], cwd=tree, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return mark.exists()


def measure(tree: Path, files: Sequence[Path], repeat: int) -> tuple[list[Row], Path]:
    """Every timed row of the table, and the file the one-file row used."""
    cmd = layoutcheck_command()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write("\n".join(str(p) for p in files))
        file_list = Path(handle.name)
    try:
        parse = best_parse("libcst", file_list, repeat=repeat)
        ast_time = best_parse("ast", file_list, repeat=repeat)
    finally:
        file_list.unlink()
    cold = best_wall([*cmd, "check", str(tree), "--no-cache"], repeat=repeat, cwd=tree)
    # The warm-up run fills the cache.
    warm = best_wall([*cmd, "check", str(tree)], repeat=repeat, cwd=tree)
    one = pick_one_file(files)
    import_libcst, one_file = best_walls(
        [[sys.executable, "-c", "import libcst"], [*cmd, "check", str(one), "--no-cache"]],
        repeat=repeat, cwd=tree,
    )
    rows = [
        Row("libcst parse-only, all files (baseline)", parse),
        Row("ast.parse, all files (reference)", ast_time, parse),
        Row("layoutcheck check TREE --no-cache (cold)", cold, parse, 0.3),
        Row("layoutcheck check TREE, cached (warm)", warm, parse, 0.05),
        Row('python -c "import libcst" (baseline)', import_libcst),
        Row("layoutcheck check ONE_FILE --no-cache", one_file, import_libcst, 1.5),
    ]
    return rows, one


def render(rows: Sequence[Row]) -> str:
    """The result table: seconds, ratio to the row's baseline, target, PASS/MISS."""
    width = max(len(r.label) for r in rows)
    lines = [f"{'step':<{width}}  {'seconds':>8}  {'ratio':>7}  {'target':>8}  result"]
    for row in rows:
        ratio = "" if row.ratio is None else f"{row.ratio:.3f}x"
        target = "" if row.target is None else f"<= {row.target:g}x"
        lines.append(f"{row.label:<{width}}  {row.seconds:8.3f}  {ratio:>7}  {target:>8}  {row.verdict}".rstrip())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure layoutcheck's lint speed against libcst parse time.")
    parser.add_argument("tree", nargs="?", type=Path, help="tree to lint (default: a generated one)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best counts (default 3)")
    parser.add_argument("--files", type=int, default=300, help="modules in the generated tree (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated tree (default 0)")
    parser.add_argument("--keep", action="store_true", help="keep the generated tree and print its path")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    if importlib.util.find_spec("layoutcheck.cli") is None:
        print("layoutcheck.cli is not importable: install the package (pip install -e .) first", file=sys.stderr)
        return 2

    workdir = None
    if args.tree is None:
        workdir = Path(tempfile.mkdtemp(prefix="layoutcheck-bench-"))
        tree = workdir / "tree"
        stats = generate_tree(tree, files=args.files, seed=args.seed)
        origin = (f"generated, seed {args.seed}: {stats.padding_files} of {stats.files} files "
                  f"mention padding or lengths")
    else:
        tree = args.tree.resolve()
        origin = "given"
    try:
        files = python_files(tree)
        if not files:
            print(f"no .py files under {tree}", file=sys.stderr)
            return 2
        lines = sum(p.read_text(encoding="utf-8", errors="replace").count("\n") for p in files)
        print(f"tree: {tree} ({origin})")
        print(f"      {len(files)} files, {lines:,} lines")
        print(f"python {platform.python_version()}, libcst {version('libcst')}, "
              f"{os.cpu_count()} CPUs, best of {args.repeat}")
        print(BYTECODE_NOTE)
        rows, one = measure(tree, files, args.repeat)
        print(f"one file: {one.relative_to(tree) if one.is_relative_to(tree) else one}")
        print()
        print(render(rows))
        rc, findings, errors = count_results(layoutcheck_command(), tree)
        print()
        print(f"layoutcheck check TREE: exit {rc}, {findings} findings, {errors} file errors")
        torch = torch_imported(layoutcheck_command(), tree)
        print(f"torch imported by layoutcheck check: {'YES' if torch else 'no'}")
        missed = any(r.verdict == "MISS" for r in rows) or torch
        return 1 if args.strict and missed else 0
    finally:
        if workdir is not None:
            if args.keep:
                print(f"kept {tree}")
            else:
                shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
