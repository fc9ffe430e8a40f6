"""The padding picture (matplotlib, an optional extra): lengths, buckets, the padded area, inflation.

Panels, top to bottom, sharing the length axis where they have one:

1. how long samples and micro-batches are: histograms of the sample lengths
   ``T`` and of each micro-batch's longest sample, with the bucket
   boundaries;
2. where the padding goes: the positions laid out, by the longest sample of
   the micro-batch, split into true tokens and padding (shaded), and the
   positions the buckets would lay out;
3. (one run report) the inflation ``P / T`` of every sample the report kept,
   log scale, with the worst sample and the longest one named; (a job of
   several ranks) the inflation of ``max_seq_lens`` and the positions per
   true token of every rank, the ranks that disagree marked: one bar per
   rank, readable at 128 ranks.

Titles say what is drawn against what the runs saw (``32 of 144 samples``):
nothing is cut silently. Lengths can come with counts (a job's samples,
merged over ranks, are counted per length rather than listed).

Only the object-oriented API is used (`matplotlib.figure.Figure`, no
pyplot), so plotting never touches a GUI backend or global state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from layoutcheck.advisor.score import padded_to

if TYPE_CHECKING:
    from layoutcheck.waste.job import JobWaste

__all__ = ["Inflation", "PaddingPicture", "RankPanel", "picture_of", "plot_padding"]

MAX_BINS = 160


@dataclass(frozen=True)
class Inflation:
    """Per-sample ``T`` and ``P``, in rollout order, for the inflation panel."""

    totals: np.ndarray
    padded: np.ndarray
    labels: Sequence[str]
    """How to name sample i in an annotation (``"sample 16"``, ``"r1 s16"``)."""


@dataclass(frozen=True)
class PaddingPicture:
    """What the figure shows."""

    title: str
    lengths: np.ndarray
    """``T`` of every sample."""
    maxima: np.ndarray
    """The longest ``T`` of every micro-batch."""
    true_tokens: np.ndarray
    """``sum T`` of every micro-batch."""
    laid_out: np.ndarray
    """Positions of every micro-batch as laid out (``B * P``)."""
    laid_out_label: str
    buckets: Sequence[int]
    """Bucket boundaries to draw."""
    bucket_label: str
    bucketed: np.ndarray | None = None
    """Positions of every micro-batch with ``buckets``; ``None`` when ``laid_out`` already is that."""
    quantum: int = 128
    inflation: Inflation | None = None
    length_counts: np.ndarray | None = None
    """How many samples have each entry of ``lengths`` (None: one each)."""
    maxima_counts: np.ndarray | None = None
    """How many micro-batches each entry of ``maxima`` (and its rows) stands for (None: one each)."""
    ranks: RankPanel | None = None


@dataclass(frozen=True)
class RankPanel:
    """Per rank, for a job's third panel: ``max_seq_lens`` inflation and positions per true token."""

    ranks: np.ndarray
    inflation: np.ndarray
    """``sum P / sum T`` (NaN without padded samples)."""
    positions: np.ndarray
    """Positions laid out per true token (NaN without micro-batches)."""
    flagged: np.ndarray
    """True for a rank that disagrees with the others."""


HEAVY_TAIL = 8.0
"""A longest length this many times the median gets a log length axis (a 14k outlier among 1.3k samples)."""


