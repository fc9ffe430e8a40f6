"""What calling an object reaches: a module's ``forward``, and functions assigned onto classes (issue 28).

Two flow steps of the engine, read at calls in other modules:

* **a function assigned onto a class** (`assigned_onto_classes`, per module): ``Cls.name = f`` and,
  where the class is not named, onto an instance's class (``model.__class__.forward = f``, or
  ``cls.forward = f`` with ``cls`` a parameter). ``f`` may be a local bound, on different paths, to one of
  several functions (``fn = dense.forward`` in one arm, ``fn = vl.forward`` in another, imported in the
  function or the module): each candidate counts, as any may run;
* **calling an object reaches its ``forward``** (`object_call_targets`): a call of an object, not a
  function (``self.module(**inputs)``, ``model(x)``: ``nn.Module.__call__``), reaches the ``forward``
  (or ``__call__``) of the object's class when the function bound it to a constructor's result
  (``m = Net(...)``; a project ``def``, or a function assigned onto that class). Its class not known,
  it reaches the functions assigned onto an instance's class as ``forward`` only where the patch is
  applied: ``self.x(...)`` in a class (or a subclass of one) one of whose methods applies it, or a local
  of a function that does (`_applied`), or ``self.x`` stored by the class's ``__init__`` from one of its
  parameters where a function that applies it (or a method of such a class) builds the class giving that
  parameter: the module arrives through the constructor (`_handed_by_patcher`). A patch gated by a parameter (``if not use_fused: return``
  before the assignment, the parameter defaulting to ``False`` or ``None``) is applied only by a call
  that gives that parameter, followed up through callers that pass theirs on: a critic whose module
  goes through the same patching helper without the gate runs its model's own forward.
"""

from __future__ import annotations

import ast
import re
import weakref
from bisect import bisect_right
from collections.abc import Iterator
from typing import TYPE_CHECKING

from layoutcheck.model.origins import Origin, scope_names
from layoutcheck.model.syntax import (
    defs_with_qualnames,
    dotted,
    param_names,
    receivers,
)

if TYPE_CHECKING:
    from layoutcheck.model.graph import FunctionRef, ProjectGraph

__all__ = ["AssignedMethod", "assigned_onto_classes", "object_call_targets"]

AssignedMethod = tuple[str, str, str, str, tuple[str, ...]]
"""(the class as written, qualified through the module's imports, or ``""`` for an instance's class; the
attribute; one function assigned there, qualified; for an instance's class held by a parameter, the
function that patches it and the parameters that must be given for the patch to run (`_enabling`),
else ``""`` and ``()``)."""

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_ASSIGNED = re.compile(r"\.\w+ = [A-Za-z_]\w*[ \t]*$", re.MULTILINE)
"""``a.b = f`` as formatters write it: where `assigned_onto_classes` can find something."""
_CALLED = ("forward", "__call__")


def _scopes(tree: ast.Module, lines: list[int]) -> Iterator[tuple[str, ast.AST, list[ast.stmt]]]:
    """The module and the functions spanning one of ``lines``, with their qualnames."""
    yield "", tree, tree.body

    def spans(node: ast.AST) -> bool:
        return any(node.lineno <= line <= (node.end_lineno or node.lineno) for line in lines)  # type: ignore[attr-defined]

    for name, node in defs_with_qualnames(tree, spans):
        yield name, node, node.body


def _off_receivers(tree: ast.Module, text: str) -> list[int]:
    """The lines of the module's ``a.b = f`` (`_ASSIGNED`) whose target does not start at the receiver the
    innermost ``def`` around them reaches (`receivers`, whatever it is called; none for a ``def`` outside a
    class, or one rebinding the name)."""
    reach = receivers(tree)[1]
    names = set(reach.values())
    # Every `def` (a statement, so in a block: the statement walk `receivers` made finds them all, where
    # `nodes_of` would list every node of the module); sorted below, so their order does not matter.
    defs = [d for _, d in defs_with_qualnames(tree)] if names else []
    spans = sorted((d.lineno, d.end_lineno or d.lineno, reach.get(d)) for d in defs)  # type: ignore[attr-defined]
    starts = [start for start, _, _ in spans]
    out: list[int] = []
    line, at = 1, 0
    for m in _ASSIGNED.finditer(text):
        line += text.count("\n", at, m.start())
        at = m.start()
        head = text[text.rfind("\n", 0, at) + 1:at].lstrip().split(".", 1)[0]
        if head in names:
            k = bisect_right(starts, line) - 1  # the innermost def spanning the line starts last before it
            while k >= 0 and spans[k][1] < line:
                k -= 1
            if k >= 0 and spans[k][2] == head:
                continue
        out.append(line)
    return out


