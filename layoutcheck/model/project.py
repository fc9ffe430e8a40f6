"""The project phase: every file's facts, joined into what the project has.

`Project` is built from the `FileFacts` of every file of a run (the checked
files and the project's other files) and answers what the rules ask:

* names: each module's name, its imports resolved (relative ones against
  its own package), and each call bound to the ``def`` it reaches when
  that ``def`` is in the tree (`Project.resolve`), which gives the call
  graph (`Project.callers`);
* CP helpers: for each configured helper, its own ``def`` when the tree has
  one (its layout and padded-length parameters and their positions, read
  from the signature), else the configured positions (`Project.helper`);
* owners: who decides padded lengths, per layout (`Project.owners`): the
  functions `owners` lists, the ones that write a source (BSHD,
  ``max_seq_lens``) or build a packed batch's description (THD,
  ``cu_seqlens``), and those nested in them; a pad is a second owner when
  the project has an owner for what it pads (`Project.owners_for`);
* tests and benchmarks (`test-paths`) are not the trainer: they are left
  out of the model unless trainer code imports them.

Nothing here parses: a one-file run builds its project from the facts the
cache (or a cheap scan) gives for the other files.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from layoutcheck.lint.globs import any_match
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.facts import Arg, Call, FileFacts, Function, Pad, Param, call_names, ensure_calls
from layoutcheck.model.owners import configured_layouts
from layoutcheck.model.vocabulary import Tag, Vocabulary, vocabulary

__all__ = ["FileModel", "FunctionRef", "HelperSignature", "Owner", "Project"]

SRC, PAD, SEQ, MAX = int(Tag.SRC), int(Tag.PAD), int(Tag.SEQ), int(Tag.MAX)
UNIT, CP = int(Tag.UNIT), int(Tag.CP)

FunctionRef = tuple[int, int]
"""(file index, function index) of a ``def`` in the project."""


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


@dataclass(frozen=True)
class Owner:
    """A function that decides padded lengths, and why the linter thinks so."""

    ref: FunctionRef
    layouts: tuple[str, ...]
    """``bshd``, ``thd``."""
    why: str
    """``writes `max_seq_lens```, ``builds `cu_seqlens```, ``listed in `owners.thd```, ``inside `f```."""


@dataclass(frozen=True)
class HelperSignature:
    """What a CP helper takes: its layout kind and padded length, by name and position."""

    name: str
    ref: FunctionRef | None
    """Its ``def`` in the tree; None when only the configuration describes it."""
    params: tuple[Param, ...] = ()
    layout: tuple[str, int | None] | None = None
    """The layout-kind parameter and its 0-based position (None: keyword-only)."""
    padded: tuple[str, int | None] | None = None
    """The padded-length parameter `P` and its position."""
    layout_default: str | None = None
    none_checked: tuple[str, ...] = ()
    """Parameters the helper checks are not None (omitting them fails loudly, not silently)."""

    def text(self) -> str | None:
        """``slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None)``: the ``def``'s
        signature as written (None for a helper known only from the configuration)."""
        if self.ref is None:
            return None
        parts = []
        starred = any(p.kind == "star" for p in self.params)
        for param in self.params:
            if param.kind == "kwonly" and not starred:
                parts.append("*")
                starred = True
            prefix = {"star": "*", "dstar": "**"}.get(param.kind, "")
            parts.append(f"{prefix}{param.name}" + (f"={param.default}" if param.default is not None else ""))
            if param.kind == "posonly" and not any(p.kind == "posonly" for p in self.params[self.params.index(param) + 1:]):
                parts.append("/")
        return f"{self.name}({', '.join(parts)})"


@dataclass
class _Index:
    by_qualname: dict[tuple[int, str], int] = field(default_factory=dict)
    by_name: dict[str, list[FunctionRef]] = field(default_factory=dict)


class Project:
    """Every file's facts, joined; see the module docs for what it answers."""

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
        self._callers_of: dict[FunctionRef, list[tuple[FunctionRef, Call]]] = {}
        self._by_name_cache: dict[str, list[tuple[FunctionRef, Call]]] = {}

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
        return self.files[ref[0]].facts.functions[ref[1]]

    def functions(self) -> Iterator[tuple[FunctionRef, Function]]:
        """Every ``def`` of the trainer model (tests and benchmarks left out)."""
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for j, function in enumerate(file.facts.functions):
                yield (i, j), function

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

    def _lookup(self, dotted: str) -> FunctionRef | None:
        """The ``def`` a fully qualified name (``pkg.mod.func``, ``pkg.mod.Class.method``) names."""
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
                return (index, j) if j is not None else None
        return None

    def resolve(self, caller: FunctionRef, call: Call) -> FunctionRef | None:
        """The ``def`` a call reaches when the tree has it: by import, in the same module
        (``self.method`` included), or by a name only one ``def`` of the project has."""
        key = (caller[0], caller[1], call.tick)
        if key in self._resolved:
            return self._resolved[key]
        found = self._resolve(caller, call.callee)
        self._resolved[key] = found
        return found

    def _resolve(self, caller: FunctionRef, callee: str) -> FunctionRef | None:
        i, j = caller
        file = self.files[i]
        functions = file.facts.functions
        head, _, rest = callee.partition(".")
        if head in ("self", "cls") and rest and "." not in rest:
            cls = None
            for ref in self.enclosing(caller):
                cls = cls or self.function(ref).cls
            if cls is not None:
                found = self._index.by_qualname.get((i, f"{cls}.{rest}"))
                if found is not None:
                    return (i, found)
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
        found = self._lookup(self._absolute(i, callee))
        if found is not None:
            return found
        if file.module:  # `Class.method` of this module
            found = self._lookup(f"{file.module}.{callee}")
            if found is not None:
                return found
        return self._unique(callee.rsplit(".", 1)[-1])

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
        """Every trainer call whose last name is ``name``; only files that call the name have their
        cached calls decoded (`layoutcheck.model.facts.call_names`)."""
        found = self._by_name_cache.get(name)
        if found is None:
            found = []
            for i, file in enumerate(self.files):
                if file.is_test:
                    continue
                names = call_names(file.facts)
                if names is not None:
                    if name not in names:
                        continue
                    ensure_calls(file.facts)
                for j, function in enumerate(file.facts.functions):
                    for call in function.calls:
                        if call.callee.rsplit(".", 1)[-1] == name:
                            found.append(((i, j), call))
            self._by_name_cache[name] = found
        return found

    def callers_of(self, ref: FunctionRef) -> list[tuple[FunctionRef, Call]]:
        """The calls that reach ``ref``, resolving only the calls spelt with its name (a one-file
        run asks this of a few functions; `callers` resolves every call of the project)."""
        found = self._callers_of.get(ref)
        if found is None:
            if "callers" in self.__dict__:
                found = self.callers.get(ref, [])
            else:
                qualname = self.function(ref).qualname
                name = qualname.rsplit(".", 1)[-1]
                if name == "__init__" and "." in qualname:
                    name = qualname.rsplit(".", 2)[-2]  # `Replay(...)` reaches `Replay.__init__`
                found = [
                    (caller, call) for caller, call in self._calls_named(name)
                    if caller != ref and self.resolve(caller, call) == ref
                ]
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
        if method and positional and positional[0].name in ("self", "cls"):
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

    # ------------------------------------------------------------ CP helpers

    @cached_property
    def _helpers(self) -> dict[str, HelperSignature | None]:
        out: dict[str, HelperSignature | None] = {}
        for name in self.vocab.helpers:
            defs = self.defs_named(name)
            out[name] = self._signature(name, defs[0]) if len(defs) == 1 else None
        return out

    def helper(self, name: str, target: FunctionRef | None = None) -> HelperSignature:
        """The signature a call of helper ``name`` is judged by: the ``def`` it resolves to, the
        project's only ``def`` of that name, or else the configured positions."""
        if target is not None and self.function(target).qualname.rsplit(".", 1)[-1] == name:
            return self._signature(name, target)
        found = self._helpers.get(name)
        if found is not None:
            return found
        spec = self.vocab.helpers.get(name, {})
        layout = padded = None
        for param, index in spec.items():
            if self.vocab.is_padded_length_param(param):
                padded = padded or (param, index)
            else:
                layout = layout or (param, index)
        return HelperSignature(name, None, (), layout, padded)

    def _signature(self, name: str, ref: FunctionRef) -> HelperSignature:
        function = self.function(ref)
        params = function.params
        positional = [p for p in params if p.kind in ("posonly", "pos")]
        if function.cls is not None and positional and positional[0].name in ("self", "cls"):
            positional = positional[1:]
        layout = padded = None
        default = None
        for param in params:
            if param.kind in ("star", "dstar"):
                continue
            position = positional.index(param) if param in positional else None
            if layout is None and self.vocab.is_layout_param(param.name):
                layout, default = (param.name, position), param.default
            elif padded is None and self.vocab.is_padded_length_param(param.name):
                padded = (param.name, position)
        return HelperSignature(name, ref, params, layout, padded, default, function.none_checked)

    def helper_names(self) -> list[str]:
        return sorted(self.vocab.helpers)

    def is_layout_helper(self, ref: FunctionRef) -> bool:
        """A CP/layout helper: configured, or taking one sample's padded length `P`.
        Its other branch is the packed (THD) rule, which is the helper's to define."""
        for enclosing in self.enclosing(ref):
            function = self.function(enclosing)
            if function.qualname.rsplit(".", 1)[-1] in self.vocab.helpers:
                return True
            if any(self.vocab.is_padded_length_param(p.name) for p in function.params):
                return True
        return False

    # ------------------------------------------------------------ owners

    @cached_property
    def owners(self) -> dict[FunctionRef, Owner]:
        """Every function that decides padded lengths (`Owner`), nested ones included."""
        out: dict[FunctionRef, Owner] = {}
        vocab = self.vocab
        source = vocab.source
        packed = vocab.packed_order[0] if vocab.packed_order else "cu_seqlens"
        for ref, function in self.functions():
            if ref[1] == 0:
                continue
            file = self.files[ref[0]]
            if function.in_model or (file.facts.kernel and function.cls is None):
                continue  # a model's or a kernel's own geometry is not the data layout's
            layouts: list[str] = []
            why: list[str] = []
            configured = configured_layouts(self.settings, function.qualname, file.relpath, file.module)
            if configured:
                layouts += configured
                why.append("listed in " + " and ".join(f"`owners.{layout}`" for layout in configured))
            if function.writes_source:
                layouts.append("bshd")
                why.append(f"writes `{source}`")
            if function.writes_packed:
                layouts.append("thd")
                why.append(f"builds `{packed}`")
            if layouts:
                out[ref] = Owner(ref, tuple(sorted(set(layouts))), ", ".join(why))
        # An owner around a nested function owns it too.
        for ref, _ in self.functions():
            if ref in out or ref[1] == 0:
                continue
            for outer in self.enclosing(ref):
                if outer in out and outer != ref:
                    found = out[outer]
                    out[ref] = Owner(ref, found.layouts, f"inside `{self.function(outer).qualname}`")
                    break
        return out

    @cached_property
    def disagreements(self) -> list[tuple[Pad, FunctionRef, FunctionRef, Pad, str]]:
        """Owner pads to the alignment unit that another owner of the same layout pads otherwise:
        ``(pad, owner, other owner, the other's pad, layout)`` (LC107)."""
        out = []
        units = self.owner_units
        for layout in ("thd", "bshd"):
            owners = [ref for ref in self.owners_of_layout(layout) if units.get(ref)]
            if len(owners) < 2:
                continue
            keys = {ref: {(p.unit, p.rounding) for p in units[ref]} for ref in owners}
            holders: dict[tuple[str, str], set[FunctionRef]] = {}
            for ref, owned in keys.items():
                for key in owned:
                    holders.setdefault(key, set()).add(ref)
            for ref in owners:
                for pad in units[ref]:
                    having = holders[(pad.unit, pad.rounding)]
                    if len(having) == len(owners):
                        continue  # every owner pads this way too
                    other = next(o for o in owners if o not in having)
                    out.append((pad, ref, other, units[other][0], layout))
        return out

    def owner_of(self, ref: FunctionRef) -> Owner | None:
        return self.owners.get(ref)

    def owners_of_layout(self, layout: str) -> list[FunctionRef]:
        """The owners of ``layout`` (``bshd``/``thd``), not counting nested ones, in path order."""
        return list(self._owners_by_layout.get(layout, ()))

    @cached_property
    def _owners_by_layout(self) -> dict[str, list[FunctionRef]]:
        out: dict[str, list[FunctionRef]] = {}
        for ref, owner in self.owners.items():
            if owner.why.startswith("inside "):
                continue
            for layout in owner.layouts:
                out.setdefault(layout, []).append(ref)
        return out

    @cached_property
    def cp_helper_defs(self) -> list[FunctionRef]:
        """The ``def`` s of configured CP helpers in the tree."""
        return [ref for name in self.helper_names() for ref in self.defs_named(name)]

    def family(self, pad: Pad) -> str:
        """What a pad pads: ``a`` (the alignment unit ``A``, both layouts), ``bshd`` (to the longest
        sample), ``cp`` (the CP chunk rule) or ``other`` (another unit: not the token layout's)."""
        if pad.kind in ("pad_target", "pad_sequence"):
            return "bshd"
        if pad.unit_tags & UNIT:
            return "a"
        if pad.unit_tags & CP:
            return "cp"
        return "other"

    def owners_for(self, pad: Pad) -> list[FunctionRef]:
        """Who owns what ``pad`` pads, in this project: a pad with an owner elsewhere is a second owner.

        The owners come best first: those that pad to the same unit (the one ``pad`` re-derives),
        then those that pad to the alignment unit at all, then the others.
        """
        family = self.family(pad)
        if family == "bshd":
            found = self.owners_of_layout("bshd")
        elif family == "a":
            found = []
            if pad.layout in ("bshd", "thd"):
                found = self.owners_of_layout(pad.layout)
            if not found:
                found = self.owners_of_layout("thd") + self.owners_of_layout("bshd")
        elif family == "cp":
            return list(self.cp_helper_defs)
        else:
            return []
        units = self.owner_units

        def rank(ref: FunctionRef) -> tuple[int, str]:
            mine = units.get(ref, ())
            if pad.unit and any(p.unit == pad.unit for p in mine):
                return 0, self.where(ref)
            return (1 if mine else 2), self.where(ref)

        return sorted(dict.fromkeys(found), key=rank)

    @cached_property
    def owner_units(self) -> dict[FunctionRef, tuple[Pad, ...]]:
        """Each owner's pads to the alignment unit ``A`` (those nested in it included)."""
        out: dict[FunctionRef, list[Pad]] = {}
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for pad in file.facts.pads:
                if pad.kind not in ("round_up", "pad_amount", "chunk_pad") or not pad.unit_tags & UNIT:
                    continue
                if pad.fate == "metric":
                    continue
                for ref in self.enclosing((i, pad.function)):
                    if ref in self.owners:
                        out.setdefault(ref, []).append(pad)
                        break
        return {ref: tuple(pads) for ref, pads in out.items()}

    def owns(self, ref: FunctionRef) -> bool:
        """Does ``ref`` decide padded lengths (an owner, a CP helper, or model or kernel code)?"""
        if ref in self.owners or self.is_layout_helper(ref):
            return True
        function = self.function(ref)
        file = self.files[ref[0]]
        if function.in_model:
            return True
        return file.facts.kernel and all(self.function(r).cls is None for r in self.enclosing(ref))

    @cached_property
    def inferred_owners(self) -> dict[FunctionRef, list[Pad]]:
        """Functions that are the only padding decision on their path: they pad, nothing in the
        project owns what they pad, and their callers read the result (it leaves the function)."""
        out: dict[FunctionRef, list[Pad]] = {}
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for pad in file.facts.pads:
                ref = (i, pad.function)
                if pad.function == 0 or pad.fate != "escapes" or self.owns(ref) or self.owners_for(pad):
                    continue
                out.setdefault(ref, []).append(pad)
        return out

    # ------------------------------------------------------------ sources

    @cached_property
    def has_source(self) -> bool:
        """Does anything in the project write the source (``max_seq_lens``)?"""
        return any(f.writes_source for _, f in self.functions())

    def ranked(self, refs: list[FunctionRef], layout: str) -> list[FunctionRef]:
        """``refs`` best first for a message: configured owners of ``layout``, then those that pad to
        the alignment unit themselves, then the rest, each in path order."""
        def rank(ref: FunctionRef) -> tuple[int, str]:
            owner = self.owners.get(ref)
            if owner is not None and "listed in" in owner.why and layout in owner.layouts:
                return 0, self.where(ref)
            return (1 if self.owner_units.get(ref) else 2), self.where(ref)

        return sorted(refs, key=rank)

    def source_writers(self) -> list[FunctionRef]:
        """The owners that write a source (model and kernel code left out), in path order."""
        return [ref for ref, o in self.owners.items()
                if self.function(ref).writes_source and not o.why.startswith("inside ")]

    def packed_writers(self) -> list[FunctionRef]:
        """The owners that build a packed batch's description (model and kernel code left out)."""
        return [ref for ref, o in self.owners.items()
                if self.function(ref).writes_packed and not o.why.startswith("inside ")]

    def source_ticks(self, ref: FunctionRef) -> tuple[int, ...]:
        """When ``ref`` writes the source: its own writes, its calls of owner-named functions, and
        its calls of any project function that writes a source (the producer, by another name)."""
        ensure_calls(self.files[ref[0]].facts)
        function = self.function(ref)
        ticks = list(function.source_ticks)
        for call in function.calls:
            target = self.resolve(ref, call)
            if target is not None and target != ref and self.function(target).writes_source:
                ticks.append(call.tick)
        return tuple(sorted(set(ticks)))

    def param_fed_from_source(self, ref: FunctionRef, param: str, depth: int = 0) -> bool | None:
        """Do the callers of ``ref`` pass the owner's value into ``param``?

        True when a call site passes a value read from a source (or the
        owner's round-up), directly or through its own parameter; False when
        call sites exist and none does; None when the project has no call
        of ``ref`` to judge by.
        """
        sites = self.callers_of(ref)
        if not sites or depth > 3:
            return None
        function = self.function(ref)
        verdicts = []
        for caller, call in sites:
            arg = self.bind(function.params, call, function.cls is not None).get(param)
            if arg is None:
                continue
            if arg.tags & (SRC | PAD):
                return True
            for outer in arg.params:
                if self.param_fed_from_source(caller, outer, depth + 1):
                    return True
            verdicts.append(False)
        return False if verdicts else None
