"""Debug mode by environment variable: the `.pth` start-up file, in real subprocesses.

A tiny Miles-shaped trainer (plain lists, no torch, so each subprocess
starts in a fraction of a second) is written to a temporary folder with a
`layoutcheck.toml` naming its producer; the process under test never
mentions layoutcheck. The reference pipeline's bugs under torchrun and Ray
are in `test_debug_runs.py`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import layoutcheck
from layoutcheck.errors import ConfigError, LayoutError
from layoutcheck.runtime import activation
from layoutcheck.runtime.reporting.runreport import load_run_report

TRAINER = '''
from argparse import Namespace


def _round_up(n, m):
    return -(-n // m) * m


def get_rollout_data(args, rollout_data_ref, witness_info=None):
    totals = list(rollout_data_ref)
    if args.global_padding:  # the rollout-global padding bug
        padded = [_round_up(max(totals), 128)] * len(totals)
    else:
        padded = [_round_up(t, 128) for t in totals]
    data = {
        "tokens": [[1] * t for t in totals],
        "total_lengths": totals,
        "response_lengths": [t // 2 for t in totals],
        "max_seq_lens": padded,
    }
    return data, None


def make_args(global_padding=False):
    return Namespace(qkv_format="bshd", allgather_cp=False, data_pad_size_multiplier=128,
                     compress_ratios=[], sequence_parallel=False, global_padding=global_padding)
'''

SCRIPT = '''
import sys
from tinytrainer.data import get_rollout_data, make_args

def step(bug):
    get_rollout_data(make_args(global_padding=bug), [300, 1000])

if __name__ == "__main__":
    step(sys.argv[1:] == ["bug"])
    print("trained")
'''

CONFIG = '''
[runtime]
{extra}
[runtime.hooks]
producer = ["tinytrainer.data:get_rollout_data"]
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tinytrainer").mkdir()
    (tmp_path / "tinytrainer" / "__init__.py").write_text("")
    (tmp_path / "tinytrainer" / "data.py").write_text(TRAINER)
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "layoutcheck.toml").write_text(CONFIG.format(extra=""))
    return tmp_path


def run(project: Path, *args: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    environ.update(env or {})
    # the layoutcheck under test (a checkout's, ahead of an installed copy), then the project
    environ["PYTHONPATH"] = os.pathsep.join([str(project), str(Path(layoutcheck.__file__).resolve().parent.parent)])
    return subprocess.run(
        [sys.executable, *args], cwd=project, env=environ, capture_output=True, text=True, timeout=120, **kw
    )


def test_the_startup_files_are_installed_beside_the_package():
    # What makes the env var work at all: the files sit in site-packages and
    # sort after editable-install path files, so the package is importable.
    roots = [Path(p) for p in site.getsitepackages()]
    pth = [r / "a0_layoutcheck.pth" for r in roots if (r / "a0_layoutcheck.pth").is_file()]
    assert pth, f"a0_layoutcheck.pth is in none of {roots}: reinstall layoutcheck (pip install -e .)"
    folder = pth[0].parent
    assert (folder / "a0_layoutcheck.start").read_text().strip() == "_layoutcheck_startup:main"
    assert (folder / "_layoutcheck_startup.py").is_file()
    editable = sorted(p.name for p in folder.glob("*.pth") if "layoutcheck" in p.name)
    assert editable[-1] == "a0_layoutcheck.pth", editable
    # the shipped copies are the repository's
    source = Path(layoutcheck.__file__).parent.parent / "startup"
    if source.is_dir():  # an editable install copies them: a stale copy needs `pip install -e .` again
        for name in ("a0_layoutcheck.pth", "a0_layoutcheck.start", "_layoutcheck_startup.py"):
            assert (folder / name).read_text() == (source / name).read_text(), f"{name} is stale: reinstall"


def test_the_startup_module_agrees_on_what_off_means():
    import _layoutcheck_startup

    from layoutcheck.runtime.hooks import settings

    assert _layoutcheck_startup.OFF == settings._OFF


def test_without_the_variable_nothing_is_imported(project):
    proc = run(project, "-c", "import sys; print(sorted(m for m in sys.modules if 'layoutcheck' in m and 'editable' not in m))")
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


def test_raise_mode_fails_the_step_with_the_violation(project):
    ok = run(project, "train.py", env={"LAYOUTCHECK": "raise"})
    assert ok.returncode == 0 and "trained" in ok.stdout, ok.stderr
    assert "layoutcheck: no layout violations (checked 1 rollout)" in ok.stderr
    bad = run(project, "train.py", "bug", env={"LAYOUTCHECK": "raise"})
    assert bad.returncode == 1 and "trained" not in bad.stdout
    assert "layoutcheck.errors.LayoutError: 1 layout violation" in bad.stderr
    assert "[O3] get_rollout_data, sample 0, field `max_seq_lens`" in bad.stderr
    assert "expected: 384 (T_i <= P_i < T_i + A)" in bad.stderr


def test_warn_and_record_modes_let_the_step_run(project):
    warn = run(project, "train.py", "bug", env={"LAYOUTCHECK": "warn"})
    assert warn.returncode == 0 and "trained" in warn.stdout
    assert "LayoutWarning: 1 layout violation" in warn.stderr
    assert "layoutcheck: 1 layout violation (O3 x1) in get_rollout_data" in warn.stderr
    record = run(project, "train.py", "bug", env={"LAYOUTCHECK": "record", "LAYOUTCHECK_REPORT": "out/run.json"})
    assert record.returncode == 0 and "LayoutWarning" not in record.stderr
    report = load_run_report(project / "out" / "run.json")
    assert report.mode == "record" and report.hooks == ["producer: tinytrainer.data:get_rollout_data"]
    assert [(v.invariant, v.sample) for v in report.violations] == [("O3", 0)]


def test_one_means_the_configured_mode(project):
    (project / "layoutcheck.toml").write_text(CONFIG.format(extra='mode = "warn"'))
    proc = run(project, "train.py", "bug", env={"LAYOUTCHECK": "1"})
    assert proc.returncode == 0 and "LayoutWarning" in proc.stderr
    off = run(project, "-c", "import sys; print('layoutcheck' in sys.modules)", env={"LAYOUTCHECK": "0"})
    assert off.returncode == 0 and off.stdout.strip() == "False" and off.stderr == ""


def test_the_config_is_found_from_the_working_folder_or_named(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    moved = elsewhere / "pyproject.toml"
    moved.write_text(CONFIG.replace("[runtime", "[tool.layoutcheck.runtime").format(extra=""))
    (project / "layoutcheck.toml").unlink()
    missing = run(project, "train.py", "bug", env={"LAYOUTCHECK": "raise"})
    assert "trained" in missing.stdout  # the program runs, unchecked; raise mode fails it at exit
    assert missing.returncode == 1, missing.stderr
    assert "no hooks are configured (no configuration file was found)" in missing.stderr
    assert "layoutcheck: nothing was checked in this process" in missing.stderr
    named = run(project, "train.py", "bug", env={"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": str(moved)})
    assert named.returncode == 1 and "[O3]" in named.stderr


def test_children_inherit_the_debug_mode(project):
    (project / "parent.py").write_text(textwrap.dedent('''
        import multiprocessing, subprocess, sys
        import train

        if __name__ == "__main__":
            ctx = multiprocessing.get_context("spawn")
            child = ctx.Process(target=train.step, args=(True,))
            child.start(); child.join()
            sub = subprocess.run([sys.executable, "train.py", "bug"], capture_output=True, text=True)
            print("spawn", child.exitcode, "subprocess", sub.returncode, "[O3]" in sub.stderr)
        '''))
    proc = run(project, "parent.py", env={"LAYOUTCHECK": "raise"})
    assert proc.stdout.split() == ["spawn", "1", "subprocess", "1", "True"], proc.stdout + proc.stderr
    assert "LayoutError" in proc.stderr  # the spawned child's traceback


# --- a configuration mistake stops the run before its first step --------------

STEPS = """
from tinytrainer.data import get_rollout_data, make_args

