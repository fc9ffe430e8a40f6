"""Cross-rank agreement (X1) as plain data: what a rank says, and how the answers compare.

`layoutcheck.runtime.crossrank.distributed` moves these vectors between processes;
this module knows nothing of torch or process groups, so the comparison and
its messages are tested without spawning anything.

A step's checks are exchanged together (`CrossRankChecker` in deferred mode, what
the hooks use): round one is then `STEP` values per rank, the number of checks
the rank made in the step and a digest of all their headers; only when those
differ are the headers themselves gathered (`step_rows`), then the lists of
the checks whose digests differ, and each check is compared as below, in
order (`count_mismatch` when one rank made more checks than another).

One check's own exchange is at most two rounds. Round one: every CP rank sends a fixed
`HEADER` of int64 values (which check, its call number, the micro-batch
index, ``P``, the CP scheme, the layout, and the count and a 56-bit digest of
the sample ids and of the lengths). Only when two ranks' digests differ is
there a round two, with the lists themselves (padded to the longest, known
from round one), so that the message can show them. Every rank sees the same
gathered values, so every rank decides the same about round two and reports
the same violations: the rank that disagrees is named on all of them.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, Violation
from layoutcheck.runtime.contract.common import size

__all__ = [
    "HEADER",
    "HINTS",
    "INVARIANT",
    "ROLES",
    "Header",
    "RankLayout",
    "STEP",
    "compare",
    "count_mismatch",
    "decode_lists",
    "digest_headers",
    "name_ranks",
    "needs_lists",
]

INVARIANT = "X1"
"""Across ranks: every CP rank of a micro-batch agrees on its layout (docs/design.md#the-invariants)."""

ROLES: dict[str, int] = {"batch": 1, "replay": 2, "boundary": 3}
"""The checks that exchange: the batch builder's, the replay filler's and a boundary contract's, by wire code."""
_ROLE_NAMES = {"batch": "batch-builder", "replay": "replay-filler", "boundary": "boundary"}
_SCHEMES = {name: i for i, name in enumerate(geometry.SCHEMES)}
_LAYOUTS = {name: i for i, name in enumerate(geometry.LAYOUTS)}
_UNKNOWN = -1

HEADER = 10
"""int64 values per rank in round one."""
STEP = 2
"""int64 values per rank in a step's round one: how many checks, and a digest of their headers."""

HINTS = {
    "schedule": "run the same layoutcheck configuration (hooks, `every`) on every rank, and let the data "
    "iterators of one CP group advance together; cross-rank checks stop here, since later exchanges "
    "would pair unrelated micro-batches",
    "micro_batch": "every CP rank must walk the same micro-batch schedule: build the data iterators of one "
    "CP group from the same rollout with the same micro_batch_size / micro_batch_indices",
    "padded": "give every CP rank of the group the same rollout and the same `max_seq_lens`: a padded "
    "length that depends on the CP rank makes the ranks slice different layouts",
    "replay": "lay replay tensors out with the batch builder's P on every CP rank (G5); the replay "
    "filler must not re-derive padding from rank-local values",
    "samples": "build micro-batch k from the same samples in the same order on every CP rank (same "
    "rollout, same micro-batch schedule)",
    "lengths": "keep `total_lengths` identical across the CP group: a step that changes tokens "
    "(multimodal expansion) must run on every CP rank",
    "scheme": "set `allgather_cp` the same on every rank",
    "layout": "set `qkv_format` the same on every rank",
}


def _digest(values: Sequence[int] | None) -> int:
    # 56 bits: fits an int64 and never collides with _UNKNOWN.
    if values is None:
        return _UNKNOWN
    data = array("q", values).tobytes()
    return int.from_bytes(hashlib.blake2b(data, digest_size=7).digest(), "little")


def digest_headers(headers: Sequence[Sequence[int]]) -> int:
    """A 56-bit digest of a step's headers, in order: equal on two ranks when (almost surely) every value is."""
    return _digest([v for h in headers for v in h])


def _ints(name: str, values: Sequence[object] | None) -> tuple[int, ...] | None:
    if values is None:
        return None
    if not isinstance(values, (list, tuple)):
        raise LayoutSpecError(f"`{name}` must be a list of Python ints, got {type(values).__name__}")
    return tuple(size(f"{name}[{i}]", v, minimum=0) for i, v in enumerate(values))


@dataclass(frozen=True)
class RankLayout:
    """What one rank says about one micro-batch: Python ints and names only (never a tensor)."""

    role: str
    """``"batch"`` (the batch builder) or ``"replay"`` (the replay filler)."""
    call: int
    """This rank's n-th check of this role (1-based): ranks out of step disagree on it."""
    micro_batch: int
    padded: int | None
    """``P`` under BSHD; under THD the packed stream length; ``None``: not known."""
    scheme: str | None = None
    layout: str | None = None
    samples: tuple[int, ...] | None = None
    """Sample ids (indices into the rollout) in micro-batch order."""
    lengths: tuple[int, ...] | None = None
    """The samples' current true lengths ``T``, in micro-batch order."""

    @classmethod
    def of(
        cls,
        role: str,
        call: int,
        micro_batch: object,
        padded: object,
        *,
        scheme: str | None = None,
        layout: str | None = None,
        samples: Sequence[object] | None = None,
        lengths: Sequence[object] | None = None,
    ) -> RankLayout:
        """Validate the hook's values (`LayoutSpecError` for a tensor, a negative size, an unknown name)."""
        if role not in ROLES:
            raise LayoutSpecError(f"unknown cross-rank role {role!r}: expected one of {', '.join(ROLES)}")
        return cls(
            role=role,
            call=size("call", call, minimum=1),
            micro_batch=size("micro_batch", micro_batch, minimum=0),
            padded=None if padded is None else size("padded", padded, minimum=0),
            scheme=None if scheme is None else geometry.check_scheme(scheme),
            layout=None if layout is None else geometry.check_layout(layout),
            samples=_ints("samples", samples),
            lengths=_ints("lengths", lengths),
        )

    def header(self) -> list[int]:
        """Round one: `HEADER` int64 values."""
        return [
            ROLES[self.role],
            self.call,
            self.micro_batch,
            _UNKNOWN if self.padded is None else self.padded,
            _SCHEMES.get(self.scheme, _UNKNOWN) if self.scheme else _UNKNOWN,
            _LAYOUTS.get(self.layout, _UNKNOWN) if self.layout else _UNKNOWN,
            _UNKNOWN if self.samples is None else len(self.samples),
            _digest(self.samples),
            _UNKNOWN if self.lengths is None else len(self.lengths),
            _digest(self.lengths),
        ]

    def lists(self, n_samples: int, n_lengths: int) -> list[int]:
        """Round two: the sample ids and lengths, each padded with -1 to the group's longest."""
        samples = list(self.samples or ())
        lengths = list(self.lengths or ())
        return samples + [_UNKNOWN] * (n_samples - len(samples)) + lengths + [_UNKNOWN] * (n_lengths - len(lengths))


@dataclass(frozen=True)
class Header:
    """One rank's round-one values, decoded."""

    role: str | None
    call: int
    micro_batch: int
    padded: int | None
    scheme: str | None
    layout: str | None
    n_samples: int
    samples_digest: int
    n_lengths: int
    lengths_digest: int

    @classmethod
    def decode(cls, values: Sequence[int]) -> Header:
        role = next((name for name, code in ROLES.items() if code == values[0]), None)
        return cls(
            role=role,
            call=values[1],
            micro_batch=values[2],
            padded=None if values[3] == _UNKNOWN else values[3],
            scheme=geometry.SCHEMES[values[4]] if 0 <= values[4] < len(geometry.SCHEMES) else None,
            layout=geometry.LAYOUTS[values[5]] if 0 <= values[5] < len(geometry.LAYOUTS) else None,
            n_samples=values[6],
            samples_digest=values[7],
            n_lengths=values[8],
            lengths_digest=values[9],
        )


def needs_lists(headers: Sequence[Header]) -> tuple[int, int] | None:
    """``(longest sample list, longest length list)`` when round two is needed, else ``None``."""
    known_s = {(h.n_samples, h.samples_digest) for h in headers if h.n_samples != _UNKNOWN}
    known_l = {(h.n_lengths, h.lengths_digest) for h in headers if h.n_lengths != _UNKNOWN}
    if len(known_s) <= 1 and len(known_l) <= 1:
        return None
    return max(0, *(h.n_samples for h in headers)), max(0, *(h.n_lengths for h in headers))


def decode_lists(headers: Sequence[Header], rows: Sequence[Sequence[int]], n_samples: int) -> list[
    tuple[tuple[int, ...] | None, tuple[int, ...] | None]
]:
    """Each rank's ``(samples, lengths)`` from round two (``None`` where the rank did not know them)."""
    out = []
    for h, row in zip(headers, rows):
        samples = None if h.n_samples == _UNKNOWN else tuple(row[: h.n_samples])
        lengths = None if h.n_lengths == _UNKNOWN else tuple(row[n_samples : n_samples + h.n_lengths])
        out.append((samples, lengths))
    return out


# ---------------------------------------------------------------- comparison


def name_ranks(cp_ranks: Sequence[int]) -> str:
    """``"cp rank 1"``, ``"cp ranks 0, 2"``: how messages name CP ranks."""
    names = ", ".join(str(r) for r in cp_ranks)
    return f"cp rank {names}" if len(cp_ranks) == 1 else f"cp ranks {names}"


def _has(cp_ranks: Sequence[int]) -> str:
    return "has" if len(cp_ranks) == 1 else "have"


def _split(values: Sequence[object]) -> tuple[object, dict[object, list[int]]]:
    """The reference value (held by most ranks; a tie goes to the lowest rank) and the ranks holding each value."""
    holders: dict[object, list[int]] = {}
    for r, v in enumerate(values):
        holders.setdefault(v, []).append(r)
    reference = max(holders, key=lambda v: (len(holders[v]), -holders[v][0]))
    return reference, holders


def _short(values: Sequence[int], limit: int = 12) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"


def _is(ranks: Sequence[int]) -> str:
    return "is" if len(ranks) == 1 else "are"


def _step(value: object) -> str:
    role, call = value  # type: ignore[misc]
    return f"its {_ROLE_NAMES.get(role, 'unknown')} check #{call}"


def _describe(key: str, value: object, ranks: list[int], ref: object, others: list[int], k: int, label: str,
              role: str | None) -> str:
    """One sentence: which ranks hold ``value`` where the reference ranks hold ``ref``."""
    these, those = name_ranks(ranks), name_ranks(others)
    one = len(ranks) == 1
    if key == "schedule":
        return f"the CP ranks are out of step: {these} {_is(ranks)} at {_step(value)}, {those} at {_step(ref)}"
    if key == "micro_batch":
        return f"{these} {_is(ranks)} at micro-batch {value} where {those} {_is(others)} at micro-batch {ref}"
    if key in ("padded", "replay"):
        whose = "'s replay filler" if role == "replay" else ""
        return f"{these}{whose} {_has(ranks)} {label}={value} for micro-batch {k}, {those} {_has(others)} {label}={ref}"
    if key == "scheme":
        return f"{these} {'slices' if one else 'slice'} micro-batch {k} with {value} CP, {those} with {ref} CP"
    if key == "layout":
        return f"{these} {'lays' if one else 'lay'} micro-batch {k} out as {value}, {those} as {ref}"
    assert isinstance(value, tuple) and isinstance(ref, tuple)
    what = "sample order" if key == "samples" and sorted(value) == sorted(ref) else label
    return f"{these} {_has(ranks)} {what} {_short(value)} for micro-batch {k}, {those} {_has(others)} {_short(ref)}"


def compare(
    headers: Sequence[Header],
    lists: Sequence[tuple[tuple[int, ...] | None, tuple[int, ...] | None]] | None = None,
    *,
    global_ranks: Sequence[int],
    where: str,
    field: str | None = None,
) -> tuple[list[Violation], bool]:
    """Compare the CP ranks' answers; ``(violations, in_step)``.

    ``headers[r]`` is cp rank ``r``'s round one, ``lists[r]`` its round two
    (when there was one). ``in_step`` is False when the ranks are not at the
    same check (another role or call number): the other fields are then not
    compared, and the caller stops exchanging. ``field`` names the replay
    filler's data key. Every rank computes the same result from the same
    gathered values; one violation per value that differs from the
    reference (the majority's, a tie going to the lowest rank).
    """
    k = max(headers, key=lambda h: sum(x.micro_batch == h.micro_batch for x in headers)).micro_batch
    role = headers[0].role
    label = "N" if _split([h.layout for h in headers])[0] == "thd" else "P"
    sizes = {"cp": len(headers), "global ranks": tuple(global_ranks)}
    # (hint key, Violation.field, message label, the values per cp rank)
    steps: list[object] = [(h.role, h.call) for h in headers]
    in_step = len(set(steps)) == 1
    fields: list[tuple[str, str, str, list[object]]] = [("schedule", "micro-batch schedule", "", steps)]
    if in_step:  # otherwise the values belong to different checks: comparing them says nothing
        fields = [
            ("micro_batch", "micro-batch index", "", [h.micro_batch for h in headers]),
            ("replay" if role == "replay" else "padded", field or ("max_seq_lens" if label == "P" else "cu_seqlens"),
             label, [h.padded for h in headers]),
            ("scheme", "allgather_cp", "", [h.scheme for h in headers]),
            ("layout", "qkv_format", "", [h.layout for h in headers]),
        ]
        if lists is not None:
            fields.append(("samples", "samples", "samples", [pair[0] for pair in lists]))
            fields.append(("lengths", "total_lengths", "total lengths", [pair[1] for pair in lists]))
    found: list[Violation] = []
    for key, vfield, vlabel, values in fields:
        if any(v is None for v in values):
            continue  # a rank that does not know a value cannot disagree on it
        ref, holders = _split(values)
        for value, ranks in holders.items():
            if value == ref:
                continue
            problem = _describe(key, value, ranks, ref, holders[ref], k, vlabel, role)
            actual, expected = (_step(value), _step(ref)) if key == "schedule" else (value, ref)
            if isinstance(actual, tuple):
                actual, expected = list(actual), list(expected)  # type: ignore[call-overload]
            found.append(Violation(
                invariant=INVARIANT, where=where, field=vfield, problem=problem, actual=actual, expected=expected,
                hint=HINTS[key], micro_batch=k, sizes=sizes,
            ))
    return found, in_step


def count_mismatch(counts: Sequence[int], *, global_ranks: Sequence[int], where: str,
                   micro_batch: int) -> Violation:
    """The ranks made different numbers of cross-rank checks in one step (each check they share agreed)."""
    ref, holders = _split(list(counts))
    odd = sorted(r for v, ranks in holders.items() if v != ref for r in ranks)
    made = "; ".join(f"{name_ranks(ranks)} made {count} check{'s' if count != 1 else ''}"
                     for count, ranks in sorted(holders.items(), key=lambda kv: kv[1][0]))
    return Violation(
        invariant=INVARIANT, where=where, field="micro-batch schedule",
        problem=f"the CP ranks are out of step: in this step {made} (the checks they share agree)",
        actual=[counts[r] for r in odd], expected=ref, hint=HINTS["schedule"], micro_batch=micro_batch,
        sizes={"cp": len(counts), "global ranks": tuple(global_ranks)},
    )
