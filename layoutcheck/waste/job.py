"""A job's run reports merged, one rank at a time: totals, a row per rank, and the ranks that disagree.

A distributed job writes one run report per rank (``run.rank<N>.json``).
`JobBuilder.add` takes one rank's report, analysed on its own
(`layoutcheck.waste.analysis.analyse`), folds it into aggregates of fixed
size and drops it, so reading 128 ranks holds one report at a time: sums,
counters keyed by length or shape (bounded by the distinct lengths, not by
the ranks), the worst samples and micro-batches (top N), one row of a
dozen numbers per rank, and per group of ranks that hold the same samples
one array of their padded lengths. `JobBuilder.finish` fits the advisor's
buckets on the merged micro-batch maxima and names the disagreements:

* **setup**: ranks whose mode, hooks, configuration file or layoutcheck
  version differ (a rank the environment did not reach has no hooks);
* **schedule**: ranks that laid out a different number of micro-batches
  per rollout (data-parallel ranks must step together, or the job hangs);
* **P**: ranks that hold the same micro-batch (the same
  samples, with the same lengths: CP or TP peers) but laid it out with
  different ``P`` (X1, read from the reports after the fact);
* **violations**: ranks whose violations differ from the others'.

A single report is a job of one rank: the same path, without the rank
sections. Totals are summed over ranks, so ranks that share data (CP and TP
peers) each count it; ratios (``P / T``, positions per true token) are
unaffected.
"""

from __future__ import annotations

import hashlib
import heapq
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from layoutcheck import geometry
from layoutcheck.runtime.reporting.runreport import RunReport
from layoutcheck.waste.analysis import (
    BatchWaste,
    BucketFit,
    RolloutGlobal,
    SampleWaste,
    WasteReport,
    advisor_fit,
    analyse,
)

__all__ = ["Disagreement", "HookCalls", "JobBuilder", "JobWaste", "MergedViolations", "RankRow", "rank_ranges"]

SHARE_BINS = 1000
"""Micro-batch pad shares are counted in bins of 0.1% (the median without keeping every share)."""


def rank_ranges(ranks: Iterable[int]) -> str:
    """``0-3, 7, 9-10``: ranks as ranges."""
    ordered = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(parts)


@dataclass(frozen=True)
class RankRow:
    """One rank's figures: who wrote the report, and its whole-run totals (never truncated)."""

    source: str
    rank: int
    world_size: int
    cp_rank: int | None
    cp_size: int | None
    host: str
    mode: str
    hooks: tuple[str, ...]
    config_file: str | None
    version: str
    rollouts: int
    samples: int
    micro_batches: int
    true_tokens: int
    padded_tokens: int | None
    batch_true_tokens: int
    batch_positions: int
    violations: dict[str, int]
    """Per invariant id, in the report (its violation list)."""
    schedule: tuple[int, ...]
    """Micro-batches per rollout, for the rollouts whose detail the report kept."""
    rollout_global: int
    """Rollouts (in the detail) padded rollout-globally."""
    truncated: bool

    @property
    def inflation(self) -> float | None:
        """``sum P / sum T`` of ``max_seq_lens`` over the whole run."""
        return self.padded_tokens / self.true_tokens if self.padded_tokens and self.true_tokens else None

    @property
    def positions_ratio(self) -> float | None:
        """Positions laid out per true token, over the whole run."""
        return self.batch_positions / self.batch_true_tokens if self.batch_true_tokens else None


@dataclass(frozen=True)
class Disagreement:
    """Ranks that differ where they should agree: what, and which ranks hold each variant."""

    kind: str
    """``setup``, ``schedule``, ``P`` (padded lengths) or ``violations``."""
    summary: str
    variants: tuple[tuple[str, tuple[int, ...]], ...]
    """Each variant (described) and its ranks, the most common first."""


@dataclass
class MergedViolations:
    """The violations of one invariant on one field, over every rank."""

    invariant: str
    field: str
    count: int = 0
    wheres: dict[str, None] = field(default_factory=dict)
    samples: set[int] = field(default_factory=set)
    """Sample indices named (capped: they are only shown)."""
    ranks: set[int] = field(default_factory=set)
    problem: str = ""
    hint: str = ""


