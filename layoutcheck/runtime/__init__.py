"""The runtime half of layoutcheck: layout invariants checked on live data.

Modules (small, one idea each), in the order data flows through them:

* the invariants: `checks` (O1-O5 in `owner`, G1-G6 in `consumers`, over
  `common`), pure functions of ints and shapes returning violations; `meta`
  reads shapes with torch-function handling off (no GPU sync, torch never
  imported);
* the checker: `checker` (`LayoutChecker` and its per-rollout state,
  `rollouts`), `wrappers` (the role wrappers and their signature check),
  `consumer_calls` (what each consumer call checks), `adapters` (how a
  Miles-shaped trainer is read), `observations` (what the checks saw, for
  reports), `reporting` (raise / warn / record, and notes);
* the debug mode: `settings` and `presets` (``[tool.layoutcheck.runtime]``),
  `hooks` (wrappers installed by dotted path), `activation` (the
  ``LAYOUTCHECK`` environment variable, sessions, the run report of
  `runreport`), `ray_env` (carrying it into Ray workers);
* across ranks: `distributed` (`CrossRankChecker`, X1 over a gloo side
  group) with its values and messages in `agreement`;
* the tracer: `tags`, `propagation`, `tracer`, `tagging`, `trace_switch`, and
  `session_tracer` (the tracer in a debug session, fed by the hooks).

Nothing here imports torch at import time. The names below load their module on first access, so that importing one
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
