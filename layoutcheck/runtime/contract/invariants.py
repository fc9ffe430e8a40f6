"""The generic invariants of a boundary contract, over what a call showed: ints, lengths and shapes.

A call of a configured boundary is read into one `Reading` per field
(`layoutcheck.runtime.checker.boundaries` does the reading: shapes always,
values of CPU tensors, values of device tensors later). From the readings:

* **binding**: each sample's ``T``, ``R``, ``P`` are taken from the first
  field that measures them directly (``len T``, a list of ``T``-long
  tensors, a mask's sums, the segments of ``cu P packed``), arguments before
  the return value, as jaxtyping binds a symbolic size;
* **B1** co-indexed fields agree: every field's length for sample ``i`` is
  `layoutcheck.spaces.Space.length` of that sample (a CP-local field: the
  rank's part, a shifted one: one less), and every per-sample argument has
  one entry per sample;
* **B2** ``T_i <= P_i``, and ``P_i < T_i + A`` when the padding is tight
  (``A`` the lcm of the units);
* **B3** every unit divides ``P_i`` (an if/elif that picks one factor where
  all must divide is caught: each configured unit is checked on its own);
* **B4** a packed stream: its cumulative lengths start at 0 and never fall,
  each segment is its sample's length in the space, the last one is the
  stream's length (times ``cp`` when the lengths are global and the stream
  one rank's part), and the stream is the sum of its samples' parts, its
  tail padded to the stream unit;
* **B5** samples kept: the return value has as many samples as the
  arguments, in the same order (lengths that are the arguments' in another
  order are named as a reordering), and a schedule holds every sample once;
* **B6** (values, `layoutcheck.runtime.checker.content`) each segment holds
  its sample: the data laid out from the ``from`` field, pads included.

Every function returns ``list[Violation]``; expected lengths come from
`layoutcheck.spaces` and `layoutcheck.geometry` only.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, Violation
from layoutcheck.runtime.contract.boundary import FieldSpec
from layoutcheck.spaces import SampleLengths, Space

__all__ = [
    "HINTS",
    "Bound",
    "hint",
    "Reading",
    "bind",
    "derive_padded",
    "lengths_in",
    "check_fields",
    "check_padding",
    "check_samples_kept",
    "check_schedule",
    "sample_length",
    "stream_length",
]

HINTS = {
    "B1": "lay every co-indexed field out from the same sample lengths (slice, pad and shift each partner "
          "field the way its space says), and keep one entry per sample in each",
    "B2": "pad each sample to its own aligned length P_i = round_up(T_i, A) (A the lcm of every unit), "
          "never to a batch- or rollout-wide maximum",
    "B3": "combine the alignment units with lcm (every unit must divide P), not by picking one in an if/elif",
    "B4": "build the cumulative lengths from the same padded lengths as the stream, and pad only the "
          "stream's tail to the stream unit",
    "B5": "return one entry per input sample, in the input's order (undo any sort before returning), and "
          "put every sample in exactly one micro-batch",
    "B6": "lay each sample's data out with the stream's own offsets: pad it to P first, then cut the CP "
          "chunks (never cut true-length data at padded offsets), and pad with the pad value",
}



def hint(invariant: str, space: Space | None = None, *, source: Space | None = None, rows: bool = False) -> str:
    """What to do about a violation of ``invariant`` on a field in ``space`` (laid out from ``source``'s space).

    The fix depends on the spaces that met: a CP-local field is cut wrong, a
    shifted one is shifted wrong, a packed stream writes at the wrong
    offsets, a row-padded batch is padded on the wrong side; `HINTS` is the
    text when nothing more specific is known.
    """
    if space is None:
        return HINTS.get(invariant, "")
    side = space.pad_side or "right"
    flush = "right" if side == "left" else "left"
    if rows:
        if invariant == "B1":
            return (f"pad each row on the {side}: its T_i true positions flush {flush} and the mask marking exactly "
                    "them (build the mask from each row's own length, never one shift or width for the whole batch)")
        if invariant == "B6":
            return (f"move each row by its own pad count so that its tokens sit flush {flush}, in order, and fill the "
                    f"{side} with the pad value (one shift for the whole batch moves every other row wrong)")
    if invariant == "B1":
        if space.cp is not None:
            return (f"cut this field into the rank's CP chunks ({space.cp.scheme}) from the same padded length as its "
                    "partners: pad it to P first, then slice it with the partners' rule (or declare it unsliced)")
        if space.shift:
            return (f"shift this field by one as its space says ({'drop the first position' if space.shift > 0 else 'drop the last position'} "
                    "of each sample) and keep one entry per sample")
    if invariant == "B4" and space.cp is not None:
        return ("pack each sample's CP-local part (P_i / cp positions under zigzag), so that the stream is the sum "
                "of the parts, and keep the cumulative lengths global or local as their space says")
    if invariant == "B6":
        shift = space.shift - (source.shift if source is not None else 0)
        if shift:
            return (f"shift each sample by one before laying it out ({'data[1:]' if shift > 0 else 'data[:-1]'}), "
                    "as the target's space says, then pad and cut it like its partners")
        if space.cp is not None and space.cp.scheme == "allgather":
            return ("concatenate the samples each padded to P, pad the whole stream to a multiple of cp times the "
                    "unit, and give this rank its one contiguous window")
        if space.cp is not None:
            return HINTS["B6"]
        if space.packed:
            return ("write each sample at its padded offset (the running sum of P_i, never of T_i), its tokens in "
                    "order, and fill the rest of its P_i positions (and the stream's tail) with the pad value")
        if space.basis == "P":
            return (f"pad each sample on the {side} to its own P_i with the pad value, its tokens in order and "
                    f"flush {flush}")
        if source is not None and source.pad_side is not None:
            first = "last" if source.pad_side == "left" else "first"
            return (f"take each row's {first} T_i positions (the source is padded {source.pad_side}), with each "
                    "row's own T_i, never the batch's width or one offset for every row")
        return "lay each sample's tokens out in order, as its source holds them"
    return HINTS.get(invariant, "")


_QUANTITIES = ("T", "R", "P")


@dataclass
class Reading:
    """What one field of one call showed (ints only; the value itself is never kept here)."""

    spec: FieldSpec
    space: Space | None
    """The field's space with the run's scheme filled in."""
    shape: str
    """``list``, ``rows``, ``stream``, ``one``, ``ints``, ``cu``, ``mask``, ``schedule``, ``missing``."""
    lengths: list[int] | None = None
    """Per sample: its length along the field's axis (or its int, or its mask's sum)."""
    total: int | None = None
    """A stream's length (this rank's part)."""
    cu: list[int] | None = None
    schedule: list[list[int]] | None = None
    seen: object = None
    """How the value looked, for messages (a shape, a type)."""

    @property
    def count(self) -> int | None:
        """How many samples the field shows."""
        if self.lengths is not None:
            return len(self.lengths)
        if self.cu is not None:
            return max(len(self.cu) - 1, 0)
        if self.schedule is not None:
            return sum(len(mb) for mb in self.schedule)
        return None

    @property
    def described(self) -> str:
        return self.spec.describe_space(self.space.cp.scheme if self.space is not None and self.space.cp else None)


@dataclass
class Bound:
    """Each sample's lengths, and which field gave each one (for messages).

    Held by quantity, one column of ints per quantity over the call's
    samples (``None`` where no field gave it): the clean path of a call
    compares whole columns (list equality, in C) instead of visiting every
    sample, and goes sample by sample only to name what differs.
    """

    n: int
    columns: dict[str, list[int | None]] = field(default_factory=dict)
    """Quantity (``T``, ``R``, ``P``) -> each sample's value (``None``: not known)."""
    by: dict[str, str] = field(default_factory=dict)
    """Quantity (``T``, ``R``, ``P``) -> the key of the field that bound it."""
    spaces: dict[str, str] = field(default_factory=dict)
    """Quantity -> the space of the field that bound it, as messages say it."""
    _keys: list[tuple[int, int, int | None] | None] | None = field(default=None, repr=False)
    _samples: list[SampleLengths | None] | None = field(default=None, repr=False)
    _lengths: dict[tuple[object, int, int], list[int | None]] = field(default_factory=dict, repr=False)

    def value(self, i: int, quantity: str) -> int | None:
        """Sample ``i``'s ``quantity`` (``None`` when no field gave it)."""
        column = self.columns.get(quantity)
        return None if column is None else column[i]

    def keys(self) -> list[tuple[int, int, int | None] | None]:
        """Every sample's ``(T, R, P)`` (``R`` 0 when unknown; ``None`` where ``T`` is not known)."""
        if self._keys is None:
            none: list[int | None] = [None] * self.n
            self._keys = [None if t is None else (t, r or 0, p) for t, r, p in zip(
                self.columns.get("T", none), self.columns.get("R", none), self.columns.get("P", none))]
        return self._keys

    def samples(self) -> list[SampleLengths | None]:
        """Every sample's lengths (``None`` where ``T`` is not known); equal samples share one object.

        Made only when a message or a CP-local length needs them: a clean
        call's checks compare columns of ints.
        """
        if self._samples is None:
            shared: dict[tuple[int, int, int | None], SampleLengths] = {}
            out: list[SampleLengths | None] = []
            for key in self.keys():
                if key is None:
                    out.append(None)
                    continue
                found = shared.get(key)
                if found is None:
                    found = shared[key] = SampleLengths(total=key[0], response=key[1], padded=key[2])
                out.append(found)
            self._samples = out
        return self._samples

    def sample(self, i: int) -> SampleLengths | None:
        """Sample ``i``'s lengths (``None`` when its ``T`` is not known)."""
        return self.samples()[i]

    def get(self, quantity: str) -> list[int] | None:
        """Every sample's ``quantity``, or ``None`` when any sample lacks it."""
        if not self.n:
            return []
        column = self.columns.get(quantity)
        return None if column is None or None in column else list(column)  # type: ignore[arg-type]

    def column(self, quantity: str) -> list[int] | None:
        """`get` without the copy, for reading only."""
        if not self.n:
            return []
        column = self.columns.get(quantity)
        return None if column is None or None in column else column  # type: ignore[return-value]

    def _changed(self) -> None:
        self._keys = self._samples = None
        self._lengths.clear()


