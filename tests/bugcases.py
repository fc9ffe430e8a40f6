"""How each bug flag of the reference pipeline is provoked, and the invariant that must name it.

Shared by the tests that run the pipeline end to end under the debug mode
(a subprocess, torchrun, a Ray actor, pytest with the plugin). The rollout
has samples of different padded lengths (so micro-batches of 2 can mix P)
and a media placeholder on sample 0 (so the multimodal expansion has
something to grow).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LENGTHS = [300, 130, 700, 1000, 250, 900, 2000, 129]
MEDIA = {0: 193}  # sample 0's placeholder grows to 193 tokens
BUCKETS = (512, 1024, 2048)
CP = 2


@dataclass(frozen=True)
class BugCase:
    """``make_args`` overrides, the CP rank (of `CP`) that shows the bug, the invariant that must name it."""

    invariant: str
    rank: int = 0
    args: dict[str, Any] = field(default_factory=dict)
    buckets: bool = False
    """Needs the static shape buckets `BUCKETS` in the runtime configuration too."""
    tracer: bool = False
    """Only the tracer sees it (the bug is inside a consumer no boundary hook looks into): runs need it on."""
    traced: str | None = None
    """With the tracer on, the invariant it names first in raise mode, where that differs (it stops at the op)."""


CASES: dict[str, BugCase] = {
    "rollout_global_padding": BugCase("O3"),
    "mixed_padded_lengths": BugCase("G1", args={"micro_batch_size": 2}),
    "logprobs_sliced_with_other_p": BugCase("O4", traced="G4"),  # the tracer: at the helper call, in the producer
    "replay_thd_pad_multiplier": BugCase("G5", args={"qkv_format": "thd", "micro_batch_size": 2}),
    "stale_lengths_after_expansion": BugCase("G2"),
    "offsets_without_layout": BugCase("G4", rank=1),
    "alignment_max_not_lcm": BugCase("O2", args={"compress_ratios": [3]}),
    "wrong_bucket": BugCase("G6", args={"buckets": BUCKETS, "micro_batch_size": 2}, buckets=True),
    "loss_repad_to_rollout_max": BugCase("G3", args={"rollout_max_context_len": 4096}, tracer=True),
    "loss_cat_mixed_padded_lengths": BugCase("G1", args={"qkv_format": "thd", "micro_batch_size": 2}, tracer=True),
}


GRID = [
    (fmt, scheme, cp, b)
    for fmt in ("bshd", "thd")
    for scheme in ("zigzag", "allgather")
    for cp in (1, 2, 4)
    for b in (1, 2, 4)
    if not (scheme == "allgather" and cp == 1)  # one scheme only: nothing is sliced
]
"""Every layout, CP scheme, CP size and micro-batch size a correct run must pass silently: ``(qkv_format, scheme, cp, B)``."""
