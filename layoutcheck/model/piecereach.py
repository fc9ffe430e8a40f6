"""A piece of a split sequence rolled in another module (LC109's rolled piece across modules, issue 28).

`layoutcheck.model.pieceroll` pairs a module's splitters and rollers within the module. Here the
project joins each module's facts through the import graph:

* the splitters and rollers (`FileFacts.pieces`, `pieceroll.piece_summaries`);
* where values come from (`FileFacts.origins`, `layoutcheck.model.origins`): a value is a piece when
  one of its origins is a splitter's piece (the element that is one; the split's axis, where a
  parameter names it, passed as a literal other than 0, the batch's rows), or that element of a
  function's return whose own origin is a piece (four calls deep);
* what a call reaches (`ProjectGraph.resolve_callee`, and for a call of an object
  `layoutcheck.model.objectcalls.object_call_targets`).

A call passes a piece to a roller when it reaches a function that rolls the parameter the piece binds to
(by keyword; by position as Python binds it: past the receiver for a method reached through any instance,
``self.m(x)`` or ``obj.m(x)``, or an object's ``forward``, not for ``Cls.m(obj, x)`` through the class; or as an entry of a dict
spread with ``**d``, by key, the dict built in the calling function or returned by another) and gives
none of the parameters whose presence skips that roll (a keyword, a position, or a key of a spread dict
built in the project). It is flagged where the piece is placed: the argument, or the dict's entry.

The other way round (`called_back_pieces`): a call hands a forward whole values in a dict with a callback
(`layoutcheck.model.callbackroll`); the forward cuts each entry with a splitter and calls the callback with
the pieces; the callback's roll of one of them is flagged where it rolls.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from layoutcheck.model.callables import local_callees
from layoutcheck.model.objectcalls import object_call_targets
from layoutcheck.model.origins import Origin

if TYPE_CHECKING:
    from layoutcheck.model.graph import FunctionRef, ProjectGraph

__all__ = ["RolledPiece", "called_back_pieces", "passed_pieces"]

RolledPiece = tuple[tuple[int, int, int, int], str, str, str]
"""(the piece's position (line, column, end line, end column; columns from 0), its text, the call that split
it, the roller as `ProjectGraph.label` names it)."""

_DEPTH = 4
_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Join:
    def __init__(self, graph: ProjectGraph) -> None:
        self.graph = graph
        self.refs: dict[tuple[int, str], FunctionRef | None] = {}
        self.rollers: dict[FunctionRef, tuple[tuple[str, ...], dict[str, frozenset[str]]]] = {}
        self.pieces: dict[tuple[FunctionRef, Origin, int], bool] = {}
        for i, file in enumerate(graph.files):
            for qualname, params, rolled in file.facts.pieces[1]:
                ref = self.ref(i, qualname)
                if ref is not None:
                    self.rollers[ref] = (params, {p: frozenset(skips) for p, skips in rolled})
        self.names = graph.target_names(self.rollers)
        """The last names a call may reach a roller under (calls of objects aside)."""

    def ref(self, index: int, qualname: str) -> FunctionRef | None:
        key = (index, qualname)
        if key not in self.refs:
            self.refs[key] = self.graph.lookup(index, qualname)
        return self.refs[key]

    def piece(self, ctx: FunctionRef, origin: Origin, depth: int = 0) -> bool:
        """Is the value ``origin`` gives in ``ctx`` a piece of a split sequence (the module docs)?

        Kept by depth too: an answer found nearer the limit may stop short of one found from the
        top, so a memo by place alone would make each answer depend on which question came first,
        and a run that asks of one file (`run`'s ``only``) asks fewer, in another order. By depth
        it is a function of its arguments (a recursion goes one deeper each step: none meets its
        own question)."""
        key = (ctx, origin, depth)
        if key in self.pieces:
            return self.pieces[key]
        self.pieces[key] = False
        callee, element, literals = origin
        target = self.graph.resolve_callee(ctx, callee)
        found = False
        if target is not None:
            facts = self.graph.files[target[0]].facts
            qualname = self.graph.function(target).qualname
            given = dict(literals)
            for name, at, axis, position in facts.pieces[0]:
                if name != qualname or at != element:
                    continue
                if not axis:
                    found = True
                else:
                    # `obj.m(x)` binds x one parameter on; `Cls.m(obj, x)` passes the receiver by hand
                    shift = 1 if self.graph.fills_receiver(ctx, callee, target) else 0
                    value = given.get(axis, given.get(f"#{position - shift}"))
                    found = found or (value is not None and value != 0)
            if not found and depth < _DEPTH:
                for name, at, inner in facts.origins[0]:
                    if name != qualname:
                        continue
                    if at == element:
                        found = self.piece(target, inner, depth + 1)
                    elif at == -1 and element >= 0 and inner[1] == -1:
                        found = self.piece(target, (inner[0], element, inner[2]), depth + 1)
                    if found:
                        break
        self.pieces[key] = found
        return found

    def spread(self, ctx: FunctionRef, origin: Origin) -> tuple[list[tuple[int, FunctionRef, tuple]], set[str]]:
        """The entries of the dict ``origin`` gives (returned by a project function), with their file and
        function, and its keys."""
        callee, element, _ = origin
        target = self.graph.resolve_callee(ctx, callee)
        if target is None:
            return [], set()
        qualname = self.graph.function(target).qualname
        entries = [(target[0], target, entry) for entry in self.graph.files[target[0]].facts.origins[1]
                   if entry[0] == qualname and entry[1] == element]
        return entries, {entry[2] for _, _, entry in entries}

    def targets(self, caller: FunctionRef, callee: str, is_object: bool, mine: tuple[Origin, ...]
                ) -> list[tuple[FunctionRef, int]]:
        """The rollers the call reaches, each with how many leading parameters the receiver takes."""
        found = self.graph.resolve_callee(caller, callee)
        if found is not None:  # bound as Python does (`ProjectGraph.fills_receiver`)
            return [(found, 1 if self.graph.fills_receiver(caller, callee, found) else 0)] \
                if found in self.rollers else []
        if not is_object:
            return []
        # a module object's call runs its `forward` (`nn.Module.__call__`): the instance fills the receiver
        return [(ref, 1 if self.graph.takes_receiver(ref) else 0)
                for ref in object_call_targets(self.graph, caller, callee, mine) if ref in self.rollers]

    def run(self, only: int | None = None) -> dict[int, list[RolledPiece]]:
        """The pieces placed in each file; with ``only``, those placed in file ``only`` alone (the same
        list: a piece is placed where its argument or its dict's entry is, and each place is judged
        once, in the same order), without looking for what the other files' calls reach unless
        one of their spread dicts is built in that file."""
        out: dict[int, list[RolledPiece]] = {}
        seen: set[tuple[int, tuple[int, int, int, int]]] = set()
        for i, file in enumerate(self.graph.files):
            if file.is_test:
                continue
            elsewhere = only is not None and i != only
            for qualname, callee, is_object, mine, args, given, spreads in file.facts.origins[2]:
                if not is_object and callee.rsplit(".", 1)[-1] not in self.names:
                    continue  # reaches no roller: most calls
                if elsewhere and not spreads:
                    continue  # its arguments are placed in its own file
                caller = self.ref(i, qualname)
                if caller is None:
                    continue
                spread = None
                if elsewhere:
                    spread = [self.spread(caller, origin) for origin in spreads]
                    if not any(j == only for entries, _ in spread for j, _, _ in entries):
                        continue  # no entry of its dicts is placed in file `only`
                reached = self.targets(caller, callee, is_object, mine)
                if not reached:
                    continue
                placed = [(i, caller, arg) for arg in args]
                keys = set(given)
                if spread is None:
                    spread = [self.spread(caller, origin) for origin in spreads]
                for entries, names in spread:
                    keys |= names
                    placed += [(j, ctx, (e[2], e[3], e[4], e[5])) for j, ctx, e in entries]
                for roller, skip in reached:
                    params, rolled = self.rollers[roller]
                    positional = params[skip:]
                    gives = {positional[int(k[1:])] if k.startswith("#") and int(k[1:]) < len(positional) else k
                             for k in keys}
                    for j, ctx, (key, origins, position, text) in placed:
                        if only is not None and j != only:
                            continue
                        param = positional[int(key[1:])] if key.startswith("#") and int(key[1:]) < len(
                            positional) else key
                        if param not in rolled or rolled[param] & gives or (j, position) in seen:
                            continue
                        split = next((o for o in origins if self.piece(ctx, o)), None)
                        if split is not None:
                            seen.add((j, position))
                            out.setdefault(j, []).append((position, text, split[0].rsplit(".", 1)[-1],
                                                          self.graph.label(roller)))
        return out


def passed_pieces(graph: ProjectGraph, index: int) -> list[RolledPiece]:
    """The pieces of split sequences placed in file ``index`` that a call hands to a function rolling them
    (the module docs). The first file asked is answered alone (`_Join.run`'s ``only``: a one-file run
    asks of one file, and most of the project's calls place nothing there); a second one computes
    every file's at once."""
    state = _CACHE.get(graph)
    if state is None:
        state = _CACHE[graph] = _Found()
        if not any(file.facts.pieces[1] for file in graph.files):
            state.every = {}
    if state.every is not None:
        return state.every.get(index, [])
    if state.join is None:
        state.join = _Join(graph)
    if not state.one:
        state.one[index] = state.join.run(index).get(index, [])
    if index in state.one:
        return state.one[index]
    state.every = state.join.run()
    return state.every.get(index, [])


class _Found:
    """What `passed_pieces` found of one project so far."""

    def __init__(self) -> None:
        self.join: _Join | None = None
        self.one: dict[int, list[RolledPiece]] = {}
        self.every: dict[int, list[RolledPiece]] | None = None


def called_back_pieces(graph: ProjectGraph, index: int) -> list[RolledPiece]:
    """The left rolls, in file ``index``, of a callback's parameter that a splitting forward fills with a
    piece (`layoutcheck.model.callbackroll`): the call passes the callback and a dict with that key to a
    function reaching (by name, or a local holding one, `local_callees`) a forward that cuts each of the
    dict's entries with a splitter and calls the callback with them spread. Along the pieces' axis: the
    last, or axis 1 where the splitter added a leading one (``""`` and -2 in its summary)."""
    handed = graph.files[index].facts.callbacks[1]
    if not handed:
        return []
    join: _Join | None = None
    out: list[RolledPiece] = []
    seen: set[tuple[int, int, int, int]] = set()
    for qualname, callee, fn_slot, dict_slot, keys, rolls in handed:
        caller = graph.lookup(index, qualname)
        if caller is None:
            continue
        targets = list(local_callees(graph, caller).get(callee, ())) if "." not in callee else []
        found = graph.resolve_callee(caller, callee)
        if found is not None and found not in targets:
            targets.append(found)
        for target in targets:
            facts = graph.files[target[0]].facts
            name = graph.signature(target).qualname
            shift = 1 if found == target and graph.fills_receiver(caller, callee, target) else 0
            for forward, fn_param, fn_at, source, source_at, split, element, literals in facts.callbacks[0]:
                if forward != name or fn_slot not in (fn_param, f"#{fn_at - shift}") \
                        or dict_slot not in (source, f"#{source_at - shift}"):
                    continue
                if join is None:
                    join = _Join(graph)
                origin = (split, element, literals)
                if not join.piece(target, origin):
                    continue
                axes = {-1} | ({1} if _packed_under_axis(graph, target, origin) else set())
                for param, axis, where, text in rolls:
                    if param in keys and axis in axes and where not in seen:
                        seen.add(where)
                        out.append((where, text, split.rsplit(".", 1)[-1], graph.label(target)))
    return out


def _packed_under_axis(graph: ProjectGraph, ctx: FunctionRef, origin: Origin) -> bool:
    """Does the splitter ``origin`` calls pack each row's pieces under a leading axis (their positions on
    axis 1: `layoutcheck.model.pieceroll.SplitSummary`'s -2)?"""
    target = graph.resolve_callee(ctx, origin[0])
    if target is None:
        return False
    qualname = graph.function(target).qualname
    return any(name == qualname and at == origin[1] and position == -2
               for name, at, _, position in graph.files[target[0]].facts.pieces[0])