print("step 1 began", flush=True)
get_rollout_data(make_args(), [300, 1000])
print("trained")
"""


def hooks_table(*targets: str) -> str:
    return "[runtime.hooks]\nproducer = [" + ", ".join(f'"{t}"' for t in targets) + "]\n"


GOOD = "tinytrainer.data:get_rollout_data"
START = "at start, before the program ran"

MISTAKES = {
    # name: (layoutcheck.toml, extra environment, the key the message names, what else it says, when it stopped)
    "typo'd key": (f'[runtime]\nparallel-stat = "{GOOD}"\n' + hooks_table(GOOD), {}, "runtime.parallel-stat",
                   "unknown key; did you mean `parallel-state`?", START),
    "LAYOUTCHECK=rase": (hooks_table(GOOD), {"LAYOUTCHECK": "rase"}, "LAYOUTCHECK='rase' (environment variable)",
                         "did you mean `raise`?", START),
    "LAYOUTCHECK_TRACE=maybe": (hooks_table(GOOD), {"LAYOUTCHECK_TRACE": "maybe"},
                                "LAYOUTCHECK_TRACE='maybe' (environment variable)", "expected 1 or 0", START),
    "bad value": ('[runtime]\nmode = "lound"\n' + hooks_table(GOOD), {}, "runtime.mode",
                  "Input should be 'raise', 'warn' or 'record'", START),
    "a table the file cannot contain": (hooks_table(GOOD).replace("[runtime", "[tool.layoutcheck.runtime"), {},
                                        "tool.layoutcheck", "write [runtime], not [tool.layoutcheck.runtime]", START),
    "mistyped hook function": (hooks_table("tinytrainer.data:get_rollout_dat"), {}, "runtime.hooks.producer",
                               "`tinytrainer.data` has no attribute `get_rollout_dat`; did you mean "
                               "`get_rollout_data`?", "when the program imported `tinytrainer.data`"),
    "mistyped hook module": (hooks_table("tinytrainer.dataa:get_rollout_data"), {}, "runtime.hooks.producer",
                             "module `tinytrainer.dataa` does not exist: `tinytrainer` has no module `dataa`; did "
                             "you mean `tinytrainer.data`?", "when the program imported `tinytrainer`, before any "
                             "step"),
    "mistyped hook package": (hooks_table("tinytrainr.data:get_rollout_data", GOOD), {}, "runtime.hooks.producer",
                              "no module `tinytrainr` can be found", "at the program's first hooked call"),
    "a function that does not fit its role": (hooks_table(GOOD, "tinytrainer.data:make_args"), {},
                                              "runtime.hooks.producer", "cannot wrap `tinytrainer.data:make_args` "
                                              "as the producer", "when the program imported `tinytrainer.data`"),
    "parallel-state that does not load": ('[runtime]\nparallel-state = "tinytrainer.data:parallel_state"\n'
                                          + hooks_table(GOOD), {}, "runtime.parallel-state",
                                          "'tinytrainer.data:parallel_state' cannot be loaded",
                                          "at the program's first hooked call"),
    # A coordinate source the user named that does not load was a note per call (the check skipped, exit 0).
    "cp-size that does not load": ('[runtime]\ncp-size = "tinytrainr.mesh:ctx_world"\n' + hooks_table(GOOD), {},
                                   "runtime.cp-size", "'tinytrainr.mesh:ctx_world' cannot be loaded: No module "
                                   "named 'tinytrainr'", "at the program's first hooked call"),
    "cp-group that does not load": ('[runtime]\ncp-group = "tinytrainer.data:ctx_group"\n' + hooks_table(GOOD), {},
                                    "runtime.cp-group", "'tinytrainer.data:ctx_group' cannot be loaded",
                                    "at the program's first hooked call"),
}


@pytest.mark.parametrize("mode", ["raise", "record"])
@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_configuration_mistake_stops_the_run_before_its_first_step(project, mistake, mode):
    # Each mistake, as a user makes it, with the `.pth` activation only: one message naming the key and the
    # file (or the variable) and the fix, no traceback, status 2, and not one check run on a guessed default.
    text, env, key, what, when = MISTAKES[mistake]
    config = project / "layoutcheck.toml"
    config.write_text(text)
    (project / "steps.py").write_text(STEPS)
    proc = run(project, "steps.py", env={"LAYOUTCHECK": mode, **env})
    assert proc.returncode == 2, proc.stderr
    assert "trained" not in proc.stdout
    if "first hooked call" not in when:  # stopped before the program's first step began
        assert "step 1 began" not in proc.stdout
    assert "Traceback" not in proc.stderr and "Error processing line" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert proc.stderr.count("layoutcheck: configuration error: ") == 1, proc.stderr
    assert lines[0].startswith(f"layoutcheck: configuration error: {key}") or (
        lines[0] == f"layoutcheck: configuration error: 1 error in {config}:" and lines[1] == f"  {key}"), lines
    assert what in proc.stderr
    assert lines[-1].startswith(f"layoutcheck: stopped {when}"), lines[-1]
    assert lines[-1].endswith("or unset LAYOUTCHECK to run without the debug mode.")
    if env:
        assert f"set {key.partition('=')[0]} to one of the values above" in lines[-1]
    else:  # the file, and the fix: the key to correct in it
        assert str(config) in lines[0]
        assert f"correct `{key}` in {config}" in lines[-1]
    assert "layout violation" not in proc.stderr and "hooks installed" not in proc.stderr  # no summary either


@pytest.mark.parametrize("named", ["missing.toml", "."])
def test_a_configuration_file_the_variable_names_wrongly_is_said_to_come_from_the_variable(project, named):
    # "configuration file /x/missing.toml does not exist" did not say that LAYOUTCHECK_CONFIG named it.
    proc = run(project, "train.py", env={"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": named})
    assert proc.returncode == 2 and "trained" not in proc.stdout, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("layoutcheck: configuration error: LAYOUTCHECK_CONFIG (environment variable) names "
                               f"{project / named if named != '.' else project}"), lines
    assert "point LAYOUTCHECK_CONFIG at a pyproject.toml or layoutcheck.toml, or unset it" in lines[-1], lines[-1]
    assert "Traceback" not in proc.stderr


def test_a_typo_in_a_runtime_key_never_checks_on_the_default_it_leaves(project):
    # Issue 27 point 5: `parallel-stat` left cp=1 in force and a correct multi-rank run raised 64 false
    # violations. The typo'd run checks nothing and writes no report.
    (project / "tinytrainer" / "par.py").write_text(
        "from types import SimpleNamespace as N\n"
        "def state():\n    return N(tp=N(size=1, rank=0), cp=N(size=2, rank=0, group=None))\n")
    (project / "layoutcheck.toml").write_text(
        '[runtime]\nparallel-stat = "tinytrainer.par:state"\n' + hooks_table(GOOD))
    proc = run(project, "train.py", env={"LAYOUTCHECK": "raise", "LAYOUTCHECK_REPORT": "run.json"})
    assert proc.returncode == 2 and "trained" not in proc.stdout and not (project / "run.json").exists()
    assert "runtime.parallel-stat" in proc.stderr and "LayoutError" not in proc.stderr


def test_no_hooks_found_is_said_at_start_and_exit_and_leaves_a_tool_alone(project):
    # Not a mistake in a file the run reads: a process started where no configuration is found (a tool, a
    # helper of a launcher) runs; raise mode fails it at exit when it ran code of its own.
    (project / "layoutcheck.toml").unlink()
    proc = run(project, "train.py", env={"LAYOUTCHECK": "raise"})
    assert "trained" in proc.stdout and proc.returncode == 1, proc.stderr
    assert proc.stderr.count("nothing is checked in this process") == 1
    tool = run(project, "-c", "import json; print('ok')", env={"LAYOUTCHECK": "raise"})
    assert tool.returncode == 0 and tool.stdout == "ok\n", tool.stderr


# --- the same, in process ------------------------------------------------


@pytest.fixture
def session(project, monkeypatch):
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.delenv("LAYOUTCHECK", raising=False)
    yield lambda **kw: activation.activate(config=project / "layoutcheck.toml", **kw)
    activation.deactivate()
    for name in [m for m in sys.modules if m.startswith("tinytrainer")]:
        del sys.modules[name]


def test_activate_is_idempotent_switches_modes_and_deactivate_restores(session):
    s = session(mode="record")
    assert activation.active_session() is s and session(mode="warn") is s and s.mode == "warn"
    s.mode = "raise"
    from tinytrainer import data

    assert s.hooks and data.get_rollout_data.__name__ == "get_rollout_data"
    mark = s.mark()
    with pytest.raises(LayoutError, match=r"\[O3\] get_rollout_data, sample 0"):
        data.get_rollout_data(data.make_args(global_padding=True), [300, 1000])
    assert [v.invariant for v in s.violations_since(mark)] == ["O3"] and s.notes_since(mark) == []
    s.mode = "record"
    data.get_rollout_data(data.make_args(global_padding=True), [200, 1000])
    assert len(s.violations_since(mark)) == 2
    activation.deactivate()
    assert activation.active_session() is None
    data.get_rollout_data(data.make_args(global_padding=True), [300, 1000])  # unhooked again
    with pytest.raises(layoutcheck.LayoutSpecError, match="unknown mode 'loud'"):
        s.mode = "loud"


def test_the_report_path_fills_in_rank_and_pid(session, monkeypatch, project):
    s = session(mode="record")
    s.settings = dataclasses.replace(s.settings, report="r-{rank}.json")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert s.report_path() == project / "r-3.json"
    s.settings = dataclasses.replace(s.settings, report="out/run.json")
    assert s.report_path() == project / "out" / "run.rank3.json"
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert s.report_path() == project / "out" / "run.json"
    written = s.write_report(project / "x.json")
    assert json.loads(written.read_text())["rank"]["rank"] == 3


def test_activation_without_hooks_is_a_config_error(tmp_path):
    (tmp_path / "layoutcheck.toml").write_text("[runtime]\nmode = 'warn'\n")
    with pytest.raises(ConfigError, match=r"no hooks are configured \(\[runtime\] in .*layoutcheck.toml\)"):
        activation.activate(config=tmp_path / "layoutcheck.toml")


def test_ray_init_gets_the_variables_and_the_users_own_values_win():
    from layoutcheck.runtime.activation import ray_env

    ours = {"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": "/abs/pyproject.toml"}
    assert ray_env._with_env(None, ours) == {"env_vars": ours}
    mine = {"pip": ["x"], "env_vars": {"LAYOUTCHECK": "warn", "OTHER": "1"}}
    merged = ray_env._with_env(mine, ours)
    assert merged == {"pip": ["x"], "env_vars": {"LAYOUTCHECK": "warn", "LAYOUTCHECK_CONFIG": "/abs/pyproject.toml", "OTHER": "1"}}
    assert mine["env_vars"] == {"LAYOUTCHECK": "warn", "OTHER": "1"}  # the caller's dict is left alone


def test_the_report_is_appended_at_each_rollout_and_at_exit(project):
    (project / "loop.py").write_text(textwrap.dedent('''
        import os
        from layoutcheck.runtime.reporting.runreport import load_run_report
        from tinytrainer.data import get_rollout_data, make_args
        for i, bug in enumerate([True, False, True]):
            get_rollout_data(make_args(global_padding=bug), [300, 1000])
            report = load_run_report("run.json")  # appended as each rollout began
            print(len(report.violations), report.totals.rollouts, report.complete)
        os._exit(0)  # no exit handlers: the report holds what was appended, and says it is not complete
        '''))
    proc = run(project, "loop.py", env={"LAYOUTCHECK": "record", "LAYOUTCHECK_REPORT": "run.json"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "1", "False", "1", "2", "False", "2", "3", "False"]
    lines = (project / "run.json").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["format"] == "layoutcheck-run-report"
    assert [json.loads(line)["event"] for line in lines[1:]] == ["rollout"] * 3
    # a normal exit appends the last chunk
    proc = run(project, "train.py", "bug", env={"LAYOUTCHECK": "record", "LAYOUTCHECK_REPORT": "run.json"})
    assert proc.returncode == 0, proc.stderr
    report = load_run_report(project / "run.json")
    assert report.complete and [v.invariant for v in report.violations] == ["O3"]
    assert [json.loads(line)["event"] for line in (project / "run.json").read_text().splitlines()[1:]] == [
        "rollout", "end"]


def test_a_hook_whose_function_does_not_fit_its_role_stops_at_install_naming_the_parameter(project):
    # `make_args` is no producer: it has no `args` parameter. The import that installs the hook stops the
    # process, naming the function and the parameter, in every mode: nothing is checked under a wrong reading.
    (project / "layoutcheck.toml").write_text(hooks_table(GOOD, "tinytrainer.data:make_args"))
    config = project / "layoutcheck.toml"
    for mode in ("raise", "warn", "record"):
        bad = run(project, "train.py", env={"LAYOUTCHECK": mode, "LAYOUTCHECK_REPORT": "run.json"})
        assert bad.returncode == 2 and "trained" not in bad.stdout and "Traceback" not in bad.stderr, bad.stderr
        assert (f"layoutcheck: configuration error: runtime.hooks.producer in {config}: cannot wrap "
                "`tinytrainer.data:make_args` as the producer") in bad.stderr
        assert "it has no parameter `args`" in bad.stderr


# --- the summary counts what really ran: a hook stays wrapped (issue 29, point 3) -------------------

def summary_of(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.startswith("layoutcheck: ")][-1]


RELOAD = """
import importlib, sys
from tinytrainer import data
data.get_rollout_data(data.make_args(), [300, 1000])
importlib.reload(data)                      # the module body runs again: a new, unwrapped function
data.get_rollout_data(data.make_args(global_padding=True), [300, 1000])
sys.path.insert(0, "tinytrainer")
import data as again                        # the same file under a second name: a second module object
again.get_rollout_data(again.make_args(global_padding=True), [200, 1000])
print("trained")
"""


def test_a_reloaded_or_reimported_hooked_module_stays_checked(project):
    (project / "reload.py").write_text(RELOAD)
    proc = run(project, "reload.py", env={"LAYOUTCHECK": "record", "LAYOUTCHECK_REPORT": "run.json"})
    assert proc.returncode == 0 and "trained" in proc.stdout, proc.stderr
    report = load_run_report(project / "run.json")
    assert [(v.invariant, v.rollout) for v in report.violations] == [("O3", 1), ("O3", 2)]
    assert summary_of(proc.stderr) == "layoutcheck: 1 of 1 hook installed; calls: get_rollout_data 3"
    bad = run(project, "reload.py", env={"LAYOUTCHECK": "raise"})
    assert bad.returncode == 1 and "layoutcheck.errors.LayoutError: 1 layout violation" in bad.stderr


PATCH = """
import importlib.util, sys
from tinytrainer import data, other
# the trainer's own replacement, loaded from a file under a name of its own: never wrapped by an import
spec = importlib.util.spec_from_file_location("fresh_copy", "tinytrainer/data.py")
fresh = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fresh)
data.get_rollout_data(data.make_args(), [300, 1000])
data.get_rollout_data = fresh.get_rollout_data   # assigned over the wrapper
if sys.argv[1:] == ["step"]:
    other.get_rollout_data(data.make_args(), [300, 1000])   # a step boundary: the hook goes in again
