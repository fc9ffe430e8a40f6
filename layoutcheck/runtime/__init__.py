"""The runtime half of layoutcheck: layout invariants checked on live data.

Modules (small, one idea each):

* `layoutcheck.runtime.checks`: the invariants O1-O5, G1-G6 (DESIGN.md
  section 3) over Python ints and tensor shapes, returning violations
  (implemented in `owner` for O1-O5 and `consumers` for G1-G6, over
  `common`: field names, hints, argument validation);
* `layoutcheck.runtime.meta`: metadata access (shapes only, torch-function
  handling off, no GPU sync, torch never imported);
* `layoutcheck.runtime.reporting`: raise / warn / record (and the notes of
  checks that could not run: warn and record modes never crash training);
* `layoutcheck.runtime.adapters`: how a Miles-shaped trainer is read;
* `layoutcheck.runtime.api`: `LayoutChecker`, the manual wrappers;
* `layoutcheck.runtime.distributed`: `CrossRankChecker`, cross-rank
  agreement (X1) over a gloo side group, its values and messages in
  `agreement` (torch is imported only when a checker is made).

The tracer (tensor tags, DESIGN.md section 8) and the automatic hooks are to
sit beside these and feed the same checks. Nothing here imports torch.
"""

from layoutcheck.runtime.api import LayoutChecker, check_rollout_data
from layoutcheck.runtime.checks import (
    check_batch,
    check_batch_layout,
    check_micro_batch,
    check_replay,
    check_response_offsets,
    check_rollout,
)
from layoutcheck.runtime.distributed import CrossRankChecker, CrossRankTimeout
from layoutcheck.runtime.reporting import LayoutWarning, Recorder, format_violations, report

__all__ = [
    "CrossRankChecker",
    "CrossRankTimeout",
    "LayoutChecker",
    "LayoutWarning",
    "Recorder",
    "check_batch",
    "check_batch_layout",
    "check_micro_batch",
    "check_replay",
    "check_response_offsets",
    "check_rollout",
    "check_rollout_data",
    "format_violations",
    "report",
]
