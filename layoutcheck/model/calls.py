"""Call sites read through their callee: the stage before the per-file walk.

The checks of the per-file phase read a value through the expression it was
bound to, and a call of the module's own function through what that function
returns. Real code moves a value through calls in ways that keep its meaning
but not its shape; `read_calls_through` rewrites a module's tree (in place: the
per-file walk's own parse) so that each of these reads as the plain call
the checks already follow, with every node keeping its position (a finding
lands where it would in the source):

* **one element of a tuple return**: a function of the module whose every
  ``return`` gives a tuple of ``n`` (no ``yield``), and whose every use in
  the module is a call that takes the same element ``k`` of the result
  (``f(...)[k]``, or ``a, b = f(...)`` with every target but the ``k``-th
  never read in the module), is read as returning that element: its
  returns give ``e_k`` and its calls are the calls themselves (``b = f(...)``).
  What the other elements hold is dropped by every caller, so nothing is lost;
  a function whose callers take different elements is left as is (the
  project's summary by element, `Function.returns_elements`, reads it), and
  a projected ``return`` keeps its whole tuple (`returned_tuple`) for the
  summaries that callers in other modules read by element
  (`layoutcheck.model.summaries`; the summary by element of the walk,
  `Function.returns_elements`, is the projected element's, which the
  module's own callers read);
* **a partial application**: ``g = functools.partial(f, a, k=v)`` (in a
  function or at module level, bound once), then ``g(x)``: the call is read
  as ``f(a, x, k=v)``;
* **a DataLoader's collate function**: ``loader = DataLoader(ds, collate_fn=f)``
  (a local, or an attribute of the method's instance stored in any method of
  its class), then ``for batch in loader:`` (or ``enumerate(loader)``): what
  the loop binds is what ``f`` returns for a list of samples, so the loop
  reads as ``for b in loader: batch = f(b)`` (``collate_fn=partial(g, ...)``
  as ``g(..., b)``). Across modules the two ends meet at a constructor: a call that
  passes such a loader carries ``f``'s result beside it (`COLLATE_AT` /
  `COLLATE_FOR`), and a loop over ``self.x`` stored from the constructor's
  parameter ``p`` binds ``layoutcheck_batches_of_p(b)`` (`BATCHES_OF`), which the
  project resolves to ``f``. The loader's call itself gets ``f([ds.__getitem__(0)])``
  beside it (`ITEMS`): ``f`` is called on a list of the dataset's items;
* **a function assigned onto a class**: ``Cls.name = f`` at module level (``Cls``
  and ``f`` the module's own), then ``self.name(x)`` in a method of ``Cls``: the
  call is ``f(self, x)``. Assignments onto a class of another module (``mod.Cls.name
  = f``, ``setattr(Cls, "name", f)``, in a function too) are listed for the project
  (`methods_assigned`), which reads ``self.name(x)`` there through them;
* **a forward of ``*args`` / ``**kwargs``**: a module-level function whose body is
  only ``return g(x, *args, **kwargs)`` (every parameter passed on, once),
  called ``w(a, b, k=v)`` in the module: the call is ``g(a, b, k=v)``, each of the
  caller's arguments where the forward puts it (the project follows forwards
  across modules and through longer bodies, `summaries.forwarded_calls`).

Each is decided by what the code does with the values, never by a name.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import copy
import functools
import re
from collections.abc import Callable, Collection, Iterator

from layoutcheck.model.syntax import (
    breadth_first,
    children,
    dotted,
    forget_nodes,
    is_dataloader,
    line_numbers,
    method_receiver,
    nodes_of,
    own_nodes,
    own_statements,
)

__all__ = [
    "BATCHES_BUILT", "BATCHES_OF", "COLLATE_AT", "COLLATE_FOR", "DATASET", "ITEMS", "LOADER_GIVEN", "may_assign_methods",
    "methods_assigned",
    "read_calls_through", "returned_tuple", "rewrite_calls",
]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_ELEMENT_OF_CALL = re.compile(r"^.*\)[ \t]*\[[ \t]*-?\d+[ \t]*\].*$", re.MULTILINE)
"""A line where a call's result is subscripted by a constant (``f(x)[1]``): where a projection may apply."""
_ELEMENT_AFTER_CALL = re.compile(r"\)[ \t]*\[[ \t]*-?\d+[ \t]*\]")
"""The part of `_ELEMENT_OF_CALL` past its line's start: every line that matches holds it (a search that
never backtracks over a whole line)."""
_CALLED = re.compile(r"(\w+)\(")
_UNPACKED_CALL = re.compile(r"^[ \t]*[(\[]?[\w.\[\]]+[ \t]*,[^=\n]*=[ \t]*(\w+)\(", re.MULTILINE)
"""A tuple unpacked from a call (``a, b = f(``), as text, with the function's name."""
_PARTIAL_BOUND = re.compile(r"=\s*(?:functools\.)?partial\(")
"""``g = partial(`` / ``g = functools.partial(``: where `_partials` can find something."""
_STORED_LOOP = re.compile(r"in (?:enumerate\()?\w+\.\w+\)?:")
"""``for b in self.loader:`` (or ``enumerate(self.loader)``; the receiver by any name), as text: where
`_stored_loader_loops` can find something."""
BATCHES_OF = "layoutcheck_batches_of_"
"""The callee a loop over a constructor's parameter stored on the instance binds its batch to
(``layoutcheck_batches_of_loader(samples)``): the project resolves it to the collate function the
constructor's callers hand on with that argument (`COLLATE_AT`, `COLLATE_FOR`)."""
BATCHES_BUILT = "layoutcheck_batches_built"
LOADER_GIVEN = "layoutcheck_loader"
"""The callee a loop over a loader some call built binds its batch to, the loader given beside it by this
keyword (``for b in loader:`` with ``loader = strategy.setup_dataloader(ds, 1, collate_fn=ds.collate_fn)``
reads ``b = layoutcheck_batches_built(samples, layoutcheck_loader=loader)``; so for ``self.loader`` stored
once in the class from such a call). The project resolves it to the collate function the builder puts
in the DataLoader it returns (`layoutcheck.model.origins.Handed`); a call that builds no such loader
reaches nothing known (the loop's batch is unknown, as before)."""
_LOOPED = re.compile(r"for[ \t][^\n:]*?[ \t]in[ \t]+(?:tqdm\(|enumerate\()?(\w+)[ \t),:]")
"""A loop over a name, as text (a literal first: the search skips to each ``for``); with the name stored
somewhere (``name =``), where `_built_loader_loops` can find something."""
COLLATE_AT = "layoutcheck_collate_at_"
COLLATE_FOR = "layoutcheck_collate_for_"
"""The keyword a call that passes a DataLoader given ``collate_fn=f`` gets beside it: ``f(loader)``, named
by the position (``layoutcheck_collate_at_0``) or the keyword (``layoutcheck_collate_for_loader``) the
loader is passed at. No parameter takes it; the project reads the collate function from it."""
_ITEMS_AT = "layoutcheck_items_at"
"""The attribute `_loader_loops` sets on a loop over a loader another method built: its dataset's item."""
ITEMS = "layoutcheck_items"
DATASET = "layoutcheck_dataset"
"""The keyword a ``DataLoader(ds, collate_fn=f)`` gets, holding ``f([ds.__getitem__(0)])`` (`_hand_items_to_collate`),
and the name that stands for a dataset built in the loader's call (``DataLoader(Pairs(rows), ...)``)."""
_BUILTIN_NAMES = frozenset(dir(builtins))
_LIBRARY_HEADS = frozenset({"torch", "F", "nn", "np", "numpy", "math", "itertools", "functools", "random", "os",
                            "json", "re", "dist", "collections", "operator"})
