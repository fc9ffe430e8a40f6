"""Function summaries read from a function's own body, for its callers in any module.

The per-file walk writes each function's summary into its `Function` facts;
the project reads it at every call that reaches the function through the
import graph (`ProjectGraph.resolve_callee`, an element of a tuple return
written ``*i:f``). A summary says what the function's result is, so that a
caller's check judges the value and not the call's spelling. This module
holds the summaries computed from the syntax of one function alone:

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

from layoutcheck.model.calls import returned_tuple
from layoutcheck.model.syntax import int_value, own_nodes

__all__ = ["zero_pair_elements"]

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
