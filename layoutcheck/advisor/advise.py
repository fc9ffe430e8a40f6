"""The bucket advisor: the optimum for each K, the lists it is compared with, warnings and a verdict.

`advise` simulates one epoch of micro-batches under the sampler (shuffle
``seed``), fits the exact optimum for each K on it (`dp.optimal_buckets`),
and scores every list (the optimum, the baselines, the user's current
buckets) on that shuffle and on an independent one (``seed + 1``): the
out-of-sample check. Positions are always compared with the true tokens
(``pad_ratio`` = positions / true tokens) and with the floor, pad-to-quantum
(each micro-batch padded to the grid), which no bucket list beats.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from layoutcheck import geometry
from layoutcheck.advisor.baselines import (
    SampleQuantiles,
    even_buckets,
    power_of_two_buckets,
    quantile_buckets,
)
from layoutcheck.advisor.dp import optimal_buckets
from layoutcheck.advisor.options import SAMPLERS
from layoutcheck.advisor.sampler import default_window, simulate
from layoutcheck.advisor.score import MaximaDistribution
from layoutcheck.errors import LayoutSpecError

__all__ = ["Advice", "Row", "Score", "Settings", "Verdict", "advise"]

DEFAULT_KS = tuple(range(1, 9))
DEFAULT_RECOMPILE_LIMIT = 8
"""``torch._dynamo.config.recompile_limit``'s default."""


@dataclass(frozen=True)
class Settings:
    """Every parameter of the advisor (the command's options)."""

    max_length: int
    quantum: int = geometry.DEFAULT_BUCKET_QUANTUM
    batch_size: int = 1
    sampler: str = "random"
    window: int | None = None
    """Length-grouped sampler: the mega-batch, in micro-batches (default: Hugging Face's rule)."""
    ks: tuple[int, ...] = DEFAULT_KS
    current: tuple[int, ...] | None = None
    sp_degree: int = 1
    cp_degree: int = 1
    """Context parallelism (zigzag): each bucket is cut into ``2 * cp`` chunks, and SP splits each CP rank's part."""
    recompile_limit: int = DEFAULT_RECOMPILE_LIMIT
    seed: int = 0
    within: float = 5.0
    """The recommended K is the smallest whose positions are within this percentage of the floor."""
    compile_seconds: float = 12.0
    """One-time compile cost of one bucket's graph."""
    step_seconds: float = 1.0
    """Seconds one step (one micro-batch) takes padded to ``max_length``: converts positions to time."""
    steps: int | None = None
    """Steps the run will take, for a yes/no verdict."""

    def __post_init__(self) -> None:
        for name in ("max_length", "quantum", "batch_size", "sp_degree", "cp_degree", "recompile_limit"):
            if getattr(self, name) < 1:
                raise LayoutSpecError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.sampler not in SAMPLERS:
            raise LayoutSpecError(f"unknown sampler {self.sampler!r}: expected one of {', '.join(SAMPLERS)}")
        if self.window is not None and self.window < 1:
            raise LayoutSpecError(f"--group-window must be at least 1, got {self.window}")
        if not self.ks or min(self.ks) < 1:
            raise LayoutSpecError(f"--k must name bucket counts of at least 1, got {list(self.ks)}")
        if self.within < 0 or self.compile_seconds < 0 or self.step_seconds <= 0:
            raise LayoutSpecError("--within and --compile-seconds must be >= 0, --step-seconds > 0")
        if self.steps is not None and self.steps < 1:
            raise LayoutSpecError(f"--steps must be at least 1, got {self.steps}")

    @property
    def step(self) -> int:
        """The grid step: `geometry.bucket_step` of the quantum and the SP and CP degrees."""
        return geometry.bucket_step(self.quantum, self.sp_degree, self.cp_degree)


@dataclass(frozen=True)
class Score:
    """One padding strategy: its buckets (``None``: no fixed list) and the positions it lays out."""

    name: str
    buckets: tuple[int, ...] | None
    positions: int
    """On the fitting shuffle."""
    held_out: int
    """The same buckets on the validation shuffle."""


@dataclass(frozen=True)
class Row:
    """One K: the optimum, the baselines with as many buckets, and the optimum refitted out of sample."""

    k: int
    optimum: Score
    baselines: dict[str, Score]
    refit_held_out: int
    """Positions of the optimum fitted on the validation shuffle itself (how much the fit lost out of sample)."""


@dataclass(frozen=True)
class Verdict:
    """Whether buckets pay: the saving per step against the one-time compile cost."""

    k: int
    buckets: tuple[int, ...]
    padding_saved: float
    """Share of one static length's padded positions the buckets remove."""
    time_saved_per_step: float
    extra_compile_seconds: float
    break_even_steps: int | None
    """Steps after which the buckets have paid for their compiles (``None``: never)."""
    worth_it: bool | None
    """With ``steps``: whether the run is long enough; ``None`` without."""
    text: str


