"""The facts of a file's unchanged functions, reused from its previous extraction.

A pre-commit run extracts the one file that changed, and on a large module
its walk is most of the run (Megatron-LM's 5,700-line ``training.py``: about
half). What the walk finds in a module-level ``def`` (or a method of a
module-level class) depends on the function's text (its decorators to the
end of its last line) and on what the walk holds when it gets there: the
module's bindings and imports so far, the classes so far, its clock and
function count, and what the readers of the whole module found (the
module's own uses of names, the windows of `records.window_partners`, the
module-wide readers' clashes in that function). Not which function-end
checks the file's text lets run: a check runs on a function only where the
function's own text spells its words, and then the file's does.

A function's record (`FunctionMemo`) is taken again where its text is the
text the previous extraction saw and the walk reaches it holding the same:

* the *chain* (`FunctionMemo.chain`) digests what the walk met before the
  function: the module code between the functions (blank and comment lines
  left out), and the place of each function walked and not recorded (its
  walk may have changed what a later one reads); the imports and the
  classes so far are digested with it (`_entry`);
* the functions bound before it are those bound then, or differ only in
  names neither the function nor the module code before it spells (a
  function added or removed before it: its walk reads a name only where
  it is spelled);
* the whole-module inputs (``context``) are equal, and so are the clashes
  the module-wide readers found in the function, lines counted from its own.

Then the walk would find what it found then, at another place: every line,
tick and function index its facts hold moved by what the edit added or
removed before it (`MOVED` names the fields that hold one: spans, ticks,
``function`` and ``parent``, a `spaces` row's line, a `PadSide` arm's
``if`` line, the line a clash's message names). A record is marked movable
when every place it holds lies inside the function (lines from its first
decorator to its end, ticks of its own walk, the indexes of its own
functions; 0 and -1, none or the module, stay); one that points outside is
replayed only where nothing moved. So an edit inside one function re-walks
it alone; an edit to the module code between functions (but for comments
and blank lines), or an import the edited function adds, re-walks the
functions after it, and a function added or removed re-walks those that
spell its name.

What is recorded of a function, in the cache's form of facts
(`layoutcheck.model.facts.cache_data`, as `marshal` bytes: decoding builds
the facts in place, and the record is written back for the next run): the
facts the walk appended while in it (its `Function` and its nested ones,
pads, calls, stores, clashes, ...), what it added to the file's collections
(uses of fields, unit atoms, bucket names, partners, gathered fields), the
imports after it (a function may import), the classes defined in it, and
the walk's clock before and after it. A function is not recorded when its
walk reached outside it (it changed a broadcast recorded before it,
recorded one whose origin lies outside it, or changed the module's frame),
and no function of a file is when `layoutcheck.model.calls.rewrite_calls`
rewrote any call of the file (a rewrite reads the whole module).
tests/test_function_reuse.py holds reused facts to a fresh extraction's.
"""

from __future__ import annotations

import ast
import dataclasses
import marshal
import re
from collections.abc import Callable
from typing import Any

try:  # `hashlib`'s own blake2b, without `hashlib`, whose import loads OpenSSL (about 4 ms of a one-file run)
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

from layoutcheck.model.facts import (
    Arg,
    Broadcast,
    BucketLiteral,
    Call,
    Clash,
    EntryRead,
    FieldWrite,
    FileFacts,
    Function,
    MaxCall,
    Pad,
    PadSide,
    Record,
    Rewrite,
    Transform,
    Zip,
    cache_data,
    ensure_calls,
    from_cache_data,
)

__all__ = ["MOVED", "FunctionMemo", "units"]

_LISTS = tuple(f.name for f in dataclasses.fields(FileFacts) if f.default_factory is list and f.name != "broadcasts")
"""The facts' lists a function's walk appends to: every list of `FileFacts` (a list added there is recorded
too), but the broadcasts, kept by origin, apart."""
_FUNCTIONS = _LISTS.index("functions")


