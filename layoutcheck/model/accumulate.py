"""What an augmented assignment (``x += v``) does to the value it updates.

``d["k"] += [n]`` grows a list by an entry; ``d["k"] += pad`` rounds one number
up; ``total += len(t)`` in a loop sums sizes into one total. The extraction
walk reads a field written by ``+=`` as one entry appended only when the
right-hand side is a list, and a running total of sizes as a stream's length
(what ``sum()`` of the sizes gives), not as one sample's length.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

__all__ = ["extends_collection", "sums_sizes"]

_COLLECTIONS = (ast.List, ast.ListComp, ast.Tuple, ast.GeneratorExp, ast.Set, ast.SetComp)
_NUMBERS = (ast.BinOp, ast.UnaryOp, ast.Constant)


def extends_collection(value: ast.expr, bound_expr: Callable[[str], ast.expr | None]) -> bool:
    """Does ``x += value`` add entries to a collection rather than to a number?

    A list, tuple or comprehension (here or bound to the name) extends; arithmetic or a number does
    not. Anything else (a call, a name not bound here) is taken to extend, as before: the walk cannot
    tell a list from a number there."""
    for _ in range(3):
        if isinstance(value, ast.Name):
            bound = bound_expr(value.id)
            if bound is None:
                return True
            value = bound
            continue
        break
    if isinstance(value, _COLLECTIONS):
        return True
    if isinstance(value, ast.Constant):
        return not isinstance(value.value, (int, float))
    if isinstance(value, ast.BinOp):
        # `[n] * k` or `a + [n]` build a list; `m - n % m` a number
        return any(isinstance(side, _COLLECTIONS) for side in (value.left, value.right))
    return not isinstance(value, _NUMBERS)


def sums_sizes(node: ast.AugAssign, in_loop: bool, is_size: Callable[[ast.expr], bool]) -> bool:
    """``total += len(t)`` (or ``+= t.numel()``...) inside a loop: ``total`` sums the sizes of many
    tensors, so it is the length of their concatenation, not one of them."""
    return in_loop and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name) and is_size(node.value)
