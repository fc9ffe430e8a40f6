"""The clean-call fast paths decide exactly what the full checks decide.

Several hooked calls are accepted without building the full check's
arguments (`consumer_calls._offset_clean`, the G5 shortcut in
`consumer_calls._g5`, the O2/O3 shortcut in `owner._owner_padding`, the
validation shortcuts of `runtime.common`). Each test here draws calls, good
and broken, and compares the fast answer with the full path's.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.checker import consumer_calls
from layoutcheck.runtime.contract import checks
from layoutcheck.runtime.checker.layout_checker import LayoutChecker
from layoutcheck.runtime.contract.common import ints, sample_ids
from layoutcheck.runtime.checker.rollouts import BatchRecord, ReplayRecord
from minitrainer.cp_utils import get_logits_and_tokens_offset_with_cp

FAST = settings(max_examples=300, deadline=None)


def _parallel(cp_size: int, cp_rank: int):
    group = SimpleNamespace
    state = SimpleNamespace(tp=group(size=1, rank=0), cp=group(size=cp_size, rank=cp_rank))
    return lambda: state


@st.composite
def offset_calls(draw):
    """An offset-helper call for the current micro-batch's next sample: its result right, or broken."""
    cp = draw(st.integers(1, 4))
    r = draw(st.integers(0, cp - 1))
    t = draw(st.integers(1, 3000))
    resp = draw(st.integers(0, t))
    layout = draw(st.sampled_from(["bshd", "thd"]))
    unit = 2 * cp * draw(st.sampled_from([1, 8, 64]))
    padded = geometry.round_up(t, unit) + draw(st.sampled_from([0, 0, 0, unit, -1]))
    padded = padded if layout == "bshd" else None
    told = draw(st.sampled_from(["right", "right", "thd", "other P"]))  # what the caller passed
    fmt, max_len = ("thd", None) if told == "thd" else (layout, padded)
    if told == "other P" and max_len is not None:
        max_len += unit
    passed = draw(st.booleans())  # cp_rank/cp_size passed, or read from the parallel state
    if cp == 1:
        result = (0, ((0, 0), (0, 0)), ((t - resp, t), (0, 0)), ((0, 0), (0, 0)))
    else:
        try:
            result = get_logits_and_tokens_offset_with_cp(t, resp, fmt, max_len, r, cp)
        except ValueError:
            result = None
    if result is None:
        result = (0, ((0, 0), (0, 0)), ((0, 0), (0, 0)), ((0, 0), (0, 0)))
    if draw(st.booleans()):
        result = [*result]  # a list: not the fast path's shape
    call = {"total_length": t, "response_length": resp, "qkv_format": fmt, "max_seq_len": max_len,
            "cp_rank": r if passed else None, "cp_size": cp if passed else None}
    batch = dict(t=t, resp=resp, layout=layout, padded=padded, cp=cp, r=r)
    return call, tuple(result) if draw(st.booleans()) else result, batch


def _judge(call, result, batch, *, fast: bool):
    """One offset call through `offset_returned` (its fast path on or off): what it took, found and counted."""
    checker = LayoutChecker("record", parallel_state=_parallel(batch["cp"], batch["r"]))
    record = BatchRecord(k=0, samples=[0], qkv_format=batch["layout"], scheme="zigzag", padded=batch["padded"],
                         rows=None, totals=[batch["t"]], responses=[batch["resp"]], cp_size=batch["cp"],
                         cp_rank=batch["r"])
    checker._run.laid_out_by(record)
    real, taken = consumer_calls._offset_clean, []

    def spy(*args):
        taken.append(real(*args) if fast else False)
        return taken[-1]

    consumer_calls._offset_clean = spy
    try:
        checker._checking("helper", lambda: consumer_calls.offset_returned(checker, "helper", call, result))
    finally:
        consumer_calls._offset_clean = real
    found = [(v.invariant, v.actual, v.expected) for v in checker.violations]
    return taken == [True], found, checker.checked["offset calls"], record.offset_calls, checker.notes


@FAST
@given(offset_calls())
def test_the_offset_fast_path_accepts_only_what_the_full_check_passes(drawn):
    call, result, batch = drawn
    took_fast, fast_found, fast_count, fast_calls, fast_notes = _judge(call, result, batch, fast=True)
    _, full_found, full_count, full_calls, full_notes = _judge(call, result, batch, fast=False)
    assert fast_found == full_found
    assert (fast_count, fast_calls, fast_notes) == (full_count, full_calls, full_notes)
    if took_fast:
        assert full_found == []