"""Names a call through which builds no loader of the project's (``torch.split``, ``np.array_split``): the
libraries' usual names, as `_may_build_loader` reads a callee's head."""
"""``len(loader)``, ``enumerate(loader)``: calls that take a loader but never store it."""
_WHOLE = "layoutcheck_whole"
"""The attribute a projected ``return`` keeps its whole tuple in."""


def returned_tuple(node: ast.Return) -> ast.expr | None:
    """What ``node`` returns as written: the whole tuple of a return `read_calls_through` projected to one
    element (the module's callers take that element; the function's summary for other modules is the
    tuple's), else its value."""
    return getattr(node, _WHOLE, node.value)


def read_calls_through(tree: ast.Module, source: str) -> ast.Module:
    """``tree`` (parsed from ``source``), each call in it that is read through its callee rewritten in place
    (module docstring): the per-file walk owns the tree it parsed, and copying a tree costs more than
    the walk saves."""
    return rewrite_calls(tree, source)[0]


def rewrite_calls(tree: ast.Module, source: str) -> tuple[ast.Module, bool]:
    """`read_calls_through`, and whether it may have rewritten anything (False only when no stage applied:
    then every function reads as written, whatever the rest of the module holds)."""
    changed = False
    loops = _loader_loops(tree) if "collate_fn" in source and "DataLoader" in source else []
    if _STORED_LOOP.search(source):
        loops += _stored_loader_loops(tree, {id(loop) for loop, _, _ in loops})
    if "for" in source:
        looped = [(m.start(), m.group(1)) for m in _LOOPED.finditer(source)]
        bound = {name for name in {name for _, name in looped} if _bound_to_call(source, name)}
        lines = line_numbers(source, [at for at, name in looped if name in bound]) if bound else []
        if lines:
            loops += _built_loader_loops(tree, {id(loop) for loop, _, _ in loops}, set(lines))
    if loops:
        _read_batches_through_collate(tree, loops)
        changed = True
    if "collate_fn" in source and "DataLoader" in source:
        _hand_collate_on(tree)
        _hand_items_to_collate(tree)
        changed = True
    if "(*" in source or "**" in source:
        forwarders = _forwarders(tree)
        if forwarders:
            _call_through_forwarders(tree, forwarders)
            changed = True
    assigned = _assigned_methods(tree)
    if assigned:
        _call_assigned_methods(tree, assigned)
        changed = True
    projections = _projections(tree, source) if "return" in source else {}
    if projections:
        _project(tree, projections)
        forget_nodes(tree)  # `_projections` listed the nodes before the rewrite
        changed = True
    if _PARTIAL_BOUND.search(source):
        partials = _partials(tree)
        if partials:
            _apply_partials(tree, partials)
            forget_nodes(tree)
            changed = True
    return tree, changed


def _projections(tree: ast.Module, source: str) -> dict[str, int]:
    """The module's functions read as returning one element of their tuple, with the element (module docs).

    The text first: a function is a candidate only where the module unpacks a call of it, or calls it on
    a line that subscripts a call's result by a constant (most modules do neither). Then one walk of the module finds the functions
    some call takes an element of, and whether every use of each is such a call; only those functions'
    bodies are read for their returns."""
    names = {stmt.name for stmt in tree.body if isinstance(stmt, _FUNCTIONS)}
    if names:
        # `_UNPACKED_CALL` line by line, on the lines with a comma and an `=` only: the same matches (none
        # crosses a line), at a third of the cost of the regular expression tried at every offset of the module.
        called = set()
        for line in source.split("\n"):
            if "," in line and "=" in line:  # both in every line it matches
                found = _UNPACKED_CALL.match(line)
                if found is not None:
                    called.add(found.group(1))
        if _ELEMENT_AFTER_CALL.search(source):  # the whole lines only where one can match (most modules: none)
            called.update(m.group(1) for line in _ELEMENT_OF_CALL.findall(source) for m in _CALLED.finditer(line))
        names &= called
    if not names:
        return {}
    # The module's nodes by class (`nodes_of`, kept for the readers after this stage; `read_calls_through`
    # drops them when a rewrite follows). The order of the uses found does not matter: one use that is
    # not an element, or two elements, and the function is not read as one.
    taken: dict[str, list[int | list[ast.expr]]] = {}
    for node in nodes_of(tree, ast.Subscript):
        value = node.value  # type: ignore[attr-defined]
        if type(value) is ast.Call and type(value.func) is ast.Name and value.func.id in names:
            index = node.slice  # type: ignore[attr-defined]
            if isinstance(index, ast.Constant) and type(index.value) is int:
                taken.setdefault(value.func.id, []).append(index.value)
    for node in nodes_of(tree, ast.Assign):
        value = node.value  # type: ignore[attr-defined]
        if type(value) is ast.Call and type(value.func) is ast.Name and value.func.id in names \
                and len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List)):  # type: ignore[attr-defined]
            taken.setdefault(value.func.id, []).append(node.targets[0].elts)  # type: ignore[attr-defined]
    if not taken:
        return {}
    used: dict[str, int] = {}
    loads: set[str] = set()
    for node in nodes_of(tree, ast.Name):
        if type(node.ctx) is ast.Load:  # type: ignore[attr-defined]
            loads.add(node.id)  # type: ignore[attr-defined]
            if node.id in taken:  # type: ignore[attr-defined]
                used[node.id] = used.get(node.id, 0) + 1  # type: ignore[attr-defined]
    out: dict[str, int] = {}
    candidates = {name for name, uses in taken.items() if len(uses) == used.get(name)}
    if not candidates:
        return out
    for name, returns in _tuple_returns(tree, candidates).items():
        length = len(returns[0].value.elts)  # type: ignore[union-attr]
        elements: set[int] = set()
        for use in taken[name]:
            if isinstance(use, int):
                if not -length <= use < length:
                    break
                elements.add(use % length)
            else:
                if len(use) != length or any(isinstance(t, ast.Starred) for t in use):
                    break
                # the targets read anywhere in the module (a target never read is dropped)
                live = [i for i, t in enumerate(use) if not (isinstance(t, ast.Name) and t.id not in loads)]
                if len(live) != 1:
                    break
                elements.add(live[0])
            if len(elements) > 1:
                break
        else:
            if len(elements) == 1:
                out[name] = elements.pop()
    return out


