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
import builtins
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
from layoutcheck.model.padsides import SIDE_TAGS, pad_call_side, side_tag
from layoutcheck.model.shifts import data_side, is_mask_selection, shift_kind, shift_root
from layoutcheck.model.shifts import rolls_left as _rolls_left
from layoutcheck.model.syntax import index_of, int_value, last_name, positional, root_name, string_key, walk
from layoutcheck.model.uses import EXTERNAL_ATTRIBUTES, Uses
from layoutcheck.model.vocabulary import Tag, Vocabulary

__all__ = ["JOINED_PATH", "NOTHING", "Flow", "Frame", "Value", "is_joined"]

SEQ, TOK, SRC, SRCLIST = int(Tag.SEQ), int(Tag.TOK), int(Tag.SRC), int(Tag.SRCLIST)
WIDTH, CONFIG, MEASURED = int(Tag.WIDTH), int(Tag.CONFIG), int(Tag.MEASURED)
MAX, PAD, UNIT, FOREIGN = int(Tag.MAX), int(Tag.PAD), int(Tag.UNIT), int(Tag.FOREIGN)
BCAST, CP, PACKED = int(Tag.BCAST), int(Tag.CP), int(Tag.PACKED)
STREAM, SAMPLE, MASKED, ENTRY = int(Tag.STREAM), int(Tag.SAMPLE), int(Tag.MASKED), int(Tag.ENTRY)
_DATA = TOK | SAMPLE | STREAM | ENTRY | MASKED | SRC | SRCLIST | PACKED | SEQ
"""What a record of the batch holds: an attribute read from anything else is a setting (`Tag.CONFIG`)."""
_EMPTY: frozenset[str] = frozenset()
_NO_SHIFTS: frozenset[tuple[str, str, str, ast.AST]] = frozenset()
_SHAPED = SEQ | STREAM | SAMPLE | PAD | PACKED | MAX
"""Tags a value gets from how it was computed; evidence of use never overrides them."""


class Value:
    """Tags of an expression, the node that made it a maximum or a broadcast, the parameters of
    the enclosing function it derives from, and the fields (``d["k"]``, ``obj.k``) it was read from.

    Fields are the project's to judge: a file cannot tell whether ``batch["x"]`` holds padded
    lengths, so the value keeps ``"x"`` and the project phase adds what the field is
    (`layoutcheck.model.spaces`)."""

    __slots__ = ("tags", "origin", "params", "fields", "shifts", "calls")

    def __init__(self, tags: int = 0, origin: ast.AST | None = None, params: frozenset[str] = _EMPTY,
                 fields: frozenset[str] = _EMPTY, shifts: frozenset[tuple[str, str, str, ast.AST]] = _NO_SHIFTS,
                 calls: frozenset[str] = _EMPTY) -> None:
        self.tags = tags
        self.origin = origin
        self.params = params
        self.fields = fields
        self.shifts = shifts
        self.calls = calls
        """The project's functions whose results the value is (``_round_up(t, unit)``): the project
        phase adds what they return (`layoutcheck.model.spaces`)."""
        """Next-token shifts applied on the way (`layoutcheck.model.shifts`): ``(kind, side, root, node)``,
        the root being the name the shifted value was read through, the node the shift itself."""

    def __or__(self, other: Value) -> Value:
        if other is NOTHING:
            return self
        if self is NOTHING:
            return other
        params = self.params | other.params if other.params else self.params
        fields = self.fields | other.fields if other.fields else self.fields
        shifts = self.shifts | other.shifts if other.shifts else self.shifts
        calls = self.calls | other.calls if other.calls else self.calls
        return Value(self.tags | other.tags, self.origin or other.origin, params, fields, shifts, calls)

    def with_tags(self, tags: int, origin: ast.AST | None = None) -> Value:
        """The same derivation (parameters, fields, shifts, calls) with other tags."""
        return Value(tags, origin if origin is not None else self.origin, self.params, self.fields, self.shifts,
                     self.calls)

    def has(self, tag: int) -> bool:
        return bool(self.tags & tag)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Value({Tag(self.tags)!r}, params={sorted(self.params)}, fields={sorted(self.fields)})"


