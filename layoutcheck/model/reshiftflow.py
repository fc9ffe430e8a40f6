"""A record field stored already shifted and shifted again where it is read, across modules (class 4).

`layoutcheck.model.reshift` reads one module: a field stored as the result of
a shifter of the module, read back into a shifter of the same kind. Real
trainers spread it over four: a shifter in a utility module, a dataset that
stores ``out["ids"] = shift(ids, left=False)``, a training script that reads
``batch["ids"]`` and hands it to a method of a head class in a fourth module,
which shifts its parameter again (sgl-project/SpecForge 20924186). Here the
project joins the modules' summaries:

* each module's shifters (`FileFacts.shifters`: the parameter returned shifted,
  and the kind, also when a parameter of the shifter picks it, ``if left:
  ... else: ...``, read at each call from the literal passed or the default);
* a **shifted store**: a field whose stored value is a call of a shifter
  (`FieldWrite.calls` resolved through the imports), of the kind its
  arguments pick;
* a **second shift**: a field read (`Arg.fields`, through conversions but not
  through another call) passed to a shifter, or to a function that passes
  that parameter to a shifter; a method called on an instance whose class is
  not known (``head.prepare(ids)``) reaches every ``def`` of that name in the
  project, and counts only when every one of them shifts the parameter the
  same way;
* the store is flagged when a second shift of the same kind reads its field in
  a module that imports the store's (directly or through others): the value
  read there can be the one stored.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from layoutcheck.records import dataclass

from layoutcheck.model.facts import Call, FieldWrite, FunctionRef, Param
from layoutcheck.model.graph import ProjectGraph
from layoutcheck.model.syntax import SUPER

__all__ = ["ReshiftedStore", "SiblingShift", "reshifted_stores", "sibling_shifts"]


@dataclass(frozen=True)
class ReshiftedStore:
    """A field stored as a shifter's result and shifted again, the same way, where a module that imports
    the store's reads it."""

    file: int
    write: FieldWrite
    kind: str
    again: FunctionRef
    """The function that shifts the read value again (the shifter itself, or the function that applies it)."""


Summary = tuple[str, str, str, str]
"""(the shifted parameter, kind if the condition holds, kind if not, the condition's parameter or "")."""


def _literal_truth(node: ast.expr | None, default: str | None) -> bool | None:
    """The truth of a literal argument (or of the parameter's default when none is passed), else None."""
    if node is None:
        if default is None:
            return None
        try:
            node = ast.parse(default, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Constant):
        return bool(node.value)
    return None


def _call_node(text: str) -> ast.Call | None:
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:  # a snippet cut short
        return None
    return node if isinstance(node, ast.Call) else None


def _kind(summary: Summary, params: Sequence[Param], call: ast.Call | None, method: bool) -> str | None:
    """The kind of shift a call (as parsed from its text; None when not known) applies, by the summary."""
    _, when_true, when_false, cond = summary
    if not cond or when_true == when_false:
        return when_true
    if call is None:
        return None
    positional = [p for p in params if p.kind in ("posonly", "pos")]
    if method:  # the receiver fills the first, whatever it is called
        positional = positional[1:]
    passed: ast.expr | None = None
    for kw in call.keywords:
        if kw.arg == cond:
            passed = kw.value
    names = [p.name for p in positional]
    if passed is None and cond in names and names.index(cond) < len(call.args):
        passed = call.args[names.index(cond)]
        if isinstance(passed, ast.Starred):
            return None
    default = next((p.default for p in params if p.name == cond), None)
    truth = _literal_truth(passed, default)
    if truth is None:
        return None
    return when_true if truth else when_false


