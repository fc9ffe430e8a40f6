"""Rows a side switch pads on the left, reaching a head reader in another module (class 7).

`layoutcheck.model.sidedefault` reads one module: a *side switch* (a function whose pad amount
is picked by a parameter compared with a string, ``(k, 0) if side == "left" else (0, k)``) called so
that it pads on the left, and a *head reader* (a function that zips the rows of a parameter with a
list and reads each row's head, ``row[:n]``) given what it padded. Real trainers spread the two over
modules: OpenRLHF a32a7322 pads its preference rows in `datasets/utils.py`, collates them in
`reward_dataset.py`, and the DPO loss reads them from their start in `dpo_trainer.py`, reached
through a DataLoader's loop, a method and a returned tuple. Here the project joins the module facts
(`FileFacts.side_summaries`) along the calls, from the function summaries every file has:

* a switch called with its parameter *not given* pads on the side its default selects (a call that
  gives it, whatever the value, is not judged: the module reader reads the constants it can see);
* a function's return, whole or by element (`Function.returns_calls`, `returns_elements`), is left
  padded when it is the result of such a call, or of a function whose return is (four calls deep);
* a parameter *reaches* a head reader when it is one, or when the function passes what derives from
  it (`Arg.params`, or an element of a call's return that derives from it: `Function.returns_params`,
  `returns_elements`) to a parameter that reaches one;
* `left_rows_into_head_readers` gives each left-padding call whose result a caller passes, through
  those, to a parameter that reaches a head reader: the call, and the reader's function.

Decided by what the code does with values, never by a name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layoutcheck.model.facts import Call, element_call

if TYPE_CHECKING:
    from layoutcheck.model.graph import FunctionRef, ProjectGraph

__all__ = ["HeadReach", "left_rows_into_head_readers"]

_DEPTH = 4
"""How many calls deep a side or a reach is followed."""

HeadReach = tuple["FunctionRef", Call, "FunctionRef"]
"""(the function holding the left-padding call, the call, the head reader its rows reach)."""


class _Reach:
    """The walk over one project (see the module docs)."""

    def __init__(self, graph: ProjectGraph) -> None:
        self.graph = graph
        self.switches: dict[FunctionRef, tuple[str, str, str, str, str]] = {}
        self.readers: set[tuple[FunctionRef, str]] = set()
        for i, file in enumerate(graph.files):
            if file.is_test:
                continue
            switches, readers = file.facts.side_summaries
            for qualname, *switch in switches:
                ref = graph.defined(i, qualname)
                if ref is not None:
                    self.switches[ref] = tuple(switch)  # type: ignore[assignment]
            for qualname, param in readers:
                ref = graph.defined(i, qualname)
                if ref is not None:
                    self.readers.add((ref, param))
        self._reaches: dict[tuple[FunctionRef, str], FunctionRef | None] = {}
        self._left: dict[tuple[FunctionRef, int], tuple[FunctionRef, Call] | None] = {}
        self._flows: dict[tuple[FunctionRef, int], frozenset[str]] = {}

    # ------------------------------------------------------------ the left side, out of returns

    def left_call(self, ref: FunctionRef, call: Call) -> tuple[FunctionRef, Call] | None:
        """The left-padding call that gives ``call``'s result (in ``ref``) its rows: ``call`` itself when it
        reaches a switch not given its parameter whose default pads on the left, else the one inside the
        callee whose whole return is left padded."""
        target = self.graph.resolve(ref, call)
        if target is None:
            return None
        switch = self.switches.get(target)
        if switch is not None:
            param, const, equal, other, default = switch
            if not default or param in self.graph.binding(ref, call, target) \
                    or any(arg.keyword in ("*", "**") for arg in call.args):
                return None  # given (or maybe, spread): not judged
            return (ref, call) if (equal if default == const else other) == "left" else None
        return self.left_element(target, -1)

    def left_element(self, ref: FunctionRef, element: int, depth: int = 0) -> tuple[FunctionRef, Call] | None:
        """The left-padding call element ``element`` of ``ref``'s return (-1: all of it) holds, if any."""
        key = (ref, element)
        if key in self._left:
            return self._left[key]
        self._left[key] = None  # a cycle finds nothing
        if depth >= _DEPTH:
            return None
        function = self.graph.function(ref)
        if element < 0:
            callees = function.returns_calls
        elif element < len(function.returns_elements):
            callees = function.returns_elements[element][1]
        else:
            return None
        found = next((left for callee in callees if (left := self._left_of(ref, callee, depth))), None)
        self._left[key] = found
        return found

    def _left_of(self, ref: FunctionRef, made: str, depth: int) -> tuple[FunctionRef, Call] | None:
        """The left-padding call a value of ``ref`` that is ``made``'s result (``*i:f``: element ``i`` of it)
        holds, through the calls of ``ref`` spelt so."""
        at, name = element_call(made)
        for call in self.graph.function(ref).calls:
            if call.callee != name:
                continue
            if at is None or at < 0:
                found = self.left_call(ref, call) if depth + 1 < _DEPTH else None
            else:
                target = self.graph.resolve(ref, call)
                found = self.left_element(target, at, depth + 1) if target is not None else None
            if found is not None:
                return found
        return None

    # ------------------------------------------------------------ parameters, into head readers

    def flows(self, ref: FunctionRef, element: int, depth: int = 0) -> frozenset[str]:
        """The parameters of ``ref`` that element ``element`` of its return (-1: all of it) derives from,
        through the functions whose results it is (what ``ref`` passes them for their parameters)."""
        key = (ref, element)
        if key in self._flows:
            return self._flows[key]
        self._flows[key] = frozenset()
        function = self.graph.function(ref)
        if element < 0:
            params, callees = set(function.returns_params), function.returns_calls
        elif element < len(function.returns_elements):
            _, callees, given = function.returns_elements[element]
            params = set(given)
        else:
            return frozenset()
        if depth < _DEPTH:
            for callee in callees:
                params |= self._element_flow(ref, callee, depth + 1)
        found = self._flows[key] = frozenset(params)
        return found

    def reaches(self, ref: FunctionRef, param: str, depth: int = 0) -> FunctionRef | None:
        """The head reader ``ref``'s parameter ``param`` reaches (itself, or a callee's parameter given
        what derives from it), if any."""
        key = (ref, param)
        if key in self._reaches:
            return self._reaches[key]
        self._reaches[key] = None
        if (ref, param) in self.readers:
            self._reaches[key] = ref
            return ref
        if depth >= _DEPTH:
            return None
        function = self.graph.function(ref)
        found = None
        for call in function.calls:
            target = self.graph.resolve(ref, call)
            if target is None or target == ref:
                continue
            for name, arg in self.graph.binding(ref, call, target).items():
                if param in arg.params or any(param in self._element_flow(ref, c) for c in arg.calls):
                    found = self.reaches(target, name, depth + 1)
                    if found is not None:
                        break
            if found is not None:
                break
        self._reaches[key] = found
        return found

    def _element_flow(self, ref: FunctionRef, callee: str, depth: int = 0) -> frozenset[str]:
        """The parameters of ``ref`` that a value which is ``callee``'s result (``*i:f``: element ``i`` of
        it) derives from, through what ``ref`` passes that call (its callee read ``depth`` calls deep)."""
        at, name = element_call(callee)
        out: set[str] = set()
        function = self.graph.function(ref)
        for call in function.calls:
            if call.callee != name:
                continue
            target = self.graph.resolve(ref, call)
            if target is None:
                continue
            inner = self.flows(target, -1 if at is None else at, depth)
            for param, arg in self.graph.binding(ref, call, target).items():
                if param in inner:
                    out.update(arg.params)
        return frozenset(out)

    # ------------------------------------------------------------ the join

    def found(self) -> list[HeadReach]:
        out: list[HeadReach] = []
        seen: set[tuple[FunctionRef, tuple[int, int, int, int]]] = set()
        if not self.switches or not self.readers:
            return out
        for ref, function in self.graph.functions():
            for call in function.calls:
                target = None
                for arg in call.args:
                    if not arg.calls:
                        continue
                    target = target or self.graph.resolve(ref, call)
                    if target is None:
                        break
                    name = self._param_of(ref, call, target, arg)
                    reader = self.reaches(target, name) if name is not None else None
                    if reader is None:
                        continue
                    for made in arg.calls:
                        left = self._left_of(ref, made, -1)
                        if left is not None and (left[0], left[1].span) not in seen:
                            seen.add((left[0], left[1].span))
                            out.append((left[0], left[1], reader))
        return out

    def _param_of(self, ref: FunctionRef, call: Call, target: FunctionRef, arg: object) -> str | None:
        for name, bound in self.graph.binding(ref, call, target).items():
            if bound is arg:
                return name
        return None


def left_rows_into_head_readers(graph: ProjectGraph) -> list[HeadReach]:
    """Each left-padding call whose rows a caller hands, through calls and returned tuples in any module,
    to a head reader (the module docs)."""
    return _Reach(graph).found()
