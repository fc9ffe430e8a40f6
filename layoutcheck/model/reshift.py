"""A field stored already shifted, then shifted again where it is read (class 4), read once per module.

A *shifter* is a function of the module that returns a one-position shift of
its parameter (``cat([t[:, 1:], pad])``, ``t[..., :-1]``, ``torch.roll(t, -1)``),
whatever its name. A record field stored as a shifter's result
(``{"ids": shift(ids)}``, ``d["ids"] = shift(ids)``) holds a shifted value; the
same field read back (``item["ids"]``) and given to a shifter of the same kind,
directly or through a function of the module that applies one to that
parameter, is shifted twice: the record's store is flagged (the fix either
drops one shift, and the store is where the producer decided).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.shifts import rolled_left, shift_kind
from layoutcheck.model.syntax import last_name, nodes, own_nodes, param_names

__all__ = ["reshifted_fields"]

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


def _shifters(functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> dict[str, str]:
    """Module functions whose return value is a one-position shift of their first parameter -> the kind."""
    out: dict[str, str] = {}
    for function in functions:
        params = param_names(function)
        if not params or params[0] in ("self", "cls"):
            continue
        returns = [n.value for n in nodes(function) if isinstance(n, ast.Return) and n.value is not None]
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
    shifters = _shifters(functions)
    if not shifters:
        return {}
    names: dict[str, list] = {}
    for function in functions:
        names.setdefault(function.name, []).append(function)
    # Module functions that apply a shifter to a parameter: name -> {parameter position: kind}.
    appliers: dict[str, dict[int, str]] = {}
    for function in functions:
        params = param_names(function)
        offset = 1 if params and params[0] in ("self", "cls") else 0
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
                for position, kind in appliers[callee].items():
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