class _Flow:
    def __init__(self, graph: ProjectGraph) -> None:
        self.graph = graph
        self.summaries: dict[FunctionRef, Summary] = {}
        for i, file in enumerate(graph.files):
            if not file.facts.shifters:
                continue
            by_name = {f.qualname: j for j, f in enumerate(file.facts.functions) if j}
            for qualname, *rest in file.facts.shifters:
                j = by_name.get(qualname)
                if j is not None:
                    self.summaries[(i, j)] = (rest[0], rest[1], rest[2], rest[3])
        self._applies: dict[FunctionRef, dict[str, str | None]] = {}

    def shifted_arguments(self, caller: FunctionRef, call: Call) -> dict[int, tuple[str, FunctionRef]]:
        """Argument position in ``call.args`` -> (the kind of shift, the ``def`` that applies it) for each
        argument the call shifts: the ``def`` it reaches shifts the parameter the argument binds (itself,
        or by passing it on to a shifter). A method called on an instance whose class is not known
        reaches every method of that name in the project: an argument counts only when every one of them
        shifts it, the same way."""
        graph = self.graph
        target = graph.resolve(caller, call)
        if target is not None:
            targets = [target]
        else:
            head, _, method = call.callee.rpartition(".")
            if not head or head == graph.receiver(caller) or head.startswith(SUPER):
                return {}  # a method of the caller's own class, or of a base the project does not define
            targets = [ref for ref in graph.defs_named(method) if graph.signature(ref).cls is not None]
            if not targets:
                return {}
        parsed = _call_node(call.text)
        agreed: dict[int, tuple[str, FunctionRef]] | None = None
        for ref in targets:
            params, _, method = graph.receiving(caller, call, ref)
            bound = graph.bind(params, call, method)
            applied = self.applied(ref, parsed, (params, method))
            mine = {k: (applied[name], ref) for k, arg in enumerate(call.args)
                    for name, given in bound.items() if given is arg and name in applied}
            if agreed is None:
                agreed = mine
            else:
                agreed = {k: v for k, v in agreed.items() if k in mine and mine[k][0] == v[0]}
            if not agreed:
                return {}
        return agreed or {}

    def applied(self, ref: FunctionRef, call: ast.Call | None,
                receiving: tuple[Sequence[Param], bool] | None = None) -> dict[str, str]:
        """Parameter -> the kind of shift ``ref`` applies to it: as a shifter (for a call as ``call``, which
        fills the parameters ``receiving`` gives, the first by the receiver or not, `ProjectGraph.receiving`;
        by default an instance's call), or by passing the parameter on, unchanged, to a shifter."""
        out: dict[str, str] = {}
        function = self.graph.signature(ref)
        summary = self.summaries.get(ref)
        if summary is not None:
            params, method = receiving or (function.params, function.receiver is not None)
            kind = _kind(summary, params, call, method)
            if kind is not None:
                out[summary[0]] = kind
        for param, kind in self._applies_of(ref).items():
            if kind is not None:
                out.setdefault(param, kind)
        return out

    def _applies_of(self, ref: FunctionRef) -> dict[str, str | None]:
        """Parameter -> the kind of shift ``ref``'s own calls of shifters apply to it (None: two kinds)."""
        found = self._applies.get(ref)
        if found is not None:
            return found
        found = {}
        self._applies[ref] = found
        graph = self.graph
        for call in graph.function(ref).calls:
            target = graph.resolve(ref, call)
            summary = self.summaries.get(target) if target is not None else None
            if summary is None:
                continue
            bound = graph.binding(ref, call, target)
            arg = bound.get(summary[0])
            if arg is None or not arg.bare or len(arg.params) != 1:
                continue
            params, _, method = graph.receiving(ref, call, target)
            kind = _kind(summary, params, _call_node(call.text), method)
            if kind is None:
                continue
            param = arg.params[0]
            found[param] = kind if found.get(param, kind) == kind else None
        return found

    def shifted_stores(self) -> dict[str, list[tuple[int, FieldWrite, str]]]:
        """Field -> (file, write, kind) for each store of a shifter's result."""
        graph = self.graph
        out: dict[str, list[tuple[int, FieldWrite, str]]] = {}
        for i, file in enumerate(graph.files):
            if file.is_test:
                continue
            for write in file.facts.field_writes:
                if write.entry or len(write.calls) != 1 or write.calls[0].startswith("*"):
                    continue
                call = _call_node(write.text)
                if call is None:
                    continue
                target = graph.resolve_callee((i, write.function), write.calls[0])
                summary = self.summaries.get(target) if target is not None else None
                if summary is None:
                    continue
                function = graph.signature(target)
                method = graph.fills_receiver((i, write.function), write.calls[0], target)
                kind = _kind(summary, function.params, call, method)
                if kind is not None:
                    out.setdefault(write.key, []).append((i, write, kind))
        return out


def _importers(graph: ProjectGraph, files: set[int]) -> dict[int, set[int]]:
    """For each file of ``files``: the project files that import it, directly or through others (itself
    included)."""
    imported_by: dict[int, set[int]] = {}
    for i in range(len(graph.files)):
        for j in graph.imported_files(i):
            imported_by.setdefault(j, set()).add(i)
    out: dict[int, set[int]] = {}
    for start in files:
        seen = {start}
        todo = [start]
        while todo:
            for k in imported_by.get(todo.pop(), ()):
                if k not in seen:
                    seen.add(k)
                    todo.append(k)
        out[start] = seen
    return out


