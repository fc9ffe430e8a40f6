"""The sides a project pads its fields on, and where they disagree (docs/design.md#layout-spaces-and-bug-classes, class 7).

Each file says where its functions place a tensor's real tokens, left or right of the padding,
and where they read a row assuming a side (`layoutcheck.model.padsides`). The project joins:

* a field's placements: the stores into it (`FieldWrite`) of a tensor padded on one side, the side
  followed out of the functions returning it and into the parameters it was passed as (`Spaces`),
  each traced back to the placement that decided it;
* a field's reads: rows read from it directly (``batch["k"][i, :n]``) or through a parameter the
  callers fill from it (`Spaces.param_fields`);
* `Sides.disagreements`: a placement whose side differs from the field's reads (with no reads:
  from the field's other placements, the fewer side flagged), two partners padded to one
  length on different sides in one function, and fields stored into one record (a dict literal)
  from placements on different sides (the fewer side flagged).

A field name joins two places only because the code stores and reads the same key, which a
consistent rename keeps.
"""

from __future__ import annotations

from layoutcheck.records import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from layoutcheck.model.facts import FieldWrite, PadSide, exclusive_arms
from layoutcheck.model.vocabulary import Tag

if TYPE_CHECKING:
    from layoutcheck.model.facts import FunctionRef
    from layoutcheck.model.values import ProjectValues

__all__ = ["SideDisagreement", "Sides"]

_LEFT, _RIGHT = int(Tag.LEFT), int(Tag.RIGHT)
_ROWS = int(Tag.TOK | Tag.SAMPLE | Tag.STREAM | Tag.MASKED | Tag.ENTRY | Tag.LEFT | Tag.RIGHT)
"""What a tensor's own rows carry: a field written with none of these, and with a size's tags, is a size."""
_SIZE = int(Tag.SEQ | Tag.MEASURED | Tag.WIDTH | Tag.CONFIG | Tag.PAD | Tag.MAX)
_SIDE = {_LEFT: "left", _RIGHT: "right"}
_DEPTH = 4
_BySide = dict[str, list[tuple["FunctionRef", PadSide]]]


@dataclass(frozen=True)
class SideDisagreement:
    """A placement on one side where the layout's other users take the other side."""

    function: FunctionRef
    place: PadSide
    other: str
    """Where the other side is taken: ``read at data.py:12 (`x[i, :n]`)``."""
    field: str | None
    """The field both meet in (None: two partners in one function)."""


