"""The manual API, by its older module name: `LayoutChecker` and `check_rollout_data`.

They live in `layoutcheck.runtime.checker` (the checker and its per-rollout
state), `layoutcheck.runtime.wrappers` (the role wrappers and the signature
check made when wrapping) and `layoutcheck.runtime.observations` (what the
checks saw, for the run report). This module re-exports the two public
names so that ``from layoutcheck.runtime.api import LayoutChecker`` keeps
working.
"""

from __future__ import annotations

from layoutcheck.runtime.checker import LayoutChecker, check_rollout_data

__all__ = ["LayoutChecker", "check_rollout_data"]
