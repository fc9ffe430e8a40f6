"""Small, purely syntactic helpers over the standard library's `ast` nodes.

Reading literals, names and call arguments, comparing two expressions up to
parentheses and whitespace, and `Source`: a file's lines, so a node's span
(1-based line and *character* column, as findings show them) and its text
can be read without another parse. `ast` counts columns in UTF-8 bytes;
`Source` converts them.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain

__all__ = [
    "CHILD_FIELDS", "Source", "argument", "breadth_first", "assigned_before", "assigned_once", "binds_receiver", "call_arguments", "child_fields", "forget_nodes", "nodes_of",
    "children", "defs_with_qualnames", "method_receiver", "receivers", "takes_class", "dotted", "expects_error", "functions_by_name", "index_of", "inline", "int_value", "is_dataloader", "keyword",
    "doubled", "last_name", "line_numbers", "super_callee", "SUPER", "names_in", "nodes", "own_nodes", "own_statements", "param_names", "parts", "positional", "root_name", "same",
    "spanning", "statement_nodes", "string_key", "string_value", "target_name", "walk", "walked_together", "constant_test", "live", "switch_like", "switches",
]

Span = tuple[int, int, int, int]
"""(line, column, end line, end column): 1-based lines and columns, columns in characters."""

_NEWLINE = re.compile(r"\r\n?|\n")


def _any_word(word: str) -> bool:
    """`Source.spells` of non-ASCII lines: any word may be spelled there."""
    return True


_RAISES = frozenset({"raises", "assertRaises", "assertRaisesRegex", "raises_regex"})


class Source:
    """The text of one file, for spans and snippets of its nodes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self._is_ascii = text.isascii()
        self._ascii = [True] * len(self.lines) if self._is_ascii else [line.isascii() for line in self.lines]
        self._starts: list[int] | None = None
        self._spelled: dict[str, bool] = {}

    def spells(self, first: int = 1, last: int | None = None) -> Callable[[str], bool]:
        """Whether lines ``first`` to ``last`` (1-based, as `ast` counts them; None: to the end) may
        hold an identifier or operator spelled as the word asked about: False only when their text
        lacks it. An ASCII identifier in the tree is spelled in the text as it is; a non-ASCII one
        may be a compatibility spelling (``ｐad`` is ``pad`` to the parser), so non-ASCII lines may
        spell anything."""
        begin, end = self._range(first, last)
        if begin < 0:
            return _any_word
        find = self.text.find
        return lambda word: find(word, begin, end) >= 0

    def _range(self, first: int, last: int | None) -> tuple[int, int]:
        """The offsets of lines ``first`` to ``last`` in the text; (-1, -1) when they hold a non-ASCII character."""
        starts = self._starts
        if starts is None:
            # The parser's lines (`\n`, `\r\n`, `\r`), not `splitlines`' (which also splits at `\f`).
            if "\r" in self.text:
                starts = [0, *(m.end() for m in _NEWLINE.finditer(self.text))]
            else:
                starts = [0, *accumulate([len(line) + 1 for line in self.text.split("\n")])]
                starts.pop()  # past the end: no line starts there
            self._starts = starts
        text = self.text
        begin = starts[first - 1] if 0 < first <= len(starts) else 0
        end = starts[last] if last is not None and 0 <= last < len(starts) else len(text)
        if not (self._is_ascii or text[begin:end].isascii()):
            return -1, -1
        return begin, end

    def end_of_line(self, last: int) -> int:
        """The offset just past line ``last`` (1-based, the parser's lines; its line break included)."""
        self._range(1, 1)  # the line starts, once
        starts = self._starts
        assert starts is not None
        return starts[last] if 0 <= last < len(starts) else len(self.text)

    def spelled(self, word: str) -> bool:
        """`spells` over the whole text, asked once per word: False only when no line of the file can
        spell ``word``, so no range of it can either (a gate in front of the per-function `spells`)."""
        found = self._spelled.get(word)
        if found is None:
            found = self._spelled[word] = not self._is_ascii or word in self.text
        return found

    def _column(self, line: int, offset: int) -> int:
        """The 0-based character column of UTF-8 byte ``offset`` on 1-based ``line``."""
        if line < 1 or line > len(self.lines) or self._ascii[line - 1]:
            return offset
        return len(self.lines[line - 1].encode("utf-8")[:offset].decode("utf-8", errors="replace"))

    def span(self, node: ast.AST) -> Span:
        """Where ``node`` is: 1-based lines and columns, the end exclusive (as in ruff's output)."""
        line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            end_col = col
        if self._is_ascii:  # asked for every call recorded: bytes are characters, no line read
            return (line, col + 1, end_line, end_col + 1)
        return (line, self._column(line, col) + 1, end_line, self._column(end_line, end_col) + 1)

    def segment(self, node: ast.AST) -> str:
        """The source text of ``node`` (without its enclosing parentheses)."""
        line, col = node.lineno, node.col_offset  # type: ignore[attr-defined]
        end_line, end_col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
        if end_line is None or end_col is None:
            return ""
        if line == end_line:
            raw = self.lines[line - 1].encode("utf-8") if not self._ascii[line - 1] else None
            if raw is None:
                return self.lines[line - 1][col:end_col]
            return raw[col:end_col].decode("utf-8", errors="replace")
        first = self.lines[line - 1].encode("utf-8")[col:].decode("utf-8", errors="replace")
        middle = self.lines[line:end_line - 1]
        last = self.lines[end_line - 1].encode("utf-8")[:end_col].decode("utf-8", errors="replace")
        return first + "".join(middle) + last

    def snippet(self, node: ast.AST, limit: int = 48) -> str:
        """``node``'s text on one line, shortened for a message."""
        line, end_line = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        if end_line is not None and end_line - line > 1 and node.end_col_offset is not None:  # type: ignore[attr-defined]
            # A node over several lines (a call with its arguments on lines of their own): its first
            # lines are read until they say more than fits. Their text on one line is a prefix of the
            # whole node's (a word cut at a line's end only shortens the last word), so once it is
            # longer than ``limit`` the shortened text is decided.
            text = self.lines[line - 1].encode("utf-8")[node.col_offset:].decode("utf-8", errors="replace")  # type: ignore[attr-defined]
            for row in range(line, end_line - 1):
                if len(text) > limit:
                    short = " ".join(text.split())
                    if len(short) > limit:
                        return short[: limit - 3] + "..."
                text += self.lines[row]
        text = " ".join(self.segment(node).split())
        return text if len(text) <= limit else text[: limit - 3] + "..."


