"""The padding picture (matplotlib, an optional extra): lengths, buckets, the padded area, inflation.

Panels, top to bottom, sharing the length axis where they have one:

1. how long samples and micro-batches are: histograms of the sample lengths
   ``T`` and of each micro-batch's longest sample, with the bucket
   boundaries;
2. where the padding goes: the positions laid out, by the longest sample of
   the micro-batch, split into true tokens and padding (shaded), and the
   positions the buckets would lay out;
3. (run reports) the inflation ``P / T`` of every sample, log scale, with the
   worst sample and the longest one named.

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
    from layoutcheck.waste.analysis import WasteReport

__all__ = ["Inflation", "PaddingPicture", "picture_of", "plot_padding"]

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


HEAVY_TAIL = 8.0
"""A longest length this many times the median gets a log length axis (a 14k outlier among 1.3k samples)."""


def _bins(lengths: np.ndarray, top: int, quantum: int) -> tuple[np.ndarray, bool]:
    """Histogram edges, and whether the length axis is logarithmic."""
    if top > HEAVY_TAIL * float(np.median(lengths)):
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
    panels = 3 if p.inflation is not None else 2
    fig = Figure(figsize=(10, 3.2 * panels), layout="constrained")
    axes = fig.subplots(panels, 1)
    top = int(max(p.lengths.max(), p.maxima.max(), max(p.buckets, default=0)))
    bins, log = _bins(p.lengths, top, p.quantum)
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
    ax.hist(p.lengths, bins=bins, color="#4c78a8", alpha=0.55, label=f"samples ({p.lengths.size:,})")
    if p.maxima.size != p.lengths.size:
        ax.hist(p.maxima, bins=bins, histtype="step", linewidth=1.8, color="#e45756",
                label=f"longest sample of each micro-batch ({p.maxima.size:,})")
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

    # 3. inflation per sample
    if p.inflation is not None:
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


def picture_of(w: WasteReport, source: str) -> PaddingPicture:
    """The picture of a run report: as laid out, with the advisor's buckets drawn and scored."""
    bshd = [b for b in w.batches if b.layout == "bshd"]
    batches = bshd or w.batches
    maxima = np.array([b.longest for b in batches], dtype=np.int64)
    sizes = np.array([b.size for b in batches], dtype=np.int64)
    samples = w.samples
    lengths = (np.array([s.total for s in samples], dtype=np.int64) if samples
               else np.array([t for m in w.report.micro_batches for t in m.totals], dtype=np.int64))
    label = f"advisor K={w.k}"
    inflation = None
    if samples:
        many_rollouts = len({s.rollout for s in samples}) > 1
        inflation = Inflation(
            totals=np.array([s.total for s in samples], dtype=np.int64),
            padded=np.array([s.padded for s in samples], dtype=np.int64),
            labels=[f"rollout {s.rollout} sample {s.sample}" if many_rollouts else f"sample {s.sample}"
                    for s in samples],
        )
    return PaddingPicture(
        title=f"{source}: {lengths.size:,} samples, {len(w.batches):,} micro-batches",
        lengths=lengths,
        maxima=maxima,
        true_tokens=np.array([b.true_tokens for b in batches], dtype=np.int64),
        laid_out=np.array([b.positions for b in batches], dtype=np.int64),
        laid_out_label="as the run laid out",
        buckets=w.advisor_buckets,
        bucket_label=f"{label} buckets",
        bucketed=sizes * padded_to(w.advisor_buckets, maxima) if bshd and w.advisor_buckets else None,
        quantum=w.quantum,
        inflation=inflation,
    )
