"""Small syntax predicates the per-file walk's statement and store visitors ask.

Part of the per-file walk (`layoutcheck.model.extract`): each reads one node
(or one block) alone, never the walk's flow state beyond the `Flow` it is
given: what a broadcast's count is, whether a comprehension gathers entries by
an index list, whether a value could be an alignment unit, which names a block
assigns, whether a block always ends in ``return``/``raise``, and the like.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

from layoutcheck.model.flow import Flow
from layoutcheck.model.syntax import last_name, nodes, string_value, walk

__all__ = ["GROWS", "always_ends", "assigned_targets", "from_mapping", "gathers", "reads_key", "shorter_than", "sized_by_shape",
    "string_tuple", "unit_shaped", "written_in"]


def sized_by_shape(broadcast: ast.AST) -> bool:
    """Does ``broadcast`` take its entry count as a shape (``torch.full(shape, m)``,
    ``torch.ones(shape) * m``), not as an integer (``[m] * n``) or an iterable (a comprehension)?"""
    if isinstance(broadcast, ast.Call):
        return (last_name(broadcast.func) or "").endswith("full")
    return isinstance(broadcast, ast.BinOp) and not any(isinstance(s, ast.List) for s in (broadcast.left, broadcast.right))


def gathers(value: ast.expr) -> bool:
    """``[xs[i] for i in order]``: entries picked by an index list (reordered, or a share of them)."""
    if not isinstance(value, ast.ListComp) or len(value.generators) != 1:
        return False
    target, elt = value.generators[0].target, value.elt
    return (isinstance(target, ast.Name) and isinstance(elt, ast.Subscript) and isinstance(elt.slice, ast.Name)
            and elt.slice.id == target.id and not value.generators[0].ifs)


def from_mapping(value: ast.ListComp, bound: Callable[[str], ast.expr | None]) -> bool:
    """Does the gather ``[m[i] for i in ids]`` look ``i`` up in a mapping (``m`` bound to a dict
    literal, a dict comprehension or ``dict(...)``)? A lookup by key finds each sample's entry
    wherever it sits: no reorder by position."""
    source = value.elt.value  # type: ignore[attr-defined]
    found = bound(source.id) if isinstance(source, ast.Name) else None
    if isinstance(found, (ast.Dict, ast.DictComp)):
        return True
    return isinstance(found, ast.Call) and last_name(found.func) in ("dict", "defaultdict", "OrderedDict")


def unit_shaped(value: ast.expr) -> bool:
    """Could ``value`` be an alignment unit: a literal, a name, an attribute, a product, ``lcm``/``max``?"""
    if isinstance(value, (ast.Constant, ast.Name, ast.Attribute)):
        return True
    if isinstance(value, ast.BinOp):
        return isinstance(value.op, (ast.Mult, ast.LShift)) and unit_shaped(value.left) and unit_shaped(value.right)
    if isinstance(value, ast.Call):
        return (last_name(value.func) or "") in ("lcm", "max", "int", "get_world_size") or not value.args
    return False


def string_tuple(node: ast.AST) -> tuple[str, ...] | None:
    """``("a", "b")``: the strings of a literal tuple or list of two or more string constants."""
    if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2:
        found = [string_value(e) for e in node.elts]
        if all(f is not None for f in found):
            return tuple(found)  # type: ignore[arg-type]
    return None


def assigned_targets(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.expr]:
    """The targets an assignment statement stores into."""
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def reads_key(node: ast.AST, key: str, flow: Flow) -> bool:
    """Does ``node`` read field ``key`` (directly, or through a local bound to a read of it)?"""
    for part in walk(node):
        if isinstance(part, ast.Name):
            bound = flow.bound_expr(part.id)
            if bound is not None and key in flow.classify(bound).fields:
                return True
    return False


GROWS = frozenset({"torch.nn.functional.pad", "numpy.pad", "torch.cat", "torch.concat", "torch.concatenate",
                    "numpy.concatenate"})
"""Calls that make a tensor longer: a pad, or a concatenation with more entries."""


def shorter_than(test: ast.expr) -> str | None:
    """``d`` of a test that ``d`` is shorter than something: ``len(d) < p``, ``p > d.shape[0]``,
    ``d.size(0) < p``, ``d.numel() != p``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, (ast.Gt, ast.GtE)):
        left, right = right, left
    elif not isinstance(op, (ast.Lt, ast.LtE, ast.NotEq)):
        return None
    del right
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" \
            and len(left.args) == 1 and isinstance(left.args[0], ast.Name):
        return left.args[0].id
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and left.func.attr in ("size", "numel") \
            and isinstance(left.func.value, ast.Name):
        return left.func.value.id
    if isinstance(left, ast.Subscript) and isinstance(left.value, ast.Attribute) and left.value.attr == "shape" \
            and isinstance(left.value.value, ast.Name):
        return left.value.value.id
    return None


def always_ends(body: Iterable[ast.stmt]) -> bool:
    """Does ``body`` always end in ``return`` or ``raise`` (its last statement)?"""
    last = None
    for last in body:
        pass
    if last is None:
        return False
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return always_ends(last.body) and always_ends(last.orelse)
    return False


def written_in(body: list[ast.stmt]) -> set[str]:
    """The names an assignment anywhere in ``body`` (nested blocks included) writes."""
    return {n.id for stmt in body for s in (stmt, *nodes(stmt))
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for t in assigned_targets(s) for n in walk(t) if isinstance(n, ast.Name)}
