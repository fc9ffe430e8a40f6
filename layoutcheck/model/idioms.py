"""Recognisers for the padding idioms, in their common spellings, on `ast` nodes.

One place for each, so two rules never disagree about what a round-up or a
maximum over lengths looks like: `match_round_up`, `match_pad_amount`,
`match_ceil_div`, `match_max_over`, `match_broadcast`, `match_agreement`.
Each returns the nodes that play the value ``n`` and the unit ``m`` (or the
collection, or the broadcast value); what those nodes derive from is
`layoutcheck.model.flow`'s question.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from layoutcheck.records import dataclass

from layoutcheck.model.imports import Imports
from layoutcheck.model.syntax import int_value, keyword, last_name, names_in, positional, same

__all__ = [
    "LIBRARY_ROOTS", "Idiom", "library_helper", "is_init_value", "match_agreement", "match_broadcast", "match_ceil_div", "match_max_over",
    "match_pad_amount", "match_round_up", "padded_operand",
]


@dataclass(frozen=True)
class Idiom:
    """A recognised round-up, pad amount or ceil-division of ``values`` by ``unit``."""

    node: ast.expr
    values: tuple[ast.expr, ...]
    """The padded quantity ``n`` (several terms when written ``a + b + m - 1``)."""
    unit: ast.expr
    """The multiple ``m``."""


_CEIL_DIV_HELPER = re.compile(r"_*(ceil_?div|cdiv|div_?up|ceildiv|div_ceil|ceil_divide|div_round_up)")
_ROUND_UP_HELPER = re.compile(
    r"_*(round_?up(_to(_multiple(_of)?)?)?|align(_?up|_?to|_to_multiple)?|ceil_to(_multiple)?"
    r"|pad_to_multiple(_of)?|next_multiple(_of)?|round_to_multiple(_of)?)"
)
_PASS_INT = frozenset({"int", "math.floor", "floor"})
LIBRARY_ROOTS = frozenset({
    "layoutcheck", "triton", "math", "numpy", "torch", "megatron", "transformer_engine", "flash_attn", "apex",
    "deepspeed", "vllm", "sglang", "cutlass", "tilelang", "einops", "transformers", "flashinfer",
})
"""Libraries whose helpers are read by their names (`triton.cdiv`, `layoutcheck.geometry.round_up`):
an API's name is its meaning. A helper the project defines is read from its body instead (its name
is the project's to choose), by the project phase."""


def library_helper(func: ast.expr, imports: Imports) -> str | None:
    """The last name of ``func`` when it is a library's function (see `LIBRARY_ROOTS`), else None."""
    name = imports.qualify(func) or ""
    if name.split(".", 1)[0] in LIBRARY_ROOTS and "." in name:
        return name.rsplit(".", 1)[-1]
    return None
_CEIL = frozenset({"math.ceil", "numpy.ceil", "torch.ceil", "ceil"})


def _op(node: ast.AST, kind: type) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, kind)


def _terms(node: ast.expr, sign: int, out: list[tuple[int, ast.expr]]) -> None:
    if _op(node, ast.Add):
        _terms(node.left, sign, out)  # type: ignore[attr-defined]
        _terms(node.right, sign, out)  # type: ignore[attr-defined]
    elif _op(node, ast.Sub):
        _terms(node.left, sign, out)  # type: ignore[attr-defined]
        _terms(node.right, -sign, out)  # type: ignore[attr-defined]
    else:
        out.append((sign, node))


def _ceil_numerator(numerator: ast.expr, unit: ast.expr) -> tuple[ast.expr, ...] | None:
    """``n`` when ``numerator`` is ``n + m - 1`` (any order, or ``n + 127`` for ``m = 128``)."""
    terms: list[tuple[int, ast.expr]] = []
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


def _unwrap_int(node: ast.expr, imports: Imports) -> ast.expr:
    while isinstance(node, ast.Call) and imports.qualify(node.func) in _PASS_INT and len(node.args) == 1:
        node = node.args[0]
    return node


