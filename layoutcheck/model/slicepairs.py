"""Two slices of one array that an elementwise operation pairs, and whether their entries line up.

Part of the per-file walk (`layoutcheck.model.extract`, through `layoutcheck.model.sinkchecks`):
one function's statements as written, no names, no project.

* `misaligned_difference` (class 5): ``x[k:] - x[:j]`` (or ``x[:j] - x[k:]``), each operand a
  slice of the same array along the same axis with constant bounds, whose lengths differ:
  ``x[1:] - x[:-1]`` pairs each entry with its neighbour (both ``n - 1`` long), while
  ``x[1:] - x[:1]`` pairs every entry with the first one (``n - 1`` against ``1``, which
  broadcasts): the differences of cumulative offsets become distances from the stream's
  start, not sample lengths. Operands read through locals assigned once.
* `start_from_own_width` (class 1): a window ``[start : start + w]`` (or ``slice(start, end)``)
  whose start is ``k * w``, ``w`` being the width of the very value stored there
  (``w = chunk.shape[d]``, ``buf[..., start:end] = chunk``): every earlier piece is taken to be as
  wide as this one. When the pieces are uneven (``torch.chunk`` of a length that does not split
  evenly), the last, narrower piece lands inside the one before it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.bodyreads import expressions, through
from layoutcheck.model.partners import Body
from layoutcheck.model.syntax import int_value, nodes

__all__ = ["SPELLINGS", "misaligned_difference", "start_from_own_width"]

SPELLINGS: dict[str, tuple[str, ...]] = {
    "misaligned_difference": (":]", "-"),
    "start_from_own_width": ("*", "["),
}
"""What a function's text must spell for each check here to find anything (words, never names)."""



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
    for _, node in expressions(body):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
            continue
        pair = _pair(through(node.left, bound), through(node.right, bound))
        if pair is None:
            continue
        first, second = pair
        # One operand runs to the end (its length counts `n`): the pair is meant to line up
        # entries, and a constant-length partner of another length does not.
        if first != second and (first[0] or second[0]) and first[0] >= 0 and second[0] >= 0:
            yield node, f"{_shown(first)} against {_shown(second)}"


def _width_of(node: ast.expr, bound: dict[str, list[ast.expr]]) -> str | None:
    """``ast.dump`` of ``x`` when ``node`` (through locals) is ``x.shape[...]``, ``x.size(...)``
    or ``len(x)``: a width of ``x``."""
    node = through(node, bound)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return ast.dump(node.value.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
            and len(node.args) == 1:
        return ast.dump(node.func.value)
    return None


def _stored(body: Body) -> set[str]:
    """``ast.dump`` of each value the function stores into a window of a buffer
    (``buf[...] = v``, ``buf[...].copy_(v)``)."""
    found: set[str] = set()
    for block in body.blocks:
        for stmt in block:
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Subscript) for t in stmt.targets):
                found.add(ast.dump(stmt.value))
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                    and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "copy_" \
                    and isinstance(stmt.value.func.value, ast.Subscript) and stmt.value.args:
                found.add(ast.dump(stmt.value.args[0]))
    return found


def start_from_own_width(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """A window ``[start : start + w]`` (or ``slice(start, end)``) with ``start = k * w`` and ``w``
    the width of the value stored there: each piece placed as if every piece were as wide as it."""
    stored = _stored(body)  # statements only, no walk of their expressions: most functions store nothing
    if not stored:
        return
    bound = body.bindings()
    for _, node in expressions(body):
        if isinstance(node, ast.Slice) and node.step is None:
            lower = node.lower
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "slice" \
                and len(node.args) == 2:
            lower = node.args[0]
        else:
            continue
        if lower is None:
            continue
        start = through(lower, bound)
        if not (isinstance(start, ast.BinOp) and isinstance(start.op, ast.Mult)):
            continue
        for index, width in ((start.left, start.right), (start.right, start.left)):
            piece = _width_of(width, bound)
            if piece is None or int_value(through(index, bound)) is not None:
                continue
            if piece in stored and not any(ast.dump(n) == piece for n in nodes(through(index, bound))):
                yield start, ast.unparse(width)  # where the start is computed (through a local)
                break
