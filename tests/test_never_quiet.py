"""A debug run never goes quiet by mistake (issue 19, point 4): each silent misconfiguration, as a user meets it.

Each case runs the reference pipeline (`tests/debug_run.py` on
``fixtures/minitrainer``) in a subprocess with ``LAYOUTCHECK`` set and a
configuration written the way a user gets it wrong: a misspelled hook
module, a module the program never imports, a function its module lacks, a
``[tool.layoutcheck.runtime]`` table inside a ``layoutcheck.toml``, an
unknown key, an unknown ``LAYOUTCHECK`` value. Only the two clean runs of
the job run (``--only none``): two rollouts each, so the first step ends in
the first of them. What must hold:

* a mistake in the configuration (a key or table the file cannot contain,
  a bad value, an unknown ``LAYOUTCHECK`` value, a hook module its package
  lacks, a function its module lacks): the process stops before the job's
  first step, in every mode, with one message naming the key and the file
  (or the variable) and the fix, no traceback, exit status 2
  (`tests/test_activation.py` has each mistake on a tiny trainer);
* a module that exists but the program never imports: known at exit only;
  raise mode fails the process (status 1), warn and record modes say it in
  the exit summary and the run report;
* always: the summary's second line says how many hooks went in and the
  calls each saw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from layoutcheck.runtime.reporting.runreport import load_run_report

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "fixtures" / "debug-run.toml"
JOB = ROOT / "tests" / "debug_run.py"


def run(tmp: Path, config: Path | None, *, mode: str = "raise", extra_path: str = "",
        args: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    """The job's clean runs in a subprocess; its completed process and what each run raised (``None``: no file)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    env.update(LAYOUTCHECK=mode, LAYOUTCHECK_REPORT="report.json",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "fixtures"), str(ROOT / "tests"), extra_path, str(ROOT)) if p))
    if config is not None:
        env["LAYOUTCHECK_CONFIG"] = str(config)
    proc = subprocess.run([sys.executable, *(args or (str(JOB), "out.json", "--only", "none"))], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=300)
    out = tmp / "out.json"
    return proc, json.loads(out.read_text()) if out.exists() else None


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def misspelled(tmp: Path, old: str, new: str) -> Path:
    text = CONFIG.read_text()
    assert old in text
    return write(tmp / "layoutcheck.toml", text.replace(old, new))


def summary_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("layoutcheck: ")]


# ---------------------------------------------------------------- a clean run: the summary always counts


def test_a_clean_run_says_how_many_hooks_went_in_and_the_calls_each_saw(tmp_path):
    proc, out = run(tmp_path, CONFIG)
    assert proc.returncode == 0, proc.stderr
    assert out["clean@0"] == {"type": None, "invariants": []}
    first, second = summary_lines(proc.stderr)[-2:]
    assert first.startswith("layoutcheck: no layout violations (checked 4 rollouts")
    # 2 clean runs x 2 rollouts; each rollout: 2 replay fillers, 2 passes of 8 micro-batches, the loss side's offsets
    assert second == ("layoutcheck: 4 of 4 hooks installed; calls: get_rollout_data 4, get_batch 64, "
                      "fill_replay_data 8, get_logits_and_tokens_offset_with_cp 128; 3 tracer hooks off "
                      "(LAYOUTCHECK_TRACE=1)"), second
    report = load_run_report(tmp_path / "report.json")
    assert report.complete and report.problems == []
    assert [(h.role, h.installed, h.calls) for h in report.hook_calls] == [
        ("producer", True, 4), ("batch-builder", True, 64), ("replay-filler", True, 8), ("offset-helper", True, 128)]


# ---------------------------------------------------------------- a misspelled module


def assert_stopped(proc: subprocess.CompletedProcess[str], out: dict | None, first_line: str) -> None:
    """Stopped before the job's first step: one message, its first line as given, no traceback, status 2."""
    assert proc.returncode == 2 and out is None, proc.stderr  # the job wrote nothing: no step ran
    assert "Traceback" not in proc.stderr and proc.stderr.count("layoutcheck: configuration error: ") == 1
    assert proc.stderr.startswith(f"layoutcheck: configuration error: {first_line}"), proc.stderr
    assert proc.stderr.splitlines()[-1].endswith("or unset LAYOUTCHECK to run without the debug mode.")