_BY_SPACE: dict[tuple[object, int, int], dict[tuple[int, int, int | None], int | None]] = {}
"""(space key, cp, rank) -> (T, R, P) -> the length there: what `Space.length` said, kept across calls (ints only)."""
_BY_PADDED: dict[tuple[object, int, int], dict[int, int | None]] = {}
"""The same for a CP-local space of basis ``P``, whose length depends on ``P`` alone: P -> the length there."""


def _table(tables: dict[tuple[object, int, int], dict[Any, int | None]], key: tuple[object, int, int]) -> dict[Any, int | None]:
    table = tables.get(key)
    if table is None or len(table) > 65536:
        if len(tables) > 256:
            tables.clear()
        table = tables[key] = {}
    return table


def lengths_in(space: Space, bound: Bound, cp: int, rank: int) -> list[int | None]:
    """Every sample's length in ``space`` on this rank (`sample_length` per sample; ``None`` where unknown).

    Once per space and call, by whole columns when the space is not cut by
    CP (what `Space.length` does then is one subtraction); a CP-local space
    looks each distinct sample up in a table of ints kept across calls (by
    its ``P`` alone when the space is measured in ``P``).
    """
    key = (space.key, cp, rank)
    found = bound._lengths.get(key)
    if found is not None:
        return found
    size = space.cp.size if space.cp is not None and space.cp.size is not None else cp
    none: list[int | None] = [None] * bound.n
    if space.cp is None or size == 1:  # `Space._whole` less the shift, from the columns: no sample object made
        totals = bound.columns.get("T", none)
        basis, cut = space.basis, abs(space.shift)
        if basis == "T":
            base = totals
        elif basis == "T-1":
            cut += 1  # max(T - 1, 0) less the shift: max(T - 1 - shift, 0)
            base = totals
        elif basis == "R":
            base = [None if t is None else r or 0 for t, r in zip(totals, bound.columns.get("R", none))]
        elif None not in totals:  # every sample known: its padded lengths as bound (None where not decided)
            base = bound.columns.get("P", none)
        else:
            base = [None if t is None else p for t, p in zip(totals, bound.columns.get("P", none))]
        if None not in base and (not base or min(base) >= cut):  # type: ignore[type-var]
            # every sample known and at least `cut` long (the usual case): one subtraction each, or none
            found = [b - cut for b in base] if cut else list(base)  # type: ignore[operator]
        else:
            found = [None if b is None else max(b - cut, 0) for b in base]
    elif space.basis == "P":  # one rank's part of P: a function of P alone, looked up by P
        table = _table(_BY_PADDED, key)
        totals, padded = bound.columns.get("T", none), bound.columns.get("P", none)
        found = list(map(table.get, padded))
        if None in found or None in totals:
            for i, (t, p) in enumerate(zip(totals, padded)):
                if t is None or p is None:
                    found[i] = None  # a sample not known (no T), or its P not decided: nothing to compare with
                elif found[i] is None:  # a padded length not met before: asked once
                    found[i] = table[p] = _cached_length(space, SampleLengths(total=t, padded=p), cp, rank)
    else:
        table = _table(_BY_SPACE, key)
        found = []
        samples: list[SampleLengths | None] | None = None
        for i, k in enumerate(bound.keys()):
            if k is None:
                found.append(None)
                continue
            length = table.get(k, _UNSET)
            if length is _UNSET:  # a sample not met before: its lengths object, asked once
                samples = samples or bound.samples()
                length = table[k] = _cached_length(space, samples[i], cp, rank)  # type: ignore[arg-type]
            found.append(length)
    bound._lengths[key] = found
    return found


