"""What a rule's fix reads: one finding's place in a file that libcst parsed, and the names around it.

A fix is computed from the finding's location (its span) and the file's
concrete syntax tree alone, never from the lint model: a rule finds its
node with `FixSite.node`, reads the enclosing function and the names bound
there (`layoutcheck.lint.fixscope`), and returns text edits
(`layoutcheck.lint.edits`) built from the original text and from nodes
libcst renders. This module imports libcst, so only a run that asks for
fixes imports it.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import libcst as cst
from libcst.metadata import MetadataWrapper

from layoutcheck.lint.edits import Edit
from layoutcheck.lint.walk import node_parents, node_positions

if TYPE_CHECKING:
    from layoutcheck.lint.findings import Finding
    from layoutcheck.lint.settings import LintSettings

__all__ = ["FixSite", "SourceTree"]

N = TypeVar("N", bound=cst.CSTNode)

_NEWLINE = re.compile(r"\r\n|\r|\n")
_SUITES = (cst.IndentedBlock, cst.Module)


class SourceTree:
    """One file parsed by libcst, with every node's position and parent (computed once per file)."""

    def __init__(self, source: str, module: cst.Module | None = None) -> None:
        self.source = source
        self.module = module if module is not None else cst.parse_module(source)
        # Read only, so no deep copy; positions by the provider's own pass (`node_positions`) and
        # parents by the nodes' fields (`node_parents`): far cheaper than libcst's providers.
        self.positions = node_positions(MetadataWrapper(self.module, unsafe_skip_copy=True))
        self.parents = node_parents(self.module)
        self._line_starts = [0] + [m.end() for m in _NEWLINE.finditer(source)]
        self._by_range: dict[tuple[int, int, int, int], list[cst.CSTNode]] | None = None
        self.scopes: dict[int, object] = {}
        """Per function (by id), its `layoutcheck.lint.fixscope.Scope`: built once per file."""

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
class FixSite:
    """One finding in one parsed file: what a rule's ``fix`` method receives."""

    tree: SourceTree
    finding: Finding
    settings: LintSettings

    def node(self, *types: type[N]) -> N | None:
        """The node of one of ``types`` exactly at the finding's span."""
        f = self.finding
        return self.tree.node_at(f.line, f.column, f.end_line, f.end_column, types or (cst.CSTNode,))  # type: ignore[arg-type]