@dataclass
class HookCalls:
    """One configured hook over every rank: its calls, the ranks it went in on, and why not elsewhere."""

    role: str
    target: str
    calls: int = 0
    installed: set[int] = field(default_factory=set)
    problems: dict[str, list[int]] = field(default_factory=dict)
    """Why it never went in -> the ranks that said so."""


@dataclass(frozen=True)
class JobWaste:
    """Everything `JobBuilder.finish` found."""

    ranks: list[RankRow]
    disagreements: list[Disagreement]
    problems: list[str]
    """Files that do not make one job: duplicate or missing ranks, mixed world sizes."""
    violations: list[MergedViolations]
    totals: dict[str, int | None]
    """The runs' own totals, summed over ranks (`layoutcheck.runtime.reporting.runreport.Totals`' fields)."""
    # --- the detail the reports kept, merged
    samples: int
    sample_true: int
    sample_padded: int
    sample_own: int
    worst_samples: list[tuple[int, SampleWaste]]
    """(rank, sample), worst ``P / T`` first."""
    rollout_global: list[tuple[int, RolloutGlobal]]
    rollout_global_count: int
    batches: int
    batch_true: int
    positions: int
    per_sample_positions: int
    worst_batches: list[tuple[int, BatchWaste]]
    share_median: float | None
    share_worst: float | None
    shapes: list[tuple[tuple[int, ...], int]]
    padded_lengths: list[tuple[int, int]]
    fit: BucketFit
    """The advisor's buckets, fitted on every rank's micro-batches."""
    notes: list[str]
    notes_count: int
    hooks: list[HookCalls]
    """Every configured hook over the ranks: installed where, calls summed, why it never went in."""
    config_problems: list[tuple[str, tuple[int, ...]]]
    """Configuration problems the runs reported (a key, a field no contract could read), with their ranks."""
    # --- for the picture: counts per length, flat in the number of ranks
    lengths: Counter[int]
    """Samples per true length ``T`` (the detail)."""
    by_longest: dict[int, list[int]]
    """Per micro-batch longest ``T``: [micro-batches, samples, true tokens, positions laid out, BSHD samples,
    BSHD positions]."""
    first_samples: list[tuple[int, int, int, int]] | None
    """One report's samples with a ``P`` as (rollout, sample, T, P), in order; None for a job of several ranks."""
    thd_positions: int
    truncated: bool

    @property
    def multi(self) -> bool:
        return len(self.ranks) > 1


@dataclass
class _Group:
    """Ranks holding the same micro-batches (by their samples and lengths): their ``P``, in schedule order."""

    first: int
    padded: array
    keys: list[tuple[int, int]]
    """(rollout, k) of each entry of ``padded``."""
    variants: dict[bytes, list[int]] = field(default_factory=dict)


