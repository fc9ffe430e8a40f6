"""`LayoutChecker`: the layout checks around a trainer's data path, and their per-rollout state.

    checker = LayoutChecker(mode="raise", parallel_state=get_parallel_state)
    get_rollout_data = checker.wrap("producer", get_rollout_data)            # O1-O5
    get_batch = checker.wrap("batch_builder", get_batch)                     # G1-G4, G6
    fill_replay_data = checker.wrap("replay_filler", fill_replay_data)       # G1, G2, G5
    offsets = checker.wrap("offset_helper", get_logits_and_tokens_offset_with_cp)  # G4

`wrap` (in `layoutcheck.runtime.wrappers`) checks the function's signature
against what its role needs and patches nothing: the caller, or the hooks
that install wrappers by dotted path, put the wrapper where the program looks
the function up. The wrappers share the checker's state per rollout, so the
replay filler's micro-batch ``k`` is compared with the batch builder's ``k``
whichever runs first (G5), and a response-offset call is judged against the
layout of the sample it concerns (G4).

A check never stops a call it does not understand: an error raised while
*checking* (a trainer shape the adapter cannot read, a tensor where a list of
ints belongs) becomes one note in every mode (`LayoutChecker.notes`, and a
`LayoutWarning` in raise and warn mode), and the wrapped call goes ahead.
Only violations of the invariants raise (`LayoutError`, raise mode). Errors
of the wrapped function itself always propagate.
"""

from __future__ import annotations

import threading
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutError, LayoutSpecError, Violation, describe_value
from layoutcheck.runtime import checks
from layoutcheck.runtime.adapters import BatchCall, MilesAdapter, Parallel, ReplayCall, TrainerLayout
from layoutcheck.runtime.common import bucket_tuple, ints
from layoutcheck.runtime.meta import count, metadata_only
from layoutcheck.runtime.observations import (
    MicroBatchObservation,
    ObservationLimits,
    ObservationLog,
    Observations,
    SampleObservation,
)
from layoutcheck.runtime.reporting import LayoutWarning, Recorder, check_mode, report, user_stacklevel
from layoutcheck.runtime.rollouts import BatchRecord, MicroBatch, ReplayRecord, Rollout

__all__ = ["LayoutChecker", "check_rollout_data"]


@dataclass
class _BatchCallState:
    """What the batch-builder wrapper learnt before the call, for the checks after it."""

    run: Rollout
    view: BatchCall
    layout: str
    micro_batch: MicroBatch
    par: Parallel
    prechecked: bool


@dataclass
class _FillerCallState:
    """One replay-filler call: its plan per micro-batch (samples, P) and how many tensors it registered."""

    where: str
    run: Rollout
    view: ReplayCall
    par: Parallel
    sequence_parallel: bool
    plan: dict[int, tuple[list[int] | None, int | None]]
    registered: int = 0


