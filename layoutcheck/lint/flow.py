"""What an expression derives from, followed through one function's locals.

`Flow` is per-file state shared by every rule of one traversal: the
function stack (`Frame`), local assignments and loop variables, and which
functions own the padding (listed in ``owners``, or writing a source). It
tags each expression it is asked about with `Tag` s: a sequence length, a
token tensor, the owner's value, a maximum over lengths, a round-up... Rules
built on it subclass `FlowRule`.

The analysis is flow-insensitive within a statement and follows source
order across statements (the last assignment seen wins); branches and
loops are not joined. It is cheap, and precise enough for the idioms
trainers use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from layoutcheck.lint.patterns import (
    CHECK_PREFIXES,
    Imports,
    Tag,
    index_of,
    last_name,
    match_broadcast,
    match_ceil_div,
    match_max_over,
    match_pad_amount,
    match_round_up,
    positional,
    root_name,
    string_key,
    string_value,
    target_name,
    vocabulary,
)
from layoutcheck.lint.rule import LintContext, LintRule

__all__ = ["NOTHING", "Flow", "FlowRule", "Frame", "Value", "owner_matches"]


@dataclass(frozen=True)
class Value:
    """Tags of an expression, and the node that made it a maximum or a broadcast."""

    tags: Tag = Tag.NONE
    origin: cst.CSTNode | None = None

    def __or__(self, other: Value) -> Value:
        return Value(self.tags | other.tags, self.origin or other.origin)

    def has(self, tag: Tag) -> bool:
        return bool(self.tags & tag)


NOTHING = Value()

_PASS_FUNCTIONS = frozenset({
    "int", "float", "round", "abs", "list", "tuple", "sorted", "reversed", "math.ceil", "math.floor",
    "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor", "numpy.array",
    "numpy.asarray", "torch.cat", "torch.stack", "torch.nn.functional.pad", "torch.from_numpy",
})
_PASS_METHODS = frozenset({
    "item", "tolist", "to", "cuda", "cpu", "long", "int", "float", "contiguous", "clone", "detach",
    "view", "reshape", "flatten", "squeeze", "unsqueeze", "numpy", "copy", "cumsum", "diff",
})
_SIZE_METHODS = frozenset({"size", "numel", "__len__"})


# --- owners --------------------------------------------------------------------


def _module_of_path(path: str) -> str:
    text = path.replace("\\", "/")
    if text.endswith(".py"):
        text = text[:-3]
    if text.endswith("/__init__"):
        text = text[: -len("/__init__")]
    return text.strip("/").replace("/", ".")


def _dotted_suffix(whole: str, part: str) -> bool:
    return whole == part or whole.endswith("." + part)


def owner_matches(entry: str, qualname: str, path: str, module_name: str | None) -> bool:
    """Does owner ``entry`` name the function ``qualname`` of this file?

    Forms: ``pkg.mod:func``, ``pkg/mod.py:Class.method``, ``pkg.mod.func``,
    or a bare ``func`` (any module). A module part matches a dotted suffix of
    the module name (when the engine knows it) or of the file's path, so
    ``training_utils.data:get_batch`` names ``miles/backends/training_utils/data.py``.
    """
    if ":" in entry:
        where, func = entry.rsplit(":", 1)
        if func != qualname:
            return False
    elif "." not in entry:
        return entry == qualname.rsplit(".", 1)[-1]
    elif entry.endswith("." + qualname):
        where = entry[: -len(qualname) - 1]
    else:
        return False
    if where.endswith(".py"):
        where = _module_of_path(where)
    candidates = (module_name, _module_of_path(path))
    return any(m is not None and _dotted_suffix(m, where) for m in candidates)


# --- per-function flow -----------------------------------------------------------


@dataclass(eq=False)
class Frame:
    """One function (or the module) being walked."""

    name: str
    qualname: str
    parent: Frame | None
    env: dict[str, Value | None] = field(default_factory=dict)
    """Locals assigned so far; None marks a parameter (judged by its name)."""
    fresh: set[str] = field(default_factory=set)
    """Locals bound to a container built here (``{}``, ``[]``): stores into them build, not mutate."""
    configured_owner: bool = False
    in_model: bool = False
    """A method of model code (a class deriving from `model-bases`), or nested in one."""
    layout_helper: bool = False
    """A CP/layout helper: configured, or taking a padded length (`max_seq_len`) as a parameter.
    Its other branch is the packed (THD) rule, which is the helper's to define."""
    writes_source: bool = False
    writes_packed: bool = False
    source_writes: list[int] = field(default_factory=list)
    """Event numbers of writes (or recomputations) of a source in this frame, in walk order."""
    data: dict[Any, Any] = field(default_factory=dict)
    """Per-rule state (keyed by the rule instance)."""

    @property
    def is_owner(self) -> bool:
        return self.configured_owner or self.writes_source or self.writes_packed

    def state(self, key: Any, factory: Callable[[], Any] = list) -> Any:
        found = self.data.get(key)
        if found is None:
            found = self.data[key] = factory()
        return found


