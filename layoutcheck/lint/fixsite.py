"""What a rule's fix reads: one finding's place in a file that libcst parsed, and the names around it.

A fix is computed from the finding's location (its span) and the file's
concrete syntax tree alone, never from the lint model: a rule finds its
node with `FixSite.node`, reads the enclosing function and the names bound
there (`Scope`), and returns text edits (`layoutcheck.lint.edits`) built
from the original text and from nodes libcst renders. This module imports
libcst, so only a run that asks for fixes imports it.

Scope questions are answered conservatively: a name's value is known at a
statement only when one plain assignment reaches it on every path (it sits
in a block that encloses the statement, earlier, and no loop around the
statement rebinds the name); anything else is unknown, and a fix that needs
it is not offered.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper

from layoutcheck.lint.edits import Edit
from layoutcheck.lint.walk import node_positions

if TYPE_CHECKING:
    from layoutcheck.lint.findings import Finding
    from layoutcheck.lint.settings import LintSettings

__all__ = ["Binding", "FixSite", "Scope", "SourceTree", "names_in", "parenthesised", "swap_nodes"]

N = TypeVar("N", bound=cst.CSTNode)

_NEWLINE = re.compile(r"\r\n|\r|\n")
_SUITES = (cst.IndentedBlock, cst.Module)
_LOOPS = (cst.For, cst.While)
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


class SourceTree:
    """One file parsed by libcst, with every node's position and parent (computed once per file)."""

    def __init__(self, source: str, module: cst.Module | None = None) -> None:
        self.source = source
        self.module = module if module is not None else cst.parse_module(source)
        # Read only, so no deep copy; positions by the provider's own pass (`node_positions`) and
        # parents by a walk over `children`: together about 2.5x cheaper than libcst's providers.
        self.positions = node_positions(MetadataWrapper(self.module, unsafe_skip_copy=True))
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [self.module]
        while stack:
            node = stack.pop()
            for child in node.children:
                self.parents[child] = node
                stack.append(child)
        self._line_starts = [0] + [m.end() for m in _NEWLINE.finditer(source)]
        self._by_range: dict[tuple[int, int, int, int], list[cst.CSTNode]] | None = None
        self._scopes: dict[int, Scope] = {}

    # ------------------------------------------------------------ places

    def offset(self, line: int, column: int) -> int:
        """The character offset of 1-based ``line`` and 0-based ``column``."""
        return self._line_starts[line - 1] + column

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        """``node``'s text as offsets, without its own parentheses (libcst's syntactic position)."""
        where = self.positions[node]
        return self.offset(where.start.line, where.start.column), self.offset(where.end.line, where.end.column)

    def text(self, node: cst.CSTNode) -> str:
        """``node``'s text exactly as the file has it (comments and line breaks inside included)."""
        start, end = self.span(node)
        return self.source[start:end]

    def line_start(self, offset: int) -> int:
        """The offset where ``offset``'s line starts."""
        return self._line_starts[bisect_right(self._line_starts, offset) - 1]

    def line_end(self, offset: int) -> int:
        """The offset just past the line break that ends ``offset``'s line (the text's end on the last line)."""
        match = _NEWLINE.search(self.source, offset)
        return match.end() if match else len(self.source)

    def newline(self) -> str:
        return self.module.default_newline

    def indent_at(self, node: cst.CSTNode) -> str | None:
        """The whitespace before ``node`` on its first line, or None when something else precedes it there."""
        start, _ = self.span(node)
        before = self.source[self.line_start(start):start]
        return before if not before.strip() else None

    def render(self, node: cst.CSTNode) -> str:
        """A node libcst built (not from the file), as code, without its own outer parentheses."""
        if getattr(node, "lpar", None):
            node = node.with_changes(lpar=[], rpar=[])  # type: ignore[call-arg]
        return self.module.code_for_node(node)

    # ------------------------------------------------------------ nodes

    def node_at(self, line: int, column: int, end_line: int, end_column: int,
                types: tuple[type[N], ...]) -> N | None:
        """The node of one of ``types`` whose range is exactly the 1-based span, the outermost when several."""
        if self._by_range is None:
            index: dict[tuple[int, int, int, int], list[cst.CSTNode]] = {}
            for node, where in self.positions.items():
                key = (where.start.line, where.start.column, where.end.line, where.end.column)
                index.setdefault(key, []).append(node)
            self._by_range = index
        found = [n for n in self._by_range.get((line, column - 1, end_line, end_column - 1), ())
                 if isinstance(n, types)]
        if not found:
            # `ast` counts a tuple's parentheses as part of it, libcst as the tuple's own `lpar`:
            # accept a node whose range is the span less parentheses and spaces.
            start, end = self.offset(line, column - 1), self.offset(end_line, end_column - 1)
            for node, where in self.positions.items():
                if not isinstance(node, types):
                    continue
                inner_start = self.offset(where.start.line, where.start.column)
                inner_end = self.offset(where.end.line, where.end.column)
                if start <= inner_start and inner_end <= end and (inner_start, inner_end) != (start, end) \
                        and not self.source[start:inner_start].strip(" \t\r\n(") \
                        and not self.source[inner_end:end].strip(" \t\r\n)"):
                    found.append(node)
        if not found:
            return None
        outer = [n for n in found if not any(self.is_inside(n, other) for other in found if other is not n)]
        return outer[0]  # type: ignore[return-value]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def is_inside(self, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
        return any(a is outer for a in self.ancestors(node))

    def statement_of(self, node: cst.CSTNode) -> cst.BaseStatement | None:
        """The statement of a block (a function body, an `if` branch...) that holds ``node``."""
        child = node
        for parent in self.ancestors(node):
            if isinstance(parent, _SUITES) and isinstance(child, cst.BaseStatement):
                return child
            child = parent
        return None

    def scope_node(self, node: cst.CSTNode) -> cst.FunctionDef | cst.Module:
        """The function that holds ``node`` (its own scope), or the module."""
        for parent in self.ancestors(node):
            if isinstance(parent, (cst.FunctionDef, cst.Module)):
                return parent
        return self.module

    def scope(self, node: cst.CSTNode) -> Scope:
        """The bindings of the function (or module) that holds ``node``."""
        owner = self.scope_node(node)
        found = self._scopes.get(id(owner))
        if found is None:
            found = self._scopes[id(owner)] = Scope(self, owner)
        return found

    # ------------------------------------------------------------ edits

    def replace(self, node: cst.CSTNode, content: str) -> Edit:
        start, end = self.span(node)
        return Edit(start, end, content)

    def insert_lines_before(self, statement: cst.BaseStatement, lines: Sequence[str]) -> Edit | None:
        """Insert ``lines`` (code without indentation) before ``statement``, indented as it is.

        None when ``statement`` does not start its line (``if x: y``, ``a; b``).
        """
        indent = self.indent_at(statement)
        if indent is None:
            return None
        start, _ = self.span(statement)
        newline = self.newline()
        text = "".join(f"{indent}{line}{newline}" if line else newline for line in lines)
        return Edit(self.line_start(start), self.line_start(start), text)

    def delete_statement(self, statement: cst.BaseStatement) -> Edit | None:
        """Delete a statement that has its lines to itself (its own-line comments above stay)."""
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        if self.indent_at(statement) is None:
            return None
        start, end = self.span(statement)
        return Edit(self.line_start(start), self.line_end(end), "")


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
            attribute.value.visit(self)
            return False

    node.visit(_Names())
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

    node.visit(_Find())
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
            attribute.value.visit(self)
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            bound.append({p.name.value for p in node.params.params})
            node.body.visit(self)
            bound.pop()
            return False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, _COMPREHENSIONS):
                targets: set[str] = set()
                comp: cst.CompFor | None = node.for_in
                node.for_in.iter.visit(self)  # evaluated outside the comprehension's scope
                while comp is not None:
                    targets |= names_in(comp.target)
                    comp = comp.inner_for_in
                bound.append(targets)
                for part in ("elt", "key", "value"):
                    child = getattr(node, part, None)
                    if child is not None:
                        child.visit(self)
                comp = node.for_in
                while comp is not None:
                    if comp is not node.for_in:
                        comp.iter.visit(self)
                    for condition in comp.ifs:
                        condition.visit(self)
                    comp = comp.inner_for_in
                bound.pop()
                return False
            return super().on_visit(node)

    expr.visit(_Free())
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
                single = len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                for target in node.targets:
                    for name, whole in _target_names(target.target):
                        kind = ("assign" if single else "other") if whole else "mutate"
                        scope._add(name, kind, statement, node.value if kind == "assign" else None)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                statement = tree.statement_of(node) or node
                for name, whole in _target_names(node.target):
                    if whole and node.value is not None and isinstance(node.target, cst.Name):
                        scope._add(name, "assign", statement, node.value)
                    else:
                        scope._add(name, "other" if whole else "mutate", statement)

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                for name, whole in _target_names(node.target):
                    scope._add(name, "other" if whole else "mutate", tree.statement_of(node) or node)

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

            def visit_Global(self, node: cst.Global) -> None:
                scope.declared.update(item.name.value for item in node.names)

            def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
                scope.declared.update(item.name.value for item in node.names)

            def visit_CompFor(self, node: cst.CompFor) -> bool:
                node.iter.visit(self)  # the targets are the comprehension's own
                return False

        body.visit(_Stores())
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
        statement = self.tree.statement_of(node) if not isinstance(node, cst.BaseStatement) else node
        if statement is None:
            return False
        suite = self.tree.parent(statement)
        return suite is not None and (suite is self.tree.parent(at) or self.tree.is_inside(at, suite))

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


@dataclass
class FixSite:
    """One finding in one parsed file: what a rule's ``fix`` method receives."""

    tree: SourceTree
    finding: Finding
    settings: LintSettings

    def node(self, *types: type[N]) -> N | None:
        """The node of one of ``types`` exactly at the finding's span."""
        f = self.finding
        return self.tree.node_at(f.line, f.column, f.end_line, f.end_column, types or (cst.CSTNode,))  # type: ignore[arg-type]
