"""The layout contract: the invariants O1-O5 and G1-G6 over ints and shapes, and how a trainer's data is read.

* `checks`: the one place to import the checks from; they live in `owner`
  (O1-O5, at the producer's exit) and `consumers` (G1-G6, at the batch
  builder, the replay filler and the response offsets), over `common`
  (field names, hints, argument validation);
* `meta`: shapes and sizes read with torch-function handling off (never a
  GPU sync, torch never imported);
* `adapters`: how a Miles/slime-shaped trainer is read (the parameters each
  role needs, ``args``, the parallel state, the batch dict);
* `arrays`: how a boundary contract's field is read whatever array kind
  holds it (torch tensors, numpy arrays, lists of ints, lists of per-sample
  arrays, numpy object arrays), and what to write when it cannot be;
* `boundary`, `expressions`, `invariants`: boundary contracts (B1-B6), their
  spaces, paths into a call (containers, TensorDict-like batches), checks.

Every check is a function of ints and shapes returning ``list[Violation]``;
nothing here keeps state or decides what a violation does (`reporting`).
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.contract.adapters import MilesAdapter
    from layoutcheck.runtime.contract.checks import (
        check_batch,
        check_batch_layout,
        check_micro_batch,
        check_replay,
        check_response_offsets,
        check_rollout,
    )

_LAZY = {
    "check_batch": "layoutcheck.runtime.contract.checks",
    "check_batch_layout": "layoutcheck.runtime.contract.checks",
    "check_micro_batch": "layoutcheck.runtime.contract.checks",
    "check_replay": "layoutcheck.runtime.contract.checks",
    "check_response_offsets": "layoutcheck.runtime.contract.checks",
    "check_rollout": "layoutcheck.runtime.contract.checks",
    "MilesAdapter": "layoutcheck.runtime.contract.adapters",
}

__all__ = [
    "MilesAdapter",
    "check_batch",
    "check_batch_layout",
    "check_micro_batch",
    "check_replay",
    "check_response_offsets",
    "check_rollout",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
