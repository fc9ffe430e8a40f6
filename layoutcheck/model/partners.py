"""Co-indexed values in one function, and where they fall out of step (docs/design.md#layout-spaces-and-bug-classes).

Part of the per-file walk (`layoutcheck.model.extract`): these checks read
one function's statements as written (no names, no project), each yielding
the node to flag and what the rule's message needs:

* `misplaced_positions` (class 6): positions stored beside a window of data,
  into the same slots of another buffer (``out[w] = row[lo:hi]`` then
  ``pos[w] = arange(a, b)``), whose start is neither 0 nor computed from the
  window's: each token gets another token's position;
* `truncated_apart` (class 7): lists grown together in one loop (one entry
  each per token: ``ids.extend(t)``, ``pos.extend(range(len(t)))``), then
  cut from opposite ends (``ids[-k:]`` against ``pos[:k]``);
* `moving_reference` (class 2): a loop that rewrites every entry of a
  record while it compares each with one of those entries
  (``for k, v in d.items(): if v.shape == d["mask"].shape: d[k] = v[:, :n]``):
  once that entry is rewritten, the later ones are compared with it cut;
* `empty_segment` (class 7): a boundary appended to cumulative offsets
  (``F.pad(offsets, (0, 1), value=end)``) where the segment it closes,
  ``n = end - ...``, can be 0: an empty sequence joins the batch;
* `unmasked_mean` (class 7): ``x.sum(-1) / mask.sum(-1)`` with ``x`` not masked
  while another sum over the same count is: the pad positions' values are
  summed and divided by the real tokens' count;
* `combined_before_restore` (class 9): a value built from regrouped pieces
  (``groups, order = regroup(...)``) combined elementwise with the batch's own
  data before it is put back in the batch's order (``v = v[index from order]``);
* `flattened_length` (class 3): ``lengths.append(len(x))`` beside ``stream.append(x.flatten())``
  in one block: the length recorded for a piece of a packed stream counts ``x``'s rows, the
  stream holds its elements;
* `row_count_as_size` (class 7): ``len(x)`` in arithmetic where ``x`` is one row
  (concatenated along its columns with a ``(1, k)`` block): the count of rows,
  always 1, taken for a size or an id.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from layoutcheck.model.syntax import child_fields, int_value, last_name, live, nodes, positional, switches

__all__ = [
    "SPELLINGS", "Body", "through", "unit_switches", "combined_before_restore", "empty_segment", "misplaced_positions",
    "moving_reference", "truncated_apart", "row_count_as_size", "flattened_length", "unmasked_mean",
]

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _blocks(body: Sequence[ast.stmt],
            constants: dict[str, bool] | Callable[[], dict[str, bool]] | None = None) -> Iterator[Sequence[ast.stmt]]:
    """``body`` and every statement list inside it (depth first, in source order), nested functions
    and classes left out, each ``if`` a constant decides read as its live arm (`live`). A stack,
    not recursion: each check here walks every function's blocks."""
    stack = [live(body, constants)]
    while stack:
        block = stack.pop()
        yield block
        inside: list[Sequence[ast.stmt]] = []
        for stmt in block:
            kind = type(stmt)
            fields = _BLOCK_FIELDS.get(kind)
            if fields is None:
                fields = _block_fields(kind)
            for name in fields:  # none for most statements (an assignment, a call, a return)
                inner = getattr(stmt, name)
                if name == "handlers" or name == "cases":
                    inside.extend(live(part.body, constants) for part in inner)
                elif inner and isinstance(inner[0], ast.stmt):
                    inside.append(live(inner, constants))
        stack.extend(reversed(inside))


_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {}


def _block_fields(kind: type) -> tuple[str, ...]:
    """The fields of statement class ``kind`` that hold statement lists, in the order `_blocks`
    reads them (``handlers`` and ``cases`` hold lists of parts with a body each)."""
    fields = kind._fields  # type: ignore[attr-defined]
    found = () if issubclass(kind, _NESTED) else tuple(
        name for name in ("body", "orelse", "finalbody", "handlers", "cases") if name in fields
    )
    _BLOCK_FIELDS[kind] = found
    return found


