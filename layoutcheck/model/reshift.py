"""A field stored already shifted, then shifted again where it is read (class 4), read once per module.

A *shifter* is a function of the module that returns a one-position shift of
its parameter (``cat([t[:, 1:], pad])``, ``t[..., :-1]``, ``torch.roll(t, -1)``),
whatever its name. A record field stored as a shifter's result
(``{"ids": shift(ids)}``, ``d["ids"] = shift(ids)``) holds a shifted value; the
same field read back (``item["ids"]``) and given to a shifter of the same kind,
directly or through a function of the module that applies one to that
parameter, is shifted twice: the record's store is flagged (the fix either
drops one shift, and the store is where the producer decided).

Across modules the module gives the project its shifters' summaries
(`shift_summaries`: which parameter each function returns shifted, and how,
also when a parameter of its own picks the side, ``if left: ... else: ...``);
the project reads the stores and the reads of other modules through them
(`layoutcheck.model.reshiftflow`).
"""

from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterator
from operator import itemgetter

from layoutcheck.model.shifts import rolled_left, shift_kind
from layoutcheck.model.syntax import (
    binds_receiver,
    last_name,
    method_receiver,
    nodes,
    own_nodes,
    param_names,
    receivers,
)

__all__ = ["ShiftSummary", "reshifted_fields", "shift_summaries"]

ShiftSummary = tuple[str, str, str, str, str]
"""A function that returns a one-position shift of one of its parameters: (qualified name, the shifted
parameter, the shift's kind when ``cond`` is true, its kind when ``cond`` is false, ``cond``: the parameter
whose truth picks the kind, empty when one kind holds on every path). Kinds are ``first`` / ``last``."""

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)



def _shift_of(node: ast.AST, name: str) -> str | None:
    """``first``/``last`` when ``node`` holds a one-position shift of the name ``name``."""
    for part in nodes(node):
        if isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name) and part.value.id == name:
            kind = shift_kind(part.slice)
            if kind is not None:
                return kind
        rolled = rolled_left(part)
        if isinstance(rolled, ast.Name) and rolled.id == name:
            return "first"
    return None