def reshifted_stores(graph: ProjectGraph) -> list[ReshiftedStore]:
    """The stores of shifted values whose field a module importing the store's shifts again (see the
    module docs)."""
    flow = _Flow(graph)
    if not flow.summaries:
        return []
    stores = flow.shifted_stores()
    if not stores:
        return []
    reach = _importers(graph, {i for found in stores.values() for i, _, _ in found})
    readers = set().union(*reach.values())
    # (field, kind) -> the function reading the field -> the function that shifts it again
    again: dict[tuple[str, str], dict[FunctionRef, FunctionRef]] = {}
    for ref, function in graph.functions_calling(_call_last_names(graph, flow)):
        if ref[0] not in readers:
            continue
        for call in function.calls:
            fields = {arg.fields[0] for arg in call.args
                      if len(arg.fields) == 1 and not arg.calls and arg.fields[0] in stores}
            if not fields:
                continue
            for k, (kind, target) in flow.shifted_arguments(ref, call).items():
                arg = call.args[k]
                if len(arg.fields) != 1 or arg.calls or arg.fields[0] not in fields:
                    continue
                again.setdefault((arg.fields[0], kind), {}).setdefault(ref, target)
    out: list[ReshiftedStore] = []
    for key, found in stores.items():
        for i, write, kind in found:
            where = again.get((key, kind), {})
            # Not the store's own function: a field read there is the value before the store's shift
            # (``out["ids"] = shift(rec["ids"])``).
            hit = next((where[r] for r in sorted(where) if r[0] in reach[i] and r != (i, write.function)), None)
            if hit is not None:
                out.append(ReshiftedStore(i, write, kind, hit))
    return out


def _call_last_names(graph: ProjectGraph, flow: _Flow) -> set[str]:
    """The last names of the calls that can shift a value: the shifters' and those of the functions that
    pass a parameter to one (a call reaches a ``def`` only through the names `ProjectGraph.target_names` gives)."""
    names = graph.target_names(flow.summaries)
    for ref, function in graph.functions_calling(names):
        if any(flow.applied(ref, None).values()):
            names.add(function.qualname.rsplit(".", 1)[-1])
    return names


@dataclass(frozen=True)
class SiblingShift:
    """A field of a record that one implementation of a method shifts and another leaves, where both build
    the same record and shift its other fields alike (class 5: the field's positions depend on which
    implementation ran)."""

    function: FunctionRef
    call: Call
    """The shifter call that moves the field's value (`Call.span` is where it is flagged)."""
    field: str
    record: str
    kind: str
    other: FunctionRef
    """An implementation that leaves the field unshifted."""
    agreed: tuple[str, ...]
    """Fields every implementation shifts the same way: what shows they build one layout."""


def _root(text: str) -> str:
    """The name an argument's text starts with (``mask[..., None]`` -> ``mask``), or ""."""
    head = ""
    for ch in text:
        if ch.isalnum() or ch == "_":
            head += ch
        else:
            break
    return head if head.isidentifier() else ""


def sibling_shifts(graph: ProjectGraph, index: int) -> list[SiblingShift]:
    """Implementations, in file ``index``, of one method they override (`ProjectGraph.base_method`) that
    build the same record (a call given two or more keyword arguments, by one name in each) and shift its
    fields differently: a field one of them passes through a shifter (``shift(mask, left=False)``, also a
    shifter of another module, `_Flow.shifted_arguments`) and another does not, while a field every one
    of them shifts the same way shows the convention. Flagged at the shifts of the implementations in
    the minority for that field (on a tie, those that shift it)."""
    facts = graph.files[index].facts
    groups: dict[FunctionRef, list[FunctionRef]] = {}
    for j, function in enumerate(facts.functions):
        cls, _, name = function.qualname.rpartition(".")
        if not j or not cls or function.receiver is None:
            continue
        base = graph.base_method(index, cls, name)
        if base is not None:
            groups.setdefault(base, []).append((index, j))
    groups = {base: members for base, members in groups.items() if len(members) >= 2}
    if not groups:
        return []
    flow = _Flow(graph)
    if not flow.summaries:
        return []
    out: list[SiblingShift] = []
    for members in groups.values():
        built: dict[FunctionRef, dict[str, dict[str, str]]] = {}
        shifted: dict[FunctionRef, dict[str, tuple[str, Call]]] = {}
        for ref in members:
            calls = graph.function(ref).calls
            built[ref] = {call.callee: {a.keyword: _root(a.text) for a in call.args if a.keyword}
                          for call in calls if sum(1 for a in call.args if a.keyword) >= 2}
            moved: dict[str, tuple[str, Call]] = {}
            for call in calls:
                for position, (kind, _) in flow.shifted_arguments(ref, call).items():
                    name = _root(call.args[position].text)
                    if name and call.args[position].text == name:
                        moved.setdefault(name, (kind, call))
            shifted[ref] = moved
        records = set.intersection(*(set(b) for b in built.values()))
        for record in sorted(records):
            fields = set.intersection(*(set(built[ref][record]) for ref in members))
            kinds = {f: {ref: shifted[ref].get(built[ref][record][f], (None, None))[0] for ref in members}
                     for f in fields}
            agreed = tuple(sorted(f for f, by in kinds.items() if len(set(by.values())) == 1
                                  and next(iter(by.values())) is not None))
            if not agreed:
                continue
            for f in sorted(fields):
                by = kinds[f]
                plain = [ref for ref, kind in by.items() if kind is None]
                moving = [ref for ref, kind in by.items() if kind is not None]
                if not plain or not moving or len(moving) > len(plain):
                    continue
                for ref in moving:
                    kind, call = shifted[ref][built[ref][record][f]]
                    out.append(SiblingShift(ref, call, f, record, kind, plain[0], agreed))
    return out
