"""Two slices of one array that an elementwise operation pairs, and whether their entries line up.

Part of the per-file walk (`layoutcheck.model.extract`, through `layoutcheck.model.sinkchecks`):
one function's statements as written, no names, no project.

* `misaligned_difference` (class 5): ``x[k:] - x[:j]`` (or ``x[:j] - x[k:]``), each operand a
  slice of the same array along the same axis with constant bounds, whose lengths differ:
  ``x[1:] - x[:-1]`` pairs each entry with its neighbour (both ``n - 1`` long), while
  ``x[1:] - x[:1]`` pairs every entry with the first one (``n - 1`` against ``1``, which
  broadcasts): the differences of cumulative offsets become distances from the stream's
  start, not sample lengths. Operands read through locals assigned once.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.partners import Body
from layoutcheck.model.syntax import int_value, nodes

__all__ = ["SPELLINGS", "misaligned_difference"]

SPELLINGS: dict[str, tuple[str, ...]] = {"misaligned_difference": (":", "-")}
"""What a function's text must spell for each check here to find anything (words, never names)."""

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _through(node: ast.expr, bound: dict[str, list[ast.expr]]) -> ast.expr:
    """``node``, or the one value a local ``node`` is ever assigned (a few names deep)."""
    for _ in range(3):
        if not isinstance(node, ast.Name):
            return node
        values = bound.get(node.id, ())
        if len(values) != 1 or isinstance(values[0], ast.Starred):
            return node
        node = values[0]
    return node


def _length(window: ast.Slice) -> tuple[int, int] | None:
    """The length of ``x[window]`` as ``(a, b)``, meaning ``a * n + b`` for an ``x`` of ``n``
    entries, when both bounds are int literals (or absent) and the step is 1; else None.
    (Bounds that run past the array's ends are read as they are written.)"""
    if window.step is not None:
        return None
    ends = []
    for bound, missing in ((window.lower, (0, 0)), (window.upper, (1, 0))):
        if bound is None:
            ends.append(missing)
            continue
        value = int_value(bound)
        if value is None:
            return None
        ends.append((1, value) if value < 0 else (0, value))
    (a0, b0), (a1, b1) = ends
    return a1 - a0, b1 - b0


def _pair(left: ast.expr, right: ast.expr) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The lengths of two slices of the same array along the same axis (every other index the same),
    or None when the operands are not so."""
    if not (isinstance(left, ast.Subscript) and isinstance(right, ast.Subscript)):
        return None
    if ast.dump(left.value) != ast.dump(right.value):
        return None
    lhs = left.slice.elts if isinstance(left.slice, ast.Tuple) else [left.slice]
    rhs = right.slice.elts if isinstance(right.slice, ast.Tuple) else [right.slice]
    if len(lhs) != len(rhs):
        return None
    found = None
    for a, b in zip(lhs, rhs):
        if ast.dump(a) == ast.dump(b):
            continue
        if found is not None or not (isinstance(a, ast.Slice) and isinstance(b, ast.Slice)):
            return None
        la, lb = _length(a), _length(b)
        if la is None or lb is None:
            return None
        found = la, lb
    return found


def _shown(length: tuple[int, int]) -> str:
    a, b = length
    if not a:
        return str(b)
    return "n" if not b else f"n - {-b}" if b < 0 else f"n + {b}"


def misaligned_difference(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``x[k:] - x[:j]`` with the two slices' lengths different (`_length`), one of them running to
    the array's end: each entry is paired with another than its neighbour (``x[1:] - x[:-1]``)."""
    bound = body.bindings()
    for block in body.blocks:
        for stmt in block:
            if isinstance(stmt, _NESTED):
                continue
            for node in _own(stmt):
                if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
                    continue
                pair = _pair(_through(node.left, bound), _through(node.right, bound))
                if pair is None:
                    continue
                first, second = pair
                # One operand runs to the end (its length counts `n`): the pair is meant to line up
                # entries, and a constant-length partner of another length does not.
                if first != second and (first[0] or second[0]) and first[0] >= 0 and second[0] >= 0:
                    yield node, f"{_shown(first)} against {_shown(second)}"


def _own(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expression nodes of ``stmt`` itself (comprehensions included), not of statements nested in it."""
    for name, value in ast.iter_fields(stmt):
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ast.expr):
                yield from nodes(item)