class Body:
    """One function's statements as the checks here read them: its blocks (`_blocks`) listed once,
    and its local bindings (`_bindings`) once asked for, shared by every check of the function."""

    __slots__ = ("stmts", "memo", "_blocks", "_bound", "_constants")

    def __init__(self, stmts: Sequence[ast.stmt]) -> None:
        self.stmts = stmts
        self.memo: dict[str, Any] = {}
        """What a reader of the body lists once for every check of the function (`bodyreads.expressions`)."""
        self._blocks: list[Sequence[ast.stmt]] | None = None
        self._bound: dict[str, list[ast.expr]] | None = None
        self._constants: dict[str, bool] | None = None

    def constants(self) -> dict[str, bool]:
        """The function's `switches`, found when first asked for (by `live`, only when an ``if``
        could be decided by one)."""
        if self._constants is None:
            self._constants = switches(self.stmts)
        return self._constants

    def live(self, block: Sequence[ast.stmt]) -> Sequence[ast.stmt]:
        """``block`` as it runs (`live`)."""
        return live(block, self.constants)

    @property
    def blocks(self) -> list[Sequence[ast.stmt]]:
        """`_blocks` of the body, listed when first asked for."""
        if self._blocks is None:
            self._blocks = list(_blocks(self.stmts, self.constants))
        return self._blocks

    def bindings(self) -> dict[str, list[ast.expr]]:
        """Every value each local name is assigned (nested functions left out); do not change it."""
        if self._bound is None:
            self._bound = _bindings(self.blocks)
        return self._bound


SPELLINGS: dict[str, tuple[str, ...]] = {
    "misplaced_positions": ("arange",),
    "truncated_apart": ("extend",),
    "moving_reference": ("items",),
    "empty_segment": ("pad",),
    "unmasked_mean": ("sum", "/"),
    "combined_before_restore": (",", "["),
    "row_count_as_size": ("len", "cat"),
    "flattened_length": ("len", "append"),
}
"""Per check, what a function's text must spell for the check to find anything there: the library
call or the syntax it matches (``arange``, ``.extend``, ``.items()``, ``pad``, ``sum`` and ``/``,
``len`` and ``cat``; the pair unpacked ``a, b = f(...)`` and the restore ``v = v[...]``). A
function whose text lacks one of a check's words is not read by it (most functions: each check
re-read every function before). Words, never names: a rename changes no gate."""


def _window(node: ast.expr) -> ast.Slice | None:
    """The slice of ``x[a:b]`` or of the last axis of ``x[i, a:b]``."""
    if not isinstance(node, ast.Subscript):
        return None
    index = node.slice
    if isinstance(index, ast.Tuple) and index.elts:
        index = index.elts[-1]
    return index if isinstance(index, ast.Slice) and index.step is None else None


