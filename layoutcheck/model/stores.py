"""The store visitors of the per-file walk: assignments, augmented assignments, field writes, rewrites, broadcasts.

Part of the per-file walk (`layoutcheck.model.extract`), mixed into its
extractor (`StoresMixin`): an assignment binds its targets (element by
element, or to the elements of a call's result), records writes into fields
(`FieldWrite`), padded lengths stored into fields (`Record`), per-sample
transforms of a field (`Transform`), rewrites of per-sample fields
(`Rewrite`), lists giving every entry one value (`Broadcast`) and the
literals the bucket rule judges.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from layoutcheck.model.accumulate import extends_collection, sums_sizes
from layoutcheck.model.callnames import BUILTINS, COMMON_METHODS, EXTERNAL
from layoutcheck.model.facts import Broadcast, FieldWrite, Record, Rewrite, Transform
from layoutcheck.model.flow import (
    BCAST,
    CONFIG,
    CP,
    MAX,
    NOTHING,
    PACKED,
    PAD,
    SAMPLE,
    SEQ,
    SRC,
    SRCLIST,
    STREAM,
    TOK,
    UNIT,
    Value,
)
from layoutcheck.model.idioms import broadcast_count, is_init_value
from layoutcheck.model.padsides import SIDE_TAGS
from layoutcheck.model.predicates import from_mapping, gathers, reads_key, sized_by_shape, unit_shaped
from layoutcheck.model.syntax import (
    int_value,
    last_name,
    positional,
    root_name,
    same,
    string_key,
    string_value,
    target_name,
    walk,
)
from layoutcheck.model.units import canonical
from layoutcheck.model.uses import field_of
from layoutcheck.model.walkstate import space_word

__all__ = ["StoresMixin"]

_FRESH_CALLS = frozenset({
    "dict", "list", "set", "defaultdict", "collections.defaultdict", "OrderedDict", "copy.copy",
    "copy.deepcopy", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.tensor",
    "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full", "numpy.array",
})
_FRESH_METHODS = frozenset({"copy", "clone", "new_zeros", "new_ones", "new_empty", "new_full", "zeros_like"})
_CONVERSIONS = frozenset({
    "list", "tuple", "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor",
    "numpy.array", "numpy.asarray", "torch.from_numpy",
})
_CONVERSION_METHODS = frozenset({"tolist", "to", "cuda", "cpu", "long", "int", "clone", "detach", "numpy"})
_SHAPED = SEQ | STREAM | SAMPLE | PAD | PACKED | MAX


def _sums_lengths(added: Value) -> Callable[[ast.expr], bool]:
    """Whether what ``+=`` adds is a length (not a padded one, not a stream's), whatever the node asked
    about: built here, not as a lambda in the method (mypyc cannot compile a closure in a method of a
    non-native class)."""
    return lambda _: bool(added.tags & SEQ) and not added.tags & (PAD | PACKED)


class StoresMixin:
    """The store visitors of the per-file walk (mixed into its extractor)."""

    def scan_target(self, target: ast.expr) -> None:
        """The index and key expressions of a store target (``x[f(i)] = ...``)."""
        if isinstance(target, ast.Subscript):
            self.scan(target.slice)
            self.scan_target(target.value) if isinstance(target.value, ast.Subscript) else self.scan(target.value)
            if not self.in_test:
                self.shifted_store(target)  # a window written: judged as the same window read
        elif isinstance(target, ast.Attribute):
            self.scan(target.value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.scan_target(element)

    def is_fresh(self, value: ast.expr) -> bool:
        """Is ``value`` a container built here (``{}``, ``[0] * n``, ``torch.zeros(n)``, a copy)?"""
        if isinstance(value, (ast.Dict, ast.List, ast.DictComp, ast.ListComp, ast.Tuple)):
            return True
        if isinstance(value, ast.BinOp):
            return self.is_fresh(value.left) or self.is_fresh(value.right)
        if isinstance(value, ast.Call):
            return self.imports.qualify(value.func) in _FRESH_CALLS or last_name(value.func) in _FRESH_METHODS
        return False

    def store_keys(self, target: ast.expr) -> tuple[tuple[str, ...], bool]:
        """The fields a store target writes (``d["k"]``, ``obj.k``, ``d[key]`` in a loop over keys)
        and whether it writes one entry of them (``d["k"][i] = ...``)."""
        if isinstance(target, ast.Subscript):
            key = string_key(target)
            if key is not None:
                return (key,), False
            keys = self.loop_keys(target.slice)
            if keys:
                return keys, False
            inner, _ = self.store_keys(target.value)  # type: ignore[arg-type]
            return inner, True
        if isinstance(target, ast.Attribute):
            found = field_of(target)
            return ((found,), False) if found is not None else ((), False)
        return (), False

    def note_write(self, name: str | None, value: ast.expr | None = None, *, node: ast.AST | None = None,
                   entry: bool = False, fresh: bool = True, record: int = 0) -> None:
        """A store of ``value`` into field ``name`` here: a `FieldWrite`, and for a configured source
        or packed name (hints) a write of it.

        Storing what was read from the field (``max_seq_lens = batch["max_seq_lens"]``) is a read
        under another name, not a write.
        """
        if name is None:
            return
        vocab = self.vocab
        found = self.classify(value) if value is not None else NOTHING
        if value is not None:
            if target_name(value) == (name, False) and not isinstance(value, ast.Name) and not found.tags & CONFIG:
                return  # (a setting copied under its own name is kept: the field holds a setting, `Spaces.settings`)
            if isinstance(value, ast.Call) and last_name(value.func) in ("get", "pop"):
                first = positional(value)[:1]
                if first and string_value(first[0]) == name:
                    return
        where = node if node is not None else value
        if where is not None:
            self.facts.field_writes.append(FieldWrite(
                self.frame.index, name, self.source.span(where), found.tags, tuple(sorted(found.fields)),
                tuple(sorted(found.params)), entry, self.next_tick(),
                self.source.snippet(value, 60) if value is not None else "",
                entry or (value is not None and self.built_per_sample(value)),
                fresh, tuple(sorted(found.calls)), record,
            ))
            word = space_word(found.tags & ~(UNIT | CP))
            if word is not None and value is not None:
                self.state.note_space(f'field "{name}"', word, where.lineno, f"stores {self.source.snippet(value, 40)}")  # type: ignore[attr-defined]
        if name not in vocab.sources and name not in vocab.packed:
            return
        if found.has(SRC):
            return
        if name in vocab.sources:
            self.state.writes_source = True
            self.state.source_ticks.append(self.next_tick())
        else:
            self.state.writes_packed = True

    def assign(self, targets: Sequence[ast.expr], value: ast.expr) -> None:
        found = self.classify(value)
        for target in targets:
            if isinstance(target, ast.Subscript):
                self.stored_side(target, value, self._rebind_side)
            keys, entry = self.store_keys(target)
            for key in keys:
                self.note_write(key, value, node=target, entry=entry, fresh=self.fresh_root(target))
                if not entry:
                    self.check_broadcast(value, key, "field")
                self.transform(target, key, value)
            if isinstance(target, ast.Subscript) and gathers(value) and not from_mapping(value, self.bound_expr):  # type: ignore[arg-type]
                self.gathered |= set(keys) if keys else {"*"} if isinstance(target.slice, ast.Name) else set()
                if keys and isinstance(value.generators[0].iter, ast.Name):  # type: ignore[attr-defined]
                    # `out[k] = [d[k][i] for i in part]`: a share of the record by an index list
                    self.gathering.setdefault((self.frame.index, ast.dump(target.value)), set()).update(keys)
            elif keys and isinstance(target, ast.Subscript) and isinstance(value, ast.Subscript) \
                    and ast.dump(value.slice) == ast.dump(target.slice) and ast.dump(value.value) != ast.dump(target.value):
                # `out[key] = data[key]`: the field copied whole from another record
                self.whole_copies.extend((self.frame.index, ast.dump(target.value), key) for key in keys)
            if isinstance(target, ast.Name):
                self.check_broadcast(value, target.id, "name")
            self.rewrite(target, value)
            self.record(target, found, value)
            if not isinstance(target, (ast.Tuple, ast.List)):
                field_name = (target.id if isinstance(target, ast.Name) else keys[0] if keys and not entry else None)
                self.judge_literal(field_name, value, binding=not isinstance(target, ast.Name) or self.at_top())
            if isinstance(target, ast.Name):
                if found.tags & (SRCLIST | TOK) or (found.fields and root_name(value) is not None):
                    self.state.aliases[target.id] = self.container(value)
                unit = None
                if unit_shaped(value):
                    unit = canonical(value, self.unit_of, self.vocab.is_pad_multiplier)
                self.bind(target.id, found, value)
                word = space_word(found.tags & _SHAPED)
                if word is not None:
                    self.state.note_space(target.id, word, target.lineno, f"= {self.source.snippet(value, 40)}")
                if unit is not None:
                    self.frame.units[target.id] = unit
                else:
                    self.frame.units.pop(target.id, None)
                if self.is_fresh(value):
                    self.frame.fresh.add(target.id)
                else:
                    self.frame.fresh.discard(target.id)
            elif isinstance(target, (ast.Tuple, ast.List)):
                elements = target.elts
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements):
                    for element, part in zip(elements, value.elts):
                        self.assign([element], part)
                else:
                    unpacked = self.frame.data.setdefault("unpacked", {})
                    # `a, b = f(x)`: each an element of what `f` returns (`*f`: the project reads only the
                    # side its elements are padded on, which the elements share or it is no side).
                    element_of = Value(0, None, calls=frozenset({"*" + c for c in found.calls}))
                    starred = False
                    for i, element in enumerate(elements):
                        if isinstance(element, ast.Name):
                            if not found.calls:
                                self.bind(element.id, NOTHING)
                            elif starred or not isinstance(value, ast.Call):
                                self.bind(element.id, element_of)
                            else:
                                # Element `i` of what the callee returns: its summary there (`*i:f`).
                                self.bind(element.id, Value(0, None, calls=frozenset(f"*{i}:{c}" for c in found.calls
                                                                                      if not c.startswith("*"))))
                            unpacked[element.id] = value  # what `a` was unpacked from
                            if not starred:
                                self.frame.data.setdefault("unpacked_at", {})[element.id] = i
                        elif isinstance(element, ast.Starred):
                            starred = True
                            if isinstance(element.value, ast.Name):
                                self.bind(element.value.id, NOTHING)

    def _rebind_side(self, name: str, tag: int) -> None:
        """A buffer written on one side of its rows is padded on that side from now on."""
        current = self.frame.env.get(name)
        if current is not None:
            self.bind(name, current.with_tags((current.tags & ~SIDE_TAGS) | tag), self.bound_expr(name))

    def built_per_sample(self, value: ast.expr) -> bool:
        """Is ``value`` a list built entry by entry: a comprehension, a broadcast, ``torch.full((n,), v)``,
        a list literal of several entries, or a local bound to one or grown by appends?"""
        for _ in range(3):
            if isinstance(value, ast.Name):
                if value.id in self.frame.data.get("grown", {}):
                    return True
                bound = self.bound_expr(value.id)
                if bound is None:
                    return False
                value = bound
                continue
            if isinstance(value, ast.Call) and self.imports.qualify(value.func) in _CONVERSIONS and value.args:
                value = value.args[0]
                continue
            break
        if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
            return True
        if isinstance(value, ast.List) and len(value.elts) > 1:
            return True
        return self.idiom("broadcast", value) is not None

    def at_top(self) -> bool:
        """Module or class level: a binding there is configuration, not a local."""
        return len(self.frames) == 1 or self.in_class_body > 0 and self.frame.cls is None

    def augment(self, node: ast.AugAssign) -> None:
        target = node.target
        keys, _ = self.store_keys(target)
        self.rewrite(target, None)
        if isinstance(target, ast.Name):
            added = self.classify(node.value)
            if sums_sizes(node, bool(self.loops), _sums_lengths(added)):
                added = added.with_tags(added.tags | STREAM)  # a running total of sizes: a stream's length
            self.bind(target.id, self.lookup(target.id) | added, None)
        entry = extends_collection(node.value, self.bound_expr)  # `d["k"] += pad` rounds a number up
        for key in keys:
            self.note_write(key, node.value, node=target, entry=entry, fresh=self.fresh_root(target))

    def record(self, target: ast.expr, value: Value, stored: ast.expr) -> None:
        """A padded length stored into a field: later padding leaves it stale (LC105)."""
        if isinstance(target, ast.Name) or not value.tags & PAD or value.tags & SRC:
            return
        name, entry = target_name(target)
        if name is None or entry:
            return
        local = stored.id if isinstance(stored, ast.Name) else ""
        self.facts.records.append(Record(self.frame.index, self.source.span(target), name, self.next_tick(), local))

    # -- per-sample transforms of fields (partner fields left out) --

    def transform(self, target: ast.expr, key: str, value: ast.expr) -> None:
        """``d["k"] = [f(x, ...) for x in d["k"]]`` (or through ``zip``): ``f`` transforms field ``k``; the
        list may be a local built so (by the comprehension, or by a loop's appends: `built_by_loop`)."""
        value = self.resolved(value) or value
        if not isinstance(value, (ast.ListComp, ast.GeneratorExp)) or not value.generators:
            return
        walked = self.classify(value.generators[0].iter)
        if key not in walked.fields and not reads_key(value.generators[0].iter, key, self):
            return
        for part in walk(value.elt):
            if isinstance(part, ast.Call):
                name = self.imports.qualify(part.func) or ""
                tail = last_name(part.func) or ""
                root = name.split(".", 1)[0]
                if not tail or root in EXTERNAL or name.startswith("torch.") or (
                    isinstance(part.func, ast.Name) and tail in BUILTINS and tail not in self.imports.aliases
                ) or (isinstance(part.func, ast.Attribute) and tail in COMMON_METHODS):
                    continue
                self.facts.transforms.append(Transform(
                    self.frame.index, key, name or tail, self.source.span(target), self.next_tick(),
                ))

    # -- rewrites of per-sample fields (LC105) --

    def fresh_root(self, container: ast.expr) -> bool:
        root = root_name(container)
        return root is not None and root in self.frame.fresh

    def converted(self, value: ast.expr | None, target: ast.expr) -> bool:
        """Is ``value`` the field ``target`` itself, converted (``torch.tensor(d["total_lengths"])``)?"""
        while isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Attribute) and func.attr in _CONVERSION_METHODS:
                value = func.value
            elif self.imports.qualify(func) in _CONVERSIONS and value.args:
                value = value.args[0]
            else:
                return False
        return value is not None and same(value, target)

    def rewrite(self, target: ast.expr, value: ast.expr | None) -> None:
        if not isinstance(target, ast.Subscript):
            return
        key = string_key(target)
        if key is not None:
            # A whole per-sample list replaced: a rewrite of its lengths when the new list holds
            # lengths (a token list is replaced by conversions too, `.cuda()` per sample); never
            # the same field converted, nor a field of a container built here.
            if self.fresh_root(target.value) or self.converted(value, target):
                return
            tags = self.classify(value).tags if value is not None else 0
            if not tags & (TOK | SAMPLE | STREAM):
                self.add_rewrite(target, key, entry=False, tags=tags)
            return
        base = target.value
        receiver = self.frame.receiver
        if receiver is not None and isinstance(base, ast.Attribute) and root_name(base) == receiver:
            return  # an object's own cache (`self.total_lengths[i] = n`), not the rollout's
        inner = string_key(base) if isinstance(base, ast.Subscript) else None
        if inner is None or self.fresh_root(base):
            return
        tags = self.classify(value).tags if value is not None else 0
        self.add_rewrite(target, inner, entry=True, tags=tags)

    def add_rewrite(self, node: ast.AST, name: str, *, entry: bool, tags: int) -> None:
        self.facts.rewrites.append(Rewrite(
            self.frame.index, self.source.span(node), self.source.snippet(node), name, self.next_tick(), entry, tags,
        ))

    # -- broadcasts (LC101) --

    def check_broadcast(self, value: ast.expr, target: str | None, kind: str) -> None:
        """A list giving every entry one value, stored as ``target``; the project judges it."""
        if target is None:
            return
        found = self.classify(value)
        origin = found.origin
        if not found.tags & BCAST or origin is None:
            return
        known = self.broadcasts.get(id(origin))
        if known is not None:
            if kind in ("field", "keyword") and known.target_kind == "name":
                known.target, known.target_kind = target, kind  # stored on: judged as what it becomes
            return
        repeated = self.idiom("broadcast", origin)
        placeholder = is_init_value(repeated)
        if kind == "name" and not found.tags & (MAX | PAD):
            return  # a local list of one value: judged if it is stored into a field later
        if placeholder and kind == "name":
            return
        self.broadcasts[id(origin)] = Broadcast(
            self.frame.index, self.source.span(origin), self.source.snippet(origin), target, found.tags,
            self.per_sample(broadcast_count(origin, self.imports), shape=sized_by_shape(origin)), placeholder, kind,
            tuple(sorted(found.fields)), tuple(sorted(found.params)), tuple(sorted(found.calls)),
        )

    def per_sample(self, count: ast.expr | None, *, shape: bool = False) -> bool:
        """Does ``count`` (a broadcast's entry count) count samples: the length of a collection
        (``len(xs)``, ``xs.size(0)``, ``xs.shape[0]``) or a walk over one, directly or through a
        local bound to one? ``xs.size()`` with no argument is a tensor's only where a shape is
        taken (``shape``: ``torch.full(xs.size(), m)``); where an integer is (``range(g.size())``,
        ``[m] * n``), it is a process group's or a container's count, not the samples."""
        for _ in range(3):
            if count is None:
                return False
            if isinstance(count, (ast.Tuple, ast.List)) and count.elts:
                count, shape = count.elts[0], False
                continue
            if isinstance(count, ast.Name):
                bound = self.bound_expr(count.id)
                if bound is None:
                    return False
                count = bound
                continue
            break
        if isinstance(count, ast.Call):
            func = count.func
            if isinstance(func, ast.Name) and func.id == "len" and count.args:
                # `len(cu_seqlens)`: the boundaries (or packed rows) of cumulative lengths, not samples
                return not isinstance(count.args[0], ast.Constant) and not self.classify(count.args[0]).tags & PACKED
            if isinstance(func, ast.Name) and func.id == "range":
                args = positional(count)
                return len(args) == 1 and self.per_sample(args[0])
            if isinstance(func, ast.Attribute) and func.attr == "size":
                return int_value(count.args[0]) == 0 if count.args else shape
            return isinstance(func, ast.Attribute) and func.attr == "numel"
        if isinstance(count, ast.Subscript) and isinstance(count.value, ast.Attribute) and count.value.attr == "shape":
            return int_value(count.slice) == 0
        # A comprehension's iterable: a walk over a collection.
        return isinstance(count, (ast.Name, ast.Subscript, ast.Attribute, ast.Call, ast.ListComp))