NOTHING = Value()

_PASS_FUNCTIONS = frozenset({
    "int", "float", "round", "abs", "list", "tuple", "sorted", "reversed", "math.ceil", "math.floor",
    "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor", "numpy.array",
    "numpy.asarray", "torch.nn.functional.pad", "torch.from_numpy",
})
_PASS_METHODS = frozenset({
    "item", "tolist", "to", "cuda", "cpu", "long", "int", "float", "contiguous", "clone", "detach",
    "view", "reshape", "flatten", "squeeze", "unsqueeze", "numpy", "copy",
})
_SIZE_METHODS = frozenset({"size", "numel", "__len__"})
_STACKERS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "numpy.concatenate"})
_STACKS = frozenset({"torch.stack", "numpy.stack", "torch.vstack", "numpy.vstack"})
_CUMULATIVE = frozenset({"torch.cumsum", "numpy.cumsum", "itertools.accumulate", "accumulate"})
_NOT_PROJECT = frozenset({
    "torch", "numpy", "math", "itertools", "functools", "collections", "os", "sys", "json", "re", "time",
    "random", "copy", "logging", "typing", "dataclasses", "operator", "statistics",
})
_BUILTIN_NAMES = frozenset(dir(builtins))
_CP_API = frozenset({
    "get_context_parallel_world_size", "get_context_parallel_rank", "get_context_parallel_group",
})
"""Megatron's context-parallel state (an API's names: what the library says they are)."""


class Frame:
    """One function (or the module) being walked."""

    __slots__ = ("index", "parent", "env", "exprs", "units", "fresh", "layout", "node", "data", "model", "cls",
                 "uses", "receiver")

    def __init__(self, index: int, parent: Frame | None, node: ast.AST, *, model: bool, cls: str | None,
                 uses: Uses | None = None, receiver: str | None = None) -> None:
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
        self.uses = uses if uses is not None else Uses()
        """What the body does with each name and field (`layoutcheck.model.uses`), read before the walk."""
        self.receiver = receiver
        """The name the body reaches its method's receiver by (its own receiver parameter, or the
        enclosing method's in a nested ``def``); None outside methods."""


_UNASKED = object()
"""What `Flow.idiom`'s memo holds for a question not asked yet (an answer may be None)."""

_IDIOM_OPS: dict[str, frozenset[type]] = {
    "round_up": frozenset({ast.Mult}),
    "pad_amount": frozenset({ast.Mod, ast.Sub}),
    "broadcast": frozenset({ast.Mult}),
    "max_over": frozenset(),
    "ceil_div": frozenset({ast.FloorDiv, ast.Add}),
}
"""The operators of the binary operations each recogniser of `Flow.idiom` can match (`layoutcheck.model.idioms`)."""


