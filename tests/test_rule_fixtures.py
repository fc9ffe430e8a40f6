"""Whole-project fixtures: trainer-shaped trees with known findings, and look-alikes that stay silent.

Each fixture folder is linted as one project (`layoutcheck check FOLDER`), since
what a file's findings are depends on what the project around it has: its
owners, its CP helpers' signatures, its callers.

* ``fixtures/lint/flagged/`` and ``fixtures/lint/lookalikes/``: trainer code with
  every rule's findings, and look-alikes beside the owners that must stay silent;
* ``fixtures/lint/pairs/<case>/{flagged,lookalike}/``: one pair per false-positive
  cause (``c1``-``c9``; ``c8`` found on AReaL's history, ``c9`` on verl) and per miss (``m1``-``m5``) of issue 11, each run with
  no configuration, as a new user would.

A flagged file marks each expected finding with a trailing ``# expect: rule-name``
on the line the finding starts; the test compares exact ``(file, line, rule)``
sets with every rule selected. A look-alike project must produce no finding at
all. The files are read as text and never imported (the linter never executes code).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from layoutcheck.configfile import TABLE, LoadedConfig
from layoutcheck.lint.registry import all_rules, rule_by_name
from layoutcheck.lint.runner import run
from layoutcheck.lint.selection import SelectionOverrides

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "lint"
PAIRS = sorted(p for p in (ROOT / "pairs").iterdir() if p.is_dir())
FLAGGED = [ROOT / "flagged", *(p / "flagged" for p in PAIRS)]
LOOKALIKES = [ROOT / "lookalikes", *(p / "lookalike" for p in PAIRS)]
EXPECT = re.compile(r"#\s*expect:\s*([a-z0-9\-]+(?:\s*,\s*[a-z0-9\-]+)*)")
CASES = {
    "c1": "CP helper positions fixed in the defaults",
    "c2": "calls in a branch whose layout is known",
    "c3": "a value read from the owner's field judged by its name",
    "c4": "test and profiling helpers that fabricate padded batches",
    "c5": "helpers that are the only padding decision on their path",
    "c6": "kernel-local bucket padding in free functions",
    "c7": "the attention kernel's per-micro-batch scalar",
    "c8": "buffers evened out for a collective through a pad helper (a maximum no owner pads)",
    "c9": "a setting or a recorded width passed to a pad helper (a length by its name only)",
    "m1": "two owners of one layout that pad differently",
    "m2": "lengths rewritten after the owner, across modules",
    "m3": "layout arguments through a dict splat",
    "m4": "a padded length recorded before a later step raises the padding",
    "m5": "other spellings of the rounding (the zigzag chunk, a unit named *chunk*)",
    "d1": "micro-batches padded to the whole batch's longest sample (docs/design.md#layout-spaces-and-bug-classes, class 1)",
    "d2": "a partner field left out of a per-sample CP slice (docs/design.md#layout-spaces-and-bug-classes, class 2)",
    "d2b": "rows stacked for one pass, their per-row list not (class 2)",
    "d3": "true-length data sliced at padded offsets (class 3)",
    "d3b": "padded rows as wide as the packed stream: a cumulative offset taken for a width (class 3)",
    "d4": "a shift applied twice (class 4)",
    "d5": "partners shifted opposite ways (class 5)",
    "d5b": "next-token offsets converted with the token bounds (class 5)",
    "d6": "positions computed in one space used in another (class 6)",
    "d6b": "positions for a group's slices stored beside one rank's tokens (class 6)",
    "d7": "x[-n:] with an n that can be 0 (class 7)",
    "d7b": "a producer padding on the left what its consumer reads from the right (class 7)",
    "d7c": "partner lists cut from opposite ends (class 7)",
    "d7d": "a boundary appended to cumulative offsets for a pad that can be 0 (class 7)",
    "d7e": "a masked mean whose partner sums its pad positions (class 7)",
    "d7f": "a pad segment's id taken from len() of a one-row tensor (class 7)",
    "d7g": "a pad side chosen by a parameter's default, read from the rows' start (class 7)",
    "d8": "an alignment unit picked by an if/elif chain where every factor must divide (class 8)",
    "d8b": "partner streams built by one builder with different units (class 8)",
    "d8c": "a packed stream cut to its real length for a Megatron-core forward without the TP unit (class 8)",
    "d9": "regrouped outputs combined with the batch before their order is restored (class 9)",
    "d9b": "receivers of a broadcast counting fewer micro-batches than the sender makes (class 9)",
}
"""Issue 11's seven false-positive causes and five misses, and issue 21's section-10 classes (our own
code in the pattern of each public fix, the fixed code as the look-alike): each has a pair under pairs/."""


def _run(project: Path, loaded: LoadedConfig | None = None) -> list:
    # --preview: a fixture shows what a rule finds, whatever its release status (`layoutcheck.lint.precision`).
    result = run([project], cwd=ROOT, use_cache=False, jobs=1, loaded=loaded, overrides=SelectionOverrides(preview=True))
    assert not result.errors, result.errors
    return result.findings


def _expected(project: Path) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(project.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            found = EXPECT.search(line)
            if found:
                rel = path.relative_to(ROOT).as_posix()
                out |= {(rel, number, name.strip()) for name in found.group(1).split(",")}
    return out


def _name(project: Path) -> str:
    return project.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("project", FLAGGED, ids=_name)
def test_flagged_project_has_exactly_the_marked_findings(project: Path) -> None:
    found = _run(project)
    assert {(f.path, f.line, f.rule) for f in found} == _expected(project), [
        f"{f.path}:{f.line}:{f.column} {f.rule}: {f.message}" for f in found
    ]


@pytest.mark.parametrize("project", LOOKALIKES, ids=_name)
def test_lookalike_project_is_silent(project: Path) -> None:
    found = _run(project)
    assert found == [], [f"{f.path}:{f.line}:{f.column} {f.rule}: {f.message}" for f in found]
    assert not _expected(project), "a look-alike marks no finding"


def test_every_cause_and_miss_has_a_pair_and_every_rule_a_flagged_finding() -> None:
    assert sorted(p.name.split("_")[0] for p in PAIRS) == sorted(CASES)
    for pair in PAIRS:
        assert _expected(pair / "flagged"), f"{pair.name}: the flagged half marks no finding"
        assert list((pair / "lookalike").rglob("*.py")), f"{pair.name}: no look-alike"
    marked = {rule for project in FLAGGED for _, _, rule in _expected(project)}
    for name in marked:
        rule_by_name(name)  # a misspelt marker fails here, not silently
    assert marked == {rule.name for rule in all_rules()}


def test_configured_owner_is_what_keeps_the_packer_clean() -> None:
    clean = {(f.path, f.line, f.rule) for f in _run(ROOT / "flagged")}
    defaults = LoadedConfig(None, ROOT, {}, TABLE)
    unconfigured = {(f.path, f.line, f.rule) for f in _run(ROOT / "flagged", defaults)}
    gained = unconfigured - clean
    assert gained and {rule for _, _, rule in gained} == {"padding-outside-owner"}
    assert {path for path, _, _ in gained} == {"flagged/packing.py"}


def test_fixtures_are_never_imported() -> None:
    imported = [
        name for name, module in list(sys.modules.items())
        if str(getattr(module, "__file__", None) or "").startswith(str(ROOT))
    ]
    assert imported == []
