"""A callback that rolls what a splitting forward hands it (class 5), read once per module (issue 28).

A forward that takes a function and a dict of tensors (``logits_processor`` and ``logits_processor_args``)
may cut every entry of the dict the way it cut its inputs (``{k: split(v)[0] for k, v in args.items()}``:
this rank's pieces of each sample) and call the function with them (``fn(output, **pieces)``). A callback
that rolls one of those entries left (``torch.roll(label, -1)``, the next-token targets) rolls a piece:
each piece's last target becomes the first token of the next piece this rank holds. Two facts per module,
joined through the project in `layoutcheck.model.piecereach`:

* a *splitting forward* (`SpreadSplit`): a function that calls one of its parameters with ``**d``, where
  ``d`` maps each key of another parameter (a dict, ``.items()``) to a call's result (or one element of
  it) given the entry's value;
* a *handed callback* (`HandedCallback`): a call that passes a ``def`` of the module (nested in the
  calling function, or at the top) and a dict written in the calling function, with the parameters that
  ``def`` rolls left and where.

What the code does decides, never a name.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left

from layoutcheck.model.origins import qualified, scope_names
from layoutcheck.model.shifts import rolled_left
from layoutcheck.model.syntax import (
    defs_with_qualnames,
    int_value,
    keyword,
    line_numbers,
    param_names,
    positional,
)

__all__ = ["CallbackSummaries", "HandedCallback", "SpreadSplit", "callback_summaries"]

SpreadSplit = tuple[str, str, int, str, int, str, int, tuple[tuple[str, int], ...]]
"""(the forward's qualname; the function parameter it calls and its position; the dict parameter whose
entries it cuts and its position; the callee that cuts each entry, qualified through the module's imports;
the element of its result taken, -1 for all of it; the integer literals that call passes, by keyword or
``#i``)."""
Roll = tuple[str, int, tuple[int, int, int, int], str]
"""A left roll of a parameter of the callback: (the parameter; the axis, ``dims``, -1 when none is given;
the roll's position (line, column, end line, end column; columns from 0); its text)."""
HandedCallback = tuple[str, str, str, str, tuple[str, ...], tuple[Roll, ...]]
"""(the calling function's qualname; the callee as written, qualified through the module's imports; where
the ``def`` is passed and where the dict is, ``#i`` or the keyword; the dict's keys; the ``def`` 's rolls)."""
CallbackSummaries = tuple[tuple[SpreadSplit, ...], tuple[HandedCallback, ...]]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _own_nodes(function: ast.AST):
    """The nodes of ``function``'s body, not those of the ``def`` s and classes nested in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _literals(call: ast.Call) -> tuple[tuple[str, int], ...]:
    out = [(f"#{i}", v) for i, a in enumerate(call.args) if (v := int_value(a)) is not None]
    out += [(k.arg, v) for k in call.keywords if k.arg and (v := int_value(k.value)) is not None]
    return tuple(out)


def _cut_entries(comp: ast.expr, params: list[str], names: dict[str, str]) -> tuple[str, str, int, tuple] | None:
    """``{k: f(v, ...)[e] for k, v in p.items()}`` with ``p`` a parameter: (p, f qualified, e, literals)."""
    if not (isinstance(comp, ast.DictComp) and len(comp.generators) == 1):
        return None
    loop = comp.generators[0]
    source = loop.iter
    if not (isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2
            and all(isinstance(e, ast.Name) for e in loop.target.elts)
            and isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and source.func.attr == "items"
            and isinstance(source.func.value, ast.Name) and source.func.value.id in params):
        return None
    value_name = loop.target.elts[1].id  # type: ignore[attr-defined]
    value: ast.expr = comp.value
    element: int | None = -1
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call):
        element = int_value(value.slice)  # one element of the result, a literal index; else none read
        value = value.value
    if element is None or element < -1 or not isinstance(value, ast.Call):
        return None
    args = positional(value)
    if not (args and isinstance(args[0], ast.Name) and args[0].id == value_name):
        return None
    callee = qualified(value.func, names)
    if callee is None:
        return None
    return source.func.value.id, callee, element, _literals(value)


def _spread_splits(qualname: str, function: ast.FunctionDef | ast.AsyncFunctionDef,
                   names: dict[str, str]) -> list[SpreadSplit]:
    params = param_names(function)
    bound: dict[str, list[ast.expr]] = {}
    calls: list[ast.Call] = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in params \
                and any(kw.arg is None for kw in node.keywords):
            calls.append(node)
    out: list[SpreadSplit] = []
    for node in calls:
        for kw in node.keywords:
            if kw.arg is not None:
                continue
            values = bound.get(kw.value.id, []) if isinstance(kw.value, ast.Name) else [kw.value]
            if not values or not all(isinstance(v, ast.DictComp) for v in values):
                continue
            local = _names_in(function, names)
            # the dict spread is the cut entries on every path it is bound on
            cuts = [_cut_entries(v, params, local) for v in values]
            if all(c is not None and c == cuts[0] for c in cuts):
                source, callee, element, literals = cuts[0]  # type: ignore[misc]
                called = node.func.id  # type: ignore[attr-defined]
                out.append((qualname, called, params.index(called), source, params.index(source), callee, element,
                            literals))
    return out


def _rolls(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Roll]:
    params = set(param_names(function))
    out: list[Roll] = []
    for node in _own_nodes(function):
        rolled = rolled_left(node)
        if not (isinstance(node, ast.Call) and isinstance(rolled, ast.Name) and rolled.id in params):
            continue
        dims = keyword(node, "dims")
        if dims is None:
            args = positional(node)
            at = 1 if isinstance(node.func, ast.Attribute) and node.func.value is rolled else 2
            dims = args[at] if len(args) > at else None
        axis = -1 if dims is None else int_value(dims)
        if axis is None:
            continue
        where = (node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)
        out.append((rolled.id, axis, where, ast.unparse(node)))
    return out


def _handed(qualname: str, function: ast.FunctionDef | ast.AsyncFunctionDef, module_names: dict[str, str],
            rolls: dict[str, list[Roll]]) -> list[HandedCallback]:
    """The calls in ``function`` passing a ``def`` that rolls (``rolls``, by the name the function reaches
    it under) beside a dict it writes."""
    dicts: dict[str, list[ast.Dict]] = {}
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Dict):
            dicts.setdefault(node.targets[0].id, []).append(node.value)
    out: list[HandedCallback] = []
    for node in _own_nodes(function):
        if not isinstance(node, ast.Call):
            continue
        given = [(f"#{i}", a) for i, a in enumerate(node.args) if not isinstance(a, ast.Starred)]
        given += [(k.arg, k.value) for k in node.keywords if k.arg is not None]
        passed = [(slot, rolls[a.id]) for slot, a in given if isinstance(a, ast.Name) and a.id in rolls]
        if not passed:
            continue
        for slot, value in given:
            written = dicts.get(value.id, []) if isinstance(value, ast.Name) else [value]
            if not written or not all(isinstance(d, ast.Dict) for d in written):
                continue
            keys = sorted({k.value for d in written for k in d.keys  # type: ignore[attr-defined]
                           if isinstance(k, ast.Constant) and isinstance(k.value, str)})
            if not keys:
                continue
            callee = qualified(node.func, _names_in(function, module_names))
            if callee is None:
                continue
            for fn_slot, found in passed:
                out.append((qualname, callee, fn_slot, slot, tuple(keys), tuple(found)))
    return out


def _names_in(function: ast.AST, names: dict[str, str]) -> dict[str, str]:
    """The module's names with those the function imports itself."""
    imports: list[ast.stmt] = [s for s in _own_nodes(function) if isinstance(s, (ast.Import, ast.ImportFrom))]
    if not imports:
        return names
    local = dict(names)
    scope_names(imports, local)
    return local


def callback_summaries(tree: ast.Module, text: str) -> CallbackSummaries:
    """The module's splitting forwards and handed callbacks (the module docs). Only the functions spanning
    lines that spell a loop over a name's ``.items()`` and ``**name`` (a forward), or ``roll(`` (a
    callback's roll, nested in the function or a top-level ``def`` of the module), are read."""
    forward_lines = sorted(set(line_numbers(text, (m.start() for m in re.finditer(
        r"for\s+\w+\s*,\s*\w+\s+in\s+\w+\.items\(\)", text)))))
    roll_lines = sorted(set(line_numbers(text, (m.start() for m in re.finditer(r"roll\(", text)))))
    spread_lines = sorted(set(line_numbers(text, (m.start() for m in re.finditer(
        r"\*\*[A-Za-z_]", text))))) if forward_lines else []
    if not ((forward_lines and spread_lines) or roll_lines):
        return (), ()
    names: dict[str, str] = {}
    scope_names(tree.body, names)
    splits: list[SpreadSplit] = []
    handed: list[HandedCallback] = []
    top_rolls: dict[str, list[Roll]] = {}
    for stmt in tree.body:
        if isinstance(stmt, _FUNCTIONS) and _spans(roll_lines, stmt):
            found = _rolls(stmt)
            if found:
                top_rolls[stmt.name] = found
    # a top-level roller reaches a call only where its name is passed (`f(x, fn=name)`, `f(name, ...)`)
    alternatives = "|".join(map(re.escape, top_rolls))
    handing = sorted(set(line_numbers(text, (m.start() for m in re.finditer(
        rf"[(,=]\s*(?:{alternatives})\b", text))))) if top_rolls else []
    for qualname, function in defs_with_qualnames(tree):
        if _spans(spread_lines, function) and _spans(forward_lines, function):
            splits.extend(_spread_splits(qualname, function, names))
        if _spans(handing, function) or _spans(roll_lines, function):
            nested = {s.name: _rolls(s) for s in function.body
                      if isinstance(s, _FUNCTIONS) and _spans(roll_lines, s)}
            reach = {**(top_rolls if _spans(handing, function) else {}),
                     **{name: found for name, found in nested.items() if found}}
            if reach:
                handed.extend(_handed(qualname, function, names, reach))
    return tuple(splits), tuple(handed)


def _spans(lines: list[int], node: ast.AST) -> bool:
    at = bisect_left(lines, node.lineno)  # type: ignore[attr-defined]
    return at < len(lines) and lines[at] <= (node.end_lineno or node.lineno)  # type: ignore[attr-defined]
