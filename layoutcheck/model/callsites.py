"""The call and return visitors of the per-file walk: pads and new tensors, writes through calls, calls recorded.

Part of the per-file walk (`layoutcheck.model.extract`), mixed into its
extractor (`CallSitesMixin`): a call's arguments are scanned, a pad or a new
tensor sized by a maximum is recorded (`Pad`), writes through
``d.update(k=...)``, ``dict(k=...)`` and ``.append`` are noted, zipped fields
recorded (`Zip`), and a call of what may be the project's function is kept
with what each argument derives from (`Call`, `Arg`; ``**kw`` read through a
dict built here). A ``return`` records a returned broadcast and a round-up
helper's parameters (`Function.rounds`).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from layoutcheck.model.callnames import BUILTINS, COMMON_METHODS, EXTERNAL
from layoutcheck.model.facts import Arg, Call, Zip
from layoutcheck.model.flow import BCAST, MAX, NOTHING, PACKED, PAD, SAMPLE, SEQ, SRC, STREAM, TOK, Value
from layoutcheck.model.idioms import library_helper
from layoutcheck.model.syntax import argument, keyword, last_name, positional, string_key, string_value
from layoutcheck.model.units import canonical
from layoutcheck.model.vocabulary import LAYOUT_KINDS, is_check_name

__all__ = ["CallSitesMixin"]

_PAD = frozenset({"torch.nn.functional.pad", "numpy.pad"})
_FILLED = frozenset({"torch.full", "numpy.full"})
_SIZED = frozenset({"torch.zeros", "torch.ones", "torch.empty", "numpy.zeros", "numpy.ones", "numpy.empty"})
_NEW = frozenset({"new_zeros", "new_ones", "new_empty"})
_MAXES = frozenset({"max", "numpy.max", "torch.max"})


class CallSitesMixin:
    """The call and return visitors of the per-file walk (mixed into its extractor)."""

    def returned(self, value: ast.expr) -> None:
        """A returned broadcast, and a function returning its parameter rounded up (a round-up helper)."""
        frame = self.frame
        if frame.parent is None:
            return
        name = self.facts.functions[frame.index].qualname.rsplit(".", 1)[-1]
        if self.vocab.mentions_source(name):
            # `def uniform_max_seq_lens(...): return [P] * n` names a configured source it produces (a hint).
            self.check_broadcast(value, self.vocab.source_in(name), "field")
        self.check_broadcast(value, "", "return")
        idiom = self.idiom("round_up", value)
        state = self.state
        if frame.layout == "bshd" and isinstance(value, ast.Name) and self.is_parameter(value.id):
            self.note_padded_param(value.id, value, "returned as the length where the layout is BSHD")
        if idiom is not None and len(idiom.values) == 1:
            n, m = idiom.values[0], idiom.unit
            if isinstance(n, ast.Name) and isinstance(m, ast.Name) and n.id in state.positional and m.id in state.positional:
                state.rounds = (state.positional.index(n.id), state.positional.index(m.id))

    def call(self, node: ast.Call) -> None:
        func = node.func
        imports = self.imports
        claimed = id(node) in self.claimed
        if not claimed:
            idiom = self.idiom("round_up", node)
            if idiom is not None:
                self.pad(idiom, "round_up")
        if isinstance(func, ast.Attribute):
            self.scan(func.value)
        for arg in node.args:
            self.scan(arg)
        for kw in node.keywords:
            self.scan(kw.value)
        name = imports.qualify(func) or ""
        tail = last_name(func) or ""
        args = positional(node)
        state = self.state
        vocab = self.vocab
        if not claimed:
            if name in _PAD:
                amount = argument(node, "pad", 1)
                if amount is not None:
                    self.pad_target(amount, node)
                    self.pad_context += 1
                    # A width hoisted into a local (`w = m - n` then `pad(x, (0, w))`) is the same width.
                    parts = [p for p in self.through_locals(amount) if isinstance(p, ast.BinOp)]
                    for part in parts:
                        self.length_roles(part)
                    if not self.in_test:
                        for part in parts:
                            self.stream_width(part)
                    self.pad_context -= 1
            elif name in _FILLED or tail == "new_full":
                size = argument(node, "size", 0)
                if size is not None:
                    self.pad_target(size, node)
            elif name in _SIZED or (tail in _NEW and isinstance(func, ast.Attribute)):
                for size in (*args, keyword(node, "size")):
                    if size is not None:
                        self.pad_target(size, node)
            if (name in _PAD or tail == "pad_sequence") and not self.in_test:
                self.pad_call_placed(node, name or tail)
            elif name in ("torch.cat", "torch.concat", "torch.concatenate"):
                self.row_segments(node)
            if tail == "pad_sequence":
                sequences = argument(node, "sequences", 0)
                if sequences is not None and self.classify(sequences).has(TOK):
                    self.add_pad("pad_sequence", node, self.classify(sequences), NOTHING, node)
        if name in _MAXES:
            self.max_of_units(node, args)
        if name == "zip" and len(args) > 1 and not self.in_test:
            self.zipped(node, args)
        if tail in ("bisect", "bisect_left", "bisect_right") and args and name.split(".", 1)[0] in ("bisect", ""):
            self.bisect_search(args)
        # Writes through calls: `d.update(k=...)`, `dict(k=...)`, `.append`.
        if tail == "update" or name == "dict":
            for kw in node.keywords:
                if kw.arg is not None:
                    self.note_write(kw.arg, kw.value, node=kw.value)
                    self.check_broadcast(kw.value, kw.arg, "field")
            if tail == "update" and isinstance(func, ast.Attribute) and not self.fresh_root(func.value):
                for kw in node.keywords:
                    if kw.arg is not None:
                        self.note_write(kw.arg, kw.value, node=kw.value, fresh=False)
                self.update_rewrite(node)
        elif tail in ("append", "extend", "insert") and isinstance(func, ast.Attribute):
            keys, _ = self.store_keys(func.value) if isinstance(func.value, (ast.Subscript, ast.Attribute)) else ((), False)
            for key in keys:
                self.note_write(key, args[-1] if args else None, node=node, entry=True,
                                fresh=self.fresh_root(func.value))
            if isinstance(func.value, ast.Name) and args:
                self.frame.data.setdefault("grown", {}).setdefault(func.value.id, []).append(args[-1])
            if isinstance(func.value, ast.Name) and args and func.value.id in self.frame.env:
                # A list grown here carries what it is grown with (lengths appended: a list of lengths).
                grown = self.classify(args[-1])
                if tail != "extend" and grown.tags & SAMPLE:
                    grown = grown.with_tags((grown.tags & ~SAMPLE) | TOK)
                current = self.frame.env[func.value.id]
                self.frame.env[func.value.id] = current | Value(grown.tags & ~BCAST, None, grown.params, grown.fields)
                self.forget()
        elif tail in ("get", "pop") and args and string_value(args[0]) is not None:
            state.reads.add(string_value(args[0]))  # type: ignore[arg-type]
            if string_value(args[0]) in vocab.sources:
                state.reads_source = True
                self.mentions_source = True
        else:
            for kw in node.keywords:  # `Batch(max_seq_lens=[m] * n)`: a record's field
                if kw.arg is not None:
                    self.check_broadcast(kw.value, kw.arg, "keyword")
                    if self.classify(kw.value).tags & PACKED and tail[:1].isupper():
                        # `PackedSeqParams(cu_seqlens_q=cu)`: a record built with the packed batch's
                        # description (a class is called by its CapWords name).
                        self.note_write(kw.arg, kw.value, node=kw.value)
        check = is_check_name(tail)
        if tail and tail != "update" and not check and (
            vocab.mentions_source(tail) or tail in vocab.owner_names
        ):
            # Calling a configured owner (or a `recompute_max_seq_lens`) rewrites the source.
            state.source_ticks.append(self.next_tick())
            self.mentions_source = True
        if check and (library_helper(func, imports) is not None or tail in vocab.owner_names):
            for value in (*node.args, *(k.value for k in node.keywords)):
                state.guarded.add(self.container(value))
        self.bucket_call(node, tail, args)
        self.record_call(node, name, tail)

    def zipped(self, node: ast.Call, args: Sequence[ast.expr]) -> None:
        """``zip(d["a"], d["b"], ...)``: fields of one record walked entry for entry (`Zip`); a field read
        into a local first (``a = d["a"]`` then ``zip(a, d["b"])``) is that field."""
        by_record: dict[str, list[str]] = {}
        for arg in args:
            arg = self.resolved(arg) or arg
            key = string_key(arg) if isinstance(arg, ast.Subscript) else None
            if key is not None:
                by_record.setdefault(ast.dump(arg.value), []).append(key)  # type: ignore[attr-defined]
        for keys in by_record.values():
            if len(set(keys)) > 1:
                self.facts.zips.append(Zip(self.frame.index, self.source.span(node), self.source.snippet(node, 60),
                                           tuple(keys)))

    def record_call(self, node: ast.Call, name: str, tail: str) -> None:
        func = node.func
        if not tail:
            return
        if isinstance(func, ast.Name):
            if tail in BUILTINS and tail not in self.imports.aliases:
                return
        else:
            root = name.split(".", 1)[0]
            if root in EXTERNAL or name.startswith("torch.") or (
                tail in COMMON_METHODS and tail not in self.vocab.helpers and root != self.frame.receiver
                and root not in self.imports.aliases
            ):
                return
        if name.split(".", 1)[0] in EXTERNAL:
            return
        arguments: list[Arg] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                arguments.append(self.arg("*", arg.value))
            else:
                arguments.append(self.arg(None, arg))
        for kw in node.keywords:
            arguments.append(self.arg(kw.arg or "**", kw.value))
            if kw.arg is None:
                # `f(t, **layout)` with `layout = dict(qkv_format="bshd", max_seq_len=n)`:
                # each key is passed as if by keyword.
                arguments.extend(self.arg(key, value) for key, value in self.splat_items(kw.value))
        callee = name if name else tail
        state = self.state
        unit = ""
        if len(node.args) == 2 and not node.keywords and library_helper(func, self.imports) is None:
            state.candidates.append((len(state.calls), node))  # maybe the project's round-up helper
            unit = canonical(node.args[1], self.unit_of, self.vocab.is_pad_multiplier)
        state.calls.append(Call(
            callee, self.source.span(node), self.next_tick(), self.frame.layout, tuple(arguments),
            bool(self.expecting_error), self.source.snippet(node, 60), "", unit,
        ))

    def arg(self, keyword_name: str | None, value: ast.expr) -> Arg:
        found = self.classify(value)
        tags = found.tags
        text = ""
        span = None
        keys = None
        if tags & (SEQ | MAX | TOK | SRC | PAD | PACKED | STREAM | SAMPLE) or found.fields or found.params or found.calls or (
            isinstance(value, ast.Constant) and (isinstance(value.value, str) and value.value in LAYOUT_KINDS
                                                 or value.value is False)  # a gate left off (`objectcalls`)
        ):
            text = self.source.snippet(value, 40)
            span = self.source.span(value)
        if keyword_name == "**":
            keys = self.splat_keys(value)
        params = tuple(sorted(found.params)) if found.params else ()
        bare = False
        if isinstance(value, ast.Name) and self.is_parameter(value.id):
            params = (value.id,)
            bare = True
        fields, calls = found.fields, found.calls
        return Arg(keyword_name, tags, params, text, span, keys, tuple(sorted(fields)) if fields else (), bare,
                   tuple(sorted(calls)) if calls else ())

    def splat_items(self, value: ast.expr) -> list[tuple[str, ast.expr]]:
        """The keys and values of ``**kw`` when ``kw`` is a dict literal or ``dict(...)`` here."""
        if isinstance(value, ast.Name):
            bound = self.bound_expr(value.id)
            if bound is None:
                return []
            value = bound
        if isinstance(value, ast.Dict) and all(string_value(k) is not None for k in value.keys):
            return [(string_value(k), v) for k, v in zip(value.keys, value.values)]  # type: ignore[misc]
        if isinstance(value, ast.Call) and self.imports.qualify(value.func) == "dict" and not value.args:
            if all(k.arg is not None for k in value.keywords):
                return [(k.arg, k.value) for k in value.keywords]  # type: ignore[misc]
        return []

    def splat_keys(self, value: ast.expr) -> tuple[str, ...] | None:
        """The keys of ``**kw`` when known (see `splat_items`); None when they are not."""
        items = self.splat_items(value)
        if items:
            return tuple(key for key, _ in items)
        if isinstance(value, (ast.Dict, ast.Call)) or (isinstance(value, ast.Name) and self.bound_expr(value.id)):
            bound = value if not isinstance(value, ast.Name) else self.bound_expr(value.id)
            if isinstance(bound, ast.Dict) and not bound.keys:
                return ()
        return None

    def update_rewrite(self, node: ast.Call) -> None:
        for kw in node.keywords:
            if kw.arg is not None:
                tags = self.classify(kw.value).tags
                if not tags & (TOK | SAMPLE | STREAM):
                    self.add_rewrite(node, kw.arg, entry=False, tags=tags)
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                for key, value in zip(arg.keys, arg.values):
                    name = string_value(key)
                    tags = self.classify(value).tags
                    if name is not None and not tags & (TOK | SAMPLE | STREAM):
                        self.add_rewrite(node, name, entry=False, tags=tags)
