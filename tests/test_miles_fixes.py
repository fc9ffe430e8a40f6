"""`layoutcheck check --fix --unsafe-fixes` on Miles at 31f1ca961, against its own fix e78cfb3 (issue 16).

Runs when ``LAYOUTCHECK_MILES`` names a clone or bare mirror of radixark/miles that
holds 31f1ca961 (and e78cfb3 for the comparison), e.g.
``LAYOUTCHECK_MILES=/work/.mirror/radixark+miles/repo``; skipped otherwise. The work
is `benchmarks/miles_fixes.py`'s (one extract in a temporary folder, three CLI runs),
so the note in benchmarks/README.md and this test measure the same thing.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MILES = os.environ.get("LAYOUTCHECK_MILES")

pytestmark = pytest.mark.skipif(not MILES, reason="set LAYOUTCHECK_MILES to a Miles clone or mirror")


@pytest.fixture(scope="module")
def measured():
    spec = importlib.util.spec_from_file_location("miles_fixes", ROOT / "benchmarks" / "miles_fixes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    repo = Path(MILES).resolve()  # type: ignore[arg-type]
    if not module.has_commit(repo, module.PINNED):
        pytest.skip(f"{repo} does not hold {module.PINNED}")
    return module, module.measure(repo)


def test_the_fixed_tree_parses_the_fixed_rules_are_silent_and_a_second_run_changes_nothing(measured):
    module, result = measured
    assert result["changed"] == [module.DATA, module.REPLAY]
    assert all(result["parses"].values())
    fixed_rules = {"LC101", "LC103"}  # the rules whose every Miles finding had a fix
    assert fixed_rules <= set(result["before"]) and not fixed_rules & set(result["after"])
    # The rest is reported as before: a CP helper call is fixed only when the values are in scope.
    assert {code: n for code, n in result["before"].items() if code not in fixed_rules} == result["after"]
    assert result["status"] == 1 and result["summary"][0] == "Fixed 3 findings in 2 files."
    assert result["second_run_changed"] is False


def test_the_fix_writes_what_e78cfb3_wrote(measured):
    module, result = measured
    if not module.has_commit(Path(MILES).resolve(), module.UPSTREAM_FIX):  # type: ignore[arg-type]
        pytest.skip(f"{MILES} does not hold {module.UPSTREAM_FIX}")
    for title, site in result["sites"].items():
        assert site["ours"]["found"] and site["e78cfb3"]["found"], title
        assert site["same_syntax"], (title, site["ours"], site["e78cfb3"])
    padding = result["sites"]["per-sample padded lengths (get_rollout_data)"]
    # Both drop the rollout-wide maximum the broadcast needed.
    assert not padding["ours"]["max_seq_len_assigned"] and not padding["e78cfb3"]["max_seq_len_assigned"]
