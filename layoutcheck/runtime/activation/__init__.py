"""The debug mode: ``LAYOUTCHECK=raise|warn|record`` switches the configured hooks on in any Python process.

* `session`: one `Session` per process (the checker, the installed hooks,
  the tracer when on, the run report), made by `activate` (from code, the
  pytest plugin, or the ``.pth`` file at interpreter start through
  `activate_from_environment`);
* `ray_env`: carries the variables into Ray workers (``ray.init``'s
  ``runtime_env``);
* `exit_status`: ends a process with status 1 from its exit handler when
  raise mode finds the run was not checked as configured.
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.activation.session import (
        Mark,
        Session,
        activate,
        activate_from_environment,
        active_session,
        deactivate,
        trace,
    )

_LAZY = {
    "Mark": "layoutcheck.runtime.activation.session",
    "Session": "layoutcheck.runtime.activation.session",
    "activate": "layoutcheck.runtime.activation.session",
    "activate_from_environment": "layoutcheck.runtime.activation.session",
    "active_session": "layoutcheck.runtime.activation.session",
    "deactivate": "layoutcheck.runtime.activation.session",
    "trace": "layoutcheck.runtime.activation.session",
}

__all__ = ["Mark", "Session", "activate", "activate_from_environment", "active_session", "deactivate", "trace"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
