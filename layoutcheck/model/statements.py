"""The statement visitors of the per-file walk: blocks, branches, loops, ``try``, ``assert``.

Part of the per-file walk (`layoutcheck.model.extract`), mixed into its
extractor (`StatementsMixin`): each statement is dispatched to its visitor;
alternative bodies (``if``/``else``, ``match`` cases, ``except`` handlers, a
loop body that may not run) are walked from the same state and joined
(`layoutcheck.model.joins`); an ``if`` decided by a switch set once walks its
live arm only; a layout test (``qkv_format == "thd"``) says which layout each
arm serves; ``for`` loops bind their targets, pair walked collections
(``enumerate``) and stand for the lists they build (`built_by_loop`); a
function's layout, padded-length and true-length parameters are noted where a
test or an ``assert`` shows them.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from layoutcheck.model.flow import MASKED, NOTHING, Value
from layoutcheck.model.joins import join_envs, join_exprs
from layoutcheck.model.predicates import GROWS, always_ends, assigned_targets, shorter_than, string_tuple, written_in
from layoutcheck.model.syntax import constant_test, expects_error, nodes, string_value, switch_like, switches, walk
from layoutcheck.model.vocabulary import LAYOUT_KINDS

__all__ = ["StatementsMixin"]

_STATEMENT_LIMIT = 400
"""Deeper statement nesting than this is left unwalked (generated code): the file is still parsed."""


class StatementsMixin:
    """The statement visitors of the per-file walk (mixed into its extractor)."""

    def block(self, body: Sequence[ast.stmt]) -> bool:
        """Walk ``body``; True when it always ends in ``return`` or ``raise``."""
        self.depth += 1
        try:
            if self.depth > _STATEMENT_LIMIT:
                return False
            for stmt in body:
                if self.statement(stmt):
                    return True
            return False
        finally:
            self.depth -= 1

    def statement(self, node: ast.stmt) -> bool:
        kind = type(node)
        if kind is ast.Assign:
            first = node.targets[0]
            self.frame.data["assigning"] = first.id if isinstance(first, ast.Name) else None
            self.scan(node.value)
            self.frame.data["assigning"] = None
            for target in node.targets:
                self.scan_target(target)
            self.assign(node.targets, node.value)
        elif kind is ast.Expr:
            self.scan(node.value)
        elif kind is ast.If:
            return self.if_(node)
        elif kind in (ast.For, ast.AsyncFor):
            self.for_(node)
        elif kind is ast.Return:
            if node.value is not None:
                self.scan(node.value)
                self.summarise_return(node)
                self.returned(node.value)
            else:
                self.state.elements = False
            return True
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            self.function(node)
        elif kind is ast.AnnAssign:
            if node.value is not None:
                self.scan(node.value)
                self.scan_target(node.target)
                self.assign([node.target], node.value)
        elif kind is ast.AugAssign:
            self.scan(node.value)
            self.scan_target(node.target)
            self.augment(node)
        elif kind in (ast.Import, ast.ImportFrom):
            self.imports.add(node)
        elif kind is ast.ClassDef:
            self.class_(node)
        elif kind in (ast.With, ast.AsyncWith):
            for item in node.items:
                self.scan(item.context_expr)
                if item.optional_vars is not None:
                    self.bind_target(item.optional_vars, NOTHING, None)
            raises = expects_error(node)
            self.expecting_error += raises
            try:
                return self.block(node.body)
            finally:
                self.expecting_error -= raises
        elif kind is ast.While:
            self.in_test += 1
            self.scan(node.test)
            self.in_test -= 1
            self.loop_body(node.body, node.orelse)
        elif kind is ast.Assert:
            self.assert_(node)
        elif kind is ast.Raise:
            if node.exc is not None:
                self.scan(node.exc)
            return True
        elif kind is ast.Try or kind.__name__ == "TryStar":
            self.try_(node)
        elif kind is ast.Match:
            self.scan(node.subject)
            self.branches([case.body for case in node.cases], [None] * len(node.cases), exhaustive=False)
        elif kind is ast.Delete:
            for target in node.targets:
                self.scan(target)
        return False

    # -- branches --

    def branches(self, bodies: list[list[ast.stmt]], layouts: list[str | None], *, exhaustive: bool) -> bool:
        """Walk alternative ``bodies`` from the same state and join what they leave."""
        frame = self.frame
        before, fresh_before, layout_before = frame.env, set(frame.fresh), frame.layout
        exprs_before = frame.exprs
        results: list[tuple[dict[str, Value], bool]] = []
        bound: list[tuple[dict[str, ast.expr], bool]] = []
        rebound: set[str] = set()
        for body, layout in zip(bodies, layouts):
            frame.env = dict(before)
            frame.exprs = dict(exprs_before)
            frame.layout = layout or layout_before
            self.forget()
            self.rebound.append(rebound)
            try:
                ended = self.block(body)
            finally:
                self.rebound.pop()
            results.append((frame.env, ended))
            bound.append((frame.exprs, ended))
        if self.rebound:
            self.rebound[-1] |= rebound
        frame.layout = layout_before
        live = [env for env, ended in results if not ended]
        live_exprs = [exprs for exprs, ended in bound if not ended]
        if not exhaustive:
            live.append(before)
            live_exprs.append(exprs_before)
        frame.env = join_envs(live, before) if live else join_envs([env for env, _ in results], before)
        frame.exprs = join_exprs(live_exprs or [exprs for exprs, _ in bound], rebound, self.synthetic)
        frame.fresh = fresh_before | frame.fresh
        self.forget()
        return exhaustive and not live

    def if_(self, node: ast.If) -> bool:
        raises = any(isinstance(n, ast.Raise) for n in node.body)
        self.in_test += 1
        self.scan(node.test)
        self.in_test -= 1
        test_text = self.source.segment(node.test)
        # The body runs only when the test holds; after an `if ...: raise`, what follows has the
        # test settled too (crudely: a value the test names is taken to be checked).
        self.positive.append(test_text)
        try:
            return self._if(node, raises)
        finally:
            if not raises:
                self.positive.remove(test_text)

    def _if(self, node: ast.If, raises: bool) -> bool:
        decided = constant_test(node.test, self.switches()) if switch_like(node.test) else None
        if decided is not None:
            # `left = True` then `if left: ... else: ...`: one path runs, the other is dead code.
            return self.block(node.body if decided else node.orelse)
        body_layout, else_layout = self.layout_of(node.test)
        if raises:
            self.guard(node.test, negated=True)
            saved = self.frame.layout
            self.frame.layout = else_layout or saved
            self.note_none_check(node.test, negated=True)
            self.frame.layout = saved
            self.note_refused(node.test)
        ended = self.branches([node.body, node.orelse], [body_layout, else_layout], exhaustive=True)
        self.narrow_padded(node)
        if not ended:
            # An early `return`/`raise` narrows the layout of what follows.
            body_ends = always_ends(node.body)
            else_ends = bool(node.orelse) and always_ends(node.orelse)
            if body_ends and not else_ends and else_layout:
                self.frame.layout = else_layout
            elif else_ends and not body_ends and body_layout:
                self.frame.layout = body_layout
        return ended

    def narrow_padded(self, node: ast.If) -> None:
        """``if len(d) < p: d = F.pad(d, ...)`` (no ``else``): on the path that pads, ``d`` is padded; on
        the other, the test says ``d`` was at least ``p`` long already. Either way ``d`` is no longer the
        sample's true tokens alone (it is as long as its padded length), so the join drops that."""
        if node.orelse:
            return
        name = shorter_than(node.test)
        if name is None or name not in self.frame.env:
            return
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id == name and isinstance(stmt.value, ast.Call) \
                    and self.imports.qualify(stmt.value.func) in GROWS and any(
                        isinstance(n, ast.Name) and n.id == name for a in stmt.value.args for n in walk(a)):
                value = self.frame.env[name]
                if value.tags & MASKED:
                    self.bind(name, value.with_tags(value.tags & ~MASKED), self.bound_expr(name))
                return

    def switches(self) -> dict[str, bool]:
        """The current function's switches: locals set once to ``True``/``False`` (`syntax.switches`)."""
        frame = self.frame
        found = frame.data.get("switches")
        if found is None:
            body = getattr(frame.node, "body", None)
            found = frame.data["switches"] = switches(body) if isinstance(body, list) and len(self.frames) > 1 else {}
        return found

    def loop_body(self, body: list[ast.stmt], orelse: list[ast.stmt]) -> None:
        self.branches([body], [None], exhaustive=False)
        if orelse:
            self.block(orelse)

    def for_(self, node: ast.For | ast.AsyncFor) -> None:
        self.scan(node.iter)
        self.walks(node.iter)
        keys = string_tuple(node.iter)
        if keys is not None and isinstance(node.target, ast.Name):
            # `for key in ("a", "b"): d[key] = f(d[key])`: each key is a field, treated alike.
            self.frame.data.setdefault("keys", {})[node.target.id] = keys
            self.bind(node.target.id, NOTHING)
            if any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id == node.target.id
                   for s in nodes(node) if isinstance(s, (ast.Assign, ast.AugAssign)) for t in assigned_targets(s)):
                self.partners.add(tuple(sorted(keys)))
            self.loop_body(node.body, node.orelse)
            self.frame.data["keys"].pop(node.target.id, None)
            return
        self.bind_target(node.target, self.element(node.iter), None)
        self.bucket_loop(node)
        self.enumerated(node)
        built = self.built_by_loop(node)
        self.loops.append(node)
        self.loop_body(node.body, node.orelse)
        self.loops.pop()
        stepped = written_in(node.body) if built else set()
        for name, comprehension in built.items():
            if name in self.frame.env:
                # After the loop the list is what the comprehension would have built: checks that read
                # a value's expression (`d["k"] = [f(x) for x in d["k"]]`) read this one.
                self.bind(name, self.frame.env[name], comprehension)
                if not any(isinstance(n, ast.Name) and n.id in stepped for n in walk(comprehension.elt)):
                    # What the comprehension is (`[v for _ in xs]`: one value for every entry) joins what
                    # the appends gave it. An element bound in the body (`n = len(x)`, then `out.append(n)`)
                    # changes every step, whatever the synthetic comprehension's loop variable shows.
                    self.bind(name, self.classify(comprehension) | self.frame.env[name], comprehension)
                self.frame.fresh.add(name)

    def enumerated(self, node: ast.For | ast.AsyncFor) -> None:
        """``for i, a in enumerate(A):`` reading ``B[i]`` in its body walks ``A`` and ``B`` entry for
        entry, as ``for a, b in zip(A, B):`` does (`zipped`)."""
        iterable, target = node.iter, node.target
        if self.in_test or not (isinstance(iterable, ast.Call) and self.imports.qualify(iterable.func) == "enumerate"
                                and len(iterable.args) == 1 and isinstance(target, ast.Tuple)
                                and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name)):
            return
        index = target.elts[0].id
        walked = [iterable.args[0]]
        seen = {ast.dump(walked[0])}
        for stmt in node.body:
            for part in nodes(stmt):
                if isinstance(part, ast.Subscript) and isinstance(part.slice, ast.Name) and part.slice.id == index:
                    text = ast.dump(part.value)
                    if text not in seen:
                        seen.add(text)
                        walked.append(part.value)
        if len(walked) > 1:
            self.zipped(iterable, walked)

    def built_by_loop(self, node: ast.For | ast.AsyncFor) -> dict[str, ast.ListComp]:
        """Lists ``node`` builds as a comprehension would: ``xs = []`` before the loop and one
        ``xs.append(e)`` (or ``xs.extend(e)``) in its body (under ``if c:`` tests at most), ``xs`` written
        nowhere else in it. Each as the comprehension ``[e for <target> in <iter> if c]`` (for ``extend``,
        ``[y for <target> in <iter> if c for y in e]``; `synthetic`: no node of the file)."""
        if isinstance(node, ast.AsyncFor):
            return {}
        found: dict[str, ast.ListComp] = {}
        stack: list[tuple[list[ast.stmt], list[ast.expr]]] = [(node.body, [])]
        while stack:
            body, tests = stack.pop()
            for stmt in body:
                if isinstance(stmt, ast.If) and not stmt.orelse:
                    stack.append((stmt.body, [*tests, stmt.test]))
                    continue
                call = stmt.value if isinstance(stmt, ast.Expr) else None
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in ("append", "extend") and isinstance(call.func.value, ast.Name)
                        and len(call.args) == 1 and not call.keywords):
                    continue
                name = call.func.value.id
                bound = self.bound_expr(name)
                if name in found or not (isinstance(bound, ast.List) and not bound.elts) or name not in self.frame.fresh:
                    found[name] = None  # type: ignore[assignment]
                    continue
                generators = [ast.comprehension(target=node.target, iter=node.iter, ifs=tests, is_async=0)]
                element = call.args[0]
                if call.func.attr == "extend":
                    # `xs.extend(e)` appends each entry of `e`: `[y for <target> in <iter> for y in e]`, and
                    # `xs.extend([e])` (one entry) is `xs.append(e)`.
                    if isinstance(element, (ast.List, ast.Tuple)) and len(element.elts) == 1 \
                            and not isinstance(element.elts[0], ast.Starred):
                        element = element.elts[0]
                    else:
                        entry = ast.copy_location(ast.Name(id=f"{name}·entry", ctx=ast.Store()), element)
                        generators.append(ast.comprehension(target=entry, iter=element, ifs=[], is_async=0))
                        element = ast.copy_location(ast.Name(id=entry.id, ctx=ast.Load()), element)
                comprehension = ast.ListComp(elt=element, generators=generators)
                found[name] = ast.copy_location(comprehension, call)
        if not found:
            return {}
        written = written_in([node])
        mentions: dict[str, int] = {}
        for n in nodes(node):
            if isinstance(n, ast.Name) and n.id in found:
                mentions[n.id] = mentions.get(n.id, 0) + 1
        out = {name: comp for name, comp in found.items()
               if comp is not None and name not in written and mentions.get(name) == 1}
        self.synthetic.extend(out.values())
        return out

    def try_(self, node: ast.stmt) -> None:
        self.block(node.body)  # type: ignore[attr-defined]
        handlers = [h.body for h in node.handlers]  # type: ignore[attr-defined]
        if handlers:
            self.branches(handlers, [None] * len(handlers), exhaustive=False)
        self.block(node.orelse)  # type: ignore[attr-defined]
        self.block(node.finalbody)  # type: ignore[attr-defined]

    def layout_of(self, test: ast.expr) -> tuple[str | None, str | None]:
        """The layout ``test`` proves in its body and in its ``else``: ``qkv_format == "thd"``."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            body, other = self.layout_of(test.operand)
            return other, body
        if isinstance(test, ast.BoolOp):
            found = [self.layout_of(v) for v in test.values]
            if isinstance(test.op, ast.And):
                body = next((b for b, _ in found if b), None)
                others = {o for _, o in found}
                return body, (others.pop() if len(found) == 1 and others else None)
            elses = [o for _, o in found]
            return None, (elses[0] if elses and all(o == elses[0] for o in elses) else None)
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            return None, None
        op = test.ops[0]
        sides = (test.left, test.comparators[0])
        for side in sides:
            kind = LAYOUT_KINDS.get(string_value(side) or "")
            if kind is not None:
                self.note_layout_param(sides[1] if side is sides[0] else sides[0], test)
                other = "bshd" if kind == "thd" else "thd"
                if isinstance(op, ast.Eq):
                    return kind, other
                if isinstance(op, ast.NotEq):
                    return other, kind
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set)):
            kinds = {LAYOUT_KINDS.get(string_value(e) or "") for e in test.comparators[0].elts}
            if len(kinds) == 1 and None not in kinds:
                self.note_layout_param(test.left, test)
                kind = kinds.pop()
                other = "bshd" if kind == "thd" else "thd"
                return (kind, other) if isinstance(op, ast.In) else (other, kind)
        return None, None

    def note_layout_param(self, node: ast.expr, test: ast.AST) -> None:
        """A parameter compared with a layout kind is the function's layout parameter."""
        if isinstance(node, ast.Name) and self.is_parameter(node.id):
            state = self.state
            if node.id not in state.layout_params:
                state.layout_params.add(node.id)
                state.note_space(node.id, "layout kind", test.lineno, "compared with a layout kind")  # type: ignore[attr-defined]

    def assert_(self, node: ast.Assert) -> None:
        self.positive.append(self.source.segment(node.test))
        self.in_test += 1
        self.scan(node.test)
        if node.msg is not None:
            self.scan(node.msg)
        self.in_test -= 1
        self.guard(node.test, negated=False)
        self.note_none_check(node.test, negated=False)
        body, _ = self.layout_of(node.test)
        if body:
            self.frame.layout = body

    def note_none_check(self, test: ast.expr, *, negated: bool) -> None:
        """``assert p is not None`` / ``if p is None: raise``: omitting ``p`` fails loudly. Where
        the layout is BSHD, it also says ``p`` is what BSHD needs: the padded length."""
        for part in (test.values if isinstance(test, ast.BoolOp) else [test]):
            if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.left, ast.Name):
                none = isinstance(part.comparators[0], ast.Constant) and part.comparators[0].value is None
                wanted = ast.Is if negated else ast.IsNot
                if none and isinstance(part.ops[0], wanted) and self.is_parameter(part.left.id):
                    self.state.none_checked.add(part.left.id)
                    if self.frame.layout == "bshd":
                        self.note_padded_param(part.left.id, part, "required where the layout is BSHD")

    def note_refused(self, test: ast.expr) -> None:
        """``if v is not None and ...: raise`` / ``if v and ...: raise``: ``v`` set is refused (`Function.refused`)."""
        parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
        for part in parts:
            if isinstance(part, ast.Name):
                self.state.refused.add(part.id)
            elif isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.left, ast.Name) \
                    and isinstance(part.ops[0], ast.IsNot) and isinstance(part.comparators[0], ast.Constant) \
                    and part.comparators[0].value is None:
                self.state.refused.add(part.left.id)

    def note_padded_param(self, name: str, node: ast.AST, why: str) -> None:
        state = self.state
        if name not in state.padded_params:
            state.padded_params.add(name)
            state.note_space(name, "padded length P (parameter)", getattr(node, "lineno", 0), why)

    def note_true_param(self, name: str, node: ast.AST, why: str) -> None:
        state = self.state
        if name not in state.true_params:
            state.true_params.add(name)
            state.note_space(name, "true length T (parameter)", getattr(node, "lineno", 0), why)
