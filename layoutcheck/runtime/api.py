"""The manual API: run the layout checks around a trainer's data path.

    checker = LayoutChecker(mode="raise", parallel_state=get_parallel_state)
    get_rollout_data = checker.wrap_producer(get_rollout_data)          # O1-O5
    get_batch = checker.wrap_batch_builder(get_batch)                   # G1-G4, G6
    fill_replay_data = checker.wrap_replay_filler(fill_replay_data)     # G1, G2, G5
    offsets = checker.wrap_offset_helper(get_logits_and_tokens_offset_with_cp)  # G4

Each ``wrap_*`` returns a `functools.wraps` wrapper and patches nothing: the
caller rebinds the names it wants checked (the automatic hooks of a later
issue will do that by dotted path, reusing these wrappers). The wrappers
share one checker state per rollout, so the replay filler's micro-batch ``k``
is compared with the batch builder's ``k`` whichever runs first (G5).
Trainer shapes are read through an adapter (`MilesAdapter` by default).

In ``warn`` and ``record`` mode a check never stops training: an error
raised while *checking* (a bad specification such as a tensor where a list of
ints belongs, or a trainer shape the adapter cannot read) becomes one
`LayoutWarning` (warn) or a note in `LayoutChecker.notes` (record), saying
which check could not run and why, and the wrapped call goes ahead. Errors of
the wrapped function itself always propagate. ``raise`` mode raises both.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, Violation, describe_value
from layoutcheck.runtime import checks
from layoutcheck.runtime.adapters import BatchCall, MilesAdapter, Parallel, ReplayCall, TrainerLayout
from layoutcheck.runtime.common import bucket_tuple
from layoutcheck.runtime.meta import count, metadata_only
from layoutcheck.runtime.reporting import LayoutWarning, Recorder, check_mode, report, user_stacklevel

__all__ = ["LayoutChecker", "check_rollout_data"]

F = TypeVar("F", bound=Callable[..., Any])


def _compiling() -> bool:
    # Hooks belong at eager boundaries; never run inside a torch.compile trace.
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def _bind(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None  # let the wrapped function raise its own error
    bound.apply_defaults()
    return dict(bound.arguments)


@dataclass
class _BatchRecord:
    """What the batch builder did for micro-batch ``k`` (ints only, never tensors)."""

    k: int
    samples: list[int] | None
    qkv_format: str
    scheme: str
    padded: int | None
    rows: int | None
    totals: list[int] = field(default_factory=list)
    responses: list[int] = field(default_factory=list)
    offset_calls: int = 0

    def sample_for_offsets(self, total: int, response: int) -> int | None:
        """The sample an offset-helper call concerns: the next one in call order if it matches, else any match."""
        j, self.offset_calls = self.offset_calls, self.offset_calls + 1
        pairs = list(zip(self.totals, self.responses))
        if j < len(pairs) and pairs[j] == (total, response):
            pick = j
        else:
            pick = next((i for i, pair in enumerate(pairs) if pair == (total, response)), None)
        if pick is None or self.samples is None or pick >= len(self.samples):
            return None
        return self.samples[pick]


@dataclass
class _ReplayRecord:
    """What the replay filler registered for micro-batch ``k``."""

    k: int
    key: str
    samples: list[int] | None
    padded: int | None
    rows: int | None  # the replay tensor's row count (never the tensor: records hold ints only)
    tp_size: int
    sequence_parallel: bool
    where: str


@dataclass
class _Run:
    """Checker state for one rollout (from one producer call to the next)."""

    rollout_key: tuple[int, ...] | None = None
    batches: dict[int, _BatchRecord] = field(default_factory=dict)
    pending: dict[int, list[_ReplayRecord]] = field(default_factory=dict)
    seen: set[tuple[object, ...]] = field(default_factory=set)
    noted: set[str] = field(default_factory=set)
    current: _BatchRecord | None = None
    calls: int = 0


@dataclass
class _MicroBatch:
    """Micro-batch ``k`` as the rollout dict describes it (ints only; ``None``: not known)."""

    k: int
    samples: list[int] | None = None
    lens: list[int] | None = None  # max_seq_lens (BSHD only)
    totals: list[int] | None = None
    responses: list[int] | None = None
    tokens: list[int] | None = None  # the current token counts (tokens[i].numel())

    @property
    def current(self) -> list[int] | None:
        """The lengths the layout must hold now: the token counts, else ``total_lengths``."""
        return self.tokens if self.tokens is not None else self.totals


@dataclass
class _BatchCallState:
    """What the batch-builder wrapper learnt before the call, for the checks after it."""

    run: _Run
    view: BatchCall
    micro_batch: _MicroBatch
    par: Parallel
    prechecked: bool


def _rollout_key(rollout_data: Mapping[str, Any]) -> tuple[int, ...]:
    # Identity of a rollout without keeping it alive.
    tokens = rollout_data.get("tokens")
    return (id(rollout_data), id(tokens), len(tokens) if tokens is not None else -1)


class LayoutChecker:
    """Runs the layout checks around a producer, a batch builder and a replay filler.

    ``mode``: ``"raise"`` (a `LayoutError` with every violation of the call),
    ``"warn"`` (a `LayoutWarning`) or ``"record"``; every mode records, so
    `violations` and `summary` always tell what was found, and in warn and
    record mode a check that cannot run is a note (`notes`), never a crash.
    Each distinct violation is reported once per rollout. ``parallel_state``:
    a callable like ``get_parallel_state`` (``.tp.size``, ``.cp.size``,
    ``.cp.rank``); ``None`` means one rank.

    ``buckets``: static shape buckets (G6). The batch builder then pads each
    BSHD micro-batch to a bucket, so ``max_seq_lens`` may stay the samples'
    own tight lengths: the micro-batch's ``P`` is read from the shape of the
    batch the builder returned (G1 does not apply; G2, G3, G4 and G6 judge
    that ``P``), and O3, the per-sample tightness check, is off unless
    ``per_sample=True``.
    """

    def __init__(
        self,
        mode: str = "raise",
        *,
        parallel_state: Callable[[], Any] | None = None,
        buckets: Sequence[int] | None = None,
        per_sample: bool | None = None,
        adapter: MilesAdapter | None = None,
    ) -> None:
        self.mode = check_mode(mode)
        self.parallel_state = parallel_state
        self.buckets = bucket_tuple(buckets)
        self.per_sample = self.buckets is None if per_sample is None else per_sample
        self.adapter = adapter or MilesAdapter()
        self.recorder = Recorder()
        self.checked: Counter[str] = Counter()
        """How many times each hook ran its checks (rollouts, micro-batches, replay tensors, offset calls)."""
        self._run = _Run()

    # --- results ------------------------------------------------------

    @property
    def violations(self) -> list[Violation]:
        """Every violation found so far, in order."""
        return list(self.recorder.violations)

    @property
    def notes(self) -> list[str]:
        """Checks that could not run (warn and record modes), one sentence each, in order."""
        return list(self.recorder.notes)

    def summary(self) -> str:
        """One line: how many violations, per invariant, and where; then what was checked."""
        done = ", ".join(f"{n} {what}" for what, n in self.checked.items())
        return self.recorder.summary() + (f" (checked {done})" if done else " (nothing checked yet)")

    def reset(self) -> None:
        """Forget recorded violations, notes, counts and per-rollout state."""
        self.recorder.clear()
        self.checked.clear()
        self._run = _Run()

    # --- shared plumbing ----------------------------------------------

    def _parallel(self) -> Parallel:
        return self.adapter.parallel(self.parallel_state)

    def _report(self, violations: list[Violation]) -> None:
        fresh = []
        for v in violations:
            key = (
                v.invariant, v.field, v.sample, v.micro_batch, describe_value(v.actual, 400),
                describe_value(v.expected, 400),
            )
            if key not in self._run.seen:
                self._run.seen.add(key)
                fresh.append(v)
        report(fresh, self.mode, recorder=self.recorder)

    def _checking(self, where: str, check: Callable[[], Any]) -> Any:
        """Run ``check`` (checker code only, never the wrapped function); ``None`` if it could not run.

        raise mode: every error propagates (the `LayoutError` of `report`
        among them). warn / record mode: any error of the check becomes a
        note (and a warning in warn mode), once per rollout; a warning the
        user turned into an error still propagates.
        """
        try:
            return check()
        except Warning:
            raise
        except Exception as err:
            if self.mode == "raise":
                raise
            self._note(where, err)
            return None

    def _note(self, where: str, err: Exception) -> None:
        reason = str(err) if isinstance(err, LayoutSpecError) else f"{type(err).__name__}: {err}"
        text = f"layoutcheck could not check `{where}`: {reason}"
        if text in self._run.noted:
            return
        self._run.noted.add(text)
        self.recorder.add_note(text)
        if self.mode == "warn":
            warnings.warn(text + " (the call went ahead unchecked)", LayoutWarning, stacklevel=user_stacklevel())

    def _run_for(self, rollout_data: Mapping[str, Any]) -> _Run:
        # A new rollout dict starts a new run; without one (a bare iterator) keep the current run.
        if not rollout_data:
            return self._run
        key = _rollout_key(rollout_data)
        if self._run.rollout_key != key:
            self._run = _Run(rollout_key=key)
        return self._run

    def _bucketed(self, qkv_format: str) -> bool:
        # With buckets, a BSHD builder pads each micro-batch to one: its P is known from the batch only.
        return self.buckets is not None and qkv_format == "bshd"

    # --- one micro-batch, shared by the batch builder and the replay filler ---

    def _micro_batch(self, rollout: Mapping[str, Any], iterator: Any, k: int, qkv_format: str) -> _MicroBatch:
        """Micro-batch ``k``'s samples and per-sample ints, from the rollout dict the iterator walks."""
        samples = self.adapter.micro_batch_samples(iterator, k)
        if samples is None or not rollout:
            return _MicroBatch(k=k, samples=samples)
        return _MicroBatch(
            k=k,
            samples=samples,
            lens=self.adapter.per_sample(rollout, "max_seq_lens", samples) if qkv_format == "bshd" else None,
            totals=self.adapter.per_sample(rollout, "total_lengths", samples),
            responses=self.adapter.per_sample(rollout, "response_lengths", samples),
            tokens=self.adapter.token_lengths(rollout, samples),
        )

    def _check_micro_batch(
        self, mb: _MicroBatch, where: str, cp_size: int, qkv_format: str, scheme: str, *, padded: int | None = None
    ) -> list[Violation]:
        """G1, G2, the all-gather part of G3 and G6 on micro-batch ``mb`` (nothing without its lengths)."""
        if mb.totals is None:
            return []
        return checks.check_micro_batch(
            micro_batch=mb.k, samples=mb.samples, max_seq_lens=mb.lens, total_lengths=mb.totals,
            token_lengths=mb.tokens, padded=padded, cp_size=cp_size, qkv_format=qkv_format, scheme=scheme,
            buckets=self.buckets, where=where,
        )

    # --- the owner ----------------------------------------------------

    def check_rollout_data(self, rollout_data: Mapping[str, Any], args: Any) -> list[Violation]:
        """O1-O5 on a producer's output, with the layout and ``A`` read from ``args``; starts a new rollout.

        Called directly, a bad specification raises `LayoutSpecError` in
        every mode; only the wrappers turn it into a note.
        """
        par = self._parallel()
        lay = self.adapter.layout(args, par)
        self._run = _Run(rollout_key=_rollout_key(rollout_data))
        self.checked["rollouts"] += 1
        found = checks.check_rollout(
            rollout_data, unit=lay.unit, cp_size=par.cp_size, cp_rank=par.cp_rank, layout=lay.qkv_format,
            scheme=lay.scheme, per_sample=self.per_sample, buckets=self.buckets,
        )
        self._report(found)
        return found

    def wrap_producer(self, fn: F) -> F:
        """Wrap ``get_rollout_data(args, rollout_data_ref, ...)``: O1-O5 on what it returns."""
        signature = inspect.signature(fn)

        def check(result: Any, call: dict[str, Any]) -> None:
            self.check_rollout_data(self.adapter.producer_rollout(result), self.adapter.producer_args(call))

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            call = _bind(signature, args, kwargs)
            if call is not None and not _compiling():
                self._checking(fn.__name__, lambda: check(result, call))
            return result

        return wrapper  # type: ignore[return-value]

    # --- the batch builder --------------------------------------------

    def wrap_batch_builder(self, fn: F) -> F:
        """Wrap ``get_batch(data_iterator, keys, pad_multiplier, qkv_format, ..., allgather_cp)``.

        Before the call (from the iterator's rollout data, so it fails closed
        in raise mode before the builder silently truncates): G1, G2, the
        all-gather part of G3, G6. After it: G3 shapes and G4 counts of the
        batch, and G5 against replay tensors already registered for this
        micro-batch. With buckets (BSHD), ``P`` is read from the batch, so
        G2, G3 and G6 run after the call.
        """
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _bind(signature, args, kwargs)
            if call is None or _compiling():
                return fn(*args, **kwargs)
            state = self._checking(fn.__name__, lambda: self._before_batch(fn.__name__, call))
            batch = fn(*args, **kwargs)
            if state is not None:
                self._checking(fn.__name__, lambda: self._after_batch(fn.__name__, batch, state))
            return batch

        return wrapper  # type: ignore[return-value]

    def _before_batch(self, where: str, call: dict[str, Any]) -> _BatchCallState:
        view = self.adapter.batch_call(call)
        rollout = self.adapter.rollout_of(view.iterator)
        run = self._run_for(rollout)
        k = self.adapter.next_micro_batch(view.iterator)
        if k is None:
            k = run.calls
        run.calls += 1
        par = self._parallel()
        mb = self._micro_batch(rollout, view.iterator, k, view.qkv_format)
        prechecked = mb.totals is not None and not self._bucketed(view.qkv_format)
        if prechecked:
            self._report(self._check_micro_batch(mb, where, par.cp_size, view.qkv_format, view.scheme))
        return _BatchCallState(run=run, view=view, micro_batch=mb, par=par, prechecked=prechecked)

    def _after_batch(self, where: str, batch: Any, state: _BatchCallState) -> None:
        if not isinstance(batch, Mapping):
            return
        view, par, mb = state.view, state.par, state.micro_batch
        bshd = view.qkv_format == "bshd"
        if mb.totals is None:  # no rollout view: take the batch's own lists
            mb = _MicroBatch(
                k=mb.k, samples=mb.samples, lens=batch.get("max_seq_lens") if bshd else None,
                totals=batch.get("total_lengths"), responses=batch.get("response_lengths"),
            )
            if mb.totals is None:
                return
        found: list[Violation] = []
        padded: int | None = None
        if self._bucketed(view.qkv_format):
            local = self.adapter.batch_local_length(batch)
            if local is not None:
                buckets = self.buckets or ()
                padded = geometry.padded_for_local_length(local, par.cp_size, view.scheme, candidates=buckets)
                found += self._check_micro_batch(mb, where, par.cp_size, view.qkv_format, view.scheme, padded=padded)
        else:
            if not state.prechecked:
                found += self._check_micro_batch(mb, where, par.cp_size, view.qkv_format, view.scheme)
            padded = self.adapter.batch_padded(batch, mb.lens) if bshd else None
        current = mb.current or []
        if not bshd or padded is not None:
            found += checks.check_batch_layout(
                batch, micro_batch=mb.k, samples=mb.samples, total_lengths=current, response_lengths=mb.responses,
                padded=padded, cp_size=par.cp_size, cp_rank=par.cp_rank, qkv_format=view.qkv_format,
                scheme=view.scheme, stream_multiple=par.tp_size * view.pad_multiplier, where=where,
            )
        record = _BatchRecord(
            k=mb.k, samples=mb.samples, qkv_format=view.qkv_format, scheme=view.scheme, padded=padded,
            rows=self.adapter.batch_rows(batch), totals=list(current), responses=list(mb.responses or []),
        )
        run = state.run
        run.batches[mb.k] = record
        run.current = record
        self.checked["micro-batches"] += 1
        for replay in run.pending.pop(mb.k, []):  # G5: replay tensors registered before this batch
            found += self._g5(replay, record)
        self._report(found)

    # --- the replay filler --------------------------------------------

    def wrap_replay_filler(self, fn: F) -> F:
        """Wrap ``fill_replay_data(*, ..., register_replay_list_func, ...)``.

        The register function it is given is wrapped so that each micro-batch's
        replay tensor is checked when registered: G1 and G2 (it pads like the
        batch builder), and G5 against the batch builder's micro-batch ``k``
        (now, or when the builder gets there).
        """
        signature = inspect.signature(fn)

        def prepare(call: dict[str, Any]) -> tuple[str, Callable[..., Any]] | None:
            view = self.adapter.replay_call(call)
            register = call.get(view.register_name)
            if not callable(register):
                return None
            par = self._parallel()  # one rank's view for the whole call
            lay = self.adapter.layout(view.args, par)
            return view.register_name, self._checked_register(register, view, par, lay, fn.__name__)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _bind(signature, args, kwargs)
            if call is None or _compiling():
                return fn(*args, **kwargs)
            swap = self._checking(fn.__name__, lambda: prepare(call))
            if swap is None:
                return fn(*args, **kwargs)
            name, checked = swap
            return fn(*args, **{**kwargs, name: checked})

        return wrapper  # type: ignore[return-value]

    def _checked_register(
        self, register: Callable[..., Any], view: ReplayCall, par: Parallel, lay: TrainerLayout, where: str
    ) -> Callable[..., Any]:
        sequence_parallel = lay.sequence_parallel and view.sp_region

        def check(replay_data: Any, k: int) -> None:
            run = self._run_for(view.rollout_data)
            mb = self._micro_batch(view.rollout_data, view.iterator, k, lay.qkv_format)
            found: list[Violation] = []
            if not self._bucketed(lay.qkv_format):  # G1, G2: the filler pads micro-batch k like the builder does
                found += self._check_micro_batch(mb, where, par.cp_size, lay.qkv_format, lay.scheme)
            self.checked["replay tensors"] += 1
            with metadata_only():
                rows = count(replay_data)
            record = _ReplayRecord(
                k=k, key=view.data_key, samples=mb.samples,
                # with buckets the filler's P is the batch's bucket: compared through the rows (G5)
                padded=mb.lens[0] if mb.lens and not self._bucketed(lay.qkv_format) else None,
                rows=rows, tp_size=par.tp_size, sequence_parallel=sequence_parallel, where=where,
            )
            batch = run.batches.get(k)
            if batch is not None:
                found += self._g5(record, batch)
            else:
                run.pending.setdefault(k, []).append(record)
            self._report(found)

        @functools.wraps(register)
        def checked(replay_list: Any, replay_data: Any, micro_batch_index: int, *rest: Any, **more: Any) -> Any:
            self._checking(where, lambda: check(replay_data, micro_batch_index))
            return register(replay_list, replay_data, micro_batch_index, *rest, **more)

        return checked

    def _g5(self, replay: _ReplayRecord, batch: _BatchRecord) -> list[Violation]:
        if batch.rows is None or replay.rows is None:
            return []
        return checks.check_replay(
            replay.rows, micro_batch=batch.k, samples=replay.samples, batch_rows=batch.rows, padded=replay.padded,
            batch_padded=batch.padded, batch_samples=batch.samples, tp_size=replay.tp_size,
            sequence_parallel=replay.sequence_parallel, field=replay.key, where=replay.where,
        )

    # --- the response-offset helper -------------------------------------

    def wrap_offset_helper(self, fn: F) -> F:
        """Wrap a response-offset helper (``get_logits_and_tokens_offset_with_cp`` and kin): G4.

        The logit ranges it returns must be the ones the current micro-batch's
        layout gives (its ``qkv_format``, ``P`` and CP scheme, as the batch
        builder laid the tokens out). Called outside a micro-batch (e.g. by
        the producer), it is not checked.
        """
        signature = inspect.signature(fn)

        def check(result: Any, call: dict[str, Any], batch: _BatchRecord) -> None:
            info = self.adapter.offset_call(call)
            total, response = info["total_length"], info["response_length"]
            if not isinstance(total, int) or not isinstance(response, int):
                return
            sample = batch.sample_for_offsets(total, response)
            self.checked["offset calls"] += 1
            self._report(checks.check_response_offsets(
                self.adapter.offset_logit_ranges(result), total_length=total, response_length=response,
                cp_size=info["cp_size"], cp_rank=info["cp_rank"], qkv_format=batch.qkv_format,
                padded=batch.padded, scheme=batch.scheme, micro_batch=batch.k, sample=sample,
                where=fn.__name__, called_with=info["called_with"],
            ))

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            batch = self._run.current
            call = _bind(signature, args, kwargs)
            if batch is not None and call is not None and not _compiling():
                self._checking(fn.__name__, lambda: check(result, call, batch))
            return result

        return wrapper  # type: ignore[return-value]


def check_rollout_data(
    rollout_data: Mapping[str, Any],
    args: Any,
    *,
    parallel_state: Callable[[], Any] | None = None,
    mode: str = "raise",
    per_sample: bool = True,
) -> list[Violation]:
    """One-off O1-O5 on a producer's ``rollout_data``, the layout and ``A`` read from ``args``.

    Applies ``mode`` (raise, warn or record) and returns the violations.
    """
    checker = LayoutChecker(mode, parallel_state=parallel_state, per_sample=per_sample)
    return checker.check_rollout_data(rollout_data, args)
