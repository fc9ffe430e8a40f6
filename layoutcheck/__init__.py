"""layoutcheck: keeps padded-sequence layouts honest in LLM training code.

The public names are re-exported here explicitly. Importing layoutcheck
never imports torch: the runtime reads tensors by duck typing and imports
nothing from torch, and the lint path (``layoutcheck check``, the pre-commit
hook) never does. The runtime names are resolved on first access, so the
lint path does not pay for loading the runtime either.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `import layoutcheck` stays as cheap as a replayed `check` needs
if TYPE_CHECKING:
    from layoutcheck.errors import ConfigError, LayoutcheckError, LayoutError, LayoutSpecError, Violation
    from layoutcheck.geometry import PaddedGeometry, alignment_unit
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
    from layoutcheck.runtime.tagging import (
        tag_batch,
        tag_rollout,
        wrap_cp_offsets,
        wrap_slice_log_prob_with_cp,
        wrap_slice_with_cp,
    )
    from layoutcheck.runtime.tags import Tag, clear_tags, geometry_of, tag, tagged_count, untag
    from layoutcheck.runtime.tracer import Tracer, active_tracer, trace
    from layoutcheck.typing import Padded

__version__ = "0.1.0"

# Every name is loaded on first access (explicit: one name, one module).
_LAZY = {
    "ConfigError": "layoutcheck.errors",
    "LayoutcheckError": "layoutcheck.errors",
    "LayoutError": "layoutcheck.errors",
    "LayoutSpecError": "layoutcheck.errors",
    "Violation": "layoutcheck.errors",
    "PaddedGeometry": "layoutcheck.geometry",
    "alignment_unit": "layoutcheck.geometry",
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
    # the tracer (tags, propagation, CP-helper wrappers) and the typeguard annotations
    "Tag": "layoutcheck.runtime.tags",
    "clear_tags": "layoutcheck.runtime.tags",
    "geometry_of": "layoutcheck.runtime.tags",
    "tag": "layoutcheck.runtime.tags",
    "tagged_count": "layoutcheck.runtime.tags",
    "untag": "layoutcheck.runtime.tags",
    "Tracer": "layoutcheck.runtime.tracer",
    "active_tracer": "layoutcheck.runtime.tracer",
    "trace": "layoutcheck.runtime.tracer",
    "tag_batch": "layoutcheck.runtime.tagging",
    "tag_rollout": "layoutcheck.runtime.tagging",
    "wrap_cp_offsets": "layoutcheck.runtime.tagging",
    "wrap_slice_log_prob_with_cp": "layoutcheck.runtime.tagging",
    "wrap_slice_with_cp": "layoutcheck.runtime.tagging",
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
    "tagged_count",
    "trace",
    "untag",
    "wrap_cp_offsets",
    "wrap_slice_log_prob_with_cp",
    "wrap_slice_with_cp",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'layoutcheck' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