def _tuple_returns(tree: ast.Module, candidates: set[str]) -> dict[str, list[ast.Return]]:
    """The module-level functions whose every ``return`` gives a tuple of one length (no ``yield``, no
    starred element, no bare ``return``, and no way to fall off the end), by name."""
    out: dict[str, list[ast.Return]] = {}
    names: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            names[stmt.name] = names.get(stmt.name, 0) + 1
    for stmt in tree.body:
        if not isinstance(stmt, _FUNCTIONS) or stmt.name not in candidates or names[stmt.name] != 1 \
                or stmt.decorator_list:
            continue
        if not stmt.body or not isinstance(stmt.body[-1], (ast.Return, ast.Raise)):
            continue
        returns: list[ast.Return] = []
        ok = True
        for node in own_nodes(stmt):
            if isinstance(node, (ast.Yield, ast.YieldFrom)):
                ok = False
                break
            if isinstance(node, ast.Return):
                value = node.value
                if not isinstance(value, ast.Tuple) or any(isinstance(e, ast.Starred) for e in value.elts):
                    ok = False
                    break
                returns.append(node)
        if ok and returns and len({len(r.value.elts) for r in returns}) == 1:  # type: ignore[union-attr]
            out[stmt.name] = returns
    return out


def _project(tree: ast.Module, projections: dict[str, int]) -> None:
    """Rewrite (in place) each projected function and its calls."""
    for stmt in tree.body:
        if isinstance(stmt, _FUNCTIONS) and stmt.name in projections:
            k = projections[stmt.name]
            for node in own_nodes(stmt):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
                    # The whole tuple stays readable: callers in other modules may take other elements
                    # (`returned_tuple`: the summaries of `layoutcheck.model.summaries` read it).
                    setattr(node, _WHOLE, node.value)
                    node.value = node.value.elts[k]
    for parent in _walk_all(tree):
        # a tuple unpacked from the call itself (before ``f(...)[k]`` below becomes the call)
        if isinstance(parent, ast.Assign) and _projected_call(parent.value, projections) \
                and len(parent.targets) == 1 and isinstance(parent.targets[0], (ast.Tuple, ast.List)):
            k = projections[parent.value.func.id]  # type: ignore[union-attr]
            parent.targets = [parent.targets[0].elts[k]]
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    replaced = _unprojected(item, projections)
                    if replaced is not None:
                        value[i] = replaced
            else:
                replaced = _unprojected(value, projections)
                if replaced is not None:
                    setattr(parent, field, replaced)


