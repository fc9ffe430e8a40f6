"""What a function's body does with each name and field: evidence of its space, by use.

`Flow` classifies an expression from what it is computed from, walking in
source order; a value's *use* often comes later (``tokens`` is sized in a
comprehension three lines after it is bound, a parameter is rounded up at the
end). `body_uses` reads a function body once before the walk and returns, per
local name and per field (``d["k"]``, ``obj.k``), the `Tag` flags its uses
show, with the line that showed each first:

* ``TOK`` (per-sample tensors): iterated with each element sized (``t.size(0)``,
  ``t.numel()``, ``len(t)``, ``t.shape``) or padded (``F.pad(t, ...)``), or
  concatenated, stacked or padded as a list (``torch.cat(xs)``, ``pad_sequence(xs)``);
* ``SEQ`` (lengths): fed to a cumulative sum (``torch.cumsum``, ``x.cumsum(0)``,
  ``itertools.accumulate``, also as ``[0] + xs``), iterated with each element
  used as a tensor extent (``torch.arange(n)``) or rounded up to a unit;
  a bare name rounded up to a unit is a length too;
* ``UNIT`` (an alignment unit): the multiple ``m`` of a round-up, a pad
  amount or a ceil-division;
* ``CP`` (the context-parallel size and rank): the ``k`` and ``r`` of a zigzag
  split, ``(2 * k - r - 1) * chunk``, and ``x.chunk(2 * k)[r]``;
* ``PACKED`` (cumulative lengths): a list grown by its own last entry plus a
  length (``offsets.append(offsets[-1] + n)``).

Names are what the code binds; none is looked up in a vocabulary, so a
consistent rename of the code changes nothing here. Nested ``def`` s and
classes are their own functions and are not read.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import field
from layoutcheck.records import dataclass

from layoutcheck.model.idioms import match_ceil_div, match_pad_amount, match_round_up
from layoutcheck.model.imports import Imports
from layoutcheck.model.syntax import CHILD_FIELDS, doubled, int_value, last_name, nodes, positional, string_key
from layoutcheck.model.vocabulary import Tag

__all__ = ["EXTERNAL_ATTRIBUTES", "Uses", "body_uses", "carrier", "field_of"]

SEQ, TOK, UNIT, CP, PACKED = int(Tag.SEQ), int(Tag.TOK), int(Tag.UNIT), int(Tag.CP), int(Tag.PACKED)

EXTERNAL_ATTRIBUTES = frozenset({
    "shape", "dtype", "device", "T", "mT", "data", "grad", "ndim", "is_cuda", "real", "imag", "layout",
    "requires_grad", "size", "numel", "item", "tolist",
})
"""Attributes of tensors and containers: reading one is no field of the program's own records."""

_SIZED = frozenset({"size", "numel", "dim", "__len__"})
_STACKERS = frozenset({"cat", "concat", "concatenate", "stack", "vstack", "hstack", "pad_sequence", "nested_tensor"})
_CUMULATIVE = frozenset({"cumsum", "accumulate", "cumulative_sum"})
_EXTENTS = frozenset({"arange", "ones", "zeros", "empty", "full", "randint", "randn", "rand"})