def units(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """What a record is kept for, in file order: the module's own ``def`` s and its classes' methods (those
    written in the module's or the class's body, not under a branch)."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for statement in tree.body:
        if isinstance(statement, defs):
            out.append(statement)
        elif isinstance(statement, ast.ClassDef):
            out.extend(s for s in statement.body if isinstance(s, defs))
    return out


_PLACE = ("lineno", "col_offset", "end_lineno", "end_col_offset")


# ---------------------------------------------------------------- moving a record's facts

class _Outside(Exception):
    """A record's facts point outside its function (a line, tick or function index of the code around it)."""


class _Move:
    """What a record's facts become at another place: lines ``+ lines``, ticks ``+ ticks``, function indexes
    ``+ indexes``. Built with ``check``, it changes nothing and raises `_Outside` for a value outside the
    function's own lines ``first..last``, ticks ``(tick, end]`` and indexes ``index..index + count - 1``: a
    record whose facts all lie inside can be moved. 0 (no line, no tick; the module's index) and -1 stay."""

    __slots__ = ("check", "count", "end", "first", "index", "indexes", "last", "lines", "tick", "ticks")

    def __init__(self, lines: int, ticks: int, indexes: int, check: tuple[int, ...] | None = None) -> None:
        self.lines, self.ticks, self.indexes = lines, ticks, indexes
        self.check = check is not None
        self.first, self.last, self.tick, self.end, self.index, self.count = check or (0,) * 6

    def _moved(self, value: int, low: int, high: int, by: int) -> int:
        """``value`` moved ``by``; when checking, the same ``value``, which must lie in ``[low, high)``. Zero
        and negative values are no place (none, or counted from the end) and stay."""
        if value <= 0:
            return value
        if self.check:
            if not low <= value < high:
                raise _Outside
            return value
        return value + by

    def line(self, value: int) -> int:
        return self._moved(value, self.first, self.last + 1, self.lines)

    def tick_(self, value: int) -> int:
        return self._moved(value, self.tick + 1, self.end + 1, self.ticks)

    def function(self, value: int) -> int:
        return self._moved(value, self.index, self.index + self.count, self.indexes)

    def span(self, span: Any) -> Any:
        if span is None:
            return None
        line, col, end_line, end_col = span
        return (self.line(line), col, self.line(end_line), end_col)

    def ticks_(self, values: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(map(self.tick_, values))

    def spaces(self, rows: Any) -> Any:
        return tuple((subject, space, self.line(line), why) for subject, space, line, why in rows)

    def calls(self, calls: Any) -> Any:
        if self.check:
            for call in calls:
                self.span(call.span)
                self.tick_(call.tick)
                for arg in call.args:
                    self.span(arg.span)
            return calls
        out = []
        span, tick = self.span, self.tick_
        for call in calls:
            args = call.args
            if any(a.span is not None for a in args):
                args = tuple(a if a.span is None else _new_tuple(Arg, (*a[:_ARG_SPAN], span(a.span), *a[_ARG_SPAN + 1:]))
                             for a in args)
            # Built as `tuple.__new__` builds it (`Call._replace` is a Python function, and a module has thousands).
            out.append(_new_tuple(Call, (call[0], span(call[1]), tick(call[2]), call[3], args, *call[5:])))
        return tuple(out)

    def arms(self, arms: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for arm in arms:  # `12:4:body`: the `if` at line 12, column 4 (`layoutcheck.model.padsides`)
            line, sep, rest = arm.partition(":")
            out.append(f"{self.line(int(line))}{sep}{rest}" if line.isdigit() else arm)
        return tuple(out)

    def detail(self, text: str) -> str:
        if "line " not in text:
            return text
        return _LINE_IN_TEXT.sub(lambda m: str(self.line(int(m.group(0)))), text)


_new_tuple = tuple.__new__
_ARG_SPAN = Arg._fields.index("span")
assert Call._fields[:5] == ("callee", "span", "tick", "layout", "args")

_LINE_IN_TEXT = re.compile(r"(?<=\bline )\d+")
"""A line a clash's message names (``it is combined at line 12``, `layoutcheck.model.clashes`)."""

_Field = Callable[[_Move, Any], Any]
MOVED: dict[type, dict[str, _Field]] = {
    Function: {"span": _Move.span, "parent": _Move.function, "end_tick": _Move.tick_, "source_ticks": _Move.ticks_,
               "spaces": _Move.spaces, "calls": _Move.calls},
    Pad: {"function": _Move.function, "span": _Move.span, "tick": _Move.tick_, "unit_span": _Move.span},
    Broadcast: {"function": _Move.function, "span": _Move.span},
    EntryRead: {"function": _Move.function, "span": _Move.span},
    Rewrite: {"function": _Move.function, "span": _Move.span, "tick": _Move.tick_},
    Record: {"function": _Move.function, "span": _Move.span, "tick": _Move.tick_},
    MaxCall: {"function": _Move.function, "span": _Move.span},
    BucketLiteral: {"span": _Move.span},
    FieldWrite: {"function": _Move.function, "span": _Move.span, "tick": _Move.tick_, "record": _Move.tick_},
    Transform: {"function": _Move.function, "span": _Move.span, "tick": _Move.tick_},
    Zip: {"function": _Move.function, "span": _Move.span},
    Clash: {"function": _Move.function, "span": _Move.span, "detail": _Move.detail},
    PadSide: {"function": _Move.function, "span": _Move.span, "arms": _Move.arms},
}
"""Per class of facts, the fields that hold a place in the file (a line, in a span or in text, a tick, a
function's index) and how each moves (tests/test_function_reuse.py checks that every field of the facts
that may hold one is here)."""


def _move(part: FileFacts, move: _Move) -> None:
    """Move every place ``part`` holds (`MOVED`); with a checking ``move``, only look (`_Outside`)."""
    check = move.check
    for name in (*_LISTS, "broadcasts"):
        for item in getattr(part, name):
            for field, how in MOVED[type(item)].items():
                value = getattr(item, field)
                moved = how(move, value)
                if not check and moved != value:
                    setattr(item, field, moved)


def _step(chain: bytes, *parts: bytes) -> bytes:
    """The chain of what the walk met before a function (`FunctionMemo.chain`) with ``parts`` added."""
    digest = blake2b(chain, digest_size=16)
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.digest()


def _code(gap: str, line: int, kept: set[int]) -> bytes:
    """The module code between two functions, its first line ``line``, as the chain holds it: its blank
    lines and its comment lines left out (adding a function adds blank lines around it; neither changes
    what the walk sees), but for lines in ``kept`` (inside a statement of several lines, where a ``#``
    may start a line of a string)."""
    if not gap.strip():
        return b""
    out = [text for i, text in enumerate(gap.split("\n"), line)
           if text.strip() and (i in kept or not text.lstrip().startswith("#"))]
    return "\n".join(out).encode("utf-8", "surrogatepass")


def _inside_statements(tree: ast.Module) -> set[int]:
    """The lines after the first of each statement of several lines the walk reaches between functions (the
    module's and its classes' own, a class's header alone): where a line starting with ``#`` may be
    inside a string."""
    out: set[int] = set()
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            inner = statement.body
            out.update(range(statement.lineno + 1, inner[0].lineno))
            for s in inner:
                if not isinstance(s, defs) and s.end_lineno is not None and s.end_lineno > s.lineno:
                    out.update(range(s.lineno + 1, s.end_lineno + 1))
        elif not isinstance(statement, defs) and statement.end_lineno is not None \
                and statement.end_lineno > statement.lineno:
            out.update(range(statement.lineno + 1, statement.end_lineno + 1))
    return out


class FunctionMemo:
    """The records of one file's module-level functions: those of its previous extraction (``previous``,
    as `entry` wrote them; None for none) to reuse, and this extraction's, for the next one."""

    def __init__(self, previous: Any = None) -> None:
        self.previous = previous if isinstance(previous, dict) else None
        self.old: dict[str, list[Any]] = {}
        """The previous extraction's records by their function's text (decorators to the end of its last line)."""
        self.records: dict[int, Any] = {}
        self.pending: list[tuple[int, ast.AST, Any, dict[str, Any]]] = []
        self.text: str | None = None
        self.context: tuple[Any, ...] | None = None
        self.top: set[int] = set()
        self.chain = b""
        """What the walk met before the function it is at: the module's code between the functions (blank and
        comment lines left out, `_code`), and for each function not recorded (or whose decorators or defaults
        bind a name) its place: its walk may have changed what later ones read (`_leave`). The names the
        other functions bind are kept apart (`names`)."""
        self.cursor = 0
        """The offset where the module code after the last function met starts."""
        self.line = 1
        """The line it starts on."""
        self.gaps: list[str] = []
        """The module code between the functions met so far, as written."""
        self.names: list[str] = []
        """The names of the functions met so far whose walk kept to itself (`_leave`), in order."""
        self.kept: set[int] = set()
        """Lines a comment is not left out of the chain on (`_inside_statements`)."""
        self.here: tuple[int, int, int, bytes, tuple[str, ...]] | None = None
        """The function being walked: its text's offsets, its first line, what its walk starts from (`_entry`)."""
        self._state: Any = None
        self._state_text = b""
        self.reused = 0
        self.moved = 0
        """Of those reused, the ones replayed at another place (lines, ticks or function indexes moved)."""
        self.walked = 0
        self._fresh = 0

    # ------------------------------------------------------------ the walk's side

    def begin(self, extractor: Any, tree: ast.Module, context: tuple[Any, ...]) -> None:
        """The walk of ``tree`` starts: ``context`` holds the whole-module inputs (module docs)."""
        self.text = extractor.source.text
        self.context = context
        self.top = set(map(id, units(tree)))
        self.kept = _inside_statements(tree)
        previous = self.previous
        if previous is not None and previous.get("context") == context and isinstance(previous.get("text"), str) \
                and isinstance(previous.get("records"), dict):
            text = previous["text"]
            for record in previous["records"].values():
                try:
                    self.old.setdefault(text[record["start"]:record["end"]], []).append(record)
                except (KeyError, TypeError):
                    continue  # a record this version did not write

    def eligible(self, extractor: Any, node: ast.AST) -> bool:
        """Is ``node`` a module-level ``def`` or a method of a module-level class, walked from the module's or
        the class's own statements (no branch, loop or ``with`` around it)?"""
        return (id(node) in self.top and len(extractor.frames) == 1 and len(extractor.classes) == extractor.in_class_body <= 1
                and not extractor.scopes and not extractor.rebound and not extractor.in_test
                and not extractor.expecting_error and not extractor.pad_context)

    @staticmethod
    def _clashes(extractor: Any, node: ast.AST) -> tuple[Any, ...]:
        """What the module-wide readers found in ``node`` and the functions in it, lines counted from its own."""
        first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        out = []
        for function, found in extractor.module_clashes.items():
            line = getattr(function, "lineno", 0)
            if first <= line <= last:
                places = []
                for kind, n, detail in found:
                    at = [getattr(n, a, None) for a in _PLACE]
                    for i in (0, 2):
                        if at[i] is not None:
                            at[i] -= first
                    places.append((kind, *at, detail))
                out.append((line - first, getattr(function, "col_offset", 0), tuple(places)))
        return tuple(out)

    def _entry(self, extractor: Any, chain: bytes) -> bytes:
        """What a function's walk starts from, beside its own text: the chain, the imports so far and the
        classes defined so far (digested again only when they changed)."""
        imports = extractor.imports
        state = (tuple(imports.aliases.items()), tuple(sorted(imports.modules)), tuple(extractor.class_facts))
        if state != self._state:
            self._state = state
            self._state_text = repr(state).encode("utf-8", "surrogatepass")
        return _step(chain, self._state_text)

    def _arrive(self, extractor: Any, node: Any) -> tuple[int, int, int, bytes, tuple[str, ...]]:
        """The walk is at ``node``: add the module code since the last function to the chain."""
        source = extractor.source
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        start, end = source.end_of_line(first - 1), source.end_of_line(node.end_lineno)
        text = source.text
        if start > self.cursor:
            gap = text[self.cursor:start]
            code = _code(gap, self.line, self.kept)
            if code:  # none between two functions: as if they were next to each other
                self.gaps.append(gap)
                self.chain = _step(self.chain, b"code", code)
        self.cursor = max(self.cursor, end)
        self.line = max(self.line, node.end_lineno + 1)
        here = self.here = (start, end, first, self._entry(extractor, self.chain), tuple(self.names))
        return here

    def _leave(self, extractor: Any, node: Any, recorded: bool) -> None:
        """The walk is past ``node``: its name is bound (`names`). One not recorded may have changed what later
        functions read, and so may one whose decorators or defaults bind a name (``:=``, walked in the
        module's frame): the place of either enters the chain (a later function moved is then walked again)."""
        if recorded and not _header_binds(node):
            self.names.append(node.name)
        else:
            mark = repr((node.name, node.lineno, extractor.tick, len(extractor.facts.functions)))
            self.chain = _step(self.chain, b"def", mark.encode("utf-8", "surrogatepass"))
        self.here = None

    def _names_differ(self, record: dict[str, Any], text: str, names: tuple[str, ...]) -> bool:
        """Do the functions bound before this one (`names`) differ from the record's in a name that this
        function's text, or the module code before it, spells? A function added or removed before it binds
        a name the walk reads only where it is spelled."""
        before = record["names"]
        if before == names:
            return False
        counts: dict[str, int] = {}
        for name in before:
            counts[name] = counts.get(name, 0) + 1
        for name in names:
            counts[name] = counts.get(name, 0) - 1
        changed = [name for name, count in counts.items() if count]
        return any(name in text or any(name in gap for gap in self.gaps) for name in changed)

    def replay(self, extractor: Any, node: ast.AST) -> bool:
        """Apply the previous extraction's record of ``node`` if it stands (True), else leave all as it is."""
        start, end, _, entry, names = self._arrive(extractor, node)
        text = extractor.source.text[start:end]
        candidates = self.old.get(text)
        if not candidates:
            return False
        clashes = None
        for record in candidates:
            try:
                if record["entry"] != entry:
                    continue
                if clashes is None:
                    clashes = self._clashes(extractor, node)
                if record["clashes"] != clashes or self._names_differ(record, text, names):
                    continue
                if self._apply(extractor, node, record, start, end):
                    self._leave(extractor, node, True)
                    return True
            except (KeyError, TypeError, ValueError, IndexError, EOFError, AttributeError):
                continue  # a record this version did not write: walked again
        return False

    def _apply(self, extractor: Any, node: Any, record: dict[str, Any], start: int, end: int) -> bool:
        line, t0, t1, i0 = record["base"]
        lines, ticks, indexes = node.lineno - line, extractor.tick - t0, len(extractor.facts.functions) - i0
        moved = bool(lines or ticks or indexes)
        if moved and not record["rebase"]:
            return False
        part = from_cache_data(marshal.loads(record["facts"]))  # a copy: decoding builds the facts in place
        ensure_calls(part)
        gathering = [(int(index), str(key), tuple(keys)) for index, key, keys in record["gathering"]]
        whole = [(int(index), str(key), str(field)) for index, key, field in record["whole"]]
        classes = [(str(name), tuple(bases)) for name, bases in record["classes"]]
        aliases, modules = record["imports"]
        aliases, modules = tuple((str(k), str(v)) for k, v in aliases), tuple(str(m) for m in modules)
        tick = int(t1) + ticks
        if moved:
            move = _Move(lines, ticks, indexes)
            _move(part, move)
            gathering = [(move.function(index), key, keys) for index, key, keys in gathering]
            whole = [(move.function(index), key, field) for index, key, field in whole]
        facts = extractor.facts
        for name in _LISTS:
            getattr(facts, name).extend(getattr(part, name))
        for broadcast in part.broadcasts:
            self._fresh += 1
            extractor.broadcasts[("reused", self._fresh)] = broadcast
        uses = extractor.field_uses
        for key, tags in part.field_uses:
            uses[key] = uses.get(key, 0) | tags
        extractor.unit_atoms.update(part.unit_atoms)
        extractor.bucket_names.update(part.bucket_names)
        extractor.partners.update(part.partners)
        extractor.gathered.update(part.gathered)
        extractor.mentions_source = extractor.mentions_source or part.mentions_source
        for index, key, keys in gathering:
            extractor.gathering.setdefault((index, key), set()).update(keys)
        extractor.whole_copies.extend(whole)
        extractor.class_facts.extend(classes)
        extractor.imports.restore(aliases, modules)
        extractor.tick = tick
        self.records[node.lineno] = {**record, "start": start, "end": end}
        self.reused += 1
        self.moved += moved
        return True

    def start(self, extractor: Any, node: ast.AST) -> Any:
        """``node`` is about to be walked: note where the facts stand, and collect its additions apart."""
        facts = extractor.facts
        saved = (extractor.field_uses, extractor.unit_atoms, extractor.bucket_names, extractor.partners,
                 extractor.gathered, extractor.gathering, extractor.whole_copies, extractor.mentions_source)
        extractor.field_uses, extractor.unit_atoms, extractor.bucket_names, extractor.partners = {}, set(), set(), set()
        extractor.gathered, extractor.gathering, extractor.whole_copies = set(), {}, []
        extractor.mentions_source = False
        broadcasts = {k: (b.target, b.target_kind) for k, b in extractor.broadcasts.items()}
        module = extractor.frames[0]
        return (tuple(len(getattr(facts, n)) for n in _LISTS), saved, broadcasts, extractor.tick,
                len(extractor.class_facts), self.here, _module_state(module),
                len(extractor.states[0].calls))

    def finish(self, extractor: Any, node: ast.AST, started: Any) -> None:
        """``node`` has been walked: merge its additions back, and keep its record if it stands alone."""
        lengths, saved, broadcasts, tick, classes, here, module_state, module_calls = started
        added = (extractor.field_uses, extractor.unit_atoms, extractor.bucket_names, extractor.partners,
                 extractor.gathered, extractor.gathering, extractor.whole_copies, extractor.mentions_source)
        field_uses, unit_atoms, bucket_names, partners, gathered, gathering, whole, mentions = saved
        for key, tags in added[0].items():
            field_uses[key] = field_uses.get(key, 0) | tags
        unit_atoms |= added[1]
        bucket_names |= added[2]
        partners |= added[3]
        gathered |= added[4]
        for key, keys in added[5].items():
            gathering.setdefault(key, set()).update(keys)
        whole.extend(added[6])
        extractor.field_uses, extractor.unit_atoms, extractor.bucket_names, extractor.partners = (
            field_uses, unit_atoms, bucket_names, partners)
        extractor.gathered, extractor.gathering, extractor.whole_copies = gathered, gathering, whole
        extractor.mentions_source = mentions or added[7]
        self.walked += 1
        record = self._record(extractor, node, lengths, broadcasts, tick, classes, here, module_state,
                              module_calls, added)
        self._leave(extractor, node, record is not None)
        if record is not None:
            facts = extractor.facts
            parts = {name: getattr(facts, name)[n:] for name, n in zip(_LISTS, lengths)}
            self.pending.append((node.lineno, node, parts, record))  # type: ignore[attr-defined]

    def _record(self, extractor: Any, node: Any, lengths: tuple[int, ...], broadcasts: dict[Any, Any], tick: int,
                classes: int, here: Any, module_state: Any, module_calls: int, added: Any) -> dict[str, Any] | None:
        """The record of ``node`` 's walk; None when it reached outside itself (a later run walks it)."""
        first, last = node.lineno, node.end_lineno
        new = []
        for key, broadcast in extractor.broadcasts.items():
            before = broadcasts.get(key)
            if before is None:
                if not first <= broadcast.span[0] <= last:
                    return None
                new.append(broadcast)
            elif before != (broadcast.target, broadcast.target_kind):
                return None
        if _module_state(extractor.frames[0]) != module_state or len(extractor.states[0].calls) != module_calls:
            return None
        if here is None:
            return None
        start, end, top, entry, names = here
        imports = extractor.imports
        index = lengths[_FUNCTIONS]
        return {
            "start": start, "end": end,
            "base": (first, tick, extractor.tick, index),
            "bounds": (top, last, tick, extractor.tick, index, len(extractor.facts.functions) - index),
            "entry": entry,
            "names": names,
            "clashes": self._clashes(extractor, node),
            "gathering": tuple((index, key, tuple(sorted(keys))) for (index, key), keys in added[5].items()),
            "whole": tuple(added[6]),
            "classes": tuple(extractor.class_facts[classes:]),
            "imports": (tuple(imports.aliases.items()), tuple(sorted(imports.modules))),
            "broadcasts": new,
            "added": (tuple(sorted(added[0].items())), tuple(sorted(added[1])), tuple(sorted(added[2])),
                      tuple(sorted(added[3])), tuple(sorted(added[4])), added[7]),
        }

    def seal(self) -> None:
        """The walk is done: encode the records kept (before the project phase may touch the facts), each
        marked movable when every place its facts hold lies inside its function (`_Move`)."""
        for line, _, parts, record in self.pending:
            uses, atoms, buckets, partners, gathered, mentions = record.pop("added")
            part = FileFacts(broadcasts=list(record.pop("broadcasts")), field_uses=uses, unit_atoms=atoms,
                             bucket_names=buckets, partners=partners, gathered=gathered, mentions_source=mentions,
                             **{name: list(items) for name, items in parts.items()})
            check = _Move(0, 0, 0, record.pop("bounds"))
            try:
                _move(part, check)
                for index, _, _ in (*record["gathering"], *record["whole"]):
                    check.function(index)
                record["rebase"] = True
            except (_Outside, ValueError):
                record["rebase"] = False
            record["facts"] = marshal.dumps(cache_data(part))
            self.records[line] = record
        self.pending = []

    def abandon(self) -> None:
        """The walk failed part way (it is done again elsewhere): keep nothing of it."""
        self.text = self.context = None
        self.pending, self.records = [], {}

    # ------------------------------------------------------------ the cache's side

    def entry(self) -> dict[str, Any] | None:
        """What the next extraction of the file reads (`layoutcheck.lint.cache.ResultCache.put_memo`);
        None when this one did not walk the file (nothing to keep)."""
        if self.text is None or self.context is None:
            return None
        return {"text": self.text, "context": self.context, "records": self.records}


def _header_binds(node: Any) -> bool:
    """Do ``node`` 's decorators or defaults bind a name (``:=``)? They are walked in the enclosing frame."""
    args = node.args
    return any(isinstance(n, ast.NamedExpr)
               for expr in (*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d is not None))
               for n in ast.walk(expr))


def _module_state(frame: Any) -> tuple[Any, ...]:
    """What a function's walk must leave as it found of the module's frame, for its record to stand alone:
    the names bound (each to the same value) and the module's other per-name state."""
    return (len(frame.env), len(frame.exprs), len(frame.units), len(frame.fresh), frame.layout, len(frame.data))
