"""Co-indexed values in one function, and where they fall out of step (DESIGN.md section 10).

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
  once that entry is rewritten, the later ones are compared with it cut.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from layoutcheck.model.syntax import int_value, last_name, positional

__all__ = ["misplaced_positions", "moving_reference", "truncated_apart"]

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _blocks(body: Sequence[ast.stmt]) -> Iterator[Sequence[ast.stmt]]:
    """``body`` and every statement list inside it, nested functions and classes left out."""
    yield body
    for stmt in body:
        if isinstance(stmt, _NESTED):
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _blocks(inner)
        for handler in getattr(stmt, "handlers", ()):
            yield from _blocks(handler.body)
        for case in getattr(stmt, "cases", ()):
            yield from _blocks(case.body)


def _window(node: ast.expr) -> ast.Slice | None:
    """The slice of ``x[a:b]`` or of the last axis of ``x[i, a:b]``."""
    if not isinstance(node, ast.Subscript):
        return None
    index = node.slice
    if isinstance(index, ast.Tuple) and index.elts:
        index = index.elts[-1]
    return index if isinstance(index, ast.Slice) and index.step is None else None


def misplaced_positions(body: Sequence[ast.stmt]) -> Iterator[tuple[ast.AST, str]]:
    """Positions ``arange(a, b)`` stored into the slots a data window ``row[lo:hi]`` fills, with
    ``a`` neither 0 (positions counted from each piece's own start) nor computed from ``lo``."""
    for block in _blocks(body):
        data: dict[str, ast.Slice] = {}
        positions: list[tuple[str, ast.Call]] = []
        for stmt in block:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            target, value = stmt.targets[0], stmt.value
            if _window(target) is None:
                continue
            slots = ast.dump(target.slice)  # type: ignore[attr-defined]
            window = _window(value)
            if window is not None and window.lower is not None:
                data.setdefault(slots, window)
            elif isinstance(value, ast.Call) and last_name(value.func) == "arange" and len(positional(value)) >= 2:
                positions.append((slots, value))
        for slots, call in positions:
            window = data.get(slots)
            if window is None or window.lower is None:
                continue
            start = positional(call)[0]
            lower = ast.dump(window.lower)
            if int_value(start) == 0 or any(ast.dump(part) == lower for part in ast.walk(start)):
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


def _cut_side(value: ast.expr, name: str) -> str | None:
    """``start`` for ``name[:k]`` (keeps the start), ``end`` for ``name[-k:]`` (keeps the end)."""
    window = _window(value)
    if window is None or not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
                              and value.value.id == name):
        return None
    lower, upper = window.lower, window.upper
    if lower is None and upper is not None and not (isinstance(upper, ast.UnaryOp) or (int_value(upper) or 0) < 0):
        return "start"
    if upper is None and isinstance(lower, ast.UnaryOp) and isinstance(lower.op, ast.USub):
        return "end"
    return None


def truncated_apart(body: Sequence[ast.stmt]) -> Iterator[tuple[ast.AST, str]]:
    """Lists a loop grows together (`_grown`), re-bound in one block to cuts that keep opposite ends:
    the cut keeping the end (``ids = ids[-k:]``) is flagged when a partner keeps the start."""
    for block in _blocks(body):
        for loop in block:
            if not isinstance(loop, (ast.For, ast.While)):
                continue
            partners = set(_grown(loop))
            if len(partners) < 2:
                continue
            for inner in _blocks(loop.body):
                cuts: list[tuple[ast.Assign, str, str]] = []
                for stmt in inner:
                    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                        name = stmt.targets[0].id
                        side = _cut_side(stmt.value, name) if name in partners else None
                        if side is not None:
                            cuts.append((stmt, name, side))
                keeping = {side for _, _, side in cuts}
                if keeping != {"start", "end"}:
                    continue
                kept_start = [name for _, name, side in cuts if side == "start"]
                for stmt, name, side in cuts:
                    if side == "end":
                        yield stmt.value, ", ".join(f"`{n}`" for n in kept_start)


def moving_reference(body: Sequence[ast.stmt]) -> Iterator[tuple[ast.AST, str]]:
    """``for k, v in d.items():`` rewriting ``d[k]`` while a test in the loop reads ``d["key"]``."""
    for block in _blocks(body):
        for loop in block:
            if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
                    and isinstance(loop.iter.func, ast.Attribute) and loop.iter.func.attr == "items"
                    and isinstance(loop.iter.func.value, ast.Name) and isinstance(loop.target, ast.Tuple)
                    and len(loop.target.elts) == 2 and isinstance(loop.target.elts[0], ast.Name)):
                continue
            record, key = loop.iter.func.value.id, loop.target.elts[0].id
            writes = [t for node in ast.walk(loop) if isinstance(node, ast.Assign) for t in node.targets
                      if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == record
                      and isinstance(t.slice, ast.Name) and t.slice.id == key]
            if not writes:
                continue
            skipped = {c.value for node in ast.walk(loop) if isinstance(node, ast.Compare)
                       and isinstance(node.left, ast.Name) and node.left.id == key
                       for c in node.comparators if isinstance(c, ast.Constant)}
            for node in ast.walk(loop):
                if not isinstance(node, ast.If):
                    continue
                for part in ast.walk(node.test):
                    if isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name) \
                            and part.value.id == record and isinstance(part.slice, ast.Constant) \
                            and isinstance(part.slice.value, str) and part.slice.value not in skipped:
                        yield part, part.slice.value
                        break
