"""Value checks on the worker thread (``value-checks = "background"``) say what checks in the call say, later.

A boundary's value checks (B6) of CPU tensors run on one daemon thread
(`layoutcheck.runtime.checker.background`): the hooked call keeps the
tensors and the sum of their version counters, the worker compares. These
tests hold it to the checks in the call word for word, on drawn right and
broken calls; raise mode raises at the next hooked call (before its
function runs), at the step boundary and, through the exit status, at
exit; a tensor written in place before its check ran is counted as not
checked (never a violation); a full queue checks in the call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings

torch = pytest.importorskip("torch")

from layoutcheck import LayoutChecker  # noqa: E402
from layoutcheck.errors import LayoutError  # noqa: E402
from layoutcheck.runtime.checker.background import Job, ValueWorker  # noqa: E402
from layoutcheck.runtime.checker.boundaries import Coordinates  # noqa: E402
from layoutcheck.runtime.contract.boundary import parse_boundary, parse_source  # noqa: E402

from test_column_checks import _PACK, _pack, pack_calls  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET = f"{__name__}:pack"


def _coords() -> Coordinates:
    return Coordinates(tp_size=parse_source("test_column_checks:RANKS.tp", what="tp"),
                       cp_size=parse_source("test_column_checks:RANKS.cp", what="cp"),
                       cp_rank=parse_source("test_column_checks:RANKS.rank", what="rank"))


def _hooked(mode: str = "record", worker: ValueWorker | None = None, calls: list | None = None):
    checker = LayoutChecker(mode)
    checker.values_worker = worker if worker is not None else ValueWorker()

    def pack(seqs, lengths, broken="none"):
        if calls is not None:
            calls.append(broken)
        return _pack(seqs, lengths, broken)

    return checker, checker.wrap_boundary(parse_boundary(TARGET, _PACK, source_file="t.toml"), pack, _coords())


SEQS = [torch.arange(1, t + 1) * 10 for t in (5, 13, 2)]
LENGTHS = [8, 16, 8]


@settings(max_examples=100, deadline=None)
@given(pack_calls())
def test_the_worker_reports_word_for_word_what_the_check_in_the_call_reports(calls):
    background, hooked = _hooked()
    inline = LayoutChecker("record")
    in_call = inline.wrap_boundary(parse_boundary(TARGET, _PACK, source_file="t.toml"), _pack, _coords())
    for (seqs, lengths), broken in calls:
        hooked(seqs, lengths, broken)
        in_call(seqs, lengths, broken)
        background.take_values(wait=True)
        assert [str(v) for v in background.violations] == [str(v) for v in inline.violations]
        assert background.notes == inline.notes == [] and not background.values_changed
    if any(b == "value" for _, b in calls):
        assert any(v.invariant == "B6" for v in background.violations)


def test_right_calls_are_silent_and_every_one_is_compared_on_the_worker():
    worker = ValueWorker()
    checker, hooked = _hooked("raise", worker)
    for _ in range(20):
        hooked(SEQS, LENGTHS)
    checker.take_values(wait=True)
    assert checker.violations == [] and checker.notes == [] and not checker.values_changed
    # every call compared: beside the caller, or in the call when 8 were already waiting (calls back to back)
    assert worker.ran + worker.inline == 20 and worker.ran >= 8 and worker.cpu > 0


def test_raise_mode_raises_at_the_next_hooked_call_before_its_function_runs_naming_the_wrong_call():
    calls: list[str] = []
    worker = ValueWorker()
    checker, hooked = _hooked("raise", worker, calls)
    hooked(SEQS, LENGTHS)
    hooked(SEQS, LENGTHS, "value")  # wrong values: the call returns, the worker compares
    assert worker.wait(30)  # the worker has compared it; nothing is said until a hooked call
    assert checker.violations == []
    with pytest.raises(LayoutError) as err:
        hooked(SEQS, LENGTHS)
    assert calls == ["none", "value"]  # the third call's function never ran
    assert "[B6]" in str(err.value) and f"{TARGET} (call 2)" in str(err.value)
    assert [v.invariant for v in checker.violations] == ["B6"]


def test_raise_mode_raises_at_the_step_boundary():
    checker, hooked = _hooked("raise")
    hooked(SEQS, LENGTHS, "value")
    with pytest.raises(LayoutError, match=r"\[B6\].*\(call 1\)"):
        checker.end_step()


def test_a_tensor_changed_in_place_before_its_check_is_counted_not_checked_never_a_violation():
    worker = ValueWorker()
    checker, hooked = _hooked("raise", worker)
    with worker.lock:  # the worker cannot start the check until the trainer has written the tensor
        stream, _ = hooked(SEQS, LENGTHS)
        stream[0, 0] += 1  # in place: what the worker would compare is no longer what the call returned
    with pytest.warns(UserWarning, match="changed in place before they could run"):
        checker.take_values(wait=True)  # raise mode: nothing raised
    assert checker.violations == []
    assert checker.values_changed == {TARGET: 1}
    assert "1 value check not run: tensors changed in place before they could be checked" in checker.summary()
    assert any("changed in place" in n for n in checker.notes)
    # a source written in place (a view of it: one counter) counts the same; a call left alone is still checked
    with worker.lock:
        seqs = [s.clone() for s in SEQS]
        hooked(seqs, LENGTHS)
        seqs[1][2:4].mul_(2)
        hooked(SEQS, LENGTHS, "value")
    with pytest.raises(LayoutError, match=r"\[B6\].*\(call 3\)"):
        checker.take_values(wait=True)
    assert checker.values_changed == {TARGET: 2}
    assert [(v.invariant, v.sample) for v in checker.violations] == [("B6", 2)]


def test_a_full_queue_checks_in_the_call_so_nothing_is_dropped():
    worker = ValueWorker(limit=1)
    checker, hooked = _hooked("raise", worker)
    release = threading.Event()
    assert worker.submit(Job("busy", lambda: release.wait(30) and [], [], 0))  # the one place, taken
    threading.Timer(0.2, release.set).start()
    with pytest.raises(LayoutError, match=r"\[B6\].*\(call 1\)"):  # checked in the call, raised there
        hooked(SEQS, LENGTHS, "value")
    worker.drain(30)
    assert worker.ran == 1 and worker.inline == 1  # only the busy job ran on the worker


def test_exit_waits_for_the_worker_and_raise_mode_fails_on_what_it_found(tmp_path):
    # the run's only wrong call is its last hooked call: the worker alone finds it, at exit
    (tmp_path / "bgpack.py").write_text(textwrap.dedent("""
        import torch

        def pack(seqs, lengths):
            parts = [torch.cat([s, s.new_zeros(n - s.shape[0])]) for s, n in zip(seqs, lengths)]
            parts[-1][0] += 100  # the planted bug: a wrong value, right shapes
            return torch.cat(parts).unsqueeze(0), [0, *torch.tensor(lengths).cumsum(0).tolist()]
    """))
    (tmp_path / "run.py").write_text(textwrap.dedent("""
        import torch
        import bgpack
        from layoutcheck.errors import LayoutError

        try:
            bgpack.pack([torch.arange(1, 6), torch.arange(1, 10)], [8, 12])
        except LayoutError:
            print("raised in the call")
        print("done")
    """))
    (tmp_path / "lc.toml").write_text(textwrap.dedent("""
        [runtime]
        mode = "raise"
        value-checks = "background"

        [runtime.boundaries."bgpack:pack"]
        args.seqs = "T"
        args.lengths = "len P"
        returns.0 = { space = "P packed", from = "args.seqs", pad-value = 0 }
        returns.1 = "cu P packed"
        unit = [4]
    """))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    environ.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]), LAYOUTCHECK="raise",
                   LAYOUTCHECK_CONFIG=str(tmp_path / "lc.toml"))
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=environ, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split() == ["done"], proc.stdout + proc.stderr  # not raised in the call
    assert proc.returncode == 1, proc.stderr
    assert "1 layout violation (B6 x1) in bgpack:pack (call 1)" in proc.stderr
    assert "exit status 1: raise mode, and the value checks finished at exit found 1 violation" in proc.stderr