def _projected_call(node: object, projections: dict[str, int]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in projections


def _unprojected(node: object, projections: dict[str, int]) -> ast.expr | None:
    """The call of ``f(...)[k]`` (``f`` projected to ``k``), else None."""
    if isinstance(node, ast.Subscript) and _projected_call(node.value, projections):
        return node.value  # type: ignore[return-value]
    return None


def _walk_all(tree: ast.AST) -> Iterator[ast.AST]:
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _is_partial(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    return (isinstance(func, ast.Attribute) and func.attr == "partial" and isinstance(func.value, ast.Name)
            and func.value.id == "functools") or (isinstance(func, ast.Name) and func.id == "partial")


def _partials(tree: ast.Module) -> dict[tuple[int, str], ast.Call]:
    """``g = functools.partial(f, ...)`` bound once in its scope (a function's id, or 0 for the module),
    ``f`` a plain name or attribute: by scope and name."""
    found: dict[tuple[int, str], list[ast.AST]] = {}
    functions: list[ast.AST] = []
    spans: list[tuple[int, int]] = []
    for node in breadth_first(tree):
        kind = type(node)
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            functions.append(node)
        elif kind is ast.Call and _is_partial(node):
            spans.append((node.lineno, node.end_lineno or node.lineno))  # type: ignore[attr-defined]
    # A function spanning no partial call binds no name to one: its bindings cannot give a partial.
    scopes: list[ast.AST] = [tree, *(f for f in functions if _spans(f, spans))]
    for scope in scopes:
        key = 0 if scope is tree else id(scope)
        body = scope.body if isinstance(scope, ast.Module) else [scope]
        for stmt in body:
            for node in (own_nodes(stmt) if scope is not tree else [stmt]):
                if node is scope:
                    continue
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            found.setdefault((key, target.id), []).append(node.value)
    out: dict[tuple[int, str], ast.Call] = {}
    for (key, name), values in found.items():
        if len(values) == 1 and _is_partial(values[0]):
            call = values[0]
            if call.args and isinstance(call.args[0], (ast.Name, ast.Attribute)) \
                    and not any(isinstance(a, ast.Starred) for a in call.args) \
                    and all(k.arg is not None for k in call.keywords):
                out[(key, name)] = call
    return out


def _apply_partials(tree: ast.Module, bound: dict[tuple[int, str], ast.Call]) -> None:
    """Each call of a partial read as the call of its function with the bound arguments first (in place)."""
    # a stack, not a recursive closure (a closure that calls itself is a reference cycle: the lint's
    # workers run with the collector off, so every tree must go by reference counting)
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, scope = stack.pop()
        # `children`: `ast.iter_child_nodes`' order, less the contexts and operators (no call among them)
        stack.extend([(child, id(child) if isinstance(child, _FUNCTIONS) else scope) for child in children(node)])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            partial = bound.get((scope, node.func.id)) or bound.get((0, node.func.id))
            if partial is None:
                continue
            given = {k.arg for k in node.keywords}
            node.func = ast.copy_location(copy.deepcopy(partial.args[0]), node)
            node.args = [*(copy.deepcopy(a) for a in partial.args[1:]), *node.args]
            node.keywords = [*(copy.deepcopy(k) for k in partial.keywords if k.arg not in given), *node.keywords]


def _is_loader(node: ast.AST) -> ast.expr | None:
    """The ``collate_fn=`` of ``DataLoader(..., collate_fn=f)``, else None."""
    if not is_dataloader(node):
        return None
    for keyword in node.keywords:  # type: ignore[attr-defined]
        if keyword.arg == "collate_fn" and isinstance(keyword.value, (ast.Name, ast.Attribute, ast.Call)) \
                and (not isinstance(keyword.value, ast.Call) or _is_partial(keyword.value)):
            return keyword.value
    return None


def _instance(function: ast.AST) -> str | None:
    """The name of a method's instance (its receiver, `method_receiver`: the first parameter whatever it
    is called; None for a ``@staticmethod``), or None for a function outside a class."""
    if not isinstance(function, _FUNCTIONS):
        return None
    return method_receiver(function)


def _local_loaders(function: ast.AST) -> dict[str, ast.expr]:
    """The locals of ``function`` bound once, to a DataLoader given a collate function, or to a progress bar
    over one (`_wrapped`): name -> that function."""
    stores: dict[str, int] = {}
    found: dict[str, ast.expr] = {}
    wrappers: list[tuple[str, ast.expr]] = []
    for node in own_nodes(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    stores[target.id] = stores.get(target.id, 0) + 1
                    collate = _is_loader(node.value) if len(node.targets) == 1 else None
                    if collate is not None:
                        found[target.id] = collate
                    elif len(node.targets) == 1 and (inner := _wrapped(node.value)) is not None:
                        wrappers.append((target.id, inner))
    local = {name: collate for name, collate in found.items() if stores[name] == 1}
    for name, inner in wrappers:  # `pbar = tqdm(loader)`: the batches of the loader it wraps
        collate = _loader_collate(inner, local)
        if collate is not None and stores[name] == 1:
            local[name] = collate
    return local


def _wrapped(value: ast.expr) -> ast.expr | None:
    """The iterable a progress bar wraps (``tqdm(loader, desc=...)``, ``tqdm.tqdm(loader)``): it yields
    that iterable's items as they are, else None."""
    if isinstance(value, ast.Call) and value.args and not isinstance(value.args[0], ast.Starred):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name == "tqdm":
            return value.args[0]
    return None


def _loader_collate(value: ast.expr, local: dict[str, ast.expr]) -> ast.expr | None:
    """The collate function of a DataLoader built in ``value`` (or wrapped there in a progress bar,
    `_wrapped`), or held by a local of `_local_loaders`."""
    if isinstance(value, ast.Call):
        collate = _is_loader(value)
        inner = _wrapped(value) if collate is None else None
        return _loader_collate(inner, local) if inner is not None else collate
    return local.get(value.id) if isinstance(value, ast.Name) else None


def _loader_loops(tree: ast.Module) -> list[tuple[ast.For, ast.expr, int]]:
    """Each ``for`` over a DataLoader given a collate function: the loop, the collate function, and the
    position in the loop's target of the batch (0, or 1 for ``enumerate(loader)``)."""
    out: list[tuple[ast.For, ast.expr, int]] = []
    classes, functions, loaders = _loader_scopes(tree)
    methods = {id(f): c for c in classes for f in c.body if isinstance(f, _FUNCTIONS)}
    by_attr: dict[tuple[int, str], ast.expr] = {}
    items: dict[tuple[int, str], tuple[ast.Call, str | None, dict[str, ast.Call]]] = {}
    """The DataLoader stored in each attribute, with the receiver of the method storing it and that method's
    locals bound once to a call."""
    for cls in classes:
        for method in cls.body:
            if not isinstance(method, _FUNCTIONS) or not _spans(method, loaders):
                continue  # (a method building no DataLoader stores none)
            me = _instance(method)
            built = _built_once(method)
            for node in own_nodes(method):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, collate = node.targets[0], _is_loader(node.value)
                    if collate is not None and isinstance(target, ast.Attribute) \
                            and isinstance(target.value, ast.Name) and target.value.id == me:
                        by_attr[(id(cls), target.attr)] = collate
                        items[(id(cls), target.attr)] = (node.value, me, built)  # type: ignore[assignment]
    stored_in = {key for key, _ in by_attr}
    # the module's own statements too: a script's top level is code like a function's
    for function in (tree, *functions):
        holder = methods.get(id(function))
        if function is not tree and (holder is None or id(holder) not in stored_in) and not _spans(function, loaders):
            continue  # no DataLoader built in it and none stored on its instance: no loop of it can match
        local = _local_loaders(function)
        me = _instance(function) if holder is not None else None
        for node in own_nodes(function):
            if not isinstance(node, (ast.For, ast.AsyncFor)) or not node.body:
                continue
            source, at = node.iter, 0
            if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "enumerate" \
                    and len(source.args) == 1 and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2:
                source, at = source.args[0], 1
            collate = _loader_collate(source, local)
            if collate is None and holder is not None and isinstance(source, ast.Attribute) and isinstance(source.value, ast.Name) \
                    and source.value.id == me:
                collate = by_attr.get((id(holder), source.attr))
                if collate is not None:
                    # the loop is in another method than the loader's call: its batches are the collate
                    # function's result on the dataset's items, spelt here (`_read_batches_through_collate`)
                    loader, stored_by, built = items[(id(holder), source.attr)]
                    item = _dataset_item(loader, stored_by, me, built)
                    if item is not None:
                        setattr(node, _ITEMS_AT, item)
            if collate is not None:
                out.append((node, collate, at))
    return out


def _loader_scopes(tree: ast.Module) -> tuple[list[ast.ClassDef], list[ast.AST], list[tuple[int, int]]]:
    """The module's classes and functions (in `breadth_first` order), and the lines each DataLoader given
    a collate function (`_is_loader`) spans, from one walk: a function spanning none of them builds no
    loader, so `_local_loaders` finds none in it and no value of it is a loader built there."""
    classes: list[ast.ClassDef] = []
    functions: list[ast.AST] = []
    loaders: list[tuple[int, int]] = []
    for node in breadth_first(tree):
        kind = type(node)
        if kind is ast.Call:
            if _is_loader(node) is not None:
                loaders.append((node.lineno, node.end_lineno or node.lineno))  # type: ignore[attr-defined]
        elif kind is ast.ClassDef:
            classes.append(node)  # type: ignore[arg-type]
        elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            functions.append(node)
    return classes, functions, loaders


def _spans(function: ast.AST, spans: list[tuple[int, int]]) -> bool:
    """Does ``function`` hold one of ``spans`` (its lines within the function's, its decorators' included:
    they are its own nodes too, on the lines above its ``def``)?"""
    first, last = function.lineno, function.end_lineno or function.lineno  # type: ignore[attr-defined]
    for decorator in function.decorator_list:  # type: ignore[attr-defined]
        first = min(first, decorator.lineno)
    return any(first <= start and end <= last for start, end in spans)


def _read_batches_through_collate(tree: ast.Module, loops: list[tuple[ast.For, ast.expr, int]]) -> None:
    """Each loop of `_loader_loops` (nodes of ``tree`` itself) made to bind a fresh name, and its batch
    bound to the collate function's result on that name first thing in the body (in place)."""
    for count, (loop, collate, at) in enumerate(loops):
        batch = loop.target.elts[at] if at else loop.target  # type: ignore[attr-defined]
        fresh = ast.copy_location(ast.Name(id=f"layoutcheck_samples_{count}", ctx=ast.Store()), batch)
        if at:
            loop.target.elts[at] = fresh  # type: ignore[attr-defined]
        else:
            loop.target = fresh
        samples: ast.expr = ast.copy_location(ast.Name(id=fresh.id, ctx=ast.Load()), batch)
        item = getattr(loop, _ITEMS_AT, None)
        if item is not None:  # the loader built in another method: its dataset's items, spelt here
            samples = ast.List(elts=[item], ctx=ast.Load())
        if isinstance(collate, ast.Call) and isinstance(collate.func, ast.Name) and collate.func.id == BATCHES_BUILT:
            call = ast.Call(func=collate.func, args=[samples], keywords=collate.keywords)
        elif isinstance(collate, ast.Call):  # partial(g, a, k=v): g(a, samples, k=v)
            call = ast.Call(func=copy.deepcopy(collate.args[0]), args=[*map(copy.deepcopy, collate.args[1:]), samples],
                            keywords=[copy.deepcopy(k) for k in collate.keywords])
        else:
            call = ast.Call(func=copy.deepcopy(collate), args=[samples], keywords=[])
        for node in ast.walk(call):  # the whole call stands on the loop's target (a finding lands there)
            ast.copy_location(node, batch)
        bind = ast.copy_location(ast.Assign(targets=[batch], value=call), batch)
        bind.end_lineno, bind.end_col_offset = batch.end_lineno, batch.end_col_offset  # type: ignore[attr-defined]
        loop.body.insert(0, bind)


def _assigned_methods(tree: ast.Module) -> dict[tuple[str, str], str]:
    """``Cls.name = f`` at module level, ``Cls`` a class and ``f`` a function of the module (each defined
    once): ``(class, name) -> f``."""
    defined: dict[str, list[ast.AST]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            defined.setdefault(stmt.name, []).append(stmt)
    out: dict[tuple[str, str], str] = {}
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Name)):
            continue
        target = stmt.targets[0]
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            owner, function = defined.get(target.value.id, []), defined.get(stmt.value.id, [])
            if len(owner) == 1 and isinstance(owner[0], ast.ClassDef) and len(function) == 1 \
                    and isinstance(function[0], _FUNCTIONS):
                out[(target.value.id, target.attr)] = stmt.value.id
    return out


def _call_assigned_methods(tree: ast.Module, assigned: dict[tuple[str, str], str]) -> None:
    """``self.name(x)`` in a method of ``Cls`` read as ``f(self, x)`` for each ``Cls.name = f`` (in place)."""
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or not any(c == cls.name for c, _ in assigned):
            continue
        for method in cls.body:
            me = _instance(method) if isinstance(method, _FUNCTIONS) else None
            if me is None:
                continue
            for node in own_nodes(method):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == me:
                    function = assigned.get((cls.name, node.func.attr))
                    if function is not None:
                        receiver = node.func.value
                        node.func = ast.copy_location(ast.Name(id=function, ctx=ast.Load()), node.func)
                        node.args = [receiver, *node.args]


_ASSIGNED_ONTO = re.compile(r"\.\w+ = [A-Za-z_][\w.]*\n")
"""``a.B.name = f`` (as formatters write it), as text: with ``setattr(``, where `methods_assigned` can find
something (a cheap scan: most modules have neither). Two searches, not one alternation: a pattern that
begins with a literal is scanned for it, an alternation tried at every offset (2.5x the time)."""


def _statements(tree: ast.Module) -> Iterator[tuple[ast.stmt, frozenset[str]]]:
    """Every statement of the module, nested ones included, with the parameters of the function it is in
    (no expression is visited: cheaper than `ast.walk`)."""
    stack: list[tuple[ast.stmt, frozenset[str]]] = [(stmt, frozenset()) for stmt in tree.body]
    while stack:
        stmt, params = stack.pop()
        yield stmt, params
        kind = type(stmt)
        fields = _BLOCK_FIELDS.get(kind)
        if fields is None:
            fields = _BLOCK_FIELDS[kind] = tuple(f for f in ("body", "orelse", "finalbody", "handlers", "cases")
                                                 if f in kind._fields)
        if not fields:
            continue  # most statements hold none (an assignment, a call, a return)
        if kind in _FUNCTION_KINDS:
            args = stmt.args  # type: ignore[attr-defined]
            params = frozenset(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs))
        for field in fields:
            if field == "handlers" or field == "cases":
                for part in getattr(stmt, field):
                    stack.extend([(s, params) for s in part.body])
            else:
                stack.extend([(s, params) for s in getattr(stmt, field)])


_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {}
"""Statement class -> its fields that hold statements, in `_statements`' order (none for most)."""
_FUNCTION_KINDS = frozenset(_FUNCTIONS)


def may_assign_methods(source: str) -> bool:
    """May the module assign a function onto a class (`methods_assigned`)? A text test: a module that
    does nothing else (a patch module: imports, then ``Cls.forward = fn``) still links the function to the
    class's callers, so the lint reads it whatever the rules' prefilters say. Any ``a.b = f`` line counts,
    whatever its target starts at: only the walk knows a method's receiver (by place, not by the spelling
    ``self.``: `methods_assigned` leaves out a target on a parameter)."""
    return "setattr(" in source or _ASSIGNED_ONTO.search(source) is not None


def methods_assigned(tree: ast.Module, source: str) -> tuple[tuple[str, str], ...]:
    """Functions assigned onto a class anywhere in the module, as written: ``Cls.name = f``,
    ``mod.Cls.name = f`` or ``setattr(Cls, "name", f)`` (in a function too, as a monkey patch is), as
    ``("mod.Cls.name", "f")``. The project qualifies both through the module's imports and reads a
    ``self.name(...)`` in a method of that class, in any module, as a call of ``f``
    (`ProjectGraph.resolve`); a target or value that is not a chain of names is left out, and so is
    one the project cannot resolve (a local, ``obj.__class__``)."""
    if not may_assign_methods(source):
        return ()
    out: list[tuple[str, str]] = []
    for node, params in _statements(tree):
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Attribute):
                continue
            target, value = dotted(node.targets[0]), dotted(node.value)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Name) and node.value.func.id == "setattr" \
                and len(node.value.args) == 3 and not node.value.keywords:
            owner, name, function = node.value.args
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()):
                continue
            owner_name = dotted(owner)
            target = f"{owner_name}.{name.value}" if owner_name is not None else None
            value = dotted(function)
        else:
            continue
        # onto a class, not onto an instance a parameter holds (`self.fn = f`)
        if target is not None and value is not None and "." in target and target.split(".")[0] not in params:
            out.append((target, value))
    return tuple(sorted(set(out)))


