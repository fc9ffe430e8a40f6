"""Where a function's values come from, by call: facts that follow a value into other modules (issue 28).

Per function, a local bound to a call's result (``x = f(...)``), to one element of the tuple a call
returns (``a, x, _ = f(...)``, ``x = f(...)[1]``), or to such a value passed through a method that keeps
it (``x.squeeze(0)``, ``.contiguous()``) has that call as an *origin*: the callee as the module's imports
qualify it (imports inside the function included), the element (-1: the whole result) and the integer
literals the call passes (an axis: ``dim=1``). A local bound on several paths has every origin bound
before the line that reads it. A function named, not called (``fn = helper``, ``return inner`` of a
``def`` nested there, a module's ``def`` or an imported name), is an origin too, whose element is
`NAMED` (-2): the value *is* that function, so a call of the local reaches it
(`layoutcheck.model.callables`). The module's facts (`value_origins`):

* **returns**: the origins of what each function returns, whole or by tuple element, so that a
  caller's origin follows through a function that only passes a callee's result on; a lookup in a
  module's dict of functions (``return FORWARDS[kind]``, every value a name) returns each of them
  (`NAMED`);
* **dicts**: the entries of a dict a function builds (``d = {"k": x}``, ``d["k"] = x``, ``d.update(e)``
  with ``e`` built there too, on any path) and returns, whole or as a tuple element: each key with the
  origins of its value and the value's position, so a dict forwarded as ``**d`` from another function
  binds each entry to the callee's parameter of that name;
* **passes**: each call with the origins of its arguments, by parameter name or position (``**d`` of
  a dict built in the function given entry by entry), the keywords it gives, and the origins of the
  dicts it spreads that a call returned (read through that callee's dicts).

What the code does decides, never a name. The project reads them in `layoutcheck.model.piecereach`.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator

from layoutcheck.model.syntax import (
    defs_with_qualnames,
    dotted,
    int_value,
    is_dataloader,
    param_names,
    receivers,
    super_callee,
)

__all__ = ["NAMED", "Attribute", "DictEntry", "Handed", "Instance", "Origin", "Outside", "Pass", "Returned", "Summaries", "ValueOrigins",
           "origins_and_instances", "qualified", "scope_names", "value_origins"]

NAMED = -2
"""The element of an origin that is a function named, not called: the value is the function itself."""

Origin = tuple[str, int, tuple[tuple[str, int], ...]]
"""(the callee, qualified; the element of its result, -1 for all of it; the integer literals passed, by
keyword or ``#i`` for the ``i``-th positional)."""
Position = tuple[int, int, int, int]
"""(line, column, end line, end column), columns from 0."""
Returned = tuple[str, int, Origin]
"""A function's return (its qualname; the element, -1 for all of it) and one origin of it."""
DictEntry = tuple[str, int, str, tuple[Origin, ...], Position, str]
"""A returned dict's entry: (function, element of the return, key, the value's origins, its position, its text)."""
Argument = tuple[str, tuple[Origin, ...], Position, str]
"""A call's argument: (parameter name, or ``#i`` for the ``i``-th positional; origins; position; text)."""
Pass = tuple[str, str, bool, tuple[Origin, ...], tuple[Argument, ...], tuple[str, ...], tuple[Origin, ...]]
"""A call: (the calling function; the callee, qualified; whether the callee may be an object, not a
function (a parameter, a local, or an attribute of ``self``); the origins of the callee where it is a
local; the arguments that have origins; every keyword given (``#i`` for a position), a spread dict's keys
included; the origins of
the dicts spread that a call returned)."""
_Entry = tuple[tuple[Origin, ...], Position, str]
ValueOrigins = tuple[tuple[Returned, ...], tuple[DictEntry, ...], tuple[Pass, ...]]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_BLOCKS: dict[type, tuple[str, ...]] = {}
"""Statement class -> its fields that hold statements (none for most), last first (`_Function` pushes them on a stack)."""
_KEEPS = frozenset({"squeeze", "unsqueeze", "contiguous", "to", "cuda", "clone", "detach", "long", "int", "view",
                    "reshape"})
"""Methods that keep the value they are called on (its data, its positions)."""
_LIBRARIES = frozenset({"torch", "numpy", "math", "os", "re", "json", "logging"})
"""Modules never the project's, by the head of a callee qualified through the module's imports (`qualified`:
``F.pad`` under ``import torch.nn.functional as F`` is ``torch.nn.functional.pad``; an ``F`` the module does
not import is no library's): their results carry no origin worth a fact."""
_BUILTINS = frozenset({"print", "len", "isinstance", "getattr", "hasattr", "super", "dict", "list", "tuple", "range",
                       "zip", "enumerate"})
"""Builtins called by their own name, unless the module imports or defines that name itself."""

_BUILTIN_NAMES = frozenset(dir(builtins))
"""``int``, ``str``: annotations that name no class of the project."""
_REBINDS = frozenset({ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.AugAssign, ast.Delete})
"""Statements that store a local otherwise than ``x = ...`` (`_stored_names`)."""

Instance = tuple[str, str, str]
"""A local (or an annotated parameter) holding an instance of one class: (the function's qualname; the
local; the callee it was built by, qualified as `qualified` spells it: ``pkg.data.Pairs``, ``Pairs``).
The project keeps those whose callee is a class (`layoutcheck.model.graph.ProjectGraph.resolve`)."""
Handed = tuple[str, int, int, str, str, tuple[tuple[str, str], ...]]
"""A call given a local that another call built (``loader = build(ds, fn)``, then ``Trainer(loader)``):
(the calling function's qualname; the call's line and column, 1-based as a `Call`'s span; where the
local is passed, ``#i`` or the keyword; the callee that built it, as written; the names that call was
given that may be functions (``ds.collate_fn``, ``collate``), each with where: ``#i`` or the keyword)."""
Attribute = tuple[str, str, str]
"""An attribute of a class's instances holding an instance of one callee's result: (the class's dotted name
in the module; the attribute; the callee, as `qualified` spells it). Every store of ``self.<attr>`` in the
class's methods (``self.buffer = Buffer(...)`` in ``__init__``) is one call of that callee; an attribute
stored otherwise there (another callee, a value that is no call, a loop's or a tuple's target, ``+=``) is
left out. The project keeps those whose callee builds a class."""
Outside = tuple[str, str, str]
"""An attribute stored from outside its class, on an instance a local holds (`Instance`: ``trainer =
Trainer(cfg)`` then ``trainer.buffer = Buffer(...)``, in any function): (the instance's callee, as `qualified`
spells it; the attribute; the stored value's callee when it is one callee's whole result, or a local holding
one, else ``""``). The project joins them with the class's own stores (`ProjectGraph.attribute_class`)."""
Summaries = tuple[tuple[Instance, ...], tuple[tuple[str, str], ...], tuple[Handed, ...], tuple[Attribute, ...],
                  tuple[Outside, ...]]
"""`instance_summaries`: instances held in locals, loader builders (the function's qualname and the
parameter its returned DataLoader is given as ``collate_fn``), locals handed on, instances held in
attributes of a class's instances, and attributes stored into instances from outside their class."""


def _rebind_targets(stmt: ast.stmt) -> list[ast.expr]:
    """The targets a `_REBINDS` statement stores into."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    if isinstance(stmt, ast.AugAssign):
        return [stmt.target]
    return list(stmt.targets)  # type: ignore[attr-defined]


def _stored_names(stmt: ast.stmt) -> Iterator[str]:
    """The names a `_REBINDS` statement stores."""
    for target in _rebind_targets(stmt):
        if type(target) is ast.Name:  # most are (`for x in xs`, `with f() as x`, `n += 1`)
            yield target.id  # type: ignore[attr-defined]
            continue
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                yield node.id


def _attributes_of(target: ast.expr, receiver: str) -> Iterator[str]:
    """The attributes of ``receiver`` a store's target stores into (``self.a, self.b = ...``)."""
    for node in ast.walk(target):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == receiver \
                and isinstance(node.ctx, ast.Store):
            yield node.attr


def _receiver_attributes(stmt: ast.stmt, receiver: str) -> Iterator[str]:
    """The attributes of ``receiver`` a `_REBINDS` statement stores into (``for self.x in ...``,
    ``self.n += 1``)."""
    for target in _rebind_targets(stmt):
        yield from _attributes_of(target, receiver)


def _unparsed(node: ast.expr) -> str:
    """`ast.unparse` of ``node``: a name or a chain of names (most arguments) joined directly, as the
    unparser writes them, without its visitor."""
    text = dotted(node)
    return text if text is not None else ast.unparse(node)


def _position(node: ast.AST) -> Position:
    return (node.lineno, node.col_offset, node.end_lineno or node.lineno,  # type: ignore[attr-defined]
            node.end_col_offset or node.col_offset)  # type: ignore[attr-defined]


def scope_names(body: list[ast.stmt], into: dict[str, str]) -> None:
    """``import a.b as c`` / ``from .m import f as g`` in ``body`` (not nested scopes), into ``into``: local
    name -> qualified (leading dots kept)."""
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    into[alias.asname] = alias.name
                else:
                    into[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(stmt, ast.ImportFrom):
            module = "." * stmt.level + (stmt.module or "")
            for alias in stmt.names:
                if alias.name != "*":
                    joined = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
                    into[alias.asname or alias.name] = joined
        elif not isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                stack.extend(getattr(stmt, field, ()))
            for handler in getattr(stmt, "handlers", ()):
                stack.extend(handler.body)


def qualified(node: ast.expr, names: dict[str, str]) -> str | None:
    """A callee as written (``f``, ``mod.f``, ``self.f``), its head qualified through ``names``; None for
    anything but a chain of names."""
    text = dotted(node)
    if text is None:
        return super_callee(node)  # `super().m`: the project resolves it through the class's bases
    head, dot, rest = text.partition(".")
    found = names.get(head)
    return found + dot + rest if found is not None else text


def _literals(call: ast.Call) -> tuple[tuple[str, int], ...]:
    out = [(f"#{i}", v) for i, a in enumerate(call.args) if (v := int_value(a)) is not None]
    out += [(k.arg, v) for k in call.keywords if k.arg and (v := int_value(k.value)) is not None]
    return tuple(out)


class _Function:
    """The origins of one function's locals (see the module docs)."""

    def __init__(self, function: ast.FunctionDef | ast.AsyncFunctionDef, names: dict[str, str],
                 receiver: str | None = None, qualname: str = "", defs: frozenset[str] = frozenset()) -> None:
        self.function = function
        self.names = names
        self.receiver = receiver
        """The name the body reaches its method's receiver by (`receivers`), whatever it is called."""
        self.qualname = qualname
        self.defs = defs
        """The module's own top-level ``def`` names."""
        self.nested: set[str] = set()
        """The ``def`` s nested directly in the function."""
        self.params = set(param_names(function))
        self.bound: dict[str, list[tuple[int, tuple[Origin, ...]]]] = {}
        self.dicts: dict[str, dict[str, list[_Entry]]] = {}
        self.merged: dict[str, list[tuple[int, str]]] = {}
        self.returns: list[ast.Return] = []
        self.calls: list[ast.Call] = []
        self.rebound: set[str] = set()
        """Locals stored otherwise than by ``x = ...`` (a loop's or ``with``'s target, ``x += ...``): never
        an instance of one class (`instances`)."""
        self.built: dict[str, ast.Call] = {}
        """Locals bound by ``x = f(...)`` (one target), each to its last such call."""
        self.attribute_calls: list[tuple[str, ast.Call]] = []
        """The calls ``self.x = f(...)`` stores into an attribute of the receiver, with the attribute."""
        self.attributes: list[tuple[str, str | None]] = []
        """The stores into attributes of the receiver (``self.x = ...``): the attribute, and the callee whose
        whole result it is given (as `qualified` spells it; through a local holding one, ``h = Helper(...)``
        then ``self.h = h``), None where it is given anything else."""
        self.outside: list[tuple[str, str, str]] = []
        """The stores into an attribute of an instance a local holds (`instances`: ``trainer.buffer =
        Buffer(...)``, the local not the receiver): `Outside`."""
        # Statements only (most of a function's nodes are expressions): the calls kept are those a
        # statement makes (`f(...)`, `x = f(...)`, `return f(...)`) and the calls passed to them.
        stores: list[ast.Assign | ast.AnnAssign] = []
        imports: list[ast.stmt] = []
        calls, returns = self.calls, self.returns
        stack: list[ast.stmt] = list(reversed(function.body))
        while stack:
            stmt = stack.pop()
            kind = type(stmt)
            if kind is ast.Assign or kind is ast.AnnAssign:
                stores.append(stmt)  # type: ignore[arg-type]
            elif kind in _REBINDS:
                self.rebound.update(_stored_names(stmt))
                if receiver is not None:
                    self.attributes.extend((attr, None) for attr in _receiver_attributes(stmt, receiver))
            elif kind is ast.Return:
                returns.append(stmt)  # type: ignore[arg-type]
            elif kind is ast.Import or kind is ast.ImportFrom:
                imports.append(stmt)
                continue
            elif kind in _SCOPES:
                if kind is not ast.ClassDef:
                    self.nested.add(stmt.name)  # type: ignore[attr-defined]
                continue
            value = getattr(stmt, "value", None)
            if type(value) is ast.Call:
                calls.append(value)
                for a in value.args:  # type: ignore[attr-defined]
                    if type(a) is ast.Call:
                        calls.append(a)
                for k in value.keywords:  # type: ignore[attr-defined]
                    if type(k.value) is ast.Call:
                        calls.append(k.value)
            inner = _BLOCKS.get(kind)
            if inner is None:
                inner = _BLOCKS[kind] = tuple(reversed([f for f in ("body", "orelse", "finalbody", "handlers", "cases")
                                                        if f in kind._fields]))
            for field in inner:  # last field first (a stack), each list's parts last first
                if field == "handlers" or field == "cases":
                    for part in reversed(getattr(stmt, field)):
                        stack.extend(reversed(part.body))
                else:
                    stack.extend(reversed(getattr(stmt, field)))
        if imports:
            self.names = dict(names)
            scope_names(imports, self.names)
        for node in stores:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node.value, node.lineno)
            elif node.value is not None:
                self._bind(node.target, node.value, node.lineno)
        held: dict[str, str] | None = None
        for node in stores:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                continue  # `self.x: Buffer` declares, stores nothing
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    mine = target.value.id == receiver
                    if not mine:
                        held = self.instances() if held is None else held
                        if target.value.id not in held:
                            continue  # `args.lr = ...`: no instance of one callee's the local holds
                    value, call = node.value, node.value if type(node.value) is ast.Call else None
                    if type(value) is ast.Name and len(targets) == 1:  # `h = Helper(...)`, then `self.h = h`
                        held = self.instances() if held is None else held
                        callee = held.get(value.id)  # type: ignore[attr-defined]
                        call = self.once(value.id) if callee is not None else None  # type: ignore[attr-defined]
                    else:
                        found = self.origins(value, node.lineno) if call is not None else ()
                        whole = len(found) == 1 and found[0][1] == -1 and len(targets) == 1
                        callee = found[0][0] if whole else None
                    if mine:
                        self.attributes.append((target.attr, callee))
                        if callee is not None and call is not None:
                            self.attribute_calls.append((target.attr, call))
                    else:
                        self.outside.append((held[target.value.id], target.attr, callee or ""))  # type: ignore[index]
                elif not isinstance(target, ast.Name):
                    if receiver is not None:
                        self.attributes.extend((attr, None) for attr in _attributes_of(target, receiver))
                    if isinstance(target, (ast.Tuple, ast.List)):  # `t.a, t.b = ...`: as no one callee's result
                        held = self.instances() if held is None else held
                        for local, callee in held.items():
                            self.outside.extend((callee, attr, "") for attr in _attributes_of(target, local))

    def _bind(self, target: ast.expr, value: ast.expr, line: int) -> None:
        if isinstance(target, ast.Name):
            if type(value) is ast.Call:
                self.built[target.id] = value
            if isinstance(value, ast.Dict):
                entries = self.dicts.setdefault(target.id, {})
                for key, item in zip(value.keys, value.values):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        entries.setdefault(key.value, []).append(self.entry(item, line))
                    elif key is None and isinstance(item, ast.Name):
                        self.merged.setdefault(target.id, []).append((line, item.id))
                return
            self.bound.setdefault(target.id, []).append((line, self.origins(value, line)))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for k, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    picked = self._element(value, k, line)
                    self.bound.setdefault(element.id, []).append((line, picked))
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
            known = self.dicts.get(target.value.id)
            if known is not None:
                known.setdefault(target.slice.value, []).append(self.entry(value, line))

    def entry(self, value: ast.expr, line: int) -> _Entry:
        found = self.origins(value, line)
        return found, _position(value), _unparsed(value) if found else ""

    def _element(self, value: ast.expr, k: int, line: int) -> tuple[Origin, ...]:
        """The origins of element ``k`` of what ``value`` gives (a tuple written out, or a call's result)."""
        if isinstance(value, (ast.Tuple, ast.List)):
            return self.origins(value.elts[k], line) if k < len(value.elts) else ()
        return tuple((callee, k, lits) for callee, element, lits in self.origins(value, line) if element == -1)

    def origins(self, node: ast.expr, line: int) -> tuple[Origin, ...]:
        """Where the value of ``node`` comes from (the module docs), read at ``line``."""
        kind = type(node)  # (`ast.parse` makes no subclasses)
        while kind is ast.Call and type(node.func) is ast.Attribute and node.func.attr in _KEEPS:  # type: ignore[attr-defined]
            node = node.func.value  # type: ignore[attr-defined]
            kind = type(node)
        if kind is ast.Name:
            if node.id in self.bound or node.id in self.params:  # type: ignore[attr-defined]
                return self.of(node.id, line)  # type: ignore[attr-defined]
            return self.named(node.id)  # type: ignore[attr-defined]
        if kind is ast.Subscript and type(node.value) is ast.Call:  # type: ignore[attr-defined]
            k = int_value(node.slice)  # type: ignore[attr-defined]
            return self._element(node.value, k, line) if k is not None and k >= 0 else ()  # type: ignore[attr-defined]
        if kind is ast.Call:
            callee = qualified(node.func, self.names)
            if callee is None or self.library_or_value(callee):
                return ()
            return ((callee, -1, _literals(node)),)
        return ()

    def named(self, name: str) -> tuple[Origin, ...]:
        """A function named, not called (`NAMED`): a ``def`` nested here, an imported name, a module ``def``."""
        if name in self.nested:
            return ((f"{self.qualname}.{name}", NAMED, ()),)
        found = self.names.get(name)
        if found is not None and found.split(".", 1)[0] not in _LIBRARIES:
            return ((found, NAMED, ()),)
        return ((name, NAMED, ()),) if name in self.defs else ()

    def library_or_value(self, callee: str) -> bool:
        """Is ``callee`` (qualified, `qualified`) never the project's (`_LIBRARIES`, `_BUILTINS`), or a method
        of a value the function holds (``ids.values()``: a parameter or a local, not the method's receiver)?"""
        head, dot, _ = callee.partition(".")
        if head in _LIBRARIES or head in _BUILTINS and head not in self.defs and head not in self.names:
            return True
        return bool(dot) and head != self.receiver and (head in self.params or head in self.bound)

    def of(self, name: str, line: int) -> tuple[Origin, ...]:
        """The origins of local ``name`` bound before ``line`` (on any path)."""
        out: list[Origin] = []
        for at, found in self.bound.get(name, ()):
            if at < line:
                out.extend(o for o in found if o not in out)
        return tuple(out)

    def entries(self, name: str, line: int, seen: frozenset[str] = frozenset()) -> dict[str, list[_Entry]] | None:
        """The entries of dict ``name`` built in the function, each key with its values on every path
        (merged ``**e`` and ``.update(e)`` of dicts built there too), else None."""
        if name not in self.dicts or name in seen:
            return None
        out = {key: list(values) for key, values in self.dicts[name].items()}
        for at, other in self.merged.get(name, ()):
            if at < line:
                for key, values in (self.entries(other, line, seen | {name}) or {}).items():
                    out.setdefault(key, []).extend(values)
        return out

    def instances(self) -> dict[str, str]:
        """The locals bound, on every path, to one call's whole result, all of one callee (``ds = Pairs(x)``
        in both arms of an ``if``), never stored otherwise; and the parameters annotated with a name
        (``ds: Pairs``, ``ds: "Pairs"``) never stored: local -> the callee (or annotation) as `qualified`
        spells it. Whether that is a class is the project's to say."""
        out: dict[str, str] = {}
        for name, bindings in self.bound.items():
            if name in self.rebound or name in self.params or name == self.receiver:
                continue
            callees = {found[0][0] for _, found in bindings if len(found) == 1 and found[0][1] == -1}
            if len(callees) == 1 and all(len(found) == 1 and found[0][1] == -1 for _, found in bindings):
                out[name] = callees.pop()
        args = self.function.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            annotation = arg.annotation
            if annotation is None or arg.arg in self.bound or arg.arg in self.rebound or arg.arg == self.receiver:
                continue
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                try:
                    annotation = ast.parse(annotation.value, mode="eval").body
                except SyntaxError:
                    continue
            callee = qualified(annotation, self.names) if isinstance(annotation, (ast.Name, ast.Attribute)) else None
            if callee is not None and callee not in _BUILTIN_NAMES and not self.library_or_value(callee):
                out[arg.arg] = callee
        return out

    def once(self, name: str) -> ast.Call | None:
        """The call local ``name`` is bound to by its one store (``x = f(...)``), else None."""
        if name in self.rebound or name in self.params or len(self.bound.get(name, ())) != 1:
            return None
        return self.built.get(name)

    def function_value(self, value: ast.expr, held: dict[str, str]) -> str | None:
        """``value`` as `qualified` spells it where it may be a function the function was given or can
        name: a parameter, a module's or an import's name, a method of the receiver or of an instance a
        local holds (``held``, `instances`), a function of a module; not a local bound to a value, nor an
        attribute of another parameter (``args.lr``: a configuration's)."""
        if isinstance(value, ast.Name):
            return None if value.id in self.bound or value.id in self.rebound else qualified(value, self.names)
        if not isinstance(value, ast.Attribute):
            return None
        head: ast.expr = value
        while isinstance(head, ast.Attribute):
            head = head.value
        if not isinstance(head, ast.Name):
            return None
        name = head.id
        if name in self.params and name != self.receiver and name not in held:
            return None
        if (name in self.bound or name in self.rebound) and name not in held:
            return None
        return qualified(value, self.names)

    def loader_param(self) -> str | None:
        """The parameter every ``DataLoader(...)`` the function returns (built in the ``return``, or a local
        bound to one once) is given as ``collate_fn``, else None."""
        found: set[str] = set()
        for node in self.returns:
            value = node.value
            if isinstance(value, ast.Name):
                value = self.once(value.id)
            if value is None or not is_dataloader(value):
                continue
            given = next((k.value for k in value.keywords if k.arg == "collate_fn"), None)  # type: ignore[attr-defined]
            if not (isinstance(given, ast.Name) and given.id in self.params and given.id not in self.bound
                    and given.id not in self.rebound):
                return None
            found.add(given.id)
        return found.pop() if len(found) == 1 else None

    def handed(self, qualname: str, held: dict[str, str],
               attributes: list[tuple[str, int, int, str, str]] | None = None) -> list[Handed]:
        """The calls given a local another call built once (`Handed`), a DataLoader built in the function
        left out (`layoutcheck.model.calls` hands its collate function on itself); ``held``: `instances`."""
        out: list[Handed] = []
        if not self.built and (attributes is None or self.receiver is None):
            return out  # no local built by a call, no attribute of a receiver: nothing handed
        stack = list(self.calls)
        while stack:
            node = stack.pop()
            func = node.func
            while isinstance(func, ast.Attribute):  # `Trainer(loader).fit()`: the constructor's call too
                func = func.value
                if isinstance(func, ast.Call):
                    stack.append(func)
                    func = func.func
            if isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_NAMES and node.func.id not in self.names:
                continue  # `len(loader)`: a builtin keeps no loader
            slots: list[tuple[str, ast.expr]] = []
            for i, arg in enumerate(node.args):
                if isinstance(arg, ast.Starred):
                    break
                slots.append((f"#{i}", arg))
            slots += [(k.arg, k.value) for k in node.keywords if k.arg is not None]
            for slot, arg in slots:
                if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == self.receiver:
                    if attributes is not None:  # `Trainer(self.loader)`: the class's to say what built it
                        attributes.append((qualname, node.lineno, node.col_offset + 1, slot, arg.attr))
                    continue
                made = self.once(arg.id) if isinstance(arg, ast.Name) else None
                built = self.built_by(made, held) if made is not None else None
                if built is not None:
                    out.append((qualname, node.lineno, node.col_offset + 1, slot, *built))
        return out

    def built_by(self, made: ast.Call, held: dict[str, str], bare: bool = False,
                 ) -> tuple[str, tuple[tuple[str, str], ...]] | None:
        """The callee of ``made`` (a project call, no DataLoader) and the arguments it is given that may be
        functions (`function_value`), each with where; None where there are none. ``bare``: a method of
        an instance a local holds is spelt through its class (``pkg.data.Pairs.collate_fn``), for a reader
        outside this function."""
        if is_dataloader(made):
            return None
        callee = qualified(made.func, self.names)
        if callee is None or callee.split(".", 1)[0] in _LIBRARIES or callee in _BUILTIN_NAMES:
            return None
        given: list[tuple[str, str]] = []
        slots = [(f"#{i}", value) for i, value in enumerate(made.args)]
        starred = next((i for i, value in enumerate(made.args) if isinstance(value, ast.Starred)), None)
        if starred is not None:
            slots = slots[:starred]
        slots += [(k.arg, k.value) for k in made.keywords if k.arg is not None]
        for slot, value in slots:
            text = self.function_value(value, held)
            if text is None:
                continue
            head = value
            while isinstance(head, ast.Attribute):
                head = head.value
            if bare and isinstance(value, ast.Attribute) and isinstance(head, ast.Name) and head.id in held \
                    and value.value is head:
                text = f"{held[head.id]}.{value.attr}"
            elif bare and isinstance(head, ast.Name) and head.id in self.bound:
                continue
            given.append((slot, text))
        return (callee, tuple(given)) if given else None

    def note_updates(self) -> None:
        """``d.update(e)`` / ``d.update(k=v)`` of a dict ``d`` built in the function."""
        for node in self.calls:
            if isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in self.dicts:
                name = node.func.value.id
                for arg in node.args:
                    if isinstance(arg, ast.Name):
                        self.merged.setdefault(name, []).append((node.lineno, arg.id))
                for kw in node.keywords:
                    if kw.arg:
                        self.dicts[name].setdefault(kw.arg, []).append(self.entry(kw.value, node.lineno))


def _registries(body: list[ast.stmt]) -> dict[str, list[str]]:
    """The module's dicts of functions (``FORWARDS = {Model.A: forward_a, Model.B: forward_b}``): each
    top-level dict whose values are all names, with those names."""
    out: dict[str, list[str]] = {}
    for stmt in body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else \
            stmt.target if isinstance(stmt, ast.AnnAssign) else None
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict) and value.values \
                and all(isinstance(v, ast.Name) for v in value.values):
            out[target.id] = list(dict.fromkeys(v.id for v in value.values))  # type: ignore[attr-defined]
    return out