def match_ceil_div(node: ast.AST, imports: Imports) -> Idiom | None:
    """``ceil(n / m)`` in its spellings: ``(n + m - 1) // m``, ``-(-n // m)``,
    ``(n - 1) // m + 1``, ``math.ceil(n / m)``, ``ceil_div(n, m)``, ``triton.cdiv(n, m)``."""
    if isinstance(node, ast.BinOp):
        op = node.op
        if isinstance(op, ast.FloorDiv):
            values = _ceil_numerator(node.left, node.right)
            if values is not None:
                return Idiom(node, values, node.right)
        elif isinstance(op, ast.Add):
            for div, one in ((node.left, node.right), (node.right, node.left)):
                if int_value(one) == 1 and _op(div, ast.FloorDiv) and _op(div.left, ast.Sub):  # type: ignore[attr-defined]
                    if int_value(div.left.right) == 1:  # type: ignore[attr-defined]
                        return Idiom(node, (div.left.left,), div.right)  # type: ignore[attr-defined]
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = node.operand
        if _op(inner, ast.FloorDiv):
            left = inner.left  # type: ignore[attr-defined]
            if isinstance(left, ast.UnaryOp) and isinstance(left.op, ast.USub):
                return Idiom(node, (left.operand,), inner.right)  # type: ignore[attr-defined]
        return None
    if isinstance(node, ast.Call):
        args = positional(node)
        if len(args) == 1 and _op(args[0], ast.Div):
            name = imports.qualify(node.func) or ""
            if name in _CEIL or name.endswith(".ceil"):
                return Idiom(node, (args[0].left,), args[0].right)  # type: ignore[attr-defined]
        elif len(args) == 2 and _CEIL_DIV_HELPER.fullmatch(library_helper(node.func, imports) or ""):
            return Idiom(node, (args[0],), args[1])
    return None


def match_round_up(node: ast.AST, imports: Imports) -> Idiom | None:
    """``n`` rounded up to a multiple of ``m``: a ceil-division times ``m``, or a helper
    named like ``round_up``/``align``/``pad_to_multiple`` with two arguments."""
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Mult):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                found = match_ceil_div(_unwrap_int(a, imports), imports)
                if found is not None and same(found.unit, b):
                    return Idiom(node, found.values, b)
        return None
    if isinstance(node, ast.Call):
        args = positional(node)
        if len(args) == 2 and _ROUND_UP_HELPER.fullmatch(library_helper(node.func, imports) or ""):
            return Idiom(node, (args[0],), args[1])
    return None


def match_pad_amount(node: ast.AST) -> Idiom | None:
    """The pad that rounds ``n`` up to a multiple of ``m``: ``(m - n % m) % m``,
    ``(-n) % m`` and the off-by-one-prone ``m - n % m``."""
    if not isinstance(node, ast.BinOp):
        return None
    if isinstance(node.op, ast.Mod):
        left, unit = node.left, node.right
        if isinstance(left, ast.UnaryOp) and isinstance(left.op, ast.USub):
            return Idiom(node, (left.operand,), unit)
        if _op(left, ast.Sub) and same(left.left, unit) and _op(left.right, ast.Mod):  # type: ignore[attr-defined]
            if same(left.right.right, unit):  # type: ignore[attr-defined]
                return Idiom(node, (left.right.left,), unit)  # type: ignore[attr-defined]
    elif isinstance(node.op, ast.Sub) and _op(node.right, ast.Mod) and same(node.left, node.right.right):  # type: ignore[attr-defined]
        return Idiom(node, (node.right.left,), node.left)  # type: ignore[attr-defined]
    return None


def padded_operand(values: tuple[ast.expr, ...], imports: Imports) -> str:
    """What a pad rounds, when it is plain: a local's name (``P`` in ``P += -P % m``), ``"size"``
    for a measured size (``x.numel()``, ``x.size(0)``, ``len(x)``, ``x.shape[0]``), else ``""``
    (an expression of several terms, a parameter scaled by a factor...)."""
    if len(values) != 1:
        return ""
    node = _unwrap_int(values[0], imports)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("size", "numel") and len(node.args) <= 1:
            return "size"
        if isinstance(func, ast.Name) and func.id == "len" and len(node.args) == 1:
            return "size"
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return "size"
    return ""


