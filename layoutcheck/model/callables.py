"""What calling a local reaches when the local holds a function (issue 28).

Trainers pick their forward at run time: ``forward_fn = get_forward_fn(cfg)`` where the getter returns
``make_forward(False)`` and that factory returns the ``def`` it nests, or ``forward_fn = fused_forward``
in another arm. The module facts say, per function, where each local comes from
(`layoutcheck.model.origins`: a call's result, or a function named, element `NAMED`) and what each
function returns; here the project follows them: a function named is that ``def``; a call's result is what
the callee returns, followed through returns four calls deep (a getter returning a factory's call, the
factory returning its nested ``def``). Every path counts, as any may run.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from layoutcheck.model.origins import NAMED, Origin

if TYPE_CHECKING:
    from layoutcheck.model.graph import FunctionRef, ProjectGraph

__all__ = ["called_functions", "local_callees"]

_DEPTH = 4
_LOCALS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def called_functions(graph: ProjectGraph, ctx: FunctionRef, origins: tuple[Origin, ...],
                     depth: int = 0) -> list[FunctionRef]:
    """The ``def`` s a value with ``origins`` in ``ctx`` may be: the functions named, and what the calls
    return when they return a function (the module docs)."""
    out: list[FunctionRef] = []
    for callee, element, _ in origins:
        if element == NAMED:
            target = graph.lookup(ctx[0], callee) or graph.resolve_callee(ctx, callee)
            if target is not None and target not in out:
                out.append(target)
            continue
        target = graph.resolve_callee(ctx, callee) if element == -1 and depth < _DEPTH else None
        if target is None:
            continue
        facts = graph.files[target[0]].facts
        qualname = graph.signature(target).qualname
        returned = tuple(inner for name, at, inner in facts.origins[0] if name == qualname and at == -1)
        out.extend(ref for ref in called_functions(graph, target, returned, depth + 1) if ref not in out)
    return out


def local_callees(graph: ProjectGraph, ref: FunctionRef) -> dict[str, list[FunctionRef]]:
    """Per local that function ``ref`` calls (``forward_fn(...)``), the ``def`` s it may hold."""
    found = _LOCALS.get(graph)
    if found is None:
        found = _LOCALS[graph] = {}
    mine = found.get(ref)
    if mine is None:
        qualname = graph.signature(ref).qualname
        held: dict[str, list[Origin]] = {}
        for caller, callee, is_object, origins, _, _, _ in graph.files[ref[0]].facts.origins[2]:
            if caller == qualname and is_object and origins and "." not in callee:
                held.setdefault(callee, []).extend(o for o in origins if o not in held.get(callee, ()))
        mine = found[ref] = {name: called_functions(graph, ref, tuple(origins)) for name, origins in held.items()}
    return mine
