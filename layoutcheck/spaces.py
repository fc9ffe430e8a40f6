"""Layout spaces: what a per-sample length or sequence axis measures, whatever the code calls it.

Every per-sample integer and every sequence axis of a per-sample tensor
lives in a *space*; a layout bug is two spaces meeting without a conversion
(T-space data cut at P-space offsets, a CP-local tensor sliced again, labels
shifted one way and their mask the other). The runtime's boundary contract
says which space each argument and return value of a function is in, the
tracer carries a space on each tagged tensor, and messages name spaces with
`Space.describe`. Lengths are computed with `layoutcheck.geometry`, the one
home of every formula.

A space has independent parts:

==============  ==============================================================
``basis``       what one sample's axis counts before any transform:
                ``T`` (true tokens), ``R`` (response tokens), ``T-1``
                (next-token targets / logits), ``P`` (padded layout length)
``packed``      samples concatenated into one stream (with cumulative
                lengths) instead of one row or list entry per sample
``cp``          unsliced (``None``), or one CP rank's part under ``zigzag``
                or ``allgather``, with the rank when it is known
``shift``       a one-position slice of the axis: ``+1`` for ``x[..., 1:]``
                (the first position dropped: index ``j`` holds token
                ``j + 1``, the targets' alignment), ``-1`` for
                ``x[..., :-1]`` (the last dropped; each index keeps its
                token). Either is one position shorter. A ``roll`` keeps
                its length and is not a space's shift: the tracer's tags
                carry the alignment it makes (`Tag.shift`)
``pad_side``    where pad positions sit, for a padded axis: ``right`` or ``left``
``positions``   for index-valued data (offsets, position ids): ``global``
                (in the whole sequence) or ``local`` (in this rank's part)
==============  ==============================================================

Pure Python: no torch, no libcst.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Literal

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, describe_value

__all__ = ["BASES", "Basis", "CPPart", "PadSide", "Positions", "SampleLengths", "Space", "parse_space"]

Basis = Literal["T", "R", "T-1", "P"]
BASES: tuple[str, ...] = ("T", "R", "T-1", "P")
PadSide = Literal["right", "left"]
Positions = Literal["global", "local"]


@dataclass(frozen=True)
class CPPart:
    """One context-parallel rank's part of a sequence: scheme, size and (when known) rank."""

    scheme: geometry.Scheme = "zigzag"
    size: int | None = None
    """``None``: the run's CP size, read at run time."""
    rank: int | None = None
    """``None``: this process's rank, read at run time."""

    def describe(self) -> str:
        where = "" if self.rank is None else f" rank {self.rank}"
        of = "" if self.size is None else f" of {self.size}"
        return f"CP-local ({self.scheme}{where}{of})"


@dataclass(frozen=True)
class SampleLengths:
    """What one sample's spaces are measured from: ``T``, ``R`` and (when decided) ``P``."""

    total: int
    response: int = 0
    padded: int | None = None


