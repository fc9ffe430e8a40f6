"""The runtime invariants of docs/design.md#the-invariants, over ints, shapes and tensors.

This module is the one place to import the checks from; they live in
`layoutcheck.runtime.contract.owner` (O1-O5) and `layoutcheck.runtime.contract.consumers`
(G1-G6), over `layoutcheck.runtime.contract.common` (validation, hints).

* at the owner's exit (`check_rollout`): O1-O5;
* at the rectangular consumers, per micro-batch: `check_micro_batch` (G1, G2,
  the all-gather part of G3, G6: plain ints, so it can run *before* the batch
  builder and fail closed), `check_batch_layout` (G3 shapes, G4 counts on the
  builder's output), `check_batch` (both), `check_replay` (G5),
  `check_response_offsets` (G4 at the response-offset helper).

Every check returns ``list[Violation]`` and decides nothing: a mode is applied
by `layoutcheck.runtime.reporting.modes.report`. Expected values come from
`layoutcheck.geometry` only; no formula is re-derived here.

Bad *arguments* (negative sizes, ``cp_rank >= cp_size``, unknown layout or
scheme names, per-sample argument lists of different lengths, a tensor where a
Python int is needed) raise `LayoutSpecError` before anything is judged.
Per-sample lists *inside* a rollout dict that disagree in length are data,
and break O1.

Tensors are read through `layoutcheck.runtime.contract.meta` inside `metadata_only()`:
shapes and Python ints only, never a value, so no check synchronises a GPU.
"""

from layoutcheck.runtime.contract.common import REPLAY_FIELDS, RESPONSE_FIELDS, SHAPE_FIELDS, UNSLICED_RESPONSE_FIELDS
from layoutcheck.runtime.contract.consumers import (
    check_batch,
    check_batch_layout,
    check_micro_batch,
    check_replay,
    check_response_offsets,
)
from layoutcheck.runtime.contract.owner import check_rollout

__all__ = [
    "REPLAY_FIELDS",
    "RESPONSE_FIELDS",
    "SHAPE_FIELDS",
    "UNSLICED_RESPONSE_FIELDS",
    "check_batch",
    "check_batch_layout",
    "check_micro_batch",
    "check_replay",
    "check_response_offsets",
    "check_rollout",
]
