"""The linter as users run it: a real `layoutcheck check` process on real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layoutcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "layoutcheck", "check", "--no-cache", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def test_second_owner_fixture_exits_1_and_json_names_rule_file_and_line():
    path = "fixtures/lint/flagged/replay_filler.py"
    proc = layoutcheck(path, "--output-format", "json", "--preview")  # LC102 is a preview rule
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(proc.stdout)
    expected_lines = {
        n for n, line in enumerate((ROOT / path).read_text().splitlines(), 1)
        if "# expect: padding-outside-owner" in line
    }
    second_owner = [f for f in findings if f["rule"] == "padding-outside-owner"]
    assert {f["line"] for f in second_owner} == expected_lines
    assert all(f["path"] == path and f["code"] == "LC102" for f in second_owner)


def test_layoutcheck_is_clean_on_its_own_source():
    # Dogfood: the project's own code passes its own linter,
    # with every suppression used. The fixtures are deliberately buggy and
    # excluded by [tool.layoutcheck] in pyproject.toml.
    # --preview: the project holds itself to every rule, not only the stable ones.
    proc = layoutcheck(".", "--report-unused-suppressions", "--output-format", "concise", "--preview")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "All checks passed" in proc.stderr


def test_linter_finds_the_reference_pipelines_static_bugs():
    # pyproject.toml excludes fixtures/minitrainer, but a folder named on the
    # command line is checked (as ruff does). The pipeline's bug flags that
    # live in code (not in data) are visible to the linter.
    proc = layoutcheck("fixtures/minitrainer", "--output-format", "json", "--preview")  # LC101/102/106: preview
    assert proc.returncode == 1, proc.stderr
    by_rule = {(f["rule"], f["path"]) for f in json.loads(proc.stdout)}
    assert {
        ("global-max-padding", "fixtures/minitrainer/data.py"),          # rollout_global_padding
        ("max-of-alignment-units", "fixtures/minitrainer/data.py"),      # alignment_max_not_lcm
        ("lengths-mutated-after-owner", "fixtures/minitrainer/data.py"),  # stale_lengths_after_expansion
        ("unguarded-rectangular-batch", "fixtures/minitrainer/data.py"),  # get_batch's max_seq_lens[0]
        ("padding-outside-owner", "fixtures/minitrainer/replay_data.py"),  # the THD pad re-derived
    } <= by_rule
