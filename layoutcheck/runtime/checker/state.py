"""The state of a `LayoutChecker` that its role wrappers read and update, and the producer's checks.

`LayoutChecker` (`layoutcheck.runtime.checker.layout_checker`) is a
`CheckerState` that can ``wrap``. The wrappers (`wrappers`) and what each
consumer call checks (`consumer_calls`) take a `CheckerState`: they depend
on it, and it on neither of them. The state is per rollout
(`layoutcheck.runtime.checker.rollouts`), so the replay filler's micro-batch
``k`` is compared with the batch builder's ``k`` whichever runs first (G5),
and a response-offset call is judged against the layout of the sample it
concerns (G4). The producer's checks (O1-O5) are here, since they start a
rollout.

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
from dataclasses import dataclass
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import ConfigError, LayoutError, LayoutSpecError, Violation, describe_value
from layoutcheck.runtime.checker.background import Outcome, ValueWorker
from layoutcheck.runtime.checker.rollouts import MicroBatch, Rollout
from layoutcheck.runtime.checker.values import Deferred
from layoutcheck.runtime.contract import checks
from layoutcheck.runtime.contract.adapters import MilesAdapter, Parallel, TrainerLayout
from layoutcheck.runtime.contract.common import bucket_tuple, frozen, ints
from layoutcheck.runtime.contract.meta import metadata_only
from layoutcheck.runtime.crossrank.distributed import CrossRankChecker, CrossRankTimeout, distributed_ready
from layoutcheck.runtime.reporting.modes import LayoutWarning, Recorder, check_mode, report, user_stacklevel
from layoutcheck.runtime.reporting.observations import (
    ObservationLimits,
    ObservationLog,
    Observations,
)

__all__ = ["CheckerState", "CrossRankOptions"]


@dataclass(frozen=True)
class CrossRankOptions:
    """How `LayoutChecker` checks cross-rank agreement (X1): every n-th micro-batch, and the wait for a missing rank."""

    every: int = 1
    timeout: float = 30.0
    step_limit: int = 1024
    """At most this many X1 checks wait for the step boundary (`CheckerState.end_step`); then they are exchanged."""


_DRAIN_WAIT = 120.0
"""Seconds a step boundary or the exit waits for the value-check worker before saying it did not finish."""

_SINGULAR = {"rollouts": "rollout", "micro-batches": "micro-batch", "replay tensors": "replay tensor",
             "offset calls": "offset call", "boundary calls": "boundary call"}
"""What `CheckerState.checked` counts, as one of it is said ("checked 1 rollout")."""


class CheckerState:
    """What a `LayoutChecker` knows and does besides wrapping (its parameters are documented there)."""

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
        cross_rank: CrossRankOptions | None = None,
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
        self.cross_rank = cross_rank
        self._agreement_checker: Any = None
        self._boundary_checker: Any = None
        self._deferred = Deferred()
        """Boundary checks waiting for the values of device tensors (`layoutcheck.runtime.checker.values`)."""
        self.values_worker: ValueWorker | None = None
        """Where boundaries' value checks of CPU tensors run (`layoutcheck.runtime.checker.background`): a worker
        thread (``value-checks = "background"``), or ``None``: in the call (``"inline"``)."""
        self.values_changed: Counter[str] = Counter()
        """Value checks not judged, by boundary: a tensor they read was written in place before they could run."""
        self._log = ObservationLog(limits)
        self._local = threading.local()  # per thread: how deep inside a producer call we are
        self._noted: set[str] = set()
        self.problems: list[ConfigError] = []
        """Configuration problems found while checking (a field whose value no contract can read), once each."""
        self.on_problem: Callable[[ConfigError], None] | None = None
        """Where `problems` also go: the debug session's set-up ledger (its summary, raise mode's exit status);
        without one, the checker warns itself (raise and warn modes)."""
        self._rollouts = 0
        self._run = Rollout(index=-1)
        self._step_opener: str | None = None
        """What opens a step, for the cross-rank exchange: the first of a new rollout or a boundary's call seen."""

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
        """What the checks saw: per sample, per micro-batch and whole-run aggregates (`Observations`)."""
        return self._log.snapshot()

    @property
    def rollouts(self) -> int:
        """Rollouts begun so far (a producer call, or a consumer reading a rollout dict it had not seen)."""
        return self._rollouts

    @property
    def observation_log(self) -> ObservationLog:
        """The live log behind `observations` (an appended run report reads what is new since its last write)."""
        return self._log

    def summary(self) -> str:
        """One line: how many violations, per invariant, and where; then what was checked, and what could not be read."""
        done = ", ".join(f"{n} {what if n != 1 else _SINGULAR.get(what, what)}" for what, n in self.checked.items())
        text = self.recorder.summary() + (f" (checked {done})" if done else " (nothing checked yet)")
        if self.values_changed:
            k = sum(self.values_changed.values())
            which = ", ".join(f"`{t}` {n}" for t, n in self.values_changed.items())
            text += (f"; {k} value check{'s' if k != 1 else ''} not run: tensors changed in place before they could "
                     f"be checked ({which})")
        if self.problems:
            k = len(self.problems)
            text += f"; {k} field{'s' if k != 1 else ''} could not be read (configuration problem{'s' if k != 1 else ''})"
        return text

    def start_run(self) -> None:
        """Forget the current rollout's state (its micro-batches, replay tensors not yet matched), keeping results.

        The next calls start afresh, as after a new producer call: the
        pytest plugin calls this before each test, so that one test's
        micro-batches are never compared with another's. Violations, notes,
        counts and observations stay.
        """
        self._run = Rollout(index=-1)
        self._local.producer = 0

    def reset(self) -> None:
        """Forget recorded violations, notes, counts, observations and per-rollout state."""
        self.recorder.clear()
        self.checked.clear()
        self._log.clear()
        self._noted.clear()
        self.problems.clear()
        self.values_changed.clear()
        self._rollouts = 0
        self._run = Rollout(index=-1)

    # --- shared plumbing ----------------------------------------------

    def _parallel(self) -> Parallel:
        return self.adapter.parallel(self.parallel_state)

    def _report(self, violations: list[Violation]) -> None:
        if not violations:  # the common case: nothing to dedupe, record or raise
            return
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

    def _agreement(self) -> Any:
        """The cross-rank checker (X1), made on first use once torch.distributed is up; ``None`` when off."""
        if self._agreement_checker is not None:
            return self._agreement_checker or None
        options = self.cross_rank
        if options is None or self.parallel_state is None or not distributed_ready():
            return None
        try:
            self._agreement_checker = CrossRankChecker(
                parallel_state=self.parallel_state, every=options.every, timeout=options.timeout, mode=None,
                recorder=self.recorder, on_failure=self._cross_rank_failed, defer=True,
                step_limit=options.step_limit,
            )
        except LayoutSpecError as err:
            self._agreement_checker = False  # said once; the local checks go on
            self._note("cross-rank agreement", err, key="cross-rank agreement")
        except CrossRankTimeout as err:
            self._agreement_checker = False  # its side group did not form: never retried on later calls
            if not self._cross_rank_failed(err):
                raise
        return self._agreement_checker or None

    def _boundary_agreement(self, coords: Mapping[str, int], group: Callable[[], Any] | None = None) -> Any:
        """The cross-rank checker of the boundaries (X1), made on first use once torch.distributed is up.

        The CP group: ``group()`` (a configured ``cp-group`` function), else
        the parallel state's, else ``cp`` and ``tp`` in Megatron's rank order.
        """
        if self._boundary_checker is not None:
            return self._boundary_checker or None
        options = self.cross_rank
        if options is None or not distributed_ready():
            return None
        try:
            process_group = group() if group is not None else None
            if process_group is not None:
                import torch.distributed as dist

                ranks = {"ranks": dist.get_process_group_ranks(process_group)}
            elif self.parallel_state is not None:
                ranks = {"parallel_state": self.parallel_state}
            else:
                ranks = {"cp_size": coords["cp"], "tp_size": coords["tp"]}
            self._boundary_checker = CrossRankChecker(
                **ranks, every=options.every, timeout=options.timeout, mode=None, recorder=self.recorder,
                on_failure=self._cross_rank_failed, defer=True, step_limit=options.step_limit,
            )
        except LayoutSpecError as err:
            self._boundary_checker = False
            self._note("cross-rank agreement", err, key="cross-rank agreement")
        except CrossRankTimeout as err:
            self._boundary_checker = False  # its side group did not form: never retried on later calls
            if not self._cross_rank_failed(err):
                raise
        return self._boundary_checker or None

    def flush(self, *, wait: bool = False) -> int:
        """Run the boundary checks whose device values have arrived (all of them with ``wait``: at exit); how many ran.

        At exit the checks are recorded whatever the mode (raising in an
        exit handler would only print a traceback): they reach the summary
        and the report.
        """
        if not wait:
            self.take_values()
            return self._deferred.poll()
        mode, self.mode = self.mode, "record"
        try:
            self.take_values(wait=True)
            return self._deferred.poll(wait=True)
        finally:
            self.mode = mode

    def take_values(self, *, wait: bool = False) -> None:
        """Report what the value-check worker found (waiting for every queued check with ``wait``), in this mode.

        Raise mode raises here, at the calling thread's next hooked call or
        step boundary: the violations name the call they were found in.
        """
        worker = self.values_worker
        if worker is None or (not wait and not worker.has_results):
            return
        self._report(self._outcomes(self._drain() if wait else worker.take()))

    def inline_values(self) -> None:
        """From now on, run value checks in the call (``value-checks = "inline"``); what the worker holds is recorded."""
        if self.values_worker is None:
            return
        mode, self.mode = self.mode, "record"
        try:
            self.take_values(wait=True)
        finally:
            self.mode = mode
            self.values_worker = None

    def _drain(self) -> list[Outcome]:
        # Every queued value check's outcome; one still running after _DRAIN_WAIT seconds (a worker that cannot
        # finish) is said once, not waited for forever at a step boundary or at exit
        worker = self.values_worker
        if worker is None:
            return []
        if not worker.wait(_DRAIN_WAIT):
            self._note("value checks", f"the value-check worker did not finish within {_DRAIN_WAIT:.0f} s; the "
                       "checks it still held were not waited for", key="worker late")
        return worker.take()

    def _outcomes(self, outcomes: list[Outcome]) -> list[Violation]:
        # the worker's outcomes on the calling thread: notes and counts now, the violations for the caller to report
        found: list[Violation] = []
        for o in outcomes:
            if o.error is not None:
                self._note(o.target, o.error)
            elif o.changed:
                self.values_changed[o.target] += 1
                self._note(o.target, "a tensor its value checks read was changed in place before they could run "
                           "(after the call returned), so those calls' values were not checked; set "
                           "`value-checks = \"inline\"` under [runtime] to check them in the call",
                           key=f"changed {o.target}")
            else:
                found += o.violations
        return found

    def end_step(self) -> list[Violation]:
        """The step boundary of the cross-rank checks (X1): exchange what every CP rank queued since the last one.

        The hooks queue their X1 checks and call this when a step opens:
        at a new rollout (the producer's call, or a consumer's first read of
        a rollout dict) or, in a run with no rollouts, at each call of the
        first boundary contract called in the run; and at exit
        (`close_cross_rank`). A trainer may call it itself, on every rank
        at the same point (after its optimizer step, say). The violations
        are reported in this checker's mode, so raise mode stops here: a
        step late, at the start of the step after the one that disagreed.
        It also waits for the value checks still running on the worker
        thread (`layoutcheck.runtime.checker.background`) and reports them.
        """
        # the step's value checks, so that what the step found is said in it (after the exchange: a raise before it
        # would leave the other ranks waiting)
        found = self._outcomes(self._drain())
        for checker in (self._agreement_checker, self._boundary_checker):
            if checker and checker.pending:
                found += self._checking("cross-rank agreement (X1)", checker.end_step) or []
        self._report(found)
        return found

    def _step_opens(self, opener: str) -> None:
        # The first opener seen (a rollout, or a boundary's target) marks every later step's start.
        if self._step_opener is None:
            self._step_opener = opener
        elif opener == self._step_opener and (self._agreement_checker or self._boundary_checker):
            self.end_step()

    def close_cross_rank(self) -> list[Violation]:
        """Exchange the last step's X1 checks, then destroy the side groups (at exit); the violations of that step.

        They are recorded whatever the mode (raising in an exit handler
        would only print a traceback). A trainer that destroyed its process
        groups first leaves nothing to exchange them on: one note says how
        many checks were left unexchanged.
        """
        found: list[Violation] = []
        checkers = [c for c in (self._agreement_checker, self._boundary_checker) if c]
        left = sum(c.pending for c in checkers)
        if left:
            if distributed_ready():
                mode, self.mode = self.mode, "record"
                try:
                    found = self.end_step()
                finally:
                    self.mode = mode
            else:
                self._note("cross-rank agreement (X1)", f"the last step's {left} cross-rank check"
                           f"{'s were' if left != 1 else ' was'} not exchanged: the process group was destroyed "
                           "before the exit (call `end_step()` on the checker before `destroy_process_group()` "
                           "to have them compared)", key="cross-rank left at exit")
        for checker in checkers:
            checker.close()
        return found

    def _cross_rank_failed(self, err: CrossRankTimeout) -> bool:
        # A rank gone or stopped: raise mode stops the step; warn and record note it and go on (X1 stops).
        if self.mode == "raise":
            return False
        self._note("cross-rank agreement (X1)", f"{err}\n(the cross-rank checks stop here; the local checks go on)",
                   key="cross-rank failure")
        return True

    def _checking(self, where: str, check: Callable[[], Any]) -> Any:
        """Run ``check`` (checker code only, never the wrapped function); ``None`` if it could not run.

        A `LayoutError` (violations, raise mode) propagates; any other error
        of the check becomes a note, in every mode; a warning the user turned
        into an error still propagates.
        """
        try:
            return check()
        except (LayoutError, Warning, CrossRankTimeout):  # a missing rank reaches here in raise mode only
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

    def _problem(self, key: str, source: str | None, message: str) -> None:
        """A configuration problem found while checking (``key``: the configuration key, ``source``: its file), once.

        Not a note: the configuration says what to check and it cannot be
        checked, so the run must not end looking checked. It goes to
        `on_problem` (the debug session reports it with the set-up's problems:
        raise mode fails at the end of the first step or at exit), else it is
        warned about here (raise and warn modes).
        """
        if f"problem {key}" in self._noted:
            return
        self._noted.add(f"problem {key}")
        err = ConfigError(f"{key}{f' in {source}' if source else ''}: {message}", key=key, source=source)
        self.problems.append(err)
        if self.on_problem is not None:
            self.on_problem(err)
        elif self.mode != "record":
            warnings.warn(f"layoutcheck: {err} (the field is left out of the checks)", LayoutWarning,
                          stacklevel=user_stacklevel())

    def _new_rollout(self, key: int | None, layout: str | None) -> Rollout:
        self._step_opens("rollout")  # the previous rollout's X1 checks are exchanged, reported under it
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
        with metadata_only():
            lens, totals, responses, tokens = self.adapter.sample_lists(rollout, samples, qkv_format == "bshd")
        return MicroBatch(k=k, samples=samples, lens=lens, totals=totals, responses=responses, tokens=tokens)

    def _check_micro_batch(
        self, mb: MicroBatch, where: str, cp_size: int, qkv_format: str, scheme: str, *, padded: int | None = None
    ) -> list[Violation]:
        """G1, G2, the all-gather part of G3 and G6 on micro-batch ``mb`` (nothing without its lengths).

        Judged once per rollout for the same ints: the replay filler and each
        pass of the batch builder read micro-batch ``k`` again, and what the
        first judgement found was reported then (a violation is reported
        once per rollout whichever hook sees it).
        """
        if mb.totals is None:
            return []
        key = (mb.k, qkv_format, scheme, cp_size, padded, *map(frozen, (mb.samples, mb.lens, mb.totals, mb.tokens)))
        if key in self._run.judged:
            return []
        self._run.judged.add(key)
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
        self._log.samples(run.index, run.totals, run.responses, run.padded, unit)

    def _producer_returned(self, where: str, call: Mapping[str, Any], result: Any) -> None:
        self.check_rollout_data(self.adapter.producer_rollout(result), self.adapter.producer_args(call), where=where)
