"""What an expression derives from, followed through one function's locals.

`Flow` is per-file state shared by every rule of one traversal: the
function stack (`Frame`), local assignments and loop variables, and which
functions own the padding (listed in ``owners``, see
`layoutcheck.lint.owners`, or writing a source). It tags each expression it
is asked about with `Tag` s: a sequence length, a token tensor, the owner's
value, a maximum over lengths, a round-up... Rules built on it subclass
`layoutcheck.lint.flowrule.FlowRule`; where a value goes after it is
computed is `layoutcheck.lint.sinks`.

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

from layoutcheck.lint.idioms import (
    match_broadcast,
    match_ceil_div,
    match_max_over,
    match_pad_amount,
    match_round_up,
)
from layoutcheck.lint.imports import Imports
from layoutcheck.lint.names import Tag, is_check_name, vocabulary
from layoutcheck.lint.nodes import index_of, last_name, positional, root_name, string_key, string_value, target_name
from layoutcheck.lint.owners import calls_owner, is_configured_owner
from layoutcheck.lint.rule import LintContext

__all__ = ["NOTHING", "Flow", "Frame", "Value"]


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
        frame.configured_owner = is_configured_owner(ctx.settings, qualname, ctx.path, ctx.module_name)
        # A function named after the source (`build_max_seq_lens`) produces it;
        # one named like a check (`check_max_seq_lens`) only reads it.
        if self.vocab.mentions_source(name) and not is_check_name(name):
            frame.writes_source = True
        params = node.params
        frame.layout_helper = name in self.vocab.helpers
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            frame.env[param.name.value] = None
            frame.layout_helper = frame.layout_helper or param.name.value in self.vocab.carriers
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
        if calls_owner(tail, self.context.settings, self.vocab):
            # Calling the owner (or a `recompute_max_seq_lens`) rewrites the source.
            self.frame.source_writes.append(self.tick())

    def dict_literal(self, node: cst.Dict) -> None:
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self.note_write(string_value(element.key), element.value)
