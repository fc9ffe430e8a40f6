"""Meaning-preserving rewrites of Python files, for the refactoring invariance test.

The refactoring invariance test (`tests/test_refactor_invariance.py`) lints a
project and a rewritten copy and compares the findings: a rule that follows a
value only while it stays inline finds nothing (or something else) on the copy.
The rewrites are the ways real trainers write the same code (issue 28, point 4):

* ``hoist``: every bound of a slice, every index, and every entry of a pad width
  moved into a local on the line before (``s = a - q`` then ``x[s:e]``);
* ``loop``: a list comprehension built by a loop with ``append`` instead (and a
  generator given to ``max``/``min``/``sum``/``list``/``tuple`` the same);
* ``extend``: the same loop growing the list with ``extend``: ``xs.extend([e])``, or
  for a comprehension of several ``for`` s, the first as the loop and the rest
  as ``xs.extend([e for b in B])``;
* ``unloop``: and back, a list built by ``append`` in a loop written as the
  comprehension;
* ``enumerate``: ``for a, b in zip(xs, ys):`` as ``for k, a in enumerate(xs):``
  with ``b = ys[k]`` first in the body;
* ``flag``: a statement that slices or pads put under ``if flag: ... else: pass``
  with ``flag = True`` just before (the side of a truncation picked by a switch);
* ``tuple_return``: a module's function made to return ``(None, value)``, each
  call unpacked (``_, x = f(...)``) or subscripted (``f(...)[1]``).

Each rewrite keeps the meaning of code whose zipped sequences are as long as
each other (what a trainer's co-indexed fields are). It replaces whole lines
(statements alone on their lines, with no suppression comment) and returns the
map from each line of the copy to the line of the original it came from; a
statement rewritten into several lines maps them all to its first line.
Statements are compared by their first line (`anchor`), so a finding that
moves from a slice bound to the local the bound was hoisted into, on the line
before, is the same finding.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["TRANSFORMS", "Rewrite", "anchor", "rewrite"]

_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_PAD_NAMES = frozenset({"pad"})
_LISTING = frozenset({"max", "min", "sum", "list", "tuple", "sorted"})


@dataclass
class Rewrite:
    """A rewritten file: its text, the original line of each of its lines (1-based, index 0 unused),
    and how many sites the rewrite changed (0: the file is unchanged)."""

    text: str
    origin: list[int]
    sites: int
    regions: list[tuple[int, int]] = field(default_factory=list)
    """The original's line spans each replaced (several statements rewritten as one, as a loop
    folded into a comprehension, compare as one: `fold`)."""

    def fold(self, line: int) -> int:
        """``line`` of the original, or the first line of the span it was replaced in."""
        for first, last in self.regions:
            if first <= line <= last:
                return first
        return line


class _Names:
    """Fresh names for one file: none of them appears in its text."""

    def __init__(self, source: str, prefix: str) -> None:
        self.source = source
        self.prefix = prefix
        self.count = 0

    def __call__(self) -> str:
        while True:
            self.count += 1
            name = f"{self.prefix}{self.count}"
            if name not in self.source:
                return name


class _Editor:
    """Whole-line replacements of one file, applied at once; overlapping ones are refused."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.edits: list[tuple[int, int, list[str]]] = []

    def free(self, first: int, last: int) -> bool:
        return all(last < a or first > b for a, b, _ in self.edits)

    def replace(self, first: int, last: int, new: list[str]) -> bool:
        if not self.free(first, last):
            return False
        self.edits.append((first, last, [line if line.endswith("\n") else line + "\n" for line in new]))
        return True

    def owns_lines(self, stmt: ast.stmt) -> bool:
        """Does ``stmt`` start its first line and end its last, with no suppression comment on them?"""
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        head = self.lines[first - 1]
        tail = self.lines[last - 1]
        if head[: stmt.col_offset].strip():
            return False
        rest = tail.encode()[stmt.end_col_offset or 0:].decode(errors="replace").strip()
        if rest and not rest.startswith("#"):
            return False
        text = "".join(self.lines[first - 1:last])
        return "noqa" not in text and "layoutcheck:" not in text and "type: ignore" not in text

    def indent(self, stmt: ast.stmt) -> str:
        line = self.lines[stmt.lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def result(self) -> Rewrite:
        out: list[str] = []
        origin = [0]
        edits = sorted(self.edits)
        line = 1
        for first, last, new in edits:
            while line < first:
                out.append(self.lines[line - 1])
                origin.append(line)
                line += 1
            out.extend(new)
            origin.extend([first] * len(new))
            line = last + 1
        while line <= len(self.lines):
            out.append(self.lines[line - 1])
            origin.append(line)
            line += 1
        return Rewrite("".join(out), origin, len(edits), [(first, last) for first, last, _ in edits])


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _function_statements(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.stmt]]:
    """Every statement inside a function (nested blocks included), with its function."""
    def block(function: ast.AST, body: list[ast.stmt]) -> Iterator[tuple[ast.AST, ast.stmt]]:
        for stmt in body:
            if isinstance(stmt, _FUNCTIONS):
                yield from block(stmt, stmt.body)
                continue
            if isinstance(stmt, ast.ClassDef):
                yield from outside(stmt.body)
                continue
            yield function, stmt
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if inner and isinstance(inner[0], ast.stmt):
                    yield from block(function, inner)
            for handler in getattr(stmt, "handlers", ()):
                yield from block(function, handler.body)
            for case in getattr(stmt, "cases", ()):
                yield from block(function, case.body)

    def outside(body: list[ast.stmt]) -> Iterator[tuple[ast.AST, ast.stmt]]:
        for stmt in body:
            if isinstance(stmt, _FUNCTIONS):
                yield from block(stmt, stmt.body)
            elif isinstance(stmt, ast.ClassDef):
                yield from outside(stmt.body)

    yield from outside(tree.body)


