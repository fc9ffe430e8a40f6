"""What an expression derives from, followed through one function's locals.

`Flow` holds the traversal's scopes: a `Frame` per function (its locals and
parameters), comprehension scopes, and the file's imports. `Flow.classify`
tags an expression with what it derives from (`Tag` flags: a sequence
length, a token tensor, the owner's value, a maximum over lengths, a
round-up...) and the parameters of the function it derives from.

Locals follow source order, and branches are joined: after
``if a: x = f() else: x = g()`` the name ``x`` carries what either branch
gave it, and a branch that returns or raises gives nothing to what follows.
Loop bodies are joined with the state before the loop (they may not run).
It is cheap, and precise enough for the idioms trainers use.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from layoutcheck.model.idioms import (
    match_broadcast,
    match_ceil_div,
    match_chunk_pad,
    match_max_over,
    match_pad_amount,
    match_round_up,
)
from layoutcheck.model.imports import Imports
from layoutcheck.model.syntax import index_of, last_name, positional, root_name, string_key
from layoutcheck.model.vocabulary import Tag, Vocabulary

__all__ = ["NOTHING", "Flow", "Frame", "Value"]

SEQ, TOK, SRC, SRCLIST = int(Tag.SEQ), int(Tag.TOK), int(Tag.SRC), int(Tag.SRCLIST)
MAX, PAD, UNIT, FOREIGN = int(Tag.MAX), int(Tag.PAD), int(Tag.UNIT), int(Tag.FOREIGN)
BCAST, CP, PACKED = int(Tag.BCAST), int(Tag.CP), int(Tag.PACKED)
_EMPTY: frozenset[str] = frozenset()


class Value:
    """Tags of an expression, the node that made it a maximum or a broadcast, and the
    parameters of the enclosing function it derives from."""

    __slots__ = ("tags", "origin", "params")

    def __init__(self, tags: int = 0, origin: ast.AST | None = None, params: frozenset[str] = _EMPTY) -> None:
        self.tags = tags
        self.origin = origin
        self.params = params

    def __or__(self, other: Value) -> Value:
        if other is NOTHING:
            return self
        if self is NOTHING:
            return other
        params = self.params | other.params if other.params else self.params
        return Value(self.tags | other.tags, self.origin or other.origin, params)

    def has(self, tag: int) -> bool:
        return bool(self.tags & tag)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Value({Tag(self.tags)!r}, params={sorted(self.params)})"


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
_SIZE_METHODS = frozenset({"size", "numel", "__len__", "dim"})


class Frame:
    """One function (or the module) being walked."""

    __slots__ = ("index", "parent", "env", "exprs", "units", "fresh", "layout", "node", "data", "model", "cls")

    def __init__(self, index: int, parent: Frame | None, node: ast.AST, *, model: bool, cls: str | None) -> None:
        self.index = index
        self.parent = parent
        self.env: dict[str, Value] = {}
        """Locals and parameters, as they stand at this point of the walk."""
        self.exprs: dict[str, ast.expr] = {}
        """The expression each local was last bound to (``**kw`` keys and chunk sizes are read through it)."""
        self.units: dict[str, str] = {}
        """The canonical alignment unit (`layoutcheck.model.units`) each unit-like local was bound to."""
        self.fresh: set[str] = set()
        """Locals bound to a container built here (``{}``, ``[]``): stores into them build, not mutate."""
        self.layout: str | None = None
        """``thd`` / ``bshd`` where the branches walked so far say which layout this code serves."""
        self.node = node
        self.data: dict[str, Any] = {}
        self.model = model
        self.cls = cls


class Flow:
    """Scopes and classification for one file's traversal (`layoutcheck.model.extract` drives it)."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.imports = Imports()
        self.frames: list[Frame] = []
        self.scopes: list[dict[str, Value]] = []
        """Comprehension and lambda scopes, innermost last."""
        self._cache: dict[int, Value] = {}
        self._idioms: dict[tuple[int, str], Any] = {}
        """Recogniser answers per node (they are syntactic: the same for the whole traversal)."""

    def idiom(self, kind: str, node: ast.AST) -> Any:
        """``match_<kind>`` of ``node``, asked once per node (`layoutcheck.model.idioms`)."""
        key = (id(node), kind)
        try:
            return self._idioms[key]
        except KeyError:
            pass
        if kind == "round_up":
            found = match_round_up(node, self.imports)
        elif kind == "pad_amount":
            found = match_pad_amount(node)
        elif kind == "broadcast":
            found = match_broadcast(node, self.imports)
        elif kind == "max_over":
            found = match_max_over(node, self.imports)
        else:
            found = match_ceil_div(node, self.imports)
        self._idioms[key] = found
        return found

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    # -- binding --

    def bind(self, name: str, value: Value, expr: ast.expr | None = None) -> None:
        frame = self.frames[-1]
        frame.env[name] = value
        if expr is not None:
            frame.exprs[name] = expr
        else:
            frame.exprs.pop(name, None)
        self._cache.clear()

    def unit_of(self, name: str) -> str | None:
        """The canonical unit the innermost binding of ``name`` holds, when it was bound to one."""
        for frame in reversed(self.frames):
            if name in frame.env:
                return frame.units.get(name)
        return None

    def bound_expr(self, name: str) -> ast.expr | None:
        """The expression the innermost binding of ``name`` was assigned (None for parameters)."""
        for frame in reversed(self.frames):
            if name in frame.env:
                return frame.exprs.get(name)
        return None

    def is_parameter(self, name: str) -> bool:
        for frame in reversed(self.frames):
            if name in frame.env:
                return name in frame.env[name].params and frame.exprs.get(name) is None
        return False

    def lookup(self, name: str) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        by_name = self.vocab.tags(name)
        for frame in reversed(self.frames):
            local = frame.env.get(name)
            if local is not None:
                if name not in frame.exprs and name in local.params:
                    return local  # a parameter: judged by its name (and its callers)
                # A local assignment decides whether a source-like name holds the
                # owner's value (`max_seq_len = max(lengths)` does not), and a value
                # built from the CP size is no kernel's block whatever its name.
                keep = by_name & ~(SRC | SRCLIST)
                if local.tags & CP:
                    keep &= ~FOREIGN
                if not keep:
                    return local
                return Value(local.tags | keep, local.origin, local.params)
        return Value(by_name) if by_name else NOTHING

    # -- classification --

    def classify(self, node: ast.AST) -> Value:
        """What ``node`` derives from, given the bindings so far."""
        key = id(node)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._classify(node)
        return cached

    def _union(self, nodes: Sequence[ast.AST]) -> Value:
        out = NOTHING
        for node in nodes:
            out = out | self.classify(node)
        return out

    def _classify(self, node: ast.AST) -> Value:
        vocab = self.vocab
        kind = type(node)
        if kind is ast.Name:
            return self.lookup(node.id)  # type: ignore[attr-defined]
        if kind is ast.Constant:
            return NOTHING
        if kind is ast.Attribute:
            attr = node.attr  # type: ignore[attr-defined]
            if attr in vocab.sources:
                return Value(SRC | SRCLIST)
            base = node.value  # type: ignore[attr-defined]
            if attr in ("size", "world_size") and last_name(base) in ("cp", "context_parallel"):
                return Value(CP)  # `parallel_state.cp.size`
            if root_name(node) in vocab.config_roots:
                return Value(vocab.tags(attr) & (UNIT | FOREIGN | CP))
            tags = vocab.tags(attr)
            return Value(tags) if tags else NOTHING
        if kind is ast.Subscript:
            key = string_key(node)  # type: ignore[arg-type]
            if key is not None:
                tags = vocab.tags(key)
                return Value(tags) if tags else NOTHING
            base = node.value  # type: ignore[attr-defined]
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                return Value(SEQ) if self.classify(base.value).has(TOK) else NOTHING
            inner = self.classify(base)
            if index_of(node) is not None:  # type: ignore[arg-type]
                return Value(inner.tags & ~SRCLIST, inner.origin, inner.params) if inner.tags & SRCLIST else inner
            return inner
        if kind is ast.BinOp:
            idiom = self.idiom("round_up", node) or self.idiom("pad_amount", node)
            if idiom is None and isinstance(node.op, ast.Sub):  # type: ignore[attr-defined]
                idiom = match_chunk_pad(node, self.chunk_of)
            if idiom is not None:
                found = self._union(idiom.values)
                return Value(found.tags | PAD, found.origin, found.params)
            value = self.idiom("broadcast", node)
            if value is not None:
                return Value(self.classify(value).tags | BCAST, node)
            return self.classify(node.left) | self.classify(node.right)  # type: ignore[attr-defined]
        if kind is ast.Call:
            return self._classify_call(node)  # type: ignore[arg-type]
        if kind is ast.UnaryOp:
            return self.classify(node.operand)  # type: ignore[attr-defined]
        if kind is ast.IfExp:
            return self.classify(node.body) | self.classify(node.orelse)  # type: ignore[attr-defined]
        if kind is ast.BoolOp:
            return self._union(node.values)  # type: ignore[attr-defined]
        if kind in (ast.Tuple, ast.List, ast.Set):
            return self._union(node.elts)  # type: ignore[attr-defined]
        if kind in (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp):
            value = self.idiom("broadcast", node)
            self.push_comprehension(node)  # type: ignore[arg-type]
            try:
                element = self.classify(node.value if kind is ast.DictComp else node.elt)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            if value is not None:
                return Value(element.tags | BCAST, node, element.params)
            return element
        if kind in (ast.NamedExpr, ast.Starred, ast.Await):
            return self.classify(node.value)  # type: ignore[attr-defined]
        return NOTHING

    def chunk_of(self, name: str) -> tuple[ast.expr, ast.expr] | None:
        """``(n, k)`` when local ``name`` was bound to ``ceil(n / k)`` (a zigzag chunk size)."""
        expr = self.bound_expr(name)
        if expr is None:
            return None
        found = self.idiom("ceil_div", expr)
        if found is None or len(found.values) != 1:
            return None
        return found.values[0], found.unit

    def _classify_call(self, node: ast.Call) -> Value:
        imports = self.imports
        idiom = self.idiom("round_up", node)
        if idiom is not None:
            found = self._union(idiom.values)
            return Value(found.tags | PAD, found.origin, found.params)
        collection = self.idiom("max_over", node)
        if collection is not None:
            inner = self.classify(collection)
            if inner.tags & (SEQ | TOK):
                return Value((inner.tags | MAX | SEQ) & ~(SRCLIST | TOK), node, inner.params)
            if inner.tags & SRC:
                return Value(inner.tags & ~SRCLIST, inner.origin, inner.params)
            return NOTHING
        broadcast = self.idiom("broadcast", node)
        if broadcast is not None:
            return Value(self.classify(broadcast).tags | BCAST, node)
        ceil = self.idiom("ceil_div", node)
        if ceil is not None:  # a chunk size: still derived from what it divides
            return self._union(ceil.values) | Value(self.classify(ceil.unit).tags & CP)
        func = node.func
        tail = last_name(func) or ""
        args = positional(node)
        if isinstance(func, ast.Attribute):
            if tail in _SIZE_METHODS:
                return Value(SEQ) if self.classify(func.value).has(TOK) else NOTHING
            if tail in _PASS_METHODS:
                return self.classify(func.value)
            if tail == "sum":
                inner = self.classify(func.value)
                return Value(inner.tags & SEQ, None, inner.params) if inner.tags & SEQ else NOTHING
            if tail == "get" and args:
                key = args[0]
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if key.value in self.vocab.sources:
                        return Value(SRC | SRCLIST)
                    tags = self.vocab.tags(key.value)
                    return Value(tags) if tags else NOTHING
        if self.vocab.is_cp_size(tail):
            return Value(CP)  # mpu.get_context_parallel_world_size()
        name = imports.qualify(func) or ""
        if name == "len" and args:
            return Value(SEQ) if self.classify(args[0]).has(TOK) else NOTHING
        if name == "map" and len(args) == 2 and isinstance(args[0], ast.Name) and args[0].id == "len":
            return Value(SEQ) if self.classify(args[1]).has(TOK) else NOTHING
        if name in ("max", "min", "math.lcm", "lcm", "numpy.lcm", "math.gcd"):  # of several values: all their tags
            return self._union(args)
        if name == "sum" and args:
            inner = self.classify(args[0])
            return Value(inner.tags & SEQ, None, inner.params) if inner.tags & SEQ else NOTHING
        if name in _PASS_FUNCTIONS and args:
            return self.classify(args[0])
        return NOTHING

    # -- loops and comprehensions --

    def element(self, iterable: ast.expr) -> Value | tuple[Any, ...]:
        """Tags of the items a ``for`` over ``iterable`` binds (a tuple for ``zip``/``enumerate``)."""
        if isinstance(iterable, ast.Call):
            name = self.imports.qualify(iterable.func)
            args = positional(iterable)
            if name == "zip":
                return tuple(self._item(a) for a in args)
            if name == "enumerate" and args:
                return (NOTHING, self.element(args[0]))
        return self._item(iterable)

    def _item(self, iterable: ast.expr) -> Value:
        whole = self.classify(iterable)
        if whole.tags & BCAST:
            return NOTHING
        if whole.tags & SRCLIST:
            return Value(whole.tags & ~SRCLIST, whole.origin, whole.params)
        return whole

    def bind_target(self, target: ast.expr, value: Value | tuple[Any, ...], into: dict[str, Value] | None) -> None:
        """Bind the names of a ``for``/comprehension target (``into`` None: the frame)."""
        if isinstance(target, ast.Name):
            item = value if isinstance(value, Value) else NOTHING
            if into is None:
                self.bind(target.id, item)
            else:
                into[target.id] = item
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = target.elts
            parts = value if isinstance(value, tuple) and len(value) == len(elements) else (NOTHING,) * len(elements)
            for element, part in zip(elements, parts):
                self.bind_target(element, part, into)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, NOTHING, into)

    def push_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        scope: dict[str, Value] = {}
        self.scopes.append(scope)
        self._cache.clear()
        for gen in node.generators:
            self.bind_target(gen.target, self.element(gen.iter), scope)
            self._cache.clear()

    def push_scope(self, names: Sequence[str]) -> None:
        """A lambda's parameters: unknown values."""
        self.scopes.append({name: Value(self.vocab.tags(name)) for name in names})
        self._cache.clear()

    def pop_scope(self) -> None:
        self.scopes.pop()
        self._cache.clear()

    def forget(self) -> None:
        """Drop cached classifications (a binding changed)."""
        self._cache.clear()