class JobBuilder:
    """Fold run reports in one at a time (`add`); `finish` gives the `JobWaste`."""

    def __init__(self, *, unit: int = geometry.DEFAULT_PAD_MULTIPLIER, top: int = 5) -> None:
        self.unit, self.top = unit, top
        self.rows: list[RankRow] = []
        self._violations: dict[tuple[str, str], MergedViolations] = {}
        self._totals: Counter[str] = Counter()
        self._padded_known = False
        self._sums: Counter[str] = Counter()
        self._worst_samples: list[tuple[float, int, int, int, SampleWaste]] = []
        self._worst_batches: list[tuple[float, int, int, int, BatchWaste]] = []
        self._rollout_global: list[tuple[int, RolloutGlobal]] = []
        self._rollout_global_count = 0
        self._shares = [0] * (SHARE_BINS + 1)
        self._share_worst: float | None = None
        self._shapes: Counter[tuple[int, ...]] = Counter()
        self._padded_lengths: Counter[int] = Counter()
        self._maxima: Counter[int] = Counter()
        self._lengths: Counter[int] = Counter()
        self._by_longest: dict[int, list[int]] = {}
        self._thd_positions = 0
        self._longest = 0
        self._notes: list[str] = []
        self._notes_count = 0
        self._hooks: dict[tuple[str, str], HookCalls] = {}
        self._config_problems: dict[str, list[int]] = {}
        self._groups: dict[bytes, _Group] = {}
        self._first_samples: list[tuple[int, int, int, int]] | None = None
        self._order = 0
        self._truncated = False

    # ------------------------------------------------------------ one rank

    def add(self, report: RunReport, source: str) -> None:
        """Fold one rank's report in (it is not kept)."""
        w = analyse(report, unit=self.unit, k=0)
        rank = report.rank.rank
        t = report.totals
        self.rows.append(RankRow(
            source=source, rank=rank, world_size=report.rank.world_size, cp_rank=report.rank.cp_rank,
            cp_size=report.rank.cp_size, host=report.rank.host, mode=report.mode, hooks=tuple(report.hooks),
            config_file=report.config_file, version=report.layoutcheck_version, rollouts=t.rollouts,
            samples=t.samples, micro_batches=t.micro_batches, true_tokens=t.true_tokens, padded_tokens=t.padded_tokens,
            batch_true_tokens=t.batch_true_tokens, batch_positions=t.batch_positions,
            violations=dict(sorted(Counter(v.invariant for v in report.violations).items())),
            schedule=tuple(Counter(m.rollout for m in report.micro_batches)[r]
                           for r in sorted({m.rollout for m in report.micro_batches})),
            rollout_global=len(w.rollout_global), truncated=report.truncated,
        ))
        for key, value in t.model_dump().items():
            self._totals[key] += value or 0
        self._padded_known = self._padded_known or t.padded_tokens is not None
        self._truncated = self._truncated or report.truncated
        self._add_violations(w, rank)
        self._add_samples(w, rank)
        self._add_batches(w, rank)
        self._add_group(report, rank)
        for h in report.hook_calls:
            hook = self._hooks.setdefault((h.role, h.target), HookCalls(h.role, h.target))
            hook.calls += h.calls
            if h.installed:
                hook.installed.add(rank)
            elif h.problem:
                hook.problems.setdefault(h.problem, []).append(rank)
        for p in report.problems:
            self._config_problems.setdefault(p.message.strip().splitlines()[0], []).append(rank)
        self._notes_count += len(w.notes)
        self._notes.extend(f"rank {rank}: {note}" for note in w.notes[: max(0, 20 - len(self._notes))])

    def _add_violations(self, w: WasteReport, rank: int) -> None:
        for g in w.violation_groups:
            merged = self._violations.setdefault((g.invariant, g.field), MergedViolations(
                g.invariant, g.field, problem=g.problem, hint=g.hint))
            merged.count += g.count
            merged.wheres.update(dict.fromkeys(g.wheres))
            merged.ranks.add(rank)
            merged.samples.update(g.samples[: max(0, 64 - len(merged.samples))])

    def _push(self, heap: list, key: float, tie: int, rank: int, item: object) -> None:
        self._order += 1
        entry = (key, tie, -self._order, rank, item)
        if len(heap) < self.top:
            heapq.heappush(heap, entry)
        elif entry[:3] > heap[0][:3]:
            heapq.heapreplace(heap, entry)

    def _add_samples(self, w: WasteReport, rank: int) -> None:
        sums = self._sums
        for s in w.samples:
            sums["samples"] += 1
            sums["sample_true"] += s.total
            sums["sample_padded"] += s.padded
            sums["sample_own"] += s.own_padded
            self._push(self._worst_samples, s.inflation, s.padded - s.total, rank, s)
        # One report's samples in order, for its inflation panel; a job's second rank drops them (flat memory).
        self._first_samples = ([(s.rollout, s.sample, s.total, s.padded) for s in w.samples] if not self.rows[:-1]
                               else None)
        # The samples' lengths for the picture: the producer's records, or (a report without them, THD or a
        # batch builder checked alone) the lengths the micro-batches laid out.
        lengths = ([s.total for s in w.report.samples] if w.report.samples
                   else [t for m in w.report.micro_batches for t in m.totals])
        self._lengths.update(lengths)
        self._longest = max(self._longest, max(lengths, default=0))
        self._rollout_global_count += len(w.rollout_global)
        self._rollout_global.extend((rank, g) for g in w.rollout_global[: max(0, self.top - len(self._rollout_global))])

    def _add_batches(self, w: WasteReport, rank: int) -> None:
        sums = self._sums
        for b in w.batches:
            sums["batches"] += 1
            sums["batch_true"] += b.true_tokens
            sums["positions"] += b.positions
            sums["per_sample_positions"] += b.per_sample_positions
            share = b.pad_share
            self._shares[round(share * SHARE_BINS)] += 1
            self._share_worst = share if self._share_worst is None else max(self._share_worst, share)
            self._push(self._worst_batches, share, b.positions - b.true_tokens, rank, b)
            row = self._by_longest.setdefault(b.longest, [0, 0, 0, 0, 0, 0])
            row[0] += 1
            row[1] += b.size
            row[2] += b.true_tokens
            row[3] += b.positions
            if b.layout == "bshd":
                self._maxima[b.longest] += b.size
                row[4] += b.size
                row[5] += b.positions
            else:
                self._thd_positions += b.positions
            self._longest = max(self._longest, b.longest)
        self._shapes.update(dict(w.shapes))
        self._padded_lengths.update(dict(w.padded_lengths))

    def _add_group(self, report: RunReport, rank: int) -> None:
        """Ranks with the same micro-batches (samples and lengths) must lay them out with the same ``P``."""
        records = [m for m in report.micro_batches if m.padded is not None]
        if not records:
            return
        content = repr([(m.rollout, m.index, m.samples, m.totals) for m in records]).encode()
        key = hashlib.blake2b(content, digest_size=16).digest()
        padded = array("q", (m.padded for m in records))
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(rank, padded, [(m.rollout, m.index) for m in records])
        group.variants.setdefault(padded.tobytes(), []).append(rank)

    # ------------------------------------------------------------ the job

    def finish(self, *, quantum: int = geometry.DEFAULT_BUCKET_QUANTUM, max_length: int | None = None,
               k: int = 4) -> JobWaste:
        """The merged report: the advisor's buckets on every rank's micro-batches, and the disagreements."""
        from layoutcheck.errors import LayoutSpecError

        longest = max(self._longest, 1)
        if max_length is None:
            max_length = geometry.round_up(longest, quantum)
        if max_length < self._longest:
            raise LayoutSpecError(
                f"--max-length {max_length} is below the longest sample of a micro-batch, {self._longest} tokens")
        buckets, advisor_positions = advisor_fit(self._maxima, self._thd_positions, max_length, quantum, k)
        totals: dict[str, int | None] = dict(self._totals)
        if not self._padded_known:
            totals["padded_tokens"] = None
        rows = sorted(self.rows, key=lambda r: (r.rank, r.source))
        s = self._sums
        return JobWaste(
            ranks=rows, disagreements=self._disagreements(rows), problems=_job_problems(rows),
            violations=[self._violations[key] for key in sorted(self._violations)], totals=totals,
            samples=s["samples"], sample_true=s["sample_true"], sample_padded=s["sample_padded"],
            sample_own=s["sample_own"],
            worst_samples=[(e[3], e[4]) for e in sorted(self._worst_samples, reverse=True)],
            rollout_global=self._rollout_global, rollout_global_count=self._rollout_global_count,
            batches=s["batches"], batch_true=s["batch_true"], positions=s["positions"],
            per_sample_positions=s["per_sample_positions"],
            worst_batches=[(e[3], e[4]) for e in sorted(self._worst_batches, reverse=True)],
            share_median=_median_share(self._shares), share_worst=self._share_worst,
            shapes=sorted(self._shapes.items(), key=lambda kv: (-kv[1], kv[0])),
            padded_lengths=sorted(self._padded_lengths.items()),
            fit=BucketFit(max_length, quantum, k, buckets, advisor_positions), notes=self._notes,
            notes_count=self._notes_count, hooks=list(self._hooks.values()),
            config_problems=[(text, tuple(ranks)) for text, ranks in self._config_problems.items()],
            lengths=self._lengths, by_longest=self._by_longest,
            first_samples=self._first_samples,
            thd_positions=self._thd_positions, truncated=self._truncated,
        )

    def _disagreements(self, rows: list[RankRow]) -> list[Disagreement]:
        if len(rows) < 2:
            return []
        out = []
        setup = _variants(rows, lambda r: (r.mode, r.hooks, r.config_file, r.version), _describe_setup)
        if len(setup) > 1:
            out.append(Disagreement("setup", "ranks ran with different settings (mode, hooks, configuration file or "
                                    "layoutcheck version)", setup))
        schedule = _variants(rows, lambda r: (r.rollouts, r.micro_batches, r.schedule), _describe_schedule)
        if len(schedule) > 1:
            out.append(Disagreement("schedule", "ranks laid out different numbers of micro-batches: data-parallel "
                                    "ranks must step together", schedule))
        for group in self._groups.values():
            if len(group.variants) > 1:
                out.append(_padded_disagreement(group))
        violations = _variants(rows, lambda r: tuple(r.violations.items()), _describe_violations)
        if len(violations) > 1:
            out.append(Disagreement("violations", "ranks found different violations", violations))
        return out


