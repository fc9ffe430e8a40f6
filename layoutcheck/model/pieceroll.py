"""A next-token roll applied to one piece of a split sequence (class 5), read once per module.

A sequence split into equal pieces, one per rank (``x[..., k * w : (k + 1) * w]``
with ``w = x.shape[-1] // world``: a context- or sequence-parallel split), must
be rolled before the split: ``torch.roll(piece, -1)`` wraps the piece's own first
token to its last position, where the next piece's first token belongs. What
the code does decides, never names:

* a *splitter* is a function of the module that returns such a piece of a
  parameter (directly or through one local), or that cuts such a window out of each
  row of a parameter and packs them (into a buffer's slices, or appended to a list then
  concatenated: a context-parallel rank's chunks of every sample, `_row_split`);
* a *roller* is a function that rolls a parameter left (``torch.roll(p, -1)``,
  also ``torch.roll(q if q is not None else p, -1)``), with the parameters
  whose presence skips the roll (``if nxt is not None: ... else: roll``);
* `rolled_pieces` yields, per function, a splitter's result rolled there or
  passed to a roller's rolled parameter, unless the call passes a parameter
  that skips the roll.
"""

from __future__ import annotations

import ast
import re
import weakref
from bisect import bisect_left

from layoutcheck.model.shifts import rolled_left
from layoutcheck.model.syntax import binds_receiver, defs_with_qualnames, int_value, keyword, last_name, line_numbers, nodes, param_names, positional, receivers

__all__ = ["PieceSummaries", "RollSummary", "SplitSummary", "piece_summaries", "rolled_pieces"]

SplitSummary = tuple[str, int, str, int]
"""A splitter: (its qualname; the element of its return that is a piece, -1 for all of it; the parameter
that names the split's axis and its position, ``""`` and -1 where the axis is the last one, ``""`` and -2
where the pieces of each row are packed and a leading axis added: they run along axis 1, the last)."""
RollSummary = tuple[str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]
"""A roller: (its qualname; its positional parameters in order; each parameter it rolls left along the last
axis with the parameters whose presence skips that roll)."""
PieceSummaries = tuple[tuple[SplitSummary, ...], tuple[RollSummary, ...]]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_KEEPS = frozenset({"contiguous", "clone", "detach", "to", "cuda"})
_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""A function -> its locals holding a row of a parameter (`_rows_of`), read once per function."""


def _last_axis(part: ast.Slice, parts: list[ast.expr], width: ast.expr, bound: dict[str, ast.expr]) -> bool:
    """Is the window on the last axis: after an ellipsis (``x[..., a:b]``), or ``w`` measured along the
    last axis (``w = x.shape[-1] // n``, ``x.size(-1) // n``)? A split of the batch (``x[a:b]`` of rows)
    is not one of the sequence."""
    if len(parts) > 1 and parts[-1] is part and isinstance(parts[0], ast.Constant) and parts[0].value is Ellipsis:
        return True
    if isinstance(width, ast.Name) and width.id in bound:
        width = bound[width.id]
    for node in ast.walk(width):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape" \
                and int_value(node.slice) == -1:
            return True
        if isinstance(node, ast.Call) and last_name(node.func) == "size" and node.args and int_value(node.args[0]) == -1:
            return True
    return False


def _piece_window(node: ast.expr, bound: dict[str, ast.expr]) -> bool:
    """``x[..., k * w : (k + 1) * w]``: the ``k``-th of equal pieces of the last axis (`_last_axis`)."""
    if not isinstance(node, ast.Subscript):
        return False
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for part in parts:
        if not isinstance(part, ast.Slice):
            continue
        # Bounds held in locals (`lo = k * w` then `x[..., lo:hi]`) are read as their values.
        low, up = (bound.get(b.id, b) if isinstance(b, ast.Name) else b for b in (part.lower, part.upper))
        if not (isinstance(low, ast.BinOp) and isinstance(up, ast.BinOp)
                and isinstance(low.op, ast.Mult) and isinstance(up.op, ast.Mult)):
            continue
        for k, w in ((low.left, low.right), (low.right, low.left)):
            for nxt, width in ((up.left, up.right), (up.right, up.left)):
                if ast.dump(width) == ast.dump(w) and isinstance(nxt, ast.BinOp) and isinstance(nxt.op, ast.Add) \
                        and {ast.dump(nxt.left), ast.dump(nxt.right)} == {ast.dump(k), ast.dump(ast.Constant(1))} \
                        and _last_axis(part, parts, w, bound):
                    return True
    return False


def _window_bounds(part: ast.Slice, bound: dict[str, ast.expr]) -> bool:
    """``k * w : (k + 1) * w`` (bounds read through locals): the ``k``-th of equal windows."""
    low, up = (bound.get(b.id, b) if isinstance(b, ast.Name) else b for b in (part.lower, part.upper))
    if not (isinstance(low, ast.BinOp) and isinstance(up, ast.BinOp)
            and isinstance(low.op, ast.Mult) and isinstance(up.op, ast.Mult)):
        return False
    for k, w in ((low.left, low.right), (low.right, low.left)):
        for nxt, width in ((up.left, up.right), (up.right, up.left)):
            if ast.dump(width) == ast.dump(w) and isinstance(nxt, ast.BinOp) and isinstance(nxt.op, ast.Add) \
                    and {ast.dump(nxt.left), ast.dump(nxt.right)} == {ast.dump(k), ast.dump(ast.Constant(1))}:
                return True
    return False


def _rows_of(function: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str]) -> set[str]:
    """The locals holding one row of a parameter: a loop's target over it (``for row in rows``, ``for i,
    row in enumerate(rows)``) or the parameter indexed by a loop's counter (``d = ids[i]``)."""
    out: set[str] = set()
    counters: set[str] = set()
    for node in nodes(function):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            source, target = node.iter, node.target
            if isinstance(source, ast.Call) and last_name(source.func) == "enumerate" and source.args \
                    and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                source, target = source.args[0], target.elts[1]
            if isinstance(source, ast.Name) and source.id in params and isinstance(target, ast.Name):
                out.add(target.id)
            elif isinstance(target, ast.Name):
                counters.add(target.id)
    for node in nodes(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Subscript) and isinstance(node.value.value, ast.Name) \
                and node.value.value.id in params and isinstance(node.value.slice, ast.Name) \
                and node.value.slice.id in counters:
            out.add(node.targets[0].id)
    return out


