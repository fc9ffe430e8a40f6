"""A collective's list counted one way by its sender and another by its receivers (class 9), read once per module.

``dist.broadcast_object_list(xs, src=...)`` needs ``xs`` as long on every rank:
the sender fills it, each receiver allocates it (``[None] * n``) and gets it
filled. When the function calls the collective on a list that an ``if``/``else``
stores in both branches, one building it (the sender) and the other
allocating it (a receiver), both counts are read as products and quotients of factors,
from what the code does, never from names:

* ``[None] * n`` holds ``n``; ``[f(x) for x in xs for _ in range(k)]`` holds
  ``len(xs) * k``; ``sum([[x] * k for x in xs], [])`` the same;
  ``[xs[i : i + m] for i in range(0, len(xs), m)]``, or a list appended once
  per step of ``for i in range(0, len(xs), m)``, holds ``len(xs) / m``;
* a list returned by a function of the module (a method of the caller's
  class first) is counted in that function, its parameters' attributes read
  as the caller's arguments';
* locals are read through their one assignment (``cfg = self.cfg`` makes
  ``cfg.k`` the attribute ``self.cfg.k``, ``w = world // ring`` a quotient).

`short_receives` then flags a receiver whose count shares a divisor with the
sender's (an attribute of one configuration object: both count the same
micro-batches) but lacks a multiplier the sender's count has, an attribute of
that same object (the samples per prompt): the ranks disagree on the count.
"""

from __future__ import annotations

import ast
from collections import Counter

from layoutcheck.model.syntax import (
    call_arguments, dotted, functions_by_name, int_value, last_name, live, names_in, nodes, own_nodes, receivers,
    switches,
)

__all__ = ["short_receives"]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COLLECTIVES = frozenset({"broadcast_object_list"})
_DEPTH = 6

Factors = tuple[Counter, Counter]
"""A count as factors: the atoms multiplied, and the atoms divided by."""


def _times(a: Factors, b: Factors) -> Factors:
    return a[0] + b[0], a[1] + b[1]


def _over(a: Factors, b: Factors) -> Factors:
    return a[0] + b[1], a[1] + b[0]


def _atom(text: str) -> Factors:
    return Counter([text]), Counter()


_ONE: Factors = (Counter(), Counter())