def match_chunk_pad(node: ast.AST, chunk_of: Callable[[str], tuple[ast.expr, ast.expr] | None]) -> Idiom | None:
    """``k * c - n`` where ``c`` was bound to ``ceil(x / k)``: the pad to a multiple of ``k``.

    The zigzag spelling ``c = (T + 2 * cp - 1) // (2 * cp); pad = 2 * cp * c - T``
    pads ``T`` to a multiple of ``2 cp`` in two statements (``x`` may be the padded
    length the chunks are cut from while ``n`` is the sample's own size); ``chunk_of``
    maps a local name to the ``(x, k)`` of the ceil-division it holds.
    """
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
        return None
    product, n = node.left, node.right
    if not _op(product, ast.Mult):
        return None
    factors: list[ast.expr] = []  # left to right
    todo = [product]  # a stack, not a recursive closure (a reference cycle)
    while todo:
        e = todo.pop()
        if _op(e, ast.Mult):
            todo += [e.right, e.left]  # type: ignore[attr-defined]
        else:
            factors.append(e)
    for i, factor in enumerate(factors):
        if not isinstance(factor, ast.Name):
            continue
        bound = chunk_of(factor.id)
        if bound is None:
            continue
        value, unit = bound
        # `pad = 2 * cp * c - T` with `c = ceil(P / (2 * cp))`: the pad that materialises whole CP
        # chunks of the padded length `P` (the sample's own `T` under THD), a pad to a multiple of `2 * cp`.
        rest = factors[:i] + factors[i + 1:]
        unit_factors: list[ast.expr] = []
        if _op(unit, ast.Mult):
            stack = [unit]
            while stack:
                e = stack.pop()
                if _op(e, ast.Mult):
                    stack += [e.left, e.right]  # type: ignore[attr-defined]
                else:
                    unit_factors.append(e)
        else:
            unit_factors = [unit]
        if sorted(map(ast.dump, rest)) == sorted(map(ast.dump, unit_factors)):
            return Idiom(node, (n,), unit)
    return None


def match_max_over(node: ast.AST, imports: Imports) -> ast.expr | None:
    """The collection of ``max(xs)``, ``max(x for ...)``, ``torch.max(xs)``, ``xs.max()``.

    ``max(a, b)`` of two values is not a maximum over a collection.
    """
    if not isinstance(node, ast.Call):
        return None
    args = [a for a in node.args if not isinstance(a, ast.Starred)]
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("max", "amax") and not node.args:
        name = imports.qualify(node.func)
        if name not in ("torch.max", "numpy.max", "numpy.amax", "torch.amax"):
            return node.func.value
    name = imports.qualify(node.func)
    if name in ("max", "torch.max", "numpy.max", "numpy.amax", "torch.amax") and len(args) == 1 and len(node.args) == 1:
        return args[0]
    return None


_FULL = frozenset({"torch.full", "numpy.full"})
_ONES = frozenset({"torch.ones", "numpy.ones"})


def match_broadcast(node: ast.AST, imports: Imports) -> ast.expr | None:
    """The one value of a list giving every entry the same value.

    ``[v] * n``, ``n * [v]``, ``[v for _ in xs]`` (the element ignores the loop
    variable), ``{k: v for k in ks}``, ``torch.full((n,), v)``,
    ``x.new_full((n,), v)``, ``torch.ones(n) * v``, ``dict.fromkeys(ks, v)``,
    ``itertools.repeat(v, n)``, and ``list(...)`` of one of these.
    """
    return _broadcast(node, imports)[0]


def broadcast_count(node: ast.AST, imports: Imports) -> ast.expr | None:
    """How many entries a broadcast (see `match_broadcast`) makes: ``n``, or the iterable ``xs``."""
    return _broadcast(node, imports)[1]


def _broadcast(node: ast.AST, imports: Imports) -> tuple[ast.expr | None, ast.expr | None]:
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, ast.Mult):
            return None, None
        for a, b in ((node.left, node.right), (node.right, node.left)):
            if isinstance(a, ast.List) and len(a.elts) == 1 and not isinstance(a.elts[0], ast.Starred):
                return a.elts[0], b
            if isinstance(a, ast.Call) and (
                imports.qualify(a.func) in _ONES
                or (isinstance(a.func, ast.Attribute) and a.func.attr == "new_ones")
            ):
                return b, a.args[0] if a.args else None
        return None, None
    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
        element = node.value if isinstance(node, ast.DictComp) else node.elt
        bound: set[str] = set()
        for gen in node.generators:
            bound |= names_in(gen.target)
        if names_in(element) & bound:
            return None, None
        return element, node.generators[0].iter
    if isinstance(node, ast.Call):
        name = imports.qualify(node.func) or ""
        tail = last_name(node.func)
        args = positional(node)
        if name in _FULL or tail == "new_full":
            size = keyword(node, "size") or (args[0] if args else None)
            return keyword(node, "fill_value") or (args[1] if len(args) > 1 else None), size
        if tail == "fromkeys" and len(args) == 2:
            return args[1], args[0]
        if tail == "repeat" and name.startswith(("itertools", "repeat")) and args:
            times = keyword(node, "times") or (args[1] if len(args) > 1 else None)
            if times is not None:
                return args[0], times
        if name in ("list", "tuple") and len(args) == 1:
            return _broadcast(args[0], imports)
    return None, None


