"""Buffers gathered across ranks at the longest rank's size, and where their padding goes.

Part of the per-file walk (`layoutcheck.model.extract`, through `layoutcheck.model.sinkchecks`):
one function's statements as written, no names, no project.

* `padded_gather_cat` (class 1): a length reduced to its maximum across ranks
  (``dist.all_reduce(t, op=ReduceOp.MAX)``, or ``max()`` of lengths gathered from every rank),
  buffers sized with it (``[torch.zeros(b, longest, d) for _ in range(world)]``) filled by
  ``dist.all_gather(buffers, ...)``, and the buffers concatenated as they are
  (``torch.cat(buffers, dim=1)``): every rank shorter than the longest contributes its padding
  to the joined sequence, between real entries. One length (the maximum) stands for many.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.bodyreads import expressions
from layoutcheck.model.partners import Body
from layoutcheck.model.syntax import keyword, last_name, nodes, positional

__all__ = ["SPELLINGS", "padded_gather_cat"]

SPELLINGS: dict[str, tuple[str, ...]] = {"padded_gather_cat": ("all_gather", "cat")}
"""What a function's text must spell for each check here to find anything (words, never names)."""

_SIZED = frozenset({"zeros", "ones", "empty", "full", "new_zeros", "new_ones", "new_empty", "new_full", "randn"})
_JOINS = frozenset({"cat", "concat", "concatenate"})


def _is_max_op(node: ast.expr | None) -> bool:
    """``ReduceOp.MAX`` (or ``dist.ReduceOp.MAX``, ``op="max"``)."""
    if node is None:
        return False
    if isinstance(node, ast.Attribute):
        return node.attr == "MAX"
    return isinstance(node, ast.Constant) and node.value in ("max", "MAX")


def _derived(names: set[str], bound: dict[str, list[ast.expr]]) -> set[str]:
    """``names`` and every local whose value mentions one of them (a few steps: ``n = int(t.item())``)."""
    found = set(names)
    for _ in range(3):
        grown = {local for local, values in bound.items() if local not in found and any(
            isinstance(n, ast.Name) and n.id in found for v in values for n in nodes(v))}
        if not grown:
            break
        found |= grown
    return found


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in nodes(node))


def padded_gather_cat(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``torch.cat(buffers)`` where ``buffers`` was filled by ``all_gather`` and each was sized with a
    maximum across ranks."""
    calls = [n for _, n in expressions(body) if isinstance(n, ast.Call)]
    gathers = [c for c in calls if last_name(c.func) in ("all_gather", "all_gather_object") and positional(c)]
    if not gathers:
        return
    bound = body.bindings()
    # The maxima across ranks: a tensor reduced with MAX, and `max()` of a list every rank filled.
    reduced = {positional(c)[0].id for c in calls if last_name(c.func) == "all_reduce" and positional(c)
               and isinstance(positional(c)[0], ast.Name) and _is_max_op(keyword(c, "op") or (
                   positional(c)[1] if len(positional(c)) > 1 else None))}
    filled = {positional(c)[0].id for c in gathers if isinstance(positional(c)[0], ast.Name)}
    gathered_lists = _derived(filled, bound)
    maxima = {local for local, values in bound.items() for v in values
              if isinstance(v, ast.Call) and last_name(v.func) == "max" and isinstance(v.func, ast.Name)
              and len(v.args) == 1 and _mentions(v.args[0], gathered_lists)}
    longest = _derived(reduced | maxima, bound)
    if not (reduced or maxima):
        return
    # Buffers sized with a maximum: every entry built by a sized constructor given it.
    padded: set[str] = set()
    for local, values in bound.items():
        for value in values:
            entry = value.value if isinstance(value, ast.Starred) else value
            if isinstance(entry, (ast.ListComp, ast.GeneratorExp)):
                entry = entry.elt
            elif isinstance(entry, (ast.List, ast.Tuple)) and entry.elts:
                entry = entry.elts[0]
            elif isinstance(entry, ast.BinOp) and isinstance(entry.op, ast.Mult) and isinstance(entry.left, ast.List) \
                    and entry.left.elts:
                entry = entry.left.elts[0]  # [torch.zeros(n, d)] * world
            if isinstance(entry, ast.Call) and last_name(entry.func) in _SIZED and _mentions(
                    ast.Tuple(elts=[*entry.args, *(k.value for k in entry.keywords if k.arg in ("size", "shape"))],
                              ctx=ast.Load()), longest):
                padded.add(local)
    padded &= filled
    if not padded:
        return
    for call in calls:
        if last_name(call.func) in _JOINS and positional(call):
            first = positional(call)[0]
            if isinstance(first, ast.Name) and first.id in padded:
                yield call, first.id
