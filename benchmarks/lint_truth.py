"""Precision and recall of `layoutcheck check` on real trainers, against the hand-read table.

Usage::

    python benchmarks/lint_truth.py --list miles=/tmp/real/miles slime=/tmp/real/slime \\
        verl=/tmp/real/verl openrlhf=/tmp/real/openrlhf specforge=/tmp/real/specforge \\
        areal=/tmp/real/areal megatron=/tmp/real/megatron

Each ``NAME=PATH`` gives the checkout of one repository of ``benchmarks/lint_truth.toml``
(a ``git archive`` extract of the pinned commit: ``git --git-dir=MIRROR archive COMMIT |
tar -x -C PATH``). No network is needed. For every run of the table whose checkout is given,
the linter runs as a user would (``layoutcheck check PATH --no-cache``, with no configuration
or with the run's), and every finding is looked up in the table:

* precision: true findings over all findings, per run and over all runs without
  configuration (target >= 90% on each run without configuration, and over them all); the
  findings marked ``required`` (the latent second owners) must be among them, and a false
  finding marked ``fixed`` (by a change to the rules) must not come back;
* recall, for a run with hand-labelled ``sites``: the sites found over all sites (target
  100%), with precision over that run's findings (target >= 90%).

A finding the table does not list is *unreviewed*: it is printed, counts as false, and
fails the run until someone reads it and adds its verdict. ``--list`` prints every finding
with its verdict and the first line of why. A checkout whose ``.py`` files
differ from the pinned commit's (the ``tree`` digest) is reported; ``--strict`` makes it
fatal. Exit 0 when every target holds, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

TABLE = Path(__file__).resolve().with_name("lint_truth.toml")
PRECISION_TARGET = 0.90
RECALL_TARGET = 1.0
_SKIP = {".git", "__pycache__", ".layoutcheck_cache"}


def tree_digest(root: Path) -> tuple[int, str]:
    """How many ``.py`` files ``root`` holds, and a digest of their sorted (path, size)."""
    rows = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP]
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and os.path.isfile(path):
                rows.append(f"{os.path.relpath(path, root)}\0{os.path.getsize(path)}\n")
    return len(rows), hashlib.sha256("".join(sorted(rows)).encode()).hexdigest()[:16]


def _toml_value(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)


def lint(checkout: Path, config: dict[str, object]) -> list[tuple[str, int, str]]:
    """``(path, line, rule)`` of every finding of ``layoutcheck check`` on ``checkout``."""
    command = [sys.executable, "-m", "layoutcheck", "check", ".", "--no-cache", "--output-format", "json",
               "--exit-zero"]
    with tempfile.TemporaryDirectory(prefix="lc-truth-") as tmp:
        if config:
            path = Path(tmp) / "layoutcheck.toml"
            path.write_text("".join(f"{key} = {_toml_value(value)}\n" for key, value in config.items()))
            command += ["--config", str(path)]
        done = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"layoutcheck check {checkout} exited {done.returncode}:\n{done.stderr[-3000:]}")
    items = json.loads(done.stdout or "[]")
    errors = [i for i in items if i.get("code") is None]
    if errors:
        print(f"  note: {len(errors)} files could not be checked (e.g. {errors[0]['path']}: {errors[0]['message']})")
    return sorted((i["path"], i["line"], i["rule"]) for i in items if i.get("code") is not None)


@dataclass
class Outcome:
    name: str
    commit: str
    findings: int = 0
    true: int = 0
    false: int = 0
    unreviewed: list[str] = field(default_factory=list)
    missing_required: list[str] = field(default_factory=list)
    reappeared: list[str] = field(default_factory=list)
    listing: list[str] = field(default_factory=list)
    files: int = 0
    sites: int = 0
    found_sites: int = 0
    missed_sites: list[str] = field(default_factory=list)
    configured: bool = False

    @property
    def precision(self) -> float | None:
        return self.true / self.findings if self.findings else None

    @property
    def recall(self) -> float | None:
        return self.found_sites / self.sites if self.sites else None


def judge(name: str, run: dict, table: dict, found: Sequence[tuple[str, int, str]]) -> Outcome:
    verdicts_from = run.get("findings")
    entries = table["runs"][verdicts_from]["findings"] if isinstance(verdicts_from, str) else run.get("findings", [])
    verdicts = {(e["file"], e["line"], e["rule"]): e for e in entries}
    outcome = Outcome(name, run["commit"], configured=bool(run.get("config")))
    outcome.findings = len(found)
    for key in found:
        entry = verdicts.get(key)
        where = f"{key[0]}:{key[1]} {key[2]}"
        if entry is None:
            outcome.unreviewed.append(where)
            outcome.false += 1
            outcome.listing.append(f"UNREVIEWED {where}")
            continue
        if entry["verdict"] == "true":
            outcome.true += 1
        else:
            outcome.false += 1
            if entry.get("fixed"):
                outcome.reappeared.append(f"{where} (fixed in {entry['fixed']})")
        outcome.listing.append(f"{entry['verdict']:<5} {where}: {entry['why'].strip().splitlines()[0]}")
    present = set(found)
    for key, entry in verdicts.items():
        if entry.get("required") and key not in present:
            outcome.missing_required.append(f"{key[0]}:{key[1]} {key[2]}")
    for site in run.get("sites", []):
        where, rule = site.split()
        path, line = where.rsplit(":", 1)
        outcome.sites += 1
        if (path, int(line), rule) in present:
            outcome.found_sites += 1
        else:
            outcome.missed_sites.append(site)
    return outcome


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", metavar="NAME=PATH", help="a checkout of a repository in the table")
    parser.add_argument("--table", type=Path, default=TABLE, help="the hand-read table (default: lint_truth.toml)")
    parser.add_argument("--strict", action="store_true", help="a checkout of another commit is an error")
    parser.add_argument("--list", action="store_true", help="print every finding with its verdict")
    args = parser.parse_args(argv)
    table = tomllib.loads(args.table.read_text())
    given: dict[str, Path] = {}
    for item in args.checkouts:
        name, _, path = item.partition("=")
        if not path:
            parser.error(f"expected NAME=PATH, got {item!r}")
        given[name] = Path(path).resolve()
    outcomes: list[Outcome] = []
    mismatched = False
    for name, run in table["runs"].items():
        checkout = given.get(run.get("checkout", name))
        if checkout is None:
            continue
        files, digest = tree_digest(checkout)
        if (files, digest) != (run["files"], run["tree"]):
            mismatched = True
            print(f"{name}: {checkout} holds {files} .py files (digest {digest}), not the pinned commit's "
                  f"{run['files']} ({run['tree']}): findings may differ from the table")
        print(f"{name}: checking {checkout} ({run['repo']} at {run['commit'][:9]}, "
              f"{'configured' if run.get('config') else 'no configuration'})")
        outcomes.append(judge(name, run, table, lint(checkout, run.get("config", {}))))
        outcomes[-1].files = files
        if args.list:
            for line in outcomes[-1].listing:
                print(f"  {line}")
    if not outcomes:
        parser.error("none of the given names is a run of the table: " + ", ".join(table["runs"]))

    print()
    header = (f"{'run':<18} {'commit':<10} {'files':>5} {'findings':>8} {'true':>5} {'false':>5} {'precision':>9} "
              f"{'recall':>7}")
    print(header)
    print("-" * len(header))
    for o in outcomes:
        recall = _percent(o.recall) if o.sites else ""
        print(f"{o.name:<18} {o.commit[:9]:<10} {o.files:>5} {o.findings:>8} {o.true:>5} {o.false:>5} "
              f"{_percent(o.precision):>9} {recall:>7}")
    plain = [o for o in outcomes if not o.configured]
    total = sum(o.findings for o in plain)
    true = sum(o.true for o in plain)
    if plain:
        print("-" * len(header))
        print(f"{'no configuration':<18} {'':<10} {sum(o.files for o in plain):>5} {total:>8} {true:>5} {total - true:>5} "
              f"{_percent(true / total if total else None):>9}")

    failures = []
    if total and true / total < PRECISION_TARGET:
        failures.append(f"precision with no configuration {true}/{total} is below {PRECISION_TARGET:.0%}")
    for o in outcomes:
        if not o.configured and o.precision is not None and o.precision < PRECISION_TARGET:
            failures.append(f"{o.name}: precision with no configuration {o.true}/{o.findings} is below "
                            f"{PRECISION_TARGET:.0%}")
        for item in o.reappeared:
            failures.append(f"{o.name}: false finding {item} is reported again")
        for item in o.unreviewed:
            failures.append(f"{o.name}: unreviewed finding {item} (add its verdict to the table)")
        for item in o.missing_required:
            failures.append(f"{o.name}: required finding {item} is no longer reported")
        if o.sites:
            if (o.recall or 0) < RECALL_TARGET:
                failures.append(f"{o.name}: recall {o.found_sites}/{o.sites}; missed: {', '.join(o.missed_sites)}")
            if o.precision is not None and o.precision < PRECISION_TARGET:
                failures.append(f"{o.name}: precision {o.true}/{o.findings} is below {PRECISION_TARGET:.0%}")
    if args.strict and mismatched:
        failures.append("a checkout is not the pinned commit (--strict)")
    print()
    if failures:
        for line in failures:
            print(f"MISS  {line}")
        return 1
    print(f"PASS  precision >= {PRECISION_TARGET:.0%} with no configuration on each run (required findings present, "
          "fixed false findings gone); "
          f"recall {RECALL_TARGET:.0%} and precision >= {PRECISION_TARGET:.0%} where sites are labelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
