"""Packers that build a row in a local list, or in a comprehension, then store it into a record's field.

`layoutcheck.model.packedrows` reads a packer that concatenates each sample
onto a record's field inside its loop (``pack["ids"] += s["ids"]``). Trainers
more often collect the pieces first and store the result afterwards, which is
the same packing written another way:

* a local list started as a list literal (``rows = []``), filled in a loop
  over the samples from each sample (``rows.append(s["ids"])``,
  ``rows.extend(s["ids"])``, ``rows += s["ids"]``) and stored into a field,
  concatenated (``pack["ids"] = torch.cat(rows)``), or as it is when
  extended; through one local too (``ids = torch.cat(rows)``, then
  ``{"ids": ids, ...}``);
* a comprehension over the samples, concatenated (``torch.cat([s["ids"] for
  s in samples])``): the loop written as one expression.

Each such field is a packed field when the same record (one local filled by
``rec["k"] = ...``, or one dict literal) holds, beside it, where each sample
ends: a local list appended a size of each sample (``lengths.append(len(
s["ids"]))``, ``+= [x.numel()]``, ``cu.append(cu[-1] + x.shape[0])``), or a
comprehension of them (``[len(s["ids"]) for s in samples]``), stored as it
is or converted (``torch.tensor(lengths)``, ``torch.cumsum(...)``). Samples
are "the same" when the loops and comprehensions walk the same expression
(``enumerate`` of it alike). A piece given a leading axis first
(``x.unsqueeze(0)``, ``x[None]``) makes a batch of rows, not a packed row.
Names play no part.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Iterator

from layoutcheck.model.syntax import names_in, own_nodes

__all__ = ["LOCAL_CONCATENATIONS", "local_packs"]

LOCAL_CONCATENATIONS = ("cat(", "concatenate(", ".extend(")
"""A concatenation of pieces (``torch.cat(rows)``, ``np.concatenate(...)``, ``rows.extend(x)``): the lines
whose functions `local_packs` reads (plain searches)."""

_CATS = frozenset({"cat", "concat", "concatenate"})
_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp)
_DEPTH = 4

Packed = tuple[str, int, ast.AST]
"""(field, line, the node that concatenates each sample: an ``append`` / ``extend`` / ``+=`` or a comprehension)."""


def _own(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes under ``node``, not those of functions, classes or lambdas defined inside it."""
    found = own_nodes(node)
    next(found)  # ``node`` itself
    return found


def _walked(node: ast.expr) -> str:
    """What a loop or comprehension walks, ``enumerate(x)`` read as ``x``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate" and node.args:
        node = node.args[0]
    return ast.dump(node)


def _derived(loop: ast.For | ast.AsyncFor) -> set[str]:
    """The loop's target names and the names bound in its body from them, through one another."""
    derived = names_in(loop.target)
    body = [n for stmt in loop.body for n in own_nodes(stmt)]
    for _ in range(2):
        for node in body:
            if isinstance(node, ast.Assign) and names_in(node.value) & derived:
                for target in node.targets:
                    derived |= names_in(target)
    return derived


def _one_entry(value: ast.AST) -> bool:
    return isinstance(value, ast.List) and len(value.elts) == 1 and not isinstance(value.elts[0], ast.Starred)


def _size(node: ast.AST) -> bool:
    """Does ``node`` read a size (``len(x)``, ``x.numel()``, ``x.size(0)``, ``x.shape[0]``): where a sample ends?"""
    for part in own_nodes(node):
        if isinstance(part, ast.Call) and (
                (isinstance(part.func, ast.Name) and part.func.id == "len")
                or (isinstance(part.func, ast.Attribute) and part.func.attr in ("numel", "size"))):
            return True
        if isinstance(part, ast.Subscript) and isinstance(part.value, ast.Attribute) and part.value.attr == "shape":
            return True
    return False


def _leading_axis(node: ast.AST) -> bool:
    """Is ``node`` a sample given a leading axis (``x.unsqueeze(0)``, ``x[None]``, ``x.view(1, -1)``):
    concatenated, a batch of rows rather than one packed row?"""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        first = node.args[0]
        if node.func.attr == "unsqueeze":
            return isinstance(first, ast.Constant) and first.value == 0
        if node.func.attr in ("view", "reshape"):
            return isinstance(first, ast.Constant) and first.value == 1 and len(node.args) > 1
    if isinstance(node, ast.Subscript):
        index = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
        return isinstance(index, ast.Constant) and index.value is None
    return False


Kind = tuple[str, str, ast.AST]
"""(samples walked, ``piece`` / ``boundary`` / ``row`` / ``entry``, node): a sequence per sample, a size
per sample (where each ends), a sample given a leading axis, or another value per sample."""