def misplaced_positions(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """Positions ``arange(a, b)`` stored into the slots a data window ``row[lo:hi]`` fills, with
    ``a`` neither 0 (positions counted from each piece's own start) nor computed from ``lo``."""
    for block in body.blocks:
        data: dict[str, ast.Slice] = {}
        positions: list[tuple[str, ast.Call]] = []
        for stmt in block:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, value = stmt.targets[0], stmt.value
            if _window(target) is None:
                continue
            slots = _inlined_dump(target.slice, body.bindings())  # type: ignore[attr-defined]
            window = _window(value)
            if window is not None and window.lower is not None:
                data.setdefault(slots, window)
            elif isinstance(value, ast.Call) and last_name(value.func) == "arange" and len(positional(value)) >= 2:
                positions.append((slots, value))
        for slots, call in positions:
            window = data.get(slots)
            if window is None or window.lower is None:
                continue
            bound = body.bindings()
            start = positional(call)[0]
            lower = _inlined_dump(window.lower, bound)
            # Both sides written out the same way (locals assigned once, to the same depth).
            if int_value(through(start, bound)) == 0 or any(_inlined_dump(part, bound) == lower
                                                            for part in nodes(start)):
                continue  # from 0, or from the window's start (moved by an offset: another origin)
            yield call, ast.unparse(window.lower)


def _grown(loop: ast.For | ast.While) -> list[str]:
    """Lists ``loop`` grows by one entry per token of the same piece: ``a.extend(t)``,
    ``b.extend(range(len(t)))``, ``c.extend(u)`` with ``u`` walked beside ``t``."""
    grown: list[str] = []
    for stmt in loop.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "extend" and isinstance(func.value, ast.Name) \
                    and len(call.args) == 1:
                grown.append(func.value.id)
    return grown


def _cut_side(value: ast.expr, name: str, bindings: dict[str, list[ast.expr]]) -> str | None:
    """``start`` for ``name[:k]`` (keeps the start), ``end`` for ``name[-k:]`` (keeps the end); a
    bound read through a local assigned once (``k = -n`` then ``name[k:]``)."""
    window = _window(value)
    if window is None or not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
                              and value.value.id == name):
        return None
    lower, upper = through(window.lower, bindings), through(window.upper, bindings)
    if lower is None and upper is not None and not (isinstance(upper, ast.UnaryOp) or (int_value(upper) or 0) < 0):
        return "start"
    if upper is None and isinstance(lower, ast.UnaryOp) and isinstance(lower.op, ast.USub):
        return "end"
    return None


