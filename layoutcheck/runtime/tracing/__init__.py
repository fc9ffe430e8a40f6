"""The tracer: tensors tagged with their layout, the tags carried through torch ops, a layout broken at the op.

* `tags`: a `Tag` (sample, field, ``T``, ``R``, ``P``, ``A``, CP geometry) kept
  beside a tensor in a weak side table;
* `propagation`: how an op moves a tag, and what breaks a layout (pure
  Python over tags and shapes);
* `tracer`: `Tracer`, the ``TorchFunctionMode`` that applies those rules
  inside ``with tracer:``;
* `space_rules`: the space rules (S1-S5: bugs that keep every shape intact);
* `op_rules`: which torch op gets which rule;
* `tagging`: where tags come from (the producer's rollout, the batch
  builder's output, the trainer's CP helpers);
* `space_tags`: `tag_space`, the one entry point that tags a value with a
  `layoutcheck.spaces.Space` (what a boundary says a function holds);
* `trace_switch`: whether the tracer runs (``LAYOUTCHECK_TRACE``, the
  ``tracer`` key, the default per mode);
* `session_tracer`: the tracer of a debug session, fed by its hooks.

torch is imported by `tracer` only (and by what imports it).
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.tracing.tagging import (
        tag_batch,
        tag_rollout,
        wrap_cp_offsets,
        wrap_slice_log_prob_with_cp,
        wrap_slice_with_cp,
    )
    from layoutcheck.runtime.tracing.space_tags import tag_space
    from layoutcheck.runtime.tracing.tags import Tag, clear_tags, geometry_of, tag, tagged_count, untag
    from layoutcheck.runtime.tracing.trace_switch import tracer_enabled
    from layoutcheck.runtime.tracing.tracer import Tracer, active_tracer

_LAZY = {
    "Tag": "layoutcheck.runtime.tracing.tags",
    "clear_tags": "layoutcheck.runtime.tracing.tags",
    "geometry_of": "layoutcheck.runtime.tracing.tags",
    "tag": "layoutcheck.runtime.tracing.tags",
    "tagged_count": "layoutcheck.runtime.tracing.tags",
    "untag": "layoutcheck.runtime.tracing.tags",
    "tag_batch": "layoutcheck.runtime.tracing.tagging",
    "tag_rollout": "layoutcheck.runtime.tracing.tagging",
    "tag_space": "layoutcheck.runtime.tracing.space_tags",
    "wrap_cp_offsets": "layoutcheck.runtime.tracing.tagging",
    "wrap_slice_log_prob_with_cp": "layoutcheck.runtime.tracing.tagging",
    "wrap_slice_with_cp": "layoutcheck.runtime.tracing.tagging",
    "tracer_enabled": "layoutcheck.runtime.tracing.trace_switch",
    "Tracer": "layoutcheck.runtime.tracing.tracer",
    "active_tracer": "layoutcheck.runtime.tracing.tracer",
}

__all__ = [
    "Tag",
    "Tracer",
    "active_tracer",
    "clear_tags",
    "geometry_of",
    "tag",
    "tag_batch",
    "tag_rollout",
    "tag_space",
    "tagged_count",
    "tracer_enabled",
    "untag",
    "wrap_cp_offsets",
    "wrap_slice_log_prob_with_cp",
    "wrap_slice_with_cp",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