@dataclass
class Uses:
    """Per name and per field: the `Tag` flags its uses show, and the line of the first."""

    names: dict[str, int] = field(default_factory=dict)
    fields: dict[str, int] = field(default_factory=dict)
    lines: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """``("name"|"field", key, tag) -> line`` of the use that showed it first."""
    hows: dict[tuple[str, str, int], str] = field(default_factory=dict)
    """``("name"|"field", key, tag) -> what that first use did`` (``rounded up to a multiple``), where
    the use says more than its tag."""
    unit_atoms: set[str] = field(default_factory=set)
    """Attribute and field names that are factors of an alignment unit (``args.pad_multiplier``)."""
    own_names: set[str] = field(default_factory=set)
    """The names (`ast.Name`, read or bound) of the body outside its nested scopes, gathered on the
    same walk: `mentions` answers from them, so the unused parameters cost no walk of their own."""
    scopes: list[ast.AST] = field(default_factory=list)
    """The nested functions, classes and lambdas the walk left out."""
    appended: list[tuple[str, bool, str, int]] = field(default_factory=list)
    """Appends of a local to a list or a list's last row: (the list, a row?, the local, line), judged by
    the local's binding once the walk is done (`_hoisted_sums`)."""
    _nested_names: set[str] | None = None

    def mentions(self, name: str) -> bool:
        """Does the body mention ``name`` anywhere, its nested scopes included?"""
        if name in self.own_names:
            return True
        if self._nested_names is None:  # walked once asked (a nested function's listing is kept on it: `nodes`)
            self._nested_names = {
                part.id  # type: ignore[attr-defined]
                for scope in self.scopes for part in nodes(scope) if type(part) is ast.Name
            }
        return name in self._nested_names

    def add(self, kind: str, key: str, tag: int, line: int, how: str = "") -> None:
        table = self.names if kind == "name" else self.fields
        if not table.get(key, 0) & tag:
            table[key] = table.get(key, 0) | tag
            self.lines[(kind, key, tag)] = line
            if how:
                self.hows[(kind, key, tag)] = how


def field_of(node: ast.AST) -> str | None:
    """The field ``node`` reads: ``d["k"]``, ``d.get("k")``, ``obj.k`` (not a tensor's ``.shape``)."""
    if isinstance(node, ast.Subscript):
        return string_key(node)
    if isinstance(node, ast.Attribute) and node.attr not in EXTERNAL_ATTRIBUTES:
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop"):
        args = positional(node)
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            return args[0].value
    return None