def truncated_apart(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """Lists a loop grows together (`_grown`), re-bound on one path through the loop's body to cuts
    that keep opposite ends: the cut keeping the end (``ids = ids[-k:]``) is flagged when a partner
    keeps the start. A path is a block with the blocks around it, so a cut picked by a branch
    (``if left: ids = ids[-k:] else: ids = ids[:k]``) meets the partner's cut made after the
    branch, and the two arms of one branch never meet each other."""
    for block in body.blocks:
        for loop in block:
            if not isinstance(loop, (ast.For, ast.While)):
                continue
            partners = set(_grown(loop))
            if len(partners) < 2:
                continue
            flagged: set[int] = set()
            stack: list[tuple[Sequence[ast.stmt], list[tuple[ast.Assign, str, str]]]] = [(body.live(loop.body), [])]
            while stack:
                inner, around = stack.pop()
                cuts = list(around)
                nested: list[Sequence[ast.stmt]] = []
                for stmt in inner:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                        name = stmt.targets[0].id
                        side = _cut_side(stmt.value, name, body.bindings()) if name in partners else None
                        if side is not None:
                            cuts.append((stmt, name, side))
                    elif not isinstance(stmt, _NESTED):
                        for field in ("body", "orelse", "finalbody"):
                            part = getattr(stmt, field, None)
                            if part and isinstance(part[0], ast.stmt):
                                nested.append(body.live(part))
                        for handler in getattr(stmt, "handlers", ()):
                            nested.append(body.live(handler.body))
                mine = cuts[len(around):]
                # A block's own cuts meet those of the blocks around it, before and after it alike.
                for part in nested:
                    stack.append((part, cuts))
                keeping = {side for _, _, side in cuts}
                if keeping != {"start", "end"} or not mine and not nested:
                    continue
                kept_start = [name for _, name, side in cuts if side == "start"]
                for stmt, name, side in cuts:
                    if side == "end" and id(stmt) not in flagged:
                        flagged.add(id(stmt))
                        yield stmt.value, ", ".join(f"`{n}`" for n in kept_start)


def moving_reference(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``for k, v in d.items():`` rewriting ``d[k]`` while a test in the loop reads ``d["key"]``."""
    for block in body.blocks:
        for loop in block:
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                    and isinstance(loop.iter.func, ast.Attribute) and loop.iter.func.attr == "items"
                    and isinstance(loop.iter.func.value, ast.Name) and isinstance(loop.target, ast.Tuple)
                    and len(loop.target.elts) == 2 and isinstance(loop.target.elts[0], ast.Name)):
                continue
            record, key = loop.iter.func.value.id, loop.target.elts[0].id
            writes = [t for node in nodes(loop) if isinstance(node, ast.Assign) for t in node.targets
                      if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == record
                      and isinstance(t.slice, ast.Name) and t.slice.id == key]
            if not writes:
                continue
            skipped = {c.value for node in nodes(loop) if isinstance(node, ast.Compare)
                       and isinstance(node.left, ast.Name) and node.left.id == key
                       for c in node.comparators if isinstance(c, ast.Constant)}
            for node in nodes(loop):
                if not isinstance(node, ast.If):
                    continue
                for part in nodes(node.test):
                    if isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name) \
                            and part.value.id == record and isinstance(part.slice, ast.Constant) \
                            and isinstance(part.slice.value, str) and part.slice.value not in skipped:
                        yield part, part.slice.value
                        break


def _own_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The expression nodes of ``stmt`` itself, not those of the statements nested in it.

    Several checks read them for every statement: listed once and kept on the statement (like
    `nodes`: the list lives with its tree, which nothing changes once parsed).
    """
    found = stmt.__dict__.get("_layoutcheck_own_nodes")
    if found is not None:
        return found
    found = []
    if not isinstance(stmt, _NESTED):
        for name in child_fields(type(stmt)):
            value = getattr(stmt, name, None)
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, (ast.expr, ast.withitem, ast.keyword)):
                    found.extend(nodes(item))
    stmt.__dict__["_layoutcheck_own_nodes"] = found
    return found


def through(node: ast.expr | None, bindings: dict[str, list[ast.expr]], depth: int = 3) -> ast.expr | None:
    """``node``, or the one value a local ``node`` is ever assigned in the function (followed up to
    ``depth`` names): ``k = -n`` then ``x[k:]`` reads as ``x[-n:]``. A name assigned twice or
    never (a parameter, a loop target) stays itself."""
    for _ in range(depth):
        if not isinstance(node, ast.Name):
            return node
        values = bindings.get(node.id, ())
        if len(values) != 1 or isinstance(values[0], ast.Starred):
            return node
        node = values[0]
    return node


class _Inline(ast.NodeTransformer):
    """A copy of an expression with each local assigned once replaced by its value (`through`)."""

    def __init__(self, bindings: dict[str, list[ast.expr]], depth: int) -> None:
        self.bindings = bindings
        self.depth = depth

    def visit_Name(self, node: ast.Name) -> ast.AST:
        values = self.bindings.get(node.id, ())
        if self.depth <= 0 or len(values) != 1 or isinstance(values[0], ast.Starred) \
                or not isinstance(node.ctx, ast.Load):
            return node
        return _Inline(self.bindings, self.depth - 1).visit(copy.deepcopy(values[0]))


def _inlined_dump(node: ast.expr, bindings: dict[str, list[ast.expr]]) -> str:
    """``ast.dump`` of ``node`` with the locals assigned once written out: two spellings of the same
    slots (``out[a : a + n]`` and ``e = a + n`` then ``out[a:e]``) dump the same."""
    if not any(isinstance(n, ast.Name) and n.id in bindings for n in nodes(node)):
        return ast.dump(node)
    return ast.dump(_Inline(bindings, 3).visit(copy.deepcopy(node)))


def _bindings(blocks: Iterable[Sequence[ast.stmt]]) -> dict[str, list[ast.expr]]:
    """Every value each local name is assigned in ``blocks`` (`_blocks` of a body), and what each
    list is grown with by ``append``/``extend``, and the iterable of each loop target."""
    out: dict[str, list[ast.expr]] = {}
    for block in blocks:
        for stmt in block:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        out.setdefault(target.id, []).append(stmt.value)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name):
                out.setdefault(stmt.target.id, []).append(stmt.value)
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                # `for g in groups:`: each `g` derives from `groups` (as in a comprehension).
                for name in nodes(stmt.target):
                    if isinstance(name, ast.Name):
                        out.setdefault(name.id, []).append(_derived(stmt.iter))
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                # `xs.append(v)` / `xs.extend(vs)`: the list derives from what it is grown with, as
                # `xs = [v for ...]` would (a local grown so is never "assigned once").
                call = stmt.value
                if isinstance(call.func, ast.Attribute) and call.func.attr in ("append", "extend") \
                        and isinstance(call.func.value, ast.Name) and len(call.args) == 1:
                    out.setdefault(call.func.value.id, []).append(_derived(call.args[0]))
    return out


