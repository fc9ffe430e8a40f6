"""What a fix knows about names: the bindings of one function and which of them reaches a statement.

Questions are answered conservatively: a name's value is known at a
statement only when one plain assignment reaches it on every path (it sits
in a block that encloses the statement, earlier, and no loop around the
statement rebinds the name); anything else is unknown, and a fix that needs
it is not offered. This module imports libcst: only fix runs load it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from layoutcheck.lint.fixsite import SourceTree
from layoutcheck.lint.walk import visit

__all__ = ["Binding", "Scope", "names_in", "parenthesised", "scope_of", "swap_nodes"]

_SUITES = (cst.IndentedBlock, cst.Module)
_LOOPS = (cst.For, cst.While)
_MUTATORS = frozenset({"append", "extend", "insert", "pop", "remove", "sort", "reverse", "clear", "update",
                       "setdefault", "popitem", "add", "discard", "__setitem__", "__delitem__"})
"""Methods that change a list, dict or set in place: a value read before such a call is not the one after."""


def scope_of(tree: SourceTree, node: cst.CSTNode) -> Scope:
    """The bindings of the function (or module) that holds ``node`` (built once per function)."""
    owner = tree.scope_node(node)
    found = tree.scopes.get(id(owner))
    if not isinstance(found, Scope):
        found = tree.scopes[id(owner)] = Scope(tree, owner)
    return found


@dataclass
class Binding:
    """One place a scope binds ``name``: an assignment, a parameter, a loop target..."""

    name: str
    kind: str
    """``param``; ``assign`` (``name = value``, one target); ``other`` (for/with/except targets,
    unpacking, augmented assignment, imports, nested defs, walrus); ``mutate`` (``name[...] = ``,
    ``name.attr = ``, ``del name[...]``: the value changes, the binding does not)."""
    node: cst.CSTNode
    """The binding node (its statement for an assignment, the parameter for a parameter)."""
    start: int
    value: cst.BaseExpression | None = None


def names_in(node: cst.CSTNode) -> set[str]:
    """Every plain name ``node`` reads or writes (attribute names after a dot excluded)."""
    out: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            out.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            visit(attribute.value, self)
            return False

    visit(node, _Names())
    return out


_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString,
          cst.List, cst.Tuple, cst.Dict, cst.Set, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def _contains(node: cst.CSTNode, wanted: Callable[[cst.CSTNode], bool]) -> bool:
    found = False

    class _Find(cst.CSTVisitor):
        def on_visit(self, child: cst.CSTNode) -> bool:
            nonlocal found
            if wanted(child):
                found = True
            return not found

    visit(node, _Find())
    return found


def _free_names(expr: cst.CSTNode) -> set[str]:
    """The names ``expr`` reads from its scope: not attribute names, not comprehension or lambda variables."""
    out: set[str] = set()
    bound: list[set[str]] = []

    class _Free(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            if not any(name.value in names for names in bound):
                out.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            visit(attribute.value, self)
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            bound.append({p.name.value for p in node.params.params})
            visit(node.body, self)
            bound.pop()
            return False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, _COMPREHENSIONS):
                targets: set[str] = set()
                comp: cst.CompFor | None = node.for_in
                visit(node.for_in.iter, self)  # evaluated outside the comprehension's scope
                while comp is not None:
                    targets |= names_in(comp.target)
                    comp = comp.inner_for_in
                bound.append(targets)
                for part in ("elt", "key", "value"):
                    child = getattr(node, part, None)
                    if child is not None:
                        visit(child, self)
                comp = node.for_in
                while comp is not None:
                    if comp is not node.for_in:
                        visit(comp.iter, self)
                    for condition in comp.ifs:
                        visit(condition, self)
                    comp = comp.inner_for_in
                bound.pop()
                return False
            return super().on_visit(node)

    visit(expr, _Free())
    return out


def parenthesised(value: cst.BaseExpression) -> cst.BaseExpression:
    """``value`` ready to stand where a name stood: in parentheses unless it is an atom."""
    if isinstance(value, _ATOMS) or value.lpar:
        return value
    return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def swap_nodes(root: cst.BaseExpression, nodes: Sequence[cst.CSTNode], by: cst.BaseExpression) -> cst.BaseExpression:
    """``root`` with each of ``nodes`` (matched by identity) replaced by ``by`` (`parenthesised`)."""
    if any(root is n for n in nodes):
        return by
    wanted = {id(n) for n in nodes}
    wrapped = parenthesised(by)

    class _Swap(cst.CSTTransformer):
        def on_leave(self, original, updated):  # type: ignore[no-untyped-def, override]
            return wrapped if id(original) in wanted else updated

    return root.visit(_Swap())  # type: ignore[return-value]


def _substitute(expr: cst.BaseExpression, name: str, value: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` with every free read of ``name`` replaced by ``value`` (parenthesised unless an atom)."""
    if isinstance(expr, cst.Name) and expr.value == name:
        return value
    wrapped = parenthesised(value)

    class _Swap(cst.CSTTransformer):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            return True

        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
            return updated.with_changes(attr=original.attr)  # `x.name` is no read of `name`

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, (cst.Lambda, *_COMPREHENSIONS)) and name in _bound_inside(node):
                return False  # shadowed there: leave it alone
            return True

        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
            return wrapped if original.value == name else updated

    return expr.visit(_Swap())  # type: ignore[return-value]


