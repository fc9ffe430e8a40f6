"""Shared recognisers for the padding rules: names, imports and idioms.

One place for each recogniser, so two rules never disagree about what a
round-up or a maximum over lengths looks like. Everything here is purely
syntactic: no scope or qualified-name metadata (they cost about 9x a parse,
DESIGN.md section 9).

* `Vocabulary`: the settings' name patterns, compiled once per settings,
  answering with `Tag` s (a sequence length, a token tensor, the source...).
* `Imports`: which local names stand for ``torch.nn.functional`` & co.
* Idioms: `match_round_up`, `match_pad_amount`, `match_ceil_div`,
  `match_max_over`, `match_broadcast`; each returns the nodes that play the
  value ``n`` and the unit ``m`` (or the collection, or the broadcast value).

What an expression derives from, followed through local assignments, is
`layoutcheck.lint.flow`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntFlag
from functools import lru_cache
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from layoutcheck.lint.settings import LintSettings

# --- names ---------------------------------------------------------------------

CHECK_PREFIXES = ("check", "assert", "validate", "ensure", "verify")
"""A function named with one of these (``check_uniform(...)``) is a guard, not an owner."""


def _compile(patterns: Sequence[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p.lower())})" for p in patterns), re.IGNORECASE)


@lru_cache(maxsize=64)
def stems(patterns: tuple[str, ...]) -> tuple[str, ...] | None:
    """The longest literal piece of each pattern (lower-case), for text prefilters.

    None when a pattern has no literal piece (it matches anything, so a text
    test cannot rule a file out).
    """
    out = []
    for pattern in patterns:
        piece = max(re.split(r"[*?\[\]]", pattern.lower()), key=len)
        if not piece:
            return None
        out.append(piece)
    return tuple(out)


@lru_cache(maxsize=8)
def lowered(source: str) -> str:
    """``source.lower()``, shared by the prefilters of every rule (str hashes are cached)."""
    return source.lower()


def text_mentions(source: str, patterns: Sequence[str]) -> bool:
    """May ``source`` hold a name matching one of ``patterns``? (cheap, case-insensitive)."""
    pieces = stems(tuple(patterns))
    return pieces is None or any(p in lowered(source) for p in pieces)


class Vocabulary:
    """The settings' names, compiled; answers "what kind of name is this?"."""

    def __init__(self, settings: LintSettings) -> None:
        self.sources = frozenset(settings.sources)
        self.source_singulars = frozenset(s[:-1] for s in settings.sources if s.endswith("s"))
        self.packed = frozenset(settings.packed_sources)
        self.config_roots = frozenset(settings.config_roots)
        self.owner_inputs = frozenset(settings.owner_inputs)
        self._length = _compile(settings.length_names)
        self._token = _compile(settings.token_names)
        self._unit = _compile(settings.pad_multiplier_names)
        self._foreign = _compile(settings.foreign_unit_names)
        self._bucket = _compile(settings.bucket_names)
        self._model = _compile(settings.model_bases)
        self._tags: dict[str, Tag] = {}
        self._buckets: dict[str, bool] = {}

    @staticmethod
    def _match(pattern: re.Pattern[str] | None, name: str) -> bool:
        return pattern is not None and pattern.fullmatch(name) is not None

    def is_token(self, name: str) -> bool:
        return bool(self.tags(name) & Tag.TOK)

    def is_pad_multiplier(self, name: str) -> bool:
        return bool(self.tags(name) & Tag.UNIT)

    def is_bucket(self, name: str) -> bool:
        found = self._buckets.get(name)
        if found is None:
            found = self._buckets[name] = self._match(self._bucket, name)
        return found

    def is_model_base(self, name: str) -> bool:
        return self._match(self._model, name)

    def mentions_source(self, name: str) -> bool:
        """``build_max_seq_lens`` mentions ``max_seq_lens``: such a function produces it."""
        return any(s in name for s in self.sources)

    def tags(self, name: str) -> Tag:
        """What a bare name says about its value, before any local assignment."""
        found = self._tags.get(name)
        if found is None:
            found = Tag.NONE
            if name in self.sources:
                found = Tag.SRC | Tag.SRCLIST
            elif name in self.source_singulars:
                found = Tag.SRC
            else:
                if self._match(self._token, name):
                    found |= Tag.TOK
                if self._match(self._length, name):
                    found |= Tag.SEQ
                if self._match(self._unit, name):
                    found |= Tag.UNIT
                if self._match(self._foreign, name):
                    found |= Tag.FOREIGN
            self._tags[name] = found
        return found


_VOCABULARIES: dict[int, tuple[LintSettings, Vocabulary]] = {}


def vocabulary(settings: LintSettings) -> Vocabulary:
    """The `Vocabulary` of ``settings``, built once per settings object."""
    hit = _VOCABULARIES.get(id(settings))
    if hit is not None and hit[0] is settings:
        return hit[1]
    if len(_VOCABULARIES) > 64:  # settings objects are few; tests make many
        _VOCABULARIES.clear()
    vocab = Vocabulary(settings)
    _VOCABULARIES[id(settings)] = (settings, vocab)
    return vocab


# --- small node helpers --------------------------------------------------------


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
    return _shape(a) == _shape(b)


# --- imports -------------------------------------------------------------------

# Conventional aliases, used when the file never binds the name (a star import,
# a notebook export): `F.pad` is torch's pad in every trainer we have read.
_CONVENTIONAL = {"F": "torch.nn.functional", "np": "numpy", "nn": "torch.nn"}


class Imports:
    """Local names bound by imports, so ``F.pad``, ``Fn.pad`` and ``pad`` all read as torch's."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    @staticmethod
    def _dotted(node: cst.CSTNode) -> str:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            return f"{Imports._dotted(node.value)}.{node.attr.value}"
        return ""

    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = self._dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = dotted
            else:
                top = dotted.split(".")[0]
                self.aliases[top] = top

    def add_import_from(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        module = "." * len(node.relative) + (self._dotted(node.module) if node.module is not None else "")
        for alias in node.names:
            name = self._dotted(alias.name)
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{name}" if module else name

    def qualify(self, node: cst.CSTNode) -> str | None:
        """``torch.nn.functional.pad`` for ``F.pad`` after ``import torch.nn.functional as F``."""
        if isinstance(node, cst.Name):
            return self.aliases.get(node.value) or _CONVENTIONAL.get(node.value, node.value)
        if isinstance(node, cst.Attribute):
            base = self.qualify(node.value)
            return None if base is None else f"{base}.{node.attr.value}"
        return None


# --- idioms --------------------------------------------------------------------


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


# --- tags ----------------------------------------------------------------------


class Tag(IntFlag):
    """What an expression derives from."""

    NONE = 0
    SEQ = 1
    """A sequence length (``T``) or a quantity computed from one."""
    TOK = 2
    """A token tensor or a list of them (their sizes are sequence lengths)."""
    SRC = 4
    """Read from the source (the owner's ``P``): consumers derive geometry from it."""
    SRCLIST = 8
    """The source list itself (every sample's ``P``), not one entry."""
    MAX = 16
    """A maximum over a collection of sequence lengths."""
    PAD = 32
    """A padded length decided by a round-up (already judged where it was computed)."""
    UNIT = 64
    """An alignment unit built from a pad multiplier."""
    FOREIGN = 128
    """A kernel, quantisation, I/O or vision multiple: not the token layout."""
    BCAST = 256
    """A list giving every sample one value (the origin is the broadcast expression)."""
