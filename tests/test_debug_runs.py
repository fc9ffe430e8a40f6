"""The debug mode of a real run, end to end: every bug flag fails the step with the right message.

The job (`tests/debug_run.py`) is the reference pipeline, once correct and
once per bug flag; it never mentions layoutcheck. What checks it is only the
environment: ``LAYOUTCHECK=raise`` and a configuration naming the pipeline's
functions (``fixtures/debug-run.toml``, or ``preset = "miles"`` over modules
at the Miles paths), read by the ``.pth`` start-up file in every process:

* a plain subprocess;
* every rank of ``torchrun --nproc-per-node 2`` (each reports), on loopback;
* a Ray actor on a local cluster of the test's own, started *before* the driver, without the
  variable: only the driver has it, and `layoutcheck.runtime.activation.ray_env`
  carries it into the job's ``runtime_env``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bugcases import BUCKETS, CASES, CP
from isolation import LocalRayCluster, loopback_env

from layoutcheck.runtime.reporting.runreport import load_run_report

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "fixtures" / "debug-run.toml"
JOB = ROOT / "tests" / "debug_run.py"


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAYOUTCHECK", "RAY_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "fixtures"), str(ROOT / "tests"), str(ROOT)])
    env.update(extra)
    return env


def run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=environment(**env), capture_output=True, text=True, timeout=300)


def assert_cases(results: dict[str, dict], *, buckets: bool = False, only: str | None = None,
                 traced: bool = False) -> None:
    """Correct runs clean (no violation, no note); each bug flag fails its step naming its invariant.

    ``traced``: the job ran with the tracer on: the cases only it sees run too, and each case fails at the
    op the tracer names first, in the pipeline's source.
    """
    for r in range(CP):
        assert results[f"clean@{r}"] == {"type": None, "invariants": []}, results[f"clean@{r}"]
    session = results["session"]
    assert session is not None, "the debug mode was not active in the job"
    assert session["violations"] == 0 and session["notes"] == [], session
    for name, case in CASES.items():
        if case.buckets != buckets or only not in (None, name) or (case.tracer and not traced):
            assert name not in results
            continue
        got = results[name]
        invariant = (case.traced or case.invariant) if traced else case.invariant
        assert got["type"] == "LayoutError", (name, got)
        assert invariant in got["invariants"], (name, got["invariants"])
        assert f"[{invariant}] " in got["message"] and "fix:" in got["message"], name


def test_every_bug_flag_has_a_case():
    from minitrainer.bugs import BUG_NAMES

    assert set(CASES) == set(BUG_NAMES)


def test_a_subprocess_fails_each_buggy_step_with_the_right_message(tmp_path):
    proc = run([sys.executable, str(JOB), "out.json"], tmp_path, LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(CONFIG),
               LAYOUTCHECK_REPORT="report.json")
    assert proc.returncode == 0, proc.stderr
    assert_cases(json.loads((tmp_path / "out.json").read_text()))
    # the report (written at exit) has what the job's steps raised
    report = load_run_report(tmp_path / "report.json")
    assert {v.invariant for v in report.violations} >= {
        c.invariant for c in CASES.values() if not (c.buckets or c.tracer)}
    assert report.totals.rollouts > 0 and report.micro_batches and report.complete
    assert "layoutcheck: " in proc.stderr and "report: " in proc.stderr  # the exit summary


def test_with_the_tracer_on_every_bug_flag_fails_its_step_and_the_clean_runs_stay_clean(tmp_path):
    # LAYOUTCHECK_TRACE=1 beside LAYOUTCHECK=raise: the tracer's hooks too (the configuration names them), the
    # cases only it sees run as well, and where it is the first to see a bug the step stops at the op.
    proc = run([sys.executable, str(JOB), "out.json"], tmp_path, LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(CONFIG),
               LAYOUTCHECK_TRACE="1")
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "out.json").read_text())
    assert_cases(results, traced=True)
    assert len(results["session"]["hooks"]) == 7
    for name in ("logprobs_sliced_with_other_p", "replay_thd_pad_multiplier", "offsets_without_layout",
                 "loss_repad_to_rollout_max", "loss_cat_mixed_padded_lengths"):
        assert re.search(r"\] \S+ at \S*minitrainer/\w+\.py:\d+ in \w+", results[name]["message"]), name


def test_static_buckets_from_the_configuration(tmp_path):
    config = tmp_path / "buckets.toml"
    config.write_text(CONFIG.read_text().replace("[runtime]\n", f"[runtime]\nbuckets = {list(BUCKETS)}\n", 1))
    proc = run([sys.executable, str(JOB), "out.json", "--buckets"], tmp_path, LAYOUTCHECK="raise",
               LAYOUTCHECK_CONFIG=str(config))
    assert proc.returncode == 0, proc.stderr
    assert_cases(json.loads((tmp_path / "out.json").read_text()), buckets=True)


MILES_MODULES = {
    # Modules at the Miles paths of docs/design.md#a-real-data-path-miles, here re-exporting the reference pipeline:
    # the preset's hooks find the functions there and rebind every copy (minitrainer's own included).
    "data": "from minitrainer.data import DataIterator, get_batch, get_data_iterator, get_rollout_data",
    "replay_data": "from minitrainer.replay_data import fill_replay_data",
    "cp_utils": "from minitrainer.cp_utils import get_logits_and_tokens_offset_with_cp, slice_with_cp",
    "parallel": "from minitrainer.parallel import get_parallel_state, set_parallel_state",
}


def test_the_miles_preset_is_one_line_of_configuration(tmp_path):
    package = tmp_path / "miles" / "backends" / "training_utils"
    package.mkdir(parents=True)
    for folder in (tmp_path / "miles", tmp_path / "miles" / "backends", package):
        (folder / "__init__.py").write_text("")
    for name, line in MILES_MODULES.items():
        (package / f"{name}.py").write_text(line + "\n")
    (tmp_path / "pyproject.toml").write_text('[tool.layoutcheck.runtime]\npreset = "miles"\n')
    # The trainer's entry point: Miles imports its own modules (here at the Miles paths), then trains.
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(tmp_path)!r}]
        import miles.backends.training_utils.cp_utils, miles.backends.training_utils.data
        import miles.backends.training_utils.parallel, miles.backends.training_utils.replay_data
        sys.argv[0] = {str(JOB)!r}
        exec(compile(open({str(JOB)!r}).read(), {str(JOB)!r}, "exec"))
        """))
    proc = run([sys.executable, str(script), "out.json", "--only", "rollout_global_padding"], tmp_path,
               LAYOUTCHECK="raise")
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "out.json").read_text())
    assert_cases(results, only="rollout_global_padding")
    assert sorted(results["session"]["hooks"]) == sorted([
        "producer: miles.backends.training_utils.data:get_rollout_data",
        "batch-builder: miles.backends.training_utils.data:get_batch",
        "replay-filler: miles.backends.training_utils.replay_data:fill_replay_data",
        "offset-helper: miles.backends.training_utils.cp_utils:get_logits_and_tokens_offset_with_cp",
    ])


