"""Does `layoutcheck check` catch the real layout-bug fixes of the corpus, in the real code?

Usage::

    python benchmarks/lint_corpus.py /work/.mirror
    python benchmarks/lint_corpus.py /work/.mirror --only verl_2d6c6dbb3 slime_ --json out.json
    python benchmarks/lint_corpus.py /work/.mirror --scope package   # each touched file's package only

``fixtures/lint/corpus/corpus.toml`` lists real fixes from trainers' histories (the
fixture pairs beside it rewrite each one in this project's names; the test suite lints
those). This script lints the originals. For every entry it finds the fix commit in one
of the entry's mirrors (``MIRROR_ROOT/<mirror>/repo``, bare git repositories), extracts
the tree at the commit's first parent (the bug) and at the commit (the fix) with
``git archive`` into a temporary folder outside the repository, and runs
``layoutcheck check --no-cache`` there, with an empty ``layoutcheck.toml`` (no
configuration, as a new user). With ``--scope tree`` (the default) the extract holds
every Python file of the tree and the run checks them all, as ``layoutcheck check``
run in the repository does (scripts and examples beside the package included); the
findings in the files the fix touches are kept (a file elsewhere that the linter
cannot check leaves its own findings out; a touched one is an error). With ``--scope
package`` the extract holds each touched file's top-level package and the run checks
the touched files; with ``--scope files`` only the touched files.

Per entry it prints the findings in the touched files on each side: those on the lines
the fix changed (``hunk``: the diff's ``-U0`` hunks, a pure insertion counting the line
on each side of it) and those anywhere in the touched functions (``func``: the
manifest's ``functions``). The verdict (issue 28, point 7) is per touched function:

* **caught**: at the parent, a finding inside a touched function whose rule is gone
  from that same function at the fix (a finding on the line that uses the buggy
  value counts, not only on the changed lines);
* **flagged-both**: findings inside the touched functions at the parent, but every
  one of their rules is still in its function at the fix (the reason names them);
* **missed**: no finding inside the touched functions at the parent (the reason says
  whether the touched files had findings elsewhere).

A summary table follows (per trainer, per bug class, and in all). Exit 0 unless an entry could not be checked
(commit not in any mirror, or an error from git or the linter).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

MANIFEST = Path(__file__).resolve().parents[1] / "fixtures" / "lint" / "corpus" / "corpus.toml"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)

#: what ``--scope tree`` extracts: the Python sources and the files that may configure a run (a
#: ``pyproject.toml`` whose ``[tool.layoutcheck]`` the linter would read, ignore files)
TREE_FILES = (".py", ".pyi", "pyproject.toml", ".gitignore")

Span = tuple[int, int]
ERROR = "error"
"""The rule of a file the linter reports it could not check (an internal error)."""
Finding = tuple[str, int, int, str]  # path, first line, last line, rule


def git(gitdir: Path, *args: str, binary: bool = False) -> str | bytes:
    """Run git on a bare repository; its stdout, or a `RuntimeError` naming the command."""
    done = subprocess.run(["git", f"--git-dir={gitdir}", *args], capture_output=True, text=not binary)
    if done.returncode != 0:
        err = done.stderr if isinstance(done.stderr, str) else done.stderr.decode(errors="replace")
        raise RuntimeError(f"git {' '.join(args)} in {gitdir}: {err.strip()}")
    return done.stdout


def find_repository(root: Path, mirrors: Sequence[str], commit: str) -> Path | None:
    """The first mirror under ``root`` that holds ``commit``."""
    for name in mirrors:
        gitdir = root / name / "repo"
        if not gitdir.is_dir():
            continue
        probe = subprocess.run(["git", f"--git-dir={gitdir}", "cat-file", "-e", f"{commit}^{{commit}}"],
                               capture_output=True)
        if probe.returncode == 0:
            return gitdir
    return None


def changed_spans(gitdir: Path, parent: str, commit: str, path: str) -> tuple[list[Span], list[Span]]:
    """The lines of ``path`` the fix changes: (spans in the parent, spans in the commit).

    A side with no lines in a hunk (a pure insertion or deletion) gets the two lines
    around the gap, so a finding just before or after the change still counts.
    """
    diff = git(gitdir, "diff", "-U0", "--no-color", parent, commit, "--", path)
    old: list[Span] = []
    new: list[Span] = []
    for match in _HUNK.finditer(diff):
        a, b, c, d = int(match[1]), int(match[2] or 1), int(match[3]), int(match[4] or 1)
        old.append((a, a + b - 1) if b else (a, a + 1))
        new.append((c, c + d - 1) if d else (c, c + 1))
    return old, new


def function_spans(source: str, names: Sequence[str]) -> dict[str, Span]:
    """Line spans of the functions of ``source`` whose qualified names (``Class.method``) are in ``names``."""
    spans: dict[str, Span] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef) and name in names:
                    spans.setdefault(name, (child.lineno, child.end_lineno or child.lineno))
                visit(child, name + ".")

    visit(ast.parse(source), "")
    return spans


def extract(gitdir: Path, rev: str, paths: Sequence[str], into: Path) -> None:
    """Write ``paths`` (files or folders) of ``rev`` under ``into``."""
    into.mkdir(parents=True)
    data = git(gitdir, "archive", "--format=tar", rev, "--", *paths, binary=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=data, check=True)


def lint(tree: Path, files: Sequence[str]) -> list[Finding]:
    """Findings of ``layoutcheck check --preview`` on ``files`` (relative to ``tree``; none: the whole tree, as
    a user's run in the repository), with no configuration (``--preview``: a fix is caught by its rule whatever
    the rule's release status; see docs/linter.md)."""
    (tree / "layoutcheck.toml").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "layoutcheck", "check", "--no-cache", "--output-format", "json", "--exit-zero",
         "--preview", *files],
        cwd=tree, capture_output=True, text=True,
    )
    try:
        found = json.loads(done.stdout) if done.returncode in (0, 2) else None
    except json.JSONDecodeError:
        found = None
    if found is None:
        raise RuntimeError(f"layoutcheck check in {tree} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    # A file the linter could not check (exit 2: a crash, an unreadable file) is an error where it is a
    # touched file (`check_side`); elsewhere in the tree it only leaves that file's findings out.
    return [(f["path"], f["line"] or 0, f.get("end_line") or f["line"] or 0, f["rule"] if f["code"] else ERROR)
            for f in found]


def _within(finding: Finding, spans: Sequence[Span]) -> bool:
    _, first, last, _ = finding
    return any(first <= hi and lo <= last for lo, hi in spans)


@dataclass
class Side:
    """The findings of one tree (the bug's or the fix's) in the touched files."""

    files: int = 0
    anywhere: list[Finding] = field(default_factory=list)
    at_hunks: list[Finding] = field(default_factory=list)
    in_functions: list[Finding] = field(default_factory=list)
    #: "path::function" -> the rules found inside that function
    rules_by_function: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Outcome:
    folder: str
    trainer: str
    bug_class: int
    commit: str
    before: Side = field(default_factory=Side)
    after: Side = field(default_factory=Side)
    problem: str = ""

    @property
    def gone(self) -> dict[str, list[str]]:
        """Touched function -> the rules found in it at the parent and no longer at the fix."""
        out: dict[str, list[str]] = {}
        for func, rules in self.before.rules_by_function.items():
            left = set(self.after.rules_by_function.get(func, ()))
            lost = sorted(set(rules) - left)
            if lost:
                out[func] = lost
        return out

    @property
    def verdict(self) -> str:
        if self.problem:
            return "not checked"
        if self.gone:
            return "caught"
        return "flagged-both" if self.before.in_functions else "missed"

    @property
    def caught(self) -> bool:
        return self.verdict == "caught"

    @property
    def reason(self) -> str:
        """Why an entry is not caught, in one line."""
        b = self.before
        if self.verdict == "flagged-both":
            still = sorted({f"{func.rsplit('::', 1)[-1]}: {rule}" for func, rules in b.rules_by_function.items()
                            for rule in rules})
            return "still flagged at the fix: " + ", ".join(still)
        if self.verdict == "missed":
            if b.anywhere:
                return f"no finding in the touched functions ({len(b.anywhere)} elsewhere in the touched files)"
            return "no finding in the touched files"
        return ""


def check_side(gitdir: Path, rev: str, entry: dict, spans: dict[str, list[Span]], tree: Path, scope: str) -> Side:
    present = [p for p in entry["paths"] if p in spans]
    listed = set(str(git(gitdir, "ls-tree", "-r", "--name-only", rev, "--", *present)).split("\n"))
    present = [p for p in present if p in listed]
    side = Side(files=len(present))
    if not present:
        return side
    if scope == "tree":
        # What `layoutcheck check` run in the repository reads: every Python file of the tree (and the
        # configuration files that may set the source roots), each touched file judged with all the others.
        every = str(git(gitdir, "ls-tree", "-r", "--name-only", rev)).split("\n")
        extract(gitdir, rev, [p for p in every if p.endswith(TREE_FILES)], tree)
        touched = set(present)
        side.anywhere = [f for f in lint(tree, []) if f[0] in touched]
    else:
        roots = sorted({p.split("/", 1)[0] for p in present}) if scope == "package" else present
        extract(gitdir, rev, roots, tree)
        side.anywhere = lint(tree, present)
    broken = sorted({f[0] for f in side.anywhere if f[3] == ERROR})
    if broken:
        raise RuntimeError(f"layoutcheck could not check {', '.join(broken)} at {rev[:10]}")
    for path in present:
        source = (tree / path).read_text(encoding="utf-8", errors="replace")
        try:
            funcs = function_spans(source, entry["functions"])
        except SyntaxError:
            funcs = {}
        mine = [f for f in side.anywhere if f[0] == path]
        side.at_hunks += [f for f in mine if _within(f, spans[path])]
        side.in_functions += [f for f in mine if _within(f, list(funcs.values()))]
        for name, span in funcs.items():
            inside = sorted({f[3] for f in mine if _within(f, [span])})
            if inside:
                side.rules_by_function[f"{path}::{name}"] = inside
    return side


def check_entry(root: Path, entry: dict, scope: str, workdir: Path) -> Outcome:
    outcome = Outcome(entry["folder"], entry["trainer"], entry["bug_class"], entry["commit"])
    gitdir = find_repository(root, entry["mirrors"], entry["commit"])
    if gitdir is None:
        outcome.problem = f"commit not in any of {', '.join(entry['mirrors'])} under {root}"
        return outcome
    try:
        parent = str(git(gitdir, "rev-parse", f"{entry['commit']}^")).strip()
        old_spans: dict[str, list[Span]] = {}
        new_spans: dict[str, list[Span]] = {}
        for path in entry["paths"]:
            old_spans[path], new_spans[path] = changed_spans(gitdir, parent, entry["commit"], path)
        here = workdir / entry["folder"]
        outcome.before = check_side(gitdir, parent, entry, old_spans, here / "before", scope)
        outcome.after = check_side(gitdir, entry["commit"], entry, new_spans, here / "after", scope)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        outcome.problem = str(exc)
    return outcome


def _rules(found: Sequence[Finding]) -> str:
    return ", ".join(f"{path.rsplit('/', 1)[-1]}:{line} {rule}" for path, line, _, rule in found) or "-"


def report_entry(outcome: Outcome) -> None:
    if outcome.problem:
        print(f"{outcome.folder}: NOT CHECKED: {outcome.problem}")
        return
    b, a = outcome.before, outcome.after
    verdict = outcome.verdict.upper() if outcome.caught else outcome.verdict
    why = f" -- {outcome.reason}" if outcome.reason else ""
    gone = "; ".join(f"{func.rsplit('::', 1)[-1]}: {', '.join(rules)} gone at the fix"
                     for func, rules in outcome.gone.items())
    print(f"{outcome.folder} (class {outcome.bug_class}, {outcome.commit[:10]}): {verdict}{why}"
          + (f" [{gone}]" if gone else ""))
    print(f"    before: {len(b.at_hunks)} at changed lines, {len(b.in_functions)} in touched functions, "
          f"{len(b.anywhere)} in {b.files} touched files  [{_rules(b.at_hunks or b.in_functions)}]")
    print(f"    after:  {len(a.at_hunks)} at changed lines, {len(a.in_functions)} in touched functions, "
          f"{len(a.anywhere)} in {a.files} touched files  [{_rules(a.at_hunks or a.in_functions)}]")


def summary(outcomes: Sequence[Outcome]) -> None:
    def row(label: str, group: Sequence[Outcome]) -> str:
        checked = [o for o in group if not o.problem]
        return (f"| {label:<14} | {len(group):>5} | {len(checked):>7} | {sum(o.caught for o in checked):>6} "
                f"| {sum(o.verdict == 'flagged-both' for o in checked):>12} "
                f"| {sum(o.verdict == 'missed' for o in checked):>6} "
                f"| {sum(bool(o.before.at_hunks) for o in checked):>12} "
                f"| {sum(bool(o.after.at_hunks) for o in checked):>11} |")

    print()
    print("| group          | pairs | checked | caught | flagged-both | missed | before@hunks | after@hunks |")
    print("| -------------- | ----- | ------- | ------ | ------------ | ------ | ------------ | ----------- |")
    for trainer in sorted({o.trainer for o in outcomes}):
        print(row(trainer, [o for o in outcomes if o.trainer == trainer]))
    for bug_class in sorted({o.bug_class for o in outcomes}):
        print(row(f"class {bug_class}", [o for o in outcomes if o.bug_class == bug_class]))
    print(row("all", outcomes))
    print("(columns count pairs: checked = commit found and linted; caught = a rule found in a touched function "
          "at the parent is gone from it at the fix; flagged-both = found there at the parent and still there at "
          "the fix; missed = nothing found in the touched functions at the parent; before@hunks / after@hunks = "
          "flagged on the lines the fix changes, for reference)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirror_root", type=Path, help="folder of the mirrors: MIRROR_ROOT/<owner>+<name>/repo")
    parser.add_argument("--scope", choices=("tree", "package", "files"), default="tree",
                        help="lint the whole tree as a user's run in the repository does, reporting the touched "
                             "files (default); or each touched file's top-level package; or the touched files alone")
    parser.add_argument("--only", nargs="+", metavar="PREFIX", help="check the entries whose folder starts so")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every outcome to FILE")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help=f"the corpus manifest (default {MANIFEST})")
    args = parser.parse_args(argv)

    entries = tomllib.loads(args.manifest.read_text())["pair"]
    if args.only:
        entries = [e for e in entries if e["folder"].startswith(tuple(args.only))]
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="lc-corpus-") as tmp:
        for entry in entries:
            outcome = check_entry(args.mirror_root, entry, args.scope, Path(tmp))
            report_entry(outcome)
            outcomes.append(outcome)
            sys.stdout.flush()
    summary(outcomes)
    if args.json:
        args.json.write_text(json.dumps([{**asdict(o), "verdict": o.verdict, "reason": o.reason, "gone": o.gone}
                                             for o in outcomes], indent=1))
    return 1 if any(o.problem for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