class Flow:
    """Scopes and classification for one file's traversal (`layoutcheck.model.extract` drives it)."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.imports = Imports()
        self.frames: list[Frame] = []
        self.scopes: list[dict[str, Value]] = []
        """Comprehension and lambda scopes, innermost last."""
        self._cache: dict[int, Value] = {}
        self.rebound: list[set[str]] = []
        """Names bound while each enclosing branch is walked, innermost last (`bind` adds to the last)."""
        self._idioms: dict[tuple[int, str], Any] = {}
        """Recogniser answers per node (they are syntactic: the same for the whole traversal)."""

    def idiom(self, kind: str, node: ast.AST) -> Any:
        """``match_<kind>`` of ``node``, asked once per node (`layoutcheck.model.idioms`)."""
        # Most nodes asked about cannot match by their class or operator alone (the checks the recognisers
        # begin with): answered here, without a key, a cache entry or a call.
        shape = type(node)
        if shape is ast.BinOp:
            if type(node.op) not in _IDIOM_OPS[kind]:  # type: ignore[attr-defined]
                return None
        elif shape is ast.Call:
            if kind == "pad_amount" or kind == "round_up" and (
                len(node.args) < 2 or len(positional(node)) != 2  # type: ignore[attr-defined,arg-type]
            ):
                return None
        elif kind == "round_up" or kind == "pad_amount" or kind == "max_over":
            return None
        key = (id(node), kind)
        found = self._idioms.get(key, _UNASKED)  # most nodes are asked once: a miss is no exception caught
        if found is not _UNASKED:
            return found
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
        if self.rebound:
            self.rebound[-1].add(name)
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

    def resolved(self, node: ast.expr | None, depth: int = 3) -> ast.expr | None:
        """``node``, or when it is a local, the expression the local was bound to (followed up to
        ``depth`` names): ``s = a - q`` then ``x[s:e]`` reads ``s`` as ``a - q``. A parameter, a
        name bound by a loop or an unpacked call stays itself. The bound expression is read in the
        bindings that hold here, which is what a use of the local sees when nothing in between
        rebinds its operands (a rebinding of the local itself is followed: its latest expression)."""
        for _ in range(depth):
            if not isinstance(node, ast.Name) or any(node.id in scope for scope in self.scopes):
                return node
            bound = self.bound_expr(node.id)
            if bound is None:
                return node
            node = bound
        return node

    def paths(self, node: ast.expr | None) -> list[ast.expr | None]:
        """`resolved` ``node``, one expression per path: a local bound to another expression on each
        branch of an ``if`` (joined as ``a if <path> else b``, `is_joined`) gives each, first to last."""
        found = self.resolved(node)
        out: list[ast.expr | None] = []
        stack = [found]
        while stack:
            part = stack.pop()
            if is_joined(part):
                stack.append(part.orelse)  # type: ignore[union-attr]
                stack.append(part.body)  # type: ignore[union-attr]
            else:
                out.append(part)
        return out

    def through_locals(self, node: ast.AST, depth: int = 3) -> list[ast.AST]:
        """The expression nodes of ``node`` and of the expressions its locals were bound to, ``depth``
        names deep: what a syntactic check reads so that hoisting a subexpression into a local
        (``w = m - n`` then ``pad(x, (0, w))``) keeps what it sees."""
        out: list[ast.AST] = []
        seen: set[int] = set()
        todo = [node]
        for _ in range(depth + 1):
            following: list[ast.AST] = []
            for root in todo:
                if id(root) in seen:
                    continue
                seen.add(id(root))
                for part in walk(root):
                    out.append(part)
                    if isinstance(part, ast.Name) and not any(part.id in scope for scope in self.scopes):
                        bound = self.bound_expr(part.id)
                        if bound is not None and id(bound) not in seen:
                            following.append(bound)
            todo = following
            if not todo:
                break
        return out

    def is_parameter(self, name: str) -> bool:
        for frame in reversed(self.frames):
            if name in frame.env:
                return name in frame.env[name].params and frame.exprs.get(name) is None
        return False

    def use_tags(self, kind: str, key: str) -> int:
        """What the uses of name or field ``key`` in the innermost function show (`Uses`)."""
        if not self.frames:
            return 0
        uses = self.frames[-1].uses
        return (uses.names if kind == "name" else uses.fields).get(key, 0)

    def lookup(self, name: str) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        by_name = self.vocab.tags(name)
        for frame in reversed(self.frames):
            local = frame.env.get(name)
            if local is not None:
                used = frame.uses.names.get(name, 0)
                if used and not local.tags & _SHAPED:
                    # Evidence of use says what a value computed from nothing visible is (a
                    # parameter sized in a loop holds per-sample tensors).
                    local = Value(local.tags | used, local.origin, local.params, local.fields)
                elif used & PACKED and not local.tags & PACKED:
                    # A list grown by its own last entry plus a length is cumulative, whatever it adds.
                    local = Value(local.tags | PACKED, local.origin, local.params, local.fields)
                if name not in frame.exprs and name in local.params:
                    return local  # a parameter: judged by its uses, its name hints and its callers
                # A local assignment decides whether a source-like name holds the
                # owner's value (`max_seq_len = max(lengths)` does not).
                keep = by_name & ~(SRC | SRCLIST)
                if local.tags & CP:
                    keep &= ~FOREIGN
                if not keep:
                    return local
                return Value(local.tags | keep, local.origin, local.params, local.fields)
        used = self.use_tags("name", name)
        return Value(by_name | used) if by_name or used else NOTHING

    def field_value(self, key: str, node: ast.AST | None = None) -> Value:
        """A read of field ``key``: its name hints, its uses here, and the field itself for the project."""
        tags = self.vocab.tags(key) | self.use_tags("field", key)
        if key in self.vocab.sources:
            tags |= SRC | SRCLIST
        return Value(tags, None, _EMPTY, frozenset((key,)))

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

    def size_of(self, inner: Value, tensor: bool = False) -> Value:
        """The size of a value: a sample's true length, a stream's length, or (of a list of
        samples or of padded lengths) a count, which is no length at all. ``tensor``: read by a
        tensor's own size (``.size()``, ``.numel()``, ``.shape``), a measured length (`Tag.MEASURED`)."""
        tags = inner.tags
        if tags & (SRCLIST | TOK) and not tags & (SAMPLE | STREAM):
            return Value(0, None, inner.params, inner.fields)  # how many samples
        measured = MEASURED if tensor or tags & (SAMPLE | STREAM | MASKED) else 0
        if tags & STREAM:
            return Value(SEQ | STREAM | measured, None, inner.params, inner.fields)
        return Value(SEQ | measured, None, inner.params, inner.fields)

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
                return Value(SRC | SRCLIST, None, _EMPTY, frozenset((attr,)))
            root = root_name(node)
            if root is not None and root in self.imports.aliases and not self._is_local(root):
                return NOTHING  # a module's attribute (`torch.long`)
            if attr in EXTERNAL_ATTRIBUTES:
                return NOTHING
            value = self.field_value(attr)
            if root in vocab.config_roots:
                return Value(vocab.tags(attr) & (UNIT | FOREIGN | CP), None, _EMPTY, value.fields)
            if not self.classify(node.value).tags & _DATA:  # type: ignore[attr-defined]
                # Read from an object that holds none of the batch's data: a setting, whatever the
                # project stores under that name elsewhere, not a length measured from a sample.
                return value.with_tags(value.tags | CONFIG)
            return value
        if kind is ast.Subscript:
            key = string_key(node)  # type: ignore[arg-type]
            if key is not None:
                return self.field_value(key, node)
            keys = self.loop_keys(node.slice)  # type: ignore[attr-defined]
            if keys:
                return self._fields_of(keys)
            base = node.value  # type: ignore[attr-defined]
            if isinstance(base, ast.Attribute) and base.attr == "shape":
                return _width(self.size_of(self.classify(base.value), tensor=True), node.slice)  # type: ignore[attr-defined]
            inner = self.classify(base)
            if is_mask_selection(node, self.resolved):  # type: ignore[arg-type]
                return Value((inner.tags | MASKED) & ~TOK, inner.origin, inner.params, inner.fields, inner.shifts)
            if index_of(node) is not None:  # type: ignore[arg-type]
                # One entry: of per-sample tensors, a sample; of the source list, one padded length.
                tags = (inner.tags & ~SRCLIST) | ENTRY
                if inner.tags & TOK and not inner.tags & (SAMPLE | STREAM):
                    tags = (tags & ~TOK) | SAMPLE
                position = int_value(node.slice) if isinstance(base, ast.Call) else None  # type: ignore[attr-defined]
                calls = _EMPTY
                if position is not None and position >= 0 and inner.calls:
                    # `f(...)[1]`: element 1 of what the project's `f` returns (its summary there, `*1:f`).
                    calls = frozenset(f"*{position}:{c}" for c in inner.calls if not c.startswith("*"))
                return Value(tags, inner.origin, inner.params, inner.fields, inner.shifts, calls)
            axis = shift_kind(node.slice)  # type: ignore[attr-defined]
            if axis is not None:
                if isinstance(node.slice, ast.Tuple):  # type: ignore[attr-defined]
                    axis += "+"  # a tensor's axis (`x[:, 1:]`): a list or a string is never indexed so
                side = data_side(base, self.bound_expr, self.imports)
                shift = (axis, side, shift_root(base, self.bound_expr), node)
                return Value(inner.tags, inner.origin, inner.params, inner.fields, inner.shifts | {shift})
            return inner
        if kind is ast.BinOp:
            idiom = self.idiom("round_up", node) or self.idiom("pad_amount", node)
            if idiom is None and isinstance(node.op, ast.Sub):  # type: ignore[attr-defined]
                idiom = match_chunk_pad(node, self.chunk_of)
            if idiom is not None:
                found = self._union(idiom.values)
                return Value(found.tags | PAD, found.origin, found.params, found.fields)
            spread = self.idiom("broadcast", node)
            if spread is not None:
                inner = self.classify(spread)
                return Value(inner.tags | BCAST, node, _EMPTY, inner.fields)
            found = self.classify(node.left) | self.classify(node.right)  # type: ignore[attr-defined]
            if _offset_differences(node):  # type: ignore[arg-type]
                return Value(SEQ, None, found.params, found.fields)  # lengths from cumulative offsets
            return found
        if kind is ast.Call:
            return self._classify_call(node)  # type: ignore[arg-type]
        if kind is ast.UnaryOp:
            return self.classify(node.operand)  # type: ignore[attr-defined]
        if kind is ast.IfExp:
            return self.classify(node.body) | self.classify(node.orelse)  # type: ignore[attr-defined]
        if kind is ast.BoolOp:
            return self._union(node.values)  # type: ignore[attr-defined]
        if kind in (ast.Tuple, ast.List, ast.Set):
            elements = node.elts  # type: ignore[attr-defined]
            found = self._union(elements)
            if kind is ast.List and len(elements) >= 2 and int_value(elements[0]) == 0 and found.tags & (
                SEQ | STREAM | PAD
            ):
                return found.with_tags(found.tags | PACKED)  # `[0, n + pad]`: one packed segment's bounds
            return found
        if kind in (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp):
            spread = self.idiom("broadcast", node)
            self.push_comprehension(node)  # type: ignore[arg-type]
            try:
                element = self.classify(node.value if kind is ast.DictComp else node.elt)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            if spread is not None:
                return Value(element.tags | BCAST, node, element.params, element.fields)
            if element.tags & SAMPLE:
                element = element.with_tags((element.tags & ~SAMPLE) | TOK)  # a list of samples
            return element
        if kind in (ast.NamedExpr, ast.Starred, ast.Await):
            return self.classify(node.value)  # type: ignore[attr-defined]
        return NOTHING

    def loop_keys(self, node: ast.AST) -> tuple[str, ...]:
        """The string keys a loop variable walks (``for key in ("a", "b")``), else ()."""
        if isinstance(node, ast.Name):
            for frame in reversed(self.frames):
                keys = frame.data.get("keys")
                if keys and node.id in keys:
                    return keys[node.id]
        return ()

    def _fields_of(self, keys: tuple[str, ...]) -> Value:
        out = NOTHING
        for key in keys:
            out = out | self.field_value(key)
        return out

    def _is_local(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes) or any(name in f.env for f in self.frames)

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
            return Value(found.tags | PAD, found.origin, found.params, found.fields)
        collection = self.idiom("max_over", node)
        if collection is not None:
            inner = self.classify(collection)
            if inner.tags & SRC:
                return Value(inner.tags & ~SRCLIST, inner.origin, inner.params, inner.fields)
            # A maximum over a collection: over lengths (judged here or, for a field, by the project)
            # it is one length for the whole collection.
            tags = (inner.tags | MAX) & ~(SRCLIST | TOK | SAMPLE)
            if inner.tags & (TOK | SAMPLE):
                tags |= SEQ
            return Value(tags, node, inner.params, inner.fields)
        broadcast = self.idiom("broadcast", node)
        if broadcast is not None:
            inner = self.classify(broadcast)
            return Value(inner.tags | BCAST, node, inner.params, inner.fields)
        ceil = self.idiom("ceil_div", node)
        if ceil is not None:  # a chunk size: still derived from what it divides
            return self._union(ceil.values) | Value(self.classify(ceil.unit).tags & CP)
        func = node.func
        tail = last_name(func) or ""
        args = positional(node)
        name = imports.qualify(func) or ""
        if isinstance(func, ast.Attribute):
            if tail in _SIZE_METHODS:
                dim = args[0] if args else next((k.value for k in node.keywords if k.arg == "dim"), None)
                return _width(self.size_of(self.classify(func.value), tensor=tail != "__len__"), dim)
            if tail == "cumsum" and name not in _CUMULATIVE:  # `x.cumsum(0)`; `torch.cumsum(x)` sums its argument
                inner = self.classify(func.value)
                return inner.with_tags((inner.tags | PACKED) & ~(TOK | SAMPLE))
            if tail == "offsets" and not args:
                # A nested (jagged) tensor's offsets: the cumulative lengths of its rows.
                inner = self.classify(func.value)
                return inner.with_tags((inner.tags | PACKED) & ~(TOK | SAMPLE | SEQ))
            if tail == "diff":
                # `x.diff()`, or `torch.diff(x)` / `numpy.diff(x)`: the differences of `x`, not of the module
                inner = self.classify(args[0] if name in ("torch.diff", "numpy.diff") and args else func.value)
                if inner.tags & PACKED:  # each offset less the one before: the lengths they hold
                    return inner.with_tags((inner.tags & ~PACKED) | SEQ)
                return inner
            if tail in ("max", "amax") and not args and not node.keywords:
                inner = self.classify(func.value)
                if inner.tags & PACKED:  # the largest cumulative offset: the stream's length
                    return inner.with_tags(inner.tags, origin=node)
            if tail in _PASS_METHODS:
                return self.classify(func.value)
            if tail == "sum":
                inner = self.classify(func.value)
                if inner.tags & SEQ:
                    return inner.with_tags(SEQ | STREAM)  # a sum of lengths: a stream's length
                if node.args or node.keywords:
                    return inner.with_tags(SEQ | MEASURED | (inner.tags & ENTRY))  # `mask.sum(-1)`: each row's length
                # One sample's mask summed: its length; a whole batch's: a count.
                return inner.with_tags((SEQ | ENTRY) if inner.tags & (ENTRY | SAMPLE) else 0)
            if tail in ("get", "pop") and args:
                key = args[0]
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    value = self.field_value(key.value)
                    if tail == "get" and self.classify(func.value).tags & CONFIG:
                        return value.with_tags(value.tags | CONFIG)  # `self.config.get("max_length")`: a setting
                    return value
                keys = self.loop_keys(key)
                if keys:
                    return self._fields_of(keys)
        if tail in _CP_API and not name.startswith("."):
            return Value(CP)  # mpu.get_context_parallel_world_size()
        if name == "len" and args:
            return self.size_of(self.classify(args[0]))
        if name == "map" and len(args) == 2 and isinstance(args[0], ast.Name) and args[0].id == "len":
            inner = self.classify(args[1])
            return inner.with_tags(SEQ)
        if name in ("max", "min", "math.lcm", "lcm", "numpy.lcm", "math.gcd"):  # of several values: all their tags
            return self._union(args)
        if name == "sum" and args:
            inner = self.classify(args[0])
            return inner.with_tags(SEQ | STREAM) if inner.tags & SEQ else inner.with_tags(0)
        if name in _CUMULATIVE or tail in ("cumsum", "accumulate"):
            inner = self._union(args[:1])
            return inner.with_tags((inner.tags | PACKED) & ~(TOK | SAMPLE))
        if name in _STACKERS and args:
            inner = self.classify(args[0])
            if inner.tags & TOK:
                return inner.with_tags((inner.tags | STREAM) & ~(TOK | SAMPLE))
            return inner
        if name in _PASS_FUNCTIONS and args:
            inner = self.classify(args[0])
            if name == "torch.nn.functional.pad":
                tags = inner.tags & ~MASKED  # padded: no longer exactly the true tokens
                side = pad_call_side(node, name)
                if side is not None and not tags & PACKED:
                    tags = (tags & ~SIDE_TAGS) | side_tag(side[0])
                return inner.with_tags(tags)
            return inner
        # Any other call: its result derives from its arguments (the fields they were read from),
        # though what it is the call's own affair.
        fields: frozenset[str] = frozenset()
        shifts = _NO_SHIFTS
        carried = 0
        origin = None
        for arg in (*node.args, *(k.value for k in node.keywords)):
            found = self.classify(arg)
            if found.fields:
                fields = fields | found.fields
            if found.shifts:
                shifts = shifts | found.shifts
            if found.tags & MAX:
                # `round_up(max(lengths), unit)`: computed from one maximum, still one length for many
                carried |= found.tags & (MAX | SEQ)
                origin = origin or found.origin
            if name in _STACKS:
                carried |= found.tags & SIDE_TAGS  # rows stacked keep the side they were padded on
        if tail == "pad_sequence":
            side = pad_call_side(node, name or tail)
            if side is not None:
                carried |= side_tag(side[0])
        if tail == "roll" and _rolls_left(node):
            rolled = args[0] if args else func
            shifts = shifts | {("first+", data_side(rolled, self.bound_expr, self.imports),
                                shift_root(rolled, self.bound_expr), node)}
        calls = _EMPTY
        if tail and name.split(".", 1)[0] not in _NOT_PROJECT and not (
            isinstance(func, ast.Name) and tail in _BUILTIN_NAMES and tail not in imports.aliases
        ) and not (isinstance(func, ast.Attribute) and tail in _PASS_METHODS):
            calls = frozenset((name or tail,))
        if fields or shifts or calls or carried:
            return Value(carried, origin, _EMPTY, fields, shifts, calls)
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
        tags = (whole.tags & ~SRCLIST) | ENTRY
        if whole.tags & TOK and not whole.tags & (SAMPLE | STREAM):
            tags = (tags & ~TOK) | SAMPLE  # an element of per-sample tensors: one sample
        return Value(tags, whole.origin, whole.params, whole.fields)

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