def test_every_torchrun_rank_checks_and_reports(tmp_path):
    # the rendezvous store and gloo on loopback, on ports the OS picks
    proc = run([sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--rdzv-backend=c10d",
                "--rdzv-endpoint=127.0.0.1:0", f"--nproc-per-node={CP}", str(JOB), "out.json"], tmp_path,
               LAYOUTCHECK="raise", LAYOUTCHECK_CONFIG=str(CONFIG), LAYOUTCHECK_REPORT="report-{rank}.json",
               **loopback_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"out.{r}.json").read_text()) for r in range(CP)]
    assert len({r["pid"] for r in ranks}) == CP
    for rank, results in enumerate(ranks):
        assert results["env"] == "raise"  # torchrun's ranks inherit the variable
        assert results[f"clean@{rank}"] == {"type": None, "invariants": []}
        assert results["session"]["violations"] == 0 and results["session"]["notes"] == []
        for name, case in CASES.items():
            if case.buckets or case.tracer:
                continue
            if case.rank == rank:  # the rank whose layout shows the bug fails its step
                assert results[name]["type"] == "LayoutError" and case.invariant in results[name]["invariants"], name
    for rank in range(CP):  # every rank writes its own report
        report = load_run_report(tmp_path / f"report-{rank}.json")
        assert report.rank.rank == rank and report.rank.world_size == CP
        assert "O3" in {v.invariant for v in report.violations}
        assert f"layoutcheck [rank {rank}]: " in proc.stderr


DRIVER = """
import json, os, sys
import ray

ray.init(address=os.environ["RAY_ADDRESS"], runtime_env={"env_vars": {"PYTHONPATH": sys.argv[2]}})


@ray.remote
class Trainer:
    def cases(self):
        import debug_run
        return debug_run.run_cases()

    def buggy_step(self):  # a LayoutError that leaves the actor reaches the driver with its message
        from minitrainer.actor import train_step
        from minitrainer.args import make_args
        from minitrainer.parallel import parallel_state
        from minitrainer.rollout import make_rollout_ref
        with parallel_state(cp_size=2, cp_rank=0):
            train_step(make_args(bugs={"rollout_global_padding"}), make_rollout_ref([300, 1000]))


trainer = Trainer.remote()
out = {"cases": ray.get(trainer.cases.remote())}
try:
    ray.get(trainer.buggy_step.remote())
except Exception as err:
    out["error"] = {"type": type(err).__name__, "message": str(err)}
json.dump(out, open(sys.argv[1], "w"))
"""


def test_a_ray_actor_on_a_cluster_started_before_the_driver(tmp_path):
    pytest.importorskip("ray")
    # The cluster starts without the variable: its workers would never inherit it from a shell. It is the
    # test's own (loopback, own folder, token and HOME), and stopping it stops only its processes.
    with LocalRayCluster(environment()) as cluster:
        (tmp_path / "driver.py").write_text(DRIVER)
        paths = os.pathsep.join([str(ROOT / "fixtures"), str(ROOT / "tests")])
        proc = run([sys.executable, "driver.py", "out.json", paths], tmp_path, LAYOUTCHECK="raise",
                   LAYOUTCHECK_CONFIG=str(CONFIG), **cluster.env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["cases"]["env"] == "raise"  # the actor got the variable through the job's runtime_env
    assert_cases(out["cases"])
    assert "LayoutError" in out["error"]["message"] and "[O3] get_rollout_data, sample 0" in out["error"]["message"]