def carrier(node: ast.AST) -> tuple[str, str] | None:
    """``("name", x)`` for a bare name, ``("field", k)`` for a field read, else None."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
        "to", "cuda", "cpu", "long", "int", "float", "contiguous", "clone", "detach", "tolist", "numpy",
    ):
        node = node.func.value
    if isinstance(node, ast.Call) and last_name(node.func) in ("list", "tuple", "tensor", "as_tensor") and node.args:
        node = node.args[0]
    if isinstance(node, ast.Name):
        return "name", node.id
    found = field_of(node)
    return ("field", found) if found is not None else None


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_NESTED_KINDS = frozenset(_NESTED)


def _own_nodes(body: Iterable[ast.stmt], kinds: Collection[type], names: set[str],
               nested: list[ast.AST]) -> Iterator[ast.AST]:
    """Every node of ``body`` of one of the classes ``kinds`` outside nested functions, classes and
    lambdas, in the order of a stack walk over `ast.iter_child_nodes`; on the way, the names met
    go into ``names`` and the nested scopes left out into ``nested``.

    `body_uses` runs it over every function of every file: reading the fields directly, instead of
    through `ast.iter_child_nodes` (two generators per node), and skipping the leaves that never
    count, and yielding only what the caller reads, makes it several times faster. The order
    matters: a use's line is the first one met.
    """
    nested.extend(s for s in body if isinstance(s, _NESTED))
    stack: list[ast.AST] = [s for s in body if not isinstance(s, _NESTED)]
    push, add_name, add_nested = stack.append, names.add, nested.append
    name_class, constant_class, scopes, table = ast.Name, ast.Constant, _NESTED_KINDS, CHILD_FIELDS
    while stack:
        node = stack.pop()
        kind = type(node)  # `ast.parse` builds no subclasses: one look-up, not a chain of isinstance
        if kind in kinds:
            yield node
        # The leaves are read where they are met, never pushed: a name is noted, a constant (with the
        # names, a third of the nodes) skipped.
        for name in table[kind]:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    child = type(item)
                    if child is name_class:
                        add_name(item.id)
                    elif child is constant_class:
                        pass
                    elif child in scopes:
                        add_nested(item)
                    elif item is not None:  # a node (`CHILD_FIELDS` lists hold nodes, or None)
                        push(item)
            else:
                child = type(value)
                if child is name_class:
                    add_name(value.id)  # type: ignore[union-attr]
                elif child is constant_class:
                    pass
                elif child in scopes:
                    add_nested(value)  # type: ignore[arg-type]
                elif value is not None:  # a node: the fields of `CHILD_FIELDS` hold no other value
                    push(value)


def _element_uses(node: ast.AST, imports: Imports) -> dict[str, int]:
    """In ``node``: names sized or padded (-> TOK of what they iterate) or used as an extent or
    rounded up (-> SEQ)."""
    out: dict[str, int] = {}
    for part in nodes(node):
        if isinstance(part, ast.BinOp):
            idiom = match_round_up(part, imports) or match_pad_amount(part) or match_ceil_div(part, imports)
            if idiom is not None:
                for value in idiom.values:
                    if isinstance(value, ast.Name):
                        out[value.id] = out.get(value.id, 0) | SEQ
        if isinstance(part, ast.Call):
            func = part.func
            tail = last_name(func) or ""
            if isinstance(func, ast.Attribute) and tail in _SIZED and isinstance(func.value, ast.Name):
                out[func.value.id] = out.get(func.value.id, 0) | TOK
            elif tail == "len" and isinstance(func, ast.Name) and part.args and isinstance(part.args[0], ast.Name):
                out[part.args[0].id] = out.get(part.args[0].id, 0) | TOK
            elif tail == "pad" and part.args and isinstance(part.args[0], ast.Name):
                out[part.args[0].id] = out.get(part.args[0].id, 0) | TOK
            elif tail in _EXTENTS and isinstance(func, ast.Attribute):
                for arg in part.args:
                    if isinstance(arg, ast.Name):
                        out[arg.id] = out.get(arg.id, 0) | SEQ
        elif isinstance(part, ast.Attribute) and part.attr == "shape" and isinstance(part.value, ast.Name):
            out[part.value.id] = out.get(part.value.id, 0) | TOK
    return out


def _iterated(target: ast.AST, iterable: ast.AST) -> list[tuple[str, ast.AST]]:
    """(loop variable, the collection it walks) pairs of a ``for`` target over ``iterable``."""
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
        if iterable.func.id == "enumerate" and iterable.args and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            return _iterated(target.elts[1], iterable.args[0])
        if iterable.func.id == "zip" and isinstance(target, ast.Tuple) and len(target.elts) == len(iterable.args):
            out = []
            for t, a in zip(target.elts, iterable.args):
                out += _iterated(t, a)
            return out
    if isinstance(target, ast.Name):
        return [(target.id, iterable)]
    return []


def _zigzag(node: ast.BinOp) -> tuple[str, str] | None:
    """``(k, r)`` of ``2 * k - r - 1`` / ``2 * k - 1 - r``: the second zigzag chunk's index."""
    terms: list[tuple[int, ast.expr]] = []  # the signed terms, left to right
    todo: list[tuple[int, ast.expr]] = [(1, node)]  # a stack, not a recursive closure (a reference cycle)
    while todo:
        sign, e = todo.pop()
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            todo.append((sign if isinstance(e.op, ast.Add) else -sign, e.right))
            todo.append((sign, e.left))
        else:
            terms.append((sign, e))
    sizes = [size for s, e in terms if s > 0 and (size := doubled(e)) is not None]
    ranks = [e for s, e in terms if s < 0 and isinstance(e, ast.Name)]
    ones = [e for s, e in terms if s < 0 and int_value(e) == 1]
    if len(sizes) == 1 and len(ranks) == 1 and len(ones) == 1 and len(terms) == 3:
        size = sizes[0]
        if isinstance(size, ast.Name):
            return size.id, ranks[0].id
    return None


def _unit_atoms(unit: ast.AST, uses: Uses, line: int) -> None:
    for part in nodes(unit):
        if isinstance(part, ast.Name):
            uses.add("name", part.id, UNIT, line)
        elif isinstance(part, ast.Attribute) and part.attr not in EXTERNAL_ATTRIBUTES:
            uses.unit_atoms.add(part.attr)
        elif isinstance(part, ast.Subscript):
            key = string_key(part)
            if key is not None:
                uses.unit_atoms.add(key)