def _safe_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The expression nodes of ``node`` that are evaluated once, unconditionally, in the enclosing
    scope: not inside a lambda or comprehension, an arm of ``a if c else b`` or a later operand of
    ``and``/``or``, and not a walrus, ``await`` or ``yield``."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for child in reversed(list(ast.iter_child_nodes(current))):
            if isinstance(child, _SCOPES + (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
                continue
            if isinstance(current, ast.IfExp) and child is not current.test:
                continue
            if isinstance(current, ast.BoolOp) and child is not current.values[0]:
                continue
            stack.append(child)


def _trivial(node: ast.AST | None) -> bool:
    return node is None or isinstance(node, (ast.Name, ast.Constant, ast.Slice, ast.Starred)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant))


def _unsafe(node: ast.AST) -> bool:
    return any(isinstance(n, _SCOPES + (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) for n in ast.walk(node))


def _replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
    raise ValueError("not a child")


def _statement_lines(indent: str, stmt: ast.stmt) -> list[str]:
    return [indent + line for line in ast.unparse(stmt).splitlines()]


# -- the rewrites --


def _sinks(stmt: ast.stmt) -> list[ast.expr]:
    """The bounds, indices and pad widths of ``stmt`` a hoist moves into locals, outermost first."""
    found: list[ast.expr] = []
    for node in _safe_nodes(stmt):
        if isinstance(node, ast.Subscript):
            index = node.slice
            parts = index.elts if isinstance(index, ast.Tuple) else [index]
            for part in parts:
                if isinstance(part, ast.Slice):
                    found.extend(b for b in (part.lower, part.upper) if not _trivial(b))
                elif not _trivial(part) and not (isinstance(part, ast.Constant)):
                    found.append(part)
        elif isinstance(node, ast.Call):
            func = node.func
            tail = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if tail in _PAD_NAMES and len(node.args) >= 2:
                width = node.args[1]
                if isinstance(width, (ast.Tuple, ast.List)):
                    found.extend(e for e in width.elts if not _trivial(e))
                elif not _trivial(width):
                    found.append(width)
    chosen: list[ast.expr] = []
    for expr in found:
        if _unsafe(expr):
            continue
        if any(expr is not c and any(expr is n for n in ast.walk(c)) for c in chosen):
            continue  # inside one already hoisted
        chosen.append(expr)
    return chosen


def _hoist(tree: ast.Module, editor: _Editor, fresh: _Names) -> None:
    parents = _parents(tree)
    for _, stmt in _function_statements(tree):
        if not isinstance(stmt, _SIMPLE) or not editor.owns_lines(stmt):
            continue
        sinks = _sinks(stmt)
        if not sinks:
            continue
        indent = editor.indent(stmt)
        lines = []
        for expr in sinks:
            name = fresh()
            lines.append(f"{indent}{name} = {ast.unparse(expr)}")
            _replace_child(parents[id(expr)], expr, ast.Name(id=name, ctx=ast.Load()))
        editor.replace(stmt.lineno, stmt.end_lineno or stmt.lineno, lines + _statement_lines(indent, stmt))


def _bound_names(node: ast.AST) -> set[str]:
    return {n.id for gen in getattr(node, "generators", ()) for n in ast.walk(gen.target) if isinstance(n, ast.Name)}


def _loop_lines(indent: str, comp: ast.ListComp | ast.GeneratorExp, into: str, extend: bool = False) -> list[str]:
    lines = []
    depth = indent
    generators = comp.generators[:1] if extend else comp.generators
    for gen in generators:
        lines.append(f"{depth}for {ast.unparse(gen.target)} in {ast.unparse(gen.iter)}:")
        depth += "    "
        for cond in gen.ifs:
            lines.append(f"{depth}if {ast.unparse(cond)}:")
            depth += "    "
    if not extend:
        lines.append(f"{depth}{into}.append({ast.unparse(comp.elt)})")
    elif len(comp.generators) == 1:
        lines.append(f"{depth}{into}.extend([{ast.unparse(comp.elt)}])")
    else:
        inner = ast.ListComp(elt=comp.elt, generators=comp.generators[1:])
        lines.append(f"{depth}{into}.extend({ast.unparse(inner)})")
    return lines


def _extend(tree: ast.Module, editor: _Editor, fresh: _Names) -> None:
    _loop(tree, editor, fresh, extend=True)


def _loop(tree: ast.Module, editor: _Editor, fresh: _Names, extend: bool = False) -> None:
    parents = _parents(tree)
    for function, stmt in _function_statements(tree):
        if not isinstance(stmt, _SIMPLE) or not editor.owns_lines(stmt):
            continue
        comps: list[ast.ListComp | ast.GeneratorExp] = []
        for node in _safe_nodes(stmt):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ListComp):
                    comps.append(child)
                elif isinstance(child, ast.GeneratorExp) and isinstance(node, ast.Call) and node.args == [child] \
                        and isinstance(node.func, ast.Name) and node.func.id in _LISTING:
                    comps.append(child)
        if not comps:
            continue
        everywhere = [n.id for n in ast.walk(function) if isinstance(n, ast.Name)]
        indent = editor.indent(stmt)
        lines: list[str] = []
        keep_statement = True
        for comp in comps:
            bound = _bound_names(comp)
            inside = [n.id for n in ast.walk(comp) if isinstance(n, ast.Name) and n.id in bound]
            # The loop's targets become the function's locals: only when no other code reads them.
            if sum(1 for n in everywhere if n in bound) != len(inside):
                continue
            if any(isinstance(n, _SCOPES) and n is not comp for n in ast.walk(comp)) or _unsafe(comp.elt):
                continue
            if any(gen.is_async for gen in comp.generators):
                continue
            whole = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
                stmt.targets[0], ast.Name) and stmt.value is comp
            into = stmt.targets[0].id if whole else fresh()  # type: ignore[union-attr]
            lines.append(f"{indent}{into} = []")
            lines.extend(_loop_lines(indent, comp, into, extend))
            if whole:
                keep_statement = False
                break
            _replace_child(parents[id(comp)], comp, ast.Name(id=into, ctx=ast.Load()))
        if not lines:
            continue
        body = _statement_lines(indent, stmt) if keep_statement else []
        editor.replace(stmt.lineno, stmt.end_lineno or stmt.lineno, lines + body)