data.get_rollout_data(data.make_args(global_padding=True), [300, 1000])
print("trained")
"""


def test_a_function_assigned_over_its_wrapper_is_reinstalled_at_the_step_boundary_or_said_lost(project):
    (project / "patch.py").write_text(PATCH)
    (project / "tinytrainer" / "other.py").write_text(TRAINER)
    config = project / "layoutcheck.toml"
    config.write_text(hooks_table(GOOD, "tinytrainer.other:get_rollout_data"))
    # no step boundary after the assignment: the summary says the hook is lost, and raise mode fails
    lost = run(project, "patch.py", env={"LAYOUTCHECK": "raise"})
    assert lost.returncode == 1 and "trained" in lost.stdout, lost.stderr
    assert ("layoutcheck: 1 of 2 hooks installed; calls: get_rollout_data 0; 1 lost: producer `tinytrainer.data:get_rollout_data` "
            "(`tinytrainer.data:get_rollout_data` was replaced by `fresh_copy.get_rollout_data` after its hook went "
            "in)") in lost.stderr
    assert (f"  runtime.hooks.producer in {config}: `tinytrainer.data:get_rollout_data` lost its wrapper after 1 "
            "calls:") in lost.stderr
    assert "layoutcheck: exit status 1: raise mode, and the run was not checked as configured" in lost.stderr
    # a step boundary after it: wrapped again, and the buggy call is caught
    step = run(project, "patch.py", "step", env={"LAYOUTCHECK": "record", "LAYOUTCHECK_REPORT": "run.json"})
    assert step.returncode == 0 and "trained" in step.stdout, step.stderr
    assert [v.invariant for v in load_run_report(project / "run.json").violations] == ["O3"]
    assert summary_of(step.stderr) == (
        "layoutcheck: 2 of 2 hooks installed; calls: data.get_rollout_data 2, other.get_rollout_data 1; re-installed: "
        "get_rollout_data (`tinytrainer.data:get_rollout_data` was replaced by `fresh_copy.get_rollout_data` after "
        "its hook went in; re-installed at a step boundary (calls in between went unchecked))")


# --- a preset covers every path of a trainer; one process runs some (issue 27, point 10) -------------

MILES = "miles.backends.training_utils"


@pytest.fixture
def miles(project: Path) -> Path:
    """Modules at the Miles paths: the producer (the tiny trainer's) and the parallel state; the replay
    filler and the offset helper exist but this process never imports them."""
    package = project / "miles" / "backends" / "training_utils"
    package.mkdir(parents=True)
    for folder in (project / "miles", project / "miles" / "backends", package):
        (folder / "__init__.py").write_text("")
    (package / "data.py").write_text(TRAINER + "\n\ndef get_batch(data_iterator, keys, pad_multiplier=128, "
                                     "qkv_format='thd', "
                                     "get_position_ids=False, allgather_cp=False):\n"
                                     "    return {}\n")
    (package / "parallel.py").write_text("from types import SimpleNamespace as N\n\ndef get_parallel_state():\n"
                                         "    return N(tp=N(size=1, rank=0), cp=N(size=1, rank=0, group=None))\n")
    (package / "replay_data.py").write_text("def fill_replay_data(*, args, models, rollout_data):\n    return None\n")
    (package / "cp_utils.py").write_text("def get_logits_and_tokens_offset_with_cp(total_length, response_length,"
                                         " qkv_format='thd', max_seq_len=None):\n    return None\n")
    (project / "rank.py").write_text(f"from {MILES}.data import get_rollout_data, make_args\n"
                                     "get_rollout_data(make_args(), [300, 1000])\nprint('trained')\n")
    return project


def test_a_presets_hook_this_process_never_imports_is_not_exercised(miles):
    (miles / "layoutcheck.toml").write_text('[runtime]\npreset = "miles"\n')
    proc = run(miles, "rank.py", env={"LAYOUTCHECK": "raise"})
    assert proc.returncode == 0 and "trained" in proc.stdout, proc.stderr
    assert summary_of(proc.stderr) == (
        f"layoutcheck: 2 of 4 hooks installed; calls: get_rollout_data 1, get_batch 0; 2 not exercised (the "
        f"preset's, in modules this process never imported: `{MILES}.replay_data:fill_replay_data`, "
        f"`{MILES}.cp_utils:get_logits_and_tokens_offset_with_cp`); 3 tracer hooks off (LAYOUTCHECK_TRACE=1)")


def test_a_hook_the_user_named_must_install_even_beside_a_preset(miles):
    config = miles / "layoutcheck.toml"
    config.write_text(f'[runtime]\npreset = "miles"\n[runtime.hooks]\nreplay-filler = '
                      f'["{MILES}.replay_data:fill_replay_data"]\n')
    proc = run(miles, "rank.py", env={"LAYOUTCHECK": "raise"})
    assert proc.returncode == 1 and "trained" in proc.stdout, proc.stderr
    assert (f"  runtime.hooks.replay-filler in {config}: `{MILES}.replay_data:fill_replay_data` was never installed: "
            f"this process never imported `{MILES}.replay_data`") in proc.stderr
    assert "1 not exercised (the preset's, in modules this process never imported: " \
        f"`{MILES}.cp_utils:get_logits_and_tokens_offset_with_cp`)" in proc.stderr