def _quantity(basis: str, length: int) -> tuple[str, int]:
    # A T-1 axis measures T - 1 positions: it binds T.
    return ("T", length + 1) if basis == "T-1" else (basis, length)


def _per_sample(r: Reading) -> list[int] | None:
    if r.lengths is not None and r.shape != "stream":
        return r.lengths
    if r.cu is not None:
        return list(map(operator.sub, r.cu[1:], r.cu))
    return None


def bind(readings: Sequence[Reading], n: int, where: str, sizes: dict[str, object],
         start: Bound | None = None) -> tuple[Bound, list[Violation]]:
    """Each sample's ``T``, ``R``, ``P`` from the fields that measure them; B1 where two such fields disagree.

    ``start``: a bound of earlier readings to go on from (copied, not
    changed): ``bind(b, n, ..., start=bind(a, n, ...)[0])`` binds as
    ``bind(a + b, n, ...)`` does, with the violations of ``b`` alone.
    """
    bound = Bound(n=n)
    if start is not None:
        bound.columns = {q: list(column) for q, column in start.columns.items()}
        bound.by, bound.spaces = dict(start.by), dict(start.spaces)
    out: list[Violation] = []
    for r in readings:
        basis = r.spec.binds
        if basis is None or r.shape == "rows":
            continue
        lengths = _per_sample(r)
        if lengths is None:
            continue
        if r.cu is not None and len(lengths) == n + 1:
            lengths = lengths[:n]  # the last segment is the stream's tail padding (B4 judges it)
        quantity, shift = _quantity(basis, 0)
        given = [length + shift for length in lengths[:n]] if shift else lengths[:n]  # a new list either way
        if not given:
            continue
        column = bound.columns.get(quantity)
        if column is None:  # the first field to measure the quantity binds it: one list, no per-sample work
            bound.columns[quantity] = given + [None] * (n - len(given)) if len(given) < n else given
            bound.by[quantity] = r.spec.key  # `described` builds a string: once per quantity, not per sample
            bound.spaces[quantity] = r.described
            bound._changed()
            continue
        if column[:len(given)] == given:
            continue  # agrees with the field that bound it (a `None` there never equals an int)
        bound._changed()
        for i, value in enumerate(given):  # sample by sample, only to fill gaps and name what disagrees
            have = column[i]
            if have is None:
                column[i] = value
            elif have != value:
                expected = have - 1 if basis == "T-1" else have
                out.append(Violation(
                    "B1", where, r.spec.key,
                    f"{quantity}_i disagrees with `{bound.by.get(quantity, '?')}`, which gives the sample "
                    f"{quantity}={have}",
                    actual=lengths[i], expected=expected, hint=hint("B1", r.space), sample=i, space=r.described,
                    sizes={**sizes, quantity: have},
                ))
    return bound, out


