"""What values hold, project-wide: the layer of `Spaces` over the project graph.

`ProjectValues` adds to `ProjectGraph` what fields, parameters and values hold
(`ProjectValues.spaces`, `layoutcheck.model.spaces`), the stores into fields
with what the project's own functions return folded in
(`ProjectValues.writes`), and the pads of each file, calls of the project's
round-up helpers included (`ProjectValues.pads_of`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from functools import cached_property

from layoutcheck.model.facts import FieldWrite, Function, FunctionRef, Pad, ensure_function_calls
from layoutcheck.model.graph import ProjectGraph
from layoutcheck.model.spaces import Spaces
from layoutcheck.model.vocabulary import Tag

__all__ = ["ProjectValues"]


class ProjectValues(ProjectGraph):
    """The project graph, with what its values hold (see the module docs)."""

    @cached_property
    def spaces(self) -> Spaces:
        """What fields, parameters and values hold, from every file's facts (`layoutcheck.model.spaces`)."""
        return Spaces(self)

    @cached_property
    def _resolved_writes(self) -> dict[FunctionRef, list[FieldWrite]]:
        return {}

    def writes(self, ref: FunctionRef) -> list[FieldWrite]:
        """The stores into fields ``ref`` makes, with what the project's functions they call return
        folded into their tags (``[_round_up(t, unit) for t in ...]`` stores padded lengths)."""
        found = self._resolved_writes.get(ref)
        if found is None:
            found = []
            for write in self.writes_by_function.get(ref, []):
                if write.calls:
                    extra = self.spaces.returned(ref, write.calls)
                    if extra & ~write.tags:
                        write = dataclasses.replace(write, tags=write.tags | extra)
                found.append(write)
            self._resolved_writes[ref] = found
        return found

    def write_at(self, ref: FunctionRef, tick: int) -> FieldWrite:
        """`writes` ' store of ``ref`` at ``tick`` (the first, when one statement stores twice), for
        code that walks the files' own `FieldWrite` s: a lookup, not a scan of the function's stores."""
        by_tick = self._writes_at.get(ref)
        if by_tick is None:
            by_tick = self._writes_at[ref] = {}
            for write in self.writes(ref):
                by_tick.setdefault(write.tick, write)
        return by_tick[tick]

    @cached_property
    def _writes_at(self) -> dict[FunctionRef, dict[int, FieldWrite]]:
        return {}

    @cached_property
    def _round_up_names(self) -> set[str]:
        """The last names a call of one of the project's own round-up helpers (``_round_up(n, m)``, found
        by their bodies: they return a parameter rounded up to another) is spelt with (`target_names`)."""
        return self.target_names((i, j) for i, file in enumerate(self.files)
                                 for j, function in enumerate(file.facts.functions) if function.rounds is not None)

    @cached_property
    def _call_pads(self) -> dict[int, list[Pad]]:
        """File ``i``'s calls of the project's own round-up helpers, as pads at the call, by file, for
        the files asked so far (`_call_pads_in`)."""
        return {}

    def _call_pads_in(self, file_index: int) -> list[Pad]:
        """The calls of the project's round-up helpers in file ``file_index``, as pads at the call: only
        calls spelt with a helper's name can reach one, and a one-file run asks of its own file."""
        found = self._call_pads.get(file_index)
        if found is not None:
            return found
        found = self._call_pads[file_index] = []
        names = self._round_up_names
        for ref, function in self.functions_with_calls(names, files=(file_index,)):
            found += self.round_up_call_pads(ref, function, names)
        return found

    def round_up_call_pads(self, ref: FunctionRef, function: Function, names: Collection[str], *,
                           methods: bool = False) -> list[Pad]:
        """``function``'s calls of the project's round-up helpers (spelt with one of ``names``), as pads at
        the call: the helper's value and unit arguments, with what the call's own facts say of them.
        ``methods``: also helpers that are methods reached through an instance (``self.up(n, m)``, whose
        positions count the receiver the call does not pass). Off for the pads every rule reads
        (`pads_of`): read as pads there, such calls gave 11 findings on Megatron-Bridge's collate
        functions (padding-outside-owner, max-of-alignment-units) that nobody has judged yet."""
        found = []
        for call in function.calls:
            if not call.fate or call.callee.rsplit(".", 1)[-1] not in names:
                continue
            target = self.resolve(ref, call)
            if target is None or self.signature(target).rounds is None:
                continue
            i, j = self.signature(target).rounds  # type: ignore[misc]
            if methods and self.fills_receiver(ref, call.callee, target):
                i, j = i - 1, j - 1  # `self.up(n, m)`: the positions count the receiver, the call does not pass it
                if i < 0 or j < 0:
                    continue
            args = [a for a in call.args if a.keyword is None]
            if len(args) <= max(i, j):
                continue
            value, unit = args[i], args[j]
            found.append(Pad(
                ref[1], "round_up", call.span, call.text, value.tags, unit.tags, call.unit, "ceil", call.layout,
                call.fate, call.tick, value.params, value.fields, unit.params,
            ))
        return found

    def method_pads(self, ref: FunctionRef) -> list[Pad]:
        """The pads of one ``def``: its own idioms and its calls of the project's round-up helpers, methods
        reached through an instance included (`round_up_call_pads` with ``methods``)."""
        file = self.files[ref[0]]
        function = ensure_function_calls(file.facts, ref[1])
        own = [p for p in file.facts.pads if p.function == ref[1] and function.rounds is None]
        names = self._round_up_names
        called = self.round_up_call_pads(ref, function, names, methods=True) if names else []
        return [*own, *called]

    def pads_of(self, file_index: int) -> list[Pad]:
        """The pads of a file: its own idioms, and calls of the project's round-up helpers (whose own
        round-up is judged at each call, where its arguments say what it pads)."""
        functions = self.files[file_index].facts.functions
        own = [p for p in self.files[file_index].facts.pads if functions[p.function].rounds is None]
        return [*own, *self._call_pads_in(file_index)]


    @cached_property
    def stream_pads(self) -> list[tuple[FunctionRef, Pad]]:
        """Every pad of a packed stream (its tail rounded up to a unit) in the trainer, by function."""
        stream = int(Tag.STREAM)
        return [((i, pad.function), pad) for i, file in enumerate(self.files) if not file.is_test
                for pad in self.pads_of(i) if pad.value_tags & stream and pad.unit]
