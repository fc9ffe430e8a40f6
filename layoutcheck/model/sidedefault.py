"""A pad side chosen by a parameter's value, and a consumer that reads rows from their start (class 7).

Read once per module, from what the code does, never from names:

* a *side switch* is a function of the module whose pad amount depends on one
  of its parameters compared with a string: ``F.pad(x, (k, 0) if s == "l"
  else (0, k))`` (or the amount through a local). ``(k, 0)`` pads on the
  left, ``(0, k)`` on the right, so each call pads on the side its argument
  for ``s`` (or the parameter's default) selects; a call passing anything but
  a string constant is not judged;
* a *head reader* is a function that zips the rows of one of its parameters
  with a list (through its locals: ``m = mask.clone()``) and reads or writes
  each row's head, ``row[:n]`` with ``n`` the list's entry: it takes the
  row's first ``n`` columns for the sample's first ``n`` tokens, which holds
  only for rows padded on the right;
* the padded tensors follow locals, a tuple returned by a function of the
  module and unpacked by its caller (``a, b = f(...)``).

`left_padded_into_head_readers` flags each left-padding call whose tensor
reaches a head reader. `side_summaries` gives the module's switches and head
readers as facts (`FileFacts.side_summaries`), which the project joins across
modules (`layoutcheck.model.headreach`).
"""

from __future__ import annotations

import ast
import re

from layoutcheck.model.syntax import (
    assigned_before,
    call_arguments,
    defs_with_qualnames,
    dotted,
    functions_by_name,
    inline,
    int_value,
    last_name,
    line_numbers,
    nodes,
    own_nodes,
    own_statements,
    param_names,
    receivers,
    root_name,
    spanning,
    string_value,
    walked_together,
)

__all__ = ["SideSummaries", "left_padded_into_head_readers", "side_summaries"]

SideSummaries = tuple[tuple[tuple[str, str, str, str, str, str], ...], tuple[tuple[str, str], ...]]
"""The module's side switches, (qualname, parameter, constant, side when equal, side otherwise, the
parameter's default as a string constant or ""), and its head readers, (qualname, parameter)."""

_SWITCH_LINE = re.compile(r"\(\s*0\s*,[^\n]*\bif\b[^\n]*\belse\b|,\s*0\s*\)[^\n]*\bif\b[^\n]*\belse\b")
"""A line holding ``(k, 0) if ... else (0, k)`` (either way round): where a side switch can be."""
_HEAD_SLICE = re.compile(r"[\[,]\s*:")
"""A slice from a row's start, ``row[:n]`` or ``rows[i, :n]``: what a head reader reads."""
_ZIP_LINE = re.compile(r"^[ \t]*(?:async[ \t]+)?for\b[^\n]*\b(?:zip|enumerate)\(", re.MULTILINE)
"""A loop over ``zip(...)`` / ``enumerate(...)``: where a head reader can be."""

_PADS = frozenset({"torch.nn.functional.pad", "F.pad", "nn.functional.pad"})


def _pair_side(node: ast.expr) -> str | None:
    """``left`` for ``(k, 0)``, ``right`` for ``(0, k)``."""
    if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
        first, second = (int_value(e) == 0 for e in node.elts[:2])
        if second and not first:
            return "left"
        if first and not second:
            return "right"
    return None


def _switch(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, str, str, str] | None:
    """``(parameter, constant, side when equal, side otherwise)`` of a side switch."""
    params = set(param_names(function))
    for node in own_nodes(function):
        if not (isinstance(node, ast.Call) and (dotted(node.func) in _PADS or last_name(node.func) == "pad")
                and len(node.args) >= 2):
            continue
        amount = node.args[1]
        if isinstance(amount, ast.Name):
            amount = assigned_before(function, node.lineno).get(amount.id, amount)
        if not (isinstance(amount, ast.IfExp) and isinstance(amount.test, ast.Compare)
                and len(amount.test.ops) == 1 and isinstance(amount.test.ops[0], (ast.Eq, ast.NotEq))):
            continue
        test = amount.test
        sides = [_pair_side(amount.body), _pair_side(amount.orelse)]
        if None in sides or sides[0] == sides[1]:
            continue
        for name, const in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
            if isinstance(name, ast.Name) and name.id in params and string_value(const) is not None:
                equal, other = sides if isinstance(test.ops[0], ast.Eq) else sides[::-1]
                return name.id, string_value(const), equal, other  # type: ignore[return-value]
    return None