@pytest.mark.parametrize("mode", ["raise", "record"])
def test_a_misspelled_hook_module_stops_the_run_when_its_package_is_imported(tmp_path, mode):
    config = misspelled(tmp_path, "minitrainer.data:get_batch", "minitrainer.dataa:get_batch")
    proc, out = run(tmp_path, config, mode=mode)
    assert_stopped(proc, out, f"runtime.hooks.batch-builder in {config}: `minitrainer.dataa:get_batch` cannot be "
                   "installed: module `minitrainer.dataa` does not exist: `minitrainer` has no module `dataa`; did "
                   "you mean `minitrainer.data`?")
    assert "stopped when the program imported `minitrainer`, before any step" in proc.stderr


def test_a_process_that_never_runs_the_trainer_says_nothing(tmp_path):
    # a launcher, a driver, pip: the trainer's package is not even imported, so a missing module is no evidence
    config = misspelled(tmp_path, "minitrainer.data:get_batch", "minitrainer.dataa:get_batch")
    proc, _ = run(tmp_path, config, args=("-c", "print('tool')"))
    assert proc.returncode == 0 and proc.stdout == "tool\n" and proc.stderr == "", proc.stderr


# ---------------------------------------------------------------- a module the program never imports


def test_a_hook_whose_module_is_never_imported_fails_raise_mode_at_exit(tmp_path):
    # An existing module (a trainer's other code path) that this run never imports: known only at exit.
    (tmp_path / "othertrainer").mkdir()
    write(tmp_path / "othertrainer" / "__init__.py", "")
    write(tmp_path / "othertrainer" / "fsdp_data.py", "def get_batch(data_iterator, keys):\n    return {}\n")
    config = misspelled(tmp_path, 'batch-builder = ["minitrainer.data:get_batch"]',
                        'batch-builder = ["minitrainer.data:get_batch", "othertrainer.fsdp_data:get_batch"]')
    proc, out = run(tmp_path, config, extra_path=str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    assert out["clean@0"]["type"] is None and out["clean@1"]["type"] is None  # the steps ran, checked
    assert ("layoutcheck: the debug mode is not checking what its configuration says (1 problem, raise mode, at exit):\n"
            f"  runtime.hooks.batch-builder in {config}: `othertrainer.fsdp_data:get_batch` was never installed: "
            "this process never imported `othertrainer.fsdp_data`") in proc.stderr
    record, _ = run(tmp_path, config, mode="record", extra_path=str(tmp_path))
    assert record.returncode == 0, record.stderr
    assert any(line.startswith("layoutcheck: 1 of 5 hooks never installed: batch-builder "
                               "`othertrainer.fsdp_data:get_batch` (this process never imported")
               for line in summary_lines(record.stderr)), record.stderr


# ---------------------------------------------------------------- a function its module lacks


@pytest.mark.parametrize("mode", ["raise", "warn"])
def test_a_hook_target_its_module_lacks_stops_at_install_naming_the_key_and_the_file(tmp_path, mode):
    config = misspelled(tmp_path, "minitrainer.data:get_batch", "minitrainer.data:get_batchh")
    proc, out = run(tmp_path, config, mode=mode)
    assert_stopped(proc, out, f"runtime.hooks.batch-builder in {config}: cannot hook `minitrainer.data:get_batchh` "
                   "(batch-builder): `minitrainer.data` has no attribute `get_batchh`; did you mean `get_batch`?")
    assert "stopped when the program imported `minitrainer.data`, before any call of the hook" in proc.stderr


# ---------------------------------------------------------------- tables and keys the file cannot contain


def test_a_tool_layoutcheck_table_in_a_layoutcheck_toml_stops_the_run_at_start(tmp_path):
    config = write(tmp_path / "layoutcheck.toml", CONFIG.read_text().replace("[runtime", "[tool.layoutcheck.runtime"))
    proc, out = run(tmp_path, config, mode="record")
    assert_stopped(proc, out, f"tool.layoutcheck in {config}: a table a layoutcheck.toml cannot contain (its top "
                   "level is the [tool.layoutcheck] table itself): write [runtime], not [tool.layoutcheck.runtime]")
    assert "stopped at start, before the program ran" in proc.stderr
    assert f"correct `tool.layoutcheck` in {config}" in proc.stderr


@pytest.mark.parametrize("where", ["pyproject", "layoutcheck.toml"])
def test_an_unknown_key_is_named_with_its_file_and_a_near_spelling(tmp_path, where):
    text = CONFIG.read_text().replace('mode = "raise"', 'mode = "raise"\ncross-rank-timout = 5')
    if where == "pyproject":
        config = write(tmp_path / "pyproject.toml", text.replace("[runtime", "[tool.layoutcheck.runtime"))
        key = "tool.layoutcheck.runtime.cross-rank-timout"
    else:
        config = write(tmp_path / "layoutcheck.toml", text)
        key = "runtime.cross-rank-timout"
    proc, out = run(tmp_path, config)
    assert_stopped(proc, out, f"{key} in {config}: unknown key; did you mean `cross-rank-timeout`? (valid keys: "
                   "boundaries, buckets, ")


# ---------------------------------------------------------------- an unknown LAYOUTCHECK value


def test_an_unknown_layoutcheck_value_stops_the_run_at_start(tmp_path):
    proc, out = run(tmp_path, CONFIG, mode="rase")
    assert_stopped(proc, out, "LAYOUTCHECK='rase' (environment variable): did you mean `raise`? expected one of "
                   "raise, warn, record, 1 (the configured mode) or 0 (off)")
    assert "set LAYOUTCHECK to one of the values above" in proc.stderr


def test_a_value_of_the_wrong_kind_stops_the_run_at_start_in_every_mode_and_every_process(tmp_path):
    # checks on what a mistake left to a default would be wrong checks: nothing runs, not even a tool
    config = misspelled(tmp_path, 'mode = "raise"', 'mode = "lound"')
    for mode in ("raise", "record"):
        proc, out = run(tmp_path, config, mode=mode)
        assert_stopped(proc, out, f"1 error in {config}:\n  runtime.mode\n    Input should be 'raise', 'warn' or "
                       "'record'")
    tool, _ = run(tmp_path, config, args=("-c", "import json; print('ok')"))
    assert tool.returncode == 2 and tool.stdout == "" and "correct `runtime.mode` in" in tool.stderr


# ---------------------------------------------------------------- in process: telling a typo from a module not used


def test_a_module_is_judged_from_what_the_process_already_knows_never_by_importing_it(tmp_path, monkeypatch):
    from layoutcheck.runtime.hooks.targets import module_state, not_installed_reason

    (tmp_path / "quietpkg").mkdir()
    write(tmp_path / "quietpkg" / "__init__.py", "")
    write(tmp_path / "quietpkg" / "data.py", "raise RuntimeError('imported')\n")  # importing it would fail
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_state("quietpkg.data") == "unknown"  # its package is not imported: finding it would import it
    assert module_state("quietpkg") == "importable" and module_state("quietpkgg") == "not found"
    import quietpkg  # noqa: F401 - the program imports the package, never the module

    assert module_state("quietpkg.data") == "importable" and "quietpkg.data" not in sys.modules
    assert module_state("quietpkg.dat") == "missing"
    assert not_installed_reason("quietpkg.dat", calls=0, at_exit=False) == (
        "module `quietpkg.dat` does not exist: `quietpkg` has no module `dat`; did you mean `quietpkg.data`?")
    # a module that exists: no evidence before exit, nor in a process whose hooks saw no call
    assert not_installed_reason("quietpkg.data", calls=5, at_exit=False) is None
    assert not_installed_reason("quietpkg.data", calls=0, at_exit=True) is None
    assert not_installed_reason("quietpkg.data", calls=5, at_exit=True).startswith(
        "this process never imported `quietpkg.data` (its other hooks saw 5 calls)")
    assert not_installed_reason("quietpkgg.data", calls=0, at_exit=True) is None  # a launcher's sys.path
    assert not_installed_reason("quietpkgg.data", calls=5, at_exit=False) == (
        "no module `quietpkgg` can be found in this process")
    sys.modules.pop("quietpkg", None)


def test_the_summary_tells_two_hooked_functions_of_one_name_apart():
    from layoutcheck.runtime.reporting.setup import HookStatus, SetupLedger

    ledger = SetupLedger([HookStatus("loss-function", f"pkg.{m}:before", "runtime.hooks.loss-function")
                          for m in ("first", "second")] + [HookStatus("producer", "pkg.data:get_rollout_data", "k")])
    for hook, calls in zip(ledger.hooks, (1, 2, 3)):
        hook.installed, hook.calls = True, calls
    assert ledger.hook_line() == "3 of 3 hooks installed; calls: first.before 1, second.before 2, get_rollout_data 3"