class _Scope:
    """One function's locals (each read through its one plain assignment) and its appended lists."""

    def __init__(self, function: ast.FunctionDef | ast.AsyncFunctionDef, roots: dict[str, str] | None = None):
        self.function = function
        self.roots = roots or {}
        """Parameters whose attributes are another scope's (a callee's parameter -> the caller's argument)."""
        assigned: dict[str, list[ast.expr]] = {}
        body = function.body
        found: list[dict[str, bool]] = []

        def constants() -> dict[str, bool]:
            if not found:
                found.append(switches(body))
            return found[0]

        self.switches = constants
        self.loops: dict[str, ast.For] = {}
        self.appended: dict[str, ast.expr] = {}
        """What each list of `loops` gets appended per step (the comprehension's element)."""
        self.extended: dict[str, ast.expr] = {}
        """What each list of `loops` is extended with per step (``xs.extend(E)``: ``len(E)`` entries)."""
        for node in own_nodes(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, ast.For):
                # one append per step, not under a condition (a switch set once is no condition)
                for stmt in live(node.body, self.switches):
                    grown = _grown(stmt)
                    if grown is not None:
                        self.loops[grown[0]] = node
                        if grown[2]:
                            self.extended[grown[0]] = grown[1]  # type: ignore[assignment]
                        elif grown[1] is not None:
                            self.appended[grown[0]] = grown[1]
        self.bound = {name: values[-1] for name, values in assigned.items() if len(values) == 1
                      or all(_mentions(v, name) for v in values[1:])}
        """Locals assigned once, or rebound from themselves (``xs = sum([[x] * k for x in xs], [])``):
        the last assignment, whose own mention of the name is the earlier value."""

    def chain(self, node: ast.expr, depth: int) -> str | None:
        """An attribute chain with its root read through locals and parameters: ``cfg.k`` with
        ``cfg = self.cfg`` is ``self.cfg.k``."""
        text = dotted(node)
        if text is None:
            return None
        root, _, rest = text.partition(".")
        if root in self.roots:
            root = self.roots[root]
        elif depth < _DEPTH and root in self.bound and (dotted(self.bound[root]) is not None):
            inner = self.chain(self.bound[root], depth + 1)
            if inner is not None:
                root = inner
        return f"{root}.{rest}" if rest else root

    def value(self, node: ast.expr, depth: int = 0, seen: frozenset[str] = frozenset()) -> Factors:
        """A scalar as factors (anything else is one opaque atom, its text)."""
        if depth > _DEPTH:
            return _atom(ast.unparse(node))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return _times(self.value(node.left, depth + 1, seen), self.value(node.right, depth + 1, seen))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Div)):
            return _over(self.value(node.left, depth + 1, seen), self.value(node.right, depth + 1, seen))
        if int_value(node) == 1:
            return _ONE
        if isinstance(node, ast.Name) and node.id in self.bound and node.id not in seen:
            return self.value(self.bound[node.id], depth + 1, seen | {node.id})
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
                and len(node.args) == 1:
            counted = self.count(node.args[0], depth + 1, seen)
            if counted is not None:
                return counted
        chain = self.chain(node, depth)
        return _atom(chain if chain is not None else ast.unparse(node))

    def count(self, node: ast.expr, depth: int = 0, seen: frozenset[str] = frozenset()) -> Factors | None:
        """How many entries a list holds, as factors; None when the code does not show it."""
        if depth > _DEPTH:
            return None
        if isinstance(node, ast.Name):
            if node.id in seen:
                return _atom(f"len({node.id})")
            if node.id in self.loops:
                steps = self._steps(self.loops[node.id].iter, depth + 1, seen | {node.id})
                if node.id not in self.extended or steps is None:
                    return steps
                each = self.count(self.extended[node.id], depth + 1, seen | {node.id})
                return None if each is None else _times(steps, each)
            if node.id in self.bound:
                return self.count(self.bound[node.id], depth + 1, seen | {node.id})
            return _atom(f"len({self.chain(node, depth) or node.id})")
        if isinstance(node, ast.List):
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return _ONE if len(node.elts) == 1 else _atom(str(len(node.elts)))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for items, times in ((node.left, node.right), (node.right, node.left)):
                if isinstance(items, (ast.List, ast.ListComp)):
                    counted = self.count(items, depth + 1, seen)
                    return None if counted is None else _times(counted, self.value(times, depth + 1, seen))
            return None
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            total = _ONE
            for generator in node.generators:
                if generator.ifs:
                    return None  # a filter: fewer entries, by how many the code does not say
                steps = self._steps(generator.iter, depth + 1, seen)
                if steps is None:
                    return None
                total = _times(total, steps)
            return total
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sum" \
                and len(node.args) == 2 and isinstance(node.args[1], ast.List) and not node.args[1].elts:
            # sum([[x] * k for x in xs], []): each step adds a list of k (the list may be built by a
            # loop's appends instead: the same steps, the same element)
            lists = node.args[0]
            if isinstance(lists, ast.ListComp):
                outer = self.count(ast.ListComp(elt=ast.Constant(0), generators=lists.generators), depth + 1, seen)
                inner = self.count(lists.elt, depth + 1, seen)
            elif isinstance(lists, ast.Name) and lists.id in self.appended and lists.id not in seen:
                outer = self._steps(self.loops[lists.id].iter, depth + 1, seen | {lists.id})
                inner = self.count(self.appended[lists.id], depth + 1, seen | {lists.id})
            else:
                return None
            return None if outer is None or inner is None else _times(outer, inner)
        return None

    def _steps(self, iterable: ast.expr, depth: int, seen: frozenset[str]) -> Factors | None:
        """How many steps a ``for`` over ``iterable`` takes."""
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range" \
                and not iterable.keywords:
            args = iterable.args
            if len(args) == 1:
                return self.value(args[0], depth, seen)
            if len(args) in (2, 3) and int_value(args[0]) == 0:
                steps = self.value(args[1], depth, seen)
                return _over(steps, self.value(args[2], depth, seen)) if len(args) == 3 else steps
            return None
        return self.count(iterable, depth, seen)