def derive_padded(bound: Bound, unit: int) -> None:
    """``P_i = round_up(T_i, A)`` for every sample no field gives a padded length (a helper that pads to its own
    unit and says so only in the lengths it returns); B2 and B3 then hold by construction."""
    totals = bound.columns.get("T")
    if totals is None:
        return
    padded = bound.columns.get("P")
    if padded is None:
        padded = [None if t is None else geometry.round_up(t, unit) for t in totals]
        derived = any(p is not None for p in padded)
        if derived:
            bound.columns["P"] = padded
    elif None not in padded:
        derived = False  # every sample's P given (the usual case): nothing to derive
    else:
        derived = False
        for i, (t, p) in enumerate(zip(totals, padded)):
            if p is None and t is not None:
                padded[i] = geometry.round_up(t, unit)
                derived = True
    if derived:
        bound.by.setdefault("P", f"round_up(T, A={unit})")
        bound.spaces.setdefault("P", "P")
        bound._changed()


_UNSET: Any = object()


def _length(space: Space, sample: SampleLengths, cp: int, rank: int) -> int | None:
    return _cached_length(space, sample, cp, rank)


def sample_length(space: Space, sample: SampleLengths) -> int | None:
    """The sample's length in ``space`` on one rank (``None`` when it needs a length the sample lacks)."""
    return _cached_length(space, sample, 1, 0)


