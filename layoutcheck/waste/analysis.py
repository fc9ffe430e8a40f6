"""Where a run's padding went: one run report (`layoutcheck.runtime.reporting.runreport`) summarised.

* violations grouped by invariant and field;
* per sample: the inflation ``P_i / T_i`` of ``max_seq_lens``, the worst
  samples, and rollout-global padding named with the sample that set it;
* per micro-batch: the positions laid out (``B * P`` under BSHD, the stream
  under THD) and the pad share ``1 - true tokens / positions``;
* distinct padded shapes (each one a compile for static-shape users);
* what other padding would lay out for the same micro-batches: each
  sample's own aligned length, or the advisor's buckets fitted on the run's
  micro-batch maxima.

A report without micro-batch records (a producer-only run) is read as one
micro-batch per sample laid out with its ``P_i``. Every formula is
`layoutcheck.geometry`'s.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from layoutcheck import geometry
from layoutcheck.advisor.dp import optimal_buckets
from layoutcheck.advisor.score import MaximaDistribution
from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.reporting.runreport import MicroBatchRecord, RunReport, SampleRecord

__all__ = ["BatchWaste", "BucketFit", "RolloutGlobal", "SampleWaste", "ViolationGroup", "WasteReport", "advisor_fit", "analyse",
           "maxima_weights"]


@dataclass(frozen=True)
class ViolationGroup:
    """The violations of one invariant on one field."""

    invariant: str
    field: str
    count: int
    wheres: tuple[str, ...]
    samples: tuple[int, ...]
    """Distinct sample indices named, ascending."""
    problem: str
    """The first violation's problem sentence."""
    hint: str


@dataclass(frozen=True)
class SampleWaste:
    """One sample's padding: ``T``, ``P`` and ``A``."""

    rollout: int
    sample: int
    total: int
    padded: int
    unit: int

    @property
    def inflation(self) -> float:
        """``P / T``."""
        return self.padded / self.total if self.total else float("inf")

    @property
    def own_padded(self) -> int:
        """The sample's own aligned length ``round_up(T, A)`` (per-sample padding, O3)."""
        return geometry.padded_length(self.total, self.unit)


@dataclass(frozen=True)
class RolloutGlobal:
    """A rollout whose every ``P_i`` is ``round_up(max T, A)``: the longest sample padded every other one."""

    rollout: int
    padded: int
    sample: int
    """The longest sample, whose length set ``padded``."""
    total: int
    samples: int


@dataclass(frozen=True)
class BatchWaste:
    """One micro-batch as laid out, and what per-sample padding or buckets would lay out."""

    rollout: int
    index: int
    layout: str
    size: int
    padded: int | None
    longest: int
    true_tokens: int
    positions: int
    per_sample_positions: int
    """BSHD: ``B * round_up(longest T, A)``; THD (packed per sample already): ``positions``."""

    @property
    def pad_share(self) -> float:
        return 1.0 - self.true_tokens / self.positions if self.positions else 0.0


@dataclass(frozen=True)
class BucketFit:
    """The advisor's ``k`` buckets fitted on a run's micro-batch maxima, and the positions they lay out."""

    max_length: int
    """The last bucket: ``--max-length`` or the longest ``T`` rounded up to the quantum."""
    quantum: int
    k: int
    buckets: tuple[int, ...]
    positions: int
    """Positions of every micro-batch with these buckets (THD micro-batches as laid out)."""


@dataclass(frozen=True)
class WasteReport:
    """Everything `analyse` found."""

    report: RunReport
    violation_groups: list[ViolationGroup]
    samples: list[SampleWaste]
    rollout_global: list[RolloutGlobal]
    batches: list[BatchWaste]
    shapes: list[tuple[tuple[int, ...], int]]
    """Distinct local ``tokens`` shapes and their micro-batch counts, most common first."""
    padded_lengths: list[tuple[int, int]]
    """Distinct BSHD micro-batch ``P`` and their counts, ascending."""
    max_length: int
    """The last bucket of the advisor's lists: ``--max-length`` or the longest ``T`` rounded up to the quantum."""
    quantum: int
    k: int
    advisor_buckets: tuple[int, ...]
    advisor_positions: int
    """Positions of every micro-batch with the advisor's buckets (THD micro-batches as laid out)."""
    notes: list[str] = field(default_factory=list)

    @property
    def true_tokens(self) -> int:
        return sum(b.true_tokens for b in self.batches)

    @property
    def positions(self) -> int:
        return sum(b.positions for b in self.batches)

    @property
    def per_sample_positions(self) -> int:
        return sum(b.per_sample_positions for b in self.batches)

    def worst_samples(self, n: int) -> list[SampleWaste]:
        """The ``n`` samples with the largest ``P / T`` (then the most padding)."""
        return sorted(self.samples, key=lambda s: (-s.inflation, -(s.padded - s.total)))[:n]

    def worst_batches(self, n: int) -> list[BatchWaste]:
        return sorted(self.batches, key=lambda b: (-b.pad_share, -(b.positions - b.true_tokens)))[:n]


_CALL = re.compile(r" \(call \d+\)$")
"""A boundary's violation names its call (``pkg.mod:pack (call 12)``); grouped, the function is the place."""


def _group_violations(report: RunReport) -> list[ViolationGroup]:
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for v in report.violations:
        groups[(v.invariant, v.field)].append(v)
    out = []
    for (invariant, name), items in sorted(groups.items()):
        samples: set[int] = set()
        for v in items:
            if isinstance(v.sample, list):
                samples.update(v.sample)
            elif v.sample is not None:
                samples.add(v.sample)
        wheres = tuple(dict.fromkeys(_CALL.sub("", v.where) for v in items))
        out.append(ViolationGroup(invariant, name, len(items), wheres, tuple(sorted(samples)),
                                  items[0].problem, items[0].hint))
    return out