def _bound_inside(node: cst.CSTNode) -> set[str]:
    if isinstance(node, cst.Lambda):
        return {p.name.value for p in node.params.params}
    out: set[str] = set()
    comp: cst.CompFor | None = node.for_in  # type: ignore[attr-defined]
    while comp is not None:
        out |= names_in(comp.target)
        comp = comp.inner_for_in
    return out


def _target_names(target: cst.CSTNode) -> Iterator[tuple[str, bool]]:
    """(name, whole) for each name a store target writes; ``whole`` False for ``x[...]``/``x.a``."""
    if isinstance(target, cst.Name):
        yield target.value, True
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)
    elif isinstance(target, (cst.Subscript, cst.Attribute)):
        base: cst.BaseExpression = target.value
        while isinstance(base, (cst.Subscript, cst.Attribute)):
            base = base.value
        if isinstance(base, cst.Name):
            yield base.value, False


@dataclass
class Scope:
    """The bindings of one function (or the module), nested scopes left out."""

    tree: SourceTree
    owner: cst.FunctionDef | cst.Module
    bindings: list[Binding] = field(default_factory=list)
    declared: set[str] = field(default_factory=set)
    """Names declared ``global`` or ``nonlocal`` here: their bindings are not all visible."""

    def __post_init__(self) -> None:
        tree = self.tree
        if isinstance(self.owner, cst.FunctionDef):
            params = self.owner.params
            for param in (*params.posonly_params, *params.params, *params.kwonly_params):
                self._add(param.name.value, "param", param)
            for star in (params.star_arg, params.star_kwarg):
                if isinstance(star, cst.Param):
                    self._add(star.name.value, "param", star)
            body: cst.CSTNode = self.owner.body
        else:
            body = self.owner
        scope = self

        class _Stores(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                scope._add(node.name.value, "other", node)
                return False  # its body is its own scope (decorators and defaults are rare places for state)

            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                scope._add(node.name.value, "other", node)
                return False

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

            def visit_Assign(self, node: cst.Assign) -> None:
                statement = tree.statement_of(node) or node
                # A plain assignment is a statement of its own block: not the body of `if c: x = 1`.
                single = len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) \
                    and isinstance(tree.parent(node), cst.SimpleStatementLine)
                for target in node.targets:
                    for name, whole in _target_names(target.target):
                        kind = ("assign" if single else "other") if whole else "mutate"
                        if kind == "assign":
                            scope._add(name, kind, statement, node.value)
                        else:
                            scope._add(name, kind, node)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                statement = tree.statement_of(node) or node
                for name, whole in _target_names(node.target):
                    if whole and node.value is not None and isinstance(node.target, cst.Name) \
                            and isinstance(tree.parent(node), cst.SimpleStatementLine):
                        scope._add(name, "assign", statement, node.value)
                    else:
                        scope._add(name, "other" if whole else "mutate", node)

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                for name, whole in _target_names(node.target):
                    scope._add(name, "other" if whole else "mutate", node)

            def visit_For(self, node: cst.For) -> None:
                for name, whole in _target_names(node.target):
                    scope._add(name, "other" if whole else "mutate", node)

            def visit_WithItem(self, node: cst.WithItem) -> None:
                if node.asname is not None:
                    for name, whole in _target_names(node.asname.name):
                        scope._add(name, "other" if whole else "mutate", node)

            def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
                if node.name is not None and isinstance(node.name.name, cst.Name):
                    scope._add(node.name.name.value, "other", node)

            def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
                for name, _ in _target_names(node.target):
                    scope._add(name, "other", node)

            def visit_Del(self, node: cst.Del) -> None:
                for name, whole in _target_names(node.target):
                    scope._add(name, "other" if whole else "mutate", node)

            def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
                bound = node.asname.name if node.asname is not None else node.name
                while isinstance(bound, cst.Attribute):
                    bound = bound.value
                if isinstance(bound, cst.Name):
                    scope._add(bound.value, "other", node)

            def visit_Call(self, node: cst.Call) -> None:
                # `lengths.append(...)`, `batch.update(...)`: the value changes in place.
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in _MUTATORS:
                    for name, _ in _target_names(node.func):
                        scope._add(name, "mutate", node)

            def visit_Global(self, node: cst.Global) -> None:
                scope.declared.update(item.name.value for item in node.names)

            def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
                scope.declared.update(item.name.value for item in node.names)

            def visit_CompFor(self, node: cst.CompFor) -> bool:
                visit(node.iter, self)  # the targets are the comprehension's own
                return False

        visit(body, _Stores())
        self.bindings.sort(key=lambda b: b.start)

    def _add(self, name: str, kind: str, node: cst.CSTNode, value: cst.BaseExpression | None = None) -> None:
        start = self.tree.span(node)[0] if node in self.tree.positions else 0
        self.bindings.append(Binding(name, kind, node, start, value))

    # ------------------------------------------------------------ questions

    def of(self, name: str) -> list[Binding]:
        return [b for b in self.bindings if b.name == name]

    def _loops_around(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        out = []
        for parent in self.tree.ancestors(node):
            if parent is self.owner:
                break
            if isinstance(parent, _LOOPS):
                out.append(parent)
        return out

    def _encloses(self, binding: Binding, at: cst.BaseStatement) -> bool:
        """Does ``binding`` (earlier in the text) reach ``at`` on every path?"""
        if binding.kind == "param":
            return True
        node = binding.node
        if isinstance(node, (cst.For, cst.With, cst.WithItem, cst.ExceptHandler)):
            # A loop or with target is bound inside its own body only.
            holder = node if not isinstance(node, cst.WithItem) else self.tree.parent(node)
            return holder is not None and self.tree.is_inside(at, holder)
        if any(isinstance(a, cst.SimpleStatementSuite) for a in self._up_to_statement(node)):
            return False  # bound in the body of `if c: x = 1`: only on one path
        statement = self.tree.statement_of(node) if not isinstance(node, cst.BaseStatement) else node
        if statement is None:
            return False
        suite = self.tree.parent(statement)
        return suite is not None and (suite is self.tree.parent(at) or self.tree.is_inside(at, suite))

    def _up_to_statement(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The ancestors of ``node`` below the statement of a block that holds it."""
        for parent in self.tree.ancestors(node):
            if isinstance(parent, _SUITES):
                return
            yield parent

    def reaching(self, name: str, at: cst.BaseStatement) -> Binding | None:
        """The one binding of ``name`` that reaches statement ``at`` on every path, or None.

        None when ``name`` is declared global/nonlocal, unbound here, bound in a
        branch that may not run, or rebound by a loop around ``at``.
        """
        if name in self.declared:
            return None
        start = self.tree.span(at)[0]
        earlier = [b for b in self.of(name) if b.kind != "mutate" and (b.start < start or b.kind == "param")]
        if not earlier:
            return None
        last = earlier[-1]
        if not self._encloses(last, at):
            return None
        for loop in self._loops_around(at):
            if not self.tree.is_inside(last.node, loop) and any(
                b.kind != "param" and self.tree.is_inside(b.node, loop) for b in self.of(name)
            ):
                return None  # the next iteration sees another value
        return last

    def bound_at(self, name: str, at: cst.BaseStatement) -> bool:
        """Is ``name`` certainly bound (to one known binding) at ``at``?"""
        return self.reaching(name, at) is not None

    def inline(self, expr: cst.BaseExpression, at: cst.BaseStatement, wanted: Callable[[cst.CSTNode], bool],
               depth: int = 8) -> tuple[cst.BaseExpression, list[Binding]] | None:
        """``expr`` (read at ``at``) with local names replaced by their values until it holds a node
        ``wanted`` accepts, and the assignments it went through; None when no (or more than one)
        chain of plain assignments leads to one.

        Only names whose one reaching assignment (`reaching`) leads to a wanted node are
        replaced, and only when the names that assignment reads are unchanged from there to
        ``at``: the inlined expression computes, at ``at``, what the chain computed.
        """
        if _contains(expr, wanted):
            return expr, []
        if depth == 0:
            return None
        found: list[tuple[str, Binding, cst.BaseExpression, list[Binding]]] = []
        for name in sorted(_free_names(expr)):
            binding = self.reaching(name, at)
            if binding is None or binding.kind != "assign" or binding.value is None:
                continue
            statement = binding.node
            if not isinstance(statement, cst.BaseStatement):
                continue
            inner = self.inline(binding.value, statement, wanted, depth - 1)
            if inner is None:
                continue
            reads = _free_names(binding.value) - {name}
            if not self.unchanged(reads, self.tree.span(statement)[1], at):
                return None  # a name the assignment read changed before `at`
            found.append((name, binding, inner[0], inner[1]))
        if len(found) != 1:
            return None
        name, binding, value, chain = found[0]
        return _substitute(expr, name, value), [binding, *chain]

    def unchanged(self, names: set[str], after: int, at: cst.BaseStatement) -> bool:
        """No binding or mutation of ``names`` between offset ``after`` and statement ``at``,
        and no loop around ``at`` that changes them."""
        if names & self.declared:
            return False
        start = self.tree.span(at)[0]
        for binding in self.bindings:
            if binding.name in names and binding.kind != "param" and after < binding.start < start:
                return False
        for loop in self._loops_around(at):
            loop_start = self.tree.span(loop)[0]
            if loop_start <= after:
                continue
            if any(b.name in names and b.kind != "param" and self.tree.is_inside(b.node, loop) for b in self.bindings):
                return False
        return True
