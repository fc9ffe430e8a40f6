"""The run report as a debug run writes it: JSON Lines, appended, so each write costs what is new.

Rewriting the whole report after every rollout cost more as the run went on
(issue 19: 2-5 ms a rollout, 6-8 ms by rollout 15, and the violations alone
may reach 10,000). A `RunLog` instead appends one line per write:

* line 1, the **header** (`FORMAT`, `SCHEMA_VERSION`, the layoutcheck
  version, when, the configuration file, the process's rank, its pid);
* then one **chunk** per write: the violations, notes, samples and
  micro-batches kept since the previous chunk (each kept once, bounded by
  `~layoutcheck.runtime.reporting.observations.ObservationLimits` and the
  recorder's limit), the growth of the distinct-shape counts
  (``shape_counts``), and the run's small cumulative values as they stand
  (totals, what was cut, the hooks with their calls, the configuration
  problems, the mode). ``event`` is ``"rollout"`` for a write during the
  run and ``"end"`` for the one at exit.

So a write at rollout 1,000 costs no more than one at rollout 1, and a
process that dies leaves every chunk it wrote. `~layoutcheck.runtime.reporting.runreport.load_run_report`
reads the lines back into one `RunReport` (a last line cut short by a crash
is left out, and the report says it is not complete). Nothing here imports
pydantic: the lines are plain JSON of the report's fields.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layoutcheck.runtime.reporting.modes import Recorder
from layoutcheck.runtime.reporting.observations import ObservationLog

__all__ = ["FORMAT", "SCHEMA_VERSION", "Cursor", "RunLog", "chunk"]

FORMAT = "layoutcheck-run-report"
"""The header's ``format``: what tells a run report in JSON Lines from any other file."""
SCHEMA_VERSION = 2
"""The run report's schema version (also the model's, `~layoutcheck.runtime.reporting.runreport.RunReport`).

1: one JSON document, rewritten after each rollout. 2: JSON Lines, appended
(this module); the document form stays readable and writable. Bumped when a
field changes meaning or disappears; adding optional fields keeps it."""


@dataclass
class Cursor:
    """How much of the run's records the lines written so far hold."""

    violations: int = 0
    notes: int = 0
    kept: tuple[int, int] = (0, 0)
    """Samples and micro-batches (`ObservationLog.kept`)."""
    shapes: dict[tuple[int, ...], int] = field(default_factory=dict)
    """The distinct-shape counts written so far."""


def chunk(recorder: Recorder, log: ObservationLog, cursor: Cursor, *, event: str,
          state: Mapping[str, Any]) -> dict[str, Any]:
    """One chunk line: what ``recorder`` and ``log`` hold past ``cursor`` (moved on), and ``state``'s values as they stand.

    ``state`` holds the cumulative fields the caller knows (``mode``,
    ``hooks``, ``hook_calls``, ``problems``); the totals, shapes and what was
    cut come from ``log``, the violations past the recorder's limit from it.
    """
    violations = recorder.violations[cursor.violations:]
    rollouts = recorder.rollouts[cursor.violations:]
    out: dict[str, Any] = {"event": event, "pid": os.getpid(), **state}
    out["violations"] = [{**v.to_dict(), "rollout": r} for v, r in zip(violations, rollouts)]
    out["notes"] = recorder.notes[cursor.notes:]
    out.update(log.detail_since(cursor.kept))
    out["shape_counts"] = log.shapes_since(cursor.shapes)
    out.update(log.aggregates())
    out["violations_dropped"] = dict(recorder.dropped)
    cursor.violations += len(violations)
    cursor.notes = len(recorder.notes)
    cursor.kept = log.kept()
    return out


class RunLog:
    """One process's run report file, appended a chunk at a time (see the module docs).

    The first `write` truncates the file and starts it with the header;
    later ones append. Each line is written whole with one ``write`` call
    on a file opened for appending.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cursor = Cursor()
        self._started = False

    @property
    def started(self) -> bool:
        """Whether the header is written."""
        return self._started

    def write(self, header: Callable[[], dict[str, Any]], line: Callable[[Cursor], dict[str, Any]]) -> Path:
        """Append ``line(cursor)`` (after ``header()`` on the first write); returns the path.

        ``line`` gets the cursor and moves it on; it runs only once the file
        is open, so a write that cannot open the file loses nothing.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a" if self._started else "w", encoding="utf-8") as f:
            text = ""
            if not self._started:
                text = json.dumps({"format": FORMAT, "schema_version": SCHEMA_VERSION, **header()}) + "\n"
            text += json.dumps(line(self.cursor), separators=(",", ":")) + "\n"
            f.write(text)
        self._started = True
        return self.path
