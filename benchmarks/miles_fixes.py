"""What `layoutcheck check --fix --unsafe-fixes` does to Miles at 31f1ca961, against its own fix e78cfb3.

    python benchmarks/miles_fixes.py MILES            # MILES: a clone or bare mirror of radixark/miles
    python benchmarks/miles_fixes.py MILES --json     # the same as one JSON object

Extracts 31f1ca961 into a temporary folder (`git archive`: nothing of Miles is
kept), runs the installed CLI on it three times in fresh processes (a plain
check, ``--fix --unsafe-fixes``, then ``--fix --unsafe-fixes`` again) and
reports:

* the wall time of the fix run beside that of the plain check (both cold,
  ``--no-cache``, measured in the same run);
* the findings per rule before and after, the files changed, whether each
  changed file parses, and whether the second fix run changed anything;
* for each place e78cfb3 changed in the trainer's data path, what the fix
  wrote there against what e78cfb3 wrote, compared as syntax trees (`ast`,
  so quotes and line breaks do not count): the per-sample padded lengths in
  `get_rollout_data`, and the agreement check before
  `max_seqlen = batch["max_seq_lens"][0]` in `get_batch` and
  `fill_replay_data` (its test expression, and that it comes right before
  that statement, in the same block).

`tests/test_miles_fixes.py` runs the same when ``LAYOUTCHECK_MILES`` names a
Miles clone or mirror. Nothing is timed against a target: the times are for
scale.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

PINNED = "31f1ca961"
UPSTREAM_FIX = "e78cfb3"
DATA = "miles/backends/training_utils/data.py"
REPLAY = "miles/backends/training_utils/replay_data.py"
SITES = {
    "per-sample padded lengths (get_rollout_data)": (DATA, "get_rollout_data", "padding"),
    "agreement check (get_batch)": (DATA, "get_batch", "guard"),
    "agreement check (fill_replay_data)": (REPLAY, "fill_replay_data", "guard"),
}


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    git_dir = ["--git-dir", str(repo)] if (repo / "HEAD").is_file() and not (repo / ".git").exists() else [
        "-C", str(repo)]
    return subprocess.run(["git", *git_dir, *args], capture_output=True, check=False)


def has_commit(repo: Path, commit: str) -> bool:
    return git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


def extract(repo: Path, commit: str, dest: Path) -> None:
    """``commit`` of ``repo`` written out under ``dest`` (no git metadata)."""
    archive = git(repo, "archive", "--format=tar", commit)
    if archive.returncode:
        raise SystemExit(f"cannot read {commit} from {repo}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def layoutcheck(tree: Path, *args: str) -> tuple[int, list[dict[str, Any]], str, float]:
    """Run ``layoutcheck check . ARGS --no-cache --output-format json`` in ``tree``: status, findings, stderr, seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "layoutcheck", "check", ".", "--no-cache", "--output-format",
                           "json", *args], cwd=tree, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - started
    findings = json.loads(done.stdout) if done.stdout.strip() else []
    return done.returncode, findings, done.stderr, seconds


def snapshot(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): p.read_text(encoding="utf-8", errors="replace")
            for p in sorted(tree.rglob("*.py")) if p.is_file()}


