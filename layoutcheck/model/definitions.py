"""The walk of ``def`` and ``class`` statements, and the checks run when a function's walk ends.

Part of the per-file walk (`layoutcheck.model.extract`), mixed into its
extractor (`DefinitionsMixin`): a ``def`` opens a frame and a `FunctionState`
for its body (its parameters, defaults and layout parameters read first); a
``class`` walks its body with class attributes apart from the enclosing
locals. When a function (or the module) has been walked, `finish` runs the
function-level checks of `layoutcheck.model.partners` and `sinkchecks` (each
only where the function's text spells what it matches), records what the
module-wide readers found in it, fixes the fates of its pads, notes the
spaces its uses show and writes its `Function` facts and summary.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from layoutcheck.model.facts import Function, Param
from layoutcheck.model.flow import CP, NOTHING, PACKED, SAMPLE, SEQ, STREAM, TOK, UNIT, Frame, Value
from layoutcheck.model.partners import (
    SPELLINGS,
    Body,
    combined_before_restore,
    empty_segment,
    flattened_length,
    misplaced_positions,
    moving_reference,
    row_count_as_size,
    truncated_apart,
    unit_switches,
    unmasked_mean,
)
from layoutcheck.model.records import record_cut_apart
from layoutcheck.model.sinkchecks import CHECKS as SINK_CHECKS
from layoutcheck.model.sinks import Sinks
from layoutcheck.model.summaries import write_summary
from layoutcheck.model.syntax import last_name, method_receiver, string_value, takes_class
from layoutcheck.model.uses import Uses, body_uses
from layoutcheck.model.vocabulary import LAYOUT_KINDS, is_check_name
from layoutcheck.model.walkstate import FunctionState, space_word

__all__ = ["DefinitionsMixin"]

_PARTNER_CHECKS = tuple((kind, check, SPELLINGS[kind]) for kind, check in (
    ("misplaced_positions", misplaced_positions),
    ("truncated_apart", truncated_apart),
    ("moving_reference", moving_reference),
    ("empty_segment", empty_segment),
    ("unmasked_mean", unmasked_mean),
    ("combined_before_restore", combined_before_restore),
    ("row_count_as_size", row_count_as_size),
    ("flattened_length", flattened_length),
)) + SINK_CHECKS
"""The function-level checks of `layoutcheck.model.partners`, by the clash kind each records, with
the words a function must spell for each to find anything (`partners.SPELLINGS`)."""
_USE_WHY = {
    TOK: "sized, padded or concatenated per element",
    SEQ: "fed to a cumulative sum, used as a tensor extent or rounded up",
    UNIT: "the multiple of a round-up",
    CP: "indexes the chunks of a zigzag split",
    PACKED: "grown by its own last entry plus a length",
}


_NOTED = TOK | SEQ | UNIT | CP | PACKED
"""The use tags `_note_uses` names (those of `_USE_WHY`)."""


class DefinitionsMixin:
    """The ``def``/``class`` visitors and the function-end checks of the per-file walk (mixed into its extractor)."""

    live_checks: tuple[tuple[tuple[str, Any, frozenset[str]], ...], tuple[str, ...]] | None
    """Declared where it is filled (`function_checks`), as the extractor's `__init__` types it."""

    def absorb(self, uses: Uses) -> None:
        """Add what a body's `Uses` show of fields and unit atoms to the file's."""
        for key, tags in uses.fields.items():
            self.field_uses[key] = self.field_uses.get(key, 0) | tags
        self.unit_atoms |= uses.unit_atoms
    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.scan(decorator)
        args = node.args
        defaults = [*([None] * (len(args.posonlyargs) + len(args.args) - len(args.defaults))), *args.defaults]
        params: list[Param] = []
        positional_params = [*args.posonlyargs, *args.args]
        layout_params: set[str] = set()
        for i, (param, default) in enumerate(zip(positional_params, defaults)):
            kind = "posonly" if i < len(args.posonlyargs) else "pos"
            params.append(Param(param.arg, kind, None if default is None else self.source.snippet(default, 40)))
            if default is not None:
                self.scan(default)
                self.judge_literal(param.arg, default, binding=True)
                if string_value(default) in LAYOUT_KINDS:
                    layout_params.add(param.arg)
        if args.vararg is not None:
            params.append(Param(args.vararg.arg, "star", None))
        for param, default in zip(args.kwonlyargs, args.kw_defaults):
            params.append(Param(param.arg, "kwonly", None if default is None else self.source.snippet(default, 40)))
            if default is not None:
                self.scan(default)
                self.judge_literal(param.arg, default, binding=True)
                if string_value(default) in LAYOUT_KINDS:
                    layout_params.add(param.arg)
        if args.kwarg is not None:
            params.append(Param(args.kwarg.arg, "dstar", None))
        name = node.name
        memo, started = self.memo, None
        if memo is not None and memo.eligible(self, node):
            if memo.replay(self, node):  # its facts as the previous extraction found them (`reuse`)
                self.bind(name, NOTHING)
                return
            started = memo.start(self, node)
        self.qual.append(name)
        qualname = ".".join(self.qual)
        parent = self.frame
        cls = self.classes[-1][0] if self.classes and parent.cls != "<inside>" else None
        own = method_receiver(node) if cls is not None else None
        reach = own or (parent.receiver if parent.receiver not in {p.name for p in params} else None)
        model = parent.model or bool(self.classes and self.classes[-1][1])
        index = len(self.facts.functions)
        line, col, _, _ = self.source.span(node)
        name_col = col + (6 if isinstance(node, ast.AsyncFunctionDef) else 0) + 4
        facts = Function(
            qualname, (line, name_col, line, name_col + len(name)), tuple(params), parent.index, cls, model,
            named_for_source=self.vocab.mentions_source(name) and not is_check_name(name), receiver=own,
            takes_class=own is not None and takes_class(node),
        )
        self.facts.functions.append(facts)
        uses = body_uses(node.body, self.imports)
        self.absorb(uses)
        frame = Frame(index, parent, node, model=model, cls="<inside>", uses=uses, receiver=reach)
        self.frames.append(frame)
        state = FunctionState()
        state.layout_params |= layout_params
        for layout_param in layout_params:
            state.note_space(layout_param, "layout kind", line, "defaults to a layout kind")
        state.positional = tuple(p.arg for p in positional_params)
        self.states.append(state)
        for given in params:
            frame.env[given.name] = Value(self.vocab.tags(given.name), None, frozenset((given.name,)))
        self.forget()
        saved_classes, self.classes = self.classes, []
        saved_positive, self.positive = self.positive, []
        saved_loops, self.loops = self.loops, []
        self.block(node.body)
        self.classes = saved_classes
        self.positive = saved_positive
        self.loops = saved_loops
        self.finish(frame, node.body)
        self.frames.pop()
        self.qual.pop()
        if started is not None:
            memo.finish(self, node, started)  # type: ignore[union-attr]
        self.bind(name, NOTHING)

    def class_(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.scan(decorator)
        bases = tuple(last_name(b) or "" for b in node.bases)
        for base in node.bases:
            self.scan(base)
        model = any(self.vocab.is_model_base(b) for b in bases)
        self.class_facts.append((".".join([*self.qual, node.name]), bases))
        self.qual.append(node.name)
        self.classes.append((node.name, model))
        frame = self.frame
        saved_env, saved_cls = frame.env, frame.cls
        frame.env = dict(saved_env)  # class attributes are not the enclosing scope's locals
        frame.cls = None
        self.forget()
        self.in_class_body += 1
        self.block(node.body)
        self.in_class_body -= 1
        frame.env, frame.cls = saved_env, saved_cls
        self.forget()
        self.classes.pop()
        self.qual.pop()
        self.bind(node.name, NOTHING)

    def function_checks(self) -> tuple[tuple[tuple[str, Any, frozenset[str]], ...], tuple[str, ...]]:
        """The function-end checks whose words the file spells, with all their words (asked once)."""
        live = self.live_checks
        if live is None:
            # Most checks' words are missing from the whole file: gated once per file, not per function.
            spelled = self.source.spelled
            checks = tuple((kind, check, frozenset(words)) for kind, check, words in _PARTNER_CHECKS
                           if all(spelled(w) for w in words))
            live = self.live_checks = (checks, tuple(sorted({w for _, _, words in checks for w in words})))
        return live

    def _carries_tokens(self, node: ast.expr) -> bool:
        """Whether ``node`` holds tokens (per token, per sample or a stream): what `Sinks` follows."""
        return self.classify(node).has(TOK | SAMPLE | STREAM)

    def finish(self, frame: Frame, body: Sequence[ast.stmt]) -> None:
        """The function has been walked: fix the fates of its pads and write its facts."""
        shared = Body(body)
        node = frame.node
        first, last = (node.lineno, node.end_lineno) if frame.index else (1, None)  # type: ignore[attr-defined]
        checks, _ = self.function_checks()
        if checks:
            # Each word searched for in the function's lines when a check first needs it, and a check
            # given up at its first word missing (most functions spell few of the checks' words).
            spells = self.source.spells(first, last)
            spelled: dict[str, bool] = {}
            for kind, check, needed in checks:
                for word in needed:
                    here = spelled.get(word)
                    if here is None:
                        here = spelled[word] = spells(word)
                    if not here:
                        break
                else:
                    for found, detail in check(shared):
                        self.add_clash(kind, found, detail)
        if self.window_partners:  # (`record_cut_apart` finds none without them)
            for node, detail in record_cut_apart(body, self.window_partners):
                self.add_clash("record_cut_apart", node, detail)
        for kind, found, detail in self.module_clashes.get(frame.node, ()):
            self.add_clash(kind, found, detail)
        state = self.states.pop()
        facts = self.facts.functions[frame.index]
        if (state.pads or state.candidates) and not frame.model:
            sinks = Sinks(body, self.imports, self._carries_tokens)
            for pad, carrier in state.pads:
                pad.fate = sinks.fate(carrier)
            calls = state.calls
            for i, node in state.candidates:
                calls[i] = calls[i]._replace(fate=sinks.fate(node))
        for pad, _ in state.pads:
            self.facts.pads.append(pad)
        # Only uses that show a space are noted (most names' show none): sorted after that filter.
        for key, tags in sorted((k, t) for k, t in frame.uses.names.items() if t & _NOTED):
            self._note_uses(state, frame.uses, "name", key, key, tags)
        for key, tags in sorted((k, t) for k, t in frame.uses.fields.items() if t & _NOTED):
            self._note_uses(state, frame.uses, "field", key, f'field "{key}"', tags)
        facts.writes_source = state.writes_source or facts.named_for_source
        facts.writes_packed = state.writes_packed
        facts.reads_source = state.reads_source
        facts.reads_packed = state.reads_packed
        facts.source_ticks = tuple(state.source_ticks)
        facts.none_checked = tuple(sorted(state.none_checked)) if state.none_checked else ()
        facts.refused = tuple(sorted(state.refused)) if state.refused else ()
        write_summary(state, node, facts)
        facts.calls = tuple(state.calls)
        guarded = state.guarded
        if guarded:
            facts.guarded = tuple(sorted(g for g in guarded if g is not None)) + (("",) if None in guarded else ())
        facts.sample_indices = tuple(sorted(state.samples)) if state.samples else ()
        facts.iterates = state.iterates
        facts.layout_params = tuple(sorted(state.layout_params)) if state.layout_params else ()
        facts.padded_params = tuple(sorted(state.padded_params)) if state.padded_params else ()
        facts.true_params = tuple(sorted(state.true_params - state.padded_params)) if state.true_params else ()
        facts.rounds = state.rounds
        facts.guard_fields = tuple(sorted(state.guard_fields)) if state.guard_fields else ()
        facts.reads = tuple(sorted(state.reads)) if state.reads else ()
        names = frame.uses.names
        facts.param_uses = tuple((p.name, names[p.name]) for p in facts.params if names.get(p.name))
        if state.spaces:
            facts.spaces = tuple(sorted((subject, space, line, why) for (subject, space), (line, why) in state.spaces.items()))
        if frame.index:
            mentions = frame.uses.mentions
            facts.unused_params = tuple(p.name for p in facts.params if p.kind not in ("star", "dstar")
                                        and p.name != facts.receiver and not mentions(p.name))
            if state.unit_names:  # (`unit_switches` finds none without a unit's name)
                facts.unit_switches = unit_switches(shared, state.unit_names, {p.name for p in facts.params})
        facts.end_tick = self.next_tick()

    @staticmethod
    def _note_uses(state: FunctionState, uses: Uses, kind: str, key: str, subject: str, tags: int) -> None:
        for tag in (TOK, SEQ, UNIT, CP, PACKED):
            if tags & tag:
                line = uses.lines.get((kind, key, tag), 0)
                state.note_space(subject, space_word(tag), line, uses.hows.get((kind, key, tag)) or _USE_WHY[tag])
