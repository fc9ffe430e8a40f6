"""The run report: what one process's runtime checks saw, as a versioned pydantic model, and its reader.

One file per rank (``LAYOUTCHECK_REPORT=path``: ``{rank}`` in the path is
replaced by the global rank, otherwise ``.rank<N>`` is added before the
suffix when the job has more than one rank). A debug run appends it as JSON
Lines (`layoutcheck.runtime.reporting.runlog`: a header, then one chunk per
rollout and one at exit), so that a write costs the same at rollout 1,000
as at rollout 1; `RunReport.to_json` writes the same report as one JSON
document. `load_run_report` reads either form, and the single documents of
schema version 1. ``layoutcheck report RUN.json`` reads it. Everything in it
is ints and strings taken from shapes and Python values the trainer
already had: writing it never touches a tensor's data.

The schema is versioned (`SCHEMA_VERSION`); a reader refuses a newer major
version with a message that says which layoutcheck can read it. Per-sample
and per-micro-batch detail is bounded (the first rollouts in full, see
`RunReport.truncated`), while `Totals` and `ShapeCount` cover the whole run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.reporting.runlog import FORMAT, SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "HookRecord",
    "MicroBatchRecord",
    "NotARunReport",
    "ProblemRecord",
    "RankInfo",
    "RunReport",
    "SampleRecord",
    "ShapeCount",
    "Totals",
    "ViolationRecord",
    "load_run_report",
]



class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ViolationRecord(_Model):
    """One violation, as `layoutcheck.errors.Violation.to_dict` writes it (values described, never raw)."""

    invariant: str
    where: str
    field: str
    problem: str
    actual: str
    expected: str
    hint: str
    sample: int | list[int] | None = None
    micro_batch: int | None = None
    rollout: int | None = None
    """Which rollout of the run (0-based, in producer-call order), when known."""
    sizes: dict[str, str] = Field(default_factory=dict)
    space: str | None = None
    """The field's layout space, for a boundary contract's violation."""


class SampleRecord(_Model):
    """One sample of one rollout as the producer left it: ``T``, ``R``, ``P`` and the unit ``A``."""

    rollout: int
    sample: int
    total: int
    """``T_i``: prompt + response tokens."""
    response: int | None = None
    """``R_i``."""
    padded: int | None = None
    """``P_i`` (the sample's ``max_seq_lens`` entry); ``None`` under THD, where the batch builder pads."""
    unit: int | None = None
    """``A``, the alignment unit the sample was judged against."""


class MicroBatchRecord(_Model):
    """One micro-batch as the batch builder laid it out on this rank."""

    rollout: int
    index: int
    """``k``: the micro-batch's position in the rollout's schedule."""
    samples: list[int]
    layout: Literal["bshd", "thd"]
    totals: list[int]
    """The samples' current true lengths ``T``, in micro-batch order."""
    padded: int | None = None
    """BSHD: the ``P`` every sample was laid out with."""
    stream: int | None = None
    """THD: the global packed stream length, tail padding included."""
    shape: list[int] | None = None
    """The local ``tokens`` shape on this rank (``[B, L]`` or ``[1, N]``)."""


class ShapeCount(_Model):
    """A distinct local ``tokens`` shape and how many micro-batches had it (each one a compile for static shapes)."""

    shape: list[int]
    count: int


class Totals(_Model):
    """Whole-run aggregates (never truncated)."""

    rollouts: int = 0
    samples: int = 0
    micro_batches: int = 0
    true_tokens: int = 0
    """Sum of ``T_i`` over every sample the producer returned."""
    padded_tokens: int | None = None
    """Sum of ``P_i`` over those samples (BSHD); ``None`` when no sample had a ``P``."""
    batch_true_tokens: int = 0
    """Sum of ``T`` over every sample of every micro-batch the batch builder laid out."""
    batch_positions: int = 0
    """Positions those micro-batches were laid out with, globally (``B * P`` under BSHD, the stream under THD)."""


class HookRecord(_Model):
    """One configured hook: whether it went in, the calls it saw, and why it never went in."""

    role: str
    target: str
    installed: bool
    calls: int = 0
    problem: str | None = None


class ProblemRecord(_Model):
    """A configuration problem the debug mode reported and went on past (an unknown key, a bad variable)."""

    key: str | None = None
    source: str | None = None
    """The file, or ``environment``."""
    message: str


class RankInfo(_Model):
    """Which process wrote the report."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    cp_rank: int | None = None
    cp_size: int | None = None
    pid: int
    host: str


class RunReport(_Model):
    """Everything one process's runtime checks saw."""

    schema_version: int = SCHEMA_VERSION
    layoutcheck_version: str
    created: str
    """ISO 8601 time the report was written."""
    mode: Literal["raise", "warn", "record"]
    config_file: str | None = None
    hooks: list[str] = Field(default_factory=list)
    """The installed hooks as ``role: pkg.mod:func``."""
    hook_calls: list[HookRecord] = Field(default_factory=list)
    """Every configured hook, installed or not, with its calls (schema 2)."""
    problems: list[ProblemRecord] = Field(default_factory=list)
    """Configuration problems (schema 2): the checks ran with the rest of the configuration."""
    rank: RankInfo
    violations: list[ViolationRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    """Checks that could not run, one sentence each."""
    samples: list[SampleRecord] = Field(default_factory=list)
    micro_batches: list[MicroBatchRecord] = Field(default_factory=list)
    shapes: list[ShapeCount] = Field(default_factory=list)
    totals: Totals = Field(default_factory=Totals)
    truncated: bool = False
    """True when per-sample or per-micro-batch detail was cut to bound memory (the totals are complete)."""
    violations_dropped: dict[str, int] = Field(default_factory=dict)
    """Violations past the recorder's limit, counted per invariant only (schema 2)."""
    complete: bool = True
    """False when the process ended without its final write (it died): the report holds what it wrote before."""

    def to_json(self) -> str:
        """The report as indented JSON (the file format)."""
        return self.model_dump_json(indent=1)


class NotARunReport(LayoutSpecError):
    """The file is not a layoutcheck run report at all (not UTF-8, not JSON, no ``schema_version``)."""


def load_run_report(path: str | Path) -> RunReport:
    """Read and validate a run report, JSON Lines or one document; errors name the file and what is wrong (`LayoutSpecError`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise LayoutSpecError(f"cannot read run report {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:  # a binary file, or text in another encoding: run reports are UTF-8 JSON
        raise NotARunReport(
            f"{path} is not a layoutcheck run report: byte {err.start} is not UTF-8 ({err.object[err.start:err.start + 1]!r}); "
            "run reports are UTF-8 JSON written by the debug mode (LAYOUTCHECK_REPORT)"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if err.msg != "Extra data":  # one document, broken
            raise NotARunReport(f"{path} is not a layoutcheck run report: invalid JSON at line {err.lineno}") from None
        data = _merge_lines(path, text)
    else:
        if isinstance(data, dict) and data.get("format") == FORMAT:  # a header alone: nothing written after it
            data = _merge_lines(path, text)
    if not isinstance(data, dict) or "schema_version" not in data:
        raise NotARunReport(f"{path} is not a layoutcheck run report: no `schema_version`")
    _check_version(path, data["schema_version"])
    try:
        return RunReport.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise LayoutSpecError(
            f"{path} is not a valid run report: {err.error_count()} error(s), first at `{where}`: {first['msg']}"
        ) from None


def _check_version(path: Path, version: object) -> None:
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise LayoutSpecError(
            f"{path} has run-report schema version {version!r}; this layoutcheck reads up to "
            f"{SCHEMA_VERSION}: upgrade layoutcheck to read it"
        )


_LISTS = ("violations", "notes", "samples", "micro_batches")
"""Chunk fields that hold what is new since the previous chunk; the others stand for the whole run so far."""
_CUMULATIVE = ("mode", "hooks", "hook_calls", "problems", "totals", "truncated", "violations_dropped")


def _merge_lines(path: Path, text: str) -> dict[str, object]:
    """The report of a JSON Lines file: the header's fields, every chunk's new records, the last chunk's totals."""
    lines = text.splitlines()
    try:
        header = json.loads(lines[0])
    except (json.JSONDecodeError, IndexError):
        raise NotARunReport(f"{path} is not a layoutcheck run report: invalid JSON at line 1") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise NotARunReport(f"{path} is not a layoutcheck run report: line 1 is not a run-report header")
    _check_version(path, header.get("schema_version"))
    merged: dict[str, object] = {k: v for k, v in header.items() if k not in ("format", "pid")}
    for name in _LISTS:
        merged[name] = []
    shapes: dict[tuple[int, ...], int] = {}
    complete = False
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            part = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):  # the process died while writing its last line: keep the rest
                complete = False
                break
            raise LayoutSpecError(f"{path} is not a layoutcheck run report: invalid JSON at line {n}") from None
        if not isinstance(part, dict) or part.get("format") == FORMAT or part.get("pid") != header.get("pid"):
            raise LayoutSpecError(
                f"{path}: line {n} was written by another process (pid {part.get('pid') if isinstance(part, dict) else '?'}, "
                f"the header's is {header.get('pid')}): give each process its own report with `{{pid}}` or "
                "`{rank}` in the report path"
            )
        for name in _LISTS:
            merged[name].extend(part.get(name, ()))  # type: ignore[attr-defined]
        for grown in part.get("shape_counts", ()):
            key = tuple(grown["shape"])
            shapes[key] = shapes.get(key, 0) + grown["count"]
        merged.update({name: part[name] for name in _CUMULATIVE if name in part})
        complete = part.get("event") == "end"
    # most frequent first, ties in order of first sight (as the in-memory counts give them)
    merged["shapes"] = [{"shape": list(k), "count": n} for k, n in sorted(shapes.items(), key=lambda kv: -kv[1])]
    merged["complete"] = complete
    return merged
