"""Alignment units in one spelling, so two owners' units can be compared.

``pad_size = mpu.get_tensor_model_parallel_world_size() * args.data_pad_size_multiplier``
and ``tp_size * pad_multiplier`` are the same unit: `canonical` writes both
``pad_multiplier*tp``. Names are folded to the roles they play (``tp``,
``cp``, ``pad_multiplier``), locals are replaced by what they were bound to,
products are sorted, and ``math.lcm`` / ``max`` keep their names, so
``lcm(16,pad_multiplier*tp)`` and ``pad_multiplier*tp`` differ, as they do
for fp8.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

__all__ = ["canonical"]

_TP = re.compile(
    r"_*(tp|tp_size|tp_world_size|tp_ws|tensor_parallel_size|tensor_model_parallel_size"
    r"|get_tensor_model_parallel_world_size|tensor_model_parallel_world_size|tp_degree)",
    re.IGNORECASE,
)
_CP = re.compile(
    r"_*(cp|cp_size|cp_world_size|cp_ws|context_parallel_size|context_parallel_world_size"
    r"|get_context_parallel_world_size|cp_degree)",
    re.IGNORECASE,
)
_LCM = frozenset({"lcm", "math.lcm", "numpy.lcm"})
_MAX = frozenset({"max", "builtins.max"})
_PASS = frozenset({"int", "abs"})
_DEPTH = 6


def _role(name: str, is_multiplier: Callable[[str], bool]) -> str | None:
    if _TP.fullmatch(name):
        return "tp"
    if _CP.fullmatch(name):
        return "cp"
    if is_multiplier(name):
        return "pad_multiplier"
    return None


def _factors(node: ast.expr, out: list[ast.expr]) -> None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        _factors(node.left, out)
        _factors(node.right, out)
    else:
        out.append(node)


def canonical(
    node: ast.expr,
    bound: Callable[[str], str | None],
    is_multiplier: Callable[[str], bool],
    depth: int = 0,
) -> str:
    """``node`` as a canonical unit string; ``bound`` gives a local's unit as it stood when the
    local was assigned (so ``pad_size = max(pad_size, k)`` reads the earlier ``pad_size``)."""
    if depth > _DEPTH:
        return "?"

    def again(n: ast.expr) -> str:
        return canonical(n, bound, is_multiplier, depth + 1)

    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.Name):
        role = _role(node.id, is_multiplier)
        if role is not None:
            return role
        value = bound(node.id)
        return value if value is not None else node.id
    if isinstance(node, ast.Attribute):
        # `parallel_state.tp.size`, `ps.cp.size`: the group's size.
        if node.attr in ("size", "world_size") and isinstance(node.value, (ast.Attribute, ast.Name)):
            group = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
            role = _role(group, is_multiplier)
            if role is not None:
                return role
        return _role(node.attr, is_multiplier) or node.attr
    if isinstance(node, ast.Call):
        func = node.func
        tail = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        full = tail if not isinstance(func, ast.Attribute) else f"{getattr(func.value, 'id', '')}.{tail}"
        role = _role(tail, is_multiplier)
        if role is not None:
            return role
        args = [a for a in node.args if not isinstance(a, ast.Starred)]
        if tail in _PASS and len(args) == 1:
            return again(args[0])
        if full in _LCM or tail == "lcm":
            return "lcm(" + ",".join(sorted(again(a) for a in args)) + ")"
        if full in _MAX or tail == "max":
            return "max(" + ",".join(sorted(again(a) for a in args)) + ")"
        return f"{tail}()"
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Mult):
            parts: list[ast.expr] = []
            _factors(node, parts)
            names = []
            for part in parts:
                text = again(part)
                names.extend(text.split("*") if "(" not in text else [text])
            return "*".join(sorted(names))
        symbol = {ast.Add: "+", ast.Sub: "-", ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%"}.get(type(node.op), "?")
        return f"({again(node.left)}{symbol}{again(node.right)})"
    if isinstance(node, ast.IfExp):
        a, b = again(node.body), again(node.orelse)
        return a if a == b else f"({a}|{b})"
    return "?"
