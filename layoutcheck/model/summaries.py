"""Function summaries read from a function's own body, for its callers in any module.

The per-file walk writes each function's summary into its `Function` facts;
the project reads it at every call that reaches the function through the
import graph (`ProjectGraph.resolve_callee`, an element of a tuple return
written ``*i:f``). A summary says what the function's result is, so that a
caller's check judges the value and not the call's spelling. This module
holds the summaries computed from the syntax of one function alone:

* the summary the walk joins over a function's ``return`` s (`SummaryMixin`,
  written by `write_summary`): the tags and the project's functions each
  return derives from (`Function.returns_tags`, `returns_calls`), and, when
  every ``return`` gives a tuple of one length, the same per element
  (`Function.returns_elements`: a caller's ``_, x = f()`` or ``f()[1]`` reads
  its element there);
* `zero_pair_elements`: the elements of a tuple return that hold, on some
  path, a pair of positions given as the literal ``(0, 0)`` (an empty range)
  while another path computes them. A helper that clamps chunk offsets into
  a range on one path and returns ``(0, 0)`` on the other (an empty chunk)
  clamps nothing on that path: a caller that moves the positions to a later
  origin (``offs[0][0] - prompt``) gets a negative bound there, which counts
  from the end. LC116 trusts a helper's clamp, except for these elements.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from layoutcheck.model.calls import returned_tuple
from layoutcheck.model.syntax import int_value, own_nodes

if TYPE_CHECKING:
    from layoutcheck.model.facts import Arg, Call, Function, FunctionRef, Param

__all__ = ["SummaryMixin", "forwarded_calls", "write_summary", "zero_pair_elements"]

_DEPTH = 3
"""How many locals deep a returned element is read (``return a, (t0, t1)`` with ``t0 = ...``)."""


def _zero_pair(node: ast.expr) -> bool:
    return isinstance(node, ast.Tuple) and len(node.elts) >= 2 and all(int_value(e) == 0 for e in node.elts)


def zero_pair_elements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, ...]:
    """The positions of ``function``'s returned tuple whose value holds, on some path, the literal pair
    ``(0, 0)`` where another path binds the same local to something computed (see the module docs).
    Empty unless every ``return`` gives a tuple of one length."""
    stores: dict[str, list[ast.expr]] = {}
    returns: list[ast.Tuple] = []
    for node in own_nodes(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    stores.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.Return):
            value = returned_tuple(node)
            if not isinstance(value, ast.Tuple):
                return ()
            returns.append(value)
    if not returns or len({len(r.elts) for r in returns}) != 1:
        return ()

    return tuple(i for i in range(len(returns[0].elts))
                 if any(_holds_zero_path(r.elts[i], stores, 0) for r in returns))


def _holds_zero_path(value: ast.expr, stores: dict[str, list[ast.expr]], depth: int) -> bool:
    """Does ``value`` hold, read through the locals ``stores`` binds, a local bound to ``(0, 0)`` on one
    path and to something computed on another?"""
    if depth > _DEPTH:
        return False
    if isinstance(value, ast.Name):
        bound = stores.get(value.id, ())
        if len(bound) >= 2 and any(_zero_pair(v) for v in bound) and not all(_zero_pair(v) for v in bound):
            return True
        return len(bound) == 1 and _holds_zero_path(bound[0], stores, depth + 1)
    if isinstance(value, ast.Tuple):
        return any(_holds_zero_path(e, stores, depth + 1) for e in value.elts)
    return False


class SummaryMixin:
    """The walk's part of a function's summary: each ``return`` joined in as the walk meets it (mixed into
    the per-file walk, whose `classify`, `resolved` and function state it reads)."""

    state: Any
    classify: Any
    resolved: Any

    def summarise_return(self, node: ast.Return) -> None:
        """Join what ``node`` returns (a value) into the function's summary."""
        state = self.state
        value = self.classify(node.value)
        state.returns |= value.tags
        state.returns_calls |= value.calls
        state.returns_params |= value.params
        self.returned_elements(node.value)  # type: ignore[arg-type]
        if isinstance(returned_tuple(node), ast.Tuple):
            state.tuple_returns = True

    def returned_elements(self, value: ast.expr) -> None:
        """Join what a ``return`` gives into the function's summary by element (`Function.returns_elements`):
        a tuple written there or bound to the local it returns, position by position."""
        state = self.state
        if state.elements is False:
            return
        found = self.resolved(value) if isinstance(value, ast.Name) else value
        if not isinstance(found, ast.Tuple) or any(isinstance(e, ast.Starred) for e in found.elts):
            state.elements = False
            return
        # A local bound to a tuple (`out = a, b` ... `return out`): its elements read in the bindings here.
        joined = [(v.tags, v.calls, v.params) for v in map(self.classify, found.elts)]
        if state.elements is None:
            state.elements = joined
        elif len(state.elements) != len(joined):
            state.elements = False
        else:
            state.elements = [(a | d, b | e, c | f) for (a, b, c), (d, e, f) in zip(state.elements, joined)]


