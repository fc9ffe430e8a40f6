"""`LayoutChecker`: the contract checked around a trainer's functions, with its state per rollout.

* `layout_checker`: `LayoutChecker` (``wrap(role, fn)``) and the one-off
  `check_rollout_data`;
* `wrappers`: the wrapper of each role, and the signature check made when
  wrapping;
* `consumer_calls`: what each call of the batch builder, the replay filler
  and the offset helper checks, before and after it runs;
* `rollouts`: what the checker remembers of one rollout (ints only).

It patches nothing: the caller, or the hooks (`layoutcheck.runtime.hooks`),
put a wrapper where the program looks the function up.
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.checker.layout_checker import CrossRankOptions, LayoutChecker, check_rollout_data

_LAZY = {
    "CrossRankOptions": "layoutcheck.runtime.checker.layout_checker",
    "LayoutChecker": "layoutcheck.runtime.checker.layout_checker",
    "check_rollout_data": "layoutcheck.runtime.checker.layout_checker",
}

__all__ = ["CrossRankOptions", "LayoutChecker", "check_rollout_data"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