def _row_window(node: ast.expr, rows: set[str], bound: dict[str, ast.expr]) -> bool:
    """``row[k * w : (k + 1) * w]`` of a row of a parameter (`_rows_of`): a window of the row's first axis,
    its positions, one of equal windows (a context-parallel rank's chunk of each sample)."""
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in rows \
        and isinstance(node.slice, ast.Slice) and _window_bounds(node.slice, bound)


def _row_split(value: ast.expr, function: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str],
               bound: dict[str, ast.expr]) -> int | None:
    """Is ``value`` the rows' windows put together: a buffer whose slices are given windows of each row
    (``buf[s : s + h] = row[h * k : h * (k + 1)]`` in a loop over the rows), or a list appended such
    windows and concatenated (``torch.cat(parts)``), a leading axis added or not (``[None]``,
    ``.unsqueeze(0)``)? Each row is cut as a sequence is for one rank, and the pieces packed. Returns
    the axis the packed positions run along (0, or 1 under a leading axis), else None."""
    axis = 0
    while True:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _KEEPS:
            value = value.func.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "unsqueeze" \
                and value.args and int_value(value.args[0]) == 0 and not axis:
            value, axis = value.func.value, 1
        elif isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and value.slice.value is None \
                and not axis:
            value, axis = value.value, 1
        elif isinstance(value, ast.Name) and isinstance(bound.get(value.id), ast.Call) \
                and last_name(bound[value.id].func) in ("cat", "concat", "concatenate"):  # type: ignore[union-attr]
            value = bound[value.id]
        else:
            break
    joined = isinstance(value, ast.Call) and last_name(value.func) in ("cat", "concat", "concatenate") \
        and value.args and isinstance(value.args[0], ast.Name)
    holder = value.args[0].id if joined else value.id if isinstance(value, ast.Name) else None
    if holder is None:
        return None
    rows = _ROWS.get(function)
    if rows is None:
        rows = _ROWS[function] = _rows_of(function, params)
    if not rows:
        return None
    for node in nodes(function):
        if joined and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "append" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == holder and node.args and _row_window(node.args[0], rows, bound):
            return axis
        if not joined and isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Subscript) and isinstance(node.targets[0].value, ast.Name) \
                and node.targets[0].value.id == holder and _row_window(node.value, rows, bound):
            return axis
    return None


