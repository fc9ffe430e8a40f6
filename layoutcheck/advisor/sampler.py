"""Simulated micro-batches: which samples a sampler puts together, and each micro-batch's longest.

A micro-batch pads to the bucket of its *longest* sample, so bucket costs
depend on the distribution of per-micro-batch maxima, not on the sample
lengths themselves (they agree only at batch size 1). Two samplers:

* ``random``: a shuffle cut into consecutive micro-batches (a plain
  ``DataLoader(shuffle=True)``, or an RL rollout in generation order);
* ``grouped``: length-grouped like Hugging Face's ``group_by_length``
  (``LengthGroupedSampler``): shuffle, cut into mega-batches of ``window``
  micro-batches, sort each mega-batch by length, cut it into micro-batches.
  Hugging Face's default window is ``min(n // (4 B), 50)`` micro-batches
  (at least 1), `default_window`.

The last micro-batch may be short; it keeps its real size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layoutcheck.advisor.options import SAMPLERS

__all__ = ["MicroBatches", "default_window", "simulate"]


@dataclass(frozen=True)
class MicroBatches:
    """One simulated epoch: the longest length, the sample count and the true tokens of every micro-batch."""

    maxima: np.ndarray
    sizes: np.ndarray
    totals: np.ndarray
    """``sum T`` of each micro-batch."""

    def __len__(self) -> int:
        return int(self.maxima.size)

    @property
    def samples(self) -> int:
        return int(self.sizes.sum())

    @property
    def longest_positions(self) -> int:
        """Positions when every micro-batch pads to its own longest sample (no buckets)."""
        return int(np.dot(self.maxima, self.sizes))


def default_window(samples: int, batch_size: int) -> int:
    """Hugging Face's mega-batch size, in micro-batches: ``min(n // (4 B), 50)``, at least 1."""
    return max(1, min(samples // (4 * batch_size), 50))


def _cut(ordered: np.ndarray, batch_size: int) -> MicroBatches:
    """Consecutive micro-batches of ``ordered`` (the last one may be short)."""
    full = ordered.size // batch_size
    rows = ordered[: full * batch_size].reshape(full, batch_size)
    maxima, totals = rows.max(axis=1), rows.sum(axis=1)
    sizes = np.full(full, batch_size, dtype=np.int64)
    tail = ordered[full * batch_size :]
    if tail.size:
        maxima, totals = np.append(maxima, tail.max()), np.append(totals, tail.sum())
        sizes = np.append(sizes, tail.size)
    return MicroBatches(maxima, sizes, totals)


def _concat(parts: list[MicroBatches]) -> MicroBatches:
    return MicroBatches(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("maxima", "sizes", "totals")))


def simulate(
    lengths: np.ndarray,
    batch_size: int,
    sampler: str = "random",
    *,
    window: int | None = None,
    seed: int = 0,
) -> MicroBatches:
    """The micro-batches one epoch over ``lengths`` gives under ``sampler``, shuffled with ``seed``."""
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}: expected one of {', '.join(SAMPLERS)}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    lengths = np.asarray(lengths, dtype=np.int64)
    if batch_size == 1:
        # Every sample is its own micro-batch: the order changes nothing.
        return MicroBatches(lengths, np.ones(lengths.size, dtype=np.int64), lengths)
    shuffled = lengths[np.random.default_rng(seed).permutation(lengths.size)]
    if sampler == "random":
        return _cut(shuffled, batch_size)
    mega = (window or default_window(lengths.size, batch_size)) * batch_size
    full = shuffled.size // mega
    # Sorting a mega-batch ascending or descending gives the same micro-batches (mega is a
    # multiple of B), so the sorted body is cut in one reshape.
    body = _cut(np.sort(shuffled[: full * mega].reshape(full, mega), axis=1).ravel(), batch_size)
    tail = shuffled[full * mega :]
    if not tail.size:
        return body
    # HF sorts the short last mega-batch longest first: its short micro-batch holds the shortest.
    return _concat([body, _cut(np.sort(tail)[::-1], batch_size)])
