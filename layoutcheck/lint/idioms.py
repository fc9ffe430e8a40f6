"""Recognisers for the padding idioms, in their common spellings.

One place for each, so two rules never disagree about what a round-up or a
maximum over lengths looks like: `match_round_up`, `match_pad_amount`,
`match_ceil_div`, `match_max_over`, `match_broadcast`. Each returns the
nodes that play the value ``n`` and the unit ``m`` (or the collection, or
the broadcast value); what those nodes derive from is
`layoutcheck.lint.flow`'s question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from layoutcheck.lint.imports import Imports
from layoutcheck.lint.nodes import int_value, keyword, last_name, names_in, positional, same

__all__ = [
    "Idiom", "is_init_value", "match_broadcast", "match_ceil_div", "match_max_over", "match_pad_amount",
    "match_round_up",
]


@dataclass(frozen=True)
class Idiom:
    """A recognised round-up, pad amount or ceil-division of ``values`` by ``unit``."""

    node: cst.CSTNode
    values: tuple[cst.BaseExpression, ...]
    """The padded quantity ``n`` (several terms when written ``a + b + m - 1``)."""
    unit: cst.BaseExpression
    """The multiple ``m``."""


_CEIL_DIV_HELPER = re.compile(r"_*(ceil_?div|cdiv|div_?up|ceildiv|div_ceil|ceil_divide|div_round_up)")
_ROUND_UP_HELPER = re.compile(
    r"_*(round_?up(_to(_multiple(_of)?)?)?|align(_?up|_?to|_to_multiple)?|ceil_to(_multiple)?"
    r"|pad_to_multiple(_of)?|next_multiple(_of)?|round_to_multiple(_of)?)"
)
_PASS_INT = frozenset({"int", "math.floor", "floor"})
_CEIL = frozenset({"math.ceil", "numpy.ceil", "torch.ceil", "ceil"})


def _op(node: cst.CSTNode, kind: type) -> bool:
    return isinstance(node, cst.BinaryOperation) and isinstance(node.operator, kind)


def _terms(node: cst.BaseExpression, sign: int, out: list[tuple[int, cst.BaseExpression]]) -> None:
    if _op(node, cst.Add):
        _terms(node.left, sign, out)
        _terms(node.right, sign, out)
    elif _op(node, cst.Subtract):
        _terms(node.left, sign, out)
        _terms(node.right, -sign, out)
    else:
        out.append((sign, node))


def _ceil_numerator(numerator: cst.BaseExpression, unit: cst.BaseExpression) -> tuple[cst.BaseExpression, ...] | None:
    """``n`` when ``numerator`` is ``n + m - 1`` (any order, or ``n + 127`` for ``m = 128``)."""
    terms: list[tuple[int, cst.BaseExpression]] = []
    _terms(numerator, 1, terms)
    m_literal = int_value(unit)
    for i, (sign, term) in enumerate(terms):
        if sign < 0:
            continue
        if m_literal is not None and int_value(term) == m_literal - 1:
            drop = {i}
        elif same(term, unit):
            ones = [j for j, (s, t) in enumerate(terms) if s < 0 and int_value(t) == 1]
            if not ones:
                continue
            drop = {i, ones[0]}
        else:
            continue
        rest = tuple(t for k, (_, t) in enumerate(terms) if k not in drop)
        if rest:
            return rest
    return None


def _unwrap_int(node: cst.BaseExpression, imports: Imports) -> cst.BaseExpression:
    while isinstance(node, cst.Call) and imports.qualify(node.func) in _PASS_INT and len(node.args) == 1:
        node = node.args[0].value
    return node


def match_ceil_div(node: cst.CSTNode, imports: Imports) -> Idiom | None:
    """``ceil(n / m)`` in its spellings: ``(n + m - 1) // m``, ``-(-n // m)``,
    ``(n - 1) // m + 1``, ``math.ceil(n / m)``, ``ceil_div(n, m)``, ``triton.cdiv(n, m)``."""
    if _op(node, cst.FloorDivide):
        values = _ceil_numerator(node.left, node.right)
        if values is not None:
            return Idiom(node, values, node.right)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = node.expression
        if _op(inner, cst.FloorDivide):
            left = inner.left
            if isinstance(left, cst.UnaryOperation) and isinstance(left.operator, cst.Minus):
                return Idiom(node, (left.expression,), inner.right)
    if _op(node, cst.Add):
        for div, one in ((node.left, node.right), (node.right, node.left)):
            if int_value(one) == 1 and _op(div, cst.FloorDivide) and _op(div.left, cst.Subtract):
                if int_value(div.left.right) == 1:
                    return Idiom(node, (div.left.left,), div.right)
    if isinstance(node, cst.Call):
        name = imports.qualify(node.func) or ""
        args = positional(node)
        if name in _CEIL or name.endswith(".ceil"):
            if len(args) == 1 and _op(args[0], cst.Divide):
                return Idiom(node, (args[0].left,), args[0].right)
        tail = last_name(node.func) or ""
        if len(args) == 2 and _CEIL_DIV_HELPER.fullmatch(tail):
            return Idiom(node, (args[0],), args[1])
    return None