@functools.lru_cache(maxsize=8192)  # per field, sample and call: the same few spaces and lengths over and over
def _cached_length(space: Space, sample: SampleLengths, cp: int, rank: int) -> int | None:
    try:
        return space.length(sample, cp_size=cp, cp_rank=rank)
    except LayoutSpecError:
        return None  # a length the sample does not have (P unknown): nothing to compare with


def check_fields(readings: Sequence[Reading], bound: Bound, *, cp: int, rank: int, where: str,
                 sizes: dict[str, object], stream_units: dict[str, int]) -> list[Violation]:
    """B1 for every field that did not bind, B4 for packed streams and their cumulative lengths."""
    out: list[Violation] = []
    n = bound.n
    streams = [r for r in readings if r.shape == "stream" and r.total is not None and r.space is not None]
    for r in readings:
        if r.space is None or r.shape in ("missing", "schedule"):
            continue
        if r.shape == "stream":
            out += _check_stream(r, bound, cp, rank, where, sizes, stream_units.get(r.spec.key, 1))
            continue
        if r.cu is not None:
            out += _check_cu(r, bound, streams, cp, rank, where, sizes)
            continue
        if r.lengths is None:
            continue
        if r.count != n and r.spec.path.root == "args" and r.shape != "one":
            out.append(Violation(
                "B1", where, r.spec.key, f"per-sample field has {r.count} entries for the call's {n} samples",
                actual=r.count, expected=n, hint=HINTS["B1"], space=r.described, sizes=sizes,
            ))
            continue
        if r.count != n:
            continue  # the return value's count: B5
        if r.spec.binds is not None and r.shape != "rows" and bound.by.get(_quantity(r.spec.binds, 0)[0]) == r.spec.key:
            continue  # the field that bound its quantity holds it by construction (its every sample: see below)
        wants = lengths_in(r.space, bound, cp, rank)
        if r.lengths == wants and not (r.shape == "rows" and r.spec.mask is not None):
            continue  # every sample holds its length in the space (a `None` there never equals an int)
        binds = r.spec.binds if r.shape != "rows" else None
        quantity, shift = _quantity(binds, 0) if binds is not None else (None, 0)
        column = bound.columns.get(quantity) if quantity is not None else None
        samples = bound.samples()
        for i, got in enumerate(r.lengths):  # sample by sample: only a call with something to name comes here
            sample = samples[i]
            if sample is None or (column is not None and got + shift == column[i]):
                continue  # the field that bound this sample's length holds it by construction
            want = wants[i]
            if r.shape == "padded rows":  # a row-padded batch: the row must hold the sample (its side: values)
                if want is not None and got < want:
                    out.append(_b1(r, i, got, f">= {want}", where, sizes, sample, cp, rank,
                                   "the row is narrower than the sample's length in its space"))
                continue
            if r.shape == "rows":
                # a rectangular batch: each row holds the sample's positions, P of them (a mask selects T)
                if r.spec.mask is not None:
                    if got < sample.total:
                        out.append(_b1(r, i, got, f">= T_i = {sample.total}", where, sizes, sample, cp, rank,
                                       "the row is narrower than the sample's true length"))
                    continue
            if want is None:
                continue
            if got != want:
                out.append(_b1(r, i, got, want, where, sizes, sample, cp, rank,
                               f"holds {got} positions, not the sample's length in its space"))
    return out


