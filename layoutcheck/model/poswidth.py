"""Positions for several ranks' slices stored beside one rank's tokens (class 6), read per function.

A rank of a sequence-parallel group holds one slice of the sequence; the
positions stored with it (in the same record) must number that slice's
tokens. What the code does decides, never names:

* a record field stored as a range of positions, ``torch.arange(a, a + w)``
  (or ``torch.arange(w)``, with conversions and ``unsqueeze`` after it);
* its width ``w``, read through the function's locals (each as last
  assigned above the range), a product whose one
  factor is measured on another field of the same record
  (``r["ids"].shape[1] - overlap``: the slice's own width) and another that
  is not a constant (``peers = world // ring``): positions for that many
  slices, beside the tokens of one.

`wide_positions` yields the range and what makes it wider: every rank of the
group gets positions for the group's whole window, and its tokens are
numbered as if they were the first slice's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.syntax import (
    assigned_before,
    dotted,
    functions_by_name,
    inline,
    int_value,
    last_name,
    nodes,
    own_nodes,
    same,
    spanning,
    string_value,
)

__all__ = ["wide_positions", "wide_positions_by_function"]

_RANGES = frozenset({"torch.arange", "arange"})
_AFTER = frozenset({"unsqueeze", "view", "to", "long", "int", "cuda", "expand", "reshape", "contiguous"})


def _range(value: ast.expr) -> ast.Call | None:
    """The ``arange`` call a stored value is (conversions and reshapes after it allowed)."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _AFTER:
        value = value.func.value
    if isinstance(value, ast.Call) and (dotted(value.func) in _RANGES or last_name(value.func) == "arange"):
        return value
    return None


def _width(call: ast.Call) -> ast.expr | None:
    """``w`` of ``arange(w)`` or ``arange(a, a + w)``."""
    args = [a for a in call.args]
    if len(args) == 1:
        return args[0]
    if len(args) == 2 and isinstance(args[1], ast.BinOp) and isinstance(args[1].op, ast.Add):
        for start, width in ((args[1].left, args[1].right), (args[1].right, args[1].left)):
            if same(start, args[0]):
                return width
    return None


def _factors(node: ast.expr, bound: dict[str, ast.expr], depth: int = 0) -> Iterator[ast.expr]:
    """The factors of a product, locals read through their one assignment."""
    if isinstance(node, ast.Name) and node.id in bound and depth < 6:
        value = bound[node.id]
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
            yield from _factors(value, bound, depth + 1)
            return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        yield from _factors(node.left, bound, depth + 1)
        yield from _factors(node.right, bound, depth + 1)
        return
    yield node


def _record_field(node: ast.expr) -> tuple[str, str] | None:
    """``(record, key)`` of ``r["k"]``."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = string_value(node.slice)
        if key is not None:
            return node.value.id, key
    return None


def _measured(node: ast.expr, record: str, key: str) -> str | None:
    """The other field of ``record`` whose size ``node`` measures (``r["ids"].shape[1]``, ``r["ids"].size(1)``)."""
    for sub in ast.walk(node):
        target = None
        if isinstance(sub, ast.Attribute) and sub.attr == "shape":
            target = sub.value
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "size":
            target = sub.func.value
        field = _record_field(target) if target is not None else None
        if field is not None and field[0] == record and field[1] != key:
            return field[1]
    return None


def wide_positions(function: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """``(range, detail)`` for each range of positions stored into a record, wider than the tokens of the
    same record by a factor (see the module docs); ``detail`` is ``factor|field``."""
    for node in own_nodes(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        field = _record_field(node.targets[0])
        call = _range(node.value) if field is not None else None
        width = _width(call) if call is not None else None
        if width is None:
            continue
        record, key = field
        bound = assigned_before(function, node.lineno)
        bound.pop(record, None)  # the record is read by its fields, not as what it was built from
        factors = list(_factors(width, bound))
        if len(factors) < 2:
            continue
        sized = [(f, _measured(inline(f, bound), record, key)) for f in factors]
        partners = [other for _, other in sized if other is not None]
        wider = [f for f, other in sized if other is None and int_value(f) is None]
        if partners and wider:
            yield call, f"{ast.unparse(wider[0])}|{partners[0]}"


def wide_positions_by_function(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """`wide_positions` of every function of a module, by function node."""
    stores = [n.lineno for n in nodes(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
              and _record_field(n.targets[0]) is not None and _range(n.value) is not None]
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    if stores:
        for function in spanning(functions_by_name(tree)[0], stores):
            found = list(wide_positions(function))
            if found:
                out[function] = found
    return out