@dataclass(frozen=True)
class Advice:
    """Everything `advise` found, for the renderers."""

    settings: Settings
    samples: int
    true_tokens: int
    micro_batches: int
    window: int | None
    grid: tuple[int, ...]
    longest: Score
    floor: Score
    static: Score
    current: Score | None
    rows: list[Row]
    recommended: int
    warnings: list[str] = field(default_factory=list)
    verdict: Verdict | None = None

    def pad_ratio(self, positions: int) -> float:
        """Positions per true token (1.0: no padding at all)."""
        return positions / self.true_tokens

    def over_floor(self, positions: int) -> float:
        """How far above pad-to-quantum, as a fraction of it."""
        return positions / self.floor.positions - 1.0

    def gap_closed(self, positions: int) -> float | None:
        """The share of the gap between one static length and the floor that ``positions`` closes."""
        gap = self.static.positions - self.floor.positions
        return None if gap == 0 else (self.static.positions - positions) / gap

    def row(self, k: int) -> Row:
        return next(r for r in self.rows if r.k == k)


def check_current(current: tuple[int, ...], max_length: int) -> tuple[int, ...]:
    """The user's buckets, ``max_length`` appended; structural problems (what scoring needs) raise.

    Integers, positive, strictly increasing, none above ``max_length``: the
    geometry rules with a quantum of 1. The other rules (quantum, SP) are
    warnings from `advise`.
    """
    problems = geometry.bucket_problems(current, max_length, quantum=1)
    if problems:
        raise LayoutSpecError(f"--current {','.join(map(str, current))}: " + "; ".join(problems))
    return geometry.validate_buckets(current, max_length, quantum=1)


def advise(lengths: np.ndarray, settings: Settings) -> Advice:
    """Fit, compare and validate bucket lists for ``lengths`` (every one at most ``max_length``)."""
    s = settings
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size == 0:
        raise LayoutSpecError("no lengths to advise on")
    if int(lengths.max()) > s.max_length:
        raise LayoutSpecError(f"a length of {int(lengths.max())} is above max_length {s.max_length}")
    current = None if s.current is None else check_current(s.current, s.max_length)
    grid = geometry.bucket_grid(s.max_length, s.quantum, sp_degree=s.sp_degree, cp_degree=s.cp_degree)

    def epoch(seed: int) -> MaximaDistribution:
        batches = simulate(lengths, s.batch_size, s.sampler, window=s.window, seed=seed)
        return MaximaDistribution.of(batches, s.max_length)

    fit = epoch(s.seed)  # the buckets are fitted here ...
    held = epoch(s.seed + 1)  # ... and scored again on an independent shuffle

    def score(name: str, buckets: tuple[int, ...]) -> Score:
        return Score(name, buckets, fit.positions(buckets), held.positions(buckets))

    k_max = max(s.ks)
    fitted = optimal_buckets(grid, fit.weights(grid), k_max)
    refitted = optimal_buckets(grid, held.weights(grid), k_max)
    rows = []
    quantiles = SampleQuantiles(lengths, s.ks)
    for k in sorted(set(s.ks)):
        baselines = {
            "quantiles": score("quantiles", quantile_buckets(k, quantiles, s.max_length, s.step)),
            "powers_of_two": score("powers_of_two", power_of_two_buckets(k, s.max_length, s.step)),
            "even": score("even", even_buckets(k, s.max_length, s.step)),
        }
        rows.append(Row(k, score("optimum", fitted[k - 1][0]), baselines, refitted[k - 1][1]))

    floor = Score("pad_to_quantum", None, fit.positions(grid), held.positions(grid))
    advice = Advice(
        settings=s,
        samples=int(lengths.size),
        true_tokens=int(lengths.sum()),
        micro_batches=fit.micro_batches,
        window=(s.window or default_window(lengths.size, s.batch_size))
        if s.sampler == "grouped" and s.batch_size > 1 else None,
        grid=grid,
        longest=Score("pad_to_longest", None, fit.longest_positions, held.longest_positions),
        floor=floor,
        static=score("static", (s.max_length,)),
        current=None if current is None else score("current", current),
        rows=rows,
        recommended=_recommended(rows, floor.positions, s.within),
    )
    warnings = _warnings(advice, lengths)
    return dataclasses.replace(advice, warnings=warnings, verdict=_verdict(advice))


def _recommended(rows: list[Row], floor: int, within: float) -> int:
    """The smallest K within ``within`` percent of the floor; the largest K tried when none is."""
    for row in rows:
        if row.optimum.positions <= floor * (1 + within / 100):
            return row.k
    return rows[-1].k


# --- warnings ---------------------------------------------------------------------