_LOOPS = frozenset({ast.For, ast.AsyncFor, ast.comprehension})
_COMPREHENSIONS = frozenset({ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp})
_EVIDENCE = _LOOPS | _COMPREHENSIONS | {ast.Call, ast.BinOp}
"""The node classes `body_uses` reads; the others only lead to them."""


def body_uses(body: Sequence[ast.stmt], imports: Imports) -> Uses:
    """The evidence of use in one function's ``body`` (see the module docs)."""
    uses = Uses()
    for node in _own_nodes(body, _EVIDENCE, uses.own_names, uses.scopes):
        kind = type(node)
        line = getattr(node, "lineno", 0)
        if kind in _LOOPS:
            pairs = _iterated(node.target, node.iter)
            scope: ast.AST = node if not isinstance(node, ast.comprehension) else None  # type: ignore[assignment]
            if pairs:
                if scope is None:
                    # A comprehension: its element and conditions are in the enclosing expression,
                    # read below from the comprehension node itself.
                    continue
                found: dict[str, int] = {}
                for statement in node.body:  # type: ignore[attr-defined]
                    for name, tags in _element_uses(statement, imports).items():
                        found[name] = found.get(name, 0) | tags
                _credit(uses, pairs, found, line)
        elif kind in _COMPREHENSIONS:
            element = node.elt if not isinstance(node, ast.DictComp) else node.value
            found = _element_uses(element, imports)
            for gen in node.generators:
                for test in gen.ifs:
                    for name, tags in _element_uses(test, imports).items():
                        found[name] = found.get(name, 0) | tags
            for gen in node.generators:
                _credit(uses, _iterated(gen.target, gen.iter), found, line)
        elif kind is ast.Call:
            _call_uses(node, uses, imports, line)  # type: ignore[arg-type]
        else:  # a binary operation
            idiom = match_round_up(node, imports) or match_pad_amount(node)
            if idiom is not None:
                _unit_atoms(idiom.unit, uses, line)
            idiom = idiom or match_ceil_div(node, imports)
            if idiom is not None:
                for value in idiom.values:
                    if isinstance(value, ast.Name):
                        uses.add("name", value.id, SEQ, line, "rounded up to a multiple or divided into chunks")
            if isinstance(node.op, ast.Sub):
                zig = _zigzag(node)
                if zig is not None:
                    uses.add("name", zig[0], CP, line)
                    uses.add("name", zig[1], CP, line)
    if uses.appended:
        _hoisted_sums(body, uses)
    return uses


def _credit(uses: Uses, pairs: list[tuple[str, ast.AST]], found: dict[str, int], line: int) -> None:
    """Each loop variable's element uses are evidence about the collection it walks."""
    for name, iterable in pairs:
        tags = found.get(name, 0)
        if not tags:
            continue
        where = carrier(iterable)
        if where is not None:
            uses.add(where[0], where[1], tags, line, "what is done with each of its elements")


def _summed(node: ast.AST | None, imports: Imports) -> list[tuple[str, str]]:
    """What a cumulative sum adds up: ``xs`` in ``cumsum(xs)``, ``torch.tensor([0] + xs).cumsum(0)``."""
    if node is None:
        return []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _summed(node.left, imports) + _summed(node.right, imports)
    if isinstance(node, ast.Call):
        name = imports.qualify(node.func) or ""
        if name.split(".", 1)[0] in ("torch", "numpy", "list", "tuple") or name in ("list", "tuple"):
            return [w for a in node.args for w in _summed(a, imports)]
        return []
    if isinstance(node, (ast.List, ast.Tuple)):
        return [w for e in node.elts for w in _summed(e, imports)]
    if isinstance(node, ast.Name) and node.id in imports.aliases:
        return []
    where = carrier(node)
    return [where] if where is not None else []