def _enabling(function: ast.AST, line: int) -> tuple[str, ...]:
    """The parameters defaulting to ``False`` or ``None`` that an early exit before ``line`` tests
    (``if not use_fused or backend not in (...): return``): the patch runs only where they are given."""
    if not isinstance(function, _FUNCTIONS):
        return ()
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults = {a.arg: d for a, d in zip(positional[len(positional) - len(args.defaults):], args.defaults)}
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    off = {name for name, d in defaults.items() if isinstance(d, ast.Constant) and d.value in (False, None)}
    out: set[str] = set()
    for stmt in function.body:
        if stmt.lineno >= line:
            break
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], ast.Return) \
                and (stmt.body[-1].value is None or isinstance(stmt.body[-1].value, ast.Constant)
                     and stmt.body[-1].value.value is None):
            out |= {n.id for n in ast.walk(stmt.test) if isinstance(n, ast.Name) and n.id in off}
    return tuple(sorted(out))


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
    # A cost gate: most such lines set an instance's attribute (`self.x = y`, `this.x = y`), on the receiver
    # of the method they sit in, by place, which the walk below skips too.
    lines = _off_receivers(tree, text)
    if not lines:
        return ()
    module_names: dict[str, str] = {}
    scope_names(tree.body, module_names)
    defs = {s.name for s in tree.body if isinstance(s, _FUNCTIONS)}
    out: set[AssignedMethod] = set()
    reach = receivers(tree)[1]
    for qualname, scope, body in _scopes(tree, lines):
        receiver = reach.get(scope)
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

        def name_at(name: str, line: int, imported: dict = imported, names: dict = names) -> str | None:
            """What ``name`` means at ``line``: the function's import in effect there, else the module's."""
            before = [(at, where) for at, where in imported.get(name, ()) if at < line]
            if before:
                return max(before)[1]
            return names.get(name, name if name in defs else None)

        for stmt in statements:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.value, ast.Name)):
                continue
            target = stmt.targets[0]
            owner = target.value
            written = dotted(owner)
            patcher: tuple[str, tuple[str, ...]] = ("", ())
            if written is not None and written.split(".")[0] == receiver:
                continue  # the instance's own attribute (its class's through a classmethod's receiver)
            if isinstance(owner, ast.Attribute) and owner.attr == "__class__":
                cls = ""  # an instance's class
                if isinstance(owner.value, ast.Name) and owner.value.id in params:
                    patcher = (qualname, _enabling(scope, stmt.lineno))
            elif written is None:
                continue
            elif written in params or all(_class_of_value(v) for _, v in bindings.get(written, [(0, owner)])) \
                    and written in bindings:
                cls = ""  # a class a parameter holds (`cls.forward = f`), or `k = type(x)`
            elif written.split(".")[0] in params or written.split(".")[0] in bindings:
                continue
            else:
                head = written.split(".")[0]
                named = name_at(head, stmt.lineno)
                if named is None:
                    continue
                cls = named + written[len(head):]
            local = bindings.get(stmt.value.id) if name_at(stmt.value.id, stmt.lineno) is None else None
            for line, value in local if local is not None else [(stmt.lineno, stmt.value)]:
                if isinstance(value, ast.Name):
                    function = name_at(value.id, line + 1)
                    if function is not None:
                        out.add((cls, target.attr, function, *patcher))
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
            for cls, attr, function, _, _ in file.facts.assigned_onto:
                ref = graph.lookup(i, function)
                where = graph.absolute(i, cls) if cls else ""
                if ref is not None and ref not in found.get((where, attr), ()):
                    found.setdefault((where, attr), []).append(ref)
        _INSTANCE_FORWARDS[graph] = found
    return found


_APPLIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DEPTH = 4


def _applied(graph: ProjectGraph) -> frozenset[FunctionRef]:
    """The functions that apply a patch of an instance's ``forward`` whatever their own callers pass: the
    patching function when no parameter gates it (`_enabling`), else each caller giving every gating
    parameter (not the literal ``False``), followed up the callers four deep (a caller that
    passes its own parameter on, defaulting to ``False`` or ``None``, is gated by it in turn)."""
    found = _APPLIED.get(graph)
    if found is not None:
        return found
    gated: dict[FunctionRef, frozenset[str]] = {}
    for i, file in enumerate(graph.files):
        for cls, attr, _, patcher, enabling in file.facts.assigned_onto:
            ref = graph.lookup(i, patcher) if not cls and attr == "forward" and patcher else None
            if ref is not None:
                gated[ref] = frozenset(enabling)
    frontier = [ref for ref, need in gated.items() if need]
    for _ in range(_DEPTH):
        later = []
        for ref in frontier:
            for caller, call in graph.callers_of(ref):
                bound = graph.binding(caller, call, ref)
                args = [bound.get(name) for name in gated[ref]]
                if any(arg is None or arg.text == "False" for arg in args):
                    continue
                defaults = {p.name: p.default for p in graph.signature(caller).params}
                need = frozenset(q for arg in args if arg is not None and arg.bare for q in arg.params
                                 if defaults.get(q) in ("False", "None"))
                if caller not in gated or len(need) < len(gated[caller]):
                    gated[caller] = need
                    later.append(caller)
        frontier = [ref for ref in later if gated[ref]]
    found = frozenset(ref for ref, need in gated.items() if not need)
    _APPLIED[graph] = found
    return found


