"""The expression visitors of the per-file walk: ``scan`` in source order, subscripts, pads.

Part of the per-file walk (`layoutcheck.model.extract`), mixed into its
extractor (`ExpressionsMixin`): `scan` records what an expression and its
parts do (calls through `CallSitesMixin.call`, reads of configured names and
fields, comprehensions and lambdas in their own scopes, ``IfExp`` arms under
their layouts), the pad idioms found in arithmetic (`Pad`), the parameters
arithmetic shows to be padded or true lengths, entries of per-sample lists
read as batch lengths (`EntryRead`) and the agreement checks that guard them.
"""

from __future__ import annotations

import ast

from layoutcheck.model.facts import EntryRead, Pad
from layoutcheck.model.flow import (
    BCAST,
    CP,
    FOREIGN,
    MAX,
    NOTHING,
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
from layoutcheck.model.idioms import Idiom, match_agreement, match_chunk_pad, padded_operand
from layoutcheck.model.syntax import children, index_of, int_value, root_name, string_key, string_value, walk
from layoutcheck.model.units import canonical

__all__ = ["ExpressionsMixin"]


class ExpressionsMixin:
    """The expression visitors of the per-file walk (mixed into its extractor)."""

    # -- per-sample entries as batch lengths (LC103) --

    def container(self, node: ast.expr) -> str | None:
        """The container a per-sample list was read from, through local aliases."""
        root = root_name(node)
        if root is None:
            return None
        return self.state.aliases.get(root, root)

    def guard(self, test: ast.expr, *, negated: bool) -> None:
        """A test that a collection's entries are all equal (`idioms.match_agreement`: ``len(set(xs)) == 1``,
        or one entry only): what it guards is noted, by container and by field or parameter (``negated``:
        the test of an ``if ...: raise``)."""
        state = self.state
        for kind, collection in match_agreement(test, self.imports, negated=negated):
            found = self.classify(collection)
            container = self.container(collection)
            if kind == "single" or not found.fields:
                state.guarded.add(container)  # one sample per micro-batch: nothing in it can disagree
            for key in found.fields:
                state.guard_fields.add(f"{container}:{key}")
            for param in found.params:
                state.guard_fields.add(f"param:{param}")

    def walks(self, iterable: ast.expr) -> None:
        """A loop or comprehension over ``iterable``: does the function walk its samples one by one?"""
        state = self.state
        if not state.iterates:
            per_sample = SEQ | TOK | SRCLIST
            state.iterates = any(
                self.classify(n).tags & per_sample or self.classify(n).fields for n in walk(iterable)
            )

    # -- expressions --

    def scan(self, node: ast.AST) -> None:
        """Record what ``node`` and its parts do (calls, pads, reads), in source order."""
        kind = type(node)
        if kind is ast.Name:
            if node.id in self.vocab.sources:  # type: ignore[attr-defined]
                self.state.reads_source = True
                self.mentions_source = True
            elif node.id in self.vocab.packed:  # type: ignore[attr-defined]
                self.state.reads_packed = True
            return
        if kind is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is str and value in self.vocab.sources:
                self.mentions_source = True
            return
        if kind is ast.Call:
            self.call(node)  # type: ignore[arg-type]
            return
        if kind is ast.BinOp:
            if id(node) not in self.claimed:
                idiom = self.idiom("round_up", node)
                label = "round_up"
                if idiom is None:
                    idiom, label = self.idiom("pad_amount", node), "pad_amount"
                if idiom is None and isinstance(node.op, ast.Sub):  # type: ignore[attr-defined]
                    idiom, label = match_chunk_pad(node, self.chunk_of), "chunk_pad"
                if idiom is not None:
                    self.pad(idiom, label)
            self.length_roles(node)  # type: ignore[arg-type]
            self.shift_mismatch(node)  # type: ignore[arg-type]
            self.scan(node.left)  # type: ignore[attr-defined]
            self.scan(node.right)  # type: ignore[attr-defined]
            return
        if kind is ast.Subscript:
            self.subscript(node)  # type: ignore[arg-type]
            return
        # The commonest nodes that only lead to their parts, read as `children` gives them, without
        # the list (contexts and operators hold nothing to record).
        if kind is ast.Tuple or kind is ast.List:
            for element in node.elts:  # type: ignore[attr-defined]
                self.scan(element)
            return
        if kind is ast.Compare:
            self.scan(node.left)  # type: ignore[attr-defined]
            for comparator in node.comparators:  # type: ignore[attr-defined]
                self.scan(comparator)
            return
        if kind is ast.UnaryOp:
            self.scan(node.operand)  # type: ignore[attr-defined]
            return
        if kind is ast.BoolOp:
            for value in node.values:  # type: ignore[attr-defined]
                self.scan(value)
            return
        if kind is ast.Attribute:
            attr = node.attr  # type: ignore[attr-defined]
            if attr in self.vocab.sources:
                self.state.reads_source = True
                self.mentions_source = True
            elif attr in self.vocab.packed:
                self.state.reads_packed = True
            if isinstance(node.value, ast.Subscript):  # type: ignore[attr-defined]
                self.attribute_bases.add(id(node.value))  # type: ignore[attr-defined]
            self.scan(node.value)  # type: ignore[attr-defined]
            return
        if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            for gen in node.generators:  # type: ignore[attr-defined]
                self.scan(gen.iter)
                self.walks(gen.iter)
            if kind is not ast.DictComp:
                self.bucket_search(node)  # type: ignore[arg-type]
            self.push_comprehension(node)  # type: ignore[arg-type]
            try:
                for gen in node.generators:  # type: ignore[attr-defined]
                    for test in gen.ifs:
                        self.scan(test)
                if kind is ast.DictComp:
                    self.scan(node.key)  # type: ignore[attr-defined]
                    self.scan(node.value)  # type: ignore[attr-defined]
                else:
                    self.scan(node.elt)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            return
        if kind is ast.Dict:
            record = self.next_tick()  # the fields of one literal are one record's
            for key, value in zip(node.keys, node.values):  # type: ignore[attr-defined]
                if key is not None:
                    self.scan(key)
                self.scan(value)
                name = string_value(key)
                if name is not None:
                    self.note_write(name, value, record=record)
                    self.check_broadcast(value, name, "field")
                    self.judge_literal(name, value, binding=True)
            return
        if kind is ast.Lambda:
            args = node.args  # type: ignore[attr-defined]
            self.push_scope([a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)])
            try:
                self.scan(node.body)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            return
        if kind is ast.NamedExpr:
            self.scan(node.value)  # type: ignore[attr-defined]
            if isinstance(node.target, ast.Name):  # type: ignore[attr-defined]
                self.bind(node.target.id, self.classify(node.value), node.value)  # type: ignore[attr-defined]
            return
        if kind is ast.IfExp:
            self.in_test += 1
            self.scan(node.test)  # type: ignore[attr-defined]
            self.in_test -= 1
            body, other = self.layout_arms_of(node)  # type: ignore[arg-type]
            frame = self.frame
            saved = frame.layout
            frame.layout = body or saved
            self.positive.append(self.source.segment(node.test))  # type: ignore[attr-defined]
            self.scan(node.body)  # type: ignore[attr-defined]
            self.positive.pop()
            frame.layout = other or saved
            self.scan(node.orelse)  # type: ignore[attr-defined]
            frame.layout = saved
            return
        for child in children(node):
            if isinstance(child, ast.expr):
                self.scan(child)
            elif isinstance(child, ast.keyword):
                self.scan(child.value)
            elif isinstance(child, ast.comprehension):
                self.scan(child.iter)

    def length_roles(self, node: ast.BinOp) -> None:
        """Which parameters this arithmetic shows to be a padded or a true length.

        ``p - x.size(0)`` (a padded length less a sample's size) is a pad amount: ``p`` is a padded
        length. A parameter rounded up, or divided into CP chunks, is the layout's length: the
        padded one where the layout is BSHD, the true one where it is packed.
        """
        if isinstance(node.op, ast.Sub) and self.pad_context:
            left, right = node.left, node.right
            if isinstance(left, ast.Name) and self.is_parameter(left.id) and self.classify(right).tags & SEQ and (
                not self.classify(left).tags & (SEQ | PAD | MAX)
            ) and left.id not in {n.id for n in walk(right) if isinstance(n, ast.Name)}:
                self.note_padded_param(left.id, node, f"`{self.source.snippet(node, 40)}` is a pad amount")
        layout = self.frame.layout
        if layout is None:
            return
        idiom = self.idiom("ceil_div", node) or self.idiom("round_up", node)
        if idiom is None:
            return
        for value in idiom.values:
            if isinstance(value, ast.Name) and self.is_parameter(value.id):
                why = f"divided into chunks where the layout is {layout.upper()}"
                if layout == "bshd":
                    self.note_padded_param(value.id, node, why)
                else:
                    self.note_true_param(value.id, node, why)

    def layout_arms_of(self, node: ast.IfExp) -> tuple[str | None, str | None]:
        body, other = self.layout_of(node.test)
        self.layout_arms(node, body, other)
        return body, other

    def layout_arms(self, node: ast.IfExp, body: str | None, other: str | None) -> None:
        """``max_seq_len if qkv_format == "bshd" else tokens.size(0)``: the parameter the BSHD arm
        picks where the packed arm takes a sample's size is the padded length; a parameter the packed
        arm picks is the true length."""
        for arm, layout, rest in ((node.body, body, node.orelse), (node.orelse, other, node.body)):
            if layout is None or not isinstance(arm, ast.Name) or not self.is_parameter(arm.id):
                continue
            why = f"the {layout.upper()} arm of `{self.source.snippet(node, 40)}`"
            if layout == "bshd":
                self.note_padded_param(arm.id, node, why)
            elif isinstance(rest, ast.Name) and self.is_parameter(rest.id) or self.classify(rest).tags & SEQ:
                self.note_true_param(arm.id, node, why)

    def subscript(self, node: ast.Subscript) -> None:
        key = string_key(node)
        if key is not None:
            self.state.reads.add(key)
            if key in self.vocab.sources:
                self.state.reads_source = True
                self.mentions_source = True
            elif key in self.vocab.packed:
                self.state.reads_packed = True
        self.scan(node.value)
        self.scan(node.slice)
        if not self.in_test:
            self.clashes_at(node)
            self.read_side(node)
        index = int_value(index_of(node))
        if self.in_test or index is None or id(node) in self.attribute_bases:
            return  # a check, a key, or an entry whose attribute is read (`xs[0].device`): no length used
        found = self.classify(node.value)
        if found.tags & (SAMPLE | STREAM):
            return
        if found.tags & SEQ and not found.tags & SRCLIST:
            self.state.samples.add(index)
        params = found.params if isinstance(node.value, ast.Name) else frozenset()
        if not (found.tags & SRCLIST or found.fields or params):
            return
        self.facts.entry_reads.append(EntryRead(
            self.frame.index, self.source.span(node), self.source.snippet(node), self.container(node.value), index,
            tuple(sorted(found.fields)), tuple(sorted(params)), bool(found.tags & SRCLIST),
        ))

    # -- pads (LC102, LC107) --

    def pad(self, idiom: Idiom, kind: str) -> None:
        node = idiom.node
        for part in walk(node):
            self.claimed.add(id(part))
        value = NOTHING
        for part in idiom.values:
            value = value | self.classify(part)
        unit = self.classify(idiom.unit)
        unit_foreign = unit.tags & FOREIGN and not unit.tags & (CP | UNIT)
        if value.tags & SRC or unit_foreign or (value.tags & FOREIGN and not value.tags & (SEQ | TOK)):
            return  # a consumer of a configured source, or a configured kernel/quantisation multiple
        if not self.in_test:
            self.unit_picked(idiom.unit, node)
            self.unit_lcm_of_nested_splits(idiom.unit, node)
        self.add_pad(kind, node, value, unit, node, unit_node=idiom.unit,
                     rounding="next" if kind == "pad_amount" and isinstance(node.op, ast.Sub) else "ceil",  # type: ignore[attr-defined]
                     operand=padded_operand(idiom.values, self.imports))

    def add_pad(self, kind: str, node: ast.AST, value: Value, unit: Value, carrier: ast.AST, *,
                unit_node: ast.expr | None = None, rounding: str = "ceil", operand: str = "") -> None:
        text = canonical(unit_node, self.unit_of, self.vocab.is_pad_multiplier) if unit_node is not None else ""
        decided = unit_node
        if isinstance(unit_node, ast.Name):
            decided = self.bound_expr(unit_node.id) or unit_node
        pad = Pad(
            self.frame.index, kind, self.source.span(node), self.source.snippet(node), value.tags, unit.tags,
            text, rounding, self.frame.layout, "local", self.next_tick(), tuple(sorted(value.params)),
            tuple(sorted(value.fields)), tuple(sorted(unit.params)),
            self.source.span(decided) if decided is not None else None, operand,
        )
        self.state.pads.append((pad, carrier))
        if unit_node is not None:
            self.state.unit_names |= {n.id for n in walk(unit_node) if isinstance(n, ast.Name)}
        if kind in ("round_up", "pad_amount", "chunk_pad"):
            self.state.note_space(self.source.snippet(node, 40), "padded length P", node.lineno,  # type: ignore[attr-defined]
                                  f"rounded up to a multiple of `{text}`" if text else "rounded up")

    def pad_target(self, expr: ast.expr, carrier: ast.AST) -> None:
        """``expr`` sizes a pad or a new tensor (``carrier``, whose fate decides)."""
        found = self.classify(expr)
        if found.tags & MAX and not found.tags & (PAD | SRC | BCAST | FOREIGN):
            origin = found.origin or expr
            if not self.in_test:
                self.wide_max(origin)
            self.add_pad("pad_target", origin, found, NOTHING, carrier)
            self.state.note_space(self.source.snippet(origin, 40), "one length for many samples (a maximum)",
                                  origin.lineno, "a maximum over lengths sizes a tensor")  # type: ignore[attr-defined]
