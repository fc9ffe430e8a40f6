"""Lint speed: layoutcheck against libcst's own parse time, side by side in one run.

Usage::

    python benchmarks/lint_speed.py [TREE ...] [--repeat N] [--files N] [--seed S] [--no-generated]
                                    [--keep] [--strict]

Each TREE is a path (or ``NAME=PATH``): a trainer checkout, say. Unless
``--no-generated``, two generated trees come first, written with a fixed seed
(``benchmarks/synthetic_tree.py``): a trainer-shaped tree (about 300 modules,
70k lines, 4% of them about padding) and a padding-dense one (every module a
data-path module). Every row is the best of ``--repeat`` runs; rows that
include interpreter start-up run in fresh subprocesses.

Rows and targets (issues 3 and 11), per tree:

* libcst parse-only: ``libcst.parse_module`` on every file in as many
  processes as the lint run uses (``--jobs 2``: a pool of 2 forked workers
  given the files as the linter's pool gets them), timed around the parsing
  only (the floor); and in one process, for reference (issue 21: a
  one-process floor halves the ratios).
* ``ast.parse`` of every file in one process, for reference (against the
  one-process floor), and in as many processes as the lint (against the
  floor).
* start-up: ``layoutcheck check`` of one empty file with ``--no-cache``, in
  a fresh folder: the interpreter, the imports a cold run makes, discovery
  and the project phase with nothing in it. The *bound* (the summary's last
  columns) adds it to the parallel ``ast.parse`` row: no cold run that
  parses every file with ``ast``, as spaces found by use require, can come
  in under it, whatever its walk costs.
* cold: ``layoutcheck check TREE --no-cache --jobs 2``, whole process; target
  <= 0.3x the floor (<= 0.5x on the padding-dense tree).
* warm: ``layoutcheck check TREE --jobs 2`` after a run that filled the cache;
  target <= 0.05x the floor.
* one staged file: ``layoutcheck check FILE`` on the largest file that
  mentions padding, changed since the last run (as pre-commit sees it), with
  the rest of its project in the cache from an earlier run: the other files'
  facts are read from the cache, never parsed. Against ``python -c "import
  libcst"``; target <= 1.5x. The same with ``--no-cache`` (the project around
  the file is then read afresh: a reference row, no target). Each run edits the
  file afresh (`staged_edit`: a comment appended, or with ``--staged-edit
  function`` a statement added to its middle function); the first leaves the
  records of the file's functions, which the later ones reuse but for the edited function (those
  after it moved to where they now are). The commands
  alternate, run for run, so drift on a busy machine affects them alike.

Subprocesses run as a user's installation does: with bytecode caching on
(``PYTHONDONTWRITEBYTECODE`` removed from their environment, should the
caller set it), and each timed command runs once untimed first, so every
module is compiled to a ``.pyc`` before it is timed.

* ruff (issue 28), beside them: ``ruff check --isolated --select ALL
  --no-cache`` on the tree and on the staged file, whole process (ruff's
  own thread pool, one thread per CPU), when ``ruff`` is on ``PATH``
  (``pip install ruff``); reference rows, no target.

The summary ends with issue 28's targets: cold at most 2x the bound (the
*cold/bound* column), warm at most 0.05x the floor, the staged file at most
1.5x ``import libcst``, and ruff's times beside them.

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
import resource
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
from synthetic_tree import generate_dense_tree, generate_tree  # noqa: E402  (a sibling script, not a package)

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "env", "build", "dist", "__pycache__", ".tox", ".nox",
             "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".layoutcheck_cache"}
PADDING_MARKERS = ("max_seq_lens", "total_lengths", "seq_len", "pad")

# Runs in a fresh interpreter: parses every listed file in JOBS processes, prints the work's seconds.
# With JOBS > 1 the files go to a pool of forked workers as the linter's own pool gets them
# (`layoutcheck.lint.runner`: the largest first, in small chunks, so no worker idles at the end);
# the workers start, import the parser and parse a line before the clock starts, so only the
# parsing is timed.
_PARSE_SNIPPET = """
import sys, time
from pathlib import Path
kind, jobs = sys.argv[1], int(sys.argv[3])
paths = Path(sys.argv[2]).read_text().splitlines()
if kind == "libcst":
    import libcst
    parse = libcst.parse_module