def _call_uses(node: ast.Call, uses: Uses, imports: Imports, line: int) -> None:
    func = node.func
    tail = last_name(func) or ""
    args = positional(node)
    if tail in _STACKERS and args:
        first = args[0]
        where = carrier(first)
        if where is not None:
            uses.add(where[0], where[1], TOK, line)
    elif tail in _CUMULATIVE:
        method = isinstance(func, ast.Attribute) and not (
            isinstance(func.value, ast.Name) and func.value.id in imports.aliases
        )
        target = func.value if method else (args[0] if args else None)  # type: ignore[union-attr]
        for where in _summed(target, imports):
            uses.add(where[0], where[1], SEQ, line, "fed to a cumulative sum")
    elif tail == "append" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and args:
        # `offsets.append(offsets[-1] + n)`: a running sum, the cumulative lengths of a packed stream.
        own = func.value.id
        if type(args[0]) is ast.Name:
            uses.appended.append((own, False, args[0].id, line))  # judged by its binding, after the walk
        elif _grows(args[0], own, rows=False):
            uses.add("name", own, PACKED, line)
    elif tail == "append" and isinstance(func, ast.Attribute) and _last_row(func.value) is not None and args:
        # `rows[-1].append(rows[-1][-1] + n)`: each row of `rows` a running sum, the cumulative lengths
        # of one packed row (a batch of packed rows: `len(rows)` counts rows, not samples).
        own = _last_row(func.value)
        if type(args[0]) is ast.Name:
            uses.appended.append((own, True, args[0].id, line))  # type: ignore[arg-type]
        elif _grows(args[0], own, rows=True):  # type: ignore[arg-type]
            uses.add("name", own, PACKED, line, _ROWS_GROWN)
    elif len(args) == 2 and (match_round_up(node, imports) or match_ceil_div(node, imports)):
        # A library's round-up helper (`triton.cdiv`, `layoutcheck.geometry.round_up`): its second
        # argument is the unit. The project's own helpers are read from their bodies.
        _unit_atoms(args[1], uses, line)
    if isinstance(func, ast.Attribute) and tail == "chunk" and args:
        size = doubled(args[0])
        if isinstance(size, ast.Name):
            uses.add("name", size.id, CP, line)


_ROWS_GROWN = "each of its rows grown by its own last entry plus a length"


def _grows(value: ast.expr, own: str, *, rows: bool) -> bool:
    """Is ``value`` ``own``'s last entry plus something (``rows``: the last entry of ``own``'s last row)?"""
    for term in _grown_terms(value):
        if type(term) is ast.Subscript and int_value(term.slice) == -1:
            inner = term.value
            if (_last_row(inner) if rows else inner.id if type(inner) is ast.Name else None) == own:
                return True
    return False


def _hoisted_sums(body: Sequence[ast.stmt], uses: Uses) -> None:
    """The appends of a local (``end = offsets[-1] + n``, then ``offsets.append(end)``), judged by the
    local's one binding in the function, as the same append written inline is."""
    bound: dict[str, list[ast.expr]] = {}
    for node in _own_nodes(body, (ast.Assign,), set(), []):
        if len(node.targets) == 1 and type(node.targets[0]) is ast.Name:  # type: ignore[attr-defined]
            bound.setdefault(node.targets[0].id, []).append(node.value)  # type: ignore[attr-defined]
    for own, rows, name, line in uses.appended:
        values = bound.get(name, ())
        if len(values) == 1 and _grows(values[0], own, rows=rows):
            uses.add("name", own, PACKED, line, _ROWS_GROWN if rows else "")


def _grown_terms(value: ast.expr) -> list[ast.expr]:
    """The terms added in a sum that adds something (``last + n``, ``last + n - 1``, ``n + last``):
    the operands of ``+`` and the left side of ``-``, however the sum is grouped; empty when
    ``value`` adds nothing (``last - 1`` is no growth)."""
    terms: list[ast.expr] = []
    added = False
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            added = True
            stack += (node.right, node.left)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            stack.append(node.left)  # what is subtracted is no term the sum grows by
        else:
            terms.append(node)
    return terms if added else []


def _last_row(node: ast.AST) -> str | None:
    """``rows`` of ``rows[-1]``: the last row of a list of rows, else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and int_value(node.slice) == -1:
        return node.value.id
    return None