def test_the_offset_fast_path_is_taken_for_the_common_call():
    # Without this, a fast path that never fires would pass the test above.
    t, resp, padded = 1000, 400, 1024
    result = get_logits_and_tokens_offset_with_cp(t, resp, "bshd", padded, 1, 2)
    call = {"total_length": t, "response_length": resp, "qkv_format": "bshd", "max_seq_len": padded,
            "cp_rank": None, "cp_size": None}
    batch = dict(t=t, resp=resp, layout="bshd", padded=padded, cp=2, r=1)
    assert _judge(call, result, batch, fast=True)[0] is True
    broken = (result[0], result[1], ((0, 10), (20, 30)), result[3])
    took_fast, found, *_ = _judge(call, broken, batch, fast=True)
    assert not took_fast and [f[0] for f in found] == ["G4"]


@st.composite
def replay_pairs(draw):
    rows = draw(st.integers(0, 5000))
    tp = draw(st.sampled_from([1, 1, 2, 4]))
    sp = draw(st.booleans())
    samples = draw(st.lists(st.integers(0, 9), min_size=1, max_size=3))
    other = draw(st.sampled_from(["same", "same", "rows", "samples", "P"]))
    padded = draw(st.sampled_from([None, 512, 1024]))
    replay_rows = rows // tp if sp and rows % tp == 0 else rows
    if other == "rows":
        replay_rows += draw(st.integers(1, 64))
    replay = ReplayRecord(k=0, key="rollout_routed_experts", samples=samples if other != "samples" else [*samples, 11],
                          padded=padded if other != "P" or padded is None else padded * 2, rows=replay_rows,
                          tp_size=tp, sequence_parallel=sp, where="fill_replay_data")
    batch = BatchRecord(k=0, samples=samples, qkv_format=draw(st.sampled_from(["bshd", "thd"])), scheme="zigzag",
                        padded=padded, rows=rows)
    return replay, batch


@FAST
@given(replay_pairs())
def test_g5_shortcut_agrees_with_check_replay(pair):
    replay, batch = pair
    full = checks.check_replay(
        replay.rows, micro_batch=batch.k, samples=replay.samples, batch_rows=batch.rows,
        padded=replay.padded if batch.qkv_format == "bshd" else None, batch_padded=batch.padded,
        batch_samples=batch.samples, tp_size=replay.tp_size, sequence_parallel=replay.sequence_parallel,
        field=replay.key, where=replay.where,
    )
    assert consumer_calls._g5(replay, batch) == full


@FAST
@given(
    st.lists(st.integers(1, 20000), min_size=1, max_size=12),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(["zigzag", "allgather"]),
    st.sampled_from([128, 256, 384]),
    st.lists(st.sampled_from([0, 0, 0, 1, 128, -1]), min_size=12, max_size=12),
)
def test_the_producer_shortcut_keeps_every_padding_finding(totals, cp, scheme, unit, shifts):
    # O2 and O3 from `check_rollout` equal O2 and O3 recomputed sample by sample from geometry.
    padded = [geometry.round_up(t, unit) + s for t, s in zip(totals, shifts)]
    rollout = {"tokens": [[0] * t for t in totals], "total_lengths": totals, "max_seq_lens": padded}
    found = checks.check_rollout(rollout, unit=unit, cp_size=cp, cp_rank=0, layout="bshd", scheme=scheme)
    expected = set()
    for i, (t, p) in enumerate(zip(totals, padded)):
        if p % unit or t > p or not geometry.cp_can_slice(p, cp, scheme):
            expected.add(("O2", i))
        if t <= p and p >= t + unit:
            expected.add(("O3", i))
    assert {(v.invariant, v.sample) for v in found} == expected


def test_validated_lists_are_copies_and_bad_entries_are_named():
    values = [1, 2, 3]
    assert ints("total_lengths", values) == values and ints("total_lengths", values) is not values
    assert sample_ids(values) == values and sample_ids(values) is not values
    with pytest.raises(LayoutSpecError, match=r"total_lengths\[1\]"):
        ints("total_lengths", [1, True, 3])
    with pytest.raises(LayoutSpecError, match=r"samples\[2\]"):
        sample_ids([0, 1, -1])