@dataclass(frozen=True)
class Space:
    """The space of one per-sample length or sequence axis (see the module docs)."""

    basis: Basis
    packed: bool = False
    cp: CPPart | None = None
    shift: int = 0
    pad_side: PadSide | None = None
    positions: Positions | None = None

    def __post_init__(self) -> None:
        if self.basis not in BASES:
            raise LayoutSpecError(f"unknown space basis {describe_value(self.basis, quote=True)}: "
                                  f"expected one of {', '.join(BASES)}")
        if self.shift not in (-1, 0, 1):
            raise LayoutSpecError(f"a space's shift is -1, 0 or +1, got {self.shift!r}")
        if self.cp is not None:
            geometry.check_scheme(self.cp.scheme)

    # --- reading ---------------------------------------------------------

    def describe(self) -> str:
        """The space as messages say it: ``P, CP-local (zigzag rank 1 of 2), shifted +1``."""
        parts = [self.basis]
        if self.packed:
            parts.append("packed")
        if self.cp is not None:
            parts.append(self.cp.describe())
        if self.shift:
            parts.append(f"shifted {self.shift:+d}")
        if self.pad_side is not None:
            parts.append(f"padded {self.pad_side}")
        if self.positions is not None:
            parts.append(f"{self.positions} positions")
        return ", ".join(parts)

    def differences(self, other: Space) -> tuple[str, ...]:
        """The parts in which two partners' spaces disagree, by name (empty when they agree)."""
        names = ("basis", "packed", "cp", "shift", "pad_side", "positions")
        return tuple(n for n in names if getattr(self, n) != getattr(other, n))

    @functools.cached_property
    def key(self) -> tuple[object, ...]:
        """The space as a tuple of plain values: a key for tables of lengths (a tuple of ints and strings hashes
        in C; the dataclass's own hash is a Python call per lookup, on every hooked call)."""
        cp = (self.cp.scheme, self.cp.size, self.cp.rank) if self.cp is not None else None
        return (self.basis, self.packed, cp, self.shift, self.pad_side, self.positions)

    def unsliced(self) -> Space:
        """The same space before CP slicing."""
        return replace(self, cp=None) if self.cp is not None else self

    def length(self, sample: SampleLengths, *, cp_size: int = 1, cp_rank: int = 0) -> int:
        """How many positions one sample has on this axis (one rank's part when CP-local).

        ``T``, ``R`` and ``T-1`` axes are measured from the sample's true and
        response lengths, ``P`` from its padded length. CP-local ``P`` is the
        rank's local length (`geometry.local_length`); CP-local ``R`` (and
        ``T-1``, the logits a response is read from) is the count the CP
        offset rule gives the rank (`geometry.response_count`). A shift drops
        one position. Raises `LayoutSpecError` when the space needs a length
        the sample does not have (``P`` before it was decided).
        """
        size = self.cp.size if self.cp is not None and self.cp.size is not None else cp_size
        rank = self.cp.rank if self.cp is not None and self.cp.rank is not None else cp_rank
        scheme = self.cp.scheme if self.cp is not None else "zigzag"
        if self.cp is None or size == 1:
            base = self._whole(sample)
        elif self.basis == "P":
            base = geometry.local_length(self._padded(sample), size, scheme)
        elif self.basis in ("R", "T-1"):
            # response-space fields are sliced with the offset rule of (P, cp, r)
            count = geometry.response_count(sample.total, sample.response if self.basis == "R" else sample.total,
                                            size, rank, padded=self._padded(sample), scheme=scheme)
            base = count
        else:
            raise LayoutSpecError("a T-space axis has no CP-local length: CP slices padded sequences (P)")
        return max(base - abs(self.shift), 0)

    def _whole(self, sample: SampleLengths) -> int:
        if self.basis == "T":
            return sample.total
        if self.basis == "R":
            return sample.response
        if self.basis == "T-1":
            return max(sample.total - 1, 0)
        return self._padded(sample)

    @staticmethod
    def _padded(sample: SampleLengths) -> int:
        if sample.padded is None:
            raise LayoutSpecError("this space is measured in P, but the sample's padded length is not known")
        return sample.padded


_WORDS = {
    "packed": ("packed", True),
    "right": ("pad_side", "right"),
    "left": ("pad_side", "left"),
    "global": ("positions", "global"),
    "local": ("positions", "local"),
    "+1": ("shift", 1),
    "-1": ("shift", -1),
}


def parse_space(text: str) -> Space:
    """A space from its short spelling, as configuration writes it.

    Words separated by spaces or commas: a basis first (``T``, ``R``,
    ``T-1``, ``P``), then any of ``packed``, ``zigzag`` / ``allgather``
    (CP-local under that scheme, the rank read at run time), ``+1`` / ``-1``
    (shift), ``right`` / ``left`` (pad side), ``global`` / ``local``
    (positions). ``"P zigzag"``, ``"T-1 packed"``, ``"R zigzag +1"``.
    Raises `LayoutSpecError` naming the word it does not know.
    """
    if not isinstance(text, str) or not text.strip():
        raise LayoutSpecError(f"a space is written like \"P zigzag\" or \"T-1 packed\", got {describe_value(text, quote=True)}")
    words = text.replace(",", " ").split()
    basis, rest = words[0], words[1:]
    fields: dict[str, object] = {}
    for word in rest:
        if word in geometry.SCHEMES:
            fields["cp"] = CPPart(scheme=word)  # type: ignore[arg-type]
        elif word in _WORDS:
            key, value = _WORDS[word]
            fields[key] = value
        else:
            known = ", ".join([*geometry.SCHEMES, *_WORDS])
            raise LayoutSpecError(f"space {text!r}: unknown word {word!r}; after the basis write any of {known}")
    return Space(basis, **fields)  # type: ignore[arg-type]
