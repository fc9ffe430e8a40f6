"""The harness itself, without a trainer: stubs that refuse real use, pins, checkout lookup, rank launching."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainers.checkouts import find_checkout, parse_entries
from trainers.install import PinnedSet
from trainers.pins import MILES
from trainers.ranks import TESTS, launch


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=120)


def test_a_stubbed_module_satisfies_imports_and_decorators_and_refuses_any_real_use():
    done = run_python("""
        from trainers.stubs import StubUsed, install_module_stubs
        install_module_stubs(["sglang"])
        from sglang.srt.entrypoints.openai.protocol import Tool
        from sglang.srt.utils import jit, autotune

        class MyTool(Tool):  # a stub is a base class
            pass

        @jit
        def f():
            return 1

        @autotune(configs=[1], key=["n"])
        def g():
            return 2

        assert f() == 1 and g() == 2 and issubclass(MyTool, Tool)
        refused = []
        for use in (lambda: jit(3).shape, lambda: autotune(configs=[1])(4), lambda: Tool(name="x").name):
            try:
                use()
            except StubUsed as exc:
                refused.append(str(exc))
        assert len(refused) == 3, refused
        print(refused[0])
    """)
    assert done.returncode == 0, done.stderr
    assert "sglang.srt.utils.jit(...).shape: " in done.stdout and "is a stub" in done.stdout


def test_stubs_must_be_documented_and_installed_before_the_module_is_imported():
    done = run_python("""
        import sys, types
        from trainers.stubs import install_module_stubs
        sys.modules["wandb"] = types.ModuleType("wandb")  # as if the trainer had imported it already
        for names in (["numpy"], ["wandb"]):
            try:
                install_module_stubs(names)
            except (ValueError, RuntimeError) as exc:
                print(type(exc).__name__, exc)
    """)
    assert "ValueError no stub is documented for ['numpy']" in done.stdout
    assert "RuntimeError ['wandb'] already imported" in done.stdout


def test_cuda_placement_calls_work_on_a_cpu_build_and_keep_tensors_where_they_are():
    done = run_python("""
        import torch
        from trainers.stubs import install_cuda_on_cpu
        install_cuda_on_cpu()
        t = torch.tensor([1, 2], device=torch.cuda.current_device())
        assert t.cuda() is t and t.pin_memory() is t and t.device.type == "cpu"
        assert torch.empty_like(t, device="cpu", pin_memory=True).shape == (2,)
    """)
    assert done.returncode == 0, done.stderr


def test_a_pinned_set_takes_exact_pins_only_and_its_folder_changes_with_any_pin():
    with pytest.raises(ValueError, match="exact pin"):
        PinnedSet("x", ("verl>=0.7",))
    assert PinnedSet("x", ("a==1", "b==2")).key == PinnedSet("x", ("b==2", "a==1")).key
    assert PinnedSet("x", ("a==1",)).key != PinnedSet("x", ("a==2",)).key


def test_checkouts_are_found_by_declared_or_git_commit_and_a_missing_folder_is_an_error(tmp_path, monkeypatch):
    archive = tmp_path / "miles-archive"
    archive.mkdir()
    assert parse_entries(f"{MILES['fixed'][:9]}={archive}", "V") == [(MILES["fixed"][:9], archive)]
    with pytest.raises(FileNotFoundError, match="V: .*nope is not a folder"):
        parse_entries(str(tmp_path / "nope"), "V")
    monkeypatch.setenv("LAYOUTCHECK_MILES_CHECKOUT", f"{MILES['fixed'][:9]}={archive}")
    found = find_checkout("miles", "fixed")
    assert (found.commit, found.path) == (MILES["fixed"], archive)
    with pytest.raises(pytest.skip.Exception, match="names no checkout of miles at 31f1ca961"):
        find_checkout("miles", "buggy")
    monkeypatch.delenv("LAYOUTCHECK_MILES_CHECKOUT")
    with pytest.raises(pytest.skip.Exception, match="LAYOUTCHECK_MILES_CHECKOUT is unset"):
        find_checkout("miles", "fixed")


def test_ranks_join_one_group_and_report_a_trainer_error_as_a_result(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.distributed as dist
        from trainers import ranks

        def body():
            rank, world = ranks.init_process_group()
            total = torch.tensor([rank + 1])
            dist.all_reduce(total)
            ranks.report("sum", int(total))
            ranks.attempt("fails", lambda: [][rank])

        ranks.main_guard(body)
    """))
    runs = launch(2, [str(script)], out=tmp_path)
    assert [r["sum"] for r in runs] == [3, 3] and [r.returncode for r in runs] == [0, 0]
    assert runs[1]["fails"]["error"]["type"] == "IndexError"
    with pytest.raises(KeyError, match="rank 0 did not report 'missing'"):
        runs[0]["missing"]


def test_a_rank_still_running_at_the_deadline_is_stopped_with_what_it_started_and_named(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import os, subprocess, sys, time
        from pathlib import Path
        if os.environ["RANK"] == "1":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            Path(os.environ["LAYOUTCHECK_HARNESS_OUT"], "child").write_text(str(child.pid))
            time.sleep(600)
    """))
    with pytest.raises(AssertionError, match=r"ranks \[1\] of .* still running after 5 s: stopped"):
        launch(2, [str(script)], out=tmp_path, timeout=5)
    child = int((tmp_path / "child").read_text())
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split(")")[1][:3]