def _forwarder(function: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Call | None:
    """The call a module-level function only forwards to (its body, past a docstring, is ``return
    g(...)`` whose arguments are its parameters, each passed once and every one passed, ``*args`` and
    ``**kwargs`` included), else None."""
    if function.decorator_list or isinstance(function, ast.AsyncFunctionDef):
        return None
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return None
    call = body[0].value
    args = function.args
    if args.posonlyargs:
        return None
    names = {a.arg for a in (*args.args, *args.kwonlyargs)}
    star = args.vararg.arg if args.vararg else None
    dstar = args.kwarg.arg if args.kwarg else None
    head = dotted(call.func)
    if head is None or head.split(".")[0] in names | {star, dstar}:
        return None
    used: list[str] = []
    for arg in call.args:
        value = arg.value if isinstance(arg, ast.Starred) else arg
        if not isinstance(value, ast.Name) or (value.id == star) != isinstance(arg, ast.Starred):
            return None
        used.append(value.id)
    for keyword in call.keywords:
        if not isinstance(keyword.value, ast.Name) or (keyword.value.id == dstar) != (keyword.arg is None):
            return None
        used.append(keyword.value.id)
    # every parameter passed on, once: each of a caller's argument nodes stays in the call it reads as
    if len(used) != len(set(used)) or set(used) != names | ({star, dstar} - {None}):
        return None
    # a forward of `*args` / `**kwargs` (a plain `return g(x)` is read through its return already)
    return call if star in used or dstar in used else None


def _forwarders(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    """The module's functions that only forward to another call (`_forwarder`), each defined once, by name."""
    defined: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            defined[stmt.name] = defined.get(stmt.name, 0) + 1
    return {stmt.name: stmt for stmt in tree.body
            if isinstance(stmt, ast.FunctionDef) and defined[stmt.name] == 1 and _forwarder(stmt) is not None}


def _call_through_forwarders(tree: ast.Module, forwarders: dict[str, ast.FunctionDef]) -> None:
    """Each call of a forwarder (``w(a, k=v)`` for ``def w(x, **kw): return g(x, **kw)``) read as the call
    it forwards to (``g(a, k=v)``), in place, the caller's own argument nodes kept (their positions with
    them). A call that spreads ``*``/``**`` itself, misses a parameter with no literal default, or passes
    what the forwarder cannot take, is left as is; so are the forwarder's own calls of itself."""
    for node in _walk_all(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in forwarders):
            continue
        function = forwarders[node.func.id]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        forwarded = _forwarder(function)
        assert forwarded is not None
        args = function.args
        bound: dict[str, ast.expr] = {}
        positional = [a.arg for a in args.args]
        extra_args = list(node.args[len(positional):])
        if extra_args and args.vararg is None:
            continue
        bound.update(zip(positional, node.args))
        extra_keywords: list[ast.keyword] = []
        named = set(positional) | {a.arg for a in args.kwonlyargs}
        for keyword in node.keywords:
            if keyword.arg in named and keyword.arg not in bound:
                bound[keyword.arg] = keyword.value
            elif keyword.arg not in named and args.kwarg is not None:
                extra_keywords.append(keyword)
            else:
                break
        else:
            defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
            missing = named - set(bound)
            if any(not isinstance(defaults.get(name), ast.Constant) for name in missing):
                continue
            for name in missing:
                bound[name] = ast.copy_location(ast.Constant(value=defaults[name].value), node)  # type: ignore[union-attr]
            new_args: list[ast.expr] = []
            for arg in forwarded.args:
                new_args.extend(extra_args if isinstance(arg, ast.Starred) else [bound[arg.id]])  # type: ignore[attr-defined]
            new_keywords: list[ast.keyword] = []
            for keyword in forwarded.keywords:
                if keyword.arg is None:
                    new_keywords.extend(extra_keywords)
                else:
                    new_keywords.append(ast.copy_location(
                        ast.keyword(arg=keyword.arg, value=bound[keyword.value.id]), bound[keyword.value.id]))  # type: ignore[attr-defined]
            func = copy.deepcopy(forwarded.func)
            for part in ast.walk(func):
                ast.copy_location(part, node.func)
            node.func, node.args, node.keywords = func, new_args, new_keywords


def _stored_loader_loops(tree: ast.Module, known: set[int]) -> list[tuple[ast.For, ast.expr, int]]:
    """Each ``for`` over an attribute of the instance that the class's ``__init__`` stores from one of its
    parameters (``self.loader = loader``, the attribute stored nowhere else in the class), with the
    callee that stands for the batches of what the constructor's callers pass there
    (``layoutcheck_batches_of_loader``: `BATCHES_OF`) and the batch's position in the loop's target. The
    project resolves that callee to the collate function of a DataLoader passed there; a loop over
    anything else binds the result of a call the project cannot resolve (nothing known, as before)."""
    out: list[tuple[ast.For, ast.expr, int]] = []
    for cls in (n for n, _ in _statements(tree) if isinstance(n, ast.ClassDef)):
        methods = [f for f in cls.body if isinstance(f, _FUNCTIONS)]
        init = next((f for f in methods if f.name == "__init__"), None)
        me = _instance(init) if init is not None else None
        if init is None or me is None:
            continue
        params = {a.arg for a in (*init.args.args, *init.args.kwonlyargs)} - {me}
        stored: dict[str, str] = {}
        built: set[str] = set()
        stores: dict[str, int] = {}
        for method in methods:
            mine = _instance(method)
            locals_of = _Once(functools.partial(_call_locals, method))  # asked only for a store it may decide
            for node in own_statements(method):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                and target.value.id == mine:
                            stores[target.attr] = stores.get(target.attr, 0) + 1
                            if method is init and isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) \
                                    and node.value.id in params:
                                stored[target.attr] = node.value.id
                            elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                                    and isinstance(node.value, ast.Call) \
                                    and _may_build_loader(node.value, locals_of, mine):
                                built.add(target.attr)
        stored = {attr: param for attr, param in stored.items() if stores[attr] == 1}
        built = {attr for attr in built if stores[attr] == 1}
        if not stored and not built:
            continue
        for method in methods:
            mine = _instance(method)
            for node in own_statements(method):
                if not isinstance(node, (ast.For, ast.AsyncFor)) or not node.body or id(node) in known:
                    continue
                source, at = node.iter, 0
                if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) \
                        and source.func.id == "enumerate" and len(source.args) == 1 \
                        and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2:
                    source, at = source.args[0], 1
                if isinstance(source, ast.Attribute) and isinstance(source.value, ast.Name) \
                        and source.value.id == mine and source.attr in stored:
                    marker = ast.copy_location(ast.Name(id=BATCHES_OF + stored[source.attr], ctx=ast.Load()), source)
                    out.append((node, marker, at))
                elif isinstance(source, ast.Attribute) and isinstance(source.value, ast.Name) \
                        and source.value.id == mine and source.attr in built:
                    out.append((node, _built_marker(source), at))
    return out