def _returns(walk: _Function, qualname: str, returns: list[Returned], dicts: list[DictEntry],
             registries: dict[str, list[str]]) -> None:
    for node in walk.returns:
        if node.value is None:
            continue
        parts = list(enumerate(node.value.elts)) if isinstance(node.value, ast.Tuple) else [(-1, node.value)]
        for element, part in parts:
            returns.extend((qualname, element, o) for o in walk.origins(part, node.lineno))
            if isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name) and part.value.id in registries \
                    and part.value.id not in walk.bound and part.value.id not in walk.params:
                # a function looked up in a module's dict of functions: any of them (`NAMED`)
                for name in registries[part.value.id]:
                    returns.extend((qualname, element, o) for o in walk.named(name))
            if isinstance(part, ast.Name):
                for key, values in (walk.entries(part.id, node.lineno) or {}).items():
                    dicts.extend((qualname, element, key, found, where, text) for found, where, text in values)


def _passes(walk: _Function, qualname: str, out: list[Pass]) -> None:
    for node in walk.calls:
        if not (node.args or node.keywords):
            continue
        args: list[Argument] = []
        given: list[str] = []
        spread: list[Origin] = []
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                break
            if not (isinstance(arg, ast.Constant) and arg.value is None):
                given.append(f"#{i}")
            found = walk.origins(arg, node.lineno)
            if found:
                args.append((f"#{i}", found, _position(arg), _unparsed(arg)))
        for kw in node.keywords:
            if kw.arg is not None:
                if not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                    given.append(kw.arg)
                found = walk.origins(kw.value, node.lineno)
                if found:
                    args.append((kw.arg, found, _position(kw.value), _unparsed(kw.value)))
                continue
            entries = walk.entries(kw.value.id, node.lineno) if isinstance(kw.value, ast.Name) else None
            if isinstance(kw.value, ast.Dict):
                entries = {k.value: [walk.entry(v, node.lineno)] for k, v in zip(kw.value.keys, kw.value.values)
                           if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if entries is not None:
                given.extend(entries)
                args.extend((key, found, where, text) for key, values in entries.items()
                            for found, where, text in values if found)
            else:
                spread.extend(walk.origins(kw.value, node.lineno))
        func = node.func
        local = isinstance(func, ast.Name) and (func.id in walk.params or func.id in walk.bound)
        mine = walk.of(func.id, node.lineno) if local else ()  # type: ignore[union-attr]
        if not (args or spread or mine):
            continue  # (a local's call is kept for what the local holds: a function a factory returned)
        callee = qualified(func, walk.names)
        if callee is None or walk.library_or_value(callee):
            continue
        attribute = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == walk.receiver
        out.append((qualname, callee, local or attribute, mine, tuple(args), tuple(sorted(set(given))),
                    tuple(spread)))


def value_origins(tree: ast.Module) -> ValueOrigins:
    """The module's returns, returned dicts and calls with the origins of their values (the module docs)."""
    return origins_and_instances(tree)[0]


def origins_and_instances(tree: ast.Module) -> tuple[ValueOrigins, Summaries]:
    """`value_origins`, and from the same walk of each function the instances its locals hold, the loader
    it builds from a parameter and the locals it hands on (`Summaries`)."""
    names: dict[str, str] = {}
    scope_names(tree.body, names)
    returns: list[Returned] = []
    dicts: list[DictEntry] = []
    passes: list[Pass] = []
    own, reach, classes = receivers(tree)
    defs = frozenset(s.name for s in tree.body if isinstance(s, _FUNCTIONS))
    registries = _registries(tree.body)
    instances: list[Instance] = []
    builders: list[tuple[str, str]] = []
    handed: list[Handed] = []
    attributes: dict[tuple[str, str], set[str | None]] = {}
    stores: dict[tuple[str, str], int] = {}
    builds: dict[tuple[str, str], tuple[str, tuple[tuple[str, str], ...]]] = {}
    handed_attributes: list[tuple[str, int, int, str, str, str]] = []
    outside: set[Outside] = set()
    for qualname, function in defs_with_qualnames(tree):
        walk = _Function(function, names, reach.get(function), qualname, defs)
        cls = classes.get(function) if walk.receiver is not None and own.get(function) == walk.receiver else None
        held = walk.instances()
        if walk.attributes:
            # a method's stores are its class's; a closure's (its receiver the enclosing method's) are a
            # class's this walk does not name: what it stores there is unknown to every reader
            for attr, callee in walk.attributes:
                attributes.setdefault((cls or "", attr), set()).add(callee if cls is not None else None)
                stores[(cls or "", attr)] = stores.get((cls or "", attr), 0) + 1
            for attr, call in walk.attribute_calls:
                built = walk.built_by(call, held, bare=True) if cls is not None else None
                if built is not None:
                    builds[(cls, attr)] = built
        outside.update(walk.outside)
        walk.note_updates()
        _returns(walk, qualname, returns, dicts, registries)
        _passes(walk, qualname, passes)
        instances.extend((qualname, local, callee) for local, callee in sorted(held.items()))
        param = walk.loader_param() if walk.returns else None
        if param is not None:
            builders.append((qualname, param))
        given: list[tuple[str, int, int, str, str]] = []
        handed.extend(walk.handed(qualname, held, given if cls is not None else None))
        handed_attributes.extend((*entry, cls) for entry in given)
    unknown = {attr for (cls, attr) in attributes if not cls}
    for qualname, line, column, slot, attr, cls in handed_attributes:
        # `Trainer(self.loader)` / a loop over it: the call that stored it, where the class stores it once
        built = builds.get((cls, attr))
        if built is not None and stores.get((cls, attr)) == 1 and attr not in unknown:
            handed.append((qualname, line, column, slot, *built))
    held_by = tuple((cls, attr, next(iter(callees))) for (cls, attr), callees in sorted(attributes.items())
                    if cls and attr not in unknown and len(callees) == 1 and None not in callees)
    return (tuple(returns), tuple(dicts), tuple(passes)), (tuple(instances), tuple(builders), tuple(handed), held_by,
                                                           tuple(sorted(outside)))
