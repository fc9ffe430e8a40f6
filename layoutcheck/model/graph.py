"""The project's files joined by names and calls: what every later question stands on.

`ProjectGraph` holds the `FileFacts` of every file of a run (`FileModel`: the
checked files and the project's other files) and answers, without any notion
of layout spaces:

* names: each module's name, its imports resolved (relative ones against
  its own package), and each call bound to the ``def`` it reaches when
  that ``def`` is in the tree (`ProjectGraph.resolve`), which gives the call
  graph (`ProjectGraph.callers`, `ProjectGraph.callers_of`);
* arguments: which argument each parameter of a called ``def`` receives
  (`ProjectGraph.bind`, `ProjectGraph.bound_calls`);
* what each function reads (`ProjectGraph.fields_read`) and which fields a
  loop over literal keys transforms alike (`ProjectGraph.partner_transforms`);
* tests and benchmarks (`test-paths`) are not the trainer: they are left
  out of the model unless trainer code imports them.

The layers above it add what values hold (`layoutcheck.model.values`), layout
helpers (`layoutcheck.model.helpers`) and owners (`layoutcheck.model.owners`);
`layoutcheck.model.project.Project` is the top one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import field
from layoutcheck.records import dataclass
from functools import cached_property

from layoutcheck.globs import any_match
from layoutcheck.model.calls import BATCHES_BUILT, BATCHES_OF, COLLATE_AT, COLLATE_FOR, LOADER_GIVEN
from layoutcheck.model.settings import LintSettings
from layoutcheck.model.origins import Handed
from layoutcheck.model.summaries import forwarded_calls
from layoutcheck.model.syntax import SUPER
from layoutcheck.model.facts import (
    Arg, Call, FieldWrite, FileFacts, Function, FunctionRef, Param, call_names, calls_may_spell, element_call,
    ensure_calls, ensure_function_calls, functions_by_call_name, functions_calling_names,
)
from layoutcheck.model.vocabulary import Vocabulary, vocabulary

__all__ = ["FileModel", "FunctionRef", "ProjectGraph"]


@dataclass
class FileModel:
    """One file of the project."""

    display: str
    """How findings name it (relative to the working folder when under it)."""
    relpath: str
    """Relative to the configuration root, ``/``-separated."""
    module: str | None
    facts: FileFacts
    checked: bool = True
    """Named by the run (findings are reported); False for a file read only for context."""
    is_test: bool = False
    """`test-paths` matches it and no trainer module imports it."""
    is_package: bool = False
    """An ``__init__.py``: relative imports start at its own package."""


@dataclass
class _Index:
    by_qualname: dict[tuple[int, str], int] = field(default_factory=dict)
    by_name: dict[str, list[FunctionRef]] = field(default_factory=dict)


_REEXPORT_DEPTH = 4
"""How many packages' ``__init__`` re-exports a name is followed through."""