def write_summary(state: Any, node: ast.AST, facts: Function) -> None:
    """Write the summary a function's walk joined (``state``) into its facts, with the summaries read from
    its syntax (``node``, its ``def``)."""
    facts.returns_tags = state.returns
    facts.returns_calls = tuple(sorted(state.returns_calls))
    facts.returns_params = tuple(sorted(state.returns_params))
    if state.elements:
        facts.returns_elements = tuple((tags, tuple(sorted(calls)), tuple(sorted(params)))
                                       for tags, calls, params in state.elements)
    if state.tuple_returns and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        facts.zero_elements = zero_pair_elements(node)


_FORWARD_DEPTH = 4
"""How many wrappers deep a forwarded argument is followed (``a(**kw)`` -> ``b(**kw)`` -> ``c(**kw)``)."""


def forwarded_calls(ref: FunctionRef, found: Sequence[tuple[FunctionRef, Call]],
                    function: Callable[[FunctionRef], Function],
                    callers_of: Callable[[FunctionRef], Sequence[tuple[FunctionRef, Call]]],
                    fills: Callable[[FunctionRef, str, FunctionRef], bool],
                    depth: int = 0) -> list[tuple[FunctionRef, Call]]:
    """The calls that reach ``ref`` (the callee) through a wrapper that forwards its own ``*args`` /
    ``**kwargs`` (``def w(x, **kw): return callee(x, **kw)``; ``def forward(self, *a, **k): return
    callee(*a, **k)``): for each call of such a wrapper (``found`` holds the calls that reach the callee,
    the wrapper's among them), the arguments the wrapper's own parameters do not take, as a call of the
    callee from the wrapper's caller, each argument named by the parameter of the callee it lands on (a
    positional one after the wrapper's own positional arguments). Positions are bound as Python binds
    them, at both calls: ``fills(caller, callee as written, target)`` says whether the call fills the
    target's receiver itself (`ProjectGraph.fills_receiver`: ``obj.m(...)``, not ``Cls.m(obj, ...)`` nor a
    ``@staticmethod``). The wrapper's own call stays in ``found``: its other arguments are the wrapper's
    values. Decided by where each argument goes, never by a name."""
    out: list[tuple[FunctionRef, Call]] = []
    if depth >= _FORWARD_DEPTH:
        return out
    callee = function(ref)
    for wrapper_ref, call in found:
        wrapper = function(wrapper_ref)
        star = next((p.name for p in wrapper.params if p.kind == "star"), None)
        dstar = next((p.name for p in wrapper.params if p.kind == "dstar"), None)
        if star is None and dstar is None:
            continue
        spread = next((a for a in call.args if a.keyword == "*"), None)
        spreads_star = spread is not None and spread.bare and spread.params == (star,)
        spreads_dstar = any(a.keyword == "**" and a.bare and a.params == (dstar,) for a in call.args)
        if not (spreads_star or spreads_dstar):
            continue
        # where the wrapper's `*args` start among the callee's positional parameters
        before = 0
        for arg in call.args:
            if arg.keyword == "*":
                break
            if arg.keyword is None:
                before += 1
        targets = _positional(callee.params, fills(wrapper_ref, call.callee, ref)) if spreads_star else []
        named = {p.name for p in wrapper.params if p.kind in ("posonly", "pos", "kwonly")}
        for outer, outer_call in callers_of(wrapper_ref):
            taken = _positional(wrapper.params, fills(outer, outer_call.callee, wrapper_ref))
            args: list[Arg] = []
            index = 0
            for arg in outer_call.args:
                if arg.keyword is None:
                    if index >= len(taken) and spreads_star:
                        at = before + index - len(taken)
                        if at < len(targets):
                            args.append(arg._replace(keyword=targets[at]))
                    index += 1
                elif arg.keyword == "*":
                    break  # the positions after an unknown spread are unknown
                elif arg.keyword == "**":
                    if spreads_dstar:
                        args.append(arg)  # the outer caller's own forward: followed one wrapper further out
                elif arg.keyword not in named and spreads_dstar:
                    args.append(arg)
            if args:
                out.append((outer, outer_call._replace(args=tuple(args))))
    # a wrapper's caller that forwards its own `**kwargs` again (its call here names every argument)
    if out:
        out += forwarded_calls(ref, out, function, callers_of, fills, depth + 1)
    return out


def _positional(params: Sequence[Param], method: bool) -> list[str]:
    """The names of the positional parameters a call's positional arguments fill (the first left out where
    the call fills the receiver, ``method``, as `ProjectGraph.bind` does)."""
    positional = [p.name for p in params if p.kind in ("posonly", "pos")]
    if method:
        positional = positional[1:]
    return positional