def parts(node: ast.AST) -> Sequence[ast.AST]:
    """The sub-expressions of an expression ``node`` (the fields that hold expressions)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return ()
    if isinstance(node, ast.Attribute):
        return (node.value,)
    if isinstance(node, ast.Call):
        return (node.func, *node.args, *(k.value for k in node.keywords))
    if isinstance(node, ast.BinOp):
        return (node.left, node.right)
    if isinstance(node, ast.BoolOp):
        return node.values
    if isinstance(node, ast.UnaryOp):
        return (node.operand,)
    if isinstance(node, ast.Compare):
        return (node.left, *node.comparators)
    if isinstance(node, ast.Subscript):
        return (node.value, node.slice)
    if isinstance(node, ast.Slice):
        return [p for p in (node.lower, node.upper, node.step) if p is not None]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return node.elts
    if isinstance(node, ast.IfExp):
        return (node.test, node.body, node.orelse)
    if isinstance(node, ast.Starred):
        return (node.value,)
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        out: list[ast.AST] = [node.elt]
        for gen in node.generators:
            out += [gen.target, gen.iter, *gen.ifs]
        return out
    if isinstance(node, ast.DictComp):
        out = [node.key, node.value]
        for gen in node.generators:
            out += [gen.target, gen.iter, *gen.ifs]
        return out
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if k is not None] + node.values
    if isinstance(node, ast.NamedExpr):
        return (node.target, node.value)
    if isinstance(node, ast.JoinedStr):
        return node.values
    if isinstance(node, ast.FormattedValue):
        return (node.value,)
    if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
        return (node.value,) if node.value is not None else ()
    if isinstance(node, ast.Lambda):
        return (node.body,)
    return [c for c in children(node) if isinstance(c, ast.expr)]


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every expression node under ``node`` (itself included), depth first, in source order."""
    stack = [node]
    name, constant = ast.Name, ast.Constant
    while stack:
        current = stack.pop()
        yield current
        kind = type(current)
        if kind is not name and kind is not constant:  # the leaves (`parts` gives them none), without a call
            stack.extend(reversed(parts(current)))


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_SCOPE_KINDS = frozenset(_SCOPES)
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
_SCALAR_FIELDS = frozenset({
    "id", "attr", "arg", "name", "asname", "module", "level", "conversion", "is_async", "simple", "type_comment",
    "kind", "rest", "kwd_attrs", "tag", "lineno",
})
"""Fields that hold a string, a number or None in every node class that has them (``Name.id``,
``alias.name``, ``ImportFrom.level``): never a child node."""
_SCALAR_ONLY = {
    ast.Constant: ("value",), ast.MatchSingleton: ("value",), ast.Global: ("names",), ast.Nonlocal: ("names",),
}
"""Fields that hold no node in these classes alone (``Import.names`` holds nodes, ``Global.names`` strings)."""


class _ChildFields(dict):  # type: ignore[type-arg]
    """Node class -> `child_fields`, filled on first look-up (a subscript, not a call, per node)."""

    def __missing__(self, kind: type) -> tuple[str, ...]:
        scalar = _SCALAR_ONLY.get(kind, ())
        names = self[kind] = tuple(
            f for f in kind._fields  # type: ignore[attr-defined]
            if f not in _LEAF_FIELDS and f not in _SCALAR_FIELDS and f not in scalar
        )
        return names