def match_round_up(node: cst.CSTNode, imports: Imports) -> Idiom | None:
    """``n`` rounded up to a multiple of ``m``: a ceil-division times ``m``, or a helper
    named like ``round_up``/``align``/``pad_to_multiple`` with two arguments."""
    if _op(node, cst.Multiply):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            found = match_ceil_div(_unwrap_int(a, imports), imports)
            if found is not None and same(found.unit, b):
                return Idiom(node, found.values, b)
    if isinstance(node, cst.Call):
        args = positional(node)
        tail = last_name(node.func) or ""
        if len(args) == 2 and _ROUND_UP_HELPER.fullmatch(tail):
            return Idiom(node, (args[0],), args[1])
    return None


def match_pad_amount(node: cst.CSTNode) -> Idiom | None:
    """The pad that rounds ``n`` up to a multiple of ``m``: ``(m - n % m) % m``,
    ``(-n) % m`` and the off-by-one-prone ``m - n % m``."""
    if _op(node, cst.Modulo):
        left, unit = node.left, node.right
        if isinstance(left, cst.UnaryOperation) and isinstance(left.operator, cst.Minus):
            return Idiom(node, (left.expression,), unit)
        if _op(left, cst.Subtract) and same(left.left, unit) and _op(left.right, cst.Modulo):
            if same(left.right.right, unit):
                return Idiom(node, (left.right.left,), unit)
    if _op(node, cst.Subtract) and _op(node.right, cst.Modulo) and same(node.left, node.right.right):
        return Idiom(node, (node.right.left,), node.left)
    return None


def match_max_over(node: cst.CSTNode, imports: Imports) -> cst.BaseExpression | None:
    """The collection of ``max(xs)``, ``max(x for ...)``, ``torch.max(xs)``, ``xs.max()``.

    ``max(a, b)`` of two values is not a maximum over a collection.
    """
    if not isinstance(node, cst.Call):
        return None
    args = [a for a in node.args if a.keyword is None]
    name = imports.qualify(node.func)
    if name in ("max", "torch.max", "numpy.max", "numpy.amax", "torch.amax") and len(args) == 1:
        return args[0].value
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("max", "amax") and not args:
        return node.func.value
    return None


_FULL = frozenset({"torch.full", "numpy.full"})
_ONES = frozenset({"torch.ones", "numpy.ones"})