def _derived(value: ast.expr) -> ast.expr:
    """``value`` as what a local derives from without being its value (a loop target's iterable, a
    list's appended entry): wrapped in a ``Starred``, which `through` and `_Inline` never follow."""
    return ast.Starred(value=value, ctx=ast.Load())


def _ends(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _zero_test(test: ast.expr, name: str) -> str | None:
    """``"zero"`` for ``n == 0`` / ``not n``, ``"nonzero"`` for ``n``, ``n > 0``, ``n != 0``, ``n >= 1``."""
    if isinstance(test, ast.Name) and test.id == name:
        return "nonzero"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Name) \
            and test.operand.id == name:
        return "zero"
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id == name:
        op, value = test.ops[0], int_value(test.comparators[0])
        if isinstance(op, ast.Eq) and value == 0:
            return "zero"
        if (isinstance(op, (ast.Gt, ast.NotEq)) and value == 0) or (isinstance(op, ast.GtE) and value == 1):
            return "nonzero"
    if isinstance(test, ast.BoolOp):
        found = [_zero_test(v, name) for v in test.values]
        if isinstance(test.op, ast.And) and "nonzero" in found:
            return "nonzero"
        if isinstance(test.op, ast.Or) and "zero" in found:
            return "zero"
    return None


def _excludes_zero(body: Sequence[ast.stmt], stmt: ast.stmt, name: str) -> bool:
    """Does ``stmt`` run only when ``name`` is not 0: inside ``if name:`` (or ``> 0``), or after an
    ``if name == 0: return`` (an ``elif`` of a chain included) in a block around it?"""
    return bool(_guarded_at(body, False, stmt, name))


