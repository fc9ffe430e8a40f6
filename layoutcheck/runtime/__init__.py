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

The names below load their module on first access, so that importing one
small module of the package (``layoutcheck.runtime.settings`` while a
configuration is validated, say) loads nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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

_LAZY = {
    "LayoutChecker": "layoutcheck.runtime.api",
    "check_rollout_data": "layoutcheck.runtime.api",
    "check_batch": "layoutcheck.runtime.checks",
    "check_batch_layout": "layoutcheck.runtime.checks",
    "check_micro_batch": "layoutcheck.runtime.checks",
    "check_replay": "layoutcheck.runtime.checks",
    "check_response_offsets": "layoutcheck.runtime.checks",
    "check_rollout": "layoutcheck.runtime.checks",
    "LayoutWarning": "layoutcheck.runtime.reporting",
    "Recorder": "layoutcheck.runtime.reporting",
    "format_violations": "layoutcheck.runtime.reporting",
    "report": "layoutcheck.runtime.reporting",
    "CrossRankChecker": "layoutcheck.runtime.distributed",
    "CrossRankTimeout": "layoutcheck.runtime.distributed",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'layoutcheck.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
