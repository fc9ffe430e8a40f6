"""What becomes of what the checks found: raise, warn or record, and the run report.

* `modes`: `report` applies a mode (raise a `LayoutError`, warn with a
  `LayoutWarning`, or record only) to a list of violations; a `Recorder`
  keeps them, and the notes of checks that could not run;
* `observations`: what the checks saw (per sample, per micro-batch, whole-run
  aggregates), ints only and bounded in memory;
* `setup`: what a debug session set up (each hook, its calls, what never went
  in and why) and the configuration's problems: the summary's second line;
* `runlog`: the run report as a debug run appends it (JSON Lines, one chunk
  per rollout, no pydantic);
* `runreport`: the versioned run report of one process (pydantic), and
  `load_run_report`, which reads either form.
"""

from __future__ import annotations

from layoutcheck.lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from layoutcheck.runtime.reporting.modes import LayoutWarning, Recorder, check_mode, format_violations, report
    from layoutcheck.runtime.reporting.observations import ObservationLimits, Observations
    from layoutcheck.runtime.reporting.runreport import RunReport, load_run_report

_LAZY = {
    "LayoutWarning": "layoutcheck.runtime.reporting.modes",
    "Recorder": "layoutcheck.runtime.reporting.modes",
    "check_mode": "layoutcheck.runtime.reporting.modes",
    "format_violations": "layoutcheck.runtime.reporting.modes",
    "report": "layoutcheck.runtime.reporting.modes",
    "ObservationLimits": "layoutcheck.runtime.reporting.observations",
    "Observations": "layoutcheck.runtime.reporting.observations",
    "RunReport": "layoutcheck.runtime.reporting.runreport",
    "load_run_report": "layoutcheck.runtime.reporting.runreport",
}

__all__ = [
    "LayoutWarning",
    "ObservationLimits",
    "Observations",
    "Recorder",
    "RunReport",
    "check_mode",
    "format_violations",
    "load_run_report",
    "report",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