def _unloop(tree: ast.Module, editor: _Editor, fresh: _Names) -> None:
    """``xs = []`` then ``for t in it: xs.append(e)`` (under ``if`` tests at most) as ``xs = [e for t in it if c]``:
    the loop back to the comprehension (the loop's target stays unbound after it: only when no other
    code reads it)."""
    del fresh
    blocks = [(function, block) for function in ast.walk(tree) if isinstance(function, _FUNCTIONS)
              for node in ast.walk(function) if not isinstance(node, ast.ClassDef)
              for block in (getattr(node, "body", None), getattr(node, "orelse", None), getattr(node, "finalbody", None))
              if isinstance(block, list) and block and isinstance(block[0], ast.stmt)]
    for function, body in blocks:
        for first, loop in zip(body, body[1:]):
            if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)
                    and isinstance(first.value, ast.List) and not first.value.elts
                    and isinstance(loop, ast.For) and not loop.orelse and editor.owns_lines(first)):
                continue
            name = first.targets[0].id
            tests: list[ast.expr] = []
            inner = loop.body
            while len(inner) == 1 and isinstance(inner[0], ast.If) and not inner[0].orelse:
                tests.append(inner[0].test)
                inner = inner[0].body
            if len(inner) != 1 or not isinstance(inner[0], ast.Expr):
                continue
            call = inner[0].value
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == name and len(call.args) == 1
                    and not call.keywords):
                continue
            if _unsafe(call.args[0]) or any(_unsafe(t) for t in tests) or _unsafe(loop.iter):
                continue
            targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
            inside = sum(1 for n in ast.walk(loop) if isinstance(n, ast.Name) and n.id in targets)
            everywhere = sum(1 for n in ast.walk(function) if isinstance(n, ast.Name) and n.id in targets)
            if inside != everywhere or name in {n.id for n in ast.walk(loop.iter) if isinstance(n, ast.Name)}:
                continue
            last = loop.end_lineno or loop.lineno
            tail = editor.lines[last - 1].encode()[loop.end_col_offset or 0:].decode(errors="replace").strip()
            if tail and not tail.startswith("#") or any("noqa" in line for line in editor.lines[first.lineno - 1:last]):
                continue
            comp = ast.ListComp(elt=call.args[0], generators=[
                ast.comprehension(target=loop.target, iter=loop.iter, ifs=tests, is_async=0)])
            line = f"{editor.indent(first)}{name} = {ast.unparse(comp)}"
            editor.replace(first.lineno, last, [line])


