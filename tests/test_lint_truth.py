"""`benchmarks/lint_truth.py` and its hand-read table (issue 21, point 5).

The table must judge real rules, name the seven trees with no configuration, and keep
each fixed false finding marked false; the script must fail a run whose precision is
below the target, or where a fixed false finding comes back, and pass it otherwise.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from layoutcheck.lint.registry import all_rules

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
SEVEN = {"miles", "slime", "verl", "openrlhf", "specforge", "areal", "megatron"}


@pytest.fixture(scope="module")
def truth():
    spec = importlib.util.spec_from_file_location("lint_truth", ROOT / "benchmarks" / "lint_truth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["lint_truth"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("lint_truth", None)


def test_the_table_pins_the_seven_trees_and_judges_every_finding_with_a_real_rule(truth) -> None:
    table = tomllib.loads(truth.TABLE.read_text())
    runs = table["runs"]
    names = {rule.name for rule in all_rules()}
    assert SEVEN <= {name for name, run in runs.items() if run["config"] == {}}
    for name, run in runs.items():
        assert re.fullmatch(r"[0-9a-f]{40}", run["commit"]), name
        assert re.fullmatch(r"[0-9a-f]{16}", run["tree"]) and run["files"] > 0, name
        entries = run.get("findings", [])
        if isinstance(entries, str):
            assert entries in runs, name  # judged by another run's verdicts
            continue
        seen = set()
        for entry in entries:
            where = (entry["file"], entry["line"], entry["rule"])
            assert where not in seen, where
            seen.add(where)
            assert entry["rule"] in names, where
            assert entry["verdict"] in ("true", "false") and entry["why"].strip(), where
            if entry.get("fixed"):
                assert entry["verdict"] == "false", where


_STALE = """\
def pad_rows(rows, tp_size, cp_size, state):
    padded = rows + (-rows) % tp_size
    state.padded_rows = padded
    padded += (-padded) % (2 * cp_size)
    return padded
"""


def _table(truth, tree: Path, verdict: str, fixed: bool) -> str:
    files, digest = truth.tree_digest(tree)
    return (
        f'[runs.tiny]\nrepo = "local"\ncommit = "{"0" * 40}"\ntree = "{digest}"\nfiles = {files}\nconfig = {{}}\n\n'
        f'[[runs.tiny.findings]]\nfile = "rows.py"\nline = 4\nrule = "lengths-mutated-after-owner"\n'
        f'verdict = "{verdict}"\n' + ('fixed = "abc1234"\n' if fixed else "") + 'why = "the pad of the recorded local"\n'
    )


@pytest.mark.parametrize(("verdict", "fixed", "code", "says"), [
    ("true", False, 0, "PASS"),
    ("false", False, 1, "precision with no configuration 0/1"),
    ("false", True, 1, "is reported again"),
])
def test_a_run_passes_only_when_its_findings_are_true(truth, tmp_path, capsys, verdict, fixed, code, says) -> None:
    tree = tmp_path / "tiny"
    tree.mkdir()
    (tree / "rows.py").write_text(_STALE)
    table = tmp_path / "truth.toml"
    table.write_text(_table(truth, tree, verdict, fixed))
    assert truth.main(["--list", "--table", str(table), f"tiny={tree}"]) == code
    out = capsys.readouterr().out
    assert says in out
    assert f"{verdict:<5} rows.py:4 lengths-mutated-after-owner" in out


def test_a_finding_the_table_does_not_list_fails_the_run(truth, tmp_path, capsys) -> None:
    tree = tmp_path / "tiny"
    tree.mkdir()
    (tree / "rows.py").write_text(_STALE)
    (tree / "more.py").write_text(_STALE)
    table = tmp_path / "truth.toml"
    table.write_text(_table(truth, tree, "true", False))
    assert truth.main(["--table", str(table), f"tiny={tree}"]) == 1
    assert "unreviewed finding more.py:4 lengths-mutated-after-owner" in capsys.readouterr().out