def match_broadcast(node: cst.CSTNode, imports: Imports) -> cst.BaseExpression | None:
    """The one value of a list giving every sample the same entry.

    ``[v] * n``, ``n * [v]``, ``[v for _ in xs]`` (the element ignores the loop
    variable), ``{k: v for k in ks}``, ``torch.full((n,), v)``,
    ``x.new_full((n,), v)``, ``torch.ones(n) * v``, ``dict.fromkeys(ks, v)``,
    ``itertools.repeat(v, n)``, and ``list(...)`` of one of these.
    """
    if _op(node, cst.Multiply):
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(a, cst.List) and len(a.elements) == 1 and isinstance(a.elements[0], cst.Element):
                return a.elements[0].value
            if isinstance(a, cst.Call) and (
                imports.qualify(a.func) in _ONES
                or (isinstance(a.func, cst.Attribute) and a.func.attr.value == "new_ones")
            ):
                return b
        return None
    if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
        element = node.value if isinstance(node, cst.DictComp) else node.elt
        bound: set[str] = set()
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            bound |= names_in(comp.target)
            comp = comp.inner_for_in
        return None if names_in(element) & bound else element
    if isinstance(node, cst.Call):
        name = imports.qualify(node.func) or ""
        tail = last_name(node.func)
        args = positional(node)
        if name in _FULL or tail == "new_full":
            return keyword(node, "fill_value") or (args[1] if len(args) > 1 else None)
        if tail == "fromkeys" and len(args) == 2:
            return args[1]
        if tail == "repeat" and name.startswith(("itertools", "repeat")) and args:
            if len(args) > 1 or keyword(node, "times") is not None:
                return args[0]
        if name in ("list", "tuple") and len(args) == 1:
            return match_broadcast(args[0], imports)
    return None


def is_init_value(node: cst.BaseExpression | None) -> bool:
    """``0``, ``-1``, ``None``, ``[]``: a placeholder filled later, not a padded length."""
    if node is None or isinstance(node, cst.Float):
        return True
    value = int_value(node)
    if value is not None:
        return value <= 0
    if isinstance(node, cst.Name):
        return node.value in ("None", "False")
    if isinstance(node, (cst.List, cst.Dict, cst.Tuple)):
        return not node.elements
    return False



# --- agreement checks ----------------------------------------------------------

_COMPARE = {
    cst.Equal: lambda a, b: a == b,
    cst.NotEqual: lambda a, b: a != b,
    cst.LessThan: lambda a, b: a < b,
    cst.LessThanEqual: lambda a, b: a <= b,
    cst.GreaterThan: lambda a, b: a > b,
    cst.GreaterThanEqual: lambda a, b: a >= b,
}
_DISTINCT = frozenset({"set", "frozenset", "numpy.unique", "torch.unique"})

Agreement = tuple[str, cst.BaseExpression]
"""``("agree", xs)``: the entries of ``xs`` are all equal; ``("single", xs)``: ``xs`` has one entry."""


def _side(node: cst.BaseExpression, imports: Imports) -> tuple[int, int, cst.BaseExpression | None] | None:
    """A comparison operand's value when the entries of a collection agree, and when they do not.

    ``len(set(xs))``: 1 and 2 distinct values; ``min(xs)``/``max(xs)``: 5, then
    4 or 6; ``xs.count(e)``: 3 of 3 entries, then 2; ``len(xs)``: 3 either way;
    a literal: itself.
    """
    literal = int_value(node)
    if literal is not None:
        return literal, literal, None
    if not isinstance(node, cst.Call):
        return None
    args = positional(node)
    name = imports.qualify(node.func)
    if isinstance(node.func, cst.Attribute):
        tail = node.func.attr.value
        if tail == "count" and len(args) == 1:
            return 3, 2, node.func.value
        inner = node.func.value
        if tail == "numel" and not args and isinstance(inner, cst.Call) and imports.qualify(inner.func) == "torch.unique":
            return (1, 2, positional(inner)[0]) if positional(inner) else None
    if len(args) != 1:
        return None
    if name == "len":
        inner = args[0]
        if isinstance(inner, cst.Call) and imports.qualify(inner.func) in _DISTINCT and len(positional(inner)) == 1:
            return 1, 2, positional(inner)[0]
        return 3, 3, inner
    if name in ("min", "max"):
        return 5, (4 if name == "min" else 6), args[0]
    return None