def _enumerate(tree: ast.Module, editor: _Editor, fresh: _Names) -> None:
    for _, stmt in _function_statements(tree):
        if not isinstance(stmt, ast.For) or not stmt.body:
            continue
        call, target = stmt.iter, stmt.target
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "zip"
                and len(call.args) >= 2 and isinstance(target, ast.Tuple) and len(target.elts) == len(call.args)
                and all(isinstance(e, ast.Name) for e in target.elts)
                and all(isinstance(a, (ast.Name, ast.Attribute, ast.Subscript)) and not _unsafe(a)
                        for a in call.args)
                and all(k.arg == "strict" for k in call.keywords)):
            continue
        head_last = call.end_lineno or stmt.lineno
        if stmt.body[0].lineno <= head_last:
            continue  # the body on the header's line
        tail = editor.lines[head_last - 1].encode()[call.end_col_offset or 0:].decode(errors="replace").strip()
        if not tail.startswith(":") or tail[1:].strip() and not tail[1:].strip().startswith("#") or "noqa" in tail:
            continue
        if editor.lines[stmt.lineno - 1][: stmt.col_offset].strip():
            continue
        index = fresh()
        indent = editor.indent(stmt)
        inner = editor.indent(stmt.body[0])
        first, *rest = call.args
        names = [e.id for e in target.elts]  # type: ignore[attr-defined]
        lines = [f"{indent}{'async ' if isinstance(stmt, ast.AsyncFor) else ''}for {index}, {names[0]} in "
                 f"enumerate({ast.unparse(first)}):"]
        lines += [f"{inner}{name} = {ast.unparse(arg)}[{index}]" for name, arg in zip(names[1:], rest)]
        editor.replace(stmt.lineno, head_last, lines)


def _flag(tree: ast.Module, editor: _Editor, fresh: _Names) -> None:
    for _, stmt in _function_statements(tree):
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)) or not editor.owns_lines(stmt):
            continue
        if not any(isinstance(n, ast.Subscript) and isinstance(n.slice, (ast.Slice, ast.Tuple)) or (
                isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) in _PAD_NAMES)
                for n in ast.walk(stmt)):
            continue
        name = fresh()
        indent = editor.indent(stmt)
        lines = [f"{indent}{name} = True", f"{indent}if {name}:"]
        lines += _statement_lines(indent + "    ", stmt)
        lines += [f"{indent}else:", f"{indent}    pass"]
        editor.replace(stmt.lineno, stmt.end_lineno or stmt.lineno, lines)