def _function(module: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(module) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _is_source(node: ast.AST, key: str = "max_seq_lens") -> bool:
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == key


def site_summary(source: str, function: str, kind: str) -> dict[str, Any]:
    """What stands at one site: the padded lengths' value, or the check before the batch length."""
    found = _function(ast.parse(source), function)
    if found is None:
        return {"found": False}
    if kind == "padding":
        for node in ast.walk(found):
            if isinstance(node, ast.Assign) and any(_is_source(t) for t in node.targets):
                names = {n.id for n in ast.walk(found) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                return {"found": True, "value": ast.unparse(node.value), "dump": ast.dump(node.value),
                        "max_seq_len_assigned": "max_seq_len" in names}
        return {"found": False}
    for block in ast.walk(found):
        for field in ("body", "orelse"):
            statements = getattr(block, field, None)
            if not isinstance(statements, list):
                continue
            for before, statement in zip([None, *statements], statements, strict=False):
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Subscript) \
                        and _is_source(statement.value.value):
                    guard = before if isinstance(before, ast.Assert) else None
                    return {"found": True, "guard": ast.unparse(guard.test) if guard else None,
                            "dump": ast.dump(guard.test) if guard else None,
                            "message": ast.unparse(guard.msg) if guard and guard.msg else None}
    return {"found": False}


def compare(repo: Path, tree: Path) -> dict[str, Any]:
    """Each e78cfb3 site: the fix's version against e78cfb3's (None for e78cfb3 when the repo lacks it)."""
    upstream = has_commit(repo, UPSTREAM_FIX)
    out = {}
    for title, (path, function, kind) in SITES.items():
        ours = site_summary((tree / path).read_text(), function, kind)
        theirs = site_summary(git(repo, "show", f"{UPSTREAM_FIX}:{path}").stdout.decode(), function, kind) \
            if upstream else None
        out[title] = {"ours": ours, "e78cfb3": theirs,
                      "same_syntax": None if theirs is None else ours.get("dump") == theirs.get("dump")}
    return out


def measure(repo: Path) -> dict[str, Any]:
    """Extract 31f1ca961, lint, fix, fix again; compare with e78cfb3."""
    with tempfile.TemporaryDirectory(prefix="miles-fixes-") as scratch:
        tree = Path(scratch)
        extract(repo, PINNED, tree)
        _, before, _, plain_seconds = layoutcheck(tree)
        original = snapshot(tree)
        status, after, summary, seconds = layoutcheck(tree, "--fix", "--unsafe-fixes")
        fixed = snapshot(tree)
        _, _, again_summary, _ = layoutcheck(tree, "--fix", "--unsafe-fixes")
        changed = sorted(p for p in fixed if fixed[p] != original.get(p))
        parses = {}
        for path in changed:
            try:
                ast.parse(fixed[path])
                parses[path] = True
            except SyntaxError:
                parses[path] = False
        lines = {}
        for path in changed:
            diff = _udiff(original[path], fixed[path])
            lines[path] = (sum(line.startswith("+") for line in diff), sum(line.startswith("-") for line in diff))
        return {
            "status": status,
            "seconds": round(seconds, 2),
            "plain_seconds": round(plain_seconds, 2),
            "summary": summary.strip().splitlines(),
            "before": dict(sorted(Counter(f["code"] for f in before if f["code"]).items())),
            "after": dict(sorted(Counter(f["code"] for f in after if f["code"]).items())),
            "changed": changed,
            "lines": lines,
            "parses": parses,
            "second_run_changed": snapshot(tree) != fixed,
            "second_run_summary": again_summary.strip().splitlines(),
            "sites": compare(repo, tree),
        }


def _udiff(a: str, b: str) -> list[str]:
    import difflib

    return [line for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
            if not line.startswith(("---", "+++", "@@"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a clone or bare mirror of radixark/miles holding 31f1ca961")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = measure(args.repo.resolve())
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"layoutcheck check --fix --unsafe-fixes on Miles {PINNED}: exit {result['status']}, "
          f"{result['seconds']} s (a plain check of the same tree in the same run: {result['plain_seconds']} s)")
    print("  " + " / ".join(result["summary"]))
    print(f"  findings before: {result['before']}")
    print(f"  findings after:  {result['after']}")
    for path in result["changed"]:
        added, removed = result["lines"][path]
        print(f"  changed {path}: +{added} -{removed} lines, parses: {result['parses'][path]}")
    print(f"  second run changed files: {result['second_run_changed']} ({' / '.join(result['second_run_summary'])})")
    for title, site in result["sites"].items():
        ours, theirs = site["ours"], site["e78cfb3"]
        shown = ours.get("value") or ours.get("guard")
        print(f"  {title}: fix wrote `{shown}`")
        if theirs is not None:
            print(f"    e78cfb3 wrote `{theirs.get('value') or theirs.get('guard')}`; same syntax: {site['same_syntax']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