class _Function:
    """One function's local lists filled per sample, and what the values it stores hold per sample."""

    def __init__(self, nodes: list[ast.AST]) -> None:
        self.lists: set[str] = set()
        self.bound: dict[str, list[ast.expr]] = {}
        for node in nodes:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target, value = node.targets[0], node.value
            pairs = zip(target.elts, value.elts) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(target.elts) == len(value.elts) else [(target, value)]  # `rows, ends = [], []`
            for name, one in pairs:
                if isinstance(name, ast.Name):
                    self.bound.setdefault(name.id, []).append(one)
                    if isinstance(one, ast.List) and all(isinstance(e, ast.Constant) for e in one.elts):
                        self.lists.add(name.id)
        self.filled: dict[str, list[Kind]] = {}
        """Per local list: what each loop over samples puts into it (an ``append`` of a sequence is a
        piece once the list is concatenated)."""
        # only the loops holding a line that grows one of the lists are walked
        growing = sorted(node.lineno for node in nodes if self._grows(node) is not None)  # type: ignore[attr-defined]
        if growing:
            for node in nodes:
                if isinstance(node, (ast.For, ast.AsyncFor)) and _holds(node, growing):
                    self._fill(node)

    def _grows(self, node: ast.AST) -> tuple[str, ast.expr, bool] | None:
        """``(list, value, one entry?)`` when ``node`` grows one of the function's lists."""
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
            if node.target.id in self.lists:
                value = node.value
                return (node.target.id, value.elts[0], True) if _one_entry(value) else (node.target.id, value, False)  # type: ignore[attr-defined]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and not node.keywords \
                and node.func.attr in ("append", "extend") and node.func.value.id in self.lists:
            return node.func.value.id, node.args[0], node.func.attr == "append"
        return None

    def _fill(self, loop: ast.For | ast.AsyncFor) -> None:
        derived = _derived(loop)
        walked = _walked(loop.iter)
        for node in (n for stmt in loop.body for n in own_nodes(stmt)):
            grown = self._grows(node)
            if grown is None:
                continue
            name, value, one = grown
            if not names_in(value) & derived:
                continue
            kind = ("boundary" if _size(value) else "entry") if one else "piece"
            self.filled.setdefault(name, []).append((walked, "row" if _leading_axis(value) else kind, node))

    def _value(self, node: ast.expr) -> ast.expr:
        """``node`` through locals bound once (not the lists filled per sample)."""
        for _ in range(_DEPTH):
            if not isinstance(node, ast.Name) or node.id in self.lists:
                break
            values = self.bound.get(node.id, ())
            if len(values) != 1:
                break
            node = values[0]
        return node

    def kinds(self, node: ast.expr, depth: int = 0) -> list[Kind]:
        """What a stored value holds per sample (`Kind`): a concatenation of pieces is a packed row."""
        node = self._value(node)
        if depth > _DEPTH:
            return []
        if isinstance(node, ast.Name):
            return list(self.filled.get(node.id, ()))
        if isinstance(node, _COMPREHENSIONS):
            generator = node.generators[0]
            if len(node.generators) != 1 or not names_in(node.elt) & names_in(generator.target):
                return []
            kind = "boundary" if _size(node.elt) else "entry"
            return [(_walked(generator.iter), kind, node)]
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            tail = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            inner = self.kinds(node.args[0], depth + 1)
            if tail in _CATS:  # each sample's sequence joined into one row
                return [(w, "piece", n) for w, k, n in inner
                        if k in ("piece", "entry") and not (isinstance(n, _COMPREHENSIONS) and _leading_axis(n.elt))]
            return inner
        return []


def _holds(node: ast.AST, lines: list[int]) -> bool:
    """Does ``node`` span one of ``lines`` (sorted)?"""
    at = bisect_left(lines, node.lineno)  # type: ignore[attr-defined]
    return at < len(lines) and lines[at] <= (node.end_lineno or node.lineno)  # type: ignore[attr-defined]


def _records(nodes: list[ast.AST]) -> Iterator[list[tuple[str, ast.expr]]]:
    """The records the function builds: per local filled by ``rec["k"] = v`` (or started as a dict
    literal), and per other dict literal, its ``(field, value)`` s."""
    by_name: dict[str, list[tuple[str, ast.expr]]] = {}
    named: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
                by_name.setdefault(target.id, []).extend(_entries(node.value))
                named.add(id(node.value))
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                    and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                by_name.setdefault(target.value.id, []).append((target.slice.value, node.value))
    yield from by_name.values()
    for node in nodes:
        if isinstance(node, ast.Dict) and id(node) not in named:
            yield _entries(node)


def _entries(node: ast.Dict) -> list[tuple[str, ast.expr]]:
    return [(k.value, v) for k, v in zip(node.keys, node.values)
            if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def local_packs(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[Packed]:
    """The packed fields of ``function`` built in locals or comprehensions (see the module docs)."""
    nodes = list(_own(function))
    record = size = False
    for node in nodes:  # a record and a size of something, or nothing to find (most functions that join)
        kind = type(node)
        if kind is ast.Dict or (kind is ast.Subscript and type(node.ctx) is ast.Store):  # type: ignore[attr-defined]
            record = True
        elif (kind is ast.Call and (
                (type(node.func) is ast.Name and node.func.id == "len")  # type: ignore[attr-defined]
                or (type(node.func) is ast.Attribute and node.func.attr in ("numel", "size")))) \
                or (kind is ast.Attribute and node.attr == "shape"):  # type: ignore[attr-defined]
            size = True
    if not (record and size):
        return
    reading = _Function(nodes)
    for built in _records(nodes):
        kinds = [(field, reading.kinds(value)) for field, value in built]
        ends = {w for _, found in kinds for w, k, _ in found if k == "boundary"}
        for field, found in kinds:
            for walked, role, node in found:
                if role == "piece" and walked in ends:
                    yield field, node.lineno, node  # type: ignore[attr-defined]
                    break
