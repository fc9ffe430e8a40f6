"""Cross-rank agreement over torch.distributed (X1): every CP rank of a micro-batch lays it out alike.

No single process can see this: CP rank 1 may slice micro-batch 3 with
``P=2048`` while rank 0 uses 1536, and each rank's own checks pass. A
`CrossRankChecker` exchanges a few int64 values per micro-batch among the
ranks of one CP group and reports every disagreement as an ``X1``
`Violation` on every rank, naming the rank that differs
(`layoutcheck.runtime.crossrank.agreement` builds and compares the values).

How it stays cheap and never hangs (docs/development.md#what-the-runtime-is-built-on):

* the values travel on a **gloo side group** created for the CP group
  (`torch.distributed.new_group(backend="gloo")`), never on the trainer's
  NCCL groups: nothing touches a GPU, and the exchange cannot interleave
  with the trainer's own collectives; the tensors are CPU tensors over
  Python-owned buffers, read back without a tensor op;
* each exchange first writes one small key per rank into the job's
  rendezvous store (``layoutcheck/x1/<group>/<cp rank>`` = the exchange
  number, overwritten each time, so the store holds one key per rank); a
  store ``set`` costs a few microseconds, since the client does not wait for
  a reply;
* the gloo group carries the timeout (``timeout`` seconds, default
  `DEFAULT_TIMEOUT`). When a peer stops calling, gloo times out, and every
  live rank reads the peers' keys, waits until the deadline for the slow
  ones, and names the ranks that never reached this exchange and the last
  one each did reach;
* when a peer is **gone** (its process died), gloo fails at once with a
  lost connection. The ranks that see it say so without waiting out the
  timeout: a peer whose process is known to have exited (same host and pid
  namespace: its pid is gone) is named at once, and one elsewhere is given
  a short settling time (`SETTLE`) to reach the exchange. A rank whose
  transport words the failure otherwise (a timeout, a peer closing its
  group) still names a peer whose process has exited as gone, without
  waiting for it. They then close their side group, so that the ranks
  still blocked in the exchange (gloo connects each rank to a few others
  only) see a lost connection too, instead of waiting for the timeout.

A deferred checker (``defer=True``: what the hooks make) queues its checks and
exchanges them together at `CrossRankChecker.end_step`, the step boundary
(see `layoutcheck.runtime.checker.state.CheckerState.end_step`): one
all-gather of two int64 values per rank when the ranks agree, so a step
costs one collective on the side group whatever its number of checks. It
announces its pid and connects its side group when it is made (every rank's
first check), so that a rank that dies before the step's end is still seen
as gone at once.

A failed exchange ends the cross-rank checks of the process (the exchange
sequence is broken for good). In raise mode, and by default, it raises
`CrossRankTimeout`; with ``mode`` ``"warn"`` or ``"record"`` (or an
``on_failure`` that says so) it is recorded as a note, warned about in warn
mode, and the step goes on: the trainer's own collectives will meet the
missing rank in their own way.

The CP group is a parameter: explicit global ``ranks``; or a parallel state
(``get_parallel_state``-like: its ``.cp.group`` process group gives the
ranks, else ``.cp.size`` and ``.tp.size`` with the world size in Megatron's
rank order); or ``cp_size`` (and ``tp_size``). torch is imported only when a
checker is made: `import layoutcheck.runtime.crossrank.distributed` stays torch-free.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from layoutcheck.errors import LayoutcheckError, LayoutSpecError, Violation, metadata_only
from layoutcheck.runtime.crossrank.agreement import (
    HEADER,
    INVARIANT,
    STEP,
    Header,
    RankLayout,
    compare,
    count_mismatch,
    decode_lists,
    digest_headers,
    name_ranks,
    needs_lists,
)
from layoutcheck.runtime.contract.common import size
from layoutcheck.runtime.reporting.modes import Recorder, check_mode, report

__all__ = [
    "DEFAULT_TIMEOUT",
    "CrossRankChecker",
    "CrossRankTimeout",
    "cp_group_ranks",
    "distributed_ready",
]

DEFAULT_TIMEOUT = 30.0
"""Seconds a rank waits at one exchange for the rest of its CP group."""
SETTLE = 2.0
"""Seconds a rank that lost a connection waits for peers on other hosts to reach the exchange (at most the timeout)."""

_GONE = ("connection closed", "connection reset", "broken pipe", "connection refused", "end of file")
"""What gloo's errors say when a peer's connection is lost (its process is gone), as opposed to a timeout."""

_POLL = 0.02  # seconds between reads of the peers' keys while waiting for the deadline
_instances: Counter[tuple[int, ...]] = Counter()  # checkers made per CP group in this process


class CrossRankTimeout(LayoutcheckError, TimeoutError):
    """A cross-rank exchange did not complete: a CP rank died, raised, or stopped calling.

    ``missing`` holds the CP ranks that never reached the exchange (empty
    when this rank was the late one, or the store was unreachable); ``gone``
    those of them whose process is known to have exited.
    """

    def __init__(self, message: str, *, missing: Sequence[int] = (), gave_up: Sequence[int] = (),
                 micro_batch: int | None = None, gone: Sequence[int] = ()):
        self.missing = tuple(missing)
        self.gave_up = tuple(gave_up)
        """CP ranks that reached the exchange and gave up on it after their own timeout (this rank was late)."""
        self.micro_batch = micro_batch
        self.gone = tuple(gone)
        """Missing CP ranks whose process is known to have exited (the transport lost their connection)."""
        super().__init__(message)


def distributed_ready() -> bool:
    """Whether torch.distributed is initialised in this process (never imports torch to find out).

    ``torch.distributed.is_initialized()``'s answer. A hooked call asks on every call, and the public function
    is four Python frames deep (`is_initialized`, `GroupMember.WORLD`, `_World.default_pg`): the default group
    is read where they read it, and a torch that keeps it elsewhere is asked through the public function.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available():
        return False
    world = getattr(sys.modules.get("torch.distributed.distributed_c10d"), "_world", None)
    default = getattr(world, "_default_pg", _UNKNOWN)
    return dist.is_initialized() if default is _UNKNOWN else default is not None