class Sides:
    """Pad sides of one project (see the module docs)."""

    def __init__(self, project: ProjectValues) -> None:
        self.project = project
        self.places: dict[FunctionRef, list[PadSide]] = {}
        self.reads: dict[FunctionRef, list[PadSide]] = {}
        self.joins: dict[FunctionRef, set[tuple[str, str]]] = {}
        """Names joined along their rows (``torch.cat([a, b], dim=-1)``), in order: one row's segments."""
        for i, file in enumerate(project.files):
            if file.is_test:
                continue
            for side in file.facts.sides:
                if side.act == "join":
                    self.joins.setdefault((i, side.function), set()).update(zip(side.fields, side.fields[1:]))
                    continue
                table = self.places if side.act == "place" else self.reads
                table.setdefault((i, side.function), []).append(side)

    # ------------------------------------------------------------ tracing a side to its placement

    def origins(self, ref: FunctionRef, side: str, own: bool, calls: tuple[str, ...], params: tuple[str, ...],
                depth: int = 0) -> list[tuple[FunctionRef, PadSide]]:
        """The placements that gave a value of ``ref`` its ``side``: ``ref``'s own (``own``), those of the
        functions whose results it is (``calls``), those of the arguments it was passed as (``params``)."""
        found: list[tuple[FunctionRef, PadSide]] = []
        if own:
            found += [(ref, p) for p in self.places.get(ref, ()) if p.side == side]
        if depth >= _DEPTH:
            return found
        project = self.project
        for callee in calls:
            target = project.resolve_callee(ref, callee)
            if target is not None:
                function = project.function(target)
                found += self.origins(target, side, True, function.returns_calls, (), depth + 1)
        for name in params:
            for caller, call in project.callers_of(ref):
                arg = project.binding(caller, call, ref).get(name)
                if arg is not None:
                    found += self.origins(caller, side, bool(arg.tags & (_LEFT | _RIGHT)), arg.calls, arg.params,
                                          depth + 1)
        return found

    def _write_side(self, ref: FunctionRef, write: FieldWrite) -> str | None:
        spaces = self.project.spaces
        tags = write.tags | spaces.returned(ref, write.calls)
        for name in write.params:
            tags |= spaces.param(ref, name)
        sides = tags & (_LEFT | _RIGHT)
        return _SIDE.get(sides)

    # ------------------------------------------------------------ the join

    @cached_property
    def fields(self) -> dict[str, tuple[_BySide, _BySide]]:
        """Per field: the placements of its rows by side (traced to the code that placed them), and
        the reads of its rows by the side they assume."""
        project = self.project
        places: dict[str, _BySide] = {}
        for i, file in enumerate(project.files):
            if file.is_test:
                continue
            for write in file.facts.field_writes:
                ref = (i, write.function)
                side = self._write_side(ref, write)
                if side is None:
                    continue
                own = bool(write.tags & (_LEFT | _RIGHT))
                found = self.origins(ref, side, own, write.calls, write.params)
                if not found:
                    found = [(ref, PadSide(ref[1], side, "place", write.span, write.text))]
                bucket = places.setdefault(write.key, {}).setdefault(side, [])
                bucket += [f for f in found if f not in bucket]
        reads: dict[str, _BySide] = {}
        copied = self._copied()
        for ref, found in sorted(self.reads.items()):
            for read in found:
                keys = set(read.fields)
                for name in read.params:
                    keys |= project.spaces.param_fields(ref, name)
                for _ in range(_DEPTH):
                    more = {c for key in keys for c in copied.get(key, ())} - keys
                    if not more:
                        break
                    keys |= more
                for key in keys:
                    reads.setdefault(key, {}).setdefault(read.side, []).append((ref, read))
        return {key: (places.get(key, {}), reads.get(key, {})) for key in sorted(set(places) | set(reads))}

    def describe(self, found: tuple[FunctionRef, PadSide]) -> str:
        """``rollout.py:16 (`out[0, start : start + n]`)``."""
        ref, side = found
        return f"{self.project.files[ref[0]].display}:{side.span[0]} (`{side.text}`)"

    @cached_property
    def disagreements(self) -> list[SideDisagreement]:
        """Placements on one side where the field's readers, its other placements or a partner take the other."""
        out: list[SideDisagreement] = []
        seen: set[tuple[FunctionRef, tuple[int, int, int, int]]] = set()

        def flag(ref: FunctionRef, place: PadSide, other: str, key: str | None) -> None:
            if (ref, place.span) not in seen:
                seen.add((ref, place.span))
                out.append(SideDisagreement(ref, place, other, key))

        for key, (by_side, read) in self.fields.items():
            if len(read) == 1:
                (expected, readers), = read.items()
                where = self._where(readers[0], "read")
                for side, found in by_side.items():
                    if side != expected:
                        for ref, place in found:
                            flag(ref, place, where, key)
            elif not read and len(by_side) == 2:
                left, right = by_side["left"], by_side["right"]
                # The fewer placements are the odd ones out; of as many, the later.
                if len(left) != len(right):
                    fewer, more = (left, right) if len(left) < len(right) else (right, left)
                else:
                    fewer, more = (left, right) if _last(left) > _last(right) else (right, left)
                where = self._where(more[0], "placed")
                for ref, place in fewer:
                    flag(ref, place, where, key)
        for (ref, _), by_side in self.records.items():
            if len(by_side) == 2:
                left, right = by_side["left"], by_side["right"]
                fewer, more = (left, right) if len(left) < len(right) else (right, left)
                if len(left) == len(right):
                    continue  # as many each way: no odd one out to name
                joined = self.joins.get(ref, set())
                for key, (place_ref, place), name in fewer:
                    # A left-padded segment joined before a right-padded one (`cat([prompts, responses])`,
                    # verl's layout) keeps each row's real tokens contiguous: segments, not partners.
                    if any((name, m[2]) in joined or (m[2], name) in joined for m in more):
                        continue  # a segment of the row the other side's fields are the rest of
                    partners = more
                    where = self._where(partners[0][1], "placed") + f" for `{partners[0][0]}` in the same record"
                    flag(place_ref, place, where, key)
        for ref, found in sorted(self.places.items()):
            for i, later in enumerate(found):
                for earlier in found[:i]:
                    if earlier.side != later.side and set(earlier.extent) & set(later.extent) and not exclusive_arms(
                        earlier.arms, later.arms
                    ):  # `if side == "right": ... elif side == "left": ...` runs one placement, never both
                        flag(ref, later, self._where((ref, earlier), "placed") + " to the same length", None)
                        break
        return out

    @cached_property
    def records(self) -> dict[tuple[FunctionRef, int], dict[str, list[tuple[str, tuple[FunctionRef, PadSide], str]]]]:
        """Fields stored into one record in one expression (a dict literal), by the side each is padded
        on (traced to its placement): partners, which every consumer indexes alike."""
        out: dict[tuple[FunctionRef, int], dict[str, list[tuple[str, tuple[FunctionRef, PadSide], str]]]] = {}
        for i, file in enumerate(self.project.files):
            if file.is_test:
                continue
            for write in file.facts.field_writes:
                if not write.record:
                    continue
                ref = (i, write.function)
                side = self._write_side(ref, write)
                if side is None:
                    continue
                found = self.origins(ref, side, bool(write.tags & (_LEFT | _RIGHT)), write.calls, write.params)
                if found:
                    out.setdefault((ref, write.record), {}).setdefault(side, []).append(
                        (write.key, found[0], write.text))
        return out

    def _copied(self) -> dict[str, set[str]]:
        """Fields stored from other fields' values (``self.parts = split(batch["x"])``): a row read
        from the copy reads the originals' rows. A field that only ever holds a size
        (``out["prompt_length"] = batch["prompts"].shape[-1]``) copies no rows: a row read through
        it does not reach the tensor it was measured from."""
        out: dict[str, set[str]] = {}
        rows: set[str] = set()
        sizes: set[str] = set()
        for file in self.project.files:
            if file.is_test:
                continue
            for write in file.facts.field_writes:
                out.setdefault(write.key, set()).update(f for f in write.fields if f != write.key)
                if write.tags & _ROWS:
                    rows.add(write.key)
                elif write.tags & _SIZE:
                    sizes.add(write.key)
        only_sizes = sizes - rows
        return {key: found - only_sizes for key, found in out.items() if key not in only_sizes}

    def _where(self, found: tuple[FunctionRef, PadSide], verb: str) -> str:
        return f"{verb} on the {found[1].side} at {self.describe(found)}"


def _last(found: list[tuple[FunctionRef, PadSide]]) -> tuple[int, int]:
    return max((ref[0], side.span[0]) for ref, side in found)

