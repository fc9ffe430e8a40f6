"""Precision and recall of `layoutcheck check` on real trainers, against the hand-read table.

Usage (the precision corpus of issue 28: every run of the table)::

    python benchmarks/lint_truth.py --list miles=/tmp/pc/miles slime=/tmp/pc/slime \\
        verl=/tmp/pc/verl verl-head=/tmp/pc/verl-head openrlhf=/tmp/pc/openrlhf \\
        specforge=/tmp/pc/specforge areal=/tmp/pc/areal megatron=/tmp/pc/megatron \\
        torchtune=/tmp/pc/torchtune torchtitan=/tmp/pc/torchtitan open-instruct=/tmp/pc/open-instruct \\
        easyr1=/tmp/pc/easyr1 megatron-bridge=/tmp/pc/megatron-bridge xtuner=/tmp/pc/xtuner \\
        deepspeed=/tmp/pc/deepspeed nanotron=/tmp/pc/nanotron ring-flash-attention=/tmp/pc/ring-flash-attention

Each ``NAME=PATH`` gives the checkout of one repository of ``benchmarks/lint_truth.toml``
(a ``git archive`` extract of the pinned commit: ``git --git-dir=MIRROR archive COMMIT |
tar -x -C PATH``). No network is needed. For every run of the table whose checkout is given,
the linter runs as a user would (``layoutcheck check PATH --no-cache``, with no configuration
or with the run's) plus ``--preview``, so that every rule is measured, and every finding is
looked up in the table:

* precision per rule (issue 28, the release rule): over the runs without configuration,
  each rule's true findings over its findings. These counts are the precision table the
  rule registry reads (`layoutcheck.lint.precision.MEASURED`: a rule is stable, on by
  default, only at >= 90%); when every such run of the table is given, the counts must
  equal the table's, and ``--write-precision`` rewrites the table from them;
* precision of the default run: the findings of the stable rules only (what a user sees
  with no configuration and no ``--preview``), target >= 90% on each run without
  configuration and over them all; the findings marked ``required`` (the latent second
  owners) must be among them, and a false finding marked ``fixed`` (by a change to the
  rules) must not come back;
* recall, for a run with hand-labelled ``sites``: the sites found over all sites (target
  100%), with precision over that run's findings (target >= 90%).

A finding the table does not list is *unreviewed*, and a judged finding (not marked
``fixed``) that no longer appears is *gone*: both are printed as a diff against the table
(``+`` new, ``-`` gone) and fail the run until someone reads them and updates the table
(a verdict for a new one; ``fixed = COMMIT`` for a false one gone, or the finding removed
with a note for a true one gone). ``--list`` prints every finding with its verdict and the
first line of why. A checkout whose ``.py`` files differ from the pinned commit's (the
``tree`` digest) is reported; ``--strict`` makes it fatal. Exit 0 when every target holds,
1 otherwise.
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
PRECISION_MODULE = Path(__file__).resolve().parents[1] / "layoutcheck" / "lint" / "precision.py"
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
               "--exit-zero", "--preview"]
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
    gone: list[str] = field(default_factory=list)
    by_rule: dict[str, list[int]] = field(default_factory=dict)
    """Rule name -> [findings, true] in this run."""
    stable_findings: int = 0
    stable_true: int = 0
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
    def stable_precision(self) -> float | None:
        return self.stable_true / self.stable_findings if self.stable_findings else None

    @property
    def recall(self) -> float | None:
        return self.found_sites / self.sites if self.sites else None


def preview_rule_names() -> frozenset[str]:
    """The names of the rules in preview, as the registry reads them from the precision table."""
    from layoutcheck.lint.registry import all_rules

    return frozenset(rule.name for rule in all_rules() if rule.preview)


def judge(name: str, run: dict, table: dict, found: Sequence[tuple[str, int, str]],
          preview: frozenset[str] = frozenset()) -> Outcome:
    """Look every finding of ``found`` up in the run's verdicts; ``preview`` rules are left out of the
    default run's precision (they do not run by default)."""
    verdicts_from = run.get("findings")
    entries = table["runs"][verdicts_from]["findings"] if isinstance(verdicts_from, str) else run.get("findings", [])
    verdicts = {(e["file"], e["line"], e["rule"]): e for e in entries}
    outcome = Outcome(name, run["commit"], configured=bool(run.get("config")))
    outcome.findings = len(found)
    for key in found:
        entry = verdicts.get(key)
        where = f"{key[0]}:{key[1]} {key[2]}"
        is_true = entry is not None and entry["verdict"] == "true"
        counts = outcome.by_rule.setdefault(key[2], [0, 0])
        counts[0] += 1
        counts[1] += is_true
        if key[2] not in preview:
            outcome.stable_findings += 1
            outcome.stable_true += is_true
        if entry is None:
            outcome.unreviewed.append(where)
            outcome.false += 1
            outcome.listing.append(f"UNREVIEWED {where}")
            continue
        if is_true:
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
        if not entry.get("fixed") and key not in present and not isinstance(verdicts_from, str):
            outcome.gone.append(f"{key[0]}:{key[1]} {key[2]} (judged {entry['verdict']})")
    for site in run.get("sites", []):
        where, rule = site.split()
        path, line = where.rsplit(":", 1)
        outcome.sites += 1
        if (path, int(line), rule) in present:
            outcome.found_sites += 1
        else:
            outcome.missed_sites.append(site)
    return outcome