def _shifters(tree: ast.Module, functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> dict[str, str]:
    """Module functions whose return value is a one-position shift of their first parameter -> the kind."""
    out: dict[str, str] = {}
    # Each function's returns (its nested functions' included, as its `nodes` hold them) found by place
    # among the module's: a statement lies within a ``def``'s span only when it is in its body. Listing
    # the nodes of every function instead cost as much as a walk of the whole module.
    returns_at = sorted((((n.lineno, n.col_offset), n.value) for n in nodes(tree)  # type: ignore[attr-defined]
                         if type(n) is ast.Return and n.value is not None), key=itemgetter(0))
    places = [place for place, _ in returns_at]
    methods = receivers(tree)[0]
    for function in functions:
        params = param_names(function)
        if not params or function in methods:  # a method's first parameter is its receiver
            continue
        first = bisect_left(places, (function.lineno, function.col_offset))
        last = bisect_right(places, (function.end_lineno or function.lineno, function.end_col_offset or 0))
        returns = [value for _, value in returns_at[first:last]]
        kinds = {_shift_of(value, params[0]) for value in returns}
        if len(returns) == 1 and len(kinds) == 1 and None not in kinds:
            out[function.name] = kinds.pop()
    return out



def _stores(stmt: ast.stmt, shifters: dict[str, str]) -> Iterator[tuple[str, ast.expr, str]]:
    """(field, stored value, shift kind) for each field stored as a shifter's result in ``stmt``."""
    for node in own_nodes(stmt):
        pairs: list[tuple[ast.expr | None, ast.expr]] = []
        if isinstance(node, ast.Dict):
            pairs = list(zip(node.keys, node.values))
        elif isinstance(node, ast.Assign):
            pairs = [(t.slice, node.value) for t in node.targets if isinstance(t, ast.Subscript)]
        for key, value in pairs:
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(value, ast.Call) \
                    and last_name(value.func) in shifters:
                yield key.value, value, shifters[last_name(value.func)]


def _read_field(node: ast.expr, bound: dict[str, ast.expr]) -> str | None:
    """``x["f"]`` (also through one local) -> ``f``."""
    if isinstance(node, ast.Name) and node.id in bound:
        node = bound[node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def reshifted_fields(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """Function (or module) node -> (stored value, where it is shifted again) for each field stored shifted
    and shifted again once read (see the module docs)."""
    functions = [n for n in nodes(tree) if isinstance(n, _FUNCTIONS)]
    shifters = _shifters(tree, functions)
    if not shifters:
        return {}
    names: dict[str, list] = {}
    for function in functions:
        names.setdefault(function.name, []).append(function)
    # Module functions that apply a shifter to a parameter: name -> {parameter position: kind}.
    appliers: dict[str, dict[int, str]] = {}
    methods = receivers(tree)
    for function in functions:
        params = param_names(function)
        offset = 1 if function in methods[0] else 0
        for node in nodes(function):
            if isinstance(node, ast.Call) and last_name(node.func) in shifters and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in params:
                position = params.index(node.args[0].id) - offset
                appliers.setdefault(function.name, {})[position] = shifters[last_name(node.func)]
    # Fields read back and shifted: field -> (kind, the function that shifts it again).
    again: dict[tuple[str, str], str] = {}
    for function in functions:
        bound = {t.id: s.value for s in nodes(function) if isinstance(s, ast.Assign)
                 for t in s.targets if isinstance(t, ast.Name)}
        for node in nodes(function):
            if not isinstance(node, ast.Call):
                continue
            callee = last_name(node.func) or ""
            if callee in shifters and node.args:
                field = _read_field(node.args[0], bound)
                if field is not None:
                    again.setdefault((field, shifters[callee]), function.name)
            elif callee in appliers and len(names.get(callee, ())) == 1:
                # `Cls.m(obj, t)` passes the receiver by hand: the positions past it move by one
                by_hand = isinstance(node.func, ast.Attribute) and names[callee][0] in methods[0] \
                    and not binds_receiver(names[callee][0], node, methods)
                for position, kind in appliers[callee].items():
                    position += by_hand
                    if position < len(node.args):
                        field = _read_field(node.args[position], bound)
                        if field is not None:
                            again.setdefault((field, kind), callee)
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    for scope in (tree, *functions):
        for stmt in scope.body:
            if isinstance(stmt, _FUNCTIONS + (ast.ClassDef,)):
                continue
            for field, value, kind in _stores(stmt, shifters):
                where = again.get((field, kind))
                if where is not None:
                    out.setdefault(scope, []).append((value, where))
    return out


def _branch_shift(stmts: list[ast.stmt], name: str) -> str | None:
    """The kind of the one-position shift of ``name`` the statements bind to ``name`` (``t = cat((t[:, 1:],
    pad))``), when they rebind it exactly once."""
    stores = [s for s in stmts if isinstance(s, ast.Assign) and len(s.targets) == 1
              and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name]
    if len(stores) != 1:
        return None
    return _shift_of(stores[0].value, name)


def _early_return_summary(function: ast.FunctionDef | ast.AsyncFunctionDef,
                          params: list[str]) -> tuple[str, str, str, str] | None:
    """`_summary` for ``if flag: return <shift of t>`` then ``return <shift of t>``: the two arms of the
    ``if ... else`` form written with an early return (``flag`` another parameter)."""
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) < 2:
        return None
    branch, last = body[-2], body[-1]
    if not (isinstance(branch, ast.If) and not branch.orelse and len(branch.body) == 1
            and isinstance(branch.body[0], ast.Return) and branch.body[0].value is not None
            and isinstance(last, ast.Return) and last.value is not None):
        return None
    test, negated = branch.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, True
    if not (isinstance(test, ast.Name) and test.id in params):
        return None
    for param in params:
        if param == test.id:
            continue
        yes, no = _shift_of(branch.body[0].value, param), _shift_of(last.value, param)
        if yes is not None and no is not None:
            return (param, no, yes, test.id) if negated else (param, yes, no, test.id)
    return None


def _summary(function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> tuple[str, str, str, str] | None:
    """(parameter, kind if true, kind if false, condition) when ``function`` returns a one-position shift
    of a parameter: directly (``return cat((t[:, 1:], pad))``), or a parameter rebound so on every path,
    by a statement or by both arms of ``if flag: ... else: ...`` on another parameter. ``method``: a ``def``
    in a class body, its receiver (`method_receiver`, whatever it is called) no parameter it shifts."""
    params = param_names(function)[1:] if method and method_receiver(function) is not None else param_names(function)
    last = function.body[-1] if function.body else None
    if not params or not isinstance(last, ast.Return) or last.value is None:
        return None  # the one return is the last statement (checked before the function is walked)
    returns = [n for n in own_nodes(function) if isinstance(n, ast.Return)]
    if len(returns) == 2:
        return _early_return_summary(function, params)
    if len(returns) != 1 or returns[0].value is None:
        return None
    value = returns[0].value
    for param in params:
        kind = _shift_of(value, param)
        if kind is not None:
            return param, kind, kind, ""
    if not (isinstance(value, ast.Name) and value.id in params):
        return None
    name = value.id
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    # Every other top-level statement leaves ``name`` alone: the one rebinding is the shift.
    rebinding = [s for s in body if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                                        for n in nodes(s))]
    if len(rebinding) != 1:
        return None
    stmt = rebinding[0]
    if isinstance(stmt, ast.Assign):
        kind = _branch_shift([stmt], name)
        return (name, kind, kind, "") if kind is not None else None
    if isinstance(stmt, ast.If) and stmt.orelse:
        test, negated = stmt.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if not (isinstance(test, ast.Name) and test.id in params and test.id != name):
            return None
        yes, no = _branch_shift(stmt.body, name), _branch_shift(stmt.orelse, name)
        if yes is None or no is None:
            return None
        return (name, no, yes, test.id) if negated else (name, yes, no, test.id)
    return None


def shift_summaries(tree: ast.Module, lines: Collection[int] | None = None) -> tuple[ShiftSummary, ...]:
    """The module's functions (and methods, ``Class.method``) that return a one-position shift of a parameter
    (see `ShiftSummary`), for callers in other modules. ``lines``: the lines that can spell a shift (a
    function spanning none of them is not read)."""
    out: list[ShiftSummary] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, _FUNCTIONS):
                if lines is not None and not any(
                        stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno) for line in lines):
                    continue
                found = _summary(stmt, bool(prefix))
                if found is not None:
                    out.append((prefix + stmt.name, *found))
            elif isinstance(stmt, ast.ClassDef):
                visit(stmt.body, f"{prefix}{stmt.name}.")

    visit(tree.body, "")
    return tuple(out)