def _classes(graph: ProjectGraph, index: int, cls: str, depth: int = 0) -> Iterator[tuple[int, str]]:
    """Class ``cls`` of file ``index`` and its bases the project defines (as the file names them)."""
    yield index, cls
    if depth > _DEPTH:
        return
    for name, bases in graph.files[index].facts.classes:
        if name != cls:
            continue
        for base in bases:
            if any(q == base for q, _ in graph.files[index].facts.classes):
                yield from _classes(graph, index, base, depth + 1)
                continue
            parts = graph.absolute(index, base).split(".")
            for cut in range(len(parts) - 1, 0, -1):
                j = graph.modules.get(".".join(parts[:cut]))
                if j is not None:
                    yield from _classes(graph, j, ".".join(parts[cut:]), depth + 1)
                    break


def _handed_by_patcher(graph: ProjectGraph, classes: set[tuple[int, str]], attr: str,
                       applied: frozenset[FunctionRef]) -> bool:
    """Is ``self.<attr>`` an object that a class's ``__init__`` stores from one of its parameters (``self.m
    = m``, the attribute stored nowhere else in the class), and does a function that applies the patch, or
    a method of a class (or a subclass of one) one of whose methods applies it, build the class giving that
    parameter (``Actor(module=self.module)``)? The module then arrives through the constructor, patched."""
    for index, cls in classes:
        facts = graph.files[index].facts
        init = graph.lookup(index, f"{cls}.__init__")
        if init is None:
            continue
        writes = [w for w in facts.field_writes if w.key == attr and facts.functions[w.function].cls == cls]
        if len(writes) != 1 or writes[0].function != init[1] or len(writes[0].params) != 1 \
                or writes[0].text != writes[0].params[0]:
            continue
        param = writes[0].params[0]
        for builder, call in graph.callers_of(init):
            arg = graph.binding(builder, call, init).get(param)
            if arg is None or arg.text == "None":
                continue
            if builder in applied:
                return True
            mine = next((c for c in (graph.function(r).cls for r in graph.enclosing(builder)) if c), None)
            if mine is not None:
                theirs = set(_classes(graph, builder[0], mine))
                if any((ref[0], graph.function(ref).cls) in theirs for ref in applied):
                    return True
    return False


def object_call_targets(graph: ProjectGraph, caller: FunctionRef, callee: str,
                        origins: tuple[Origin, ...]) -> list[FunctionRef]:
    """The functions a call of an object from ``caller`` reaches (the module docs): through the classes
    whose constructors ``origins`` (the object's) call; else, its class not known, the ``forward``s
    assigned onto an instance's class where the object is ``self.x`` in a class (or a subclass of one)
    that applies such a patch (`_applied`), or a local of a function that does."""
    assigned = _assigned(graph)
    if not origins:
        applied = _applied(graph)
        if not applied:
            return []
        through = graph.through_receiver(caller, callee)
        if caller in applied and not through:
            return list(assigned.get(("", "forward"), ()))
        cls = next((c for c in (graph.function(r).cls for r in graph.enclosing(caller)) if c), None)
        if cls is None or not through:
            return []
        owners = set(_classes(graph, caller[0], cls))
        if any((ref[0], graph.function(ref).cls) in owners for ref in applied) \
                or callee.count(".") == 1 and _handed_by_patcher(graph, owners, callee.split(".")[1], applied):
            return list(assigned.get(("", "forward"), ()))
        return []
    out: list[FunctionRef] = []
    for built, element, _ in origins:
        if element != -1:
            continue
        for name in _CALLED:
            ref = graph.resolve_callee(caller, f"{built}.{name}")
            if ref is not None and graph.function(ref).qualname.endswith(f".{name}"):
                out.append(ref)
                break
        out.extend(assigned.get((graph.absolute(caller[0], built), "forward"), ()))
    return out