def table_counts(table: dict) -> dict[str, list[int]]:
    """Rule name -> [findings, true] over the runs without configuration, from the verdicts alone:
    every entry not marked ``fixed`` is a finding the linter gives (the run fails otherwise)."""
    counts: dict[str, list[int]] = {}
    for run in table["runs"].values():
        entries = run.get("findings", [])
        if run.get("config") or isinstance(entries, str):
            continue
        for entry in entries:
            if entry.get("fixed"):
                continue
            row = counts.setdefault(entry["rule"], [0, 0])
            row[0] += 1
            row[1] += entry["verdict"] == "true"
    return counts


def measured_rows(counts: dict[str, list[int]]) -> dict[str, tuple[int, int]]:
    """Code -> (findings, true) for every rule of the registry (zero where it had no finding)."""
    from layoutcheck.lint.registry import all_rules

    return {rule.code: tuple(counts.get(rule.name, (0, 0))) for rule in all_rules()}  # type: ignore[misc]


def precision_diff(rows: dict[str, tuple[int, int]]) -> list[str]:
    """How ``rows`` differ from the precision table the registry reads, one line per rule."""
    from layoutcheck.lint.precision import MEASURED, status_for

    lines = []
    for code, (findings, true) in rows.items():
        old = MEASURED.get(code)
        if old is None or (old.findings, old.true) != (findings, true):
            was = "no row" if old is None else f"{old.true}/{old.findings} {old.status}"
            lines.append(f"{code}: table says {was}, the verdicts say {true}/{findings} {status_for(findings, true)}")
    for code in sorted(set(MEASURED) - set(rows)):
        lines.append(f"{code}: in the table but no such rule")
    return lines