def _may_build_loader(value: ast.expr, built: Callable[[], Collection[str]], receiver: str | None) -> bool:
    """Is ``value`` a call that may build a loader from a collate function it is given: a call of a name
    that is neither a builtin, a library's (`_LIBRARY_HEADS`) nor a DataLoader built in place
    (`_loader_loops` reads those), given ``collate_fn=`` or a method of an instance: an attribute of a
    local bound to a call's result (``ds.collate_fn``; ``built()`` gives those locals, asked only here)
    or of the receiver's attribute (``self.buffer.collate_fn``)?"""
    if not isinstance(value, ast.Call) or is_dataloader(value):
        return False
    head = value.func
    while isinstance(head, ast.Attribute):
        head = head.value
    if not isinstance(head, ast.Name) or head.id in _LIBRARY_HEADS \
            or head.id in _BUILTIN_NAMES and head is value.func:
        return False
    for keyword in value.keywords:
        if keyword.arg == "collate_fn":
            return True
    for arg in (*value.args, *(k.value for k in value.keywords)):
        if isinstance(arg, ast.Attribute):
            owner = arg.value
            if isinstance(owner, ast.Name) and owner.id != receiver and owner.id in built():
                return True
            if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) and owner.value.id == receiver:
                return True
    return False


class _Once:
    """A function of no argument, called at most once: its first result, kept."""

    def __init__(self, make: Callable[[], set[str]]) -> None:
        self.make = make
        self.found: set[str] | None = None

    def __call__(self) -> set[str]:
        if self.found is None:
            self.found = self.make()
        return self.found


