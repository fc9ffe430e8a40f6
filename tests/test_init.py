"""``layoutcheck init``: the debug mode's table from the project model, equivalent to the presets on real trees.

On the reference pipeline (Miles's shapes) it proposes what
``fixtures/debug-run.toml`` says, found from the model alone (owners, CP
helpers, the call graph); the loss function, a tracer role, is the one part
the model does not find. It never overwrites a table without ``--force``.
On verl's and Miles's real trees: ``tests/trainers/test_presets.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layoutcheck.configfile import load_config
from layoutcheck.runtime.hooks.settings import RuntimeSettings

ROOT = Path(__file__).resolve().parent.parent
NOT_INFERRED = {"loss-function"}
"""Roles the model cannot find (a consumer of the batch, run inside the tracer)."""


def init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "layoutcheck", "init", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def runtime(path: Path) -> RuntimeSettings:
    return load_config(path).config.runtime.settings()


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, default=list)


def equivalent(proposed: RuntimeSettings, expected: RuntimeSettings) -> None:
    """The same hooks (but the roles the model does not find), boundaries, coordinates and parallel state."""
    hooks = {str(h) for h in expected.hook_specs() if h.role not in NOT_INFERRED}
    assert {str(h) for h in proposed.hook_specs()} == hooks
    assert _json(proposed.boundary_tables()) == _json(expected.boundary_tables())
    assert proposed.coordinate_sources() == expected.coordinate_sources()
    assert proposed.parallel_state_target == expected.parallel_state_target


@pytest.fixture
def minitrainer(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "fixtures" / "minitrainer", project / "minitrainer",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return project


def test_on_the_reference_pipeline_it_proposes_the_debug_run_table(minitrainer):
    proc = init(".", cwd=minitrainer)
    assert proc.returncode == 0, proc.stderr
    written = minitrainer / "layoutcheck.toml"
    text = written.read_text()
    assert "# minitrainer.replay_data:fill_replay_data: reads the per-sample padded lengths" in text
    assert "parallel-state" in text and "every CP helper" in text
    equivalent(runtime(written), runtime(ROOT / "fixtures" / "debug-run.toml"))
    config = load_config(written).config
    assert config.owners["bshd"] == ("minitrainer.data:get_rollout_data",)
    assert config.owners["thd"] == ("minitrainer.data:get_batch",)


def test_an_existing_table_is_kept_unless_forced(minitrainer):
    pyproject = minitrainer / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[tool.layoutcheck.runtime]\nmode = "warn"\n\n[tool.other]\nk = 1\n')
    proc = init(".", cwd=minitrainer)
    assert proc.returncode == 2 and "already has a runtime table" in proc.stderr and "--force" in proc.stderr
    assert 'mode = "warn"' in pyproject.read_text()
    diff = init(".", "--diff", cwd=minitrainer)
    assert diff.returncode == 0 and diff.stdout.startswith("--- pyproject.toml\n+++ pyproject.toml"), diff.stderr
    assert '-mode = "warn"' in diff.stdout and "+[tool.layoutcheck.runtime.hooks]" in diff.stdout
    assert pyproject.read_text().count("[tool.layoutcheck.runtime]") == 1  # --diff writes nothing
    proc = init(".", "--force", cwd=minitrainer)
    assert proc.returncode == 0, proc.stderr
    text = pyproject.read_text()
    assert '[project]\nname = "x"' in text and "[tool.other]\nk = 1" in text and 'mode = "warn"' not in text
    equivalent(runtime(pyproject), runtime(ROOT / "fixtures" / "debug-run.toml"))
    printed = init(".", "--stdout", cwd=minitrainer)
    assert printed.stdout.startswith("# Written by `layoutcheck init`") and "[tool.layoutcheck.runtime.hooks]" in printed.stdout


def test_inline_tables_in_the_main_table_are_left_to_the_user(minitrainer):
    config = minitrainer / "layoutcheck.toml"
    config.write_text('owners = { bshd = ["a:b"] }\n')
    proc = init(".", "--force", cwd=minitrainer)
    assert proc.returncode == 2 and "owners = { bshd" in proc.stderr and "by hand" in proc.stderr