_UNKNOWN = object()


def cp_group_ranks(rank: int, world_size: int, cp_size: int, tp_size: int = 1) -> tuple[int, ...]:
    """The global ranks of ``rank``'s CP group in Megatron's default order (TP fastest, then CP).

    Global rank ``g = tp_r + tp * (cp_r + cp * rest)``, so the group is
    ``rank``'s TP coordinate and block with every CP coordinate. Raises
    `LayoutSpecError` when ``tp * cp`` does not divide the world.
    """
    world = size("world_size", world_size, minimum=1)
    cp = size("cp_size", cp_size, minimum=1)
    tp = size("tp_size", tp_size, minimum=1)
    g = size("rank", rank, minimum=0)
    if g >= world:
        raise LayoutSpecError(f"`rank` must be below `world_size`: got rank={g}, world_size={world}")
    if world % (tp * cp):
        raise LayoutSpecError(f"tp_size x cp_size = {tp} x {cp} does not divide the world size {world}")
    tp_r, rest = g % tp, g // (tp * cp)
    return tuple(tp_r + tp * (c + cp * rest) for c in range(cp))


def _dist() -> Any:
    if not distributed_ready():
        raise LayoutSpecError(
            "torch.distributed is not initialised in this process: cross-rank checks need "
            "`torch.distributed.init_process_group(...)` first (or run one process without them)"
        )
    return sys.modules["torch.distributed"]


def _group_ranks(dist: Any, state: Any, rank: int, world: int) -> tuple[int, ...]:
    """The CP group from a parallel state: its process group's ranks, else derived from the sizes."""
    cp = getattr(state, "cp", None)
    if cp is None:
        raise LayoutSpecError(f"the parallel state {type(state).__name__} has no `cp` group")
    for name in ("gloo_group", "group"):
        group = getattr(cp, name, None)
        if group is not None:
            return tuple(dist.get_process_group_ranks(group))
    tp = getattr(getattr(state, "tp", None), "size", 1)
    ranks = cp_group_ranks(rank, world, getattr(cp, "size", 1), tp)
    cp_rank = getattr(cp, "rank", None)
    if cp_rank is not None and ranks.index(rank) != cp_rank:
        raise LayoutSpecError(
            f"the parallel state says cp rank {cp_rank}, but global rank {rank} is cp rank "
            f"{ranks.index(rank)} of {list(ranks)} in Megatron's order (tp={tp}, cp={len(ranks)}); "
            "pass the CP group's global `ranks` explicitly"
        )
    return ranks


