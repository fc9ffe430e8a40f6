"""The runtime half of layoutcheck: layout invariants checked on live data.

One subpackage per idea, each depending only on those above it:

* `contract`: the invariants (O1-O5, G1-G6) over ints and shapes, and how a trainer's data is read;
* `reporting`: what a violation does (raise, warn, record), what the checks saw, the JSON run report;
* `crossrank`: X1, every CP rank of a micro-batch agrees on its layout (a gloo side group);
* `checker`: `LayoutChecker`, the contract checked around a trainer's functions, with its per-rollout state;
* `hooks`: ``[tool.layoutcheck.runtime]`` and presets, and installing wrappers by dotted path;
* `tracing`: tensor tags carried through torch ops by the tracer, and the tracer of a debug session;
* `activation`: the debug mode (``LAYOUTCHECK``, one session per process, Ray workers).

Nothing here imports torch at import time. The names below load their
module on first access, so that importing one small module of the package
(``layoutcheck.runtime.hooks.settings`` while a configuration is validated,
say) loads nothing else.
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.checker.layout_checker import LayoutChecker, check_rollout_data
    from layoutcheck.runtime.contract.checks import (
        check_batch,
        check_batch_layout,
        check_micro_batch,
        check_replay,
        check_response_offsets,
        check_rollout,
    )
    from layoutcheck.runtime.crossrank.distributed import CrossRankChecker, CrossRankTimeout
    from layoutcheck.runtime.reporting.modes import LayoutWarning, Recorder, format_violations, report

_LAZY = {
    "LayoutChecker": "layoutcheck.runtime.checker.layout_checker",
    "check_rollout_data": "layoutcheck.runtime.checker.layout_checker",
    "check_batch": "layoutcheck.runtime.contract.checks",
    "check_batch_layout": "layoutcheck.runtime.contract.checks",
    "check_micro_batch": "layoutcheck.runtime.contract.checks",
    "check_replay": "layoutcheck.runtime.contract.checks",
    "check_response_offsets": "layoutcheck.runtime.contract.checks",
    "check_rollout": "layoutcheck.runtime.contract.checks",
    "LayoutWarning": "layoutcheck.runtime.reporting.modes",
    "Recorder": "layoutcheck.runtime.reporting.modes",
    "format_violations": "layoutcheck.runtime.reporting.modes",
    "report": "layoutcheck.runtime.reporting.modes",
    "CrossRankChecker": "layoutcheck.runtime.crossrank.distributed",
    "CrossRankTimeout": "layoutcheck.runtime.crossrank.distributed",
}

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

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
