"""A per-row list left out when its rows are stacked with others (class 2), read once per module.

Preference trainers stack two blocks of rows (chosen and rejected answers)
into one batch for a single forward pass. A list with one entry per row of a
block, handed in beside the blocks, must be stacked likewise before it is
zipped with the stacked rows: ``zip`` stops at the shorter, so the second
block's rows are silently skipped. What the code does decides, never names:

* a *stacker* is a function of the module that returns (alone or in a tuple)
  a concatenation along the rows, ``torch.cat([a, b])`` or ``dim=0``;
* a *row zipper* is a function that zips the rows of a tensor parameter
  (through its locals: ``m = mask.clone().bool()``) with another parameter,
  ``for row, n in zip(m, sizes)``;
* `unstacked_row_lists` flags, in a function that gets a stacker's rows and
  passes them to a row zipper, the list passed beside them when it is one of
  the function's own parameters, never rebuilt there: it still has one entry
  per row of a block.
"""

from __future__ import annotations

import ast

from layoutcheck.model.syntax import (
    assigned_before,
    assigned_once,
    call_arguments,
    dotted,
    functions_by_name,
    inline,
    walked_together,
    int_value,
    keyword,
    last_name,
    nodes,
    nodes_of,
    own_nodes,
    param_names,
    receivers,
    root_name,
    spanning,
)

__all__ = ["unstacked_row_lists"]

_CATS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})


def _row_stack(node: ast.expr) -> bool:
    """``torch.cat([a, b])`` or ``torch.cat((a, b), dim=0)``: rows stacked."""
    if not (isinstance(node, ast.Call) and dotted(node.func) in _CATS and node.args):
        return False
    parts = node.args[0]
    if not (isinstance(parts, (ast.List, ast.Tuple)) and len(parts.elts) >= 2):
        return False
    dim = keyword(node, "dim")
    if dim is None and len(node.args) > 1:
        dim = node.args[1]
    return dim is None or int_value(dim) == 0


def _stacked_positions(function: ast.AST) -> set[int | None]:
    """Positions of the returned tuple that are stacked rows (None: the value returned alone)."""
    returns = [n.value for n in own_nodes(function) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1:
        return set()
    bound = assigned_once(function)
    value = returns[0]
    elements = list(enumerate(value.elts)) if isinstance(value, ast.Tuple) else [(None, value)]
    out: set[int | None] = set()
    for i, element in elements:
        if isinstance(element, ast.Name) and element.id in bound:
            element = bound[element.id]
        if _row_stack(element):
            out.add(i)
    return out


def _zipped_rows(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, str]]:
    """``(rows, entries)`` parameter pairs zipped together: the rows of one with the entries of the other."""
    params = set(param_names(function))
    out = []
    for node in nodes(function):  # comprehensions included
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        walked = walked_together(node)
        if walked is None:
            continue
        bound = assigned_before(function, node.iter.lineno)
        args = [arg for arg, _ in walked]
        for rows in args:
            root = root_name(inline(rows, bound))
            if root not in params:
                continue
            for entries in args:
                if isinstance(entries, ast.Name) and entries.id in params and entries.id != root:
                    out.append((root, entries.id))
    return out


def unstacked_row_lists(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """Function node -> (the list argument, the stacked rows' name) for each per-row list passed unstacked
    beside stacked rows to a row zipper (see the module docs)."""
    # By class (`nodes_of`): only the lines matter (`spanning` sorts them), not the order found.
    zips = [n.iter.lineno for kind in (ast.For, ast.comprehension) for n in nodes_of(tree, kind)  # type: ignore[attr-defined]
            if walked_together(n) is not None]
    if not zips:
        return {}
    functions, by_name = functions_by_name(tree)
    unique = {name: found[0] for name, found in by_name.items() if len(found) == 1}
    zippers = {f.name: pairs for f in spanning(functions, zips) if unique.get(f.name) is f
               and (pairs := _zipped_rows(f))}
    if not zippers:
        return {}
    cats = [n.lineno for n in nodes_of(tree, ast.Call) if _row_stack(n)]  # type: ignore[attr-defined]
    stackers = {f.name: positions for f in spanning(functions, cats) if unique.get(f.name) is f
                and (positions := _stacked_positions(f))}
    calls_at = [n.lineno for n in nodes_of(tree, ast.Call) if last_name(n.func) in zippers]  # type: ignore[attr-defined]
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    for function in spanning(functions, calls_at):
        params = set(param_names(function))
        rebuilt: set[str] = set()
        stacked: set[str] = set()
        for node in own_nodes(function):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    rebuilt |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target, value = node.targets[0], node.value
            if _row_stack(value) and isinstance(target, ast.Name):
                stacked.add(target.id)
            elif isinstance(value, ast.Call) and last_name(value.func) in stackers:
                positions = stackers[last_name(value.func)]
                if isinstance(target, ast.Tuple):
                    stacked |= {e.id for i, e in enumerate(target.elts) if i in positions and isinstance(e, ast.Name)}
                elif isinstance(target, ast.Name) and None in positions:
                    stacked.add(target.id)
        if not stacked:
            continue
        for node in own_nodes(function):
            if not (isinstance(node, ast.Call) and last_name(node.func) in zippers):
                continue
            callee = unique[last_name(node.func)]
            given = call_arguments(callee, node, receivers(tree))
            for rows, entries in zippers[last_name(node.func)]:
                row_arg, list_arg = given.get(rows), given.get(entries)
                if isinstance(row_arg, ast.Name) and row_arg.id in stacked and isinstance(list_arg, ast.Name) \
                        and list_arg.id in params and list_arg.id not in rebuilt:
                    out.setdefault(function, []).append((list_arg, row_arg.id))
    return out