def _call_locals(function: ast.AST) -> set[str]:
    """The locals of ``function`` bound to a call's result (``ds = Pairs(rows)``)."""
    return {t.id for node in own_statements(function) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            for t in node.targets if isinstance(t, ast.Name)}


def _built_marker(loader: ast.expr) -> ast.Call:
    """``layoutcheck_batches_built(layoutcheck_loader=<loader>)`` (`BATCHES_BUILT`), at the loader's place;
    `_read_batches_through_collate` adds the samples as its first argument."""
    given = ast.keyword(arg=LOADER_GIVEN, value=copy.deepcopy(loader))
    call = ast.Call(func=ast.Name(id=BATCHES_BUILT, ctx=ast.Load()), args=[], keywords=[given])
    for node in ast.walk(call):
        ast.copy_location(node, loader)
    return call


_CALLED_AFTER = re.compile(r"[ \t]*=[ \t]*[\w.]+\(")
"""What follows a local's name where it is bound to a call (``loader = strategy.setup(``)."""


def _bound_to_call(source: str, name: str) -> bool:
    """Does ``source`` bind ``name`` to a call somewhere (``name = f(``, at a line's start), as text?"""
    at = source.find(name)
    while at >= 0:
        if (at == 0 or source[at - 1] in " \t\n") and _CALLED_AFTER.match(source, at + len(name)):
            line = source.rfind("\n", 0, at) + 1
            if not source[line:at].strip():
                return True
        at = source.find(name, at + len(name))
    return False


def _built_loader_loops(tree: ast.Module, known: set[int], lines: set[int]) -> list[tuple[ast.For, ast.expr, int]]:
    """Each ``for`` on one of ``lines`` (where the text loops over a local bound to a call) over a local
    bound once to a call that may build a loader (`_may_build_loader`: ``loader =
    strategy.setup_dataloader(ds, 1, collate_fn=ds.collate_fn)``), or over a progress bar on one, with the
    `BATCHES_BUILT` marker given that local, and the batch's position in the loop's target. Loops
    `_loader_loops` and `_stored_loader_loops` found (``known``) are left to them; only the functions
    holding those lines are read."""
    out: list[tuple[ast.For, ast.expr, int]] = []
    for function in _functions_at(tree, lines):
        stores: dict[str, int] = {}
        made: dict[str, ast.Call] = {}
        loops: list[ast.For | ast.AsyncFor] = []
        for node in (function.body if function is tree else own_statements(function)):  # type: ignore[attr-defined]
            kind = type(node)
            if kind is ast.For or kind is ast.AsyncFor:
                if node.lineno in lines and node.body and id(node) not in known:  # type: ignore[attr-defined]
                    loops.append(node)  # type: ignore[arg-type]
                targets = [node.target]  # type: ignore[attr-defined]
            elif kind is ast.Assign:
                targets = node.targets  # type: ignore[attr-defined]
                if len(targets) == 1 and type(targets[0]) is ast.Name and type(node.value) is ast.Call:  # type: ignore[attr-defined]
                    made[targets[0].id] = node.value  # type: ignore[attr-defined]
            elif kind is ast.AnnAssign or kind is ast.AugAssign or kind is ast.With or kind is ast.AsyncWith:
                targets = [node.target] if hasattr(node, "target") else \
                    [i.optional_vars for i in node.items if i.optional_vars is not None]  # type: ignore[attr-defined]
            else:
                continue
            for target in targets:
                if type(target) is ast.Name:  # most are
                    stores[target.id] = stores.get(target.id, 0) + 1  # type: ignore[attr-defined]
                    continue
                for name in (n.id for n in ast.walk(target) if type(n) is ast.Name):
                    stores[name] = stores.get(name, 0) + 1
        made = {name: call for name, call in made.items() if stores.get(name) == 1}
        if not made or not loops:
            continue
        me = _instance(function)
        for node in loops:
            source, at = node.iter, 0
            if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "enumerate" \
                    and len(source.args) == 1 and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2:
                source, at = source.args[0], 1
            for _ in range(2):  # `tqdm(loader)`, or a local bound to one
                inner = _wrapped(source) or (_wrapped(made[source.id]) if isinstance(source, ast.Name)
                                             and source.id in made else None)
                source = inner if isinstance(inner, ast.Name) else source
            if isinstance(source, ast.Name) and source.id in made \
                    and _may_build_loader(made[source.id], made.keys, me):
                out.append((node, _built_marker(source), at))
    return out


def _functions_at(tree: ast.Module, lines: set[int]) -> list[ast.AST]:
    """The innermost function (or the module, at its top level) holding each of ``lines``: only the
    statements whose lines hold one of them are entered."""
    found: dict[int, ast.AST] = {}
    ordered = sorted(lines)
    stack: list[tuple[ast.AST, ast.AST]] = [(stmt, tree) for stmt in tree.body]
    while stack:
        node, scope = stack.pop()
        first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        at = bisect.bisect_left(ordered, first)
        if at == len(ordered) or ordered[at] > last:
            continue  # none of the lines within the statement
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = node
        if node.lineno in lines and isinstance(node, (ast.For, ast.AsyncFor)):  # type: ignore[attr-defined]
            found.setdefault(id(scope), scope)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, ()):
                if isinstance(child, (ast.stmt, ast.ExceptHandler, ast.match_case)):
                    if isinstance(child, ast.match_case):
                        stack.extend((c, scope) for c in child.body)
                    else:
                        stack.append((child, scope))
    return list(found.values())


