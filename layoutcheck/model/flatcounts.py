"""A tensor's element count (``numel()``) meeting a count or an index along its first axis.

Part of the per-file walk (`layoutcheck.model.extract`, through `layoutcheck.model.sinkchecks`):
one function's statements as written, no names, no project. ``x.numel()`` counts every element;
``x.shape[0]``, ``len(x)`` and the indices ``torch.where(x ...)[0]`` count along the first axis.
They agree only for a 1-D ``x``, so code that puts the two in one place is right only while ``x``
stays 1-D:

* `row_index_offsets` (class 3): ``torch.where(cond on x)[0]`` (the first axis's indices, or
  ``cond.nonzero(as_tuple=True)[0]``) joined with ``x.numel()`` into one list of offsets
  (``torch.cat([starts, tensor([x.numel()])])``, ``F.pad(starts, (0, 1), value=x.numel())``):
  the starts are rows of ``x``, the closing offset counts its elements. For ``x`` of ``[rows,
  width]`` the offsets name rows 0, 0, 1, ... instead of positions of the flattened stream.
* `numel_as_length` (class 3): ``x.numel()`` sizing a pad that is joined to ``x`` along its first
  axis (``torch.cat([x, torch.zeros(k - x.numel())], dim=0)``, ``F.pad(x, (0, k - x.numel()))``),
  while the same function reads ``x``'s length along that axis too (``x.shape[0]``,
  ``x.size(0)``, ``len(x)``): for ``x`` with feature axes, ``numel()`` is tokens times features,
  the pad is too short (or skipped), and a flat pad cannot be joined to ``x``'s rows.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.bodyreads import expressions, through
from layoutcheck.model.partners import Body
from layoutcheck.model.syntax import int_value, keyword, last_name, nodes, positional

__all__ = ["SPELLINGS", "numel_as_length", "row_index_offsets"]

SPELLINGS: dict[str, tuple[str, ...]] = {
    "row_index_offsets": ("numel", "[0]"),
    "numel_as_length": ("numel",),
}
"""What a function's text must spell for each check here to find anything (words, never names)."""

_FLAT = frozenset({"view", "reshape", "flatten", "ravel"})
_SIZED = frozenset({"zeros", "ones", "empty", "full", "new_zeros", "new_ones", "new_empty", "new_full"})
_JOINS = frozenset({"cat", "concat", "concatenate"})