def _warnings(advice: Advice, lengths: np.ndarray) -> list[str]:
    s = advice.settings
    out: list[str] = []
    if s.max_length % s.quantum:
        below, above = (s.max_length // s.quantum) * s.quantum, geometry.round_up(s.max_length, s.quantum)
        out.append(
            f"max length {s.max_length} is not a multiple of the quantum {s.quantum}: the last bucket is off "
            f"the grid (flex-attention works in {s.quantum}-token blocks); use {below or above} or {above}"
        )
    divisors = geometry.bucket_divisors(s.sp_degree, s.cp_degree)
    if s.step != s.quantum:
        whys = " and ".join(why for _, why in divisors)
        factors = ", ".join(map(str, (s.quantum, *(d for d, _ in divisors))))
        out.append(f"buckets are multiples of lcm({factors}) = {s.step}, not of the quantum {s.quantum} alone, "
                   f"so that each can {whys}")
    out += [f"max length {s.max_length}, the last bucket, does not {why}" for d, why in divisors
            if s.max_length % d]
    if advice.current is not None:
        for problem in geometry.bucket_problems(
            s.current or (), s.max_length, quantum=s.quantum, sp_degree=s.sp_degree, cp_degree=s.cp_degree,
            require_max_last=True,
        ):
            if not problem.startswith("max_length"):  # said above
                out.append(f"current buckets: {problem}")
    k = advice.recommended
    used = len(advice.row(k).optimum.buckets or ())
    need = geometry.bucket_recompile_limit(used)
    if need > s.recompile_limit:
        first = next(n for n in range(1, used + 1) if geometry.bucket_recompile_limit(n) > s.recompile_limit)
        out.append(
            f"the recommended {used} buckets need a Dynamo recompile limit of 2K + 4 = {need}, above "
            f"--recompile-limit {s.recompile_limit} (already {first} buckets exceed it): later buckets would "
            f"run uncompiled; set torch._dynamo.config.recompile_limit = {need}"
        )
    collapsed = [
        (r.k, len(r.baselines["quantiles"].buckets or ()))
        for r in advice.rows
        if len(r.baselines["quantiles"].buckets or ()) < min(r.k, len(advice.grid))
    ]
    if collapsed:
        k, n = collapsed[-1]
        ks = ", ".join(str(k) for k, _ in collapsed)
        out.append(
            f"sample-quantile buckets repeat once rounded up to the {s.step}-token grid at K={ks} "
            f"(K={k} gives {n} distinct bucket{'s' if n != 1 else ''}): quantiles are a poor way to pick them here"
        )
    if s.sampler == "random" and s.batch_size > 2:
        out.append(_grouped_note(advice, lengths))
    return out


def _grouped_note(advice: Advice, lengths: np.ndarray) -> str:
    """At batch size > 2 with random pairing, what a length-grouped sampler would buy, measured."""
    s = advice.settings
    k = advice.recommended
    grouped = MaximaDistribution.of(simulate(lengths, s.batch_size, "grouped", seed=s.seed), s.max_length)
    (_, grouped_k) = optimal_buckets(advice.grid, grouped.weights(advice.grid), k)[k - 1]
    ratio = advice.pad_ratio
    head = (
        f"batch size {s.batch_size} with random pairing: most micro-batches hold a long sample, so no bucket "
        f"list lays out fewer than {ratio(advice.floor.positions):.2f}x the true tokens (the floor); a "
        f"length-grouped sampler (--sampler grouped, like Hugging Face's group_by_length) reaches "
        f"{ratio(grouped_k):.2f}x at K={k}"
    )
    if grouped_k < advice.floor.positions:
        return head + ": it buys more than any bucket choice"
    return head + ": worth trying with the buckets"


# --- the verdict ----------------------------------------------------------------------


def _verdict(advice: Advice) -> Verdict:
    s = advice.settings
    k = advice.recommended
    opt = advice.row(k).optimum
    static = advice.static.positions
    padding = static - advice.true_tokens
    saved = static - opt.positions
    share = saved / padding if padding else 0.0
    per_step = s.step_seconds * saved / static
    extra = (len(opt.buckets or ()) - 1) * s.compile_seconds
    buckets = opt.buckets or (s.max_length,)
    if saved <= 0 or len(buckets) == 1:
        if len(buckets) > 1:
            text = "buckets do not pay here: they remove no padding"
        elif advice.over_floor(static) <= s.within / 100:
            text = (f"buckets do not pay here: one static length ({s.max_length}) is already within "
                    f"{s.within:g}% of the floor, pad-to-quantum")
        else:
            text = "one bucket is one static length: fit more (--k 1..8) to see what buckets would save"
        return Verdict(k, buckets, 0.0, 0.0, 0.0, None, False if s.steps else None, text)
    break_even = math.ceil(extra / per_step) if extra else 0
    graphs = len(buckets) - 1
    detail = (
        f"K={len(buckets)}: {','.join(map(str, buckets))}; {graphs} more graph{'s' if graphs != 1 else ''} "
        f"than one static length at {s.compile_seconds:g} s each, {s.step_seconds:g} s per step at max length"
    )
    text = f"buckets save {share:.0%} of padded positions; worth it above about {break_even:,} steps ({detail})"
    worth = None
    if s.steps is not None:
        worth = s.steps >= break_even
        text += (
            f"; over {s.steps:,} steps they save about {s.steps * per_step:,.0f} s against "
            f"{extra:,.0f} s of compiling: {'worth it' if worth else 'not worth it'}"
        )
    return Verdict(k, buckets, share, per_step, extra, break_even, worth, text)