def _variants(rows: Sequence[RankRow], key, describe) -> tuple[tuple[str, tuple[int, ...]], ...]:  # noqa: ANN001
    groups: dict[object, list[int]] = {}
    first: dict[object, RankRow] = {}
    for row in rows:
        k = key(row)
        groups.setdefault(k, []).append(row.rank)
        first.setdefault(k, row)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    return tuple((describe(first[k]), tuple(ranks)) for k, ranks in ordered)


def _describe_setup(r: RankRow) -> str:
    return (f"mode {r.mode}, {len(r.hooks)} hook{'s' if len(r.hooks) != 1 else ''}, "
            f"config {r.config_file or 'none'}, layoutcheck {r.version}")


def _describe_schedule(r: RankRow) -> str:
    per = ", ".join(map(str, r.schedule)) if r.schedule else "none kept"
    return f"{r.micro_batches:,} micro-batches in {r.rollouts:,} rollout(s) (per rollout kept: {per})"


def _describe_violations(r: RankRow) -> str:
    return ", ".join(f"{inv} x{n}" for inv, n in r.violations.items()) or "none"


def _padded_disagreement(group: _Group) -> Disagreement:
    variants = sorted(group.variants.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    first = array("q")
    first.frombytes(variants[0][0])
    described = []
    where = None
    for raw, ranks in variants:
        padded = array("q")
        padded.frombytes(raw)
        diff = next((i for i, (a, b) in enumerate(zip(first, padded)) if a != b), None)
        if diff is not None and where is None:
            where = diff
        i = where if where is not None else 0
        rollout, k = group.keys[i]
        described.append((f"P={padded[i]:,} for rollout {rollout} micro-batch {k}", tuple(ranks)))
    rollout, k = group.keys[where or 0]
    return Disagreement("P", f"ranks holding the same samples laid out rollout {rollout} micro-batch {k} "
                        "with different padded lengths (X1)", tuple(described))


def _job_problems(rows: Sequence[RankRow]) -> list[str]:
    problems = []
    seen: dict[int, list[str]] = {}
    for row in rows:
        seen.setdefault(row.rank, []).append(row.source)
    for rank, sources in seen.items():
        if len(sources) > 1:
            problems.append(f"rank {rank} has {len(sources)} reports ({', '.join(sources)}): reports of different runs?")
    sizes = sorted({row.world_size for row in rows})
    if len(sizes) > 1:
        problems.append(f"the reports name different world sizes ({', '.join(map(str, sizes))}): more than one job?")
    elif len(rows) > 1 and sizes:
        missing = sorted(set(range(sizes[0])) - set(seen))
        if missing:
            problems.append(f"world size {sizes[0]}, but no report for rank(s) {rank_ranges(missing)}")
    return problems


def _median_share(bins: list[int]) -> float | None:
    n = sum(bins)
    if not n:
        return None
    half, seen = (n + 1) // 2, 0
    for i, count in enumerate(bins):
        seen += count
        if seen >= half:
            return i / SHARE_BINS
    return None  # pragma: no cover - the loop always returns
