"""The project phase's answer to "what is this?": the space of fields, parameters and values.

A file knows what it computes (``t.numel()`` is a sample's length, a round-up
is a padded length) and how it uses each name and field; it cannot know what
a field read from a record (``batch["x"]``) or a parameter holds: other files
write the field and call the function. `Spaces` joins every file's facts:

* a field's space is what is stored into it (each entry rounded up: per-sample
  padded lengths `P`; sizes of samples: true lengths `T`; tensors: per-sample
  tensors; a cumulative sum: the packed description) and what its uses show,
  followed through fields read to write others;
* a parameter's space is what its uses in the body show plus what every call
  site passes (`Spaces.param`), and whether it is a *slot* for a padded length
  (used as one, or passed on to another function's padded-length parameter:
  `Spaces.padded_slots`) or for a true length (`Spaces.true_slots`);
* a value's space (`Spaces.resolve`) is its own tags plus those of the fields
  and parameters it derives from. Reading per-sample padded lengths gives the
  owner's value (``SRC``): code that derives geometry from it is a consumer.

Names are never looked up here: two places meet through a field name or a
call, which a consistent rename keeps. `Spaces.why` says which line decided a
field's space, for `layoutcheck model` and for messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any

from layoutcheck.model.facts import Arg, Call, element_call
from layoutcheck.model.vocabulary import Tag

if TYPE_CHECKING:
    from layoutcheck.model.facts import FunctionRef
    from layoutcheck.model.graph import ProjectGraph

__all__ = ["FIELD_TAGS", "Spaces"]

SEQ, TOK, SRC, SRCLIST = int(Tag.SEQ), int(Tag.TOK), int(Tag.SRC), int(Tag.SRCLIST)
MAX, PAD, UNIT, BCAST = int(Tag.MAX), int(Tag.PAD), int(Tag.UNIT), int(Tag.BCAST)
PACKED, STREAM, SAMPLE, CP = int(Tag.PACKED), int(Tag.STREAM), int(Tag.SAMPLE), int(Tag.CP)
SIDES = int(Tag.LEFT) | int(Tag.RIGHT)
CONFIG = int(Tag.CONFIG)

FIELD_TAGS = SEQ | TOK | PAD | PACKED | STREAM | SRC | SRCLIST
"""What a field can be: lengths, tensors, padded lengths (``PAD``: per-sample ``P``), the packed
description; ``SRC``/``SRCLIST`` for a configured source."""
_COMPUTED = SEQ | TOK | PAD | PACKED | STREAM | SAMPLE | MAX | BCAST
_DEPTH = 4
_ROUNDS = 4


class Spaces:
    """Fields, parameters and values of one project, resolved (see the module docs)."""

    fields: dict[str, int]
    """What each field holds, as `Tag` flags."""
    why: dict[tuple[str, int], tuple[FunctionRef | None, int, str]]
    """``(field, tag) -> (function, line, what)``: the first store or use that showed it."""
    fed: dict[str, str]
    """Fields passed where a function takes padded lengths (``padded``): consumer evidence."""
    settings: set[str]
    """Fields the project stores a setting into (`Tag.CONFIG`: ``meta_info["prompt_length"] =
    config.prompt_length``): what is read from one may be that setting, not a measured length."""

    def __init__(self, project: ProjectGraph) -> None:
        self.project = project
        self._params: dict[tuple[FunctionRef, str], int] = {}
        self._param_fields: dict[tuple[FunctionRef, str], frozenset[str]] = {}
        self._slots: dict[FunctionRef, tuple[frozenset[str], frozenset[str]]] | None = None
        self._list_slots: dict[tuple[FunctionRef, str], str | None] = {}
        # `fields`, `why`, `fed` and `settings` are computed on first use (`__getattr__`): a one-file run whose
        # rules ask only about slots (`padded_slots`, `list_slot`) never walks every store of the
        # project. The slots do not depend on them, and every question that reads the memo of
        # values (`returned`, `param`, `resolve`) computes them first, so each answer is the one an
        # eager computation gives.

    def __getattr__(self, name: str) -> Any:
        if name not in ("fields", "why", "fed", "settings"):
            raise AttributeError(name)
        self.fields, self.why, self.fed, self.settings = {}, {}, {}, set()
        try:
            self._compute_fields()
            self._fields_from_slots()
        except BaseException:
            del self.fields, self.why, self.fed, self.settings  # never half computed: the next question tries again
            raise
        return self.__dict__[name]

    # ------------------------------------------------------------ fields

    def _note(self, key: str, tag: int, ref: FunctionRef | None, line: int, what: str) -> None:
        if not self.fields.get(key, 0) & tag:
            self.fields[key] = self.fields.get(key, 0) | tag
            self.why.setdefault((key, tag), (ref, line, what))

    def _compute_fields(self) -> None:
        project = self.project
        vocab = project.vocab
        for key in vocab.sources:
            self._note(key, PAD | SRCLIST, None, 0, "configured in `sources`")
        for key in vocab.packed:
            self._note(key, PACKED, None, 0, "configured in `packed-sources`")
        writes = []
        for i, file in enumerate(project.files):
            if file.is_test:
                continue
            for key, tags in file.facts.field_uses:
                for tag, what in ((TOK, "its entries are sized or concatenated"),
                                  (SEQ, "its entries are used as lengths")):
                    if tags & tag:
                        self._note(key, tag, None, 0, f"{what} ({file.display})")
            for write in file.facts.field_writes:
                writes.append(((i, write.function), write))
                if write.tags & CONFIG:
                    self.settings.add(write.key)
        for _ in range(_ROUNDS):
            before = dict(self.fields)
            copies = []
            for ref, write in writes:
                tags = write.tags | (self.returned(ref, write.calls) if write.calls else 0)
                if not tags & _COMPUTED and not write.calls and len(write.fields) == 1:
                    copies.append((ref, write))
                    # A field copied or converted from another (`d["x"] = torch.tensor(e["y"])`) holds
                    # what the other holds; a value computed from one (its sizes) is something else.
                    for field in write.fields:
                        if field != write.key:
                            tags |= self.fields.get(field, 0) & (SEQ | TOK | PACKED)
                line = write.span[0]
                # Whether another function reads the field is asked last, of the few stores it can
                # decide: it is the one question here that needs other files' calls (`readers_of`).
                if tags & PAD and (write.per_sample or tags & BCAST) and not tags & (SRC | PACKED | STREAM) and (
                    not write.fresh or project.readers_of(write.key) - {ref}
                ):
                    self._note(write.key, PAD, ref, line, f"each sample's entry is rounded up: `{write.text}`")
                if tags & PACKED and not tags & (TOK | SAMPLE):
                    self._note(write.key, PACKED, ref, line, f"stores cumulative lengths: `{write.text}`")
                if tags & SEQ and not tags & (PAD | MAX | PACKED | TOK | SAMPLE | STREAM):
                    self._note(write.key, SEQ, ref, line, f"stores lengths: `{write.text}`")
                if tags & (TOK | SAMPLE) and not tags & (SEQ | PAD) and write.per_sample:
                    self._note(write.key, TOK, ref, line, f"stores per-sample tensors: `{write.text}`")
            if self.fields == before:
                break
            # Only a copy's tags depend on what the fields hold: every other store notes the same
            # again next round, which changes nothing (`_note` sets a bit once), so the next rounds
            # read the copies alone, in the same order.
            writes = copies

    def _fields_from_slots(self) -> None:
        """A field passed where a function takes true lengths holds true lengths (``SEQ``)."""
        project = self.project
        # Only calls that reach a function with slots, or one passing a list's entries to such a
        # function (`list_slot`), can say anything: they are spelt with those functions' names
        # (`target_names`), and files calling none of them keep their calls undecoded.
        names = project.target_names(self.slots)
        names |= project.target_names(
            ref for ref, function in project.functions_with_calls(names, tests=True)
            if any(c.callee.rsplit(".", 1)[-1] in names for c in function.calls)
        )

        def wanted(call: Call) -> bool:
            return call.callee.rsplit(".", 1)[-1] in names and any(a.fields for a in call.args)

        for ref, _ in project.functions_with_calls(names):
            for call, target, bound in project.bound_calls(ref, wanted):
                callee = project.signature(target)
                for param, arg in bound.items():
                    if not arg.fields:
                        continue
                    kind = "true" if param in self.true_slots(target) else (
                        "padded" if param in self.padded_slots(target) else self.list_slot(target, param))
                    for key in arg.fields:
                        if kind == "true":
                            self._note(key, SEQ, ref, call.span[0],
                                       f"passed as `{param}` of `{callee.qualname}`, which takes a true length")
                        elif kind == "padded":
                            self.fed.setdefault(key, f"`{callee.qualname}`")

    def field(self, key: str) -> int:
        """What field ``key`` holds, as `Tag` flags (0: nothing known)."""
        return self.fields.get(key, 0)

    def is_padded_field(self, key: str) -> bool:
        """Does ``key`` hold each sample's padded length (written so by an owner, or configured)?

        Only a configured source or a field some file stores into can (`_compute_fields` notes
        ``PAD`` of nothing else): another key is answered without computing every field of the
        project, which a one-file run whose file reads no such field then never does."""
        if "fields" not in self.__dict__ and key not in self._pad_candidates:
            return False
        return bool(self.fields.get(key, 0) & PAD)

    def may_be_padded(self, key: str) -> bool:
        """False when ``key`` is surely no padded field (`is_padded_field`), from the facts alone."""
        return key in self._pad_candidates

    @cached_property
    def _pad_candidates(self) -> frozenset[str]:
        """The fields `_compute_fields` may note ``PAD`` of: the configured sources, and the keys of the
        stores that can be noted so. Such a store is per sample or a broadcast, of a padded length or
        of a call's result (`returned` may give ``PAD``), and not of the owner's value, a packed
        description or a stream (`returned` and the copies only add tags, so a store whose own tags
        miss these conditions misses them whatever the project holds). Tests' stores count too: a
        superset is as exact."""
        keys = set(self.project.vocab.sources)
        for file in self.project.files:
            for write in file.facts.field_writes:
                tags = write.tags
                if ((write.per_sample or tags & BCAST) and (tags & PAD or write.calls)
                        and not tags & (SRC | PACKED | STREAM)):
                    keys.add(write.key)
        return frozenset(keys)

    def read(self, fields: Iterable[str]) -> int:
        """What reading ``fields`` gives: per-sample padded lengths are the owner's value (``SRC``)."""
        out = 0
        for key in fields:
            tags = self.fields.get(key, 0)
            if tags & PAD:
                out |= SRC
            out |= tags & (SEQ | TOK | PACKED | STREAM | SRCLIST)
            if tags & SRC:
                out |= SRC
            if key in self.settings:
                out |= CONFIG  # the project stores a setting under this name: no length measured from a sample
        if out & SRC:
            out &= ~SEQ  # a padded length read from its owner's field is no true length
        return out

    # ------------------------------------------------------------ values and parameters

    def returned(self, ref: FunctionRef, calls: Iterable[str], depth: int = 0) -> int:
        """What the project's functions named in ``calls`` return, called from ``ref``: a round-up
        helper's result is a padded length; otherwise what their ``return`` s compute, through the
        functions whose results they return in turn."""
        self.fields  # noqa: B018 - computed before anything enters the memo (see `__init__`)
        out = 0
        for callee in calls:
            if callee.startswith("*"):
                out |= self._element(ref, callee, depth)
                continue
            key = (ref, "call:" + callee)
            found = self._params.get(key)
            if found is None:
                found = 0
                self._params[key] = found  # a cycle returns what is known so far
                target = self.project.resolve_callee(ref, callee)
                if target is not None:
                    function = self.project.signature(target)
                    if function.rounds is not None:
                        found |= PAD
                    found |= function.returns_tags & (SEQ | PAD | MAX | PACKED | STREAM | SIDES)
                    if function.returns_calls and depth < _DEPTH:
                        found |= self.returned(target, function.returns_calls, depth + 1) & SIDES
                self._params[key] = found
            out |= found
        return out

    def _element(self, ref: FunctionRef, callee: str, depth: int) -> int:
        """What an element of the tuple a project function returns holds (``_, x = f()``, ``f()[1]``):
        the callee's summary at that position (`Function.returns_elements`), with what this caller
        passes for the parameters the element derives from, where it has one; else
        only the side its elements share, or it is no side."""
        index, name = element_call(callee)
        target = self.project.resolve_callee(ref, name)
        if target is None:
            return 0
        elements = self.project.signature(target).returns_elements
        if index is None or index < 0 or index >= len(elements):
            return self.returned(ref, (name,), depth) & SIDES
        key = (ref, "call:" + callee)
        found = self._params.get(key)
        if found is None:
            self._params[key] = 0  # a cycle returns what is known so far
            tags, calls, params = elements[index]
            found = tags & (SEQ | PAD | MAX | PACKED | STREAM | SIDES)
            if calls and depth < _DEPTH:
                found |= self.returned(target, calls, depth + 1) & SIDES
            if params and depth < _DEPTH:
                # An element computed from the callee's parameters: what this caller passes for them.
                for _, reached, bound in self.project.bound_calls(ref):
                    if reached == target:
                        for param in params:
                            arg = bound.get(param)
                            if arg is not None:
                                found |= self.arg(arg, ref, depth + 1) & (SEQ | PAD | MAX | PACKED | STREAM | SIDES)
            self._params[key] = found
        return found

    def resolve(self, tags: int, fields: Iterable[str], params: Iterable[str], ref: FunctionRef,
                depth: int = 0, calls: Iterable[str] = ()) -> int:
        """``tags`` plus what the fields, parameters and calls a value derives from hold."""
        out = tags | self.read(fields) | self.returned(ref, calls)
        for name in params:
            out |= self.param(ref, name, depth + 1)
        if out & SRC and not tags & SEQ:
            out &= ~SEQ
        return out

    def arg(self, arg: Arg, caller: FunctionRef, depth: int = 0) -> int:
        return self.resolve(arg.tags, arg.fields, arg.params, caller, depth, arg.calls)

    def param(self, ref: FunctionRef, name: str, depth: int = 0) -> int:
        """What parameter ``name`` of ``ref`` holds: its uses in the body, and every call's argument."""
        self.fields  # noqa: B018 - computed before anything enters the memo (see `__init__`)
        key = (ref, name)
        found = self._params.get(key)
        if found is not None:
            return found
        function = self.project.signature(ref)
        own = dict(function.param_uses).get(name, 0) & (SEQ | TOK | UNIT | CP | PACKED)
        if depth > _DEPTH:
            return own
        self._params[key] = own  # a cycle reads what is known so far
        out = own
        for caller, call in self.project.callers_of(ref):
            arg = self.project.binding(caller, call, ref).get(name)
            if arg is not None:
                out |= self.arg(arg, caller, depth + 1) & ~(BCAST | MAX)
        self._params[key] = out
        return out

    def param_fields(self, ref: FunctionRef, name: str, depth: int = 0) -> frozenset[str]:
        """The fields the callers of ``ref`` read what they pass as parameter ``name``."""
        key = (ref, "fields:" + name)
        if key in self._param_fields:
            return self._param_fields[key]
        self._param_fields[key] = frozenset()
        found: set[str] = set()
        if depth <= _DEPTH:
            for caller, call in self.project.callers_of(ref):
                arg = self.project.binding(caller, call, ref).get(name)
                if arg is not None:
                    found |= set(arg.fields)
                    for outer in arg.params:
                        found |= self.param_fields(caller, outer, depth + 1)
        self._param_fields[key] = frozenset(found)
        return self._param_fields[key]

    # ------------------------------------------------------------ slots: what a parameter is for

    def _compute_slots(self) -> dict[FunctionRef, tuple[frozenset[str], frozenset[str]]]:
        """Per function: the parameters that take a padded length and those that take a true length,
        from their use in the body and, through calls, from the parameters they are passed on to."""
        project = self.project
        padded: dict[FunctionRef, set[str]] = {}
        true: dict[FunctionRef, set[str]] = {}
        for ref, function in project.defs():
            if function.padded_params:
                padded[ref] = set(function.padded_params)
            if function.true_params:
                true[ref] = set(function.true_params)
        # A pass can add a slot only towards a function that has slots or gets them through its
        # own passes: those functions, found back from the ones with slots by the calls that pass a
        # parameter on (spelt with their names: `target_names`), bound the calls to read. The rounds
        # below then run on the same passes in the same order as over every call.
        reach = set(padded) | set(true)
        while True:
            names = project.target_names(reach)
            found = set()
            for ref, call, target in self._passing_calls(names):
                if ref not in reach and target in reach:
                    found.add(ref)
            if not found:
                break
            reach |= found
        passes: list[tuple[FunctionRef, str, FunctionRef, str]] = []
        for ref, call, target in self._passing_calls(project.target_names(reach)):
            if target not in reach:
                continue
            for param, arg in project.binding(ref, call, target).items():
                if arg.bare and arg.params:
                    passes.append((ref, arg.params[0], target, param))
        for _ in range(_ROUNDS):
            changed = False
            for ref, mine, target, theirs in passes:
                for table in (padded, true):
                    if theirs in table.get(target, ()) and mine not in table.get(ref, ()):
                        table.setdefault(ref, set()).add(mine)
                        changed = True
            if not changed:
                break
        refs = set(padded) | set(true)
        return {ref: (frozenset(padded.get(ref, ())), frozenset(true.get(ref, set()) - padded.get(ref, set())))
                for ref in refs}

    def _passing_calls(self, names: set[str]) -> Iterator[tuple[FunctionRef, Call, FunctionRef]]:
        """``(caller, call, def reached)`` for the calls spelt with one of ``names`` that pass a
        parameter of their caller on as it is (``f(n)`` in ``def g(n)``), in the project's order."""
        project = self.project

        def wanted(call: Call) -> bool:
            return call.callee.rsplit(".", 1)[-1] in names and any(a.bare and a.params for a in call.args)

        for ref, function in project.functions_with_calls(names):
            if not function.params:
                continue
            for call in function.calls:
                if wanted(call):
                    target = project.resolve(ref, call)
                    if target is not None:
                        yield ref, call, target

    @property
    def slots(self) -> dict[FunctionRef, tuple[frozenset[str], frozenset[str]]]:
        if self._slots is None:
            self._slots = self._compute_slots()
        return self._slots

    @cached_property
    def _slot_names(self) -> set[str]:
        """The last names a call reaching a ``def`` with slots is spelt with (`ProjectGraph.target_names`)."""
        return self.project.target_names(self.slots)

    def padded_slots(self, ref: FunctionRef) -> frozenset[str]:
        """Parameters of ``ref`` that take one sample's padded length `P`."""
        return self.slots.get(ref, (frozenset(), frozenset()))[0]

    def true_slots(self, ref: FunctionRef) -> frozenset[str]:
        """Parameters of ``ref`` that take a true length (the packed layout's length)."""
        return self.slots.get(ref, (frozenset(), frozenset()))[1]

    def list_slot(self, ref: FunctionRef, name: str) -> str | None:
        """``padded`` / ``true`` when ``ref`` passes entries of list parameter ``name`` to a padded or
        true-length slot (``helper(..., max_seq_lens[i])``), else None."""
        key = (ref, name)
        if key not in self._list_slots:  # asked once per call site passing a field: the answer is the def's
            self._list_slots[key] = self._list_slot(ref, name)
        return self._list_slots[key]

    def _list_slot(self, ref: FunctionRef, name: str) -> str | None:
        # Only a call passing the list's entries (``max_seq_lens[i]``: the parameter in an argument that is
        # not the parameter itself) to a ``def`` with slots can answer, and such a call is spelt with
        # one of their names (`target_names`): the others are not resolved.
        names = self._slot_names

        def wanted(call: Call) -> bool:
            return call.callee.rsplit(".", 1)[-1] in names and any(
                name in arg.params and not arg.bare for arg in call.args)

        for _, target, bound in self.project.bound_calls(ref, wanted):
            for param, arg in bound.items():
                if name in arg.params and not arg.bare:
                    if param in self.padded_slots(target):
                        return "padded"
                    if param in self.true_slots(target):
                        return "true"
        return None

    def call_fields(self, call: Call) -> frozenset[str]:
        return frozenset(f for a in call.args for f in a.fields)