def _strip(node: ast.expr) -> ast.expr:
    """``x`` of ``x.to(...)``, ``x.int()``, ``x.long()``: conversions that keep the entries."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "to", "int", "long", "cuda", "contiguous", "type"):
        node = node.func.value
    return node


def _numel_of(node: ast.AST) -> list[ast.expr]:
    """Each ``x`` whose ``x.numel()`` appears in ``node``."""
    return [n.func.value for n in nodes(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "numel" and not n.args]


def _first_axis_indices(node: ast.expr) -> ast.expr | None:
    """The condition of ``torch.where(cond)[0]`` / ``cond.nonzero(as_tuple=True)[0]`` (indices along
    the first axis), else None."""
    if not (isinstance(node, ast.Subscript) and int_value(node.slice) == 0 and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    name = last_name(call.func)
    if name == "where" and len(call.args) == 1 and not call.keywords:
        return call.args[0]
    if name == "nonzero" and isinstance(keyword(call, "as_tuple"), ast.Constant) \
            and keyword(call, "as_tuple").value is True:  # type: ignore[union-attr]
        if isinstance(call.func, ast.Attribute) and not call.args:
            return call.func.value
        return call.args[0] if call.args else None
    return None


def _unflattened(cond: ast.expr, tensor: ast.expr) -> bool:
    """Does ``cond`` read ``tensor`` itself, not a flattened view of it (``tensor.view(-1)``)?"""
    text = ast.dump(tensor)
    for n in nodes(cond):
        if ast.dump(n) == text:
            return True
    return False


def _flattened(cond: ast.expr, text: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _FLAT
               and ast.dump(n.func.value) == text for n in nodes(cond))


def _flat_value(node: ast.expr) -> bool:
    """Is ``node`` 1-D by construction: ``x.reshape(-1)``, ``x.view(-1)``, ``x.flatten()``, ``x.ravel()``?"""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FLAT):
        return False
    return node.func.attr in ("flatten", "ravel") and not node.args or (
        len(node.args) == 1 and int_value(node.args[0]) == -1)


def row_index_offsets(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """First-axis indices of a condition on ``x`` joined with ``x.numel()`` into one list of offsets."""
    bound = body.bindings()
    for _, node in expressions(body):
        if not isinstance(node, ast.Call):
            continue
        name = last_name(node.func)
        closing: list[ast.expr] = []
        if name in _JOINS and positional(node) and isinstance(positional(node)[0], (ast.List, ast.Tuple)):
            parts = list(positional(node)[0].elts)  # type: ignore[attr-defined]
        elif name == "pad" and len(positional(node)) >= 2:
            parts = [positional(node)[0]]
            value = keyword(node, "value")
            closing = [value] if value is not None else []
        else:
            continue
        for part in parts:
            inner = _strip(through(part, bound))
            cond = _first_axis_indices(inner)
            if cond is None:
                continue
            cond = through(cond, bound)
            others = [p for p in parts if p is not part] + closing
            for tensor in (t for other in others for t in _numel_of(through(other, bound))):
                text = ast.dump(tensor)
                if _unflattened(cond, tensor) and not _flattened(cond, text) \
                        and not _flat_value(through(tensor, bound)):
                    yield inner, ast.unparse(tensor)  # where the indices are taken (through a local)
                    break


def _first_axis_reads(body: Body) -> set[str]:
    """``ast.dump`` of each ``x`` whose length along the first axis the function reads:
    ``x.shape[0]``, ``x.size(0)``, ``len(x)``."""
    found: set[str] = set()
    for _, node in expressions(body):
        if isinstance(node, ast.Subscript) and int_value(node.slice) == 0 and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "shape":
            found.add(ast.dump(node.value.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size" \
                and len(node.args) == 1 and int_value(node.args[0]) == 0:
            found.add(ast.dump(node.func.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                and len(node.args) == 1:
            found.add(ast.dump(node.args[0]))
    return found


def _join_dim(call: ast.Call) -> int | None:
    dim = keyword(call, "dim") or keyword(call, "axis")
    if dim is None and len(positional(call)) > 1:
        dim = positional(call)[1]
    return 0 if dim is None else int_value(dim)


def numel_as_length(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``x.numel()`` in the width of a pad joined to ``x`` along its first axis, where the function
    also reads ``x``'s first-axis length."""
    reads: set[str] | None = None
    bound = body.bindings()
    for _, node in expressions(body):
        if not isinstance(node, ast.Call):
            continue
        name = last_name(node.func)
        width: ast.AST | None = None
        padded: list[ast.expr] = []
        if name in _JOINS and _join_dim(node) == 0 and positional(node) \
                and isinstance(positional(node)[0], (ast.List, ast.Tuple)):
            pieces = positional(node)[0].elts  # type: ignore[attr-defined]
            for piece in pieces:
                built = through(piece, bound)
                if isinstance(built, ast.Call) and last_name(built.func) in _SIZED:
                    shape = [*built.args, *(k.value for k in built.keywords if k.arg in ("size", "shape"))]
                    first = shape[0] if shape else None
                    if isinstance(first, (ast.Tuple, ast.List)):
                        first = first.elts[0] if first.elts else None
                    if first is not None and not isinstance(first, ast.Starred):
                        width = through(first, bound)  # the pad's size along the first axis, the one joined
                        padded = [p for p in pieces if p is not piece]
                        break
        elif name == "pad" and len(positional(node)) >= 2:
            amount = through(positional(node)[1], bound)
            if isinstance(amount, (ast.Tuple, ast.List)) and len(amount.elts) == 2:
                width = ast.Tuple(elts=[through(e, bound) for e in amount.elts], ctx=ast.Load())
                padded = [positional(node)[0]]
        if width is None:
            continue
        for tensor in _numel_of(width):
            text = ast.dump(tensor)
            if not any(ast.dump(p) == text for p in padded):
                continue
            if reads is None:
                reads = _first_axis_reads(body)
            if text in reads:
                for n in nodes(width):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "numel" \
                            and ast.dump(n.func.value) == text:
                        yield n, ast.unparse(tensor)
                        break
                break