CHILD_FIELDS: dict[type, tuple[str, ...]] = _ChildFields()
"""`child_fields` as a table, for the walks that look it up once per node."""


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of node class ``kind`` that may hold child nodes, the load/store contexts and the
    operators left out (nodes with no children that no reader of the model looks for), and the
    fields that only ever hold a string or a number (a name's ``id``: no look-up spent on them)."""
    return CHILD_FIELDS[kind]


def children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes` as a list, without the contexts and operators (see `nodes`)."""
    out: list[ast.AST] = []
    for name in CHILD_FIELDS[type(node)]:
        value = getattr(node, name, None)
        if type(value) is list:
            out.extend([item for item in value if isinstance(item, ast.AST)])
        elif isinstance(value, ast.AST):
            out.append(value)
    return out


_WHOLE = frozenset({ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_MEMO = "_layoutcheck_nodes"


def nodes(node: ast.AST) -> Iterable[ast.AST]:
    """`ast.walk` (breadth first, ``node`` included), without the contexts and operators.

    The per-file walk reads each function's nodes a dozen times (one check after another), so
    those of a module, class or function are listed once and kept on the node itself: the
    list lives and dies with its tree, which nothing in the model changes once parsed. It
    holds the nodes below, not the node itself: a node listing itself would be a reference
    cycle, and its whole tree would wait for the cyclic collector instead of going when the
    last reference does. Reading the fields directly instead of through `ast.iter_child_nodes`
    (two generators per node), and skipping the leaves (a third of the nodes), makes a walk
    about twice as fast besides.
    """
    if type(node) not in _WHOLE:
        return _walk(node)
    below = node.__dict__.get(_MEMO)
    if below is None:
        below = node.__dict__[_MEMO] = _listed(node)
    return chain((node,), below)


def _listed(node: ast.AST) -> list[ast.AST]:
    """`_walk` of ``node`` as a list, ``node`` left out: the same breadth-first order (the list is its own
    queue: each node's children appended as it is reached), with no generator resumed per node."""
    out: list[ast.AST] = []
    append, extend = out.append, out.extend
    table, node_class = CHILD_FIELDS, ast.AST
    current = node
    at = 0
    while True:
        for name in table[type(current)]:
            value = getattr(current, name, None)
            if type(value) is list:
                if None in value:  # (see `_walk`)
                    extend([item for item in value if item is not None])
                else:
                    extend(value)
            elif isinstance(value, node_class):
                append(value)
        if at == len(out):
            return out
        current = out[at]
        at += 1


def breadth_first(node: ast.AST) -> Iterator[ast.AST]:
    """`nodes` without its memo: for a tree that is about to be rewritten (`layoutcheck.model.calls`),
    whose list of nodes would go stale."""
    return _walk(node)


def forget_nodes(node: ast.AST) -> None:
    """Drop the lists `nodes` and `nodes_of` keep on ``node``: its tree was rewritten
    (`layoutcheck.model.calls`), and they would go stale."""
    node.__dict__.pop(_MEMO, None)
    node.__dict__.pop(_BY_TYPE, None)
    node.__dict__.pop(_RECEIVERS, None)


_BY_TYPE = "_layoutcheck_by_type"


def nodes_of(module: ast.Module, kind: type[ast.AST]) -> list[ast.AST]:
    """The nodes of class ``kind`` among `nodes` of ``module`` (in its order), ``module`` excluded.

    The module-wide readers each look for a few kinds of node (calls, loops, subscripts) in the
    whole module: one pass sorts its nodes by class and each reader reads only its kinds, not the
    ~15,000 nodes of a large module each. Kept on the module, as `nodes` keeps its list. The
    classes are exact: nothing subclasses `ast`'s node classes.
    """
    index = module.__dict__.get(_BY_TYPE)
    if index is None:
        index = {}
        below = iter(nodes(module))
        next(below)  # the module itself
        for node in below:
            found = index.get(type(node))
            if found is None:
                index[type(node)] = [node]
            else:
                found.append(node)
        module.__dict__[_BY_TYPE] = index
    return index.get(kind, [])


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    # `children` inlined (a call per node, and none at all for the leaves: a third of the nodes).
    todo = deque((node,))
    pop, push, extend = todo.popleft, todo.append, todo.extend
    table, node_class = CHILD_FIELDS, ast.AST
    while todo:
        current = pop()
        for name in table[type(current)]:
            value = getattr(current, name, None)
            if type(value) is list:
                # A list field of `CHILD_FIELDS` holds nodes, and None only where a dict's key or a
                # keyword-only default is missing: the list is taken whole unless it holds None (a
                # search in C), not tested item by item (a quarter of the walk).
                if None in value:
                    extend([item for item in value if item is not None])
                else:
                    extend(value)
            elif isinstance(value, node_class):
                push(value)
        yield current


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


class _BlockFields(dict):  # type: ignore[type-arg]
    """Node class -> its fields that hold statements (or the handlers and cases around them), in
    ``_fields`` order; filled on first look-up."""

    def __missing__(self, kind: type) -> tuple[str, ...]:
        names = self[kind] = tuple(f for f in kind._fields if f in _BLOCK_FIELDS)  # type: ignore[attr-defined]
        return names


_BLOCKS: dict[type, tuple[str, ...]] = _BlockFields()


def statement_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """`nodes` of a module, class or function less every node inside an expression: its statements,
    except handlers and match cases, in `nodes`' order (breadth first), ``node`` first. Every
    statement's parent is one of these, so leaving the expressions out keeps their order, at a
    fraction of the cost for a reader that looks at statements only."""
    todo = deque((node,))
    pop, extend, table = todo.popleft, todo.extend, _BLOCKS
    while todo:
        current = pop()
        kind = type(current)
        if kind is not ast.Expr and kind is not ast.Assign and kind is not ast.Return:  # no block (the commonest)
            for name in table[kind]:
                value = getattr(current, name, None)
                if type(value) is list and value and isinstance(value[0], _STATEMENT_KINDS):
                    extend(value)
        yield current


_STATEMENT_KINDS = (ast.stmt, ast.excepthandler, ast.match_case)


def own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and every node under it (depth first, in source order), nested functions, classes and
    lambdas left out (their own scopes), and the contexts and operators too."""
    stack = [node]
    table, node_class, scopes = CHILD_FIELDS, ast.AST, _SCOPE_KINDS
    while stack:
        current = stack.pop()
        yield current
        fields = table[type(current)]
        if not fields:
            continue  # a leaf
        children: list[ast.AST] = []
        for name in fields:
            value = getattr(current, name, None)
            if type(value) is list:
                children.extend([item for item in value if isinstance(item, node_class) and type(item) not in scopes])
            elif isinstance(value, node_class) and type(value) not in scopes:
                children.append(value)
        children.reverse()
        stack.extend(children)


def is_dataloader(node: ast.AST) -> bool:
    """``DataLoader(...)`` / ``data.DataLoader(...)``: the loader whose ``collate_fn`` the project follows."""
    if type(node) is not ast.Call:
        return False
    func = node.func  # type: ignore[attr-defined]
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) == "DataLoader"


def own_statements(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.stmt]:
    """The statements of a function, nested blocks included, nested ``def`` and ``class`` statements yielded
    but their bodies left out (no expression is visited: cheaper than `own_nodes`)."""
    stack: list[ast.stmt] = list(function.body)
    while stack:
        stmt = stack.pop()
        yield stmt
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            stack.extend(getattr(stmt, field, ()))
        for handler in getattr(stmt, "handlers", ()):
            stack.extend(handler.body)
        for case in getattr(stmt, "cases", ()):
            stack.extend(case.body)


def line_numbers(text: str, offsets: Iterable[int]) -> list[int]:
    """The 1-based line of each offset into ``text``, in ascending order of the offsets: counted from
    one offset to the next, not each from the start (a module with many matches is read once)."""
    out: list[int] = []
    line, last = 1, 0
    for at in sorted(offsets):
        line += text.count("\n", last, at)
        last = at
        out.append(line)
    return out


def param_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """A function's parameter names in order (positional-only, positional, keyword-only)."""
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def names_in(node: ast.AST) -> set[str]:
    """Every bare name used under ``node``."""
    return {n.id for n in walk(node) if isinstance(n, ast.Name)}


def int_value(node: ast.AST | None) -> int | None:
    """The value of an int literal (``128``, ``-1``, ``1_024``), else None (``True`` is not an int here)."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value if type(value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = int_value(node.operand)
        return None if inner is None else -inner
    return None


def string_value(node: ast.AST | None) -> str | None:
    """The text of a string literal (``"tokens"``); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def string_key(node: ast.Subscript) -> str | None:
    """``"tokens"`` for ``batch["tokens"]``; None for any other subscript."""
    return string_value(node.slice)


def index_of(node: ast.Subscript) -> ast.expr | None:
    """The index expression of ``x[i]`` (one index, not a slice, a tuple or a key)."""
    part = node.slice
    if isinstance(part, (ast.Slice, ast.Tuple)) or string_value(part) is not None:
        return None
    return part


def last_name(node: ast.AST) -> str | None:
    """``get_batch`` for ``get_batch``, ``data.get_batch`` and ``self.data.get_batch``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def root_name(node: ast.AST) -> str | None:
    """``batch`` for ``batch``, ``batch.x`` and ``batch["x"][0]``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def doubled(node: ast.AST) -> ast.expr | None:
    """``c`` of ``2 * c`` or ``c * 2`` with ``c`` not a literal: a zigzag split's factor (two chunks per
    rank), else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        if int_value(node.left) == 2 and int_value(node.right) is None:
            return node.right
        if int_value(node.right) == 2 and int_value(node.left) is None:
            return node.left
    return None


SUPER = "super("
"""How a call through ``super()`` is spelt (`super_callee`): ``super().m``, ``super(Cls).m``."""


def super_callee(node: ast.AST) -> str | None:
    """``super().m`` for the method ``super().m`` names (the zero-argument form), ``super(Cls).m`` for
    ``super(Cls, obj).m`` (``Cls`` a name or a dotted one, as written); None for anything else. The
    project resolves it to ``m`` of the first base that defines it (`ProjectGraph.resolve`): a spelling
    no import, module or local can have, so nothing else resolves it."""
    if type(node) is not ast.Attribute:
        return None
    call = node.value  # type: ignore[attr-defined]
    if type(call) is not ast.Call or type(call.func) is not ast.Name or call.func.id != "super" or call.keywords:
        return None
    if not call.args:
        return f"{SUPER}).{node.attr}"  # type: ignore[attr-defined]
    if len(call.args) != 2:
        return None
    owner = dotted(call.args[0])
    return f"{SUPER}{owner}).{node.attr}" if owner is not None else None  # type: ignore[attr-defined]


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes; None for anything else."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return ".".join(reversed(names))


def target_name(node: ast.AST) -> tuple[str | None, bool]:
    """The field a store writes and whether it writes one entry of it.

    ``x = ...`` -> ``("x", False)``; ``d["x"] = ...`` and ``o.x = ...`` ->
    ``("x", False)``; ``x[i] = ...`` and ``d["x"][i] = ...`` -> ``("x", True)``.
    """
    if isinstance(node, ast.Name):
        return node.id, False
    if isinstance(node, ast.Attribute):
        return node.attr, False
    if isinstance(node, ast.Subscript):
        key = string_key(node)
        if key is not None:
            return key, False
        inner, _ = target_name(node.value)
        return inner, True
    return None, False


def positional(call: ast.Call) -> list[ast.expr]:
    """The plain positional arguments of ``call``, up to the first ``*args``."""
    args = call.args
    starred = ast.Starred
    for arg in args:  # most calls have a few arguments and no `*args`: cheaper than `map` and `in`
        if type(arg) is starred:
            break
    else:
        return args
    for i, arg in enumerate(args):
        if type(arg) is starred:
            return args[:i]
    return args


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    """The value ``call`` passes as ``name=...``, else None."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def argument(call: ast.Call, name: str, index: int) -> ast.expr | None:
    """The argument ``call`` passes for parameter ``name`` at position ``index``."""
    found = keyword(call, name)
    if found is not None:
        return found
    args = positional(call)
    return args[index] if index < len(args) else None


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
        ast.Pow: "**", ast.USub: "-u", ast.UAdd: "+u", ast.Not: "not", ast.Invert: "~", ast.MatMult: "@",
        ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^"}


def _shape(node: ast.AST) -> object:
    """A structural key that ignores parentheses and whitespace: ``(2 * cp)`` == ``2*cp``."""
    if isinstance(node, ast.Name):
        return ("n", node.id)
    if isinstance(node, ast.Constant):
        return ("c", type(node.value).__name__, node.value)
    if isinstance(node, ast.Attribute):
        return ("a", _shape(node.value), node.attr)
    if isinstance(node, ast.BinOp):
        return ("b", _OPS.get(type(node.op)), _shape(node.left), _shape(node.right))
    if isinstance(node, ast.UnaryOp):
        return ("u", _OPS.get(type(node.op)), _shape(node.operand))
    if isinstance(node, ast.Call):
        args = tuple(_shape(a) for a in node.args)
        kws = tuple((k.arg, _shape(k.value)) for k in node.keywords)
        return ("call", _shape(node.func), args, kws)
    if isinstance(node, ast.Subscript):
        return ("s", _shape(node.value), _shape(node.slice))
    if isinstance(node, ast.Tuple):
        return ("t", tuple(_shape(e) for e in node.elts))
    return ("id", id(node))


def same(a: ast.AST, b: ast.AST) -> bool:
    """Are ``a`` and ``b`` the same expression, up to parentheses and whitespace?"""
    if type(a) is not type(b):
        return False
    return _shape(a) == _shape(b)


def expects_error(node: ast.With | ast.AsyncWith) -> bool:
    """``with pytest.raises(...)`` (or ``self.assertRaises``): its body is meant to fail."""
    return any(
        isinstance(item.context_expr, ast.Call) and last_name(item.context_expr.func) in _RAISES
        for item in node.items
    )


def assigned_once(function: ast.AST) -> dict[str, ast.expr]:
    """A scope's locals assigned exactly once (a plain name target), by name: their value anywhere."""
    seen: dict[str, list[ast.expr]] = {}
    for node in own_nodes(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            seen.setdefault(node.targets[0].id, []).append(node.value)
    return {name: values[0] for name, values in seen.items() if len(values) == 1}


def assigned_before(function: ast.AST, line: int) -> dict[str, ast.expr]:
    """Each local's value as last assigned (a plain name target) on a line before ``line`` (in source order,
    whatever the branches)."""
    out: dict[str, ast.expr] = {}
    stores = [n for n in own_nodes(function) if isinstance(n, ast.Assign) and len(n.targets) == 1
              and isinstance(n.targets[0], ast.Name) and n.lineno < line]
    for store in sorted(stores, key=lambda n: n.lineno):
        out[store.targets[0].id] = store.value  # type: ignore[union-attr]
    return out


_INLINE_DEPTH = 6


class _Inline(ast.NodeTransformer):
    def __init__(self, bound: dict[str, ast.expr], args: dict[str, ast.expr], depth: int) -> None:
        self.bound, self.args, self.depth = bound, args, depth

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.args:
            return self.args[node.id]
        if node.id in self.bound and self.depth < _INLINE_DEPTH:
            value = _copy(self.bound[node.id])
            if value is not None:
                return _Inline(self.bound, self.args, self.depth + 1).visit(value)
        return node


def _copy(node: ast.expr) -> ast.expr | None:
    """A fresh copy of an expression (None for one that is no expression alone: ``*xs``, ``yield x``)."""
    try:
        return ast.parse(ast.unparse(node), mode="eval").body
    except SyntaxError:
        return None


def inline(node: ast.expr, bound: dict[str, ast.expr], args: dict[str, ast.expr] | None = None) -> ast.expr:
    """A copy of ``node`` with the names of ``args`` replaced by their expressions (a callee's parameters by
    a call's arguments) and those of ``bound`` by their values, recursively (`assigned_once`)."""
    copied = _copy(node)
    return node if copied is None else _Inline(bound, args or {}, 0).visit(copied)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def defs_with_qualnames(tree: ast.Module, keep: Callable[[ast.AST], bool] | None = None,
                        ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every ``def`` of ``tree`` with its qualname as the extractor spells it (``Cls.method``,
    ``outer.inner``), those under an ``if``, ``try``, ``with`` or loop included: a module's
    ``if flash_available:`` arm defines functions like any other. ``keep`` (a def or class) prunes:
    one it refuses is neither given nor entered. Without ``keep``, the list is made once per tree
    (`_scopes`, with `receivers`)."""
    if keep is None:
        return iter(_scopes(tree)[0])
    return _pruned_defs(tree, keep)


def _pruned_defs(tree: ast.Module, keep: Callable[[ast.AST], bool],
                 ) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    # Statements only: a def or class is a statement, found in a block field (`_BLOCKS`) of the
    # statement, handler or match case around it, in the order `ast.iter_child_nodes` gives them.
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    table, scopes, defs = _BLOCKS, _SCOPE_STATEMENTS, _DEF_KINDS
    while stack:
        prefix, node = stack.pop()
        for field in table[type(node)]:
            for child in getattr(node, field):
                if type(child) in scopes:
                    if not keep(child):
                        continue
                    name = prefix + child.name  # type: ignore[attr-defined]
                    stack.append((name + ".", child))
                    if type(child) in defs:
                        yield name, child  # type: ignore[misc]
                else:
                    stack.append((prefix, child))  # a block: its defs belong to the enclosing scope


_SCOPE_STATEMENTS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_DEF_KINDS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef})


_STATIC = frozenset({"staticmethod", "builtins.staticmethod"})
"""The decorators that make a ``def`` in a class body take no receiver."""


def method_receiver(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The receiver parameter of ``function`` taken as a ``def`` in a class body: its first positional
    parameter, whatever it is called (``self``, ``cls`` of a ``@classmethod``, ``this``); None for a
    ``@staticmethod`` or a ``def`` with no positional parameter. Python binds the receiver by place,
    never by name, and so does the linter."""
    for decorator in function.decorator_list:
        if dotted(decorator) in _STATIC:
            return None
    args = function.args
    first = args.posonlyargs or args.args
    return first[0].arg if first else None


_CLASSMETHOD = frozenset({"classmethod", "builtins.classmethod"})
"""The decorators that make a ``def``'s receiver the class itself."""


def takes_class(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Is ``function``, taken as a ``def`` in a class body, a ``@classmethod`` (its receiver the class)?"""
    return any(dotted(decorator) in _CLASSMETHOD for decorator in function.decorator_list)


_RECEIVERS = "layoutcheck_receivers"
"""The attribute a module's tree keeps its `_scopes` in (computed once per tree)."""

_Scopes = tuple[list[tuple[str, ast.AST]], dict[ast.AST, str], dict[ast.AST, str], dict[ast.AST, str]]


def receivers(tree: ast.Module) -> tuple[dict[ast.AST, str], dict[ast.AST, str], dict[ast.AST, str]]:
    """Three maps over the ``def`` nodes of ``tree``: each method's own receiver parameter
    (`method_receiver`, for a ``def`` in a class body, an ``if``/``try`` arm of one included); per
    ``def``, the name its body reaches a receiver by: its own, else the receiver of the method it is
    nested in (a closure reads the enclosing method's ``self``) unless it binds that name itself; and
    per method taking an instance (not a ``@classmethod``), its class's dotted name in the module
    (``Outer.Inner``), which a call through the class spells (`call_arguments`)."""
    found = _scopes(tree)
    return found[1], found[2], found[3]


def _scopes(tree: ast.Module) -> _Scopes:
    """`defs_with_qualnames` (as a list) and `receivers` of ``tree``, from one walk of its statements,
    kept on the tree (several module-wide readers ask; `forget_nodes` drops them)."""
    found = tree.__dict__.get(_RECEIVERS)
    if found is not None:
        return found
    defs: list[tuple[str, ast.AST]] = []
    own: dict[ast.AST, str] = {}
    visible: dict[ast.AST, str] = {}
    classes: dict[ast.AST, str] = {}
    # (node, qualname prefix, the class body's dotted name (None outside one), the receiver the enclosing
    # method reaches)
    stack: list[tuple[ast.AST, str, str | None, str | None]] = [(tree, "", None, None)]
    table, def_kinds = _BLOCKS, _DEF_KINDS
    while stack:
        node, prefix, in_class, outer = stack.pop()
        for field in table[type(node)]:
            for child in getattr(node, field):
                kind = type(child)
                if kind in def_kinds:
                    name = prefix + child.name
                    defs.append((name, child))
                    mine = method_receiver(child) if in_class is not None else None
                    if mine is not None:
                        own[child] = mine
                        if not takes_class(child):
                            classes[child] = in_class  # type: ignore[assignment]
                    reach = mine or (outer if outer is not None and outer not in param_names(child) else None)
                    if reach is not None:
                        visible[child] = reach
                    stack.append((child, name + ".", None, reach))
                elif kind is ast.ClassDef:
                    dotted_class = child.name if in_class is None else f"{in_class}.{child.name}"
                    stack.append((child, prefix + child.name + ".", dotted_class, outer))
                else:  # a block: its defs belong to the enclosing scope
                    stack.append((child, prefix, in_class, outer))
    found = (defs, own, visible, classes)
    tree.__dict__[_RECEIVERS] = found
    return found


def functions_by_name(tree: ast.AST) -> tuple[list[ast.FunctionDef | ast.AsyncFunctionDef], dict[str, list]]:
    """Every ``def`` under ``tree`` (methods and nested ones too), and the same by name."""
    functions = [n for n in nodes(tree) if isinstance(n, _DEFS)]
    by_name: dict[str, list] = {}
    for function in functions:
        by_name.setdefault(function.name, []).append(function)
    return functions, by_name


def binds_receiver(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
                   methods: tuple[dict[ast.AST, str], dict[ast.AST, str], dict[ast.AST, str]]) -> bool:
    """Does ``call`` of ``function`` fill its receiver parameter itself (``methods``: the module's
    `receivers`)? So ``obj.m(x)`` and ``super().m(x)`` do; ``Cls.m(obj, x)`` of a method taking an instance,
    called through its class, passes the receiver by hand (a ``@classmethod`` through its class still binds
    the class); a ``@staticmethod`` and a bare ``m(x)`` bind nothing."""
    receiver = methods[0].get(function)
    if receiver is None or not isinstance(call.func, ast.Attribute):
        return False
    names = param_names(function)
    return bool(names) and names[0] == receiver and (
        function not in methods[2] or dotted(call.func.value) != methods[2][function])


def call_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call,
                   methods: tuple[dict[ast.AST, str], dict[ast.AST, str], dict[ast.AST, str]]) -> dict[str, ast.expr]:
    """The arguments a call passes, by the callee's parameter names (``methods``: the module's
    `receivers`; the receiver parameter skipped where the call fills it, `binds_receiver`)."""
    names = param_names(function)
    if binds_receiver(function, call, methods):
        names = names[1:]
    given = dict(zip(names, call.args))
    given.update({k.arg: k.value for k in call.keywords if k.arg})
    return given


def spanning(functions: Sequence[ast.AST], lines: Iterable[int]) -> list:
    """The functions whose lines hold one of ``lines`` (a reader's places of interest, found in one pass over
    the module, so that only those functions are read closely)."""
    marks = sorted(set(lines))
    out = []
    for function in functions:
        i = bisect_left(marks, function.lineno)  # type: ignore[attr-defined]
        if i < len(marks) and marks[i] <= function.end_lineno:  # type: ignore[attr-defined]
            out.append(function)
    return out


def walked_together(node: ast.AST) -> list[tuple[ast.expr, str | None]] | None:
    """The sequences a ``for`` (or comprehension) walks entry for entry, each with the name its entry
    is bound to (None when the target there is not a name): ``for a, b in zip(A, B)`` gives
    ``[(A, "a"), (B, "b")]``, and so does ``for i, a in enumerate(A):`` whose body begins by reading
    ``b = B[i]`` (the same pairing, spelled with an index). None for any other loop."""
    if not isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        return None
    call, target = node.iter, node.target
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and isinstance(target, ast.Tuple)):
        return None
    if call.func.id == "zip" and len(target.elts) == len(call.args):
        return [(arg, t.id if isinstance(t, ast.Name) else None) for arg, t in zip(call.args, target.elts)]
    if call.func.id == "enumerate" and len(call.args) == 1 and len(target.elts) == 2 \
            and isinstance(target.elts[0], ast.Name) and isinstance(node, (ast.For, ast.AsyncFor)):
        index = target.elts[0].id
        entry = target.elts[1]
        out: list[tuple[ast.expr, str | None]] = [(call.args[0], entry.id if isinstance(entry, ast.Name) else None)]
        for stmt in node.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Subscript) and isinstance(stmt.value.slice, ast.Name)
                    and stmt.value.slice.id == index):
                break  # the reads that open the body: what a zip would have bound
            out.append((stmt.value.value, stmt.targets[0].id))
        return out if len(out) > 1 else None
    return None


def switches(stmts: Sequence[ast.stmt]) -> dict[str, bool]:
    """Locals a function assigns once, to ``True`` or ``False`` (a switch: ``left = True``). Reads
    statements only (nested functions and classes too: a ``nonlocal`` could rebind), not every
    expression: a walrus rebinding a switch is not seen."""
    seen: dict[str, int] = {}
    values: dict[str, bool] = {}
    todo = list(stmts)
    while todo:
        stmt = todo.pop()
        kind = type(stmt)
        if kind is ast.Assign or kind is ast.AugAssign or kind is ast.AnnAssign:
            targets = stmt.targets if kind is ast.Assign else [stmt.target]  # type: ignore[attr-defined]
            for target in targets:
                if type(target) is ast.Name:
                    seen[target.id] = seen.get(target.id, 0) + 1
                else:
                    for name in walk(target):
                        if type(name) is ast.Name:
                            seen[name.id] = seen.get(name.id, 0) + 2  # type: ignore[attr-defined]
            value = stmt.value  # type: ignore[attr-defined]
            if kind is ast.Assign and len(targets) == 1 and type(targets[0]) is ast.Name \
                    and type(value) is ast.Constant and isinstance(value.value, bool):
                values[targets[0].id] = value.value  # type: ignore[attr-defined]
            continue
        if kind is ast.For or kind is ast.AsyncFor:
            for name in walk(stmt.target):  # type: ignore[attr-defined]
                if type(name) is ast.Name:
                    seen[name.id] = seen.get(name.id, 0) + 2  # type: ignore[attr-defined]
        elif kind is ast.With or kind is ast.AsyncWith:
            for item in stmt.items:  # type: ignore[attr-defined]
                if item.optional_vars is not None:
                    for name in walk(item.optional_vars):
                        if type(name) is ast.Name:
                            seen[name.id] = seen.get(name.id, 0) + 2  # type: ignore[attr-defined]
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if inner and isinstance(inner[0], ast.stmt):
                todo.extend(inner)
        for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
            todo.extend(part.body)
    return {name: value for name, value in values.items() if seen.get(name) == 1}


def constant_test(test: ast.expr, constants: dict[str, bool]) -> bool | None:
    """The value of an ``if`` test that a constant decides (``True``, or one of the `switches`)."""
    if isinstance(test, ast.Constant) and isinstance(test.value, bool):
        return test.value
    if isinstance(test, ast.Name):
        return constants.get(test.id)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = constant_test(test.operand, constants)
        return None if inner is None else not inner
    return None


def switch_like(test: ast.expr) -> bool:
    """Could a constant decide this ``if`` test (a name, a literal, ``not`` of one)? A cheap gate
    before `switches`, which reads the whole function."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    return isinstance(test, ast.Name) or isinstance(test, ast.Constant) and isinstance(test.value, bool)


def live(block: Sequence[ast.stmt],
         constants: dict[str, bool] | Callable[[], dict[str, bool]] | None) -> Sequence[ast.stmt]:
    """``block`` with each ``if`` a constant decides replaced by the statements of its live arm: a
    switch set once (``left = True; if left: ... else: ...``) is one path, not two. ``constants``
    may be a function giving them, asked only when an ``if`` could be decided so."""
    if constants is None or not any(isinstance(stmt, ast.If) and switch_like(stmt.test) for stmt in block):
        return block
    if callable(constants):
        constants = constants()
    if not constants:
        return block
    out: list[ast.stmt] = []
    for stmt in block:
        decided = constant_test(stmt.test, constants) if isinstance(stmt, ast.If) else None
        if decided is None:
            out.append(stmt)
        else:
            out.extend(live(stmt.body if decided else stmt.orelse, constants))  # type: ignore[attr-defined]
    return out