_FRESH_CALLS = frozenset({
    "dict", "list", "set", "defaultdict", "collections.defaultdict", "OrderedDict", "copy.copy",
    "copy.deepcopy", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.tensor",
    "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full", "numpy.array",
})
_FRESH_METHODS = frozenset({"copy", "clone", "new_zeros", "new_ones", "new_empty", "new_full", "zeros_like"})


class Flow:
    """Per-file state shared by the `FlowRule` s of one traversal.

    Every rule forwards the walk's events here; the first call for a node
    does the work and the repeats (one per rule, back to back) are skipped,
    so the state is computed once however many rules are selected.
    """

    def __init__(self, context: LintContext) -> None:
        self.context = context
        self.vocab = vocabulary(context.settings)
        self.imports = Imports()
        self.frames: list[Frame] = []
        self.scopes: list[dict[str, Value]] = []
        """Comprehension scopes, innermost last."""
        self.subscribers: list[FlowRule] = []
        self.started = False
        self.clock = 0
        self._last: dict[str, cst.CSTNode] = {}
        self._cache: dict[int, Value] = {}
        self._qual: list[str] = []
        settings = context.settings
        self._carriers = self.vocab.source_singulars.union(*(a.keys() for a in settings.padded_length_args.values()))
        """Parameter names that carry a padded length into a function (`max_seq_len`)."""
        self._classes: list[bool] = []
        """Enclosing classes, innermost last: does each derive from a model base (`nn.Module`)?"""

    @classmethod
    def for_context(cls, context: LintContext) -> Flow:
        """The context's flow; a fresh one when the engine walks the file again."""
        flow = context.__dict__.get("_layoutcheck_flow")
        if flow is None or flow.started:
            flow = context.__dict__["_layoutcheck_flow"] = cls(context)
        return flow

    def first(self, event: str, node: cst.CSTNode) -> bool:
        """True the first time ``event`` reaches ``node`` (the other rules' calls repeat it)."""
        if self._last.get(event) is node:
            return False
        self._last[event] = node
        return True

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    # -- lookup and classification --

    def _bind(self, name: str, value: Value | None) -> None:
        self.frame.env[name] = value
        self._cache.clear()

    def is_parameter(self, name: str) -> bool:
        """Is ``name`` a parameter of the innermost function that binds it?"""
        for frame in reversed(self.frames):
            if name in frame.env:
                return frame.env[name] is None
        return False

    def lookup(self, name: str) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        by_name = self.vocab.tags(name)
        for frame in reversed(self.frames):
            if name in frame.env:
                local = frame.env[name]
                if local is None:
                    return Value(by_name)
                # A local assignment decides whether a source-like name holds
                # the owner's value (`max_seq_len = max(lengths)` does not).
                return Value(local.tags | (by_name & ~(Tag.SRC | Tag.SRCLIST)), local.origin)
        return Value(by_name)

    def classify(self, node: cst.CSTNode) -> Value:
        """What ``node`` derives from, given the assignments seen so far."""
        cached = self._cache.get(id(node))
        if cached is None:
            cached = self._cache[id(node)] = self._classify(node)
        return cached

    def _union(self, nodes: Sequence[cst.CSTNode]) -> Value:
        out = NOTHING
        for node in nodes:
            out = out | self.classify(node)
        return out

    def _classify(self, node: cst.CSTNode) -> Value:
        vocab = self.vocab
        if isinstance(node, cst.Name):
            return self.lookup(node.value)
        if isinstance(node, cst.Attribute):
            attr = node.attr.value
            if attr in vocab.sources:
                return Value(Tag.SRC | Tag.SRCLIST)
            if root_name(node) in vocab.config_roots:
                tags = vocab.tags(attr)
                return Value(tags & (Tag.UNIT | Tag.FOREIGN))
            return Value(vocab.tags(attr))
        if isinstance(node, cst.Subscript):
            key = string_key(node)
            if key is not None:
                return Value(vocab.tags(key))
            base = node.value
            if isinstance(base, cst.Attribute) and base.attr.value == "shape":
                return Value(Tag.SEQ) if self.classify(base.value).has(Tag.TOK) else NOTHING
            inner = self.classify(base)
            if index_of(node) is not None:
                return Value(inner.tags & ~Tag.SRCLIST, inner.origin)
            return inner
        if isinstance(node, cst.BinaryOperation):
            idiom = match_round_up(node, self.imports) or match_pad_amount(node)
            if idiom is not None:
                found = self._union(idiom.values)
                return Value(found.tags | Tag.PAD, found.origin)
            value = match_broadcast(node, self.imports)
            if value is not None:
                return Value(self.classify(value).tags | Tag.BCAST, node)
            return self.classify(node.left) | self.classify(node.right)
        if isinstance(node, cst.Call):
            return self._classify_call(node)
        if isinstance(node, cst.UnaryOperation):
            return self.classify(node.expression)
        if isinstance(node, cst.IfExp):
            return self.classify(node.body) | self.classify(node.orelse)
        if isinstance(node, cst.BooleanOperation):
            return self.classify(node.left) | self.classify(node.right)
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            return self._union([e.value for e in node.elements])
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            value = match_broadcast(node, self.imports)
            self.push_comprehension(node)
            try:
                element = self.classify(node.value if isinstance(node, cst.DictComp) else node.elt)
            finally:
                self.pop_comprehension()
            if value is not None:
                return Value(element.tags | Tag.BCAST, node)
            return element
        if isinstance(node, cst.NamedExpr):
            return self.classify(node.value)
        return NOTHING

    def _classify_call(self, node: cst.Call) -> Value:
        idiom = match_round_up(node, self.imports)
        if idiom is not None:
            found = self._union(idiom.values)
            return Value(found.tags | Tag.PAD, found.origin)
        collection = match_max_over(node, self.imports)
        if collection is not None:
            inner = self.classify(collection)
            if inner.has(Tag.SEQ):
                return Value((inner.tags | Tag.MAX) & ~Tag.SRCLIST, node)
            return NOTHING
        broadcast = match_broadcast(node, self.imports)
        if broadcast is not None:
            return Value(self.classify(broadcast).tags | Tag.BCAST, node)
        ceil = match_ceil_div(node, self.imports)
        if ceil is not None:  # a chunk size: still derived from what it divides
            return self._union(ceil.values)
        name = self.imports.qualify(node.func) or ""
        args = positional(node)
        tail = last_name(node.func)
        if isinstance(node.func, cst.Attribute):
            if tail in _SIZE_METHODS:
                return Value(Tag.SEQ) if self.classify(node.func.value).has(Tag.TOK) else NOTHING
            if tail in _PASS_METHODS:
                return self.classify(node.func.value)
            if tail == "sum":
                inner = self.classify(node.func.value)
                return Value(inner.tags & Tag.SEQ)
        if name == "len" and args:
            return Value(Tag.SEQ) if self.classify(args[0]).has(Tag.TOK) else NOTHING
        if name == "map" and len(args) == 2 and isinstance(args[0], cst.Name) and args[0].value == "len":
            return Value(Tag.SEQ) if self.classify(args[1]).has(Tag.TOK) else NOTHING
        if name in ("max", "min"):  # of several values: the tags of all of them
            return self._union(args)
        if name == "sum" and args:
            return Value(self.classify(args[0]).tags & Tag.SEQ)
        if name in _PASS_FUNCTIONS and args:
            return self.classify(args[0])
        return NOTHING

    def element(self, iterable: cst.BaseExpression) -> Value | tuple[Value, ...]:
        """Tags of the items a ``for`` over ``iterable`` binds (a tuple for ``zip``/``enumerate``)."""
        if isinstance(iterable, cst.Call):
            name = self.imports.qualify(iterable.func)
            args = positional(iterable)
            if name == "zip":
                return tuple(self._item(a) for a in args)
            if name == "enumerate" and args:
                return (NOTHING, self.element(args[0]))  # type: ignore[return-value]
        return self._item(iterable)

    def _item(self, iterable: cst.BaseExpression) -> Value:
        whole = self.classify(iterable)
        if whole.has(Tag.BCAST):
            return NOTHING
        return Value(whole.tags & ~Tag.SRCLIST, whole.origin)

    def bind_target(self, target: cst.BaseExpression, value: Value | tuple[Any, ...], into: dict[str, Value] | None) -> None:
        """Bind the names of a ``for``/comprehension target (``into`` None: the frame)."""
        if isinstance(target, cst.Name):
            item = value if isinstance(value, Value) else NOTHING
            if into is None:
                self._bind(target.value, item)
            else:
                into[target.value] = item
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            parts = value if isinstance(value, tuple) and len(value) == len(elements) else (NOTHING,) * len(elements)
            for element, part in zip(elements, parts):
                self.bind_target(element, part, into)

    def push_comprehension(self, node: cst.BaseComp | cst.DictComp) -> None:
        scope: dict[str, Value] = {}
        self.scopes.append(scope)
        self._cache.clear()
        comp: cst.CompFor | None = node.for_in
        while comp is not None:
            self.bind_target(comp.target, self.element(comp.iter), scope)
            self._cache.clear()
            comp = comp.inner_for_in

    def pop_comprehension(self) -> None:
        self.scopes.pop()
        self._cache.clear()

    # -- the walk --

    def enter_module(self, node: cst.Module) -> None:
        self.started = True
        self.frames.append(Frame("<module>", "<module>", None))

    def leave_module(self, node: cst.Module) -> None:
        self._exit()

    def enter_class(self, node: cst.ClassDef) -> None:
        self._qual.append(node.name.value)
        self._classes.append(any(self.vocab.is_model_base(last_name(b.value) or "") for b in node.bases))

    def leave_class(self, node: cst.ClassDef) -> None:
        self._qual.pop()
        self._classes.pop()

    def enter_function(self, node: cst.FunctionDef) -> None:
        name = node.name.value
        self._qual.append(name)
        qualname = ".".join(self._qual)
        frame = Frame(name, qualname, self.frame)
        frame.in_model = self.frame.in_model or any(self._classes)
        ctx = self.context
        frame.configured_owner = any(
            owner_matches(entry, qualname, ctx.path, ctx.module_name)
            for entries in ctx.settings.owners.values()
            for entry in entries
        )
        # A function named after the source (`build_max_seq_lens`) produces it;
        # one named like a check (`check_max_seq_lens`) only reads it.
        if self.vocab.mentions_source(name) and not name.lstrip("_").startswith(CHECK_PREFIXES):
            frame.writes_source = True
        params = node.params
        settings = ctx.settings
        frame.layout_helper = name in settings.cp_helpers or name in settings.padded_length_args
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            frame.env[param.name.value] = None
            frame.layout_helper = frame.layout_helper or param.name.value in self._carriers
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                frame.env[star.name.value] = None
        self.frames.append(frame)
        self._cache.clear()

    def leave_function(self, node: cst.FunctionDef) -> None:
        self._exit()
        self._qual.pop()

    def _exit(self) -> None:
        frame = self.frames[-1]
        for rule in self.subscribers:
            rule.on_frame_exit(frame)
        self.frames.pop()
        self._cache.clear()

    def note_write(self, name: str | None, value: cst.BaseExpression | None = None) -> None:
        """A store of ``value`` to ``name`` (a variable, attribute or string key) here.

        Storing what was read from the source (``max_seq_lens = batch["max_seq_lens"]``,
        ``cu_seqlens = batch["cu_seqlens"]``) is a read under another name, not a write.
        """
        if name is None or (name not in self.vocab.sources and name not in self.vocab.packed):
            return
        if value is not None:
            if target_name(value) == (name, False) and not isinstance(value, cst.Name):
                return
            if self.classify(value).has(Tag.SRC):
                return
        if name in self.vocab.sources:
            self.frame.writes_source = True
            self.frame.source_writes.append(self.tick())
        else:
            self.frame.writes_packed = True

    def is_fresh(self, value: cst.BaseExpression) -> bool:
        """Is ``value`` a container built here (``{}``, ``[0] * n``, ``torch.zeros(n)``, a copy)?"""
        if isinstance(value, (cst.Dict, cst.List, cst.DictComp, cst.ListComp, cst.Tuple)):
            return True
        if isinstance(value, cst.BinaryOperation):
            return self.is_fresh(value.left) or self.is_fresh(value.right)
        if isinstance(value, cst.Call):
            tail = last_name(value.func)
            return self.imports.qualify(value.func) in _FRESH_CALLS or tail in _FRESH_METHODS
        return False

    def assign(self, targets: Sequence[cst.BaseExpression], value: cst.BaseExpression) -> None:
        found = self.classify(value)
        for target in targets:
            self.note_write(target_name(target)[0], value)
            if isinstance(target, cst.Name):
                self._bind(target.value, found)
                if self.is_fresh(value):
                    self.frame.fresh.add(target.value)
                else:
                    self.frame.fresh.discard(target.value)
            elif isinstance(target, (cst.Tuple, cst.List)):
                elements = [e.value for e in target.elements]
                if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(elements):
                    for element, part in zip(elements, value.elements):
                        self.assign([element], part.value)
                else:
                    for element in elements:
                        self.note_write(target_name(element)[0])
                        if isinstance(element, cst.Name):
                            self._bind(element.value, NOTHING)

    def augment(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        self.note_write(target_name(target)[0])
        if isinstance(target, cst.Name):
            self._bind(target.value, self.lookup(target.value) | self.classify(value))

    def call(self, node: cst.Call) -> None:
        """Writes through calls: ``d.update(max_seq_lens=...)``, ``dict(...)``, ``.append``."""
        tail = last_name(node.func)
        if tail == "update" or self.imports.qualify(node.func) == "dict":
            for arg in node.args:
                if arg.keyword is not None:
                    self.note_write(arg.keyword.value, arg.value)
        elif tail in ("append", "extend", "insert") and isinstance(node.func, cst.Attribute):
            self.note_write(target_name(node.func.value)[0])
        if tail is not None and tail != "update" and not tail.lstrip("_").startswith(CHECK_PREFIXES):
            owners = self.context.settings.owners.values()
            if self.vocab.mentions_source(tail) or any(
                tail == e.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for entries in owners for e in entries
            ):
                # Calling the owner (or a `recompute_max_seq_lens`) rewrites the source.
                self.frame.source_writes.append(self.tick())

    def dict_literal(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self.note_write(string_value(element.key), element.value)


class FlowRule(LintRule):
    """Base of the rules that use `Flow`: forwards the walk's events to it.

    A subclass that defines one of these visitor methods must call
    ``super()`` first, so the flow state is current when it looks.
    `on_frame_exit` runs when a function (or the module) has been walked,
    once its owner status is known.
    """

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.flow = Flow.for_context(context)
        self.flow.subscribers.append(self)
        self.vocab = self.flow.vocab

    def on_frame_exit(self, frame: Frame) -> None:
        """Called once per function and for the module, innermost first."""

    def visit_Module(self, node: cst.Module) -> None:
        if self.flow.first("visit_Module", node):
            self.flow.enter_module(node)

    def leave_Module(self, node: cst.Module) -> None:
        if self.flow.first("leave_Module", node):
            self.flow.leave_module(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.flow.first("visit_ClassDef", node):
            self.flow.enter_class(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        if self.flow.first("leave_ClassDef", node):
            self.flow.leave_class(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.flow.first("visit_FunctionDef", node):
            self.flow.enter_function(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.flow.first("leave_FunctionDef", node):
            self.flow.leave_function(node)

    def visit_Import(self, node: cst.Import) -> None:
        if self.flow.first("visit_Import", node):
            self.flow.imports.add_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if self.flow.first("visit_ImportFrom", node):
            self.flow.imports.add_import_from(node)

    def leave_Assign(self, node: cst.Assign) -> None:
        if self.flow.first("leave_Assign", node):
            self.flow.assign([t.target for t in node.targets], node.value)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.flow.first("leave_AnnAssign", node) and node.value is not None:
            self.flow.assign([node.target], node.value)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        if self.flow.first("leave_AugAssign", node):
            self.flow.augment(node.target, node.value)

    def visit_For(self, node: cst.For) -> None:
        if self.flow.first("visit_For", node):
            self.flow.bind_target(node.target, self.flow.element(node.iter), None)

    def visit_Call(self, node: cst.Call) -> None:
        if self.flow.first("visit_Call", node):
            self.flow.call(node)

    def visit_Dict(self, node: cst.Dict) -> None:
        if self.flow.first("visit_Dict", node):
            self.flow.dict_literal(node)

    def _enter_comp(self, node: cst.BaseComp | cst.DictComp) -> None:
        if self.flow.first("visit_Comp", node):
            self.flow.push_comprehension(node)

    def _leave_comp(self, node: cst.BaseComp | cst.DictComp) -> None:
        if self.flow.first("leave_Comp", node):
            self.flow.pop_comprehension()

    # Named methods, not aliases: libcst finds visitors by their function name.
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._enter_comp(node)

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self._leave_comp(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._enter_comp(node)

    def leave_SetComp(self, node: cst.SetComp) -> None:
        self._leave_comp(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._enter_comp(node)

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._leave_comp(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._enter_comp(node)

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self._leave_comp(node)
