"""What the runtime checks saw, for the run report: ints only, bounded in memory.

`LayoutChecker.observations` returns an `Observations` snapshot:

* per sample of each rollout (`SampleObservation`): ``T``, ``R``, ``P``
  (when known) and the unit ``A`` it was judged against;
* per micro-batch (`MicroBatchObservation`): the rollout, ``k``, the samples,
  their current ``T``, ``P`` (BSHD) or the global stream length (THD), and the
  local ``tokens`` shape;
* aggregates over the whole run (`Totals`, `ShapeCount`, the worst-inflation
  samples), which are never cut.

Full detail is kept for the first `ObservationLimits.rollouts` rollouts and
the first `ObservationLimits.micro_batches` micro-batches; past that only the
aggregates grow (``truncated`` says so). Each micro-batch is counted once per
rollout, however many passes (log-probs, training) lay it out again. The
field names are those of the run report's schema
(`layoutcheck.runtime.reporting.runreport`), and `Observations.report_fields` gives
them in its shape.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = [
    "MicroBatchObservation",
    "ObservationLimits",
    "ObservationLog",
    "Observations",
    "SampleObservation",
    "ShapeCount",
    "Totals",
]


@dataclass(frozen=True)
class ObservationLimits:
    """How much detail `ObservationLog` keeps (the aggregates are always complete)."""

    rollouts: int = 4
    """Rollouts whose samples are kept one by one."""
    micro_batches: int = 512
    """Micro-batches kept one by one (over the whole run)."""
    shapes: int = 256
    """Distinct ``tokens`` shapes counted; further shapes only count as truncated."""
    worst: int = 8
    """Worst-inflation samples kept (highest ``P / T``)."""


@dataclass(frozen=True)
class SampleObservation:
    """One sample of one rollout as the producer left it."""

    rollout: int
    sample: int
    total: int
    """``T_i``: prompt + response tokens."""
    response: int | None
    """``R_i``."""
    padded: int | None
    """``P_i`` (the sample's ``max_seq_lens`` entry); ``None`` under THD or when the layout is not known."""
    unit: int | None
    """``A``, the alignment unit ``P_i`` was judged against (``None`` when no ``P_i`` was judged)."""

    @property
    def inflation(self) -> float | None:
        """``P_i / T_i`` (``None`` without a ``P_i``)."""
        return None if self.padded is None or not self.total else self.padded / self.total


@dataclass(frozen=True)
class MicroBatchObservation:
    """One micro-batch as the batch builder laid it out on this rank."""

    rollout: int
    index: int
    """``k``: the micro-batch's position in the rollout's schedule."""
    samples: tuple[int, ...]
    layout: str
    totals: tuple[int, ...]
    """The samples' current true lengths ``T``, in micro-batch order."""
    padded: int | None
    """BSHD: the ``P`` every sample was laid out with."""
    stream: int | None
    """THD: the global packed stream length, tail padding included."""
    shape: tuple[int, ...] | None
    """The local ``tokens`` shape on this rank (``(B, L)`` or ``(1, N)``)."""

    @property
    def positions(self) -> int | None:
        """Positions laid out globally: ``B * P`` (BSHD) or the stream (THD)."""
        if self.padded is not None:
            return self.padded * len(self.samples)
        return self.stream


@dataclass(frozen=True)
class ShapeCount:
    """A distinct local ``tokens`` shape and how many micro-batches had it (a compile each, for static shapes)."""

    shape: tuple[int, ...]
    count: int


@dataclass(frozen=True)
class Totals:
    """Whole-run aggregates (never truncated)."""

    rollouts: int = 0
    samples: int = 0
    micro_batches: int = 0
    true_tokens: int = 0
    """Sum of ``T_i`` over every sample the producer returned."""
    padded_tokens: int | None = None
    """Sum of ``P_i`` over those samples (BSHD); ``None`` when no sample had a ``P``."""
    batch_true_tokens: int = 0
    """Sum of ``T`` over every sample of every micro-batch the batch builder laid out."""
    batch_positions: int = 0
    """Positions those micro-batches were laid out with, globally (``B * P`` under BSHD, the stream under THD)."""


@dataclass(frozen=True)
class Observations:
    """A snapshot of what the checks saw (see the module docs)."""

    samples: tuple[SampleObservation, ...]
    micro_batches: tuple[MicroBatchObservation, ...]
    shapes: tuple[ShapeCount, ...]
    """Distinct local ``tokens`` shapes, most frequent first."""
    totals: Totals
    worst_samples: tuple[SampleObservation, ...]
    """The samples with the highest ``P / T`` over the whole run, worst first."""
    truncated: bool
    """True when per-sample, per-micro-batch or shape detail was cut to bound memory."""

    def report_fields(self) -> dict[str, object]:
        """``samples``, ``micro_batches``, ``shapes``, ``totals`` and ``truncated`` as the run report's JSON types."""

        return {
            "samples": [_plain(s) for s in self.samples],
            "micro_batches": [_plain(m) for m in self.micro_batches],
            "shapes": [_plain(s) for s in self.shapes],
            "totals": asdict(self.totals),
            "truncated": self.truncated,
        }


def _plain(obj: object) -> dict[str, object]:
    """A record as JSON types (tuples as lists), without `dataclasses.asdict`'s deep copies."""
    return {f: list(v) if isinstance(v, tuple) else v for f in obj.__dataclass_fields__  # type: ignore[attr-defined]
            for v in [getattr(obj, f)]}


class ObservationLog:
    """Collects observations as the checks run; `snapshot` freezes them."""

    def __init__(self, limits: ObservationLimits | None = None) -> None:
        self.limits = limits or ObservationLimits()
        self.clear()

    def clear(self) -> None:
        """Forget everything."""
        self._samples: list[SampleObservation] = []
        self._micro_batches: list[MicroBatchObservation] = []
        self._shapes: Counter[tuple[int, ...]] = Counter()
        self._worst: list[tuple[float, int, SampleObservation]] = []  # a min-heap of the worst `limits.worst`
        self._order = 0
        self._truncated = False
        self._totals = {"rollouts": 0, "samples": 0, "micro_batches": 0, "true_tokens": 0, "padded_tokens": 0,
                        "batch_true_tokens": 0, "batch_positions": 0}
        self._padded_seen = False

    def rollout(self) -> None:
        """Count one more rollout."""
        self._totals["rollouts"] += 1

    def samples(
        self, rollout: int, totals: Sequence[int], responses: Sequence[int] | None, padded: Sequence[int] | None,
        unit: int | None,
    ) -> None:
        """One producer call's samples: their ``T``, ``R`` and ``P`` lists (``None``: not known), ``P`` judged against ``A = unit``.

        Takes the lists, not `SampleObservation` objects: a rollout has
        thousands of samples, and objects are made only for the ones kept.
        """
        def entry(values: Sequence[int] | None, i: int) -> int | None:
            return values[i] if values is not None and i < len(values) else None

        def observation(i: int) -> SampleObservation:
            return SampleObservation(rollout, i, totals[i], entry(responses, i), entry(padded, i), unit)

        self._totals["samples"] += len(totals)
        self._totals["true_tokens"] += sum(totals)
        judged = 0 if padded is None else min(len(totals), len(padded))  # samples with a P
        if judged:
            self._padded_seen = True
            self._totals["padded_tokens"] += sum(padded[:judged])  # type: ignore[index]
            if self.limits.worst > 0:
                for i in range(judged):
                    t = totals[i]
                    self._order += 1
                    key = (padded[i] / t if t else 0.0, -self._order)  # type: ignore[index]
                    if len(self._worst) < self.limits.worst or key > self._worst[0][:2]:
                        self._rank_worst(key, observation(i))
        if rollout < self.limits.rollouts:
            self._samples.extend(observation(i) for i in range(len(totals)))
        elif totals:
            self._truncated = True

    def micro_batch(self, mb: MicroBatchObservation) -> None:
        """One micro-batch, the first time the batch builder lays it out in its rollout."""
        totals = self._totals
        totals["micro_batches"] += 1
        totals["batch_true_tokens"] += sum(mb.totals)
        totals["batch_positions"] += mb.positions or 0
        if len(self._micro_batches) < self.limits.micro_batches:
            self._micro_batches.append(mb)
        else:
            self._truncated = True
        if mb.shape is not None:
            if mb.shape in self._shapes or len(self._shapes) < self.limits.shapes:
                self._shapes[mb.shape] += 1
            else:
                self._truncated = True

    def _rank_worst(self, key: tuple[float, int], s: SampleObservation) -> None:
        # A min-heap of the worst `limits.worst` by (inflation, -order): ties keep the earlier sample.
        if len(self._worst) < self.limits.worst:
            heapq.heappush(self._worst, (*key, s))
        else:
            heapq.heapreplace(self._worst, (*key, s))

    def kept(self) -> tuple[int, int]:
        """How many samples and micro-batches are kept one by one so far (a cursor for `detail_since`)."""
        return len(self._samples), len(self._micro_batches)

    def detail_since(self, cursor: tuple[int, int]) -> dict[str, list[dict[str, object]]]:
        """The samples and micro-batches kept since ``cursor`` (from `kept`), in the run report's JSON shape.

        With `aggregates`, what an appended run report needs per write: its
        cost is that of what is new, never of the whole run.
        """
        return {
            "samples": [_plain(s) for s in self._samples[cursor[0]:]],
            "micro_batches": [_plain(m) for m in self._micro_batches[cursor[1]:]],
        }

    def aggregates(self) -> dict[str, object]:
        """``totals`` and ``truncated`` as the run report's JSON types."""
        totals = dict(self._totals)
        if not self._padded_seen:
            totals["padded_tokens"] = None
        return {"totals": totals, "truncated": self._truncated}

    def shapes_since(self, seen: dict[tuple[int, ...], int]) -> list[dict[str, object]]:
        """The shape counts that grew since ``seen`` (shape -> count, brought up to date): what a chunk adds.

        At most `ObservationLimits.shapes` shapes are counted, and only those
        of the micro-batches laid out since are compared, so a chunk holds a
        rollout's few shapes, never all of them again.
        """
        grown = []
        for shape, n in self._shapes.items():
            before = seen.get(shape, 0)
            if n != before:
                grown.append({"shape": list(shape), "count": n - before})
                seen[shape] = n
        return grown

    def snapshot(self) -> Observations:
        """The observations so far, frozen."""
        totals = dict(self._totals)
        if not self._padded_seen:
            totals["padded_tokens"] = None
        worst = [entry[2] for entry in sorted(self._worst, key=lambda e: e[:2], reverse=True)]
        return Observations(
            samples=tuple(self._samples),
            micro_batches=tuple(self._micro_batches),
            shapes=tuple(ShapeCount(shape, n) for shape, n in self._shapes.most_common()),
            totals=Totals(**totals),  # type: ignore[arg-type]
            worst_samples=tuple(worst),
            truncated=self._truncated,
        )
