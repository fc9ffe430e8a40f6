"""What calling an object reaches: a module's ``forward``, and functions assigned onto classes (issue 28).

Two flow steps of the engine, read at calls in other modules:

* **a function assigned onto a class** (`assigned_onto_classes`, per module): ``Cls.name = f`` and,
  where the class is not named, onto an instance's class (``model.__class__.forward = f``, or
  ``cls.forward = f`` with ``cls`` a parameter). ``f`` may be a local bound, on different paths, to one of
  several functions (``fn = dense.forward`` in one arm, ``fn = vl.forward`` in another, imported in the
  function or the module): each candidate counts, as any may run;
* **calling an object reaches its ``forward``** (`object_call_targets`): a call of an object, not a
  function (``self.module(**inputs)``, ``model(x)``, ``nn.Module.__call__``), reaches the ``forward``
  (or ``__call__``) of the object's class when the function bound it to a constructor's result
  (``m = Net(...)``; a project ``def`` or a function assigned onto that class), and otherwise, its class
  not known, every function the project assigns onto an instance's class as ``forward``: such a patch
  replaces the forward of whatever model the code runs.
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from layoutcheck.model.origins import Origin, qualified, scope_names
from layoutcheck.model.syntax import dotted, nodes, param_names

if TYPE_CHECKING:
    from layoutcheck.model.graph import FunctionRef, ProjectGraph

__all__ = ["AssignedMethod", "assigned_onto_classes", "object_call_targets"]

AssignedMethod = tuple[str, str, str]
"""(the class as written, qualified through the module's imports, or ``""`` for an instance's class; the
attribute; one function assigned there, qualified)."""

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTION_KINDS = frozenset(_FUNCTIONS)
_ASSIGNED = re.compile(r"\.\w+ = [A-Za-z_]\w*[ \t]*$", re.M)
"""``a.b = f`` as formatters write it: where `assigned_onto_classes` can find something."""
_CALLED = ("forward", "__call__")


def _scopes(tree: ast.Module, lines: list[int]) -> Iterator[tuple[ast.AST, list[ast.stmt]]]:
    """The module and the functions spanning one of ``lines``."""
    yield tree, tree.body
    for node in nodes(tree):
        if type(node) in _FUNCTION_KINDS and any(node.lineno <= line <= (node.end_lineno or node.lineno)
                                                 for line in lines):
            yield node, node.body


def _own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            continue
        yield stmt
        for field in ("body", "orelse", "finalbody"):
            stack.extend(getattr(stmt, field, ()))
        for handler in getattr(stmt, "handlers", ()):
            stack.extend(handler.body)


def assigned_onto_classes(tree: ast.Module, text: str) -> tuple[AssignedMethod, ...]:
    """Functions assigned onto a class anywhere in the module, each candidate of a local (the module docs)."""
    lines = [text.count("\n", 0, m.start()) + 1 for m in _ASSIGNED.finditer(text)
             if not text[text.rfind("\n", 0, m.start()) + 1:m.start()].lstrip().startswith(("self.", "cls."))]
    if not lines:
        return ()  # most such lines set an instance's attribute (`self.x = y`)
    module_names: dict[str, str] = {}
    scope_names(tree.body, module_names)
    defs = {s.name for s in tree.body if isinstance(s, _FUNCTIONS)}
    out: set[AssignedMethod] = set()
    for scope, body in _scopes(tree, lines):
        names = dict(module_names)
        imported: dict[str, list[tuple[int, str]]] = {}  # a function's own imports, by line: arms differ
        if scope is not tree:
            for stmt in _own_statements(body):
                if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    found: dict[str, str] = {}
                    scope_names([stmt], found)
                    for name, where in found.items():
                        imported.setdefault(name, []).append((stmt.lineno, where))
        params = set(param_names(scope)) if isinstance(scope, _FUNCTIONS) else set()
        bindings: dict[str, list[tuple[int, ast.expr]]] = {}
        statements = list(_own_statements(body))
        for stmt in statements:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        bindings.setdefault(target.id, []).append((stmt.lineno, stmt.value))

        def name_at(name: str, line: int) -> str | None:
            """What ``name`` means at ``line``: the function's import in effect there, else the module's."""
            before = [where for at, where in imported.get(name, ()) if at < line]
            if before:
                return max((at, where) for at, where in imported[name] if at < line)[1]
            return names.get(name, name if name in defs else None)

        for stmt in statements:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.value, ast.Name)):
                continue
            target = stmt.targets[0]
            owner = target.value
            written = dotted(owner)
            if isinstance(owner, ast.Attribute) and owner.attr == "__class__":
                cls = ""  # an instance's class
            elif written is None or written.split(".")[0] in ("self", "cls") and "." in written:
                continue
            elif written in params or all(_class_of_value(v) for _, v in bindings.get(written, [(0, owner)])) \
                    and written in bindings:
                cls = ""  # a class a parameter holds (`cls.forward = f`), or `k = type(x)`
            elif written.split(".")[0] in params or written.split(".")[0] in bindings:
                continue
            else:
                head = written.split(".")[0]
                where = name_at(head, stmt.lineno)
                if where is None:
                    continue
                cls = where + written[len(head):]
            local = bindings.get(stmt.value.id) if name_at(stmt.value.id, stmt.lineno) is None else None
            for line, value in local if local is not None else [(stmt.lineno, stmt.value)]:
                if isinstance(value, ast.Name):
                    function = name_at(value.id, line + 1)
                    if function is not None:
                        out.add((cls, target.attr, function))
    return tuple(sorted(out))


def _class_of_value(node: ast.expr) -> bool:
    """``type(x)`` or ``x.__class__``: the class of an instance."""
    return isinstance(node, ast.Attribute) and node.attr == "__class__" or isinstance(node, ast.Call) \
        and isinstance(node.func, ast.Name) and node.func.id == "type" and len(node.args) == 1


_INSTANCE_FORWARDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _assigned(graph: ProjectGraph) -> dict[tuple[str, str], list[FunctionRef]]:
    """(absolute class, or ``""`` for an instance's, attribute) -> the functions assigned there."""
    found = _INSTANCE_FORWARDS.get(graph)
    if found is None:
        found = {}
        for i, file in enumerate(graph.files):
            for cls, attr, function in file.facts.assigned_onto:
                ref = graph.lookup(i, function)
                where = graph.absolute(i, cls) if cls else ""
                if ref is not None and ref not in found.get((where, attr), ()):
                    found.setdefault((where, attr), []).append(ref)
        _INSTANCE_FORWARDS[graph] = found
    return found


def object_call_targets(graph: ProjectGraph, caller: FunctionRef, origins: tuple[Origin, ...]) -> list[FunctionRef]:
    """The functions a call of an object from ``caller`` reaches (the module docs): through the classes
    whose constructors ``origins`` (the object's) call, else every ``forward`` assigned onto an instance's
    class."""
    assigned = _assigned(graph)
    if not origins:
        return list(assigned.get(("", "forward"), ()))
    out: list[FunctionRef] = []
    for callee, element, _ in origins:
        if element != -1:
            continue
        for name in _CALLED:
            ref = graph.resolve_callee(caller, f"{callee}.{name}")
            if ref is not None and graph.function(ref).qualname.endswith(f".{name}"):
                out.append(ref)
                break
        out.extend(assigned.get((graph.absolute(caller[0], callee), "forward"), ()))
    return out