def _b1(r: Reading, i: int, got: object, want: object, where: str, sizes: dict[str, object],
        sample: SampleLengths, cp: int, rank: int, problem: str) -> Violation:
    return Violation(
        "B1", where, r.spec.key, problem, actual=got, expected=want,
        hint=hint("B1", r.space, rows=r.shape == "padded rows"), sample=i, space=r.described,
        sizes={**_sample_sizes(sample), **sizes, **({"cp": cp, "r": rank} if r.space and r.space.cp else {})},
    )


def _sample_sizes(sample: SampleLengths) -> dict[str, object]:
    out: dict[str, object] = {"T": sample.total}
    if sample.response:
        out["R"] = sample.response
    if sample.padded is not None:
        out["P"] = sample.padded
    return out


def stream_length(space: Space, samples: Sequence[SampleLengths], cp: int, rank: int, unit: int = 1) -> int | None:
    """The length of this rank's packed stream of ``samples`` in ``space``, its tail padded to ``unit``.

    Zigzag (or no CP): the sum of each sample's CP-local length, rounded up.
    All-gather: the samples' unsliced lengths concatenated, the *global*
    stream rounded up to ``cp * unit`` and split into ``cp`` windows.
    ``None`` when a sample lacks a length the space needs.
    """
    if space.cp is not None and space.cp.scheme == "allgather" and cp > 1:
        parts = [_length(space.unsliced(), s, cp, rank) for s in samples]
        if any(p is None for p in parts):
            return None
        return geometry.round_up(sum(parts), cp * unit) // cp  # type: ignore[arg-type]
    parts = [_length(space, s, cp, rank) for s in samples]
    if any(p is None for p in parts):
        return None
    return geometry.round_up(sum(parts), unit)  # type: ignore[arg-type]


def _check_stream(r: Reading, bound: Bound, cp: int, rank: int, where: str, sizes: dict[str, object],
                  unit: int) -> list[Violation]:
    assert r.space is not None
    totals = bound.columns.get("T")
    if bound.n and (totals is None or None in totals):
        return []  # a sample whose T is not known: its part cannot be measured
    if r.space.cp is not None and r.space.cp.scheme == "allgather" and cp > 1:
        whole = lengths_in(r.space.unsliced(), bound, cp, rank)
        want = None if None in whole else geometry.round_up(sum(whole), cp * unit) // cp  # type: ignore[arg-type]
    else:
        parts = lengths_in(r.space, bound, cp, rank)
        want = None if None in parts else geometry.round_up(sum(parts), unit)  # type: ignore[arg-type]
    if want is None or r.total == want:
        return []
    parts = lengths_in(r.space, bound, cp, rank)
    extra: dict[str, object] = {"samples": bound.n, "parts": tuple(parts), "cp": cp, "r": rank}
    if unit > 1:
        extra["stream unit"] = unit
    return [Violation(
        "B4", where, r.spec.key,
        "packed stream is not the sum of its samples' parts in its space" + (
            f" ({r.total / want:.2f}x what it should hold)" if want else ""),
        actual=r.total, expected=want, hint=hint("B1" if r.space.cp else "B4", r.space),
        sample=_first_sample(parts, r.total), space=r.described, sizes={**sizes, **extra},
    )]


def _first_sample(parts: Sequence[int | None], total: int | None) -> int | None:
    # A stream longer than its parts: no one sample is to blame; shorter: the first sample whose part runs past it.
    if total is None:
        return None
    end = 0
    for i, p in enumerate(parts):
        end += p or 0
        if end > total:
            return i
    return None