def _tuple_return(tree: ast.Module, editor: _Editor, fresh: _Names) -> None:
    del fresh
    parents = _parents(tree)
    names = [n for n in ast.walk(tree) if isinstance(n, ast.Name)]
    for function in tree.body:
        if not isinstance(function, _FUNCTIONS) or function.decorator_list:
            continue
        name = function.name
        body_nodes = list(ast.walk(function))
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in body_nodes):
            continue
        if not function.body or not isinstance(function.body[-1], (ast.Return, ast.Raise)):
            continue  # it may fall off its end (returns None, not a tuple)
        uses = [n for n in names if n.id == name]
        if not uses or any(not (isinstance(parents.get(id(u)), ast.Call) and parents[id(u)].func is u) for u in uses):
            continue  # passed as a value somewhere: its callers are not all here
        returns = [n for n in body_nodes if isinstance(n, ast.Return)
                   and not any(n in ast.walk(inner) for inner in body_nodes
                               if isinstance(inner, (*_FUNCTIONS, ast.Lambda)) and inner is not function)]
        calls = [parents[id(u)] for u in uses]
        statements: dict[int, ast.stmt] = {}
        for _, stmt in _function_statements(tree):
            for node in ast.walk(stmt):
                if isinstance(node, (ast.Return, ast.Call)) and (node in returns or node in calls):
                    statements.setdefault(id(node), stmt)
        for stmt in tree.body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call) and node in calls:
                    statements.setdefault(id(node), stmt)
        touched = {id(statements[id(n)]): statements[id(n)] for n in (*returns, *calls) if id(n) in statements}
        if len({id(n) for n in (*returns, *calls)} - set(statements)) or not returns:
            continue
        if not all(isinstance(s, (*_SIMPLE,)) and editor.owns_lines(s) for s in touched.values()):
            continue
        if not all(editor.free(s.lineno, s.end_lineno or s.lineno) for s in touched.values()):
            continue
        for ret in returns:
            value = ret.value if ret.value is not None else ast.Constant(None)
            ret.value = ast.Tuple(elts=[ast.Constant(None), value], ctx=ast.Load())
        for call in calls:
            stmt = statements[id(call)]
            if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1 and isinstance(
                    stmt.targets[0], ast.Name):
                stmt.targets[0] = ast.Tuple(elts=[ast.Name(id="_", ctx=ast.Store()), stmt.targets[0]],
                                            ctx=ast.Store())
            else:
                parent = parents[id(call)]
                _replace_child(parent, call, ast.Subscript(value=call, slice=ast.Constant(1), ctx=ast.Load()))
        for stmt in touched.values():
            editor.replace(stmt.lineno, stmt.end_lineno or stmt.lineno, _statement_lines(editor.indent(stmt), stmt))


TRANSFORMS: dict[str, Callable[[ast.Module, _Editor, _Names], None]] = {
    "hoist": _hoist,
    "loop": _loop,
    "extend": _extend,
    "unloop": _unloop,
    "enumerate": _enumerate,
    "flag": _flag,
    "tuple_return": _tuple_return,
}


def rewrite(source: str, transform: str) -> Rewrite:
    """``source`` rewritten by ``transform`` (one of `TRANSFORMS`), every site at once."""
    tree = ast.parse(source)
    editor = _Editor(source)
    TRANSFORMS[transform](tree, editor, _Names(source, {"hoist": "h", "loop": "acc", "extend": "ext", "unloop": "u", "enumerate": "k",
                                                        "flag": "switch", "tuple_return": "r"}[transform]))
    done = editor.result()
    ast.parse(done.text)  # a rewrite that does not parse is this tool's bug
    return done


def anchor(tree: ast.Module, line: int) -> int:
    """The first line of the innermost statement holding ``line`` (``line`` itself outside any)."""
    best: ast.stmt | None = None
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) and child.lineno <= line <= (child.end_lineno or child.lineno):
                if best is None or child.lineno >= best.lineno:
                    best = child
                stack.append(child)
            elif isinstance(child, (ast.excepthandler, ast.match_case)):
                stack.append(child)
    return best.lineno if best is not None else line

