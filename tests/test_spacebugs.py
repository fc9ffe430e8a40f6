"""Bugs that keep every shape intact, after real fixes (`fixtures/spacebugs`): each caught at its op, its fix silent.

Each pair runs on the reference pipeline's micro-batches as the debug mode
runs a trainer: the configuration (`fixtures/spacebugs/debug.toml`) hooks
the pipeline's producer, batch builder and CP helpers (they tag what they
return) and runs the pair's functions inside the tracer. The bug must be
named at its op, by the rule the pair states, at the pair's own source
line (read back here); its fix must be silent; and the boundary checks
alone must not see it (no shape changes), while its symptom is real (the
two results differ, or the bug crashes as the real one did).

Three ways to run it: in-process (record mode), the debug mode of a
subprocess (``LAYOUTCHECK=raise`` and the configuration, nothing in the
code), and the pytest plugin (``pytest --layoutcheck``).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import spacebugs
from spacebugs import PAIRS
from spacebugs.run import run_pair

from layoutcheck.runtime import activation
from layoutcheck.runtime.tracing.tags import clear_tags

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "fixtures" / "spacebugs" / "debug.toml"
PACKAGE = Path(spacebugs.__file__).resolve().parent
WHERE = re.compile(r"(?P<op>.+) at (?P<path>\S+):(?P<line>\d+) in (?P<function>\S+)\Z")
ON_THE_LINE = {  # what the source line of each op shows
    "slice_with_cp": "slice_with_cp(",
    "torch.roll": "torch.roll(",
    "torch.where": "torch.where(",
    "Tensor.mul": " * ",
    "indexing (Tensor.__getitem__)": "[",
}
pytest_plugins = ["pytester"]


def session_for(tmp_path: Path, *, tracer: bool = True) -> activation.Session:
    text = CONFIG.read_text().replace('mode = "raise"', 'mode = "record"\nsummary = false')
    if not tracer:
        text = text.replace("tracer = true", "tracer = false")
    (tmp_path / "layoutcheck.toml").write_text(text)
    return activation.activate(config=tmp_path / "layoutcheck.toml", environ={})


@pytest.fixture
def session(tmp_path):
    yield functools.partial(session_for, tmp_path)
    activation.deactivate()
    clear_tags()


def test_every_rule_has_a_pair_and_every_pair_names_its_real_fix():
    assert {p.rule for p in PAIRS.values()} == {"S1", "S2", "S3", "S4", "S5"}
    assert {p.bug_class for p in PAIRS.values()} >= {3, 4, 5, 6, 7}
    for name, pair in PAIRS.items():
        module = importlib.import_module(f"spacebugs.{name}")
        repo, commit = pair.source.split()
        assert repo in module.__doc__ and commit in module.__doc__ and name.split("_")[1] == commit, name
        assert module.__doc__.startswith(f"{pair.rule}, "), name
        assert "Broke" in module.__doc__ and "Fixed" in module.__doc__, name
    assert sorted(p.stem for p in PACKAGE.glob("[a-z]*_*.py")) == sorted(PAIRS)  # no pair left out of the table


@pytest.mark.parametrize("name", list(PAIRS))
def test_each_bug_is_caught_at_its_op_and_its_fix_is_silent(session, name):
    pair = PAIRS[name]
    traced = session()
    fixed = run_pair(name, "after")
    assert traced.violations == [] and traced.notes == [], traced.summary()
    try:
        buggy = run_pair(name, "before")
    except RuntimeError:
        buggy = None  # the real bug crashed too (after the tracer named it)
    found = [(v, WHERE.match(v.where)) for v in traced.violations]
    assert found and all(match for _, match in found), [v.where for v, _ in found]
    assert {v.invariant for v, _ in found} == {pair.rule}, traced.summary()
    for v, match in found:
        assert match["op"] == pair.op and Path(match["path"]).resolve() == PACKAGE / f"{name}.py", v.where
        line = Path(match["path"]).read_text().splitlines()[int(match["line"]) - 1]
        assert ON_THE_LINE[pair.op] in line, (v.where, line)
        assert v.sample is not None and v.expected and v.hint and f"[{pair.rule}] " in v.format()
    assert traced.notes == []
    # the symptom is real: the results differ, or the bug crashed as the real one did
    assert buggy is None or [float(x) for x in buggy] != [float(x) for x in fixed]


@pytest.mark.parametrize("name", list(PAIRS))
def test_the_boundary_checks_alone_do_not_see_it(session, name):
    checks = session(tracer=False)
    try:
        run_pair(name, "before")
    except RuntimeError:
        pass
    assert checks.violations == [] and checks.notes == [], checks.summary()


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAYOUTCHECK", "RAY_"))}
    env["PYTHONPATH"] = str(ROOT / "fixtures")
    env.update(extra)
    return env


def test_the_debug_mode_of_a_subprocess_stops_each_bug_at_its_line_and_runs_each_fix(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spacebugs.run", "out.json"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=environment(LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(CONFIG)))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "out.json").read_text())
    for name, pair in PAIRS.items():
        assert results[f"after:{name}"]["type"] is None, results[f"after:{name}"]
        got = results[f"before:{name}"]
        assert got["type"] == "LayoutError" and got["invariants"] == [pair.rule], (name, got)
        assert re.search(rf"\[{pair.rule}\] .* at \S*spacebugs/{name}\.py:\d+ in \w+", got["message"]), got["message"]
        assert "fix:" in got["message"]


PLUGIN_TESTS = """
import pytest
from spacebugs import PAIRS
from spacebugs.run import run_pair


@pytest.mark.parametrize("name", list(PAIRS))
def test_fixed(name):
    run_pair(name, "after")


@pytest.mark.parametrize("name", list(PAIRS))
def test_buggy(name):
    run_pair(name, "before")
"""


def test_under_the_pytest_plugin_each_bug_fails_its_test(pytester):
    table = CONFIG.read_text().replace("[runtime", "[tool.layoutcheck.runtime").replace("tracer = true\n", "")
    pytester.makepyprojecttoml(table)  # the tracer is on by default under the plugin
    pytester.makeconftest(f"import sys\nsys.path[:0] = [{str(ROOT / 'fixtures')!r}]\n")
    pytester.makepyfile(test_pairs=PLUGIN_TESTS)
    result = pytester.runpytest_subprocess("--layoutcheck", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=len(PAIRS), failed=len(PAIRS))
    for name, pair in PAIRS.items():
        result.stdout.fnmatch_lines([f"*FAILED*test_buggy?{name}?*{pair.rule}*spacebugs/{name}.py:*"])