def _default(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.expr | None:
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        if arg.arg == name:
            return default
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):  # (None where a keyword has no default)
        if arg.arg == name:
            return kw_default
    return None


def _head_reads(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Parameters whose rows are zipped with a list and read from their head (``row[:n]``)."""
    statements = list(own_statements(function))
    loops = [s for s in statements if isinstance(s, ast.For)]
    if not loops:
        return set()
    params = set(param_names(function))
    # each local's value as last assigned on a line before the loop (`assigned_before`, from the statements)
    stores = sorted((s for s in statements if isinstance(s, ast.Assign) and len(s.targets) == 1
                     and isinstance(s.targets[0], ast.Name)), key=lambda s: s.lineno)
    out = set()
    for node in loops:
        bound = {s.targets[0].id: s.value for s in stores if s.lineno < node.lineno}  # type: ignore[attr-defined]
        out |= _indexed_head_reads(node, bound, params)
        walked = walked_together(node)
        if walked is None:
            continue
        names = [name for _, name in walked]
        for rows, row in walked:
            root = root_name(inline(rows, bound))
            if root not in params or row is None:
                continue
            for sub in (n for stmt in node.body for n in ast.walk(stmt)):
                if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == row \
                        and isinstance(sub.slice, ast.Slice) and sub.slice.lower is None \
                        and sub.slice.step is None and isinstance(sub.slice.upper, ast.Name) \
                        and sub.slice.upper.id in names and sub.slice.upper.id != row:
                    out.add(root)
    return out


def _indexed_head_reads(loop: ast.For, bound: dict[str, ast.expr], params: set[str]) -> set[str]:
    """``for i, n in enumerate(sizes): rows[i, :n] = ...`` (or ``rows[i][:n]``): the zip of `_head_reads`
    spelled with the loop's index, each row's head read by the entry walked beside it."""
    target, call = loop.target, loop.iter
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "enumerate"
            and isinstance(target, ast.Tuple) and len(target.elts) == 2
            and all(isinstance(t, ast.Name) for t in target.elts)):
        return set()
    index, entry = target.elts[0].id, target.elts[1].id  # type: ignore[attr-defined]

    def head(part: ast.expr) -> bool:
        return isinstance(part, ast.Slice) and part.lower is None and part.step is None \
            and isinstance(part.upper, ast.Name) and part.upper.id == entry

    def at_index(part: ast.expr) -> bool:
        return isinstance(part, ast.Name) and part.id == index

    out: set[str] = set()
    for sub in (n for stmt in loop.body for n in ast.walk(stmt)):
        if not isinstance(sub, ast.Subscript):
            continue
        rows: ast.expr | None = None
        if isinstance(sub.slice, ast.Tuple) and len(sub.slice.elts) == 2 and at_index(sub.slice.elts[0]) \
                and head(sub.slice.elts[1]):
            rows = sub.value  # rows[i, :n]
        elif head(sub.slice) and isinstance(sub.value, ast.Subscript) and at_index(sub.value.slice):
            rows = sub.value.value  # rows[i][:n]
        if isinstance(rows, ast.Name):
            root = root_name(inline(rows, bound))
            if root in params:
                out.add(root)
    return out


def left_padded_into_head_readers(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """Function node -> (left-padding call, the head reader it reaches) (see the module docs)."""
    switched = [n.lineno for n in nodes(tree) if isinstance(n, ast.IfExp) and isinstance(n.test, ast.Compare)
                and _pair_side(n.body) is not None and _pair_side(n.orelse) is not None]
    zips = [n.lineno for n in nodes(tree) if isinstance(n, ast.For) and walked_together(n) is not None]
    if not switched or not zips:
        return {}
    functions, by_name = functions_by_name(tree)
    methods = receivers(tree)
    unique = {name: found[0] for name, found in by_name.items() if len(found) == 1}
    switches = {f.name: (f, s) for f in spanning(functions, switched) if unique.get(f.name) is f
                and (s := _switch(f)) is not None}
    readers = {f.name: (f, r) for f in spanning(functions, zips) if unique.get(f.name) is f and (r := _head_reads(f))}
    if not switches or not readers:
        return {}

    # Each function's left-padded locals: name -> (the call, its function).
    left: dict[ast.AST, dict[str, tuple[ast.AST, ast.AST]]] = {}
    for function in functions:
        found: dict[str, tuple[ast.AST, ast.AST]] = {}
        for node in own_nodes(function):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call) and last_name(node.value.func) in switches):
                continue
            callee, (param, const, equal, other) = switches[last_name(node.value.func)]
            value = call_arguments(callee, node.value, methods).get(param, _default(callee, param))
            chosen = string_value(value) if value is not None else None
            if chosen is not None and (equal if chosen == const else other) == "left":
                found[node.targets[0].id] = (node.value, function)
        if found:
            left[function] = found
    # Tuples of left-padded locals returned: function name -> position -> the call.
    returned: dict[str, dict[int, tuple[ast.AST, ast.AST]]] = {}
    for function, found in left.items():
        values = [n.value for n in own_nodes(function) if isinstance(n, ast.Return) and n.value is not None]
        if len(values) == 1 and isinstance(values[0], ast.Tuple) and function.name in unique:
            positions = {i: found[e.id] for i, e in enumerate(values[0].elts)
                         if isinstance(e, ast.Name) and e.id in found}
            if positions:
                returned[function.name] = positions
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    for function in functions:
        padded = dict(left.get(function, {}))
        for node in own_nodes(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) \
                    and isinstance(node.value, ast.Call) and last_name(node.value.func) in returned:
                for i, element in enumerate(node.targets[0].elts):
                    if isinstance(element, ast.Name) and i in returned[last_name(node.value.func)]:
                        padded[element.id] = returned[last_name(node.value.func)][i]
        if not padded:
            continue
        for node in own_nodes(function):
            if not (isinstance(node, ast.Call) and last_name(node.func) in readers):
                continue
            reader, params = readers[last_name(node.func)]
            for param, arg in call_arguments(reader, node, methods).items():
                if param in params and isinstance(arg, ast.Name) and arg.id in padded:
                    call, where = padded[arg.id]
                    out.setdefault(where, []).append((call, f"{reader.name}|{node.lineno}"))
    return out


def side_summaries(tree: ast.Module, text: str) -> SideSummaries:
    """The module's side switches and head readers, by qualname (`SideSummaries`): only the functions
    whose lines hold a conditional pair (`_SWITCH_LINE`) or a pairing loop (`_ZIP_LINE`) are read."""
    switched = line_numbers(text, (m.start() for m in _SWITCH_LINE.finditer(text))) \
        if " if " in text and " else " in text else []
    zips = line_numbers(text, (m.start() for m in _ZIP_LINE.finditer(text))) \
        if ("zip(" in text or "enumerate(" in text) and _HEAD_SLICE.search(text) else []  # (the plain searches first)
    if not switched and not zips:
        return (), ()
    defs = list(defs_with_qualnames(tree))
    functions = [f for _, f in defs]
    qualnames = {id(f): q for q, f in defs}
    switches: list[tuple[str, str, str, str, str, str]] = []
    for function in spanning(functions, switched) if switched else ():
        found = _switch(function)
        if found is not None:
            param, const, equal, other = found
            default = _default(function, param)
            switches.append((qualnames[id(function)], param, const, equal, other,
                             string_value(default) or "" if default is not None else ""))
    readers = [(qualnames[id(f)], param) for f in (spanning(functions, zips) if zips else ())
               for param in sorted(_head_reads(f))]
    return tuple(switches), tuple(readers)