def _grown(stmt: ast.stmt) -> tuple[str, ast.expr | None, bool] | None:
    """``xs.append(e)`` or ``xs.extend([e])`` (the same one entry per step): the list, ``e`` (None
    when the call's argument does not show it) and False; ``xs.extend(E)`` of anything else: the list,
    ``E`` and True (``len(E)`` entries per step)."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
            and isinstance(stmt.value.func.value, ast.Name)):
        return None
    call, name = stmt.value, stmt.value.func.value.id
    if call.func.attr == "append":  # type: ignore[union-attr]
        return name, call.args[0] if len(call.args) == 1 else None, False
    if call.func.attr != "extend" or len(call.args) != 1:  # type: ignore[union-attr]
        return None
    grown = call.args[0]
    if isinstance(grown, ast.List) and len(grown.elts) == 1 and not isinstance(grown.elts[0], ast.Starred):
        return name, grown.elts[0], False
    return name, grown, True


def _mentions(node: ast.expr, name: str) -> bool:
    return name in names_in(node)


def _cancel(factors: Factors) -> Factors:
    above, below = factors
    common = above & below
    return above - common, below - common


def _callee(call: ast.Call, function: ast.AST, classes: dict[ast.AST, ast.ClassDef],
            by_name: dict[str, list], receiver: str | None) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The module's ``def`` a call runs: a method of the caller's class for ``self.m()`` (the caller's
    ``receiver``, whatever it is called), else the one function of that name."""
    name = last_name(call.func)
    found = by_name.get(name or "", [])
    if receiver is not None and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == receiver:
        own = [f for f in found if classes.get(f) is classes.get(function) and classes.get(f) is not None]
        if len(own) == 1:
            return own[0]
    return found[0] if len(found) == 1 else None


def _returned(function: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.expr | None:
    """The one value a function returns."""
    values = [n.value for n in own_nodes(function) if isinstance(n, ast.Return) and n.value is not None]
    return values[0] if len(values) == 1 else None


def _sent(value: ast.expr, scope: _Scope, function: ast.AST, classes: dict, by_name: dict,
          methods: tuple[dict[ast.AST, str], dict[ast.AST, str], dict[ast.AST, str]]) -> Factors | None:
    """The sender's count: of the list it builds, or of the list a module function returns (``methods``:
    the module's `receivers`)."""
    if isinstance(value, ast.Call):
        callee = _callee(value, function, classes, by_name, methods[1].get(function))
        if callee is None or callee is function:
            return None
        returned = _returned(callee)
        if returned is None:
            return None
        roots: dict[str, str] = {}
        for name, arg in call_arguments(callee, value, methods).items():
            chain = scope.chain(arg, 0)
            if chain is not None:
                roots[name] = chain
        return _Scope(callee, roots).count(returned)
    return scope.count(value)


def _last_store(branch: list[ast.stmt], name: str) -> ast.expr | None:
    value = None
    for stmt in branch:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and stmt.targets[0].id == name:
            value = stmt.value
    return value


def _collective_lists(branch: list[ast.stmt]) -> set[str]:
    """Lists a branch hands to a collective (its first argument)."""
    found = set()
    for stmt in branch:
        for node in own_nodes(stmt):
            if isinstance(node, ast.Call) and last_name(node.func) in _COLLECTIVES and node.args \
                    and isinstance(node.args[0], ast.Name):
                found.add(node.args[0].id)
    return found


def _allocated(value: ast.expr) -> ast.expr | None:
    """``n`` of a receiver's ``[None] * n``."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        for items, times in ((value.left, value.right), (value.right, value.left)):
            if isinstance(items, ast.List) and len(items.elts) == 1 and isinstance(items.elts[0], ast.Constant) \
                    and items.elts[0].value is None:
                return times
    return None


def _owner(atom: str) -> str | None:
    """The object an attribute chain reads from (``self.cfg`` for ``self.cfg.k``)."""
    return atom.rpartition(".")[0] or None


def short_receives(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """Function node -> (receiver's count, the sender's factor it lacks), see the module docs."""
    functions, by_name = functions_by_name(tree)
    classes: dict[ast.AST, ast.ClassDef] = {}
    for cls in (n for n in nodes(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if isinstance(stmt, _FUNCTIONS):
                classes[stmt] = cls
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    for function in functions:
        scope: _Scope | None = None
        shared = _collective_lists(function.body)
        if not shared:
            continue
        for node in own_nodes(function):
            if not (isinstance(node, ast.If) and node.orelse):
                continue
            for name in sorted(shared):
                stores = (_last_store(node.body, name), _last_store(node.orelse, name))
                if None in stores:
                    continue
                for received, sent in (stores, stores[::-1]):
                    size = _allocated(received)
                    if size is None or _allocated(sent) is not None:
                        continue
                    scope = scope or _Scope(function)
                    sender = _sent(sent, scope, function, classes, by_name, receivers(tree))
                    if sender is None:
                        continue
                    have, per = _cancel(scope.value(size))
                    made, made_per = _cancel(sender)
                    common = {a for a in per & made_per if _owner(a)}
                    owners = {_owner(a) for a in common}
                    missing = sorted(a for a in made if _owner(a) in owners and a not in have)
                    if common and missing:
                        out.setdefault(function, []).append((size, missing[0]))
    return out