def _comparison(node: cst.Comparison, negated: bool, imports: Imports) -> Agreement | None:
    if len(node.comparisons) != 1:
        return None
    target = node.comparisons[0]
    compare = _COMPARE.get(type(target.operator))
    left, right = node.left, target.comparator
    if compare is None:
        return None
    # `len(xs) == 1`: one sample per micro-batch (nothing to disagree with).
    for one, other in ((left, right), (right, left)):
        if int_value(other) is not None and isinstance(one, cst.Call) and imports.qualify(one.func) == "len":
            args = positional(one)
            if len(args) == 1 and not (isinstance(args[0], cst.Call) and imports.qualify(args[0].func) in _DISTINCT):
                a, b = ((1, 2), (int_value(other),) * 2) if one is left else ((int_value(other),) * 2, (1, 2))
                if compare(a[0], b[0]) != negated and compare(a[1], b[1]) == negated:
                    return "single", args[0]
                return None
    sides = _side(left, imports), _side(right, imports)
    if sides[0] is None or sides[1] is None:
        return None
    (la, ld, lx), (ra, rd, rx) = sides
    collection = lx or rx
    if collection is None or (lx is not None and rx is not None and not same(lx, rx)):
        return None
    # An agreement check holds when the entries agree and fails when they do not
    # (negated: the condition that raises holds exactly when they do not).
    if compare(la, ra) != negated and compare(ld, rd) == negated:
        return "agree", collection
    return None


def _all_equal(node: cst.Call, negated: bool, imports: Imports) -> Agreement | None:
    """``all(p == e for p in xs)``, or (negated) ``any(p != e for p in xs)``."""
    name = imports.qualify(node.func)
    args = positional(node)
    if name != ("any" if negated else "all") or len(args) != 1:
        return None
    gen = args[0]
    if not isinstance(gen, (cst.GeneratorExp, cst.ListComp)) or gen.for_in.inner_for_in or gen.for_in.ifs:
        return None
    target, element = gen.for_in.target, gen.elt
    if not isinstance(target, cst.Name) or not isinstance(element, cst.Comparison) or len(element.comparisons) != 1:
        return None
    wanted = cst.NotEqual if negated else cst.Equal
    if not isinstance(element.comparisons[0].operator, wanted):
        return None
    sides = (element.left, element.comparisons[0].comparator)
    for mine, other in (sides, sides[::-1]):
        if isinstance(mine, cst.Name) and mine.value == target.value and target.value not in names_in(other):
            return "agree", gen.for_in.iter
    return None


def match_agreement(test: cst.BaseExpression, imports: Imports, *, negated: bool = False) -> list[Agreement]:
    """The agreement checks ``test`` makes: that a collection's entries are all equal.

    Forms: ``len(set(xs)) == 1`` (or ``<= 1``, ``< 2``), ``min(xs) == max(xs)``,
    ``all(p == xs[0] for p in xs)``, ``xs.count(xs[0]) == len(xs)``, and
    ``len(xs) == 1`` (one entry: ``"single"``), under ``and``/``or``/``not``.
    ``negated`` reads ``test`` as the condition of an ``if`` that raises:
    ``len(set(xs)) != 1``, ``min(xs) < max(xs)``, ``any(p != e for p in xs)``...
    A bound (``max(xs) <= limit``), a divisibility test or ``len(xs) >= 1``
    checks something else and is not returned.
    """
    out: list[Agreement] = []
    stack: list[tuple[cst.BaseExpression, bool]] = [(test, negated)]
    while stack:
        node, neg = stack.pop()
        if isinstance(node, cst.BooleanOperation):
            stack += [(node.left, neg), (node.right, neg)]
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            stack.append((node.expression, not neg))
        elif isinstance(node, cst.Comparison):
            found = _comparison(node, neg, imports)
            if found is not None:
                out.append(found)
        elif isinstance(node, cst.Call):
            found = _all_equal(node, neg, imports)
            if found is not None:
                out.append(found)
    return out
