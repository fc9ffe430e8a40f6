"""Alignment units in one spelling, so two owners' units can be compared.

``pad_size = parallel_state.tp.size * args.data_pad_size_multiplier`` is
written ``data_pad_size_multiplier*tp.size``: locals are replaced by what they
were bound to, an attribute read from a local object keeps its own name
(``args.x`` is ``x``), a parameter its name, products are sorted, and
``math.lcm`` / ``max`` keep their names. No name is given a meaning: two units
are the same when they are spelt with the same factors (`atoms`), and may be
the same when they have the same `shape` (``?*?``), while
``lcm(16,?*?)`` and ``?*?`` differ, as they do for fp8.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

__all__ = ["atoms", "canonical", "shape"]

_LCM = frozenset({"lcm", "math.lcm", "numpy.lcm"})
_MAX = frozenset({"max", "builtins.max"})
_PASS = frozenset({"int", "abs"})
_DEPTH = 6
_ATOM = re.compile(r"(?<![\w.])(?!(?:lcm|max)\()[A-Za-z_][\w.]*(?:\(\))?")


def _role(name: str, is_multiplier: Callable[[str], bool]) -> str | None:
    """A configured pad multiplier name folds to one spelling (`pad-multiplier-names`, a hint)."""
    return "pad_multiplier" if is_multiplier(name) else None


def atoms(text: str) -> frozenset[str]:
    """The factors of a canonical unit that are not literals: ``{"tp.size", "pad_multiplier"}``."""
    return frozenset(_ATOM.findall(text))


def shape(text: str) -> str:
    """A canonical unit with every factor that is not a literal written ``?``: two units of one
    shape (``?*?``) may be the same unit under other names; ``?*?`` and ``lcm(16,?*?)`` are not."""
    out = _ATOM.sub("?", text)
    if "*" in out and "(" not in out:
        out = "*".join(sorted(out.split("*")))
    return out


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
        # `parallel_state.tp.size`: the group's size, `tp.size` (the object it is read from is
        # a local's name, not part of the unit).
        if node.attr in ("size", "world_size", "rank") and isinstance(node.value, ast.Attribute):
            return f"{node.value.attr}.{node.attr}"
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