def _collate_call(collate: ast.expr, samples: ast.expr) -> ast.Call:
    """``f(samples)`` for ``collate_fn=f``; ``g(a, samples, k=v)`` for ``collate_fn=partial(g, a, k=v)``."""
    if isinstance(collate, ast.Call):
        return ast.Call(func=copy.deepcopy(collate.args[0]), args=[*map(copy.deepcopy, collate.args[1:]), samples],
                        keywords=[copy.deepcopy(k) for k in collate.keywords])
    return ast.Call(func=copy.deepcopy(collate), args=[samples], keywords=[])


def _built_once(function: ast.AST) -> dict[str, ast.Call]:
    """The locals of ``function`` stored once, by ``x = f(...)`` (one target): name -> that call."""
    stores: dict[str, int] = {}
    found: dict[str, ast.Call] = {}
    for node in own_nodes(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With,
                             ast.AsyncWith, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [i.optional_vars for i in node.items if i.optional_vars is not None] \
                if isinstance(node, (ast.With, ast.AsyncWith)) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        stores[name.id] = stores.get(name.id, 0) + 1
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call):
                found[node.targets[0].id] = node.value
    return {name: call for name, call in found.items() if stores.get(name) == 1}


def _dataset_item(loader: ast.Call, stored_by: str | None = None, here: str | None = None,
                  built: dict[str, ast.Call] | None = None) -> ast.Call | None:
    """One item of the dataset of ``loader`` (``DataLoader(ds, ...)``, ``dataset=ds``) as the loader's sampler
    gets it, ``ds[i]``, written as the call of its ``__getitem__`` the project resolves through the
    instance's class: ``ds.__getitem__(0)`` for a local or an attribute (``self.buffer``),
    ``Pairs.__getitem__(layoutcheck_dataset, 0)`` for a dataset built in the call (``DataLoader(Pairs(rows),
    ...)``: the constructor is not called twice). Spelt in another method than the loader's (``stored_by``,
    the receiver of the method that built it; ``here``, the receiver of the one it is spelt in): only an
    attribute of the receiver, a dataset built in the call, or a local of that method stored once by a call
    (``built``: ``ds = Pairs(rows)``, read as built in the call) means the same there. None otherwise."""
    given = [a for a in loader.args[:1] if not isinstance(a, ast.Starred)]
    given += [k.value for k in loader.keywords if k.arg == "dataset"]
    if not given:
        return None
    dataset = given[0]
    if stored_by is not None and isinstance(dataset, ast.Name) and built and dataset.id in built:
        dataset = built[dataset.id]
    made = isinstance(dataset, ast.Call)
    named = dataset.func if made else dataset  # type: ignore[attr-defined]
    if dotted(named) is None:
        return None
    named = copy.deepcopy(named)
    if stored_by is not None:  # `self.ds` built in `__init__`, spelt with the looping method's receiver
        root = named
        while isinstance(root, ast.Attribute):
            root = root.value
        if root is named and not made:
            return None  # a local of the method that built the loader
        if root.id == stored_by and here is not None:  # type: ignore[attr-defined]
            root.id = here  # type: ignore[attr-defined]
        elif not made:
            return None
    index = ast.Constant(value=0)
    method = ast.Attribute(value=named, attr="__getitem__", ctx=ast.Load())
    if made:
        return ast.Call(func=method, args=[ast.Name(id=DATASET, ctx=ast.Load()), index], keywords=[])
    return ast.Call(func=method, args=[index], keywords=[])


def _hand_items_to_collate(tree: ast.Module) -> None:
    """Each ``DataLoader(ds, collate_fn=f)`` (``dataset=ds`` too) gets the keyword `ITEMS` holding
    ``f([ds.__getitem__(0)])`` (in place, on the dataset's position): the collate function is called on a
    list of the dataset's items, so its parameter's entries hold what the dataset's ``__getitem__`` returns,
    wherever the class is defined (the project resolves the call: `ProjectGraph.instance_class`,
    `attribute_class`); the loop over the loader in the same function binds ``f``'s result, which the
    project joins over the function's calls of ``f``, this one included."""
    for node in nodes_of(tree, ast.Call):
        collate = _is_loader(node)
        if collate is None:
            continue
        item = _dataset_item(node)  # type: ignore[arg-type]
        if item is None:
            continue
        at = node.args[0] if node.args else next(k.value for k in node.keywords if k.arg == "dataset")  # type: ignore[attr-defined]
        made = _collate_call(collate, ast.List(elts=[item], ctx=ast.Load()))
        for part in ast.walk(made):  # the whole call stands on the dataset's argument
            ast.copy_location(part, at)
        node.keywords.append(ast.copy_location(ast.keyword(arg=ITEMS, value=made), at))  # type: ignore[attr-defined]
    forget_nodes(tree)  # listed here before the calls were added, and maybe before earlier stages' rewrites


def _hand_collate_on(tree: ast.Module) -> None:
    """Each call that passes a DataLoader given ``collate_fn=f`` (built there, or a local bound to one once)
    gets the keyword `COLLATE_AT` / `COLLATE_FOR` with ``f(loader)`` beside it (in place), on the
    loader's position: what a constructor that stores the loader and loops over it binds."""
    _, functions, loaders = _loader_scopes(tree)
    # the module's own statements too: a script's top level is code like a function's
    for function in (tree, *functions):
        if function is not tree and not _spans(function, loaders):
            continue  # no DataLoader built in it: no argument of its calls can be one (`_loader_collate`)
        local = _local_loaders(function)
        calls = [n for n in own_nodes(function)
                 if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))]
        for call in calls:
            if _is_loader(call) is not None or (isinstance(call.func, ast.Name) and call.func.id in _BUILTIN_NAMES):
                continue
            added: list[ast.keyword] = []
            given = [(f"{COLLATE_AT}{i}", a) for i, a in enumerate(call.args) if not isinstance(a, ast.Starred)]
            given += [(f"{COLLATE_FOR}{k.arg}", k.value) for k in call.keywords if k.arg is not None]
            for name, value in given:
                collate = _loader_collate(value, local)
                if collate is None:
                    continue
                # the samples stand for a list no code of the module holds (not the loader: `f` is not
                # called on it, and nothing of the loader's call is repeated)
                made = _collate_call(collate, ast.Name(id="layoutcheck_samples", ctx=ast.Load()))
                for part in ast.walk(made):  # the whole call stands on the loader's argument
                    ast.copy_location(part, value)
                added.append(ast.copy_location(ast.keyword(arg=name, value=made), value))
            call.keywords.extend(added)
