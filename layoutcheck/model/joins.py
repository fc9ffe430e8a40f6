"""Joining the locals of alternative branches: their abstract values and the expressions they are bound to.

Part of the per-file walk (`layoutcheck.model.extract`): after an ``if``, a
``match``, a loop body or ``except`` handlers (`StatementsMixin.branches`), a
local carries what any live path gave it (`join_envs`), and a local bound to a
different expression on each path is bound to all of them as a synthetic
``a if <path> else b`` (`join_exprs`, `flow.is_joined`).
"""

from __future__ import annotations

import ast

from layoutcheck.model.flow import JOINED_PATH, Value

__all__ = ["join_envs", "join_exprs"]


def join_envs(envs: list[dict[str, Value]], before: dict[str, Value]) -> dict[str, Value]:
    """The locals after alternative branches: each name carries what any branch gave it."""
    if len(envs) == 1:
        return envs[0]
    out = dict(envs[0])
    for env in envs[1:]:
        for name, value in env.items():
            mine = out.get(name)
            if mine is None:
                previous = before.get(name)
                out[name] = value if previous is None else previous | value
            elif mine is not value:
                out[name] = mine | value
        for name in out.keys() - env.keys():
            previous = before.get(name)
            if previous is not None and out[name] is not previous:
                out[name] = out[name] | previous
    return out


def join_exprs(alternatives: list[dict[str, ast.expr]], rebound: set[str],
                synthetic: list[ast.AST]) -> dict[str, ast.expr]:
    """The expressions locals are bound to after alternative branches: a local bound to another
    expression on each path is bound to both, as ``a if <path> else b`` (an `ast.IfExp` whose test is
    no node of the file, kept in ``synthetic``), so a check that reads the local through its
    expression reads every path. A path where the local has no expression (a parameter, a name bound
    by a loop) leaves the last walked path's expression, as before."""
    if len(alternatives) == 1:
        return alternatives[0]
    out = dict(alternatives[-1])
    for name in rebound:  # the names bound on some path (the others are bound as before on all)
        found = [exprs.get(name) for exprs in alternatives]
        if any(e is None for e in found):
            latest = next((e for e in reversed(found) if e is not None), None)
            if latest is not None:
                out[name] = latest
            continue
        distinct: list[ast.expr] = []
        for expr in found:
            if all(expr is not d for d in distinct):
                distinct.append(expr)  # type: ignore[arg-type]
        if len(distinct) == 1:
            out[name] = distinct[0]
            continue
        joined = distinct[-1]
        for expr in reversed(distinct[:-1]):
            test = ast.copy_location(ast.Name(id=JOINED_PATH, ctx=ast.Load()), expr)
            joined = ast.copy_location(ast.IfExp(test=test, body=expr, orelse=joined), expr)
            synthetic.append(joined)
        out[name] = joined
    return out