def write_precision(rows: dict[str, tuple[int, int]], path: Path = PRECISION_MODULE) -> None:
    """Rewrite the ``MEASURED`` block of the precision table from ``rows``."""
    text = path.read_text()
    begin, end = "# BEGIN MEASURED\n", "# END MEASURED\n"
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    body = "MEASURED: dict[str, Measured] = {\n" + "".join(
        f'    "{code}": Measured({findings}, {true}),\n' for code, (findings, true) in sorted(rows.items())
    ) + "}\n"
    path.write_text(head + begin + body + end + tail)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", metavar="NAME=PATH", help="a checkout of a repository in the table")
    parser.add_argument("--table", type=Path, default=TABLE, help="the hand-read table (default: lint_truth.toml)")
    parser.add_argument("--strict", action="store_true", help="a checkout of another commit is an error")
    parser.add_argument("--list", action="store_true", help="print every finding with its verdict")
    parser.add_argument("--write-precision", action="store_true",
                        help="rewrite layoutcheck/lint/precision.py from the verdicts (every run without "
                             "configuration must be given, every finding judged)")
    args = parser.parse_args(argv)
    table = tomllib.loads(args.table.read_text())
    given: dict[str, Path] = {}
    for item in args.checkouts:
        name, _, path = item.partition("=")
        if not path:
            parser.error(f"expected NAME=PATH, got {item!r}")
        given[name] = Path(path).resolve()
    preview = preview_rule_names()
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
        outcomes.append(judge(name, run, table, lint(checkout, run.get("config", {})), preview))
        outcomes[-1].files = files
        if args.list:
            for line in outcomes[-1].listing:
                print(f"  {line}")
    if not outcomes:
        parser.error("none of the given names is a run of the table: " + ", ".join(table["runs"]))

    print()
    header = (f"{'run':<20} {'commit':<10} {'files':>5} {'findings':>8} {'true':>5} {'false':>5} {'precision':>9} "
              f"{'default run':>11} {'recall':>7}")
    print(header)
    print("-" * len(header))
    for o in outcomes:
        recall = _percent(o.recall) if o.sites else ""
        default = f"{o.stable_true}/{o.stable_findings}"
        print(f"{o.name:<20} {o.commit[:9]:<10} {o.files:>5} {o.findings:>8} {o.true:>5} {o.false:>5} "
              f"{_percent(o.precision):>9} {default:>11} {recall:>7}")
    plain = [o for o in outcomes if not o.configured]
    total = sum(o.findings for o in plain)
    true = sum(o.true for o in plain)
    stable_total = sum(o.stable_findings for o in plain)
    stable_true = sum(o.stable_true for o in plain)
    if plain:
        print("-" * len(header))
        default = f"{stable_true}/{stable_total}"
        print(f"{'no configuration':<20} {'':<10} {sum(o.files for o in plain):>5} {total:>8} {true:>5} "
              f"{total - true:>5} {_percent(true / total if total else None):>9} {default:>11}")
        print("(precision: every rule, as with --preview; default run: true/findings of the stable rules only)")

    # Per rule, over the runs without configuration: the release rule's measure.
    live: dict[str, list[int]] = {}
    for o in plain:
        for rule, (n, t) in o.by_rule.items():
            row = live.setdefault(rule, [0, 0])
            row[0] += n
            row[1] += t
    from layoutcheck.lint.precision import status_for

    print()
    print(f"{'rule':<34} {'findings':>8} {'true':>5} {'precision':>9}  status")
    for rule, (n, t) in sorted(live.items()):
        print(f"{rule:<34} {n:>8} {t:>5} {_percent(t / n):>9}  {status_for(n, t)}")
    plain_runs = {name for name, run in table["runs"].items() if not run.get("config")}
    # The precision table is the measure of this table's corpus only (another --table is a test's or a draft's).
    complete = plain_runs <= {o.name for o in plain} and args.table.resolve() == TABLE
    diff: list[str] = []
    if complete:
        diff = precision_diff(measured_rows(live))
        if diff:
            print("\nthe precision table (layoutcheck/lint/precision.py) differs from these verdicts:")
            for line in diff:
                print(f"  {line}")
    elif args.table.resolve() == TABLE:
        print(f"\n(the precision table is compared only when every run without configuration is given; "
              f"missing: {', '.join(sorted(plain_runs - {o.name for o in plain}))})")

    changes = [(o.name, f"+ {item} (new: read it, add its verdict)") for o in outcomes for item in o.unreviewed]
    changes += [(o.name, f"- {item} (gone: mark a false one `fixed`, or drop a true one with a note)")
                for o in outcomes for item in o.gone]
    if changes:
        print("\nthe findings differ from the table (re-judge after a change to the rules):")
        for name, line in changes:
            print(f"  {name}: {line}")

    failures = []
    if stable_total and stable_true / stable_total < PRECISION_TARGET:
        failures.append(f"default-run precision with no configuration {stable_true}/{stable_total} is below "
                        f"{PRECISION_TARGET:.0%}")
    for o in outcomes:
        if not o.configured and o.stable_precision is not None and o.stable_precision < PRECISION_TARGET:
            failures.append(f"{o.name}: default-run precision with no configuration {o.stable_true}/"
                            f"{o.stable_findings} is below {PRECISION_TARGET:.0%}")
        for item in o.reappeared:
            failures.append(f"{o.name}: false finding {item} is reported again")
        for item in o.unreviewed:
            failures.append(f"{o.name}: unreviewed finding {item} (add its verdict to the table)")
        for item in o.gone:
            failures.append(f"{o.name}: judged finding {item} is no longer reported (update the table)")
        for item in o.missing_required:
            failures.append(f"{o.name}: required finding {item} is no longer reported")
        if o.sites:
            if (o.recall or 0) < RECALL_TARGET:
                failures.append(f"{o.name}: recall {o.found_sites}/{o.sites}; missed: {', '.join(o.missed_sites)}")
            if o.precision is not None and o.precision < PRECISION_TARGET:
                failures.append(f"{o.name}: precision {o.true}/{o.findings} is below {PRECISION_TARGET:.0%}")
    if args.write_precision:
        if not complete or changes:
            failures.append("--write-precision needs every run without configuration and every finding judged")
        elif diff:
            write_precision(measured_rows(live))
            print(f"\nwrote {PRECISION_MODULE}")
    elif diff:
        failures.append("the precision table differs from the verdicts (--write-precision rewrites it)")
    if args.strict and mismatched:
        failures.append("a checkout is not the pinned commit (--strict)")
    print()
    if failures:
        for line in failures:
            print(f"MISS  {line}")
        return 1
    print(f"PASS  default-run precision >= {PRECISION_TARGET:.0%} with no configuration on each run (required "
          "findings present, fixed false findings gone, every finding judged); the precision table matches "
          f"the verdicts; recall {RECALL_TARGET:.0%} and precision >= {PRECISION_TARGET:.0%} where sites are "
          "labelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
