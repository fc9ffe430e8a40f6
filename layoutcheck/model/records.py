"""Fields of one record cut apart: some per-token fields truncated, a partner stored whole (class 2).

Part of the per-file walk (`layoutcheck.model.extract`), read from what the code
does, never from names:

* `window_partners` reads, once per module, which fields describe the same
  tokens: a field placed into a window whose width is the lengths of other
  fields of the same record (``n = len(r.prompt) + len(r.reply)`` then
  ``buf[0, a : a + n] = r.trace``): ``trace`` has one entry per token of
  ``prompt`` and ``reply``;
* `record_cut_apart` then reads one function: a record built in one
  expression (keyword arguments of a call, a dict literal) where a field is
  cut to a bound (``reply=s.reply[:limit]``) while a field placed beside it,
  as above, is stored whole (``trace=s.trace``): the whole field no longer
  fits the window its partners size.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from layoutcheck.model.syntax import nodes, own_nodes, statement_nodes

__all__ = ["record_cut_apart", "window_partners"]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _field(node: ast.expr) -> str | None:
    """``r.f`` and ``r["f"]``: the field ``f`` of a record."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    return None


def _window_width(target: ast.expr, bound: dict[str, ast.expr]) -> ast.expr | None:
    """``n`` of a store into ``buf[..., a : a + n]`` (the window's start plus its width; the end
    may be a local, ``e = a + n`` then ``buf[a:e]``)."""
    if not isinstance(target, ast.Subscript):
        return None
    parts = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    for part in parts:
        if not isinstance(part, ast.Slice) or part.step is not None or part.lower is None:
            continue
        upper = part.upper
        if isinstance(upper, ast.Name) and upper.id in bound:
            upper = bound[upper.id]
        if isinstance(upper, ast.BinOp) and isinstance(upper.op, ast.Add):
            lower = ast.dump(part.lower)
            if ast.dump(upper.left) == lower:
                return upper.right
            if ast.dump(upper.right) == lower:
                return upper.left
    return None


def _measured(width: ast.expr, bound: dict[str, ast.expr]) -> set[str]:
    """The fields whose lengths ``width`` adds up (``len(r.a) + len(r.b)``, through one local)."""
    if isinstance(width, ast.Name) and width.id in bound:
        width = bound[width.id]
    fields: set[str] = set()
    for node in nodes(width):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                and len(node.args) == 1:
            field = _field(node.args[0])
            if field is not None:
                fields.add(field)
    return fields


def _may_store_into_window(node: ast.AST) -> bool:
    """Could `_window_width` find a window in this statement's target, whatever the locals hold? A
    slice with a start and an end that is a sum, or a local (``e = a + n``)."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Subscript):
        return False
    index = node.targets[0].slice
    return any(
        isinstance(part, ast.Slice) and part.step is None and part.lower is not None
        and isinstance(part.upper, (ast.Name, ast.BinOp))
        for part in (index.elts if isinstance(index, ast.Tuple) else [index])
    )


def window_partners(tree: ast.Module) -> dict[str, frozenset[str]]:
    """Field -> the fields whose lengths size the window it is placed into, in any function of the module."""
    found: dict[str, set[str]] = {}
    # Only a store into a window finds anything: the functions around none are not walked (listing
    # the nodes of every function in a module with a window store cost 2-3% of the extraction on verl).
    # An assignment and a `def` are statements: the module's statements alone are read for both, in
    # the order `nodes` gives them (not every node of the module listed, as before).
    statements = list(statement_nodes(tree))
    lines = sorted({n.lineno for n in statements if _may_store_into_window(n)})
    if not lines:
        return {}
    for function in statements:
        if not isinstance(function, _FUNCTIONS):
            continue
        start, end = function.lineno, function.end_lineno or function.lineno
        at = bisect_left(lines, start)
        if at == len(lines) or lines[at] > end:
            continue
        bound: dict[str, ast.expr] = {}
        for stmt in nodes(function):
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                continue
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                bound[target.id] = stmt.value
                continue
            width = _window_width(target, bound)
            placed = _field(stmt.value)
            if width is None or placed is None:
                continue
            sizes = _measured(width, bound) - {placed}
            if sizes:
                found.setdefault(placed, set()).update(sizes)
    return {field: frozenset(sizes) for field, sizes in found.items()}


def _cut(value: ast.expr) -> bool:
    """``x[:k]`` (also as a branch of ``... if ... else ...``): cut to a bound, keeping the start."""
    if isinstance(value, ast.IfExp):
        return _cut(value.body) or _cut(value.orelse)
    return isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) \
        and value.slice.lower is None and value.slice.upper is not None and value.slice.step is None


def _whole(value: ast.expr) -> bool:
    """A field read as it is (``s.trace``, ``s["trace"]``), neither cut nor computed."""
    return _field(value) is not None and not isinstance(getattr(value, "slice", None), ast.Slice)



def _records(stmt: ast.stmt) -> Iterator[dict[str, ast.expr]]:
    """Records built in one expression of ``stmt``: a call's keyword arguments, a dict literal's str keys."""
    for node in own_nodes(stmt):
        if isinstance(node, ast.Call) and node.keywords:
            yield {k.arg: k.value for k in node.keywords if k.arg is not None}
        elif isinstance(node, ast.Dict):
            yield {k.value: v for k, v in zip(node.keys, node.values)
                   if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def record_cut_apart(body: Sequence[ast.stmt], partners: dict[str, frozenset[str]]) -> Iterator[tuple[ast.AST, str]]:
    """A record built with fields cut to a bound and a window partner of theirs stored whole:
    the whole field is flagged, with the cut partners it is placed beside."""
    if not partners:
        return
    for stmt in body:
        if isinstance(stmt, _FUNCTIONS + (ast.ClassDef,)):
            continue
        for record in _records(stmt):
            for field, value in record.items():
                cut = sorted(p for p in partners.get(field, ()) if p in record and _cut(record[p]))
                if cut and _whole(value):
                    yield value, ", ".join(f"`{name}`" for name in cut)
