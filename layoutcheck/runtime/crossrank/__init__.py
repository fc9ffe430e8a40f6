"""Cross-rank agreement (X1): every CP rank of a micro-batch lays it out alike.

* `agreement`: what a rank says about a micro-batch (a fixed header of ints,
  then the lists when digests differ) and how the answers compare, as plain
  data: no torch, no process group;
* `distributed`: `CrossRankChecker` exchanges those values over a gloo side
  group of the CP group, with a timeout that names the missing ranks
  (`CrossRankTimeout`).
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.crossrank.distributed import CrossRankChecker, CrossRankTimeout

_LAZY = {
    "CrossRankChecker": "layoutcheck.runtime.crossrank.distributed",
    "CrossRankTimeout": "layoutcheck.runtime.crossrank.distributed",
}

__all__ = ["CrossRankChecker", "CrossRankTimeout"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
