"""The bucket lists people pick by hand, to compare the optimum with.

Each takes the number of buckets ``k`` and returns a valid list on the grid
(`layoutcheck.geometry.bucket_grid`: multiples of the grid step, ascending,
the last one ``max_length``), possibly with fewer than ``k`` buckets:

* ``even``: ``max_length * i / k`` for ``i = 1 .. k``, rounded up to the grid;
* ``powers_of_two``: ``max_length`` and the ``k - 1`` largest powers of two
  below it that lie on the grid;
* ``quantiles``: the sample-length quantiles ``i / k`` (``i < k``), rounded up
  to the grid, then ``max_length``. Quantiles that round to the same grid
  length collapse (the advisor warns about it).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import numpy as np

from layoutcheck import geometry

__all__ = ["BASELINES", "SampleQuantiles", "even_buckets", "power_of_two_buckets", "quantile_buckets"]

BASELINES = ("quantiles", "powers_of_two", "even")


def _on_grid(values: list[int], max_length: int, step: int) -> tuple[int, ...]:
    """Round up to the grid, cap at ``max_length``, drop repeats, end with ``max_length``."""
    out: list[int] = []
    for v in values:
        b = min(geometry.round_up(max(int(v), 1), step), max_length)
        if not out or b > out[-1]:
            out.append(b)
    if not out or out[-1] != max_length:
        out.append(max_length)
    return tuple(out)


def even_buckets(k: int, max_length: int, step: int) -> tuple[int, ...]:
    """``k`` evenly spaced buckets up to ``max_length``, on the grid."""
    return _on_grid([geometry.ceil_div(max_length * i, k) for i in range(1, k + 1)], max_length, step)


def power_of_two_buckets(k: int, max_length: int, step: int) -> tuple[int, ...]:
    """``max_length`` and the ``k - 1`` largest powers of two below it that are multiples of ``step``."""
    powers = [2**e for e in range(max_length.bit_length()) if 2**e < max_length and 2**e % step == 0]
    chosen = powers[-(k - 1) :] if k > 1 else []
    return _on_grid(chosen, max_length, step)


class SampleQuantiles:
    """The sample-length quantiles ``i / k`` for every ``k`` asked, computed in one pass over the lengths."""

    def __init__(self, lengths: np.ndarray, ks: Iterable[int]) -> None:
        fractions = sorted({Fraction(i, k) for k in ks for i in range(1, k)})
        values = np.quantile(lengths, [float(f) for f in fractions], method="inverted_cdf") if fractions else []
        self._at = {f: int(v) for f, v in zip(fractions, values)}

    def __call__(self, k: int) -> list[int]:
        return [self._at[Fraction(i, k)] for i in range(1, k)]


def quantile_buckets(
    k: int, lengths: np.ndarray | SampleQuantiles, max_length: int, step: int
) -> tuple[int, ...]:
    """Sample-length quantiles ``1/k .. (k-1)/k`` rounded up to the grid, then ``max_length``."""
    quantiles = lengths if isinstance(lengths, SampleQuantiles) else SampleQuantiles(lengths, [k])
    return _on_grid(quantiles(k), max_length, step)