class CrossRankChecker:
    """Checks that every CP rank of a micro-batch agrees on its layout (X1), over a gloo side group.

    Make one per process, after ``init_process_group``, with the same
    arguments on every rank; then call `check_batch` from the batch builder
    and `check_replay` from the replay filler for each micro-batch, in the
    same order on every rank (every rank of the world calls them, each with
    its own CP group). Each returns the X1 violations (the same on every rank
    of the group) after applying ``mode`` (``"raise"``, ``"warn"``,
    ``"record"``; ``None``: only return them, the caller reports).

    ``every``: exchange on every n-th call of each check only (the others
    return at once).

    ``defer``: queue the checks and exchange them together at `end_step`
    (what the hooks do: one collective per training step when the ranks
    agree, instead of one per call). Each check then returns no violations;
    `end_step` returns them all, naming each check's micro-batch, call and
    ranks as an immediate exchange would. A bad value still raises at the
    check. A deferred checker connects its side group when it is made, so
    every rank of the CP group makes it at the same point (the hooks make
    it at their first check). ``step_limit``: a deferred checker also exchanges when that
    many checks are queued (the same call on every rank), so that a run
    without step boundaries pays one collective per ``step_limit`` checks
    and holds no more than that. ``timeout``: seconds to wait for the group at one
    exchange before giving up (sooner when a peer is gone). ``store``: where
    the per-rank progress keys go (default: the default process group's
    store).

    A failed exchange (`CrossRankTimeout`) raises in ``"raise"`` mode (and
    with ``mode=None``); in ``"warn"`` and ``"record"`` mode it becomes a
    note in ``recorder`` (and a warning in warn mode), the checker stops
    exchanging, and the call returns no violations. ``on_failure(error)``,
    when given, decides instead: true to go on (it has recorded the error),
    false to raise.
    """

    def __init__(
        self,
        ranks: Sequence[int] | None = None,
        *,
        parallel_state: Callable[[], Any] | Any | None = None,
        cp_size: int | None = None,
        tp_size: int = 1,
        every: int = 1,
        timeout: float = DEFAULT_TIMEOUT,
        mode: str | None = "raise",
        recorder: Recorder | None = None,
        store: Any | None = None,
        on_failure: Callable[[CrossRankTimeout], bool] | None = None,
        defer: bool = False,
        step_limit: int = 1024,
    ) -> None:
        dist = _dist()
        self.rank: int = dist.get_rank()
        world: int = dist.get_world_size()
        if ranks is not None:
            group_ranks = tuple(size(f"ranks[{i}]", r, minimum=0) for i, r in enumerate(ranks))
        elif parallel_state is not None:
            state = parallel_state() if callable(parallel_state) else parallel_state
            group_ranks = _group_ranks(dist, state, self.rank, world)
        elif cp_size is not None:
            group_ranks = cp_group_ranks(self.rank, world, cp_size, tp_size)
        else:
            raise LayoutSpecError("a CrossRankChecker needs the CP group: `ranks`, `parallel_state` or `cp_size`")
        if len(set(group_ranks)) != len(group_ranks) or self.rank not in group_ranks or max(group_ranks) >= world:
            raise LayoutSpecError(
                f"`ranks` {list(group_ranks)} must be distinct global ranks below the world size {world} "
                f"and include this process's rank {self.rank}"
            )
        self.ranks: tuple[int, ...] = group_ranks
        """The CP group's global ranks, in CP-rank order."""
        self.cp_rank: int = group_ranks.index(self.rank)
        self.cp_size: int = len(group_ranks)
        self.every = size("every", every, minimum=1)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise LayoutSpecError(f"`timeout` must be a positive number of seconds, got {timeout!r}")
        self.timeout = float(timeout)
        self.mode = None if mode is None else check_mode(mode)
        self.recorder = recorder if recorder is not None else Recorder()
        self.exchanges = 0
        """Exchanges completed so far (a deferred checker's: steps exchanged)."""
        self.collectives = 0
        """All-gathers issued on the side group (a clean deferred step: one)."""
        self.defer = bool(defer)
        self.step_limit = size("step_limit", step_limit, minimum=1)
        self._pending: list[tuple[RankLayout, str, str | None]] = []
        self._calls: Counter[str] = Counter()
        self.on_failure = on_failure
        self._group: Any = None
        self._failed: CrossRankTimeout | None = None
        self._stopped = False
        self._announced = False  # this rank's pid is in the store (for peers that lose its connection)
        if self.cp_size > 1:
            _instances[group_ranks] += 1
            tag = "-".join(map(str, group_ranks))
            base = store if store is not None else dist.distributed_c10d._get_default_store()
            self._store = dist.PrefixStore(f"layoutcheck/x1/{tag}/{_instances[group_ranks]}/", base)
            if self.defer:
                # A deferred check waits for the step's end: a rank that dies before it must already be known
                # (its pid) and connected (the side group, made now, on every rank's first check), so that the
                # survivors' exchange sees a lost connection at once rather than a rendezvous that times out.
                self._announce()
                try:
                    self._side_group()
                except Exception as err:  # a peer gone, or not there, while the group formed
                    raise self._not_started(err) from err

    # --- the checks ---------------------------------------------------

    def check_batch(
        self,
        micro_batch: int,
        *,
        padded: int | None,
        samples: Sequence[int] | None = None,
        lengths: Sequence[int] | None = None,
        scheme: str | None = None,
        qkv_format: str | None = None,
        where: str = "get_batch",
    ) -> list[Violation]:
        """The batch builder's micro-batch ``micro_batch``: ``P``, sample ids, lengths, scheme and layout.

        ``padded`` is ``P`` under BSHD and the packed stream length under THD;
        values a rank does not know are ``None`` and are not compared.
        """
        return self._check("batch", where, None, micro_batch, padded, scheme=scheme, layout=qkv_format,
                           samples=samples, lengths=lengths)

    def check_replay(
        self,
        micro_batch: int,
        *,
        padded: int | None,
        samples: Sequence[int] | None = None,
        data_key: str = "rollout_routed_experts",
        where: str = "fill_replay_data",
    ) -> list[Violation]:
        """The replay filler's micro-batch ``micro_batch``: the ``P`` it laid ``data_key`` out with, and its samples."""
        return self._check("replay", where, data_key, micro_batch, padded, samples=samples)

    def check_boundary(
        self,
        call: int,
        *,
        count: int,
        padded: int | None,
        lengths: Sequence[int] | None = None,
        scheme: str | None = None,
        where: str = "boundary",
        order: Sequence[int] | None = None,
    ) -> list[Violation]:
        """A boundary contract's call ``call``: its sample count, the samples' true lengths, the padded total, the scheme.

        ``padded`` is the sum of the samples' ``P`` (or the packed stream's
        length); ``order``: a micro-batch schedule's sample indices, in
        order (default ``0..count-1``). Every CP rank of the call must see
        the same schedule.
        """
        return self._check("boundary", where, "padded total", call, padded, scheme=scheme,
                           samples=list(order) if order is not None else list(range(count)), lengths=lengths)

    @property
    def pending(self) -> int:
        """Checks queued for the next `end_step` (deferred mode)."""
        return len(self._pending)

    def end_step(self) -> list[Violation]:
        """Exchange the checks queued since the last call (deferred mode); the violations, after ``mode``.

        Every CP rank must call it at the same point of its schedule (the
        hooks call it at the step boundary: see
        `layoutcheck.runtime.checker.state.CheckerState.end_step`). One
        all-gather of `STEP` values when the ranks made the same checks with
        the same values; the headers (and the lists that differ) follow only
        when they did not. Nothing queued: nothing exchanged.
        """
        entries, self._pending = self._pending, []
        if not entries or self.cp_size == 1 or self._stopped:
            return []
        self._raise_if_failed()
        return self._run(entries)

    def close(self) -> None:
        """Destroy the side group and drop it (after a failed exchange it is left to the process's exit).

        A trainer's own ``destroy_process_group()`` destroys every group, this
        one included: closing afterwards only drops the reference.
        """
        group, self._group = self._group, None
        if group is None or self._failed is not None:
            return
        try:
            _dist().destroy_process_group(group)
        except ValueError:  # torch no longer holds it: the trainer destroyed every group first
            pass

    # --- one exchange -------------------------------------------------

    def _check(self, role: str, where: str, data_key: str | None, micro_batch: int, padded: int | None,
               **values: Any) -> list[Violation]:
        if self.cp_size == 1 or self._stopped:
            return []
        self._raise_if_failed()
        call = self._calls[role] + 1
        mine = RankLayout.of(role, call, micro_batch, padded, **values)  # a bad value raises before counting
        self._calls[role] = call
        if (call - 1) % self.every:
            return []
        if self.defer:
            self._pending.append((mine, where, data_key))
            return self.end_step() if len(self._pending) >= self.step_limit else []
        return self._run([(mine, where, data_key)])

    def _raise_if_failed(self) -> None:
        if self._failed is not None:
            raise CrossRankTimeout(f"an earlier cross-rank exchange failed:\n{self._failed}",
                                   missing=self._failed.missing, gave_up=self._failed.gave_up,
                                   micro_batch=self._failed.micro_batch)

    def _run(self, entries: list[tuple[RankLayout, str, str | None]]) -> list[Violation]:
        """Exchange ``entries`` (one check, or a step's), stop on a failure or when the ranks are out of step."""
        try:
            found, stopped_at = self._exchange(entries)
        except CrossRankTimeout as err:
            if not self._goes_on(err):
                raise
            self._stopped = True  # the sequence is broken for good: no later exchange could pair up
            return []
        if stopped_at is not None:
            # Later exchanges would pair unrelated checks; every rank saw the same values and stops too.
            self._stopped = True
            self.recorder.add_note(f"layoutcheck stopped cross-rank checks at `{stopped_at[1]}` micro-batch "
                                   f"{stopped_at[0].micro_batch}: the CP ranks are out of step")
        if self.mode is not None:
            report(found, self.mode, recorder=self.recorder)
        return found

    def _goes_on(self, err: CrossRankTimeout) -> bool:
        """Whether a failed exchange lets the step go on (recorded) rather than raise (see the class docs)."""
        if self.on_failure is not None:
            return bool(self.on_failure(err))
        if self.mode not in ("warn", "record"):
            return False
        text = f"layoutcheck stopped the cross-rank checks (X1): {err}"
        self.recorder.add_note(text)
        if self.mode == "warn":
            from layoutcheck.runtime.reporting.modes import LayoutWarning, user_stacklevel

            warnings.warn(text, LayoutWarning, stacklevel=user_stacklevel())
        return True

    def _exchange(self, entries: list[tuple[RankLayout, str, str | None]]) -> tuple[
            list[Violation], tuple[RankLayout, str, str | None] | None]:
        """One exchange of ``entries``; the violations, and the entry where the ranks went out of step (else ``None``)."""
        seq = self.exchanges + 1
        mine, where, _ = entries[-1]  # what the progress key and a failure name: the last check of the exchange
        deadline = time.monotonic() + self.timeout
        try:
            self._announce()
            self._store.set(str(self.cp_rank), f"{seq} at {mine.micro_batch} {where}")
            if self.defer:
                compared, counts = self._gather_step([e[0] for e in entries])
            else:
                headers = [Header.decode(row) for row in self._gather(mine.header(), HEADER)]
                lists = None
                longest = needs_lists(headers)
                if longest is not None:
                    rows = self._gather(mine.lists(*longest), sum(longest))
                    lists = decode_lists(headers, rows, longest[0])
                compared, counts = [(headers, lists)], None
        except Exception as err:  # noqa: BLE001 - any transport failure ends in one clear error
            # The failed collective's frames hold the side group (a local of `_gather`): cleared, closing the
            # group below really closes its connections, and the peers still blocked in it fail at once.
            traceback.clear_frames(err.__traceback__)
            gone = _connection_lost(err)
            self._failed = self._timeout(seq, mine, where, err, deadline, gone=gone)
            try:  # peers still waiting learn that this rank left, and name it at once
                self._store.set(str(self.cp_rank), f"{seq} gave-up {mine.micro_batch} {where}")
            except Exception:  # noqa: BLE001, S110 - the store may be gone too; the error says so
                pass
            if (gone or self._failed.gone) and self._failed.missing:
                # Every survivor of a dead rank closes its side group alike; a rank that was only late (its
                # peers gave up) keeps it, as they do: a group closed on some ranks only would make the next
                # group over the same ranks disagree on its name.
                self._close_broken_group()
            raise self._failed from None
        self.exchanges = seq
        found: list[Violation] = []
        for entry, (headers, lists) in zip(entries, compared):
            more, in_step = compare(headers, lists, global_ranks=self.ranks, where=entry[1], field=entry[2])
            found += more
            if not in_step:
                return found, entry
        if counts is not None and len(set(counts)) > 1:
            entry = entries[min(len(compared), len(entries) - 1)]
            found.append(count_mismatch(counts, global_ranks=self.ranks, where=entry[1],
                                        micro_batch=entry[0].micro_batch))
            return found, entry
        return found, None

    def _gather_step(self, mine: list[RankLayout]) -> tuple[
            list[tuple[list[Header], Any]], list[int] | None]:
        """A step's checks: ``[(headers per rank, lists or None)]`` for the checks every rank made, and the counts.

        Round one is `STEP` values (how many checks, a digest of their
        headers): when every rank sent the same, the step agreed and nothing
        else is sent (``([], None)``). Otherwise the headers follow, padded
        to the most checks any rank made, then the lists of the checks whose
        sample or length digests differ, in one more round.
        """
        headers_mine = [m.header() for m in mine]
        summary = self._gather([len(mine), digest_headers(headers_mine)], STEP)
        if all(row == summary[0] for row in summary):
            return [], None
        counts = [row[0] for row in summary]
        most = max(counts)
        flat = [v for h in headers_mine for v in h] + [0] * (HEADER * (most - len(mine)))
        rows = self._gather(flat, HEADER * most)
        common = min(counts)
        per_check = [[Header.decode(rows[r][i * HEADER : (i + 1) * HEADER]) for r in range(self.cp_size)]
                     for i in range(common)]
        wanted = [(i, longest) for i, longest in ((i, needs_lists(h)) for i, h in enumerate(per_check))
                  if longest is not None]
        lists: dict[int, Any] = {}
        if wanted:
            payload = [v for i, longest in wanted for v in mine[i].lists(*longest)]
            gathered = self._gather(payload, len(payload))
            start = 0
            for i, (n_samples, n_lengths) in wanted:
                part = [row[start : start + n_samples + n_lengths] for row in gathered]
                lists[i] = decode_lists(per_check[i], part, n_samples)
                start += n_samples + n_lengths
        return [(per_check[i], lists.get(i)) for i in range(common)], counts

    def _announce(self) -> None:
        if not self._announced:  # once: who this rank is, so a peer that loses it can tell whether it died
            self._store.set(f"pid/{self.cp_rank}", f"{_host_identity()} {os.getpid()}")
            self._announced = True

    def _close_broken_group(self) -> None:
        """Close the side group after a lost connection: its peers blocked in the exchange then fail at once too."""
        group, self._group = self._group, None
        if group is None:
            return
        try:
            _dist().destroy_process_group(group)
        except Exception:  # noqa: BLE001, S110 - a group that cannot be destroyed is left to the process's exit
            pass

    def _not_started(self, err: Exception) -> CrossRankTimeout:
        """The error of a side group that did not form: which peers are known gone, and what to do. The
        caller keeps it (never retried: each try would wait out the timeout again, on every hooked call)."""
        gone = [c for c in range(self.cp_size) if c != self.cp_rank and self._exited(c)]
        cause = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
        who = (f"{name_ranks(gone)} {'is' if len(gone) == 1 else 'are'} gone (its process has exited)" if gone
               else "a peer did not join it")
        return CrossRankTimeout(
            f"layoutcheck: the cross-rank check ({INVARIANT}) could not start: its side group did not form "
            f"within {self.timeout:g} s: {who}.\n"
            f"    cp group: global ranks {list(self.ranks)}; this is cp rank {self.cp_rank} (global rank "
            f"{self.rank}); timeout {self.timeout:g} s\n    transport: {cause}\n"
            "    fix: a rank that died, or never reached its first check, is named in its own log: read it first; "
            "if a rank is only slower to start, raise the cross-rank timeout",
            missing=gone, gone=gone,
        )

    def _side_group(self) -> Any:
        if self._group is None:
            # Only the CP group's members take part (use_local_synchronization): CP groups
            # partition the world, so lazy creation on first use cannot deadlock across groups.
            self._group = _dist().new_group(
                list(self.ranks), timeout=timedelta(seconds=self.timeout), backend="gloo",
                use_local_synchronization=True,
            )
        return self._group

    def _gather(self, values: list[int], n: int) -> list[list[int]]:
        """All-gather ``n`` int64 values per rank; rows in CP-rank order, as Python ints."""
        import torch

        group = self._side_group()
        self.collectives += 1
        out = bytearray(8 * n * self.cp_size)
        with metadata_only():  # a tracer's TorchFunctionMode must not see these CPU tensors
            send = torch.frombuffer(bytearray(array("q", values).tobytes()), dtype=torch.int64)
            rows = list(torch.frombuffer(out, dtype=torch.int64).view(self.cp_size, n).unbind(0))
            _dist().all_gather(rows, send, group=group)
        flat = memoryview(out).cast("q").tolist()  # the buffer's bytes, not a tensor read
        by_group_rank = [flat[i * n : (i + 1) * n] for i in range(self.cp_size)]
        order = sorted(self.ranks)  # new_group sorts its ranks: row i is the i-th lowest global rank
        return [by_group_rank[order.index(g)] for g in self.ranks]

    def _timeout(self, seq: int, mine: RankLayout, where: str, err: Exception, deadline: float, *,
                 gone: bool = False) -> CrossRankTimeout:
        """The error every live rank raises: who never reached exchange ``seq``, and what each last reached.

        ``gone``: the transport lost a peer's connection, so the peers are
        waited for only until each is there or known dead (`SETTLE` for a
        peer whose liveness this rank cannot see), not until ``deadline``.
        """
        cause = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
        head = (f"layoutcheck: the cross-rank check ({INVARIANT}) of `{where}`, micro-batch {mine.micro_batch} "
                f"(exchange {seq}), did not complete")
        group = (f"    cp group: global ranks {list(self.ranks)}; this is cp rank {self.cp_rank} "
                 f"(global rank {self.rank}); timeout {self.timeout:g} s")
        dead: list[int] = []
        try:
            if gone:
                deadline = min(deadline, time.monotonic() + SETTLE)
            # A peer whose process has exited is gone however the transport words its failure (a rank that
            # gloo did not connect to the dead one hears of it from a survivor closing its group, or not at all).
            missing, gave_up = self._peers(seq, deadline, dead=dead)
            gone = gone or bool(missing) and set(missing) <= set(dead)
        except Exception as store_err:  # noqa: BLE001 - the store's host may be the rank that died
            return CrossRankTimeout(
                f"{head}: the rendezvous store is unreachable ({type(store_err).__name__}: "
                f"{str(store_err).splitlines()[0] if str(store_err) else ''}), so the rank that hosts it "
                f"(rank 0, or the torchrun agent) is probably gone.\n{group}\n    transport: {cause}\n"
                "    fix: look at the logs of the rank that hosts the store",
                micro_batch=mine.micro_batch,
            )
        also = f" {name_ranks(gave_up)} reached it too and gave up." if gave_up else ""
        if gone and missing:
            detail = "; ".join(
                f"cp rank {c} (global rank {self.ranks[c]}): {'its process has exited; ' if c in dead else ''}{last}"
                for c, last in missing.items())
            exited = [c for c in missing if c in dead]
            verb = "is" if len(missing) == 1 else "are"
            what = (f"the transport lost a connection: {name_ranks(list(missing))} {verb} "
                    f"{'gone' if exited and len(exited) == len(missing) else 'missing'} ({detail}).{also}\n"
                    "    fix: a gone rank died (out of memory, a signal, an error in its own code): read its log "
                    "first")
        elif missing:
            detail = "; ".join(f"cp rank {c} (global rank {self.ranks[c]}): {last}" for c, last in missing.items())
            what = (f"{name_ranks(list(missing))} {'is' if len(missing) == 1 else 'are'} missing ({detail}).{also}\n"
                    "    fix: a missing rank died, raised an error or stopped calling the hooks: read its log "
                    "first; if it is only slower, raise the cross-rank timeout")
        elif gave_up:
            what = (f"{name_ranks(gave_up)} gave up on it after {'its' if len(gave_up) == 1 else 'their'} "
                    "timeout, before this rank arrived: this rank is late.\n"
                    "    fix: this rank was busy, or skipped a check, for longer than the timeout: make every "
                    "rank run the same checks, or raise the cross-rank timeout")
        else:
            what = ("every cp rank reached it, but the exchange failed.\n"
                    "    fix: look at the other ranks' logs for the first error")
        head_line, fix_line = what.split("\n", 1)
        within = "" if gone and missing else f" within {self.timeout:g} s"
        return CrossRankTimeout(
            f"{head}{within}: {head_line}\n{group}\n    transport: {cause}\n{fix_line}",
            missing=list(missing), gave_up=gave_up, micro_batch=mine.micro_batch,
            gone=[c for c in dead if c in missing],
        )

    def _peers(self, seq: int, deadline: float, *, dead: list[int]) -> tuple[dict[int, str], list[int]]:
        """The CP ranks that never reached exchange ``seq`` (with what each last reached), and those that gave up on it.

        A rank whose key is below ``seq`` may still be on its way: it is
        waited for until the deadline. A rank that reached ``seq`` and gave
        up (its own timeout ran out) is live, only no longer waiting. A rank
        whose process is known to have exited is not waited for: it is put
        in ``dead``.
        """
        while True:
            missing: dict[int, str] = {}
            gave_up: list[int] = []
            for c in range(self.cp_size):
                if c == self.cp_rank:
                    continue
                key = str(c)
                if not self._store.check([key]):
                    missing[c] = "it never reached an exchange"
                    continue
                reached, state, k, where = self._store.get(key).decode().split(" ", 3)
                if int(reached) >= seq:
                    if state == "gave-up":
                        gave_up.append(c)
                elif state == "gave-up":
                    missing[c] = f"it gave up on exchange {reached} ({where}, micro-batch {k})"
                else:
                    missing[c] = f"its last was exchange {reached} ({where}, micro-batch {k})"
            dead[:] = [c for c in missing if self._exited(c)]
            if not missing or time.monotonic() >= deadline or set(missing) <= set(dead):
                return missing, gave_up
            time.sleep(_POLL)

    def _exited(self, cp_rank: int) -> bool:
        """Whether CP rank ``cp_rank``'s process is known to have exited (seen from the same host and pid namespace only)."""
        key = f"pid/{cp_rank}"
        try:
            if not self._store.check([key]):
                return False
            identity, pid = self._store.get(key).decode().rsplit(" ", 1)
        except Exception:  # noqa: BLE001 - no evidence either way
            return False
        if identity != _host_identity() or identity.endswith(":?"):
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, ValueError, OSError):
            return False
        return _zombie(int(pid))


def _connection_lost(err: BaseException) -> bool:
    """Whether a transport error says a peer's connection was lost (not a timeout)."""
    text = str(err).lower()
    return any(words in text for words in _GONE) and "timed out" not in text


def _host_identity() -> str:
    """This host and pid namespace: processes with the same identity see each other's pids."""
    import socket

    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return f"{socket.gethostname()}:?"  # no pid namespace to compare: liveness is never read
    return f"{socket.gethostname()}:{namespace}"


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but is not reaped yet (a child its parent has not waited for)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