def _check_cu(r: Reading, bound: Bound, streams: Sequence[Reading], cp: int, rank: int, where: str,
              sizes: dict[str, object]) -> list[Violation]:
    assert r.cu is not None and r.space is not None
    cu, n, out = r.cu, bound.n, []
    segments = list(map(operator.sub, cu[1:], cu))  # one C loop: the segments, and whether the lengths rise
    if not cu or cu[0] != 0 or (segments and min(segments) < 0):
        return [Violation("B4", where, r.spec.key, "cumulative lengths do not start at 0 and rise",
                          actual=list(cu), expected="0 = cu[0] <= cu[1] <= ...", hint=HINTS["B4"],
                          space=r.described, sizes=sizes)]
    if len(cu) not in (n + 1, n + 2):
        return [Violation("B4", where, r.spec.key, f"cumulative lengths have {len(cu)} entries for {n} samples",
                          actual=len(cu), expected=f"{n + 1} (or {n + 2} with a tail pad segment)",
                          hint=HINTS["B4"], space=r.described, sizes=sizes)]
    wants = lengths_in(r.space, bound, cp, rank) if r.spec.binds is None else []
    if segments[:n] == wants:
        wants = []  # every segment is its sample's length: nothing to name (a binding field names none)
    for i, want in enumerate(wants):  # sample by sample, only when a segment differs
        sample = bound.sample(i)
        if sample is None:
            continue
        if want is not None and segments[i] != want:
            out.append(Violation("B4", where, r.spec.key, "a segment of the stream is not its sample's length",
                                 actual=segments[i], expected=want, hint=HINTS["B4"], sample=i, space=r.described,
                                 sizes={**_sample_sizes(sample), **sizes}))
    # the last cumulative length is the stream's: global lengths over one rank's part count every rank's.
    # A stream that disagrees with its partners is B4 on that stream; here, only lengths that fit no stream.
    scale = cp if r.space.cp is None else 1
    ends = [(s, s.total * (scale if s.space is not None and s.space.cp is not None else 1)) for s in streams]
    if ends and all(cu[-1] != end for _, end in ends):
        s, want_end = ends[0]
        local = s.space is not None and s.space.cp is not None
        out.append(Violation(
            "B4", where, r.spec.key, f"the last cumulative length is not the length of `{s.spec.key}`"
            + (f" times cp={cp}" if local and scale > 1 else ""),
            actual=cu[-1], expected=want_end, hint=HINTS["B4"], space=r.described,
            sizes={**sizes, "stream": s.total, "cp": cp},
        ))
    return out


def check_padding(bound: Bound, units: Sequence[tuple[str, int]], tight: bool, where: str,
                  sizes: dict[str, object]) -> list[Violation]:
    """B2 (``T <= P``, tight: ``P < T + A``) and B3 (each unit divides ``P``) for every sample with both."""
    totals, padded = bound.columns.get("T"), bound.columns.get("P")
    if totals is None or padded is None:
        return []
    a = math.lcm(*(u for _, u in units)) if units else None
    above = a if tight and a else None
    out: list[Violation] = []
    # every unit divides P exactly when their lcm does: one remainder per sample on the clean path
    if None not in totals and None not in padded:  # every sample known (the usual case): no None test per sample
        if a is None:
            broken = [1 for t, p in zip(totals, padded) if p < t]
        elif above is None:
            broken = [1 for t, p in zip(totals, padded) if p < t or p % a]
        else:
            broken = [1 for t, p in zip(totals, padded) if p < t or p >= t + above or p % a]
        if not broken:
            return out  # no sample breaks B2 or B3; else the lists below say which
    if a is None:
        bad = [i for i, (t, p) in enumerate(zip(totals, padded)) if t is not None and p is not None and p < t]
    elif above is None:
        bad = [i for i, (t, p) in enumerate(zip(totals, padded))
               if t is not None and p is not None and (p < t or p % a)]
    else:
        bad = [i for i, (t, p) in enumerate(zip(totals, padded))
               if t is not None and p is not None and (p < t or p >= t + above or p % a)]
    p_key, space = bound.by.get("P", "P"), bound.spaces.get("P", "P")
    for i in bad:  # the messages: only for a sample that breaks one
        t, p = totals[i], padded[i]
        here = {"T": t, "P": p, **({"A": a} if a else {}), **sizes}
        if p < t:  # type: ignore[operator]
            out.append(Violation("B2", where, p_key, "padded length is below the true length: the sample is cut",
                                 actual=p, expected=f">= T_i = {t}" + (f": {geometry.round_up(t, a)}" if a else ""),  # type: ignore[arg-type]
                                 hint=HINTS["B2"], sample=i, space=space, sizes=here))
            continue
        for name, u in units:
            if p % u:  # type: ignore[operator]
                out.append(Violation("B3", where, p_key, f"unit `{name}` = {u} does not divide the padded length",
                                     actual=p, expected=f"a multiple of {u}" + (
                                         f" (and of A = {a}): {geometry.round_up(t, a)}" if a else ""),  # type: ignore[arg-type]
                                     hint=HINTS["B3"], sample=i, space=space, sizes=here))
        if tight and a and p >= t + a:  # type: ignore[operator]
            out.append(Violation("B2", where, p_key,
                                 f"padded length is {p / t if t else float('inf'):.1f}x the true length, more than "  # type: ignore[operator]
                                 "one alignment unit above it",
                                 actual=p, expected=f"{geometry.round_up(t, a)} (T_i <= P_i < T_i + A)",  # type: ignore[arg-type]
                                 hint=HINTS["B2"], sample=i, space=space, sizes=here))
    return out


