"""What a bucket list costs: positions laid out when each micro-batch pads to the bucket of its longest.

A micro-batch of ``B`` samples whose longest is ``m`` is laid out with
``B * resolve_bucket(m, buckets)`` positions (`layoutcheck.geometry`, G6).
Summed over an epoch that only needs, for each bucket ``b_j``, the number
of samples in micro-batches whose longest lies in ``(b_{j-1}, b_j]``: a
difference of one cumulative count (`MaximaDistribution`), so scoring a
bucket list costs ``O(K)`` whatever the corpus size. The tests check it
against ``resolve_bucket`` micro-batch by micro-batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layoutcheck import geometry
from layoutcheck.advisor.sampler import MicroBatches

__all__ = ["MaximaDistribution", "padded_to"]


def padded_to(buckets: Sequence[int], maxima: np.ndarray) -> np.ndarray:
    """Each micro-batch's padded length: `geometry.resolve_bucket` of its longest sample (G6).

    Resolved once per distinct length, so a million micro-batches cost a few
    thousand calls.
    """
    distinct, index = np.unique(np.asarray(maxima, dtype=np.int64), return_inverse=True)
    resolved = np.array([geometry.resolve_bucket(int(m), buckets) for m in distinct], dtype=np.int64)
    return resolved[index]


@dataclass(frozen=True)
class MaximaDistribution:
    """Per-micro-batch maxima as a cumulative count of samples, up to ``max_length``."""

    cumulative: np.ndarray
    """``cumulative[x]``: samples in micro-batches whose longest sample has at most ``x`` tokens."""
    longest_positions: int
    """Positions when each micro-batch pads to its own longest sample."""
    micro_batches: int

    @classmethod
    def of(cls, batches: MicroBatches, max_length: int) -> MaximaDistribution:
        """The distribution of ``batches``; every micro-batch's longest must be at most ``max_length``."""
        if len(batches) and int(batches.maxima.max()) > max_length:
            raise ValueError(f"a micro-batch holds {int(batches.maxima.max())} tokens, above max_length {max_length}")
        counts = np.bincount(batches.maxima, weights=batches.sizes, minlength=max_length + 1)
        return cls(np.cumsum(counts).astype(np.int64), batches.longest_positions, len(batches))

    @property
    def samples(self) -> int:
        return int(self.cumulative[-1])

    @property
    def max_length(self) -> int:
        return self.cumulative.size - 1

    def weights(self, buckets: Sequence[int]) -> np.ndarray:
        """Samples whose micro-batch lands in each bucket (``buckets`` ascending, the last ``max_length``)."""
        at = self.cumulative[np.asarray(buckets, dtype=np.int64)]
        return np.diff(at, prepend=0)

    def positions(self, buckets: Sequence[int]) -> int:
        """Positions laid out with ``buckets`` (validated, ascending, ending at ``max_length``)."""
        if not buckets or buckets[-1] != self.max_length:
            raise ValueError(f"the last bucket must be max_length {self.max_length}, got {list(buckets)}")
        return int(np.dot(self.weights(buckets), np.asarray(buckets, dtype=np.int64)))

    def floor_positions(self, quantum: int, sp_degree: int = 1, cp_degree: int = 1) -> int:
        """Positions when every micro-batch pads to the grid (`geometry.bucket_grid`): no bucket list does better."""
        return self.positions(geometry.bucket_grid(self.max_length, quantum, sp_degree=sp_degree, cp_degree=cp_degree))