class ProjectGraph:
    """Every file's facts, joined by names and calls; see the module docs."""

    def __init__(self, files: Sequence[FileModel], settings: LintSettings) -> None:
        self.files = list(files)
        self.settings = settings
        self.vocab: Vocabulary = vocabulary(settings)
        self.modules: dict[str, int] = {}
        for i, file in enumerate(self.files):
            if file.module and file.module not in self.modules:
                self.modules[file.module] = i
        self._index = _Index()
        for i, file in enumerate(self.files):
            for j, function in enumerate(file.facts.functions):
                if j == 0:
                    continue
                self._index.by_qualname[(i, function.qualname)] = j
                self._index.by_name.setdefault(function.qualname.rsplit(".", 1)[-1], []).append((i, j))
        self._mark_tests()
        self._resolved: dict[tuple[int, int, int], FunctionRef | None] = {}
        self._resolved_dotted: dict[tuple[int, str], FunctionRef | None] = {}
        self._callers_of: dict[FunctionRef, list[tuple[FunctionRef, Call]]] = {}
        self._by_name_cache: dict[str, list[tuple[FunctionRef, Call]]] = {}
        self._by_name_index: dict[str, list[tuple[FunctionRef, Call]]] = {}
        self._indexed_files: set[int] = set()
        self._pending_names: dict[int, dict[str, list[int]]] = {}
        self._fields_read_in: dict[int, dict[FunctionRef, frozenset[str]]] = {}
        self._static_readers: dict[str, set[FunctionRef]] | None = None
        self._readers: dict[str, frozenset[FunctionRef]] = {}
        self._collates: dict[tuple[FunctionRef, str], FunctionRef | None] = {}
        self._imported: dict[int, frozenset[int]] = {}
        self._lookups: dict[str, FunctionRef | None] = {}
        self._receivers: dict[FunctionRef, str | None] = {}
        self._instance_maps: dict[int, tuple[dict[tuple[str, str], str], dict[str, str],
                                             dict[tuple[str, int, int], list[Handed]]]] = {}
        self._classes_at: dict[str, tuple[int, str] | None] = {}

    # ------------------------------------------------------------ files

    def _mark_tests(self) -> None:
        """`test-paths` files are not the trainer, unless a trainer module imports one."""
        patterns = self.settings.test_paths
        if self.settings.lint_tests or not patterns:
            return
        candidates = {i for i, f in enumerate(self.files) if any_match(patterns, f.relpath) is not None}
        if not candidates:
            return
        imported: set[int] = set()
        for i, file in enumerate(self.files):
            if i in candidates:
                continue
            for module in file.facts.imported:
                target = self._module_file(self._absolute(i, module))
                if target is not None:
                    imported.add(target)
            for _, qualified in file.facts.imports:
                target = self._module_file(self._absolute(i, qualified))
                if target is not None:
                    imported.add(target)
        for i in candidates - imported:
            self.files[i].is_test = True

    def in_model(self, index: int) -> bool:
        """Is file ``index`` part of the trainer model (not a test or benchmark)?"""
        return not self.files[index].is_test

    def function(self, ref: FunctionRef) -> Function:
        """The ``def`` ``ref`` names, its calls decoded (a cached file keeps them as bytes until asked;
        its other ``def`` s' calls stay so)."""
        return ensure_function_calls(self.files[ref[0]].facts, ref[1])

    def signature(self, ref: FunctionRef) -> Function:
        """The ``def`` ``ref`` names, for what it holds besides its calls (name, class, parameters,
        returns): a cached file's calls stay undecoded, so its ``calls`` may read empty here."""
        return self.files[ref[0]].facts.functions[ref[1]]

    def functions(self) -> Iterator[tuple[FunctionRef, Function]]:
        """Every ``def`` of the trainer model (tests and benchmarks left out), calls decoded: a warm
        run must see the calls a cold one sees."""
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            ensure_calls(file.facts)
            for j, function in enumerate(file.facts.functions):
                yield (i, j), function

    def defs(self) -> Iterator[tuple[FunctionRef, Function]]:
        """Every ``def`` of the trainer model, as `functions` gives them but with a cached file's
        calls left undecoded: for code that reads no ``calls`` of what it iterates (`function`
        decodes a file's calls when asked)."""
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for j, function in enumerate(file.facts.functions):
                yield (i, j), function

    def functions_calling(self, names: Collection[str], *, tests: bool = False,
                          ) -> Iterator[tuple[FunctionRef, Function]]:
        """`functions`, less the cached files none of whose calls' last names is in ``names``
        (`call_names`), which stay undecoded. A call reaches a ``def`` only through the names
        `target_names` gives (its own, its class's for a constructor, and the names it is reached
        under otherwise), so code that looks only at calls reaching given ``def`` s misses nothing
        here when it asks with them; it still filters the calls itself.
        ``tests``: the ``def`` s of `test-paths` files too (a call can reach one)."""
        for i, file in enumerate(self.files):
            if file.is_test and not tests:
                continue
            pending = call_names(file.facts)
            if pending is not None and pending.isdisjoint(names):
                continue
            ensure_calls(file.facts)
            for j, function in enumerate(file.facts.functions):
                yield (i, j), function

    def functions_with_calls(self, names: Collection[str], *, tests: bool = False,
                             files: Iterable[int] | None = None) -> Iterator[tuple[FunctionRef, Function]]:
        """The ``def`` s `functions_calling` gives that hold a call whose last name is in ``names``, in
        the same order, with their calls decoded; a cached file's other ``def`` s keep theirs undecoded
        (`functions_calling_names`). For code that reads only the calls spelt with one of ``names``:
        a ``def`` without one gives it nothing to read. ``files``: those files' alone (in their order)."""
        for i in range(len(self.files)) if files is None else files:
            file = self.files[i]
            if file.is_test and not tests:
                continue
            facts = file.facts
            pending = call_names(facts)
            if pending is not None and pending.isdisjoint(names):
                continue
            found = functions_calling_names(facts, names)
            if found is None:
                for j, function in enumerate(facts.functions):
                    if any(call.callee.rsplit(".", 1)[-1] in names for call in function.calls):
                        yield (i, j), function
                continue
            for j in found:
                yield (i, j), ensure_function_calls(facts, j)

    def target_names(self, refs: Iterable[FunctionRef]) -> set[str]:
        """The last names of the calls that can reach ``refs`` (`resolve`): each ``def``'s own name,
        its class's for an ``__init__`` (``Replay(...)``), and the names `resolve` reaches it under
        otherwise (`other_names`)."""
        out: set[str] = set()
        for ref in refs:
            qualname = self.files[ref[0]].facts.functions[ref[1]].qualname
            parts = qualname.rsplit(".", 2)
            out.add(parts[-1])
            if parts[-1] == "__init__" and len(parts) > 1:
                out.add(parts[-2])
            out |= self.other_names(ref)
        return out

    def other_names(self, ref: FunctionRef) -> frozenset[str]:
        """The last names, besides the ``def``'s own, of calls `resolve` may send to ``ref``: the
        attribute it is assigned onto a class under (``Cls.offsets = chunk_offsets``: ``self.offsets(t)``),
        the names a package re-exports it under (`_alias_names`), and the loops over a loader handed to a constructor or built by a call (`BATCHES_OF`,
        `BATCHES_BUILT`: any ``def`` may be the loader's ``collate_fn``; `resolve` still decides which call
        reaches which)."""
        return self._assigned_names.get(ref, frozenset()) | self._alias_names.get(ref, frozenset()) \
            | self._batches_names

    @cached_property
    def _alias_names(self) -> dict[FunctionRef, frozenset[str]]:
        """Per ``def``, the names a package re-exports it under (``from .gpu import attn_v2 as attn`` in
        ``ops/__init__.py``: ``ops.attn(...)`` reaches ``attn_v2``, `_reexported`)."""
        found: dict[FunctionRef, set[str]] = {}
        for i, file in enumerate(self.files):
            if not file.is_package:
                continue
            for local, qualified in file.facts.imports:
                if local != qualified.rsplit(".", 1)[-1]:
                    ref = self._lookup(self._absolute(i, qualified))
                    if ref is not None:
                        found.setdefault(ref, set()).add(local)
        return {ref: frozenset(names) for ref, names in found.items()}

    @cached_property
    def _assigned_names(self) -> dict[FunctionRef, frozenset[str]]:
        """Per ``def`` assigned onto a class in another module (`_assigned_methods`), the names it is
        assigned under."""
        found: dict[FunctionRef, set[str]] = {}
        for target, function in self._assigned_methods.items():
            ref = self._lookup(function)
            if ref is not None:
                found.setdefault(ref, set()).add(target.rsplit(".", 1)[-1])
        return {ref: frozenset(names) for ref, names in found.items()}

    @cached_property
    def _batches_names(self) -> frozenset[str]:
        """The `BATCHES_OF` names the project's files call (tests too), read from a cached file's list
        of names without decoding its calls."""
        found: set[str] = set()
        for file in self.files:
            names = call_names(file.facts)
            if names is None:
                names = {call.callee.rsplit(".", 1)[-1] for function in file.facts.functions
                         for call in function.calls}
            found.update(name for name in names if name.startswith(BATCHES_OF) or name == BATCHES_BUILT)
        return frozenset(found)

    def where(self, ref: FunctionRef) -> str:
        """``path:line`` of a ``def``."""
        return f"{self.files[ref[0]].display}:{self.function(ref).span[0]}"

    def label(self, ref: FunctionRef) -> str:
        """``get_batch`` (``data.py:14``), for messages."""
        return f"`{self.function(ref).qualname}` ({self.where(ref)})"

    def enclosing(self, ref: FunctionRef) -> Iterator[FunctionRef]:
        """The function itself, then the functions it is nested in (not the module)."""
        i, j = ref
        functions = self.files[i].facts.functions
        while j > 0:
            yield (i, j)
            j = functions[j].parent

    def receiver(self, ref: FunctionRef) -> str | None:
        """The name ``ref``'s body reaches a receiver by (``self.m()``, ``self.x = ...``): the receiver
        parameter of the method it is (`Function.receiver`, whatever it is called; None for a
        ``@staticmethod``), or of a ``def`` assigned onto a class (its first parameter, `as_method`),
        else that of the function it is nested in, unless it takes a parameter of that name itself."""
        found = self._receivers.get(ref)
        if found is None and ref not in self._receivers:
            shadowing: set[str] = set()
            for outer in self.enclosing(ref):
                function = self.signature(outer)
                found = function.receiver
                if found is None and function.cls is None and outer in self._assigned_names:
                    positional = [p for p in function.params if p.kind in ("posonly", "pos")]
                    found = positional[0].name if positional else None
                if found is not None:
                    found = None if found in shadowing else found
                    break
                shadowing.update(p.name for p in function.params)
            self._receivers[ref] = found
        return found

    def takes_receiver(self, ref: FunctionRef) -> bool:
        """Does a call of ``ref`` through an instance fill its first parameter with the receiver: a
        method that takes one (`Function.receiver`; not a ``@staticmethod``), or a ``def`` assigned onto
        a class (`as_method`)?"""
        function = self.signature(ref)
        if function.receiver is not None:
            return True
        return function.cls is None and ref in self._assigned_names and any(
            p.kind in ("posonly", "pos") for p in function.params)

    def through_class(self, caller: FunctionRef, callee: str, target: FunctionRef) -> bool:
        """Does ``callee`` (a call's name as written in ``caller``) reach ``target``, a method taking an
        instance, through its class, so that the call passes the receiver by hand (``Cls.method(obj, x)``:
        ``obj`` binds the receiver parameter, ``x`` the next)? The class is named as the module or its
        imports resolve it (``Cls``, ``mod.Cls``), or it is the class a ``@classmethod`` caller's receiver
        holds (``cls.method(obj, x)``). A ``@classmethod`` binds its class through the class too, a
        ``@staticmethod`` takes no receiver, and ``obj.method(x)`` / ``super().method(x)`` fill it."""
        function = self.signature(target)
        if function.receiver is None or function.takes_class or function.cls is None:
            return False
        if callee.startswith("*"):
            callee = element_call(callee)[1]
        head, dot, name = callee.rpartition(".")
        if not dot or name != function.qualname.rsplit(".", 1)[-1]:
            return False
        if head == self.receiver(caller):  # the caller's own receiver: the class when it is a classmethod's
            owner = next((ref for ref in self.enclosing(caller) if self.signature(ref).receiver is not None), None)
            return owner is not None and self.signature(owner).takes_class
        i = caller[0]
        module = self.files[i].module
        return self._lookup(self._absolute(i, callee)) == target or bool(module) and self._lookup(
            f"{module}.{callee}") == target

    def through_receiver(self, caller: FunctionRef, callee: str) -> bool:
        """Is ``callee`` (a call's name as written in ``caller``) an attribute of ``caller``'s receiver
        (``self.fill``, ``this.fill``, ``cls.build``; `receiver`)?"""
        head, dot, rest = callee.partition(".")
        return bool(dot) and bool(rest) and head == self.receiver(caller)

    # ------------------------------------------------------------ names

    def _absolute(self, file_index: int, name: str) -> str:
        """``name`` with leading dots resolved against file ``file_index``'s package."""
        if not name.startswith("."):
            return name
        file = self.files[file_index]
        module = file.module or ""
        level = len(name) - len(name.lstrip("."))
        parts = module.split(".") if module else []
        if not file.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
        rest = name[level:]
        return ".".join([*parts, rest] if rest else parts)

    def _module_file(self, dotted: str) -> int | None:
        """The project file of module ``dotted`` or of its longest module prefix."""
        while dotted:
            found = self.modules.get(dotted)
            if found is not None:
                return found
            if "." not in dotted:
                return None
            dotted = dotted.rsplit(".", 1)[0]
        return None

    def imported_files(self, index: int) -> frozenset[int]:
        """The project files file ``index`` imports (a module, or a name from one; relative imports
        resolved against its package)."""
        found = self._imported.get(index)
        if found is None:
            facts = self.files[index].facts
            names = {dotted for _, dotted in facts.imports} | set(facts.imported)
            found = frozenset(j for j in (self._module_file(self._absolute(index, n)) for n in names)
                              if j is not None and j != index)
            self._imported[index] = found
        return found

    def _lookup(self, dotted: str) -> FunctionRef | None:
        """The ``def`` a fully qualified name (``pkg.mod.func``, ``pkg.mod.Class.method``) names."""
        # Asked again and again for the same names (every call of `torch.cat`, of an imported helper):
        # the modules and the definitions it reads are fixed once the graph is built. Two lookups in three
        # are a name's first (Megatron-LM: 12,242 of 18,495), so a miss is tested, not caught: a caught
        # `KeyError` costs 0.6 us against 0.25 (about 4 ms of a run: no hot path, but no dearer on a hit).
        if dotted in self._lookups:
            return self._lookups[dotted]
        found = self._lookups[dotted] = self._look_up(dotted)
        return found

    def _look_up(self, dotted: str, depth: int = 0) -> FunctionRef | None:
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            index = self.modules.get(module)
            if index is not None:
                qualname = ".".join(parts[cut:])
                j = self._index.by_qualname.get((index, qualname))
                if j is None and len(parts) - cut == 1:
                    # A class called by name: its constructor.
                    j = self._index.by_qualname.get((index, f"{qualname}.__init__"))
                if j is None and self.files[index].is_package and depth < _REEXPORT_DEPTH:
                    return self._reexported(index, qualname, depth)
                return (index, j) if j is not None else None
        return None

    def _reexported(self, index: int, qualname: str, depth: int) -> FunctionRef | None:
        """The ``def`` a package's ``__init__`` names without defining it: the name it imports
        (``from .dp_actor import Actor``, read from its imports when the file was walked), else the one
        module it imports from whose own name ``qualname`` is (a file the prefilter cleared keeps only the
        modules it imports from). ``pkg.Actor(...)`` is then ``pkg.dp_actor.Actor(...)``, as Python binds it."""
        facts = self.files[index].facts
        head, dot, rest = qualname.partition(".")
        imported = dict(facts.imports).get(head)
        if imported is not None:
            return self._look_up(self._absolute(index, imported) + dot + rest, depth + 1)
        found = {ref for module in facts.imported
                 if (ref := self._look_up(f"{self._absolute(index, module)}.{qualname}", depth + 1)) is not None}
        return found.pop() if len(found) == 1 else None

    def resolve(self, caller: FunctionRef, call: Call) -> FunctionRef | None:
        """The ``def`` a call reaches when the tree has it: by import, in the same module
        (``self.method`` included), through the caller's class's bases (``super().method``,
        `_through_super`), or by a name only one ``def`` of the project has."""
        key = (caller[0], caller[1], call.tick)
        if key in self._resolved:
            return self._resolved[key]
        if call.callee == BATCHES_BUILT:  # a loop over a loader a call built: its collate function
            made = self._handed_collate(caller, call, {LOADER_GIVEN})
            found = made.pop() if len(made) == 1 else None
        else:
            found = self._resolve(caller, call.callee)
        self._resolved[key] = found
        return found

    def _resolve(self, caller: FunctionRef, callee: str) -> FunctionRef | None:
        i, j = caller
        file = self.files[i]
        functions = file.facts.functions
        if callee.startswith(BATCHES_OF):
            return self._collate_of(caller, callee[len(BATCHES_OF):])
        if callee.startswith(SUPER):
            return self._through_super(caller, callee)
        head, _, rest = callee.partition(".")
        if rest and "." not in rest and head != self.receiver(caller):
            held = self.instance_class(caller, head)
            if held is not None:  # `ds.collate_fn`, `ds` built as `Pairs(...)`: that class's method
                return self.method_of(*held, rest)
        if rest.count(".") == 1 and head == self.receiver(caller):
            attr, _, name = rest.partition(".")
            held = self.attribute_class(caller, attr)
            if held is not None:  # `self.buffer.collate_fn`, `self.buffer = Buffer(...)`: that class's method
                found = self.method_of(*held, name)
                if found is not None:
                    return found
        if rest and "." not in rest and head == self.receiver(caller):
            cls = None
            for ref in self.enclosing(caller):
                cls = cls or self.signature(ref).cls
            if cls is not None:
                found = self._index.by_qualname.get((i, f"{cls}.{rest}"))
                if found is not None:
                    return (i, found)
                inherited = self.base_method(i, cls, rest)  # the method a project base defines (MRO order)
                if inherited is not None:
                    return inherited
                if file.module:  # a function assigned onto the class, in any module
                    assigned = self._assigned_methods.get(f"{file.module}.{cls}.{rest}")
                    if assigned is not None:
                        return self._lookup(assigned)
            return self._unique(rest)
        if callee.startswith("."):
            return self._lookup(self._absolute(i, callee))
        if "." not in callee:
            # A nested def of an enclosing function, then a module-level one.
            for ref in self.enclosing(caller):
                found = self._index.by_qualname.get((i, f"{functions[ref[1]].qualname}.{callee}"))
                if found is not None:
                    return (i, found)
            found = self._index.by_qualname.get((i, callee))
            if found is not None:
                return (i, found)
            init = self._index.by_qualname.get((i, f"{callee}.__init__"))
            if init is not None:
                return (i, init)
            return self._unique(callee)
        # A dotted name (``torch.cat``, ``mod.helper``) reaches the same ``def`` from anywhere in the
        # file: looked up once per file and name (a file calls the same library functions many times).
        key = (i, callee)
        if key in self._resolved_dotted:
            return self._resolved_dotted[key]
        found = self._lookup(self._absolute(i, callee))
        if found is None and file.module:  # `Class.method` of this module
            found = self._lookup(f"{file.module}.{callee}")
        if found is None:
            found = self._unique(callee.rsplit(".", 1)[-1])
        self._resolved_dotted[key] = found
        return found

    def _through_super(self, caller: FunctionRef, callee: str) -> FunctionRef | None:
        """The ``def`` ``super().m(...)`` in ``caller`` runs (`layoutcheck.model.syntax.super_callee`): ``m`` of
        the first project base of the caller's class that has one (its own, else its bases', as `method_of`
        walks them); ``super(Cls, obj).m(...)`` starts after ``Cls`` (a class of the module or one it imports)
        instead. None when no project base defines ``m`` (a library's, ``nn.Module.__init__``)."""
        inside, _, name = callee[len(SUPER):].partition(").")
        if not name or "." in name:
            return None
        i = caller[0]
        cls = None
        for ref in self.enclosing(caller):
            cls = cls or self.signature(ref).cls
        if inside and (cls is None or inside != cls.rsplit(".", 1)[-1]):
            owner = self._class_named(i, inside)
        else:
            owner = (i, cls) if cls is not None else None
        return self.base_method(*owner, name) if owner is not None else None

    def _instance_facts(self, index: int) -> tuple[dict[tuple[str, str], str], dict[str, str],
                                                    dict[tuple[str, int, int], list[Handed]],
                                                    dict[tuple[str, str], str]]:
        """File ``index``'s `FileFacts.instances` as maps: (function, local) -> callee; loader builder ->
        its collate parameter; (function, line, column) -> the locals its call there is handed; (class,
        attribute) -> callee."""
        found = self._instance_maps.get(index)
        if found is None:
            held, builders, handed, attributes = self.files[index].facts.instances[:4]
            by_call: dict[tuple[str, int, int], list[Handed]] = {}
            for entry in handed:
                by_call.setdefault(entry[:3], []).append(entry)
            found = self._instance_maps[index] = ({(q, local): callee for q, local, callee in held}, dict(builders),
                                                  by_call, {(c, attr): callee for c, attr, callee in attributes})
        return found

    def defined(self, index: int, qualname: str) -> FunctionRef | None:
        """The ``def`` of file ``index`` with that qualname (``Cls.method``, ``outer.inner``)."""
        j = self._index.by_qualname.get((index, qualname))
        return (index, j) if j is not None else None

    def instance_class(self, caller: FunctionRef, name: str) -> tuple[int, str] | None:
        """The project class local (or annotated parameter) ``name`` of ``caller`` holds an instance of
        (`layoutcheck.model.origins.Instance`: bound on every path to a call of that class, ``Pairs(...)``,
        ``data.Pairs(...)``, to a ``@classmethod`` of it whose every return builds ``cls(...)``, or to a
        function whose every return builds it, `built_class`), as (file, class qualname); None when it
        holds anything else or the class is not the project's."""
        held = self._instance_facts(caller[0])[0]
        if not held:
            return None
        callee = held.get((self.signature(caller).qualname, name))
        return self.built_class(caller[0], callee) if callee is not None else None

    def attribute_class(self, caller: FunctionRef, attr: str) -> tuple[int, str] | None:
        """The project class the attribute ``attr`` of ``caller``'s receiver holds an instance of: every
        store of it in the methods of the caller's class (else of the nearest project base that stores it)
        builds that class (`layoutcheck.model.origins.Attribute`, `built_class`: ``self.buffer =
        Buffer(...)`` in ``__init__``, or a function returning one); None otherwise."""
        cls = None
        for ref in self.enclosing(caller):
            cls = cls or self.signature(ref).cls
        return self._attribute_of(caller[0], cls, attr) if cls is not None else None

    def _attribute_of(self, index: int, cls: str, attr: str, depth: int = 0) -> tuple[int, str] | None:
        callee = self._instance_facts(index)[3].get((cls, attr))
        outside = self._stored_from_outside.get((index, cls, attr))
        if callee is not None:
            found = self.built_class(index, callee)
            # stored from outside as well: one class only where every store builds it
            return found if outside is None or outside == {found} else None
        if outside is not None:
            return next(iter(outside)) if len(outside) == 1 else None
        if depth > _REEXPORT_DEPTH * 2:
            return None
        for owner in self._bases_of(index, cls):
            found = self._attribute_of(*owner, attr, depth + 1)
            if found is not None:
                return found
        return None

    @cached_property
    def _stored_from_outside(self) -> dict[tuple[int, str, str], set[tuple[int, str] | None]]:
        """Per (file, class, attribute), the classes every store into it from outside the class builds
        (`layoutcheck.model.origins.Outside`: ``trainer = Trainer(cfg)``, then ``trainer.buffer =
        Buffer(...)`` in any module), None for a store that builds no project class; a class's own stores
        are `FileFacts.instances`' attributes (`_attribute_of` joins both)."""
        found: dict[tuple[int, str, str], set[tuple[int, str] | None]] = {}
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for held, attr, callee in file.facts.instances[4]:
                owner = self.built_class(i, held)
                if owner is not None:
                    found.setdefault((*owner, attr), set()).add(self.built_class(i, callee) if callee else None)
        return found

    def built_class(self, index: int, callee: str, depth: int = 0) -> tuple[int, str] | None:
        """The project class a call of ``callee`` (as file ``index`` writes it) builds: the class itself, a
        ``@classmethod`` of it whose every return builds ``cls(...)``, or a function whose every return
        that names a callee builds one class (``def make_buffer(...): return Buffer(...)``), as (file,
        class qualname)."""
        dotted = self.absolute(index, callee)
        found = self._class_at(dotted)
        if found is None and "." in dotted:  # `Pairs.from_rows(...)`: a classmethod building its class
            owner, _, name = dotted.rpartition(".")
            cls = self._class_at(owner)
            method = self.method_of(*cls, name) if cls is not None else None
            if method is not None and self.signature(method).takes_class and self._builds_class(method):
                found = cls
        if found is None and depth == 0:
            ref = self._lookup(dotted)
            if ref is not None and self.signature(ref).cls is None:
                qualname = self.signature(ref).qualname
                returned = {(at, inner[0], inner[1]) for name, at, inner in self.files[ref[0]].facts.origins[0]
                            if name == qualname}
                if len(returned) == 1:  # one callee's whole result, on every return that names one
                    at, made, element = returned.pop()
                    found = self.built_class(ref[0], made, depth + 1) if at == -1 and element == -1 else None
        return found

    def _builds_class(self, ref: FunctionRef) -> bool:
        """Does every return of ``@classmethod`` ``ref`` build its class (``return cls(...)``)?"""
        receiver = self.signature(ref).receiver
        returned = [inner for name, at, inner in self.files[ref[0]].facts.origins[0]
                    if name == self.signature(ref).qualname]
        return bool(returned) and all(callee == receiver and at == -1 for callee, at, _ in returned)

    def _class_at(self, dotted: str, depth: int = 0) -> tuple[int, str] | None:
        """The class a fully qualified name (``pkg.data.Pairs``) names, through packages' re-exports, as
        (file, class qualname)."""
        if depth == 0 and dotted in self._classes_at:
            return self._classes_at[dotted]
        found: tuple[int, str] | None = None
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            index = self.modules.get(".".join(parts[:cut]))
            if index is None:
                continue
            qualname = ".".join(parts[cut:])
            facts = self.files[index].facts
            if any(q == qualname for q, _ in facts.classes):
                found = (index, qualname)
            elif self.files[index].is_package and depth < _REEXPORT_DEPTH:
                # as `_reexported` reads a package's names: the name it imports, else the one module it
                # imports from that defines it (a file the prefilter cleared keeps only its modules)
                head, dot, rest = qualname.partition(".")
                imported = dict(facts.imports).get(head)
                if imported is not None:
                    found = self._class_at(self._absolute(index, imported) + dot + rest, depth + 1)
                else:
                    every = {c for module in facts.imported
                             if (c := self._class_at(f"{self._absolute(index, module)}.{qualname}", depth + 1))}
                    found = every.pop() if len(every) == 1 else None
            break
        if depth == 0:
            self._classes_at[dotted] = found
        return found

    def method_of(self, index: int, cls: str, name: str, depth: int = 0) -> FunctionRef | None:
        """The ``def`` an instance of class ``cls`` (file ``index``) reaches as ``name``: its own, else its
        project bases' in order (as Python's MRO for single inheritance; bases the project does not
        define are skipped)."""
        j = self._index.by_qualname.get((index, f"{cls}.{name}"))
        if j is not None:
            return (index, j)
        if depth > _REEXPORT_DEPTH * 2:
            return None
        for owner in self._bases_of(index, cls):
            found = self.method_of(*owner, name, depth + 1)
            if found is not None:
                return found
        return None

    def base_method(self, index: int, cls: str, name: str) -> FunctionRef | None:
        """The ``def`` that ``cls.name`` overrides: what ``name`` reaches in ``cls``'s project bases, in order."""
        for owner in self._bases_of(index, cls):
            found = self.method_of(*owner, name)
            if found is not None:
                return found
        return None

    def _bases_of(self, index: int, cls: str) -> Iterator[tuple[int, str]]:
        """Class ``cls`` of file ``index``'s bases that the project defines, in order: (file, qualname)."""
        classes = self.files[index].facts.classes
        for qualname, bases in classes:
            if qualname != cls:
                continue
            for base in bases:
                if not base:
                    continue
                owner = self._class_named(index, base)
                if owner is not None and owner != (index, cls):
                    yield owner
            return

    def _class_named(self, index: int, name: str) -> tuple[int, str] | None:
        """The project class ``name`` (as file ``index`` writes it: a class of its own, a name it imports,
        a dotted name) is: (file, qualname), else None."""
        if any(q == name for q, _ in self.files[index].facts.classes):
            return index, name
        if "." in name:  # `mod.Base`: its head through the file's imports
            return self._class_at(self._qualify(index, name) or name)
        return self._class_at(self._imported_name(index, name))

    def _imported_name(self, index: int, name: str) -> str:
        """A bare name file ``index`` uses, absolute: through the names it imports (``from .base import
        Actor``: ``pkg.base.Actor``), else as `absolute` qualifies it."""
        imported = dict(self.files[index].facts.imports).get(name)
        return self._absolute(index, imported) if imported is not None else self.absolute(index, name)

    def _handed_collate(self, outer: FunctionRef, call: Call, slots: set[str]) -> set[FunctionRef]:
        """The collate functions of the loaders ``call`` (in ``outer``) is given at ``slots`` that a project
        helper built there (``loader = strategy.setup_dataloader(ds, 1, True, True, ds.collate_fn)``: a
        ``def`` returning ``DataLoader(..., collate_fn=<its parameter>)``, `FileFacts.instances`): what
        the caller gave that parameter, resolved as a function."""
        found: set[FunctionRef] = set()
        handed = self._instance_facts(outer[0])[2]
        if not handed:
            return found
        for _, _, _, slot, builder, given in handed.get((self.signature(outer).qualname, *call.span[:2]), ()):
            if slot not in slots:
                continue
            target = self._resolve(outer, builder)
            if target is None:
                continue
            param = self._instance_facts(target[0])[1].get(self.signature(target).qualname)
            if param is None:
                continue
            positional = [p.name for p in self.signature(target).params if p.kind in ("posonly", "pos")]
            if self.fills_receiver(outer, builder, target):
                positional = positional[1:]
            wanted = _slots(positional, param)
            for where, text in given:
                if where in wanted:
                    made = self._resolve(outer, text)
                    if made is None and "." in text:  # `pkg.data.Pairs.collate_fn`: a class's method, inherited too
                        owner, _, name = text.rpartition(".")
                        cls = self._class_at(self.absolute(outer[0], owner))
                        made = self.method_of(*cls, name) if cls is not None else None
                    if made is not None:
                        found.add(made)
        return found

    def _collate_of(self, caller: FunctionRef, param: str) -> FunctionRef | None:
        """The collate function of the DataLoader the callers of ``caller``'s class constructor pass as its
        parameter ``param`` (`layoutcheck.model.calls.BATCHES_OF`): the one ``def`` every such caller's
        `COLLATE_AT` / `COLLATE_FOR` argument reaches, else None."""
        cls = None
        for ref in self.enclosing(caller):
            cls = cls or self.function(ref).cls
        init = self._index.by_qualname.get((caller[0], f"{cls}.__init__")) if cls is not None else None
        if init is None:
            return None
        key = ((caller[0], init), param)
        if key in self._collates:
            return self._collates[key]
        self._collates[key] = None  # a cycle finds nothing
        constructor = self.function((caller[0], init))
        positional = [p.name for p in constructor.params if p.kind in ("posonly", "pos")][1:]
        names = {f"{COLLATE_FOR}{param}"}
        if param in positional:
            names.add(f"{COLLATE_AT}{positional.index(param)}")
        found: set[FunctionRef] = set()
        slots = _slots(positional, param)
        for outer, call in self.callers_of((caller[0], init)):
            for arg in call.args:
                if arg.keyword in names:
                    for made in arg.calls:
                        target = self._resolve(outer, made)
                        if target is not None:
                            found.add(target)
            found |= self._handed_collate(outer, call, slots)
        self._collates[key] = found.pop() if len(found) == 1 else None
        return self._collates[key]

    def _qualify(self, file_index: int, dotted: str) -> str | None:
        """A name as written in file ``file_index`` (``mod.Cls.name``), absolute: its head through the
        file's imports, else a name of the module itself."""
        file = self.files[file_index]
        head, dot, rest = dotted.partition(".")
        imported = dict(file.facts.imports).get(head)
        if imported is not None:
            return self._absolute(file_index, imported + dot + rest)
        return f"{file.module}.{dotted}" if file.module else None

    def absolute(self, file_index: int, name: str) -> str:
        """A name as file ``file_index`` qualifies it (through its imports, leading dots kept; or one of its
        own ``def``s and classes, bare), absolute."""
        if name.startswith("."):
            return self._absolute(file_index, name)
        file = self.files[file_index]
        head = name.split(".")[0]
        if file.module and ((file_index, head) in self._index.by_qualname
                            or any(q.split(".")[0] == head for q, _ in file.facts.classes)):
            return f"{file.module}.{name}"
        return name

    def lookup(self, file_index: int, name: str) -> FunctionRef | None:
        """The ``def`` a name as file ``file_index`` qualifies it (`absolute`) names."""
        return self._lookup(self.absolute(file_index, name))

    @cached_property
    def _assigned_methods(self) -> dict[str, str]:
        """``pkg.mod.Cls.name -> pkg.other.f`` for each function assigned onto a class
        (`FileFacts.assigned_methods`), both absolute; a target given two functions is left out."""
        found: dict[str, set[str]] = {}
        for i, file in enumerate(self.files):
            for target, function in file.facts.assigned_methods:
                where, what = self._qualify(i, target), self._qualify(i, function)
                if where is not None and what is not None:
                    found.setdefault(where, set()).add(what)
        return {target: functions.pop() for target, functions in found.items() if len(functions) == 1}

    def _unique(self, name: str) -> FunctionRef | None:
        """The one trainer ``def`` named ``name``, when the name is distinctive enough to trust."""
        if "_" not in name.strip("_") or len(name) < 8:
            return None
        refs = self._trainer_defs.get(name, ())
        return refs[0] if len(refs) == 1 else None

    @cached_property
    def _trainer_defs(self) -> dict[str, list[FunctionRef]]:
        return {
            name: [r for r in refs if not self.files[r[0]].is_test]
            for name, refs in self._index.by_name.items()
        }

    @cached_property
    def callers(self) -> dict[FunctionRef, list[tuple[FunctionRef, Call]]]:
        """Per ``def``, the calls that reach it (from trainer code), with the calling function."""
        for file in self.files:
            ensure_calls(file.facts)
        out: dict[FunctionRef, list[tuple[FunctionRef, Call]]] = {}
        for ref, function in self.functions():
            for call in function.calls:
                target = self.resolve(ref, call)
                if target is not None and target != ref:
                    out.setdefault(target, []).append((ref, call))
        return out

    def _calls_named(self, name: str) -> list[tuple[FunctionRef, Call]]:
        """Every trainer call whose last name is ``name``; of a cached file that calls the name, only
        the functions that do have their calls decoded (`layoutcheck.model.facts.functions_by_call_name`),
        the file's others stay pending."""
        found = self._by_name_cache.get(name)
        if found is None:
            found = []
            for i, file in enumerate(self.files):
                if file.is_test or i in self._indexed_files:
                    continue  # an indexed file's calls are in `_by_name_index`
                facts = file.facts
                names = call_names(facts)
                if names is None:
                    # Decoded: index every call of the file by its last name once (a few dozen names
                    # are asked; later names are lookups). A decoded file adds no call of another name
                    # to this name's list.
                    ensure_calls(facts)
                    self._indexed_files.add(i)
                    for j, function in enumerate(facts.functions):
                        for call in function.calls:
                            self._by_name_index.setdefault(call.callee.rsplit(".", 1)[-1], []).append(
                                ((i, j), call))
                elif name in names:
                    by_name = self._pending_names.get(i)
                    if by_name is None:
                        by_name = self._pending_names[i] = functions_by_call_name(facts) or {}
                    for j in by_name.get(name, ()):
                        for call in ensure_function_calls(facts, j).calls:
                            if call.callee.rsplit(".", 1)[-1] == name:
                                found.append(((i, j), call))
            found.extend(self._by_name_index.get(name, ()))
            # In the project's order, as when every file was indexed at once (a fresh run), whatever
            # order earlier questions indexed or decoded the files in (the sort is stable: a
            # function's calls stay in their order).
            found.sort(key=lambda item: item[0])
            self._by_name_cache[name] = found
        return found

    def callers_of(self, ref: FunctionRef) -> list[tuple[FunctionRef, Call]]:
        """The calls that reach ``ref``, resolving only the calls spelt with a name that can reach it
        (`target_names`; a one-file run asks this of a few functions; `callers` resolves every call
        of the project, and the two give the same calls, in the same order; this adds the calls through
        forwarding wrappers)."""
        found = self._callers_of.get(ref)
        if found is None:
            if "callers" in self.__dict__:
                found = self.callers.get(ref, [])
            else:
                # Every name a call reaching it can be spelt with (`target_names`: for `Replay.__init__`,
                # `Replay(...)` and `Replay.__init__(self, ...)` alike), as `callers` finds them: in the
                # project's order, each function's calls in source order.
                names = sorted(self.target_names([ref]))
                named = self._calls_named(names[0])
                if len(names) > 1:
                    named = sorted([item for name in names for item in self._calls_named(name)],
                                   key=lambda item: (item[0], item[1].tick))
                found = [
                    (caller, call) for caller, call in named
                    if caller != ref and self.resolve(caller, call) == ref
                ]
            self._callers_of[ref] = found  # a cycle of forwards reads the direct calls
            # calls through a wrapper that forwards its `*args` / `**kwargs` here (`summaries.forwarded_calls`)
            found = found + forwarded_calls(ref, found, self.function, self.callers_of, self.fills_receiver)
            self._callers_of[ref] = found
        return found

    def defs_named(self, name: str) -> list[FunctionRef]:
        """Every trainer ``def`` whose own name is ``name``."""
        return list(self._trainer_defs.get(name, ()))

    # ------------------------------------------------------------ arguments

    @staticmethod
    def bind(params: Sequence[Param], call: Call, method: bool) -> dict[str, Arg]:
        """Which argument of ``call`` each parameter receives (``**kw`` expanded when known)."""
        positional = [p for p in params if p.kind in ("posonly", "pos")]
        if method:  # the receiver fills the first parameter, whatever it is called
            positional = positional[1:]
        out: dict[str, Arg] = {}
        index = 0
        for arg in call.args:
            if arg.keyword is None:
                if index < len(positional):
                    out[positional[index].name] = arg
                index += 1
            elif arg.keyword not in ("*", "**"):
                out[arg.keyword] = arg
        return out

    def binding(self, caller: FunctionRef, call: Call, target: FunctionRef) -> dict[str, Arg]:
        """`bind` for ``call`` in ``caller`` reaching ``target`` (`resolve`): a method of a class drops its
        receiver parameter (`Function.receiver`: the first, whatever it is called; a ``@staticmethod``
        has none, so ``self.f(x)`` binds ``x`` to its first parameter), and so does a ``def`` the call
        reaches as a method (`as_method`), since the receiver fills it."""
        return self.bind(*self.receiving(caller, call, target))

    def receiving(self, caller: FunctionRef, call: Call, target: FunctionRef) -> tuple[Sequence[Param], Call, bool]:
        """The arguments of `bind` for ``call`` reaching ``target``: its parameters (less the first when the
        call reaches a ``def`` outside a class as a method, `as_method`), the call, and whether the first
        parameter is dropped as the receiver (a method of a class that takes one, `Function.receiver`, unless
        the call passes it by hand through the class, `through_class`)."""
        callee = self.signature(target)
        fills = self.fills_receiver(caller, call.callee, target)
        if fills and callee.receiver is None:  # a def assigned onto a class, reached as a method
            first = next(p for p in callee.params if p.kind in ("posonly", "pos"))
            return [p for p in callee.params if p is not first], call, False
        return callee.params, call, fills

    def fills_receiver(self, caller: FunctionRef, callee: str, target: FunctionRef) -> bool:
        """Does a call spelt ``callee`` in ``caller`` that reaches ``target`` fill ``target``'s first
        positional parameter itself, so that the call's first argument binds the second, as `receiving`
        binds it? So it does for a method taking a receiver reached through an instance, whichever
        (``self.m(x)``, ``obj.m(x)``, ``self.held.m(x)``, ``super().m(x)``, ``Cls(x)`` for ``__init__``),
        not through its class (``Cls.m(obj, x)``, `through_class`), and for a ``def`` assigned onto a class
        reached as a method (`as_method`). A ``@staticmethod`` and a plain function take no receiver."""
        function = self.signature(target)
        if function.cls is None and function.receiver is None:
            return self.as_method(caller, callee, target) and any(
                p.kind in ("posonly", "pos") for p in function.params)
        return function.receiver is not None and not self.through_class(caller, callee, target)

    def as_method(self, caller: FunctionRef, callee: str, target: FunctionRef) -> bool:
        """Does a call spelt ``callee`` reach ``target``, a ``def`` outside a class, as a method, the
        receiver bound to its first parameter? So it is when the call is an attribute (``self.name(...)``,
        ``obj.name(...)``) spelt with a name ``target`` is assigned onto a class under (`other_names`),
        and that attribute is not the ``def`` itself named through a module (``mod.name(...)``)."""
        head, dot, name = callee.rpartition(".")
        if not dot or head.startswith("*") or name not in self._assigned_names.get(target, ()):
            return False
        i = caller[0]
        module = self.files[i].module
        return self._lookup(self._absolute(i, callee)) != target and not (
            module and self._lookup(f"{module}.{callee}") == target)

    def bound_calls(self, ref: FunctionRef, want: Callable[[Call], bool] | None = None,
                    ) -> Iterator[tuple[Call, FunctionRef, dict[str, Arg]]]:
        """The calls of ``ref`` (those ``want`` keeps) that reach a ``def`` of the tree, with the
        argument each of its parameters receives."""
        for call in self.function(ref).calls:
            if want is not None and not want(call):
                continue
            target = self.resolve(ref, call)
            if target is None:
                continue
            yield call, target, self.binding(ref, call, target)

    @staticmethod
    def passes(call: Call, name: str, position: int | None) -> bool:
        """Does ``call`` pass parameter ``name`` (at ``position``)? ``*a`` and an unknown ``**k`` might."""
        count = 0
        for arg in call.args:
            if arg.keyword == name:
                return True
            if arg.keyword is None:
                count += 1
            elif arg.keyword == "*":
                return True
            elif arg.keyword == "**" and (arg.keys is None or name in arg.keys):
                return True
        return position is not None and count > position

    def resolve_callee(self, caller: FunctionRef, callee: str) -> FunctionRef | None:
        """The ``def`` a callee as written reaches from ``caller`` (`resolve` for a call's name; an
        element of its returned tuple, ``*i:f``, reaches ``f``'s)."""
        if callee.startswith("*"):
            callee = element_call(callee)[1]
        return self._resolve(caller, callee)

    @cached_property
    def partner_transforms(self) -> list[tuple[tuple[str, ...], frozenset[FunctionRef], tuple[FunctionRef, int]]]:
        """Fields a loop over literal keys transforms alike (``for key in ("a", "b"): d[key] = ...``):
        ``(keys, the functions every key is transformed by, (the loop's function, its line))``."""
        out = []
        for i, file in enumerate(self.files):
            if file.is_test or not file.facts.partners:
                continue
            by_function: dict[int, dict[str, set[FunctionRef]]] = {}
            lines: dict[int, int] = {}
            for transform in file.facts.transforms:
                target = self._resolve((i, transform.function), transform.callee)
                if target is not None:
                    by_function.setdefault(transform.function, {}).setdefault(transform.key, set()).add(target)
                    lines.setdefault(transform.function, transform.span[0])
            for keys in file.facts.partners:
                for j, per_key in by_function.items():
                    if not all(k in per_key for k in keys):
                        continue
                    common = frozenset.intersection(*(frozenset(per_key[k]) for k in keys))
                    if common:
                        out.append((tuple(keys), common, ((i, j), lines[j])))
        return out

    @cached_property
    def bucket_names(self) -> frozenset[str]:
        """Names, attributes and fields the project searches for the smallest entry that fits."""
        return frozenset(n for f in self.files if not f.is_test for n in f.facts.bucket_names)

    @cached_property
    def gathered_fields(self) -> frozenset[str]:
        """Fields the trainer rewrites as a gather by an index list (reordered or partitioned per
        sample; ``*``: some loop does it to every key of a record)."""
        return frozenset(k for f in self.files if not f.is_test for k in f.facts.gathered)

    @cached_property
    def shipped_whole(self) -> frozenset[str]:
        """Fields a function that partitions a record's fields copies whole beside them
        (`FileFacts.shipped_whole`): left out of the partition on purpose."""
        return frozenset(k for f in self.files if not f.is_test for k in f.facts.shipped_whole)

    @cached_property
    def fields_read(self) -> dict[FunctionRef, frozenset[str]]:
        """Fields each function reads, as far as the facts show (guards, entries, arguments, pads).
        Decodes every file's calls: a one-file run asks `fields_read_in` and `readers_of` instead."""
        out: dict[FunctionRef, frozenset[str]] = {}
        for i in range(len(self.files)):
            out.update(self.fields_read_in(i))
        return out

    def fields_read_in(self, index: int) -> dict[FunctionRef, frozenset[str]]:
        """`fields_read` of the functions of file ``index`` (its calls decoded)."""
        found = self._fields_read_in.get(index)
        if found is None:
            out = {ref: set(fields) for ref, fields in self._static_reads(index).items()}
            facts = self.files[index].facts
            ensure_calls(facts)
            for j, function in enumerate(facts.functions):
                for call in function.calls:
                    for arg in call.args:
                        out.setdefault((index, j), set()).update(arg.fields)
            found = self._fields_read_in[index] = {ref: frozenset(fields) for ref, fields in out.items()}
        return found

    def _static_reads(self, index: int) -> dict[FunctionRef, set[str]]:
        """What `fields_read_in` finds in file ``index`` outside its calls' arguments."""
        i, facts = index, self.files[index].facts
        out: dict[FunctionRef, set[str]] = {}
        for j, function in enumerate(facts.functions):
            found = out.setdefault((i, j), set())
            found |= set(function.guard_fields) | set(function.reads)
        for read in facts.entry_reads:
            out.setdefault((i, read.function), set()).update(read.fields)
        for pad in facts.pads:
            out.setdefault((i, pad.function), set()).update(pad.fields)
        for write in facts.field_writes:
            out.setdefault((i, write.function), set()).update(write.fields)
        for read in facts.broadcasts:
            out.setdefault((i, read.function), set()).update(read.value_fields)
        for key, _ in facts.field_uses:
            out.setdefault((i, 0), set()).add(key)
        return out

    def readers_of(self, key: str) -> frozenset[FunctionRef]:
        """The functions whose `fields_read` holds ``key``. A cached file whose calls' bytes hold no
        string equal to the key (`calls_may_spell`) passes it in no argument, so its calls stay
        undecoded."""
        found = self._readers.get(key)
        if found is None:
            if self._static_readers is None:
                self._static_readers = {}
                for i in range(len(self.files)):
                    for ref, fields in self._static_reads(i).items():
                        for field in fields:
                            self._static_readers.setdefault(field, set()).add(ref)
            out = set(self._static_readers.get(key, ()))
            for i, file in enumerate(self.files):
                if not calls_may_spell(file.facts, key):
                    continue
                for ref, fields in self.fields_read_in(i).items():
                    if key in fields:
                        out.add(ref)
            found = self._readers[key] = frozenset(out)
        return found

    @cached_property
    def writes_by_function(self) -> dict[FunctionRef, list[FieldWrite]]:
        """The stores into fields each function makes, as its file's facts have them."""
        out: dict[FunctionRef, list[FieldWrite]] = {}
        for i, file in enumerate(self.files):
            for write in file.facts.field_writes:
                out.setdefault((i, write.function), []).append(write)
        return out


def _slots(positional: Sequence[str], param: str) -> set[str]:
    """Where a call passes parameter ``param`` of a function whose positional parameters (past any receiver)
    are ``positional``: by its keyword, or ``#i`` at its position (as `layoutcheck.model.origins.Handed`
    writes places)."""
    return {param} | ({f"#{positional.index(param)}"} if param in positional else set())
