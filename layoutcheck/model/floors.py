"""Next-token offsets converted with the token range's bounds (class 5), read once per module.

A logit at position ``i`` predicts the token at ``i + 1``, so the logits that
score a response of the positions ``[p, t)`` sit at ``[p - 1, t - 1)``. Code
shows that space by what it does, never by names: a function of the module
clamps an offset pair into it, ``(max(a, p - 1), min(b, t - 1))``, and
returns the pair (directly, through a local, or inside a returned tuple).

`token_bounds_on_logit_offsets` then reads each call of such a function: the
pair's elements, taken from the result by position (``_, spans = f(...)``,
``(s0, e0), (s1, e1) = spans``, ``spans[0][1]``), converted into the response
with the token bounds (``s0 - p`` where the clamp says ``p - 1``, ``t - e0``
where it says ``t - 1``) are flagged: each offset lands one position off.
The bounds are compared as expressions, the callee's parameters read as the
call's arguments and locals through their one assignment.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.syntax import (
    assigned_once,
    call_arguments,
    functions_by_name,
    inline,
    int_value,
    last_name,
    nodes,
    own_nodes,
    receivers,
    spanning,
)

__all__ = ["token_bounds_on_logit_offsets"]


Bounds = tuple[str, str]
"""The token bounds ``p`` and ``t`` of a pair clamped to ``[p - 1, t - 1]``, as the callee's text."""


def _text(node: ast.expr, bound: dict[str, ast.expr]) -> str:
    return ast.unparse(inline(node, bound))


def _minus_one(node: ast.expr) -> ast.expr | None:
    """``x`` of ``x - 1``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and int_value(node.right) == 1:
        return node.left
    return None


def _clamped(node: ast.expr) -> tuple[ast.expr, ast.expr] | None:
    """``(p, t)`` of ``(max(a, p - 1), min(b, t - 1))``."""
    if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
        return None
    low, high = node.elts
    bounds = []
    for part, fn in ((low, "max"), (high, "min")):
        if not (isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id == fn
                and len(part.args) == 2):
            return None
        found = [b for b in map(_minus_one, part.args) if b is not None]
        if len(found) != 1:
            return None
        bounds.append(found[0])
    return bounds[0], bounds[1]


def _pairs(function: ast.AST) -> dict[tuple[int, ...], tuple[ast.expr, ast.expr]]:
    """Positions in the returned value of clamped pairs -> their bounds (the callee's expressions)."""
    stores: dict[str, list[ast.expr]] = {}
    for node in own_nodes(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            stores.setdefault(node.targets[0].id, []).append(node.value)
    returns = [n.value for n in own_nodes(function) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1:
        return {}
    out: dict[tuple[int, ...], tuple[ast.expr, ast.expr]] = {}
    todo: list[tuple[ast.expr, tuple[int, ...]]] = [(returns[0], ())]  # a stack, not a recursive closure (a cycle)
    while todo:
        value, path = todo.pop()
        if len(path) > 3:
            continue
        if isinstance(value, ast.Name):
            # every store is the clamp or an empty pair ``(0, 0)``
            found = [_clamped(v) for v in stores.get(value.id, ())]
            clamps = [c for c in found if c is not None]
            others = [v for v, c in zip(stores.get(value.id, ()), found) if c is None]
            if clamps and all(isinstance(v, ast.Tuple) and all(int_value(e) == 0 for e in v.elts) for v in others):
                out[path] = clamps[0]
            continue
        clamp = _clamped(value)
        if clamp is not None:
            out[path] = clamp
        elif isinstance(value, ast.Tuple):
            todo.extend(reversed([(elt, (*path, i)) for i, elt in enumerate(value.elts)]))  # popped in order
    return out


def _paths(target: ast.expr, path: tuple[int, ...]) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Names bound by an unpacking target, with their positions in the value."""
    if isinstance(target, ast.Name):
        yield target.id, path
    elif isinstance(target, (ast.Tuple, ast.List)):
        for i, elt in enumerate(target.elts):
            yield from _paths(elt, (*path, i))


def _position(node: ast.expr, names: dict[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    """The position in a call's result that ``node`` reads (``spans[0][1]``, or a name unpacked from it)."""
    index: list[int] = []
    while isinstance(node, ast.Subscript):
        i = int_value(node.slice)
        if i is None or i < 0:
            return None
        index.append(i)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return (*names[node.id], *reversed(index))


def token_bounds_on_logit_offsets(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """Function node -> (conversion, the conversion with the logits' bound) for each next-token offset converted with
    the token range's bound (see the module docs)."""
    clamps = [n.lineno for n in nodes(tree) if isinstance(n, ast.Tuple) and _clamped(n) is not None]
    if not clamps:
        return {}
    functions, by_name = functions_by_name(tree)
    clampers = {}
    for function in spanning(functions, clamps):
        if len(by_name[function.name]) == 1:
            pairs = _pairs(function)
            if pairs:
                clampers[function.name] = (function, pairs)
    if not clampers:
        return {}
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    calls_at = [n.lineno for n in nodes(tree) if isinstance(n, ast.Call) and last_name(n.func) in clampers]
    for function in spanning(functions, calls_at):
        names: dict[str, tuple[int, ...]] = {}
        calls: dict[str, tuple[ast.AST, dict[tuple[int, ...], tuple[ast.expr, ast.expr]], dict[str, ast.expr]]] = {}
        for node in own_nodes(function):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            value, target = node.value, node.targets[0]
            if isinstance(value, ast.Call) and last_name(value.func) in clampers:
                callee, pairs = clampers[last_name(value.func)]
                args = call_arguments(callee, value, receivers(tree))
                for name, path in _paths(target, ()):
                    names[name] = path
                    calls[name] = (callee, pairs, args)
            elif isinstance(target, (ast.Tuple, ast.List, ast.Name)):
                start = _position(value, names) if isinstance(value, (ast.Name, ast.Subscript)) else None
                if start is not None:
                    root = value
                    while isinstance(root, ast.Subscript):
                        root = root.value
                    for name, path in _paths(target, start):
                        names[name] = path
                        calls[name] = calls[root.id]
        if not names:
            continue
        bound = assigned_once(function)
        for node in own_nodes(function):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
                continue
            for offset, other, side in ((node.left, node.right, 0), (node.right, node.left, 1)):
                at = _position(offset, names)
                if at is None or len(at) < 1 or at[-1] != side:
                    continue
                root = offset
                while isinstance(root, ast.Subscript):
                    root = root.value
                callee, pairs, args = calls[root.id]
                clamp = pairs.get(at[:-1])
                if clamp is None:
                    continue
                expected = inline(clamp[side], assigned_once(callee), args)
                if _text(other, bound) == _text(expected, bound):
                    bound_text, offset_text = ast.unparse(other), ast.unparse(offset)
                    fixed = f"{offset_text} - ({bound_text} - 1)" if side == 0 else f"{bound_text} - 1 - {offset_text}"
                    out.setdefault(function, []).append((node, fixed))
    return out