def check_samples_kept(inputs: Bound, outputs: Bound, readings: Sequence[Reading], n: int, where: str,
                       sizes: dict[str, object]) -> list[Violation]:
    """B5: the return value shows the arguments' samples, as many and in the same order."""
    out: list[Violation] = []
    for r in readings:
        if r.spec.path.root != "returns" or r.shape in ("stream", "missing", "schedule", "one") or r.count is None:
            continue
        count = r.count - (1 if r.cu is not None and r.count == n + 1 else 0)
        if count != n:
            out.append(Violation("B5", where, r.spec.key, f"the return value holds {count} samples, the arguments {n}",
                                 actual=count, expected=n, hint=HINTS["B5"], space=r.described, sizes=sizes))
    for quantity in _QUANTITIES:
        before, after = inputs.column(quantity), outputs.column(quantity)
        if before is None or after is None or before == after or len(before) != len(after):
            continue
        key = outputs.by.get(quantity, "returns")
        if sorted(before) == sorted(after):
            i = next(j for j, (a, b) in enumerate(zip(before, after)) if a != b)
            out.append(Violation(
                "B5", where, key, f"samples come back in another order: output sample {i} has "
                f"{quantity}={after[i]}, input sample {i} has {quantity}={before[i]}",
                actual=list(after), expected=list(before), hint=HINTS["B5"], sample=i,
                space=outputs.spaces.get(quantity, quantity), sizes=sizes,
            ))
        break
    return out


def check_schedule(r: Reading, n: int | None, where: str, sizes: dict[str, object]) -> list[Violation]:
    """B5 for a micro-batch schedule: every sample in exactly one micro-batch (of ``n``, when known)."""
    if r.schedule is None:
        return []
    flat = [i for mb in r.schedule for i in mb]
    total = n if n is not None else len(flat)
    missing = sorted(set(range(total)) - set(flat))
    twice = sorted({i for i in flat if flat.count(i) > 1})
    outside = sorted({i for i in flat if not 0 <= i < total})
    if not (missing or twice or outside):
        return []
    parts = []
    if missing:
        parts.append(f"samples {missing[:8]} in no micro-batch")
    if twice:
        parts.append(f"samples {twice[:8]} in more than one")
    if outside:
        parts.append(f"indices {outside[:8]} outside the {total} samples")
    return [Violation("B5", where, r.spec.key, "the schedule does not hold every sample once: " + "; ".join(parts),
                      actual=[list(mb) for mb in r.schedule], expected=f"a partition of range({total})",
                      hint=HINTS["B5"], sample=tuple((missing or twice or outside)[:8]), space="micro-batch schedule",
                      sizes={**sizes, "samples": total})]
