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
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from layoutcheck.errors import Violation
from layoutcheck.runtime import checks
from layoutcheck.runtime.adapters import BatchCall, MilesAdapter, Parallel, ReplayCall, TrainerLayout
from layoutcheck.runtime.common import bucket_tuple
from layoutcheck.runtime.meta import count, metadata_only
from layoutcheck.runtime.reporting import Recorder, check_mode, report

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
    current: _BatchRecord | None = None
    calls: int = 0


def _rollout_key(rollout_data: Mapping[str, Any]) -> tuple[int, ...]:
    # Identity of a rollout without keeping it alive.
    tokens = rollout_data.get("tokens")
    return (id(rollout_data), id(tokens), len(tokens) if tokens is not None else -1)


class LayoutChecker:
    """Runs the layout checks around a producer, a batch builder and a replay filler.

    ``mode``: ``"raise"`` (a `LayoutError` with every violation of the call),
    ``"warn"`` (a `LayoutWarning`) or ``"record"``; every mode records, so
    `violations` and `summary` always tell what was found. Each distinct
    violation is reported once per rollout. ``parallel_state``: a callable
    like ``get_parallel_state`` (``.tp.size``, ``.cp.size``, ``.cp.rank``);
    ``None`` means one rank. ``buckets``: static shape buckets (G6; then O3,
    the per-sample tightness check, is off unless ``per_sample=True``).
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

    def summary(self) -> str:
        """One line: how many violations, per invariant, and where; then what was checked."""
        done = ", ".join(f"{n} {what}" for what, n in self.checked.items())
        return self.recorder.summary() + (f" (checked {done})" if done else " (nothing checked yet)")

    def reset(self) -> None:
        """Forget recorded violations, counts and per-rollout state."""
        self.recorder.clear()
        self.checked.clear()
        self._run = _Run()

    # --- shared plumbing ----------------------------------------------

    def _parallel(self) -> Parallel:
        return self.adapter.parallel(self.parallel_state)

    def _report(self, violations: list[Violation]) -> None:
        fresh = []
        for v in violations:
            key = (v.invariant, v.field, v.sample, v.micro_batch, repr(v.actual), repr(v.expected))
            if key not in self._run.seen:
                self._run.seen.add(key)
                fresh.append(v)
        report(fresh, self.mode, recorder=self.recorder, stacklevel=4)

    def _run_for(self, rollout_data: Mapping[str, Any]) -> _Run:
        # A new rollout dict starts a new run; without one (a bare iterator) keep the current run.
        if not rollout_data:
            return self._run
        key = _rollout_key(rollout_data)
        if self._run.rollout_key != key:
            self._run = _Run(rollout_key=key)
        return self._run

    # --- the owner ----------------------------------------------------

    def check_rollout_data(self, rollout_data: Mapping[str, Any], args: Any) -> list[Violation]:
        """O1-O5 on a producer's output, with the layout and ``A`` read from ``args``; starts a new rollout."""
        par = self._parallel()
        lay = self.adapter.layout(args, par)
        self._run = _Run(rollout_key=_rollout_key(rollout_data))
        self.checked["rollouts"] += 1
        found = checks.check_rollout(
            rollout_data, unit=lay.unit, cp_size=par.cp_size, cp_rank=par.cp_rank, layout=lay.qkv_format,
            scheme=lay.scheme, per_sample=self.per_sample,
        )
        self._report(found)
        return found

    def wrap_producer(self, fn: F) -> F:
        """Wrap ``get_rollout_data(args, rollout_data_ref, ...)``: O1-O5 on what it returns."""
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            call = _bind(signature, args, kwargs)
            if call is not None and not _compiling():
                self.check_rollout_data(self.adapter.producer_rollout(result), self.adapter.producer_args(call))
            return result

        return wrapper  # type: ignore[return-value]

    # --- the batch builder --------------------------------------------

    def wrap_batch_builder(self, fn: F) -> F:
        """Wrap ``get_batch(data_iterator, keys, pad_multiplier, qkv_format, ..., allgather_cp)``.

        Before the call (from the iterator's rollout data, so it fails closed
        in raise mode before the builder silently truncates): G1, G2, the
        all-gather part of G3, G6. After it: G3 shapes and G4 counts of the
        batch, and G5 against replay tensors already registered for this
        micro-batch.
        """
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _bind(signature, args, kwargs)
            if call is None or _compiling():
                return fn(*args, **kwargs)
            view = self.adapter.batch_call(call)
            rollout = self.adapter.rollout_of(view.iterator)
            run = self._run_for(rollout)
            k = self.adapter.next_micro_batch(view.iterator)
            if k is None:
                k = run.calls
            run.calls += 1
            samples = self.adapter.micro_batch_samples(view.iterator, k)
            par = self._parallel()
            lens = totals = tokens = responses = None
            if samples is not None and rollout:
                lens = self.adapter.per_sample(rollout, "max_seq_lens", samples) if view.qkv_format == "bshd" else None
                totals = self.adapter.per_sample(rollout, "total_lengths", samples)
                responses = self.adapter.per_sample(rollout, "response_lengths", samples)
                tokens = self.adapter.token_lengths(rollout, samples)
                if totals is not None:
                    self._report(checks.check_micro_batch(
                        micro_batch=k, samples=samples, max_seq_lens=lens, total_lengths=totals,
                        token_lengths=tokens, cp_size=par.cp_size, qkv_format=view.qkv_format,
                        scheme=view.scheme, buckets=self.buckets, where=fn.__name__,
                    ))

            batch = fn(*args, **kwargs)
            self._after_batch(fn.__name__, batch, run, k, samples, view, par, lens, tokens or totals, responses)
            return batch

        return wrapper  # type: ignore[return-value]

    def _after_batch(
        self, where: str, batch: Any, run: _Run, k: int, samples: list[int] | None, view: BatchCall, par: Parallel,
        lens: list[int] | None, totals: list[int] | None, responses: list[int] | None,
    ) -> None:
        if not isinstance(batch, Mapping):
            return
        if totals is None:  # no rollout view: take the batch's own lists
            totals, responses = batch.get("total_lengths"), batch.get("response_lengths")
            lens = batch.get("max_seq_lens") if view.qkv_format == "bshd" else None
            if totals is None:
                return
        padded = self.adapter.batch_padded(batch, lens) if view.qkv_format == "bshd" else None
        found: list[Violation] = []
        if view.qkv_format != "bshd" or padded is not None:
            found += checks.check_batch_layout(
                batch, micro_batch=k, samples=samples, total_lengths=totals, response_lengths=responses,
                padded=padded, cp_size=par.cp_size, cp_rank=par.cp_rank, qkv_format=view.qkv_format,
                scheme=view.scheme, stream_multiple=par.tp_size * view.pad_multiplier, where=where,
            )
        record = _BatchRecord(
            k=k, samples=samples, qkv_format=view.qkv_format, scheme=view.scheme, padded=padded,
            rows=self.adapter.batch_rows(batch), totals=list(totals), responses=list(responses or []),
        )
        run.batches[k] = record
        run.current = record
        self.checked["micro-batches"] += 1
        for replay in run.pending.pop(k, []):  # G5: replay tensors registered before this batch
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

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _bind(signature, args, kwargs)
            if call is None or _compiling():
                return fn(*args, **kwargs)
            view = self.adapter.replay_call(call)
            register = call.get(view.register_name)
            if not callable(register):
                return fn(*args, **kwargs)
            kwargs = dict(kwargs)
            par = self._parallel()  # one rank's view for the whole call
            checked = self._checked_register(register, view, par, self.adapter.layout(view.args, par), fn.__name__)
            kwargs[view.register_name] = checked
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def _checked_register(
        self, register: Callable[..., Any], view: ReplayCall, par: Parallel, lay: TrainerLayout, where: str
    ) -> Callable[..., Any]:
        @functools.wraps(register)
        def checked(replay_list: Any, replay_data: Any, micro_batch_index: int, *rest: Any, **more: Any) -> Any:
            run = self._run_for(view.rollout_data)
            k = micro_batch_index
            samples = self.adapter.micro_batch_samples(view.iterator, k)
            found: list[Violation] = []
            padded = None
            if samples is not None:
                totals = self.adapter.per_sample(view.rollout_data, "total_lengths", samples)
                lens = None
                if lay.qkv_format == "bshd":
                    lens = self.adapter.per_sample(view.rollout_data, "max_seq_lens", samples)
                padded = lens[0] if lens else None
                if totals is not None:  # G1, G2: the filler pads micro-batch k like the builder does
                    found += checks.check_micro_batch(
                        micro_batch=k, samples=samples, max_seq_lens=lens, total_lengths=totals,
                        token_lengths=self.adapter.token_lengths(view.rollout_data, samples), cp_size=par.cp_size,
                        qkv_format=lay.qkv_format, scheme=lay.scheme, where=where,
                    )
            self.checked["replay tensors"] += 1
            with metadata_only():
                rows = count(replay_data)
            record = _ReplayRecord(
                k=k, key=view.data_key, samples=samples, padded=padded, rows=rows,
                tp_size=par.tp_size, sequence_parallel=view.sequence_parallel, where=where,
            )
            batch = run.batches.get(k)
            if batch is not None:
                found += self._g5(record, batch)
            else:
                run.pending.setdefault(k, []).append(record)
            self._report(found)
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

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            batch = self._run.current
            call = _bind(signature, args, kwargs)
            if batch is None or call is None or _compiling():
                return result
            info = self.adapter.offset_call(call)
            total, response = info["total_length"], info["response_length"]
            if not isinstance(total, int) or not isinstance(response, int):
                return result
            sample = batch.sample_for_offsets(total, response)
            self.checked["offset calls"] += 1
            self._report(checks.check_response_offsets(
                self.adapter.offset_logit_ranges(result), total_length=total, response_length=response,
                cp_size=info["cp_size"], cp_rank=info["cp_rank"], qkv_format=batch.qkv_format,
                padded=batch.padded, scheme=batch.scheme, micro_batch=batch.k, sample=sample,
                where=fn.__name__, called_with=info["called_with"],
            ))
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