def _median(values: np.ndarray, counts: np.ndarray | None) -> float:
    if counts is None:
        return float(np.median(values))
    order = np.argsort(values)
    cumulative = np.cumsum(counts[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def _bins(lengths: np.ndarray, top: int, quantum: int, counts: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """Histogram edges, and whether the length axis is logarithmic."""
    if top > HEAVY_TAIL * _median(lengths, counts):
        low = max(1.0, float(lengths.min()) * 0.9)
        return np.geomspace(low, top * 1.1, 72), True
    width = quantum
    while top / width > MAX_BINS:
        width *= 2
    return np.arange(0, top + 2 * width, width), False


def plot_padding(picture: PaddingPicture, path: str) -> None:
    """Draw ``picture`` into ``path`` (the format follows the suffix: ``.png``, ``.svg``, ``.pdf``)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter, MaxNLocator

    p = picture
    panels = 3 if p.inflation is not None or p.ranks is not None else 2
    fig = Figure(figsize=(10, 3.2 * panels), layout="constrained")
    axes = fig.subplots(panels, 1)
    top = int(max(p.lengths.max(), p.maxima.max(), max(p.buckets, default=0)))
    bins, log = _bins(p.lengths, top, p.quantum, p.length_counts)
    samples = int(p.length_counts.sum()) if p.length_counts is not None else p.lengths.size
    batches = int(p.maxima_counts.sum()) if p.maxima_counts is not None else p.maxima.size
    tokens = EngFormatter(sep="")
    scale = " (log scale)" if log else ""

    def length_axis(ax, label: str) -> None:  # noqa: ANN001 - a matplotlib Axes
        if log:
            ax.set_xscale("log")
        ax.set_xlim(bins[0], bins[-1])
        ax.xaxis.set_major_formatter(tokens)
        ax.xaxis.set_minor_formatter(tokens if log else ax.xaxis.get_minor_formatter())
        ax.tick_params(axis="x", which="minor", labelsize=7)
        ax.set_xlabel(f"{label}, tokens{scale}")

    # 1. lengths
    ax = axes[0]
    ax.hist(p.lengths, bins=bins, weights=p.length_counts, color="#4c78a8", alpha=0.55,
            label=f"samples ({samples:,})")
    if batches != samples:
        ax.hist(p.maxima, bins=bins, weights=p.maxima_counts, histtype="step", linewidth=1.8, color="#e45756",
                label=f"longest sample of each micro-batch ({batches:,})")
    _bucket_lines(ax, p.buckets, p.bucket_label)
    length_axis(ax, "length")
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(p.title, loc="left", fontsize=11)
    ax.legend(loc="best", fontsize=8, framealpha=0.9)

    # 2. padded area, by the micro-batch's longest sample
    ax = axes[1]
    which = np.clip(np.digitize(p.maxima, bins) - 1, 0, bins.size - 2)
    true = np.bincount(which, weights=p.true_tokens, minlength=bins.size - 1)
    laid = np.bincount(which, weights=p.laid_out, minlength=bins.size - 1)
    left, width = bins[:-1], np.diff(bins)
    ax.bar(left, true, width=width, align="edge", color="#4c78a8", label="true tokens")
    ax.bar(left, laid - true, bottom=true, width=width, align="edge", color="#e45756", alpha=0.45,
           hatch="///", edgecolor="#e45756", linewidth=0, label=f"padding, {p.laid_out_label}")
    total_true, total_laid = float(p.true_tokens.sum()), float(p.laid_out.sum())
    title = f"positions by the micro-batch's longest sample\npadding is {1 - total_true / total_laid:.0%} of " \
            f"{total_laid:,.0f} positions {p.laid_out_label}"
    if p.bucketed is not None:
        bucketed = np.bincount(which, weights=p.bucketed, minlength=bins.size - 1)
        ax.stairs(bucketed, bins, color="black", linewidth=1.4, label=f"positions with {p.bucket_label}")
        total_b = float(p.bucketed.sum())
        title += f"; {1 - total_true / total_b:.0%} of {total_b:,.0f} with {p.bucket_label}"
    _bucket_lines(ax, p.buckets, None)
    ax.set_title(title, loc="left", fontsize=10)
    length_axis(ax, "longest sample of the micro-batch")
    ax.set_ylabel("positions (tokens)")
    ax.yaxis.set_major_formatter(tokens)
    ax.legend(loc="best", fontsize=8, framealpha=0.9)

    # 3. inflation per sample (one report) or per rank (a job)
    if p.ranks is not None:
        _per_rank(axes[2], p.ranks)
    elif p.inflation is not None:
        _inflation(axes[2], p.inflation)
    fig.savefig(path, dpi=90, **({"pil_kwargs": {"optimize": True}} if str(path).lower().endswith(".png") else {}))


def _bucket_lines(ax, buckets: Sequence[int], label: str | None) -> None:  # noqa: ANN001 - a matplotlib Axes
    for i, b in enumerate(buckets):
        ax.axvline(b, color="#54a24b", linestyle="--", linewidth=1.1, label=label if i == 0 else None)
        if label is not None:
            ax.annotate(f"{b:,}", (b, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -10),
                        textcoords="offset points", fontsize=7, color="#2d6a2a", rotation=90, va="top")


def _inflation(ax, inf: Inflation) -> None:  # noqa: ANN001 - a matplotlib Axes
    ratio = inf.padded / np.maximum(inf.totals, 1)
    x = np.arange(ratio.size)
    worst, longest = int(ratio.argmax()), int(inf.totals.argmax())
    colors = np.full(ratio.size, "#f58518", dtype=object)
    colors[longest] = "#4c78a8"
    if ratio.size <= 200:
        ax.bar(x, ratio, color=list(colors), width=0.8)
    else:
        ax.scatter(x, ratio, s=4, c=list(colors))
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylim(0.8, ratio.max() * 2.5)
    ax.set_xlim(-1, ratio.size)
    ax.annotate(f"worst: {inf.labels[worst]}, T={int(inf.totals[worst]):,}, P={int(inf.padded[worst]):,} "
                f"({ratio[worst]:.1f}x)", (worst, ratio[worst]), xytext=(0, 6), textcoords="offset points",
                fontsize=8, ha="center", va="bottom")
    if longest != worst:
        ax.annotate(f"longest: {inf.labels[longest]}, T={int(inf.totals[longest]):,}, "
                    f"P={int(inf.padded[longest]):,} ({ratio[longest]:.2f}x)",
                    (longest, ratio[longest]), xytext=(12, 24), textcoords="offset points", fontsize=8,
                    arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.8})
    ax.set_xlabel("sample (rollout order)")
    ax.set_ylabel("inflation P / T (log scale)")
    ax.set_title(f"inflation per sample, P / T: median {np.median(ratio):.1f}x, worst {ratio.max():.1f}x "
                 "(blue: the longest sample)", loc="left", fontsize=10)


def _per_rank(ax, r: RankPanel) -> None:  # noqa: ANN001 - a matplotlib Axes
    x = np.arange(r.ranks.size)
    ax.bar(x - 0.2, r.inflation, width=0.4, color="#f58518", label="max_seq_lens: sum P / sum T")
    ax.bar(x + 0.2, r.positions, width=0.4, color="#4c78a8", label="micro-batches: positions / true tokens")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    top = float(np.nanmax(np.concatenate([r.inflation, r.positions, [1.0]])))
    for i in np.flatnonzero(r.flagged):
        ax.annotate("x", (x[i], top * 1.04), ha="center", va="bottom", color="#d62728", fontsize=9, fontweight="bold")
    ax.set_ylim(0, top * 1.2)
    ax.set_xlim(-1, r.ranks.size)
    step = max(1, r.ranks.size // 16)  # at most ~16 tick labels, readable at 128 ranks
    ax.set_xticks(x[::step], [str(int(v)) for v in r.ranks[::step]])
    ax.set_xlabel("rank")
    ax.set_ylabel("x true tokens")
    flagged = int(r.flagged.sum())
    ax.set_title(f"per rank ({r.ranks.size}): padding inflation and positions per true token"
                 + (f"; x: {flagged} rank(s) that disagree with the others" if flagged else "; the ranks agree"),
                 loc="left", fontsize=10)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.9)


def picture_of(w: JobWaste, sources: Sequence[str]) -> PaddingPicture:
    """The picture of a job's run reports (one or several): as laid out, the advisor's buckets drawn and scored.

    Every micro-batch the reports kept is drawn, THD ones as they were laid
    out; the titles say how many of the runs' samples and micro-batches that is.
    """
    from layoutcheck.waste.render import detail_coverage

    longest = np.array(sorted(w.by_longest), dtype=np.int64)
    rows = np.array([w.by_longest[m] for m in longest], dtype=np.int64).reshape(-1, 6)
    micro_batches, true, laid, bshd_samples, bshd_positions = rows[:, 0], rows[:, 2], rows[:, 3], rows[:, 4], rows[:, 5]
    lengths = np.array(sorted(w.lengths), dtype=np.int64)
    label = f"advisor K={w.fit.k}"
    bucketed = None
    if w.fit.buckets and bshd_samples.any():
        # BSHD micro-batches padded to the bucket of their longest sample; THD ones as they were laid out.
        bucketed = bshd_samples * padded_to(w.fit.buckets, longest) + (laid - bshd_positions)
    inflation = None
    if w.first_samples:
        many_rollouts = len({s[0] for s in w.first_samples}) > 1
        inflation = Inflation(
            totals=np.array([s[2] for s in w.first_samples], dtype=np.int64),
            padded=np.array([s[3] for s in w.first_samples], dtype=np.int64),
            labels=[f"rollout {s[0]} sample {s[1]}" if many_rollouts else f"sample {s[1]}" for s in w.first_samples],
        )
    ranks = None
    if w.multi:
        flagged = {rank for d in w.disagreements for _, group in d.variants[1:] for rank in group}
        ranks = RankPanel(
            ranks=np.array([r.rank for r in w.ranks], dtype=np.int64),
            inflation=np.array([r.inflation if r.inflation is not None else np.nan for r in w.ranks]),
            positions=np.array([r.positions_ratio if r.positions_ratio is not None else np.nan for r in w.ranks]),
            flagged=np.array([r.rank in flagged for r in w.ranks]),
        )
    name = sources[0] if len(sources) == 1 else f"{len(w.ranks)} ranks"
    return PaddingPicture(
        title=f"{name}: {detail_coverage(w).split(' (')[0]}",
        lengths=lengths,
        length_counts=np.array([w.lengths[v] for v in lengths], dtype=np.int64),
        maxima=longest,
        maxima_counts=micro_batches,
        true_tokens=true,
        laid_out=laid,
        laid_out_label="as the run laid out",
        buckets=w.fit.buckets,
        bucket_label=f"{label} buckets",
        bucketed=bucketed,
        quantum=w.fit.quantum,
        inflation=inflation,
        ranks=ranks,
    )