def is_init_value(node: ast.AST | None) -> bool:
    """``0``, ``-1``, ``None``, ``[]``: a placeholder filled later, not a padded length."""
    if node is None:
        return True
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or value is False or isinstance(value, float):
            return True
        return type(value) is int and value <= 0
    value = int_value(node)
    if value is not None:
        return value <= 0
    if isinstance(node, (ast.List, ast.Dict, ast.Tuple)):
        return not (node.keys if isinstance(node, ast.Dict) else node.elts)
    return False


# --- agreement checks ----------------------------------------------------------

_COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
_DISTINCT = frozenset({"set", "frozenset", "numpy.unique", "torch.unique"})

Agreement = tuple[str, ast.expr]
"""``("agree", xs)``: the entries of ``xs`` are all equal; ``("single", xs)``: ``xs`` has one entry."""


def _side(node: ast.expr, imports: Imports) -> tuple[int, int, ast.expr | None] | None:
    """A comparison operand's value when the entries of a collection agree, and when they do not.

    ``len(set(xs))``: 1 and 2 distinct values; ``min(xs)``/``max(xs)``: 5, then
    4 or 6; ``xs.count(e)``: 3 of 3 entries, then 2; ``len(xs)``: 3 either way;
    a literal: itself.
    """
    literal = int_value(node)
    if literal is not None:
        return literal, literal, None
    if not isinstance(node, ast.Call):
        return None
    args = positional(node)
    if isinstance(node.func, ast.Attribute):
        tail = node.func.attr
        if tail == "count" and len(args) == 1:
            return 3, 2, node.func.value
        inner = node.func.value
        if tail == "numel" and not args and isinstance(inner, ast.Call) and imports.qualify(inner.func) == "torch.unique":
            return (1, 2, positional(inner)[0]) if positional(inner) else None
    if len(args) != 1:
        return None
    name = imports.qualify(node.func)
    if name == "len":
        inner = args[0]
        if isinstance(inner, ast.Call) and imports.qualify(inner.func) in _DISTINCT and len(positional(inner)) == 1:
            return 1, 2, positional(inner)[0]
        return 3, 3, inner
    if name in ("min", "max"):
        return 5, (4 if name == "min" else 6), args[0]
    return None


def _comparison(node: ast.Compare, negated: bool, imports: Imports) -> Agreement | None:
    if len(node.comparators) != 1:
        return None
    compare = _COMPARE.get(type(node.ops[0]))
    left, right = node.left, node.comparators[0]
    if compare is None:
        return None
    # `len(xs) == 1`: one sample per micro-batch (nothing to disagree with).
    for one, other in ((left, right), (right, left)):
        if int_value(other) is not None and isinstance(one, ast.Call) and imports.qualify(one.func) == "len":
            args = positional(one)
            if len(args) == 1 and not (isinstance(args[0], ast.Call) and imports.qualify(args[0].func) in _DISTINCT):
                n = int_value(other)
                a, b = ((1, 2), (n, n)) if one is left else ((n, n), (1, 2))
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


def _all_equal(node: ast.Call, negated: bool, imports: Imports) -> Agreement | None:
    """``all(p == e for p in xs)``, or (negated) ``any(p != e for p in xs)``."""
    args = positional(node)
    if imports.qualify(node.func) != ("any" if negated else "all") or len(args) != 1:
        return None
    gen = args[0]
    if not isinstance(gen, (ast.GeneratorExp, ast.ListComp)) or len(gen.generators) != 1 or gen.generators[0].ifs:
        return None
    target, element = gen.generators[0].target, gen.elt
    if not isinstance(target, ast.Name) or not isinstance(element, ast.Compare) or len(element.comparators) != 1:
        return None
    wanted = ast.NotEq if negated else ast.Eq
    if not isinstance(element.ops[0], wanted):
        return None
    sides = (element.left, element.comparators[0])
    for mine, other in (sides, sides[::-1]):
        if isinstance(mine, ast.Name) and mine.id == target.id and target.id not in names_in(other):
            return "agree", gen.generators[0].iter
    return None


def match_agreement(test: ast.expr, imports: Imports, *, negated: bool = False) -> list[Agreement]:
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
    stack: list[tuple[ast.expr, bool]] = [(test, negated)]
    while stack:
        node, neg = stack.pop()
        if isinstance(node, ast.BoolOp):
            stack += [(v, neg) for v in node.values]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            stack.append((node.operand, not neg))
        elif isinstance(node, ast.Compare):
            found = _comparison(node, neg, imports)
            if found is not None:
                out.append(found)
        elif isinstance(node, ast.Call):
            found = _all_equal(node, neg, imports)
            if found is not None:
                out.append(found)
    return out
