"""Small, purely syntactic helpers over libcst nodes, shared by the rules.

Walking an expression's parts, reading literals, names and call arguments,
and comparing two expressions structurally. No scope or qualified-name
metadata: those cost about 9x a parse (DESIGN.md section 9).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

__all__ = [
    "argument", "expects_error", "index_of", "int_value", "keyword", "last_name", "names_in", "passes",
    "positional", "root_name", "same", "snippet", "string_key", "string_value", "target_name", "walk",
]

_RAISES = frozenset({"raises", "assertRaises", "assertRaisesRegex"})

_LEAVES = (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.Imaginary)


def _comp_parts(comp: cst.CompFor | None) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    while comp is not None:
        out += [comp.target, comp.iter, *(i.test for i in comp.ifs)]
        comp = comp.inner_for_in
    return out


def _parts(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """The sub-expressions of ``node``; libcst's ``children`` only as a fallback.

    ``children`` re-runs libcst's child visitor (whitespace included), which is
    what made walking expressions the rules' most expensive step.
    """
    if isinstance(node, _LEAVES):
        return ()
    if isinstance(node, cst.Attribute):
        return (node.value,)
    if isinstance(node, cst.Call):
        return (node.func, *(a.value for a in node.args))
    if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
        return (node.left, node.right)
    if isinstance(node, cst.UnaryOperation):
        return (node.expression,)
    if isinstance(node, cst.Comparison):
        return (node.left, *(c.comparator for c in node.comparisons))
    if isinstance(node, cst.Subscript):
        out: list[cst.CSTNode] = [node.value]
        for element in node.slice:
            part = element.slice
            if isinstance(part, cst.Index):
                out.append(part.value)
            else:
                out += [p for p in (part.lower, part.upper, part.step) if p is not None]
        return out
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        return [e.value for e in node.elements]
    if isinstance(node, cst.IfExp):
        return (node.test, node.body, node.orelse)
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return [node.elt, *_comp_parts(node.for_in)]
    if isinstance(node, cst.DictComp):
        return [node.key, node.value, *_comp_parts(node.for_in)]
    return node.children


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node`` (itself included), depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(_parts(current)))


def names_in(node: cst.CSTNode) -> set[str]:
    """Every bare name used under ``node``."""
    return {n.value for n in walk(node) if isinstance(n, cst.Name)}


def int_value(node: cst.CSTNode | None) -> int | None:
    """The value of an int literal (``128``, ``-1``, ``1_024``), else None."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = int_value(node.expression)
        return None if inner is None else -inner
    return None


def string_value(node: cst.CSTNode | None) -> str | None:
    """The text of a plain string literal (``"tokens"``); None for anything else."""
    if not isinstance(node, cst.SimpleString):
        return None
    raw = node.value
    # Fast path for the common key spelling: libcst's `evaluated_value` runs
    # `ast.literal_eval`, which dominated the rules' profile.
    if raw[0] in "'\"" and "\\" not in raw:
        quote = 3 if raw[:3] in ('"""', "'''") else 1
        return raw[quote:-quote]
    value = node.evaluated_value
    return value if isinstance(value, str) else None


def string_key(node: cst.Subscript) -> str | None:
    """``"tokens"`` for ``batch["tokens"]``; None for any other subscript."""
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return string_value(node.slice[0].slice.value)
    return None


def index_of(node: cst.Subscript) -> cst.BaseExpression | None:
    """The index expression of ``x[i]`` (one index, not a slice or a key)."""
    if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        return node.slice[0].slice.value
    return None


def last_name(node: cst.CSTNode) -> str | None:
    """``get_batch`` for ``get_batch``, ``data.get_batch`` and ``self.data.get_batch``."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def root_name(node: cst.CSTNode) -> str | None:
    """``batch`` for ``batch``, ``batch.x`` and ``batch["x"][0]``."""
    while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
        node = node.func if isinstance(node, cst.Call) else node.value
    return node.value if isinstance(node, cst.Name) else None


def target_name(node: cst.CSTNode) -> tuple[str | None, bool]:
    """The field a store writes and whether it writes one entry of it.

    ``x = ...`` -> ``("x", False)``; ``d["x"] = ...`` and ``o.x = ...`` ->
    ``("x", False)``; ``x[i] = ...`` and ``d["x"][i] = ...`` -> ``("x", True)``.
    """
    if isinstance(node, cst.Name):
        return node.value, False
    if isinstance(node, cst.Attribute):
        return node.attr.value, False
    if isinstance(node, cst.Subscript):
        key = string_key(node)
        if key is not None:
            return key, False
        inner, _ = target_name(node.value)
        return inner, True
    return None, False


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    """The plain positional arguments of ``call``, up to the first ``*args``."""
    out = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break
        out.append(arg.value)
    return out


def keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    """The value ``call`` passes as ``name=...``, else None."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def argument(call: cst.Call, name: str, index: int) -> cst.BaseExpression | None:
    """The argument ``call`` passes for parameter ``name`` at position ``index``."""
    found = keyword(call, name)
    if found is not None:
        return found
    args = positional(call)
    return args[index] if index < len(args) else None


def passes(call: cst.Call, name: str, index: int) -> bool:
    """Does ``call`` pass parameter ``name`` (position ``index``)? ``*a``/``**k`` might."""
    if keyword(call, name) is not None or index < len(positional(call)):
        return True
    return any(arg.star for arg in call.args)


def snippet(node: cst.CSTNode, limit: int = 48) -> str:
    """Source text of ``node`` on one line, shortened for a message."""
    text = " ".join(cst.Module([]).code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shape(node: cst.CSTNode) -> object:
    """A structural key that ignores parentheses and whitespace: ``(2 * cp)`` == ``2*cp``."""
    if isinstance(node, cst.Name):
        return ("n", node.value)
    if isinstance(node, cst.Integer):
        return ("i", int(node.evaluated_value))
    if isinstance(node, cst.Attribute):
        return ("a", _shape(node.value), node.attr.value)
    if isinstance(node, cst.BinaryOperation):
        return ("b", type(node.operator).__name__, _shape(node.left), _shape(node.right))
    if isinstance(node, cst.UnaryOperation):
        return ("u", type(node.operator).__name__, _shape(node.expression))
    if isinstance(node, cst.Call):
        args = tuple((a.keyword.value if a.keyword else None, a.star, _shape(a.value)) for a in node.args)
        return ("c", _shape(node.func), args)
    if isinstance(node, cst.Subscript):
        parts = tuple(
            _shape(e.slice.value) if isinstance(e.slice, cst.Index) else ("slice", id(e)) for e in node.slice
        )
        return ("s", _shape(node.value), parts)
    if isinstance(node, cst.SimpleString):
        return ("str", node.value)
    return ("id", id(node))


def same(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """Are ``a`` and ``b`` the same expression, up to parentheses and whitespace?"""
    return _shape(a) == _shape(b)



def expects_error(node: cst.With) -> bool:
    """``with pytest.raises(...)`` (or ``self.assertRaises``): its body is meant to fail."""
    return any(isinstance(i.item, cst.Call) and last_name(i.item.func) in _RAISES for i in node.items)