def _splitters(functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> set[str]:
    """Functions returning a piece of a parameter (`_piece_window`), directly or through one local, or
    each row's pieces packed (`_row_split`)."""
    out: set[str] = set()
    for function in functions:
        params = set(param_names(function))
        bound = {t.id: s.value for s in nodes(function) if isinstance(s, ast.Assign)
                 for t in s.targets if isinstance(t, ast.Name)}
        for node in nodes(function):
            if isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if _row_split(value, function, params, bound) is not None:
                    out.add(function.name)
                if isinstance(value, ast.Name) and value.id in bound:
                    value = bound[value.id]
                if _piece_window(value, bound) and isinstance(value.value, ast.Name) and value.value.id in params:
                    out.add(function.name)
    return out


def _rolled_along_last(node: ast.AST) -> ast.expr | None:
    """What a left roll along the last axis (``dims=-1``) or the flattened tensor (no ``dims``) rolls."""
    rolled = rolled_left(node)
    if rolled is None:
        return None
    method = isinstance(node.func, ast.Attribute) and node.func.value is rolled
    dims = keyword(node, "dims")
    if dims is None:
        args = positional(node)
        index = 1 if method else 2
        dims = args[index] if len(args) > index else None
    return rolled if dims is None or int_value(dims) == -1 else None


def _skip_tests(test: ast.expr) -> tuple[str | None, bool]:
    """``q is not None`` -> (q, True): the body runs when ``q`` is given; ``q is None`` -> (q, False)."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        if isinstance(test.ops[0], ast.IsNot):
            return test.left.id, True
        if isinstance(test.ops[0], ast.Is):
            return test.left.id, False
    return None, False


def _rolls(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, frozenset[str]]:
    """The parameters ``function`` rolls left -> the parameters whose presence skips that roll."""
    params = set(param_names(function))
    out: dict[str, frozenset[str]] = {}

    def note(rolled: ast.expr, skipped_by: frozenset[str]) -> None:
        if isinstance(rolled, ast.IfExp):  # `q if q is not None else p`: passing `q` skips rolling `p`
            name, given_runs_body = _skip_tests(rolled.test)
            extra = frozenset({name}) if name in params else frozenset()
            note(rolled.body, skipped_by | extra if not given_runs_body else skipped_by)
            note(rolled.orelse, skipped_by | extra if given_runs_body else skipped_by)
            return
        for part in nodes(rolled):
            if isinstance(part, ast.Name) and part.id in params:
                # rolled in several places: skipped only by what skips every one of them
                out[part.id] = out[part.id] & skipped_by if part.id in out else skipped_by

    def visit(node: ast.AST, skipped_by: frozenset[str]) -> None:
        if isinstance(node, _FUNCTIONS + (ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.If):
            name, given_runs_body = _skip_tests(node.test)
            visit(node.test, skipped_by)
            body_skip = orelse_skip = skipped_by
            if name in params:
                # the roll in the branch taken when `name` is absent is skipped by passing `name`
                if given_runs_body:
                    orelse_skip = skipped_by | {name}
                else:
                    body_skip = skipped_by | {name}
            for stmt in node.body:
                visit(stmt, body_skip)
            for stmt in node.orelse:
                visit(stmt, orelse_skip)
            return
        rolled = _rolled_along_last(node)
        if rolled is not None:
            note(rolled, skipped_by)
        for child in ast.iter_child_nodes(node):
            visit(child, skipped_by)

    for stmt in function.body:
        visit(stmt, frozenset())
    return out


def rolled_pieces(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """Function node -> (node, splitter) for each piece of a split sequence rolled there or handed to
    a function that rolls it (see the module docs)."""
    functions = [n for n in nodes(tree) if isinstance(n, _FUNCTIONS)]
    by_name: dict[str, list] = {}
    for function in functions:
        by_name.setdefault(function.name, []).append(function)
    splitters = _splitters(functions)
    if not splitters:
        return {}
    rollers = {f.name: (f, _rolls(f)) for f in functions if len(by_name[f.name]) == 1}
    methods = receivers(tree)
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    for function in functions:
        pieces: dict[str, str] = {}  # local -> the splitter whose piece it holds
        for node in nodes(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and last_name(node.value.func) in splitters:
                pieces[node.targets[0].id] = last_name(node.value.func)

        def piece(arg: ast.expr) -> str | None:
            if isinstance(arg, ast.Name):
                return pieces.get(arg.id)
            if isinstance(arg, ast.Call) and last_name(arg.func) in splitters:
                return last_name(arg.func)
            return None

        for node in nodes(function):
            if not isinstance(node, ast.Call):
                continue
            rolled = _rolled_along_last(node)
            if rolled is not None:
                split = piece(rolled)
                if split is not None:
                    out.setdefault(function, []).append((rolled, split))
                continue
            callee = rollers.get(last_name(node.func) or "")
            if callee is None:
                continue
            target, rolls = callee
            names = param_names(target)
            if binds_receiver(target, node, methods):
                names = names[1:]
            given = {k.arg for k in node.keywords if not (isinstance(k.value, ast.Constant) and k.value.value is None)}
            given |= {n for n, a in zip(names, node.args) if not (isinstance(a, ast.Constant) and a.value is None)}
            for name, arg in [*zip(names, node.args), *((k.arg, k.value) for k in node.keywords)]:
                if name in rolls and not rolls[name] & given:
                    split = piece(arg)
                    if split is not None:
                        out.setdefault(function, []).append((arg, split))
    return out



def _listed_window(node: ast.expr, function: ast.FunctionDef | ast.AsyncFunctionDef,
                   bound: dict[str, ast.expr]) -> tuple[str, int] | None:
    """``x[tuple(idx)]`` where the function sets ``idx[a] = slice(k * w, (k + 1) * w)`` and ``w = x.size(a)
    // n`` (or ``x.shape[a] // n``): the ``k``-th of ``n`` equal pieces along axis ``a``. Returns the
    parameter naming ``a`` and its position (``("", -1)`` for ``a = -1``), else None."""
    if not isinstance(node, ast.Subscript):
        return None
    index = node.slice
    if isinstance(index, ast.Call) and last_name(index.func) == "tuple" and len(index.args) == 1:
        index = index.args[0]
    if not isinstance(index, ast.Name):
        return None
    params = param_names(function)
    for stmt in nodes(function):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)
                and isinstance(stmt.targets[0].value, ast.Name) and stmt.targets[0].value.id == index.id
                and isinstance(stmt.value, ast.Call) and last_name(stmt.value.func) == "slice"
                and len(stmt.value.args) == 2):
            continue
        axis = stmt.targets[0].slice
        if int_value(axis) == -1:
            where = ("", -1)
        elif isinstance(axis, ast.Name) and axis.id in params:
            where = (axis.id, params.index(axis.id))
        else:
            continue
        window = ast.Subscript(value=node.value, slice=ast.Tuple(elts=[ast.Constant(Ellipsis), ast.Slice(
            lower=stmt.value.args[0], upper=stmt.value.args[1])]))
        low = stmt.value.args[0]
        widths = [bound.get(w.id, w) if isinstance(w, ast.Name) else w
                  for w in ((low.left, low.right) if isinstance(low, ast.BinOp) else ())]
        measured = any(isinstance(w, ast.BinOp) and isinstance(w.op, ast.FloorDiv) and any(
            isinstance(n, ast.Call) and last_name(n.func) == "size" and n.args and ast.dump(n.args[0]) == ast.dump(axis)
            or isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and n.value.attr == "shape"
            and ast.dump(n.slice) == ast.dump(axis) for n in ast.walk(w.left)) for w in widths)
        if measured and _piece_window(window, bound):
            return where
    return None


def _pieces_of(value: ast.expr, function: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str],
               bound: dict[str, ast.expr]) -> tuple[str, int] | None:
    """Is ``value`` a piece of a parameter (`_piece_window` on the last axis, or `_listed_window`): the axis
    parameter and position as `_listed_window` gives them, else None."""
    packed = _row_split(value, function, params, bound)
    if packed is not None:
        return "", -1 - packed  # (-2: along axis 1, under a leading axis the split added)
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _KEEPS:
        value = value.func.value
    if isinstance(value, ast.Name) and value.id in bound:
        value = bound[value.id]
    if not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id in params):
        return None
    if _piece_window(value, bound):
        return "", -1
    return _listed_window(value, function, bound)


def piece_summaries(tree: ast.Module, text: str) -> PieceSummaries:
    """The module's splitters (functions returning a piece of a parameter, all of the return or one element
    of a returned tuple) and rollers (`_rolls`), by qualname: what a call from another module meets
    (`layoutcheck.model.piecereach`). Only the functions spanning a line that spells a roll or a window's
    end (``roll(``, ``+ 1)``) are read."""
    lines = sorted(set(line_numbers(text, (m.start() for m in re.finditer(r"roll\(|\+ 1\)", text)))))
    if not lines:
        return (), ()
    splits: list[SplitSummary] = []
    rolls: list[RollSummary] = []

    def spans(node: ast.AST) -> bool:
        at = bisect_left(lines, node.lineno)  # type: ignore[attr-defined]
        return at < len(lines) and lines[at] <= (node.end_lineno or node.lineno)  # type: ignore[attr-defined]

    for qualname, function in defs_with_qualnames(tree, spans):
        params = set(param_names(function))
        bound = {t.id: s.value for s in nodes(function) if isinstance(s, ast.Assign)
                 for t in s.targets if isinstance(t, ast.Name)}
        for node in nodes(function):
            if isinstance(node, ast.Return) and node.value is not None:
                parts = enumerate(node.value.elts) if isinstance(node.value, ast.Tuple) else [(-1, node.value)]
                for element, part in parts:
                    axis = _pieces_of(part, function, params, bound)
                    if axis is not None:
                        splits.append((qualname, element, *axis))
        rolled = _rolls(function) if any(_rolled_along_last(n) is not None for n in nodes(function)) else {}
        if rolled:
            positional = (*function.args.posonlyargs, *function.args.args)
            rolls.append((qualname, tuple(a.arg for a in positional),
                          tuple(sorted((p, tuple(sorted(skips))) for p, skips in rolled.items()))))
    return tuple(sorted(set(splits))), tuple(rolls)
