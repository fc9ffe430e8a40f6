"""The facts of a file's unchanged leading functions, reused from its previous extraction.

A pre-commit run extracts the one file that changed, and on a large module
its walk is most of the run (Megatron-LM's 5,700-line ``training.py``: about
half). What the walk finds in a module-level ``def`` (or a method of a
module-level class) depends on the function's text and on what the walk holds when it gets there: the module's
bindings and imports so far, its clock and function count, and what the
readers of the whole module found (the module's own uses of names, the
windows of `records.window_partners`, the function-end checks the file's
text lets run, the module-wide readers' clashes in that function). Where the
text of the file *up to the end of* a ``def`` is the text the previous
extraction saw, and those whole-module inputs are equal, every one of them
is equal too, so the walk would find what it found then: its facts are
taken from the record the previous extraction left (`FunctionMemo`), and the
walk goes on after it. An edit to one function re-walks it and the functions
after it; one that only appends (a comment, a new function at the end) re-walks
nothing before it.

What is recorded of a function, in the cache's form of facts
(`layoutcheck.model.facts.cache_data`): the facts the walk appended while
in it (its `Function` and its nested ones, pads, calls, stores, clashes,
...), what it added to the file's collections (uses of fields, unit atoms,
bucket names, partners, gathered fields), the imports after it (a function
may import), the classes defined in it, and the walk's clock after it. A
function is not recorded when its walk reached outside it (it changed a broadcast recorded before it, or
recorded one whose origin lies outside it), and no function of a file is
when `layoutcheck.model.calls.rewrite_calls` rewrote any call of the file
(a rewrite reads the whole module). Positions need no rebasing: the text
before the function is the same. tests/test_function_reuse.py holds reused
facts to a fresh extraction's.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from layoutcheck.model.facts import FileFacts, cache_data, ensure_calls, from_cache_data

__all__ = ["FunctionMemo", "units"]

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


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (slices compared, halving)."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:  # a[:low] == b[:low], a[:high] != b[:high]
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


class FunctionMemo:
    """The records of one file's module-level functions: those of its previous extraction (``previous``,
    as `entry` wrote them; None for none) to reuse, and this extraction's, for the next one."""

    def __init__(self, previous: Any = None) -> None:
        self.previous = previous if isinstance(previous, dict) else None
        self.old: dict[int, Any] = {}
        self.same = 0
        """Characters at the start of the text that equal the previous extraction's."""
        self.records: dict[int, Any] = {}
        self.pending: list[tuple[int, ast.AST, Any, dict[str, Any]]] = []
        self.text: str | None = None
        self.context: tuple[Any, ...] | None = None
        self.top: set[int] = set()
        self.reused = 0
        self.walked = 0
        self._fresh = 0

    # ------------------------------------------------------------ the walk's side

    def begin(self, extractor: Any, tree: ast.Module, context: tuple[Any, ...]) -> None:
        """The walk of ``tree`` starts: ``context`` holds the whole-module inputs (module docs)."""
        self.text = extractor.source.text
        self.context = context
        self.top = set(map(id, units(tree)))
        previous = self.previous
        if previous is not None and previous.get("context") == context and isinstance(previous.get("text"), str) \
                and isinstance(previous.get("records"), dict):
            self.old = previous["records"]
            self.same = _common_prefix(previous["text"], self.text)

    def eligible(self, extractor: Any, node: ast.AST) -> bool:
        """Is ``node`` a module-level ``def`` or a method of a module-level class, walked from the module's or
        the class's own statements (no branch, loop or ``with`` around it)?"""
        return (id(node) in self.top and len(extractor.frames) == 1 and len(extractor.classes) == extractor.in_class_body <= 1
                and not extractor.scopes and not extractor.rebound and not extractor.in_test
                and not extractor.expecting_error and not extractor.pad_context)

    def _clashes(self, extractor: Any, node: ast.AST) -> tuple[Any, ...]:
        """What the module-wide readers found in ``node`` and the functions in it, by position."""
        first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        out = []
        for function, found in extractor.module_clashes.items():
            line = getattr(function, "lineno", 0)
            if first <= line <= last:
                out.append((line, getattr(function, "col_offset", 0), tuple(
                    (kind, *(getattr(n, a, None) for a in _PLACE), detail) for kind, n, detail in found
                )))
        return tuple(out)

    def replay(self, extractor: Any, node: ast.AST) -> bool:
        """Apply the previous extraction's record of ``node`` if it stands (True), else leave all as it is."""
        record = self.old.get(node.lineno)  # type: ignore[attr-defined]
        if not isinstance(record, dict):
            return False
        try:
            if record["end"] > self.same or record["end"] != extractor.source.end_of_line(node.end_lineno):  # type: ignore[attr-defined]
                return False
            if record["tick"][0] != extractor.tick or record["index"] != len(extractor.facts.functions):
                return False
            if record["clashes"] != self._clashes(extractor, node):
                return False
            part = from_cache_data(record["facts"])
            ensure_calls(part)
            gathering = [(int(index), str(key), tuple(keys)) for index, key, keys in record["gathering"]]
            whole = [(int(index), str(key), str(field)) for index, key, field in record["whole"]]
            classes = [(str(name), tuple(bases)) for name, bases in record["classes"]]
            aliases, modules = record["imports"]
            aliases, modules = tuple((str(k), str(v)) for k, v in aliases), tuple(str(m) for m in modules)
            tick = int(record["tick"][1])
        except (KeyError, TypeError, ValueError, IndexError, EOFError, AttributeError):
            return False  # a record this version did not write: walked again
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
        self.records[node.lineno] = record  # type: ignore[attr-defined]
        self.reused += 1
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
        imports = extractor.imports
        return (tuple(len(getattr(facts, n)) for n in _LISTS), saved, broadcasts, extractor.tick,
                len(extractor.class_facts),
                (len(imports.aliases), len(imports.modules)), len(extractor.frames[0].env),
                len(extractor.states[0].calls))

    def finish(self, extractor: Any, node: ast.AST, started: Any) -> None:
        """``node`` has been walked: merge its additions back, and keep its record if it stands alone."""
        lengths, saved, broadcasts, tick, classes, _, env_size, module_calls = started
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
        # Reached outside itself: not recorded (a later run walks it).
        first, last = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        new = []
        for key, broadcast in extractor.broadcasts.items():
            before = broadcasts.get(key)
            if before is None:
                if not first <= broadcast.span[0] <= last:
                    return
                new.append(broadcast)
            elif before != (broadcast.target, broadcast.target_kind):
                return
        if len(extractor.frames[0].env) != env_size or len(extractor.states[0].calls) != module_calls:
            return
        facts = extractor.facts
        imports = extractor.imports
        parts = {name: getattr(facts, name)[n:] for name, n in zip(_LISTS, lengths)}
        self.pending.append((node.lineno, node, parts, {  # type: ignore[attr-defined]
            "end": extractor.source.end_of_line(last),
            "tick": (tick, extractor.tick),
            "index": lengths[_FUNCTIONS],
            "clashes": self._clashes(extractor, node),
            "gathering": tuple((index, key, tuple(sorted(keys))) for (index, key), keys in added[5].items()),
            "whole": tuple(added[6]),
            "classes": tuple(extractor.class_facts[classes:]),
            "imports": (tuple(imports.aliases.items()), tuple(sorted(imports.modules))),
            "broadcasts": new,
            "added": (tuple(sorted(added[0].items())), tuple(sorted(added[1])), tuple(sorted(added[2])),
                      tuple(sorted(added[3])), tuple(sorted(added[4])), added[7]),
        }))

    def seal(self) -> None:
        """The walk is done: encode the records kept (before the project phase may touch the facts)."""
        for line, _, parts, record in self.pending:
            uses, atoms, buckets, partners, gathered, mentions = record.pop("added")
            part = FileFacts(broadcasts=list(record.pop("broadcasts")), field_uses=uses, unit_atoms=atoms,
                             bucket_names=buckets, partners=partners, gathered=gathered, mentions_source=mentions,
                             **{name: list(items) for name, items in parts.items()})
            record["facts"] = cache_data(part)
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