def _guarded_at(block: Sequence[ast.stmt], guarded: bool, stmt: ast.stmt, name: str) -> bool | None:
    """`_excludes_zero` in ``block``, entered ``guarded`` or not; None when ``stmt`` is not in it.
    (A module function, not a recursive closure: that would be a reference cycle holding ``stmt``.)"""
    for s in block:
        if s is stmt:
            return guarded
        if isinstance(s, ast.If):
            branch = s
            while True:
                kind = _zero_test(branch.test, name)
                if kind == "zero" and _ends(branch.body):
                    guarded = True
                inner = _guarded_at(branch.body, guarded or kind == "nonzero", stmt, name)
                if inner is not None:
                    return inner
                if len(branch.orelse) == 1 and isinstance(branch.orelse[0], ast.If):
                    branch = branch.orelse[0]
                    continue
                inner = _guarded_at(branch.orelse, guarded or kind == "zero", stmt, name)
                if inner is not None:
                    return inner
                break
        elif isinstance(s, (ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                inner = _guarded_at(getattr(s, part, []) or [], guarded, stmt, name)
                if inner is not None:
                    return inner
        elif isinstance(s, ast.Assert) and _zero_test(s.test, name) == "nonzero":
            guarded = True
    return None


def _appends_boundary(call: ast.Call) -> ast.expr | None:
    """``F.pad(offsets, (0, 1), value=end)``: one entry ``end`` appended to ``offsets``; returns ``end``."""
    if last_name(call.func) != "pad" or len(call.args) < 2:
        return None
    amount = call.args[1]
    if not (isinstance(amount, ast.Tuple) and len(amount.elts) == 2 and int_value(amount.elts[0]) == 0
            and int_value(amount.elts[1]) == 1):
        return None
    for kw in call.keywords:
        if kw.arg == "value":
            return kw.value
    return call.args[3] if len(call.args) > 3 else None


def empty_segment(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """A boundary ``end`` appended to cumulative offsets while the last segment's length ``n = end -
    ...`` can be 0: nothing shows ``n`` is not 0 where the boundary is appended."""
    for block in body.blocks:
        for stmt in block:
            for node in _own_nodes(stmt):
                if not isinstance(node, ast.Call):
                    continue
                end = _appends_boundary(node)
                if end is None:
                    continue
                text = ast.dump(end)
                lengths = [name for name, values in body.bindings().items() for v in values
                           if isinstance(v, ast.BinOp) and isinstance(v.op, ast.Sub) and ast.dump(v.left) == text]
                if lengths and not any(_excludes_zero(body.stmts, stmt, n) for n in lengths):
                    yield node, lengths[0]


_PASSING = frozenset({"clamp", "clamp_min", "float", "double", "to", "detach", "type_as", "expand_as", "unsqueeze"})


def _strip(node: ast.expr) -> ast.expr:
    """``x`` of ``x.clamp(min=1).float()``: conversions that keep what a value counts."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PASSING:
        node = node.func.value
    return node


def _summed(node: ast.expr) -> ast.expr | None:
    """``x`` of ``x.sum(...)`` / ``torch.sum(x, ...)``."""
    node = _strip(node)
    if isinstance(node, ast.Call) and last_name(node.func) == "sum":
        if isinstance(node.func, ast.Attribute) and not (isinstance(node.func.value, ast.Name)
                                                          and node.func.value.id in ("torch", "np", "numpy")):
            return _strip(node.func.value)
        return _strip(node.args[0]) if node.args else None
    return None


def _mentions(node: ast.expr, name: str, bindings: dict[str, list[ast.expr]], depth: int = 0) -> bool:
    """Does ``node`` derive from ``name`` (through the locals it reads, a few bindings deep)?"""
    for part in nodes(node):
        if isinstance(part, ast.Name):
            if part.id == name:
                return True
            if depth < 3 and any(_mentions(v, name, bindings, depth + 1) for v in bindings.get(part.id, ())):
                return True
    return False


def _reaching(body: Sequence[ast.stmt], stmt: ast.stmt) -> dict[str, list[ast.expr]] | None:
    """The assignments that may reach ``stmt``: those before it on its path through the blocks, and
    every one inside a statement that ends before it (not those of a branch beside it)."""
    for i, s in enumerate(body):
        if s is stmt:
            return _bindings(_blocks(body[:i]))
        if isinstance(s, _NESTED):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(s, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                found = _reaching(inner, stmt)
                if found is not None:
                    before = _bindings(_blocks(body[:i]))
                    for key, values in found.items():
                        before.setdefault(key, []).extend(values)
                    return before
    return None


def unmasked_mean(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``x.sum(-1) / n`` with ``n = mask.sum(-1)`` (the real tokens' count) and ``x`` not masked by
    ``mask``, while another sum over a count of the same mask here is (however each count is
    spelled: inline or through a local): pad positions summed, real ones counted."""
    by_count: dict[str, list[tuple[ast.expr, bool, str]]] = {}
    for block in body.blocks:
        for stmt in block:
            bindings: dict[str, list[ast.expr]] | None = None
            for node in _own_nodes(stmt):
                if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                    continue
                if bindings is None:
                    bindings = _reaching(body.stmts, stmt) or {}
                count = _strip(node.right)
                counted = _summed(count)
                if counted is None and isinstance(count, ast.Name):
                    # a mask's sum among the count's bindings (one per branch: the padded branch's)
                    counts = [c for c in (_summed(v) for v in bindings.get(count.id, ())) if isinstance(c, ast.Name)]
                    counted = counts[0] if len(counts) == 1 else None
                if not isinstance(counted, ast.Name):
                    continue
                summed = _summed(node.left)
                if summed is None:
                    continue
                masked = _mentions(summed, counted.id, bindings)
                # Keyed by the mask counted, not by how the count is spelled: `m.sum(1).clamp(min=1)`
                # inline and a local `n = m.sum(dim=-1, keepdim=True)` count the same tokens.
                by_count.setdefault(counted.id, []).append((node.left, masked, counted.id))
    for found in by_count.values():
        if any(masked for _, masked, _ in found):
            for numerator, masked, mask in found:
                if not masked:
                    yield numerator, mask


_ELEMENTWISE = (ast.Mult, ast.Add, ast.Sub, ast.Div)


def combined_before_restore(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``groups, order = regroup(...)``; ``v = cat(f(g) for g in groups)``; ``v = v * data``; later
    ``v = v[index from order]``: ``v`` is in the regrouped order until then, ``data`` in the batch's."""
    pairs: list[tuple[str, str]] = []
    assigns: list[ast.Assign] = []
    for block in body.blocks:
        for stmt in block:
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                continue
            assigns.append(stmt)
            target = stmt.targets[0]
            if isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(
                    isinstance(e, ast.Name) for e in target.elts) and isinstance(stmt.value, ast.Call):
                pairs.append((target.elts[0].id, target.elts[1].id))  # type: ignore[attr-defined]
    if not pairs:
        return
    bindings = body.bindings()
    assigns.sort(key=lambda s: s.lineno)
    for restore in assigns:
        target, value = restore.targets[0], restore.value
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
                and value.value.id == target.id):
            continue
        name = target.id
        for grouped, order in pairs:
            if not _mentions(value.slice, order, bindings) or _mentions(value.slice, grouped, bindings):
                continue
            built = [s for s in assigns if s.lineno < restore.lineno and isinstance(s.targets[0], ast.Name)
                     and s.targets[0].id == name and _mentions(s.value, grouped, bindings)]
            if not built:
                continue
            for stmt in assigns:
                if not (built[0].lineno < stmt.lineno < restore.lineno and isinstance(stmt.targets[0], ast.Name)
                        and stmt.targets[0].id == name):
                    continue
                node = stmt.value
                if not (isinstance(node, ast.BinOp) and isinstance(node.op, _ELEMENTWISE)):
                    continue
                other = node.right if _mentions(node.left, name, {}) else node.left
                if int_value(other) is None and not isinstance(other, ast.Constant) and not any(
                        _mentions(other, n, bindings) for n in (name, grouped, order)):
                    yield node, ast.unparse(value)[:60]


def unit_switches(body: Body, units: set[str], params: set[str]) -> tuple[str, ...]:
    """Parameters an ``if`` tests whose body rebinds a name a pad's unit is read through
    (``if fp8: unit = math.lcm(16, unit)``): the unit depends on what the caller passes."""
    found: set[str] = set()
    if not units:
        return ()
    for block in body.blocks:
        for stmt in block:
            if not isinstance(stmt, ast.If):
                continue
            tested = {n.id for n in nodes(stmt.test) if isinstance(n, ast.Name)} & params
            if not tested:
                continue
            assigned = {t.id for s in stmt.body if isinstance(s, (ast.Assign, ast.AugAssign))
                        for t in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(t, ast.Name)}
            if assigned & units:
                found |= tested
    return tuple(sorted(found))


_ONE_ROW_BUILDERS = frozenset({"full", "new_full", "zeros", "new_zeros", "ones", "new_ones", "empty", "new_empty"})


def _one_row_block(node: ast.expr, bound: dict[str, list[ast.expr]] | None = None) -> bool:
    """A tensor built with a literal leading 1 (``x.new_full((1, k), v)``, ``torch.zeros(1, k)``), or
    given one (``t.unsqueeze(0)``, ``t[None]``), also scaled (``v * torch.ones(1, k)``) or bound to a
    local first (through ``bound``, the function's bindings, when each binding is one)."""
    if isinstance(node, ast.Name) and bound and node.id in bound:
        return all(_one_row_block(value) for value in bound[node.id])
    if isinstance(node, ast.BinOp):
        return _one_row_block(node.left) or _one_row_block(node.right)
    if isinstance(node, ast.Call) and last_name(node.func) == "unsqueeze" and isinstance(node.func, ast.Attribute) \
            and len(node.args) == 1 and int_value(node.args[0]) == 0:
        return True
    if isinstance(node, ast.Subscript):
        first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and node.slice.elts else node.slice
        return isinstance(first, ast.Constant) and first.value is None
    if not (isinstance(node, ast.Call) and last_name(node.func) in _ONE_ROW_BUILDERS and node.args):
        return False
    shape = node.args[0]
    first = shape.elts[0] if isinstance(shape, (ast.Tuple, ast.List)) and shape.elts else shape
    return int_value(first) == 1 and (isinstance(shape, (ast.Tuple, ast.List)) and len(shape.elts) > 1
                                      or len(node.args) > 1)


def _one_row(value: ast.expr, name: str, bound: dict[str, list[ast.expr]]) -> bool:
    """``name = cat([name, one-row block], dim=1)``: the concatenation along the columns keeps one row."""
    if not (isinstance(value, ast.Call) and last_name(value.func) in ("cat", "concat", "concatenate")
            and value.args and isinstance(value.args[0], (ast.List, ast.Tuple))):
        return False
    dim = next((k.value for k in value.keywords if k.arg in ("dim", "axis")), value.args[1] if len(value.args) > 1 else None)
    pieces = value.args[0].elts
    return int_value(dim) not in (None, 0) and any(_one_row_block(p, bound) for p in pieces) and any(
        isinstance(p, ast.Name) and p.id == name for p in pieces)


def row_count_as_size(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``len(x)`` in arithmetic where ``x`` is one row (`_one_row`): the count of rows, always 1."""
    one_row: set[str] = set()
    for block in body.blocks:
        for stmt in block:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and _one_row(stmt.value, stmt.targets[0].id, body.bindings()):
                one_row.add(stmt.targets[0].id)
    if not one_row:
        return
    for block in body.blocks:
        for stmt in block:
            for node in _own_nodes(stmt):
                if isinstance(node, ast.BinOp):
                    for side in (node.left, node.right):
                        if isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id == "len" \
                                and len(side.args) == 1 and isinstance(side.args[0], ast.Name) \
                                and side.args[0].id in one_row:
                            yield side, side.args[0].id


def _appended(stmt: ast.stmt) -> tuple[str, ast.expr] | None:
    """``xs.append(v)`` as a statement: the list's name and ``v``."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "append" and isinstance(call.func.value, ast.Name)
            and len(call.args) == 1 and not call.keywords):
        return None
    return call.func.value.id, call.args[0]


def _flattened(node: ast.expr) -> str | None:
    """``x`` of ``x.flatten()``, ``x.view(-1)``, ``x.reshape(-1)``: every element of ``x`` in one axis."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)):
        return None
    method, args = node.func.attr, node.args
    if method == "flatten" and not args and not node.keywords:
        return node.func.value.id
    if method in ("view", "reshape") and len(args) == 1 and int_value(args[0]) == -1:
        return node.func.value.id
    return None


def flattened_length(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``lengths.append(len(x))`` in the block that appends ``x.flatten()`` to another list: the pieces
    of a packed stream recorded with a length that counts ``x``'s rows, not the elements the stream
    holds (the two agree only when ``x`` has one axis, where flattening it would change nothing)."""
    for block in body.blocks:
        flat: dict[str, str] = {}
        lengths: list[tuple[str, ast.Call]] = []
        for stmt in block:
            found = _appended(stmt)
            if found is None:
                continue
            target, value = found
            piece = _flattened(value)
            if piece is not None:
                flat.setdefault(piece, target)
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "len" \
                    and len(value.args) == 1 and isinstance(value.args[0], ast.Name):
                lengths.append((target, value))
        for target, call in lengths:
            name = call.args[0].id  # type: ignore[attr-defined]
            if name in flat and flat[name] != target:
                yield call, name