def _samples(records: list[SampleRecord], unit: int) -> list[SampleWaste]:
    return [
        SampleWaste(r.rollout, r.sample, r.total, r.padded, r.unit or unit)
        for r in records
        if r.padded is not None and r.total > 0
    ]


def _rollout_global(samples: list[SampleWaste]) -> list[RolloutGlobal]:
    by_rollout: dict[int, list[SampleWaste]] = defaultdict(list)
    for s in samples:
        by_rollout[s.rollout].append(s)
    out = []
    for rollout, items in sorted(by_rollout.items()):
        units = {s.unit for s in items}
        if len(items) < 2 or len(units) != 1:
            continue
        (unit,) = units
        padded = [s.padded for s in items]
        if padded == geometry.rollout_global_padded_lengths([s.total for s in items], unit):
            longest = max(items, key=lambda s: s.total)
            if any(s.padded >= s.total + s.unit for s in items):  # not merely equal tight lengths
                out.append(RolloutGlobal(rollout, padded[0], longest.sample, longest.total, len(items)))
    return out


def _batches(report: RunReport, samples: list[SampleWaste], unit: int) -> list[BatchWaste]:
    units = {(s.rollout, s.sample): s.unit for s in samples}
    out = []
    if not report.micro_batches:
        # A producer-only report: each sample is laid out with its own P_i.
        for i, s in enumerate(samples):
            out.append(BatchWaste(s.rollout, i, "bshd", 1, s.padded, s.total, s.total, s.padded, s.own_padded))
        return out
    for m in report.micro_batches:
        out.append(_batch(m, units, unit))
    return out


def _batch(m: MicroBatchRecord, units: dict[tuple[int, int], int], unit: int) -> BatchWaste:
    size = len(m.totals)
    longest = max(m.totals, default=0)
    true = sum(m.totals)
    if m.layout == "bshd":
        padded = m.padded if m.padded is not None else longest
        positions = size * padded
        a = max((units.get((m.rollout, i), unit) for i in m.samples), default=unit)
        per_sample = size * geometry.padded_length(longest, a)
    else:
        padded = None
        positions = m.stream if m.stream is not None else true
        per_sample = positions
    return BatchWaste(m.rollout, m.index, m.layout, size, padded, longest, true, positions, per_sample)


def _shapes(report: RunReport) -> list[tuple[tuple[int, ...], int]]:
    if report.shapes:
        counts = Counter({tuple(s.shape): s.count for s in report.shapes})
    else:
        counts = Counter(tuple(m.shape) for m in report.micro_batches if m.shape is not None)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def maxima_weights(batches: list[BatchWaste]) -> Counter[int]:
    """BSHD micro-batches as the advisor needs them: samples per longest length (the bucket a batch pads to)."""
    weights: Counter[int] = Counter()
    for b in batches:
        if b.layout == "bshd":
            weights[b.longest] += b.size
    return weights


def advisor_fit(maxima: Counter[int], others: int, max_length: int, quantum: int, k: int) -> tuple[tuple[int, ...], int]:
    """The optimal ``k`` buckets for BSHD micro-batches (``maxima``: samples per longest length), and every
    micro-batch's positions with them (``others``: the positions of THD micro-batches, laid out as they were)."""
    if not maxima:
        return (), others
    counts = np.zeros(max_length + 1, dtype=np.int64)
    lengths = np.fromiter(maxima.keys(), dtype=np.int64, count=len(maxima))
    counts[lengths] = np.fromiter(maxima.values(), dtype=np.int64, count=len(maxima))
    longest = int(np.dot(lengths, np.fromiter(maxima.values(), dtype=np.int64, count=len(maxima))))
    dist = MaximaDistribution(np.cumsum(counts), longest, len(maxima))
    grid = geometry.bucket_grid(max_length, quantum)
    buckets, cost = optimal_buckets(grid, dist.weights(grid), k)[k - 1]
    return buckets, cost + others


def analyse(
    report: RunReport,
    *,
    unit: int = geometry.DEFAULT_PAD_MULTIPLIER,
    quantum: int = geometry.DEFAULT_BUCKET_QUANTUM,
    max_length: int | None = None,
    k: int = 4,
) -> WasteReport:
    """Summarise ``report``; ``unit`` is ``A`` for samples whose record has none; ``k=0`` fits no buckets."""
    samples = _samples(report.samples, unit)
    batches = _batches(report, samples, unit)
    longest = max((b.longest for b in batches), default=1)
    if max_length is None:
        max_length = geometry.round_up(max(longest, 1), quantum)
    notes = list(report.notes)
    if max_length < longest:
        raise LayoutSpecError(
            f"--max-length {max_length} is below the longest sample of a micro-batch, {longest} tokens"
        )
    others = sum(b.positions for b in batches if b.layout != "bshd")
    buckets, advisor_positions = (advisor_fit(maxima_weights(batches), others, max_length, quantum, k) if k
                                  else ((), sum(b.positions for b in batches)))
    padded_lengths = sorted(Counter(b.padded for b in batches if b.padded is not None).items())
    return WasteReport(
        report=report,
        violation_groups=_group_violations(report),
        samples=samples,
        rollout_global=_rollout_global(samples),
        batches=batches,
        shapes=_shapes(report),
        padded_lengths=padded_lengths,
        max_length=max_length,
        quantum=quantum,
        k=k,
        advisor_buckets=buckets,
        advisor_positions=advisor_positions,
        notes=notes,
    )
