"""layoutcheck: keeps padded-sequence layouts honest in LLM training code.

The public names are re-exported here explicitly. Importing layoutcheck
never imports torch: the runtime reads tensors by duck typing and imports
nothing from torch, and the lint path (``layoutcheck check``, the pre-commit
hook) never does. The runtime names are resolved on first access, so the
lint path does not pay for loading the runtime either.
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports
from layoutcheck.version import __version__

TYPE_CHECKING = False  # not typing's: `import layoutcheck` stays as cheap as a replayed `check` needs
if TYPE_CHECKING:
    from layoutcheck.errors import ConfigError, LayoutcheckError, LayoutError, LayoutSpecError, Violation
    from layoutcheck.geometry import PaddedGeometry, alignment_unit
    from layoutcheck.runtime.activation.session import trace
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
    from layoutcheck.runtime.tracing.tagging import (
        tag_batch,
        tag_rollout,
        wrap_cp_offsets,
        wrap_slice_log_prob_with_cp,
        wrap_slice_with_cp,
    )
    from layoutcheck.runtime.tracing.space_tags import tag_space
    from layoutcheck.runtime.tracing.tags import Tag, clear_tags, geometry_of, tag, tagged_count, untag
    from layoutcheck.runtime.tracing.tracer import Tracer, active_tracer
    from layoutcheck.typing import Padded

# Every name is loaded on first access (explicit: one name, one module).
_LAZY = {
    "ConfigError": "layoutcheck.errors",
    "LayoutcheckError": "layoutcheck.errors",
    "LayoutError": "layoutcheck.errors",
    "LayoutSpecError": "layoutcheck.errors",
    "Violation": "layoutcheck.errors",
    "PaddedGeometry": "layoutcheck.geometry",
    "alignment_unit": "layoutcheck.geometry",
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
    # the tracer (tags, propagation, CP-helper wrappers) and the typeguard annotations
    "Tag": "layoutcheck.runtime.tracing.tags",
    "clear_tags": "layoutcheck.runtime.tracing.tags",
    "geometry_of": "layoutcheck.runtime.tracing.tags",
    "tag": "layoutcheck.runtime.tracing.tags",
    "tagged_count": "layoutcheck.runtime.tracing.tags",
    "untag": "layoutcheck.runtime.tracing.tags",
    "Tracer": "layoutcheck.runtime.tracing.tracer",
    "active_tracer": "layoutcheck.runtime.tracing.tracer",
    "trace": "layoutcheck.runtime.activation.session",
    "tag_batch": "layoutcheck.runtime.tracing.tagging",
    "tag_rollout": "layoutcheck.runtime.tracing.tagging",
    "tag_space": "layoutcheck.runtime.tracing.space_tags",
    "wrap_cp_offsets": "layoutcheck.runtime.tracing.tagging",
    "wrap_slice_log_prob_with_cp": "layoutcheck.runtime.tracing.tagging",
    "wrap_slice_with_cp": "layoutcheck.runtime.tracing.tagging",
    "Padded": "layoutcheck.typing",
}

__all__ = [
    "ConfigError",
    "CrossRankChecker",
    "CrossRankTimeout",
    "LayoutChecker",
    "LayoutError",
    "LayoutSpecError",
    "LayoutWarning",
    "LayoutcheckError",
    "PaddedGeometry",
    "Recorder",
    "Violation",
    "__version__",
    "alignment_unit",
    "check_batch",
    "check_batch_layout",
    "check_micro_batch",
    "check_replay",
    "check_response_offsets",
    "check_rollout",
    "check_rollout_data",
    "format_violations",
    "report",
    # the tracer and the typeguard annotations
    "Padded",
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
    "trace",
    "untag",
    "wrap_cp_offsets",
    "wrap_slice_log_prob_with_cp",
    "wrap_slice_with_cp",
]


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