class LayoutChecker:
    """Runs the layout checks around a producer, a batch builder, a replay filler and an offset helper.

    ``mode``: ``"raise"`` (a `LayoutError` with every violation of the call),
    ``"warn"`` (a `LayoutWarning`) or ``"record"``; every mode records, so
    `violations`, `summary` and `observations` always tell what was found.
    Each distinct violation is reported once per rollout.

    ``parallel_state``: a callable like ``get_parallel_state`` (``.tp`` and
    ``.cp`` with ``.size`` and ``.rank``); ``None`` means one rank.

    ``layout``: ``"bshd"`` or ``"thd"``, when the configuration says. The
    layout is never guessed: this, else the trainer's ``args.qkv_format``,
    else (at the batch builder) its own ``qkv_format`` argument; where none
    is known the layout-dependent checks become one note, never a violation.

    ``buckets``: static shape buckets (G6). The batch builder then pads each
    BSHD micro-batch to a bucket, so ``max_seq_lens`` may stay the samples'
    own tight lengths: the micro-batch's ``P`` is read from the shape of the
    batch the builder returned (G1 does not apply; G2, G3, G4 and G6 judge
    that ``P``), and O3, the per-sample tightness check, is off unless
    ``per_sample=True``.

    ``adapter``: how the trainer is read (`MilesAdapter` by default).
    ``limits``: how much detail `observations` keep.
    """

    ROLES: tuple[str, ...] = ("producer", "batch_builder", "replay_filler", "offset_helper")

    def __init__(
        self,
        mode: str = "raise",
        *,
        parallel_state: Callable[[], Any] | None = None,
        layout: str | None = None,
        buckets: Sequence[int] | None = None,
        per_sample: bool | None = None,
        adapter: MilesAdapter | None = None,
        limits: ObservationLimits | None = None,
    ) -> None:
        self.mode = check_mode(mode)
        self.parallel_state = parallel_state
        self.layout = None if layout is None else geometry.check_layout(layout)
        self.buckets = bucket_tuple(buckets)
        self.per_sample = self.buckets is None if per_sample is None else per_sample
        self.adapter = adapter or MilesAdapter()
        self.recorder = Recorder()
        self.checked: Counter[str] = Counter()
        """How many times each hook ran its checks (rollouts, micro-batches, replay tensors, offset calls)."""
        self._log = ObservationLog(limits)
        self._local = threading.local()  # per thread: how deep inside a producer call we are
        self._noted: set[str] = set()
        self._rollouts = 0
        self._run = Rollout(index=-1)

    # --- wrapping ----------------------------------------------------

    def wrap(self, role: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """The checked wrapper of ``fn`` in ``role`` (``producer``, ``batch_builder``, ``replay_filler``, ``offset_helper``).

        Hyphens are accepted for underscores (``batch-builder``). Raises
        `LayoutSpecError` when ``fn``'s signature does not fit the role,
        naming the function, the parameter, what was expected and what was
        found. Wrapping a wrapper of this checker in the same role returns
        it unchanged. See `layoutcheck.runtime.wrappers`.
        """
        from layoutcheck.runtime.wrappers import wrap

        return wrap(self, role, fn)

    def wrap_producer(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("producer", fn)``: O1-O5 on what ``get_rollout_data`` returns."""
        return self.wrap("producer", fn)

    def wrap_batch_builder(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("batch_builder", fn)``: G1, G2, G6 before ``get_batch`` (fail closed), G3, G4 after."""
        return self.wrap("batch_builder", fn)

    def wrap_replay_filler(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("replay_filler", fn)``: G1, G2 on each micro-batch before the filler runs, G5 on each tensor."""
        return self.wrap("replay_filler", fn)

    def wrap_offset_helper(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("offset_helper", fn)``: G4 on the logit ranges it returns."""
        return self.wrap("offset_helper", fn)

    # --- results -----------------------------------------------------

    @property
    def violations(self) -> list[Violation]:
        """Every violation found so far, in order (the first `Recorder.limit`; the rest are counted)."""
        return list(self.recorder.violations)

    @property
    def violation_rollouts(self) -> list[int | None]:
        """The rollout (0-based, in order of first sight) each of `violations` was seen in."""
        return list(self.recorder.rollouts)

    @property
    def notes(self) -> list[str]:
        """Checks that could not run, one sentence each, in order."""
        return list(self.recorder.notes)

    @property
    def observations(self) -> Observations:
        """What the checks saw: per sample, per micro-batch and whole-run aggregates (`layoutcheck.runtime.observations`)."""
        return self._log.snapshot()

    def summary(self) -> str:
        """One line: how many violations, per invariant, and where; then what was checked."""
        done = ", ".join(f"{n} {what}" for what, n in self.checked.items())
        return self.recorder.summary() + (f" (checked {done})" if done else " (nothing checked yet)")

    def reset(self) -> None:
        """Forget recorded violations, notes, counts, observations and per-rollout state."""
        self.recorder.clear()
        self.checked.clear()
        self._log.clear()
        self._noted.clear()
        self._rollouts = 0
        self._run = Rollout(index=-1)

    # --- shared plumbing ----------------------------------------------

    def _parallel(self) -> Parallel:
        return self.adapter.parallel(self.parallel_state)

    def _report(self, violations: list[Violation]) -> None:
        run, fresh = self._run, []
        for v in violations:
            key = (
                v.invariant, v.field, v.sample, v.micro_batch, describe_value(v.actual, 400),
                describe_value(v.expected, 400),
            )
            if key not in run.seen:
                run.seen.add(key)
                fresh.append(v)
        report(fresh, self.mode, recorder=self.recorder, rollout=run.index if run.index >= 0 else None)

    def _checking(self, where: str, check: Callable[[], Any]) -> Any:
        """Run ``check`` (checker code only, never the wrapped function); ``None`` if it could not run.

        A `LayoutError` (violations, raise mode) propagates; any other error
        of the check becomes a note, in every mode; a warning the user turned
        into an error still propagates.
        """
        try:
            return check()
        except (LayoutError, Warning):
            raise
        except Exception as err:
            self._note(where, err)
            return None

    def _note(self, where: str, err: Exception | str, *, key: str | None = None) -> None:
        """One note per distinct sentence (or ``key``) over the run; a warning too, except in record mode."""
        if isinstance(err, str):
            reason = err
        else:
            reason = str(err) if isinstance(err, LayoutSpecError) else f"{type(err).__name__}: {err}"
        text = f"layoutcheck could not check `{where}`: {reason}"
        if (key or text) in self._noted:
            return
        self._noted.add(key or text)
        self.recorder.add_note(text)
        if self.mode != "record":
            warnings.warn(text + " (the call went ahead unchecked)", LayoutWarning, stacklevel=user_stacklevel())

    def _new_rollout(self, key: int | None, layout: str | None) -> Rollout:
        self._run = Rollout(index=self._rollouts, key=key, layout=layout, buckets=self.buckets)
        self._rollouts += 1
        self._log.rollout()
        return self._run

    def _rollout_for(self, rollout_data: Mapping[str, Any]) -> Rollout:
        # A rollout dict the producer did not announce starts a new rollout; without one, keep the current.
        if rollout_data and id(rollout_data) != self._run.key:
            self._new_rollout(id(rollout_data), self.layout)
        return self._run

    def _bucketed(self, qkv_format: str | None) -> bool:
        # With buckets, a BSHD builder pads each micro-batch to one: its P is known from the batch only.
        return self.buckets is not None and qkv_format == "bshd"

    def _micro_batch(self, rollout: Mapping[str, Any], iterator: Any, k: int, qkv_format: str | None) -> MicroBatch:
        """Micro-batch ``k``'s samples and per-sample ints, from the rollout dict the iterator walks."""
        samples = self.adapter.micro_batch_samples(iterator, k)
        if samples is None or not rollout:
            return MicroBatch(k=k, samples=samples)
        return MicroBatch(
            k=k,
            samples=samples,
            lens=self.adapter.per_sample(rollout, "max_seq_lens", samples) if qkv_format == "bshd" else None,
            totals=self.adapter.per_sample(rollout, "total_lengths", samples),
            responses=self.adapter.per_sample(rollout, "response_lengths", samples),
            tokens=self.adapter.token_lengths(rollout, samples),
        )

    def _check_micro_batch(
        self, mb: MicroBatch, where: str, cp_size: int, qkv_format: str, scheme: str, *, padded: int | None = None
    ) -> list[Violation]:
        """G1, G2, the all-gather part of G3 and G6 on micro-batch ``mb`` (nothing without its lengths)."""
        if mb.totals is None:
            return []
        return checks.check_micro_batch(
            micro_batch=mb.k, samples=mb.samples, max_seq_lens=mb.lens, total_lengths=mb.totals,
            token_lengths=mb.tokens, padded=padded, cp_size=cp_size, qkv_format=qkv_format, scheme=scheme,
            buckets=self.buckets, where=where,
        )

    # --- the producer ------------------------------------------------

    def _enter_producer(self) -> None:
        self._local.producer = getattr(self._local, "producer", 0) + 1

    def _exit_producer(self) -> None:
        self._local.producer -= 1

    def _in_producer(self) -> bool:
        return getattr(self._local, "producer", 0) > 0

    def check_rollout_data(self, rollout_data: Mapping[str, Any], args: Any, *, where: str = "get_rollout_data") -> list[Violation]:
        """O1-O5 on a producer's output, the layout and ``A`` read from ``args``; starts a new rollout.

        Called directly, a bad specification raises `LayoutSpecError` in
        every mode; only the wrappers turn it into a note. When the layout is
        not known (no ``layout=`` and no ``args.qkv_format``), the
        layout-dependent checks are left out and one note says so.
        """
        par = self._parallel()
        lay = self.adapter.layout(args, par, layout=self.layout)
        if not isinstance(rollout_data, Mapping):
            raise LayoutSpecError(f"`rollout_data` must be a dict of per-sample lists, got {type(rollout_data).__name__}")
        run = self._new_rollout(id(rollout_data), lay.qkv_format)
        self.checked["rollouts"] += 1
        found = checks.check_rollout(
            rollout_data, unit=lay.unit, cp_size=par.cp_size, cp_rank=par.cp_rank, layout=lay.qkv_format,
            scheme=lay.scheme, response_scheme=self.adapter.response_scheme, per_sample=self.per_sample,
            buckets=self.buckets, where=where,
        )
        if lay.qkv_format is None:
            self._note(where, "the layout is not known (no `args.qkv_format`, no configured layout), so O2, O3 and "
                       "the CP-sliced counts of O4 were not checked: set `layout` in the configuration",
                       key="layout unknown at the producer")
        self._remember_samples(run, rollout_data, lay)
        self._report(found)
        return found

    def _remember_samples(self, run: Rollout, rollout_data: Mapping[str, Any], lay: TrainerLayout) -> None:
        # The rollout's per-sample ints, for offset attribution and the observations (validated by check_rollout).
        with metadata_only():
            run.totals = ints("total_lengths", rollout_data["total_lengths"])
            responses = rollout_data.get("response_lengths")
            run.responses = None if responses is None else ints("response_lengths", responses)
            padded = rollout_data.get("max_seq_lens") if lay.qkv_format == "bshd" else None
            run.padded = None if padded is None else ints("max_seq_lens", padded)
        unit = lay.unit.value if run.padded is not None else None
        self._log.samples(run.index, [
            SampleObservation(
                rollout=run.index, sample=i, total=t,
                response=run.responses[i] if run.responses is not None and i < len(run.responses) else None,
                padded=run.padded[i] if run.padded is not None and i < len(run.padded) else None, unit=unit,
            )
            for i, t in enumerate(run.totals)
        ])

    def _producer_returned(self, where: str, call: Mapping[str, Any], result: Any) -> None:
        self.check_rollout_data(self.adapter.producer_rollout(result), self.adapter.producer_args(call), where=where)

    # --- the batch builder -------------------------------------------

    def _batch_before(self, where: str, call: Mapping[str, Any]) -> _BatchCallState:
        """Before ``get_batch``: G1, G2, the all-gather part of G3, G6 from the rollout's ints (fail closed)."""
        view = self.adapter.batch_call(call)
        rollout = self.adapter.rollout_of(view.iterator)
        run = self._rollout_for(rollout)
        k = self.adapter.next_micro_batch(view.iterator)
        if k is None:
            k = run.calls
        run.calls += 1
        par = self._parallel()
        layout = self.layout or run.layout or view.qkv_format
        mb = self._micro_batch(rollout, view.iterator, k, layout)
        prechecked = mb.totals is not None and not self._bucketed(layout)
        if prechecked:
            self._report(self._check_micro_batch(mb, where, par.cp_size, layout, view.scheme))
        return _BatchCallState(run=run, view=view, layout=layout, micro_batch=mb, par=par, prechecked=prechecked)

    def _batch_after(self, where: str, state: _BatchCallState, batch: Any) -> None:
        """After ``get_batch``: G3 shapes, G4 counts, and G5 against replay tensors registered for ``k``."""
        if not isinstance(batch, Mapping):
            raise LayoutSpecError(f"the batch builder returned {type(batch).__name__}, not a dict of batch fields")
        view, par, mb, layout = state.view, state.par, state.micro_batch, state.layout
        bshd = layout == "bshd"
        if mb.totals is None:  # no rollout view: take the batch's own lists
            mb = MicroBatch(
                k=mb.k, samples=mb.samples, lens=batch.get("max_seq_lens") if bshd else None,
                totals=batch.get("total_lengths"), responses=batch.get("response_lengths"),
            )
            if mb.totals is None:
                raise LayoutSpecError("neither the iterator's rollout data nor the batch has `total_lengths`")
        found: list[Violation] = []
        padded: int | None = None
        if self._bucketed(layout):
            local = self.adapter.batch_local_length(batch)
            if local is not None:
                padded = geometry.padded_for_local_length(local, par.cp_size, view.scheme, candidates=self.buckets or ())
                found += self._check_micro_batch(mb, where, par.cp_size, layout, view.scheme, padded=padded)
        else:
            if not state.prechecked:
                found += self._check_micro_batch(mb, where, par.cp_size, layout, view.scheme)
            padded = self.adapter.batch_padded(batch, mb.lens) if bshd else None
        current = list(mb.current or [])
        if not bshd or padded is not None:
            found += checks.check_batch_layout(
                batch, micro_batch=mb.k, samples=mb.samples, total_lengths=current, response_lengths=mb.responses,
                padded=padded, cp_size=par.cp_size, cp_rank=par.cp_rank, qkv_format=layout, scheme=view.scheme,
                response_scheme=self.adapter.response_scheme, stream_multiple=par.tp_size * view.pad_multiplier,
                where=where,
            )
        rows = self.adapter.batch_rows(batch)
        record = BatchRecord(
            k=mb.k, samples=mb.samples, qkv_format=layout, scheme=view.scheme, padded=padded, rows=rows,
            totals=current, responses=list(mb.responses or []),
        )
        run = state.run
        if mb.k not in run.batches:  # each micro-batch once per rollout, however many passes lay it out
            self.checked["micro-batches"] += 1
            self._log.micro_batch(MicroBatchObservation(
                rollout=run.index, index=mb.k, samples=tuple(mb.samples or ()), layout=layout, totals=tuple(current),
                padded=padded if bshd else None, stream=None if bshd or rows is None else rows * par.cp_size,
                shape=self.adapter.batch_shape(batch),
            ))
        run.laid_out_by(record)
        for replay in run.pending.pop(mb.k, []):  # G5: replay tensors registered before this batch
            found += self._g5(replay, record)
        self._report(found)

    # --- the replay filler -------------------------------------------

    def _filler_before(self, where: str, call: Mapping[str, Any]) -> _FillerCallState | None:
        """Before the filler runs: G1, G2 (and G3, G6) on every micro-batch it will walk, as it will read them.

        The filler resets its iterators and walks ``sum(num_microbatches)``
        micro-batches of the first one, so micro-batch ``k`` is the ``k``-th
        of the schedule; raise mode stops here, before the filler pads.
        """
        view = self.adapter.replay_call(call)
        if not callable(call.get(view.register_name)):
            raise LayoutSpecError(f"`{view.register_name}` is not callable")
        par = self._parallel()
        lay = self.adapter.layout(view.args, par, layout=self.layout)
        run = self._rollout_for(view.rollout_data)
        layout = lay.qkv_format or run.layout
        found: list[Violation] = []
        plan: dict[int, tuple[list[int] | None, int | None]] = {}
        for k in range(view.micro_batches):
            mb = self._micro_batch(view.rollout_data, view.iterator, k, layout)
            if layout is not None and not self._bucketed(layout):
                found += self._check_micro_batch(mb, where, par.cp_size, layout, lay.scheme)
            # with buckets the filler's P is the batch's bucket: compared through the rows (G5)
            plan[k] = (mb.samples, mb.lens[0] if mb.lens and not self._bucketed(layout) else None)
        self._report(found)
        return _FillerCallState(
            where=where, run=run, view=view, par=par, sequence_parallel=lay.sequence_parallel and view.sp_region,
            plan=plan,
        )

    def _replay_registered(self, state: _FillerCallState, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
        """One register call of the filler: micro-batch ``k`` is the count of calls so far (G5)."""
        k, state.registered = state.registered, state.registered + 1
        replay = self.adapter.registered_replay(args, kwargs)
        with metadata_only():
            rows = count(replay)
        samples, padded = state.plan.get(k, (None, None))
        record = ReplayRecord(
            k=k, key=state.view.data_key, samples=samples, padded=padded, rows=rows, tp_size=state.par.tp_size,
            sequence_parallel=state.sequence_parallel, where=state.where,
        )
        self.checked["replay tensors"] += 1
        batch = state.run.batches.get(k)
        if batch is not None:
            self._report(self._g5(record, batch))
        else:
            state.run.pending.setdefault(k, []).append(record)

    def _g5(self, replay: ReplayRecord, batch: BatchRecord) -> list[Violation]:
        if batch.rows is None or replay.rows is None:
            return []
        return checks.check_replay(
            replay.rows, micro_batch=batch.k, samples=replay.samples, batch_rows=batch.rows,
            padded=replay.padded if batch.qkv_format == "bshd" else None, batch_padded=batch.padded,
            batch_samples=batch.samples, tp_size=replay.tp_size, sequence_parallel=replay.sequence_parallel,
            field=replay.key, where=replay.where,
        )

    # --- the response-offset helper ----------------------------------

    def _offset_returned(self, where: str, call: Mapping[str, Any], result: Any) -> None:
        """G4: the logit ranges the helper returned are the ones of the sample's layout.

        Calls made inside the producer are left to O4 (which judges what the
        producer made of them). ``cp_rank``/``cp_size`` come from the call when
        passed, else from the parallel state, as the helper itself does.
        """
        if self._in_producer():
            return
        info = self.adapter.offset_call(call)
        if info.cp_rank is None or info.cp_size is None:
            if self.parallel_state is None:
                raise LayoutSpecError(
                    "the helper was called without `cp_rank`/`cp_size`, and the checker has no `parallel_state` "
                    "to read them from: configure the parallel-state function"
                )
            par = self._parallel()
            cp_size, cp_rank = par.cp_size, par.cp_rank
        else:
            cp_size, cp_rank = info.cp_size, info.cp_rank
        if cp_size == 1:
            return  # nothing is sliced
        ranges = self.adapter.offset_logit_ranges(result)
        targets = self._run.offset_targets(info.total_length, info.response_length)
        if not targets:
            self._note(where, "calls for lengths that match no sample of the current rollout are not checked "
                       f"(first: total_length={info.total_length}, response_length={info.response_length})",
                       key=f"unattributed offset call {self._run.index}")
            return
        called_with = {"qkv_format": info.qkv_format, "max_seq_len": info.max_seq_len}
        first: list[Violation] | None = None
        for target in targets:
            found = checks.check_response_offsets(
                ranges, total_length=info.total_length, response_length=info.response_length, cp_size=cp_size,
                cp_rank=cp_rank, qkv_format=target.qkv_format, padded=target.padded,
                scheme=self.adapter.response_scheme, micro_batch=target.micro_batch, sample=target.sample,
                where=where, called_with=called_with,
            )
            if not found:
                first = []
                break
            first = found if first is None else first
        self.checked["offset calls"] += 1
        self._report(first or [])


def check_rollout_data(
    rollout_data: Mapping[str, Any],
    args: Any,
    *,
    parallel_state: Callable[[], Any] | None = None,
    mode: str = "raise",
    per_sample: bool = True,
    layout: str | None = None,
) -> list[Violation]:
    """One-off O1-O5 on a producer's ``rollout_data``, the layout and ``A`` read from ``args`` (or ``layout``).

    Applies ``mode`` (raise, warn or record) and returns the violations.
    """
    checker = LayoutChecker(mode, parallel_state=parallel_state, per_sample=per_sample, layout=layout)
    return checker.check_rollout_data(rollout_data, args)

