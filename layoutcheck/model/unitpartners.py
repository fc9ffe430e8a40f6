"""Two builds of one packed layout that meet in their caller, across modules (LC122, issue 28).

A builder with a unit switch (`Function.unit_switches`: ``if fp8: unit = lcm(16, unit)``) lays a stream
out with one unit or another. Calls of it in other modules are often other paths (a backend, a kernel that
never takes the switch), so they are compared only where the code ties them: one function ``G`` hands the
same value (one local it computes, not a setting, unchanged) to two functions, ``F1`` passing it on to the builder without the switch
and ``F2`` passing it on to the builder, in the same place, with the switch. The two streams are then built
from one batch (the same mask, the same ids) for one step, with different units: verl 9bda8b9ac, whose
router replay packed its top-k indices without the FP8 unit the model's forward packed the tokens with,
both handed the step's ``attention_mask``. Where the caller hands ``F2`` the switch as a local that an
``if ...: raise`` refuses set (``if bucket is not None and replay: raise``), the combination is its own
run-time decision, and nothing is flagged. ``F2`` may be reached through a local that holds a function
(`layoutcheck.model.callables`: a forward picked by a getter of a registry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layoutcheck.model.callables import local_callees
from layoutcheck.model.vocabulary import Tag

if TYPE_CHECKING:
    from layoutcheck.model.facts import Arg, Call
    from layoutcheck.model.graph import FunctionRef, ProjectGraph

__all__ = ["partner_setting_switch"]


def _value(arg: Arg | None) -> str | None:
    """The local a caller computes and hands over unchanged (its name: ``keep = batch["attention_mask"].bool()``),
    else None: a setting both are given (the caller's own parameter passed on, a value read from a
    configuration, `Tag.CONFIG`) says nothing about which batch a stream is built from."""
    if arg is None or arg.bare or arg.tags & Tag.CONFIG or not arg.text.isidentifier() \
            or arg.text in ("None", "True", "False"):
        return None
    return arg.text


def _handed(arg: Arg | None) -> str | None:
    """The parameter of the calling function passed on unchanged as ``arg``, else None."""
    return arg.params[0] if arg is not None and arg.bare and len(arg.params) == 1 else None


def partner_setting_switch(graph: ProjectGraph, f1: FunctionRef, call: Call, builder: FunctionRef,
                           switch: str, position: int | None) -> tuple[FunctionRef, FunctionRef] | None:
    """For ``call`` in ``f1`` of ``builder`` leaving ``switch`` at its default: a function ``F2`` that calls
    ``builder`` setting it with a value that ``f1``'s caller hands to both (the module docs), and that
    caller; else None."""
    handed = {name: p for name, arg in graph.binding(f1, call, builder).items() if (p := _handed(arg))}
    if not handed:
        return None
    for g, gcall in graph.callers_of(f1):
        given = graph.binding(g, gcall, f1)
        values = {name: v for name, p in handed.items() if (v := _value(given.get(p)))}
        if not values:
            continue
        held = local_callees(graph, g)
        for other in graph.function(g).calls:
            if other.tick == gcall.tick:
                continue
            found = graph.resolve(g, other)
            for f2 in [found] if found is not None else held.get(other.callee, []):
                if f2 == f1:
                    continue
                theirs = graph.binding(g, other, f2)
                refused = set(graph.signature(g).refused)
                for inner in graph.function(f2).calls:
                    if graph.resolve(f2, inner) != builder or not graph.passes(inner, switch, position):
                        continue
                    q = _handed(graph.binding(f2, inner, builder).get(switch))
                    if q is not None and (arg := theirs.get(q)) is not None and arg.text in refused:
                        continue  # the caller refuses to run with the switch set in some case: it decides
                    for name, arg in graph.binding(f2, inner, builder).items():
                        q = _handed(arg)
                        if q is not None and name in values and _value(theirs.get(q)) == values[name]:
                            return f2, g
    return None
