"""Known trainers' hook targets, as data: ``preset = "miles"`` is one line for a Miles user.

The paths are those of DESIGN.md's appendix (radixark/miles,
``miles/backends/training_utils``). A preset names functions only; the
wrappers read each function's own signature when they are installed, and
refuse one that does not fit its role (`LayoutSpecError` at install time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PRESETS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """Hook targets by role, and the parallel-state function."""

    hooks: Mapping[str, tuple[str, ...]]
    parallel_state: str | None = None


_MILES = "miles.backends.training_utils"

PRESETS: Mapping[str, Preset] = {
    "miles": Preset(
        hooks={
            "producer": (f"{_MILES}.data:get_rollout_data",),
            "batch-builder": (f"{_MILES}.data:get_batch",),
            "replay-filler": (f"{_MILES}.replay_data:fill_replay_data",),
            "offset-helper": (f"{_MILES}.cp_utils:get_logits_and_tokens_offset_with_cp",),
            # hooked only while the tracer is on
            "cp-slicer": (f"{_MILES}.cp_utils:slice_with_cp",),
            "response-slicer": (f"{_MILES}.cp_utils:slice_log_prob_with_cp",),
            "loss-function": (f"{_MILES}.loss:loss_function",),
        },
        parallel_state=f"{_MILES}.parallel:get_parallel_state",
    ),
}
