"""What each consumer call checks, before and after it runs: the batch builder, the replay filler, the offset helper.

The wrappers (`layoutcheck.runtime.checker.wrappers`) call these functions with the
checker's state (`~layoutcheck.runtime.checker.state.CheckerState`) they read and
update: the current rollout (`~layoutcheck.runtime.checker.rollouts.Rollout`), the
reporting of violations and notes, the observations. The invariants
themselves are `layoutcheck.runtime.contract.checks`.

A clean call is the common case, and every hooked call pays for it: each
batch is read once (`read_batch_layout`) and judged once per rollout for the
same inputs, and the offset helper (`_offset_clean`) and G5 (`_g5`) accept a
clean call without building the full check's arguments. Anything a short
path does not accept goes through the full check, which explains it;
``tests/test_fast_paths.py`` holds each short path to its full check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, Violation
from layoutcheck.runtime.contract import checks
from layoutcheck.runtime.contract.adapters import BatchCall, Parallel, ReplayCall
from layoutcheck.runtime.contract.common import SHAPE_FIELDS, frozen, is_mapping
from layoutcheck.runtime.contract.consumers import expected_logit_ranges, merged_int_ranges, read_batch_layout
from layoutcheck.runtime.contract.meta import count, metadata_only
from layoutcheck.runtime.reporting.observations import MicroBatchObservation
from layoutcheck.runtime.checker.rollouts import BatchRecord, MicroBatch, ReplayRecord, Rollout

if TYPE_CHECKING:
    from layoutcheck.runtime.checker.state import CheckerState

__all__ = [
    "BatchCallState",
    "FillerCallState",
    "batch_after",
    "batch_agreement",
    "batch_before",
    "filler_before",
    "offset_returned",
    "replay_registered",
]


@dataclass
class BatchCallState:
    """What the batch-builder wrapper learnt before the call, for the checks after it."""

    run: Rollout
    view: BatchCall
    layout: str
    micro_batch: MicroBatch
    par: Parallel
    prechecked: bool
    inputs: tuple[object, ...]
    """What the checks of the batch depend on, besides the batch itself (ints only)."""
    found: list[Violation]
    """The violations found before the call, reported after the cross-rank exchange (X1)."""


@dataclass
class FillerCallState:
    """One replay-filler call: its plan per micro-batch (samples, P) and how many tensors it registered."""

    where: str
    run: Rollout
    view: ReplayCall
    par: Parallel
    sequence_parallel: bool
    plan: dict[int, tuple[list[int] | None, int | None]]
    registered: int = 0
    by_offset: bool = False
    """Micro-batch ``k`` of a registration is the iterator's (the one it handed out last), not the call count:
    a filler that registers once per layer (slime's ``RoutingReplay.record``)."""


# --- the batch builder -----------------------------------------------------------

_TOKENS = SHAPE_FIELDS.index("tokens")


def batch_before(checker: CheckerState, where: str, call: Mapping[str, Any]) -> BatchCallState:
    """Before ``get_batch``: G1, G2, the all-gather part of G3, G6 from the rollout's ints (fail closed)."""
    view = checker.adapter.batch_call(call)
    rollout = checker.adapter.rollout_of(view.iterator)
    run = checker._rollout_for(rollout)
    k = checker.adapter.next_micro_batch(view.iterator)
    if k is None:
        k = run.calls
    run.calls += 1
    par = checker._parallel()
    layout = checker.layout or run.layout or view.qkv_format
    mb = checker._micro_batch(rollout, view.iterator, k, layout)
    inputs = (k, layout, view.scheme, view.pad_multiplier, par, frozen(mb.samples), frozen(mb.lens),
              frozen(mb.totals), frozen(mb.responses), frozen(mb.tokens))
    prechecked = mb.totals is not None and not checker._bucketed(layout)
    # each pass (log-probs, training) lays it out again, and the filler read it too: judged once
    found = checker._check_micro_batch(mb, where, par.cp_size, layout, view.scheme) if prechecked else []
    return BatchCallState(run=run, view=view, layout=layout, micro_batch=mb, par=par, prechecked=prechecked,
                          inputs=inputs, found=found)


def batch_agreement(checker: CheckerState, where: str, state: BatchCallState | None) -> list[Violation]:
    """X1 before ``get_batch``: every CP rank lays micro-batch ``k`` out with the same P, samples and scheme.

    Called once per batch-builder call on every rank, whatever the local
    checks found or failed on (``state`` is ``None`` then, and unknown
    values are not compared): a rank that skipped the exchange would make
    its peers wait for it until the timeout.
    """
    agreement = checker._agreement()
    if agreement is None:
        return []
    if state is None:
        return agreement.check_batch(max(checker._run.calls - 1, 0), padded=None, where=where)
    mb = state.micro_batch
    bshd = state.layout == "bshd"
    padded = mb.lens[0] if bshd and mb.lens and not checker._bucketed(state.layout) else None
    return agreement.check_batch(
        mb.k, padded=padded, samples=mb.samples, lengths=mb.current, scheme=state.view.scheme,
        qkv_format=state.layout, where=where,
    )


def batch_after(checker: CheckerState, where: str, state: BatchCallState, batch: Any) -> None:
    """After ``get_batch``: G3 shapes, G4 counts, and G5 against replay tensors registered for ``k``."""
    if not is_mapping(batch):
        raise LayoutSpecError(f"the batch builder returned {type(batch).__name__}, not a dict of batch fields")
    view, par, mb, layout, run = state.view, state.par, state.micro_batch, state.layout, state.run
    bshd = layout == "bshd"
    with metadata_only():  # one read of the batch: judged, compared with an earlier pass, recorded
        read = read_batch_layout(batch)
        rows = checker.adapter.batch_rows(batch)
    seen = len(run.checked)
    run.checked.add((state.inputs, read))
    judged = len(run.checked) == seen  # laid out alike by an earlier pass: judged then (one hash, not two)
    if mb.totals is None:  # no rollout view: take the batch's own lists
        mb = MicroBatch(
            k=mb.k, samples=mb.samples, lens=batch.get("max_seq_lens") if bshd else None,
            totals=batch.get("total_lengths"), responses=batch.get("response_lengths"),
        )
        if mb.totals is None:
            raise LayoutSpecError("neither the iterator's rollout data nor the batch has `total_lengths`")
    found: list[Violation] = []
    padded: int | None = None
    if checker._bucketed(layout):
        local = checker.adapter.batch_local_length(batch)
        if local is not None:
            padded = geometry.padded_for_local_length(local, par.cp_size, view.scheme, candidates=checker.buckets or ())
            if not judged:
                found += checker._check_micro_batch(mb, where, par.cp_size, layout, view.scheme, padded=padded)
    else:
        if not state.prechecked and not judged:
            found += checker._check_micro_batch(mb, where, par.cp_size, layout, view.scheme)
        padded = checker.adapter.batch_padded(batch, mb.lens) if bshd else None
    current = list(mb.current or [])
    if not judged and (not bshd or padded is not None):
        found += checks.check_batch_layout(
            batch, micro_batch=mb.k, samples=mb.samples, total_lengths=current, response_lengths=mb.responses,
            padded=padded, cp_size=par.cp_size, cp_rank=par.cp_rank, qkv_format=layout, scheme=view.scheme,
            response_scheme=checker.adapter.response_scheme, stream_multiple=par.tp_size * view.pad_multiplier,
            where=where, read=read,
        )
    record = BatchRecord(
        k=mb.k, samples=mb.samples, qkv_format=layout, scheme=view.scheme, padded=padded, rows=rows,
        totals=current, responses=list(mb.responses or []), cp_size=par.cp_size, cp_rank=par.cp_rank,
    )
    if mb.k not in run.batches:  # each micro-batch once per rollout, however many passes lay it out
        checker.checked["micro-batches"] += 1
        tokens = read.shapes[_TOKENS]
        checker._log.micro_batch(MicroBatchObservation(
            rollout=run.index, index=mb.k, samples=tuple(mb.samples or ()), layout=layout, totals=tuple(current),
            padded=padded if bshd else None, stream=None if bshd or rows is None else rows * par.cp_size,
            shape=None if tokens is None else tuple(map(int, tokens)),
        ))
    run.laid_out_by(record)
    for replay in run.pending.pop(mb.k, []):  # G5: replay tensors registered before this batch
        found += _g5(replay, record)
    checker._report(found)


# --- the replay filler -----------------------------------------------------------


def filler_before(checker: CheckerState, where: str, call: Mapping[str, Any]) -> FillerCallState | None:
    """Before the filler runs: G1, G2 (and G3, G6) on every micro-batch it will walk, as it will read them.

    The filler resets its iterators and walks ``sum(num_microbatches)``
    micro-batches of the first one, so micro-batch ``k`` is the ``k``-th
    of the schedule; raise mode stops here, before the filler pads.
    """
    view = checker.adapter.replay_call(call)
    if not callable(call.get(view.register_name)):
        raise LayoutSpecError(f"`{view.register_name}` is not callable")
    par = checker._parallel()
    lay = checker.adapter.layout(view.args, par, layout=checker.layout)
    run = checker._rollout_for(view.rollout_data)
    layout = lay.qkv_format or run.layout
    found: list[Violation] = []
    plan: dict[int, tuple[list[int] | None, int | None]] = {}
    for k in range(view.micro_batches):
        mb = checker._micro_batch(view.rollout_data, view.iterator, k, layout)
        if layout is not None and not checker._bucketed(layout):
            found += checker._check_micro_batch(mb, where, par.cp_size, layout, lay.scheme)
        # with buckets the filler's P is the batch's bucket: compared through the rows (G5)
        plan[k] = (mb.samples, mb.lens[0] if mb.lens and not checker._bucketed(layout) else None)
    agreement = checker._agreement()
    if agreement is not None:  # X1: the filler's P and samples of every micro-batch, on every CP rank
        for k, (samples, padded) in plan.items():
            found += agreement.check_replay(k, padded=padded, samples=samples, data_key=view.data_key, where=where)
    checker._report(found)
    return FillerCallState(
        where=where, run=run, view=view, par=par, sequence_parallel=lay.sequence_parallel and view.sp_region,
        plan=plan,
    )


def replay_registered(checker: CheckerState, state: FillerCallState, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """One register call of the filler: micro-batch ``k`` is the count of calls so far, or the iterator's (G5)."""
    k, state.registered = state.registered, state.registered + 1
    if state.by_offset:
        after = checker.adapter.next_micro_batch(state.view.iterator)
        k = after - 1 if after is not None and after > 0 else k
    replay = checker.adapter.registered_replay(args, kwargs)
    with metadata_only():
        rows = count(replay)
    samples, padded = state.plan.get(k, (None, None))
    record = ReplayRecord(
        k=k, key=state.view.data_key, samples=samples, padded=padded, rows=rows, tp_size=state.par.tp_size,
        sequence_parallel=state.sequence_parallel, where=state.where,
    )
    checker.checked["replay tensors"] += 1
    batch = state.run.batches.get(k)
    if batch is not None:
        checker._report(_g5(record, batch))
    else:
        state.run.pending.setdefault(k, []).append(record)


def _g5(replay: ReplayRecord, batch: BatchRecord) -> list[Violation]:
    if batch.rows is None or replay.rows is None:
        return []
    if (type(batch.rows) is type(replay.rows) is type(replay.tp_size) is int and replay.samples == batch.samples
            and (replay.padded is None or batch.padded is None or replay.padded == batch.padded)):
        try:  # the common case, which `check_replay` passes without building a message
            if replay.rows == geometry.replay_rows(batch.rows, replay.tp_size, sequence_parallel=replay.sequence_parallel):
                return []
        except LayoutSpecError:
            pass  # explained below
    return checks.check_replay(
        replay.rows, micro_batch=batch.k, samples=replay.samples, batch_rows=batch.rows,
        padded=replay.padded if batch.qkv_format == "bshd" else None, batch_padded=batch.padded,
        batch_samples=batch.samples, tp_size=replay.tp_size, sequence_parallel=replay.sequence_parallel,
        field=replay.key, where=replay.where,
    )

# --- the response-offset helper --------------------------------------------------


def offset_returned(checker: CheckerState, where: str, call: Mapping[str, Any], result: Any) -> None:
    """G4: the logit ranges the helper returned are the ones of the sample's layout.

    Calls made inside the producer are left to O4 (which judges what the
    producer made of them). ``cp_rank``/``cp_size`` come from the call when
    passed, else from the parallel state, as the helper itself does.
    """
    if checker._in_producer() or _offset_clean(checker, call, result):
        return
    info = checker.adapter.offset_call(call)
    if info.cp_rank is None or info.cp_size is None:
        if checker.parallel_state is None:
            raise LayoutSpecError(
                "the helper was called without `cp_rank`/`cp_size`, and the checker has no `parallel_state` "
                "to read them from: configure the parallel-state function"
            )
        par = checker._parallel()
        cp_size, cp_rank = par.cp_size, par.cp_rank
    else:
        cp_size, cp_rank = info.cp_size, info.cp_rank
    if cp_size == 1:
        return  # nothing is sliced
    ranges = checker.adapter.offset_logit_ranges(result)
    targets = checker._run.offset_targets(info.total_length, info.response_length)
    if not targets:
        checker._note(where, "calls for lengths that match no sample of the current rollout are not checked "
                   f"(first: total_length={info.total_length}, response_length={info.response_length})",
                   key=f"unattributed offset call {checker._run.index}")
        return
    called_with = {"qkv_format": info.qkv_format, "max_seq_len": info.max_seq_len}
    first: list[Violation] | None = None
    for target in targets:
        found = checks.check_response_offsets(
            ranges, total_length=info.total_length, response_length=info.response_length, cp_size=cp_size,
            cp_rank=cp_rank, qkv_format=target.qkv_format, padded=target.padded,
            scheme=checker.adapter.response_scheme, micro_batch=target.micro_batch, sample=target.sample,
            where=where, called_with=called_with,
        )
        if not found:
            first = []
            break
        first = found if first is None else first
    checker.checked["offset calls"] += 1
    checker._report(first or [])


def _offset_clean(checker: CheckerState, call: Mapping[str, Any], result: Any) -> bool:
    """Whether the call is certainly clean, its count taken: the common case, decided without building a message.

    Plain int arguments, Miles's ``(c, chunks, (logits_0, logits_1), tokens)``
    result, and a call for the next sample of the current micro-batch (the
    target `offset_returned` tries first): then G4 holds exactly when the
    merged ranges equal the expected ones. Anything else (``False``) goes
    through `offset_returned`'s full path, which explains what it finds.
    """
    t, resp, cp_rank, cp_size = call.get("total_length"), call.get("response_length"), call.get("cp_rank"), call.get("cp_size")
    batch = checker._run.current
    if batch is None or not (batch.padded is None or type(batch.padded) is int) or type(result) is not tuple or len(result) != 4:
        return False
    if cp_rank is None or cp_size is None:
        if checker.parallel_state is None:
            return False
        # the batch builder's coordinates: read from the parallel state at that call, and the ones its
        # layout (which this call must follow) was made with; a helper that read others returns other ranges
        cp_size, cp_rank = batch.cp_size, batch.cp_rank
    if not (type(t) is type(resp) is type(cp_size) is type(cp_rank) is int and 0 <= resp <= t and 0 <= cp_rank < cp_size):
        return False
    if cp_size == 1:
        return True  # nothing is sliced
    logits = result[2]
    if not (type(logits) is tuple and len(logits) == 2 and type(logits[0]) is tuple and type(logits[1]) is tuple
            and len(logits[0]) == len(logits[1]) == 2
            and type(logits[0][0]) is type(logits[0][1]) is type(logits[1][0]) is type(logits[1][1]) is int):
        return False
    j = batch.next_sample()
    if j is None or batch.totals[j] != t or batch.responses[j] != resp:
        return False
    expected = expected_logit_ranges(t, resp, cp_size, cp_rank, batch.qkv_format, batch.padded,
                                     checker.adapter.response_scheme)
    if expected is None or merged_int_ranges(logits) != expected:
        return False
    batch.offset_calls += 1
    checker.checked["offset calls"] += 1
    return True