else:
    import ast
    parse = ast.parse

def parse_file(path):
    with open(path, encoding="utf-8") as handle:
        parse(handle.read())

def ready(_):
    parse("x = 1\\n")

parse("x = 1\\n")
if jobs <= 1:
    start, cpu = time.perf_counter(), time.process_time()
    for path in paths:
        parse_file(path)
    print(time.perf_counter() - start, time.process_time() - cpu)
else:
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        pool.map(ready, range(jobs), chunksize=1)
        paths.sort(key=lambda path: -Path(path).stat().st_size)
        start = time.perf_counter()
        pool.map(parse_file, paths, chunksize=max(1, len(paths) // (jobs * 16)))
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


def _run(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, of the process and every process it waited for:
    the lint's workers included) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _wall(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> float:
    return _run(cmd, cwd, env)[0]


def best_wall_cpu(cmd: Sequence[str], *, repeat: int, cwd: Path) -> tuple[float, float]:
    """Best wall seconds and best CPU seconds (each the least of ``repeat`` runs, after one untimed run).

    CPU time hardly moves with the machine's load, where wall time does: on a shared machine it is
    the steadier measure of the work a run does."""
    env = subprocess_env()
    _run(cmd, cwd, env)
    runs = [_run(cmd, cwd, env) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


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


def ruff_command() -> list[str] | None:
    """``ruff check`` with every rule and no configuration or cache, or None when ruff is not installed."""
    found = shutil.which("ruff")
    return None if found is None else [found, "check", "--isolated", "--select", "ALL", "--no-cache"]


def best_parse(kind: str, file_list: Path, *, repeat: int, jobs: int = 1) -> float:
    """Best time of parsing every file with ``kind`` (libcst or ast) in ``jobs`` processes, start-up excluded."""
    return best_parse_cpu(kind, file_list, repeat=repeat, jobs=jobs)[0]


def best_parse_cpu(kind: str, file_list: Path, *, repeat: int, jobs: int = 1) -> tuple[float, float]:
    """`best_parse`, and in one process (``jobs`` 1) the best CPU seconds too (else NaN)."""
    walls, cpus = [], []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", _PARSE_SNIPPET, kind, str(file_list), str(jobs)],
                              capture_output=True, text=True, check=True, env=subprocess_env())
        values = proc.stdout.split()
        walls.append(float(values[0]))
        cpus.append(float(values[1]) if len(values) > 1 else float("nan"))
    return min(walls), min(cpus)


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


JOBS = 2
"""Worker processes for the cold and warm rows (issue 11 measures with 2), and for the floor they are
measured against: a floor parsed in one process would halve their ratios (issue 21)."""

AST_JOBS = f"ast.parse, all files, {JOBS} processes (reference)"
STARTUP = "layoutcheck check EMPTY_FILE --no-cache (start-up, reference)"
COLD = f"layoutcheck check TREE --no-cache -j {JOBS} (cold)"
WARM = f"layoutcheck check TREE -j {JOBS}, cached (warm)"
ONE_FILE = "layoutcheck check STAGED_FILE (project cached)"
ONE_FILE_NO_CACHE = "layoutcheck check STAGED_FILE --no-cache (reference)"
RUFF = "ruff check --select ALL TREE --no-cache (reference)"
CPU_BOUND = "CPU: start-up + ast.parse, all files (reference)"
CPU_COLD = "CPU: layoutcheck check TREE --no-cache -j 2, workers included (reference)"
RUFF_ONE = "ruff check --select ALL STAGED_FILE --no-cache (reference)"
COLD_BOUND = 2.0
"""Issue 28: a cold run at most twice the bound (start-up plus ``ast.parse`` in as many processes)."""


def measure(tree: Path, files: Sequence[Path], repeat: int, cold_target: float) -> tuple[list[Row], Path]:
    """Every timed row of one tree's table, and the file the one-file row used."""
    cmd = layoutcheck_command()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write("\n".join(str(p) for p in files))
        file_list = Path(handle.name)
    try:
        parse = best_parse("libcst", file_list, repeat=repeat, jobs=JOBS)
        parse_one = best_parse("libcst", file_list, repeat=repeat)
        ast_time, ast_cpu = best_parse_cpu("ast", file_list, repeat=repeat)
        ast_jobs = best_parse("ast", file_list, repeat=repeat, jobs=JOBS)
    finally:
        file_list.unlink()
    with tempfile.TemporaryDirectory(prefix="lc-startup-") as empty:
        (Path(empty) / "empty.py").write_text("")
        startup, startup_cpu = best_wall_cpu([*cmd, "check", "empty.py", "--no-cache"], repeat=repeat,
                                             cwd=Path(empty))
    cold, cold_cpu = best_wall_cpu([*cmd, "check", str(tree), "--no-cache", "--jobs", str(JOBS)], repeat=repeat,
                                   cwd=tree)
    ruff = ruff_command()
    ruff_tree = None if ruff is None else best_wall([*ruff, str(tree)], repeat=repeat, cwd=tree)
    # The warm-up run fills the cache.
    warm = best_wall([*cmd, "check", str(tree), "--jobs", str(JOBS)], repeat=repeat, cwd=tree)
    one = pick_one_file(files)
    staged = measure_staged(tree, one, repeat, ruff)
    import_libcst, one_file, no_cache, ruff_one = (staged[k][0] for k in ("libcst", "staged", "no-cache", "ruff"))
    rows = [
        Row(f"libcst parse-only, all files, {JOBS} processes (baseline)", parse),
        Row("libcst parse-only, all files, 1 process (reference)", parse_one, parse),
        Row("ast.parse, all files, 1 process (reference)", ast_time, parse_one),
        Row(AST_JOBS, ast_jobs, parse),
        Row(STARTUP, startup, parse),
        Row(COLD, cold, parse, cold_target),
        Row(WARM, warm, parse, 0.05),
        Row('python -c "import libcst" (baseline)', import_libcst),
        Row(ONE_FILE, one_file, import_libcst, 1.5),
        Row(ONE_FILE_NO_CACHE, no_cache, import_libcst),
        Row(CPU_BOUND, startup_cpu + ast_cpu),
        Row(CPU_COLD, cold_cpu, startup_cpu + ast_cpu),
    ]
    if ruff_tree is not None:
        rows.insert(6, Row(RUFF, ruff_tree, parse))
        rows.insert(len(rows) - 2, Row(RUFF_ONE, ruff_one, import_libcst))
    return rows, one


def staged_edit(original: bytes, attempt: int, edit: str) -> bytes:
    """The staged file's text for one attempt: ``append`` adds a comment at its end (the pre-commit
    run of issue 28's target), ``function`` adds a statement at the top of its middle function (a
    module-level ``def`` or a method of a module-level class, in file order): every line below it moves,
    as in a real edit of one function."""
    if edit == "append":
        return original + f"\n# staged change {attempt}\n".encode()
    import ast

    from layoutcheck.model.reuse import units as reused_units

    text = original.decode("utf-8")
    units = reused_units(ast.parse(text))
    if not units:
        return original + f"\n# staged change {attempt}\n".encode()
    first = units[len(units) // 2].body[0]  # type: ignore[attr-defined]
    lines = text.split("\n")
    lines.insert(first.lineno - 1, " " * first.col_offset + f"_staged_change = {attempt}")
    return "\n".join(lines).encode("utf-8")


def measure_staged(tree: Path, one: Path, repeat: int, ruff: list[str] | None,
                   edit: str = "append") -> dict[str, tuple[float, float]]:
    """Best wall and best CPU seconds of the staged-file commands, alternated run for run:
    ``import libcst``, ``layoutcheck check FILE`` (the project cached), the same ``--no-cache``,
    and ruff on the file (``inf`` without ruff). The cache must hold the project already. Each
    attempt edits the file afresh (`staged_edit`); the first one-file run of the file leaves the
    records of its functions (`layoutcheck.model.reuse`), which the later ones reuse but for the edited
    function."""
    cmd = layoutcheck_command()
    # A pre-commit run: the project's facts are in the cache from an earlier run (the warm rows
    # left it there); the staged file itself changed, so its own facts are a miss.
    original = one.read_bytes()
    inf = (float("inf"), float("inf"))
    best = {"libcst": inf, "staged": inf, "no-cache": inf, "ruff": inf}
    env = subprocess_env()

    def keep(name: str, run: tuple[float, float]) -> None:
        best[name] = (min(best[name][0], run[0]), min(best[name][1], run[1]))

    try:
        for cmd_ in ([sys.executable, "-c", "import libcst"], [*cmd, "check", str(one)]):
            _wall(cmd_, tree, env)  # warm-up (.pyc files)
        for attempt in range(repeat):
            keep("libcst", _run([sys.executable, "-c", "import libcst"], tree, env))
            one.write_bytes(staged_edit(original, attempt, edit))
            keep("staged", _run([*cmd, "check", str(one)], tree, env))
            keep("no-cache", _run([*cmd, "check", str(one), "--no-cache"], tree, env))
            if ruff is not None:
                keep("ruff", _run([*ruff, str(one)], tree, env))
    finally:
        one.write_bytes(original)
    return best


def staged_only(trees: Sequence[tuple[str, Path]], repeat: int, edit: str = "append") -> None:
    """``--staged-only``: the staged-file rows alone, wall and CPU, a table across the trees."""
    cmd = layoutcheck_command()
    ruff = ruff_command()
    rows = []
    for name, tree in trees:
        files = python_files(tree)
        one = pick_one_file(files)
        load = os.getloadavg()[0]
        _clean_cache(tree)
        try:
            _run([*cmd, "check", str(tree), "--jobs", str(JOBS)], tree, subprocess_env())  # fills the cache
            best = measure_staged(tree, one, repeat, ruff, edit)
        finally:
            _clean_cache(tree)
        rows.append((name, one.relative_to(tree), load, best))
        print(f"{name}: {one.relative_to(tree)} (load average {load:.1f})", flush=True)
    print()
    print(f"{'tree':<12} {'libcst s':>9} {'staged s':>9} {'staged':>8} {'CPU libcst':>11} {'CPU staged':>11} "
          f"{'CPU ratio':>10} {'no-cache s':>11} {'ruff file s':>12}")
    for name, _, _, best in rows:
        lib, one_, bare, ruff_one = best["libcst"], best["staged"], best["no-cache"], best["ruff"]
        verdict = "PASS" if one_[0] <= 1.5 * lib[0] else "MISS"
        print(f"{name:<12} {lib[0]:9.3f} {one_[0]:9.3f} {one_[0] / lib[0]:7.2f}x {lib[1]:11.3f} {one_[1]:11.3f} "
              f"{one_[1] / lib[1]:9.2f}x {bare[0]:11.3f} {ruff_one[0]:12.3f}   {verdict}")
    print("staged: layoutcheck check FILE, the rest of the project cached, against python -c 'import libcst' "
          "(target <= 1.5x), wall and CPU (user + system), best of each, the commands alternated")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def render(rows: Sequence[Row]) -> str:
    """The result table: seconds, ratio to the row's baseline, target, PASS/MISS."""
    width = max(len(r.label) for r in rows)
    lines = [f"{'step':<{width}}  {'seconds':>8}  {'ratio':>7}  {'target':>8}  result"]
    for row in rows:
        ratio = "" if row.ratio is None else f"{row.ratio:.3f}x"
        target = "" if row.target is None else f"<= {row.target:g}x"
        lines.append(f"{row.label:<{width}}  {row.seconds:8.3f}  {ratio:>7}  {target:>8}  {row.verdict}".rstrip())
    return "\n".join(lines)


def _clean_cache(tree: Path) -> None:
    shutil.rmtree(tree / ".layoutcheck_cache", ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure layoutcheck's lint speed against libcst parse time.")
    parser.add_argument("trees", nargs="*", metavar="[NAME=]TREE", help="trees to lint, e.g. trainer checkouts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best counts (default 3)")
    parser.add_argument("--files", type=int, default=300, help="modules in the generated trees (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated trees (default 0)")
    parser.add_argument("--no-generated", action="store_true", help="only the trees given")
    parser.add_argument("--keep", action="store_true", help="keep the generated trees and print their paths")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--staged-edit", choices=("append", "function"), default="append",
                        help="the staged file's edit with --staged-only: a comment appended (default), or a "
                             "statement added to its middle function, moving the lines below")
    parser.add_argument("--staged-only", action="store_true",
                        help="only the staged-file rows (and their import libcst baseline) of the trees given")
    args = parser.parse_args(argv)

    if importlib.util.find_spec("layoutcheck.cli") is None:
        print("layoutcheck.cli is not importable: install the package (pip install -e .) first", file=sys.stderr)
        return 2

    if args.staged_only:
        print(f"python {platform.python_version()}, libcst {version('libcst')}, "
              f"{os.cpu_count()} CPUs, best of {args.repeat}")
        print(BYTECODE_NOTE)
        given = []
        for item in args.trees:
            name, _, path = item.rpartition("=")
            given.append((name or Path(path).resolve().name, Path(path).resolve()))
        staged_only(given, args.repeat, args.staged_edit)
        return 0

    workdir = Path(tempfile.mkdtemp(prefix="layoutcheck-bench-"))
    trees: list[tuple[str, Path, str, float]] = []
    if not args.no_generated:
        stats = generate_tree(workdir / "trainer", files=args.files, seed=args.seed)
        trees.append(("generated", workdir / "trainer",
                      f"generated, seed {args.seed}: {stats.padding_files} of {stats.files} files mention "
                      "padding or lengths", 0.3))
        stats = generate_dense_tree(workdir / "dense", files=args.files, seed=args.seed)
        trees.append(("dense", workdir / "dense",
                      f"generated padding-dense, seed {args.seed}: every module a data-path module", 0.5))
    for item in args.trees:
        name, _, path = item.rpartition("=")
        tree = Path(path).resolve()
        trees.append((name or tree.name, tree, "given", 0.3))
    print(f"python {platform.python_version()}, libcst {version('libcst')}, "
          f"{os.cpu_count()} CPUs, best of {args.repeat}")
    print(BYTECODE_NOTE)
    summary: list[tuple[str, list[Row]]] = []
    missed = False
    try:
        for name, tree, origin, cold_target in trees:
            files = python_files(tree)
            if not files:
                print(f"no .py files under {tree}", file=sys.stderr)
                return 2
            lines = sum(p.read_text(encoding="utf-8", errors="replace").count("\n") for p in files)
            print()
            print(f"== {name}: {tree} ({origin})")
            print(f"   {len(files)} files, {lines:,} lines; load average {os.getloadavg()[0]:.1f}")
            _clean_cache(tree)
            rows, one = measure(tree, files, args.repeat, cold_target)
            _clean_cache(tree)
            print(f"   one file: {one.relative_to(tree) if one.is_relative_to(tree) else one}")
            print(render(rows))
            rc, findings, errors = count_results(layoutcheck_command(), tree)
            print(f"layoutcheck check TREE: exit {rc}, {findings} findings, {errors} file errors")
            summary.append((name, rows))
            missed = missed or any(r.verdict == "MISS" for r in rows)
        torch = torch_imported(layoutcheck_command(), trees[0][1])
        print()
        print(f"torch imported by layoutcheck check: {'YES' if torch else 'no'}")
        print()
        print(f"cold and warm against the libcst floor parsed by {JOBS} processes (as the lint runs), "
              "and by 1 for reference:")
        print(f"{'tree':<12} {'floor s':>8} {'1-proc s':>8} {'cold':>8} {'(1-proc)':>9} {'warm':>8} "
              f"{'one file':>9} {'(no cache)':>11} {'bound':>8} {'cold-bound':>11}")
        for name, rows in summary:
            by = {row.label: row for row in rows}
            floor, one_proc = rows[0], rows[1]
            cold, warm = by[COLD], by[WARM]
            one, bare = by[ONE_FILE], by[ONE_FILE_NO_CACHE]
            bound = (by[AST_JOBS].seconds + by[STARTUP].seconds) / floor.seconds
            print(f"{name:<12} {floor.seconds:8.2f} {one_proc.seconds:8.2f} {cold.ratio:7.3f}x "
                  f"{cold.seconds / one_proc.seconds:8.3f}x {warm.ratio:7.3f}x {one.ratio:8.2f}x"
                  f" {bare.ratio:10.2f}x {bound:7.3f}x {cold.ratio - bound:10.3f}x"
                  f"   {' '.join(r.verdict for r in (cold, warm, one))}")
        print("bound: start-up plus ast.parse in as many processes, over the floor: what no cold run that "
              "parses every file with ast can beat; cold-bound: what the walk and the project phase add")
        print()
        print(f"issue 28's targets: cold <= {COLD_BOUND:g}x the bound, warm <= 0.05x the floor, staged file "
              "<= 1.5x import libcst; ruff --select ALL beside them (seconds, whole process):")
        print(f"{'tree':<12} {'bound s':>8} {'cold s':>8} {'cold/bound':>11} {'warm':>8} {'staged':>8} "
              f"{'ruff tree s':>12} {'cold/ruff':>10} {'ruff file s':>12} {'staged/ruff':>12} {'CPU cold/bound':>15}")
        for name, rows in summary:
            by = {row.label: row for row in rows}
            cold, warm, one = by[COLD], by[WARM], by[ONE_FILE]
            bound_s = by[AST_JOBS].seconds + by[STARTUP].seconds
            over = cold.seconds / bound_s
            ruff_tree, ruff_one = by.get(RUFF), by.get(RUFF_ONE)
            ruffs = ("" if ruff_tree is None or ruff_one is None else
                     f" {ruff_tree.seconds:12.3f} {cold.seconds / ruff_tree.seconds:9.2f}x"
                     f" {ruff_one.seconds:12.3f} {one.seconds / ruff_one.seconds:11.2f}x")
            verdicts = ["PASS" if over <= COLD_BOUND else "MISS", warm.verdict, one.verdict]
            print(f"{name:<12} {bound_s:8.3f} {cold.seconds:8.3f} {over:10.2f}x {warm.ratio:7.3f}x "
                  f"{one.ratio:7.2f}x{ruffs or '   (ruff not installed)'} {by[CPU_COLD].ratio:14.2f}x"
                  f"   {' '.join(verdicts)}")
            missed = missed or verdicts[0] == "MISS"
        print("CPU cold/bound: user+system seconds of the cold run (its workers included) over those of start-up "
              "plus ast.parse of every file in one process: the work the walk adds, steadier than wall time "
              "on a loaded machine (no target)")
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        return 1 if args.strict and (missed or torch) else 0
    finally:
        for _, tree, origin, _ in trees:
            if origin != "given":
                continue
            _clean_cache(tree)
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
