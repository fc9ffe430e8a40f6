"""A batch built with a layout the caller picks, then read along a fixed axis.

Part of the per-file walk (`layoutcheck.model.extract`, through `layoutcheck.model.sinkchecks`):
one function's statements as written, no names, no project.

* `fixed_axis_of_switched_layout` (class 7): ``pad_sequence(..., batch_first=flag)`` with a
  ``flag`` that is not a literal, and its result (directly, or through a local assigned once)
  flipped, rolled or cut along a literal axis 0 or 1 (``.flip(dims=[1])``, ``torch.flip(r, [1])``,
  ``r.roll(k, dims=1)``, ``r.narrow(1, ...)``): axis 1 is the time axis when ``flag`` is true
  and the batch axis when it is false, so one of the two layouts is flipped along the wrong axis.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.bodyreads import expressions, through
from layoutcheck.model.partners import Body
from layoutcheck.model.syntax import int_value, keyword, last_name, positional

__all__ = ["SPELLINGS", "fixed_axis_of_switched_layout"]

SPELLINGS: dict[str, tuple[str, ...]] = {"fixed_axis_of_switched_layout": ("batch_first",)}
"""What a function's text must spell for each check here to find anything (words, never names)."""

_AXIS_OPS = {"flip": ("dims", 0), "roll": ("dims", 1), "narrow": ("dim", 0), "select": ("dim", 0),
             "index_select": ("dim", 0), "cumsum": ("dim", 0)}
"""Tensor operations along an axis: the keyword and the position (after the tensor) of the axis."""


def _switched(node: ast.AST, bound: dict[str, list[ast.expr]]) -> ast.Call | None:
    """The ``pad_sequence`` call ``node`` is (or a local assigned once to one), when its
    ``batch_first`` is not a literal."""
    node = through(node, bound)
    if not (isinstance(node, ast.Call) and last_name(node.func) == "pad_sequence"):
        return None
    flag = keyword(node, "batch_first")
    if flag is None and len(node.args) > 1:
        flag = node.args[1]
    return node if flag is not None and not isinstance(flag, ast.Constant) else None


def _axes(call: ast.Call, tensor_arg: bool) -> list[int]:
    """The literal axes ``call`` (one of `_AXIS_OPS`) works along."""
    key, index = _AXIS_OPS[last_name(call.func)]  # type: ignore[index]
    args = positional(call)[1:] if tensor_arg else positional(call)
    axis = keyword(call, key)
    if axis is None and len(args) > index:
        axis = args[index]
    if axis is None:
        return []
    items = axis.elts if isinstance(axis, (ast.List, ast.Tuple)) else [axis]
    found = [int_value(i) for i in items]
    return [a for a in found if a is not None]


def fixed_axis_of_switched_layout(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """An axis op along literal axis 0 or 1 of a ``pad_sequence`` result whose ``batch_first`` is
    the caller's."""
    bound = body.bindings()
    for _, node in expressions(body):
        if not (isinstance(node, ast.Call) and last_name(node.func) in _AXIS_OPS):
            continue
        func = node.func
        method = isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id == "torch")
        tensor = func.value if method else (positional(node)[0] if positional(node) else None)
        if tensor is None:
            continue
        padded = _switched(tensor, bound)
        if padded is None:
            continue
        axes = [a for a in _axes(node, not method) if a in (0, 1)]
        if axes:
            flag = keyword(padded, "batch_first") or padded.args[1]
            yield node, f"{axes[0]}|{ast.unparse(flag)}"