JOINED_PATH = "·path"
"""The test of the ``a if <path> else b`` a local is bound to after branches that bind it apart."""


def is_joined(node: ast.AST | None) -> bool:
    """Is ``node`` the join of a local's expressions on alternative paths (see `JOINED_PATH`)?"""
    return isinstance(node, ast.IfExp) and isinstance(node.test, ast.Name) and node.test.id == JOINED_PATH


def _offset_differences(node: ast.BinOp) -> bool:
    """``cu[1:] - cu[:-1]``: each entry minus the one before, the lengths cumulative offsets hold."""
    left, right = node.left, node.right
    if not (isinstance(node.op, ast.Sub) and isinstance(left, ast.Subscript) and isinstance(right, ast.Subscript)):
        return False
    a, b = left.slice, right.slice
    return (isinstance(a, ast.Slice) and isinstance(b, ast.Slice) and int_value(a.lower) == 1 and a.upper is None
            and b.lower is None and int_value(b.upper) == -1 and ast.dump(left.value) == ast.dump(right.value))


def _width(size: Value, dim: ast.AST | None) -> Value:
    """``x.shape[k]`` / ``x.size(k)`` with ``k >= 1``: the tensor has rows, all of this width (`Tag.WIDTH`)."""
    if dim is None or not size.tags & SEQ:
        return size
    k = int_value(dim)  # type: ignore[arg-type]
    return size.with_tags(size.tags | WIDTH) if k is not None and k >= 1 else size
