"""The questions the rules ask about one file, answered from the project model.

A rule (``rules/*.py``) gets a `FileQueries` for each checked file and reads
what it needs: the file's own facts (`facts`), the pads that re-derive
what an owner elsewhere decides (`second_owner_pads`), the CP-helper calls
bound to their helper's signature (`helper_calls`), the padded lengths
passed to functions that take one (`padded_arguments`), the rewrites of
the owner's inputs that run after the owner (`stale_rewrites`), the owners
that disagree (`disagreeing_owners`), and the words a message needs to
point at what this project has (`source_hint`). Rules only phrase the
answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from layoutcheck.records import dataclass

from layoutcheck.model.facts import Arg, Call, FileFacts, Function, Pad, Record, Rewrite, Transform, Zip, ensure_calls
from layoutcheck.model.project import FileModel, FunctionRef, HelperSignature, Project
from layoutcheck.model.headreach import HeadReach
from layoutcheck.model.reshiftflow import ReshiftedStore, SiblingShift, sibling_shifts
from layoutcheck.model.sides import SideDisagreement
from layoutcheck.model.unitpartners import partner_setting_switch
from layoutcheck.model.units import atoms
from layoutcheck.model.vocabulary import LAYOUT_KINDS, Tag

__all__ = ["FileQueries", "HelperCall", "OwnerDisagreement", "PaddedArgument", "StaleRewrite", "UnitDisagreement"]

SRC, PAD, SEQ, MAX, TOK = int(Tag.SRC), int(Tag.PAD), int(Tag.SEQ), int(Tag.MAX), int(Tag.TOK)
UNIT, FOREIGN, BCAST = int(Tag.UNIT), int(Tag.FOREIGN), int(Tag.BCAST)
WIDTH, CONFIG = int(Tag.WIDTH), int(Tag.CONFIG)


@dataclass(frozen=True)
class HelperCall:
    """A call of a configured CP helper, with the signature it is judged by."""

    call: Call
    caller: FunctionRef
    signature: HelperSignature
    layout: str | None
    """The layout known at the call: from its branch, or from a literal it passes (``"bshd"``)."""


@dataclass(frozen=True)
class PaddedArgument:
    """A value passed where a function takes one sample's padded length `P`."""

    call: Call
    caller: FunctionRef
    callee: str
    param: str
    arg: Arg


@dataclass(frozen=True)
class StaleRewrite:
    """A rewrite of the owner's inputs that runs after the owner, with nothing recomputing after it."""

    rewrite: Rewrite
    function: FunctionRef
    via: tuple[FunctionRef, Call] | None
    """The call that runs it after the owner (None: the function itself uses the source)."""


@dataclass(frozen=True)
class UnitDisagreement:
    """One build of a packed layout whose alignment unit differs from another build's of it."""

    node: Call | Pad
    """The call that leaves the unit's switch at its default, or the pad that ignores a factor."""
    builder: FunctionRef
    """The function whose unit it is (the one called, or the one padding)."""
    detail: str
    """What differs: the switch left at its default, or the factor ignored."""
    other: FunctionRef
    """The function that builds the layout otherwise (the caller passing the switch, the sibling pad's)."""
    via: FunctionRef | None = None
    """Where the two builds meet, when in other modules: the caller handing both the same value."""
    hard_coded: bool = False
    """A pad whose literal factor stands where the sibling's function takes the factor as a parameter
    (``tp * 128`` against ``tp * pad_multiplier``), rather than a factor this function takes and ignores."""


@dataclass(frozen=True)
class OwnerDisagreement:
    """An owner's pad whose unit or rounding differs from another owner's of the same layout."""

    pad: Pad
    owner: FunctionRef
    other: FunctionRef
    other_pad: Pad
    layout: str


class FileQueries:
    """The model, seen from one file of the project."""

    def __init__(self, project: Project, index: int) -> None:
        self.project = project
        self.index = index
        self.file: FileModel = project.files[index]
        self.facts: FileFacts = self.file.facts
        ensure_calls(self.facts)  # a checked file's own calls are always read
        self.vocab = project.vocab
        self.settings = project.settings

    # ------------------------------------------------------------ basics

    def ref(self, function: int) -> FunctionRef:
        return (self.index, function)

    def function(self, index: int) -> Function:
        return self.facts.functions[index]

    def label(self, ref: FunctionRef) -> str:
        """`` `get_batch` (data.py:14)``: a function as messages name it."""
        return self.project.label(ref)

    # ------------------------------------------------------------ words for messages

    def owner_hint(self, owner: FunctionRef) -> str:
        """Where ``owner``'s decision can be read, as an imperative sentence."""
        project = self.project
        padded = project.padded_field_of(owner)
        if padded is not None:
            return f"Read the sample's `{padded}` entry instead"
        packed = project.packed_field_of(owner)
        if packed is not None:
            return f"Read the padding from the batch it builds (its `{packed}`) instead"
        return "Read the padded length it decided instead"

    def source_hint(self, layout: str | None = None) -> str:
        """Where the owner's padded length lives in this project, as an imperative sentence.

        Never advises a field the project does not have: with no per-sample padded lengths,
        it points at the packed batch's builder, or at `owners`.
        """
        project = self.project
        writers = project.ranked(project.source_writers(), "bshd")
        builders = project.ranked(project.packed_writers(), "thd")
        if layout != "thd" and writers:
            field = project.padded_field_of(writers[0])
            return f"Read the sample's `{field}` entry (written by {project.label(writers[0])})"
        if builders:
            packed = project.packed_field_of(builders[0]) or "cumulative lengths"
            return (f"Read the padding the batch builder {project.label(builders[0])} decided "
                    f"(its `{packed}`)")
        if writers:
            field = project.padded_field_of(writers[0])
            return f"Read the sample's `{field}` entry (written by {project.label(writers[0])})"
        configured = [e for entries in self.settings.owners.values() for e in entries]
        if configured:
            return f"Read the padded length the configured owner `{configured[0]}` decided"
        return "Read the padded length its owner decided (the linter sees no owner here: list it in `owners`)"

    # ------------------------------------------------------------ LC107: an override's unit

    def overriding_literal_units(self) -> Iterator[tuple[Pad, FunctionRef, Pad]]:
        """Round-ups of a method to a literal unit (``16``) where the method it overrides rounds to a unit
        that is not a literal (the instance's configured ``self.unit``, a parameter): two builders of one
        layout, one of which ignores the unit the other is given. The override's own pads decide: one
        that also rounds to a unit not a literal is left alone. A call of a round-up helper method
        (``self._round_up(n, 16)``) counts as the round-up it makes (`ProjectValues.method_pads`)."""
        project = self.project
        for function, facts in enumerate(self.facts.functions):
            cls, _, name = facts.qualname.rpartition(".")
            if not cls or facts.receiver is None:
                continue
            base = project.base_method(self.index, cls, name)
            if base is None:
                continue
            own = [p for p in project.method_pads(self.ref(function)) if p.fate != "metric"]
            if not own or any(not _literal_unit(p.unit) for p in own):
                continue
            theirs = [p for p in project.method_pads(base) if p.fate != "metric" and p.unit
                      and not _literal_unit(p.unit)]
            if not theirs:
                continue
            for pad in own:
                if pad.unit not in ("0", "1"):
                    yield pad, base, theirs[0]
                    break

    def sibling_shifts(self) -> list[SiblingShift]:
        """Implementations of one overridden method, here, that build one record and shift one of its
        fields differently (`layoutcheck.model.reshiftflow.sibling_shifts`)."""
        return sibling_shifts(self.project, self.index)

    # ------------------------------------------------------------ LC102: second owners

    def second_owner_pads(self) -> Iterator[tuple[Pad, list[FunctionRef]]]:
        """Pads decided here that an owner elsewhere in the project decides already; each padding
        decision once per function (a function that pads tokens and their mask to one longest
        sample decides one layout)."""
        project = self.project
        seen: set[tuple[int, str, str]] = set()
        for pad in project.pads_of(self.index):
            if pad.fate == "metric":
                continue
            ref = self.ref(pad.function)
            if project.owns(ref):
                continue  # an owner decides; a layout helper defines the packed rule; model code pads locally
            owners = [o for o in project.owners_for(pad, self.index) if o != ref]
            if not owners:
                continue
            key = (pad.function, project.family(pad), pad.unit)
            if key in seen:
                continue
            seen.add(key)
            yield pad, owners

    def padded_arguments(self) -> Iterator[PaddedArgument]:
        """Values passed where a ``def`` of the tree (or a configured helper) takes `P`: a padded-length
        parameter, or a list whose entries it passes on as one (``max_seq_lens[i]``)."""
        project = self.project
        spaces = project.spaces
        for j, function in enumerate(self.facts.functions):
            caller = self.ref(j)
            for call in function.calls:
                target = project.resolve(caller, call)
                tail = call.callee.rsplit(".", 1)[-1]
                if target is not None:
                    callee = project.signature(target)  # its parameters: the callee's own calls stay undecoded
                    bound = project.binding(caller, call, target)
                    slots = spaces.padded_slots(target)
                    name = callee.qualname.rsplit(".", 1)[-1]
                    for param, arg in bound.items():
                        if param in slots or (arg.fields and spaces.list_slot(target, param) == "padded"):
                            yield PaddedArgument(call, caller, name, param, arg)
                elif tail in self.vocab.helpers:
                    signature = project.helper(tail)
                    if signature.padded is None:
                        continue
                    name, position = signature.padded
                    arg = _argument(call, name, position)
                    if arg is not None:
                        yield PaddedArgument(call, caller, tail, name, arg)

    def true_length_as_padded(self, found: PaddedArgument) -> bool:
        """Is ``found`` a true length (or a batch maximum) rather than the owner's `P`?"""
        arg = found.arg
        if arg.bare and arg.params and arg.params[0] in self.project.spaces.padded_slots(found.caller):
            return False  # a padded length passed on: its callers are judged where they call
        if arg.tags & (WIDTH | CONFIG):
            return False  # as below, known without resolving (which reads every field of the project)
        tags = self.project.spaces.arg(arg, found.caller)
        if tags & (WIDTH | CONFIG):
            # A batch's width (`x.shape[1]`: every row padded to it) or a configured length
            # (`cfg.model.seq_length`): neither is measured from one sample.
            return False
        if tags & MAX and not self._measures_owner_lengths(found):
            # A maximum over lengths no owner pads (buffers evened out for a collective, a group's
            # flattened fields): not the layout's, as for a pad to the longest written inline
            # (`Project.owners_for`), so moving such a pad into a helper changes nothing.
            return False
        return bool(tags & (SEQ | MAX)) and not tags & (SRC | PAD)

    def _measures_owner_lengths(self, found: PaddedArgument) -> bool:
        """Are the lengths ``found`` passes read from fields an owner pads (directly or through the
        caller's parameters)?"""
        fields = set(found.arg.fields)
        for param in found.arg.params:
            fields |= self.project.spaces.param_fields(found.caller, param)
        return bool(self.project.owners_of_fields(fields))

    # ------------------------------------------------------------ LC104: CP helpers

    def helper_calls(self) -> Iterator[HelperCall]:
        """Calls of layout helpers: those of the tree (found by use) and configured ones."""
        project = self.project
        for j, function in enumerate(self.facts.functions):
            caller = self.ref(j)
            for call in function.calls:
                if call.expects_error:
                    continue
                tail = call.callee.rsplit(".", 1)[-1]
                target = project.resolve(caller, call)
                if target is not None and target in project.layout_helpers:
                    signature = project.layout_helpers[target]
                elif tail in self.vocab.helpers and (target is None or project.signature(target).qualname.rsplit(
                        ".", 1)[-1] == tail):
                    signature = project.helper(tail, target)
                else:
                    continue
                if target is not None and project.through_class(caller, call.callee, target):
                    signature = _by_hand(signature)
                yield HelperCall(call, caller, signature, self._layout_at(call, signature))

    @staticmethod
    def _layout_at(call: Call, signature: HelperSignature) -> str | None:
        if signature.layout is not None:
            arg = _argument(call, *signature.layout)
            if arg is not None and arg.text[:1] in ("'", '"'):
                known = LAYOUT_KINDS.get(arg.text.strip("'\""))
                if known is not None:
                    return known
        return call.layout

    def missing_layout_arguments(self, found: HelperCall) -> list[str]:
        """The layout parameters ``found`` omits where omitting them silently picks the packed rule."""
        signature = found.signature
        call = found.call
        layout, padded = signature.layout, signature.padded
        missing: list[str] = []
        passes = self.project.passes
        if layout is not None and not passes(call, *layout):
            if found.layout == "thd":
                return []
            if (signature.layout_default or "").strip("'\"").lower() == "bshd" and padded is not None \
                    and passes(call, *padded):
                return []  # the default is the padded rule, and the call gives it `P`: nothing falls back
            missing.append(layout[0])
            if padded is not None and not passes(call, *padded):
                missing.append(padded[0])
            return missing
        if padded is not None and not passes(call, *padded):
            if found.layout == "bshd":
                missing.append(padded[0])
            elif found.layout is None and layout is not None:
                # Under BSHD the helper gets None for `P`: it falls back to the packed rule, or
                # (a `def` that checks for None) fails only once a BSHD run reaches it.
                missing.append(padded[0])
        return missing

    # ------------------------------------------------------------ LC105: stale lengths

    def stale_rewrites(self) -> Iterator[StaleRewrite]:
        """Rewrites of the fields the owner derives padded lengths from, run after the owner."""
        project = self.project
        spaces = project.spaces
        by_function: dict[int, list[Rewrite]] = {}
        for rewrite in self.facts.rewrites:
            if not project.is_owner_input(rewrite.field):
                continue
            if not rewrite.entry and (not spaces.field(rewrite.field) & SEQ or spaces.field(rewrite.field) & TOK):
                continue  # a whole per-sample tensor list replaced (converted, sliced): no length changed
            by_function.setdefault(rewrite.function, []).append(rewrite)
        for j, rewrites in sorted(by_function.items()):
            ref = self.ref(j)
            last_write = max(project.source_ticks(ref), default=-1)
            stale = [r for r in rewrites if r.tick > last_write]
            if not stale:
                continue
            if project.reads_padded(ref) or project.source_ticks(ref):
                yield StaleRewrite(stale[0], ref, None)
                continue
            via = self._after_owner(ref)
            if via is not None:
                yield StaleRewrite(stale[0], ref, via)
            elif not project.callers_of(ref) and any(
                project.reads_padded(self.ref(k)) or project.source_ticks(self.ref(k))
                for k in range(len(self.facts.functions))
            ):
                # Called from nowhere the project can see: the module's own use of the padded
                # lengths is the evidence that this runs after the owner.
                yield StaleRewrite(stale[0], ref, None)

    def _after_owner(self, ref: FunctionRef) -> tuple[FunctionRef, Call] | None:
        """A call that runs ``ref`` after the owner wrote the padded lengths, with no recompute after it."""
        project = self.project
        seen = {ref}
        frontier = [ref]
        for _ in range(6):
            following: list[FunctionRef] = []
            for target in frontier:
                for caller, call in project.callers_of(target):
                    writes = project.source_ticks(caller)
                    if any(t > call.tick for t in writes):
                        continue  # the caller recomputes the padded lengths afterwards
                    if project.reads_padded(caller) or any(t < call.tick for t in writes):
                        return caller, call
                    if caller not in seen:
                        seen.add(caller)
                        following.append(caller)
            frontier = following
            if not frontier:
                break
        return None

    def stale_records(self) -> Iterator[tuple[Pad, Record]]:
        """Pads that raise the padding after a padded length was recorded, the record not updated: a
        pad of the recorded local itself, or of a measured size (the data the record describes)."""
        records: dict[int, list[Record]] = {}
        for record in self.facts.records:
            records.setdefault(record.function, []).append(record)
        for pad in self.facts.pads:
            if pad.kind not in ("round_up", "pad_amount", "chunk_pad") or pad.fate == "metric":
                continue
            for record in records.get(pad.function, ()):
                if record.tick >= pad.tick:
                    continue
                if pad.operand != "size" and (not pad.operand or pad.operand != record.value):
                    continue  # rounds another quantity (a budget scaled from it, a stream total): not this one
                rewritten = any(r.field == record.field and r.tick > pad.tick for r in records[pad.function])
                if not rewritten:
                    yield pad, record
                    break

    # ------------------------------------------------------------ LC112: partners left out

    def partners_left_out(self) -> Iterator[tuple[Transform, list[str], str]]:
        """Transforms of a field here that a loop elsewhere applies to the field and its partners
        alike, while this function leaves some partner out: ``(transform, partners, where)``."""
        project = self.project
        groups = project.partner_transforms
        if not groups:
            return
        mine: dict[int, list[Transform]] = {}
        for transform in self.facts.transforms:
            mine.setdefault(transform.function, []).append(transform)
        for j, transforms in sorted(mine.items()):
            ref = self.ref(j)
            done: dict[str, set[FunctionRef]] = {}
            for transform in transforms:
                target = project.resolve_callee(ref, transform.callee)
                if target is not None:
                    done.setdefault(transform.key, set()).add(target)
            reported: set[str] = set()
            for transform in transforms:
                target = project.resolve_callee(ref, transform.callee)
                if target is None or transform.key in reported:
                    continue
                for keys, callees, where in groups:
                    if transform.key not in keys or target not in callees or where[0] == ref:
                        continue
                    missing = [k for k in keys if target not in done.get(k, set())]
                    if missing:
                        reported.add(transform.key)
                        yield transform, missing, project.label(where[0])
                        break

    def zips_out_of_step(self) -> Iterator[tuple[Zip, list[str], list[str]]]:
        """Zips here of a record's fields that the project reorders (or partitions) by an index list
        with fields it never does: ``(zip, reordered, left in their order)``."""
        gathered = self.project.gathered_fields
        whole = self.project.shipped_whole
        if not gathered or "*" in gathered and not whole:
            return  # nothing reordered, or some loop reorders every field: no field is left out
        for found in self.facts.zips:
            moved = [f for f in found.fields if f in gathered]
            kept = [f for f in found.fields if f not in gathered]
            if whole:
                # The partition names the fields it leaves whole (a later loop may gather every key it is
                # given, alike): only those are out of step (a field computed on this rank after the
                # partition, log-probs, is this rank's already).
                kept = [f for f in kept if f in whole]
            if moved and kept:
                yield found, moved, kept

    # ------------------------------------------------------------ LC122: stream units that disagree

    def unit_disagreements(self) -> Iterator[UnitDisagreement]:
        """Builds of a packed layout here whose unit differs from another's: a call leaving a builder's
        unit switch (`Function.unit_switches`) at its default where another call of this file sets it, and a stream
        pad whose unit has a literal where a sibling stream pad of the project has a factor that this
        function takes as a parameter and never reads."""
        project = self.project
        for j, function in enumerate(self.facts.functions):
            caller = self.ref(j)
            for call in function.calls:
                target = project.resolve(caller, call)
                if target is None:
                    continue
                callee = project.signature(target)
                for switch in callee.unit_switches:
                    position = _position(callee, switch)
                    if project.passes(call, switch, _position(callee, switch, project.receiving(caller, call, target)[2])):
                        continue
                    # Another call in this file sets it: one module building one layout two ways. (Calls in
                    # other modules are other paths: a backend or a kernel path that never takes the switch.)
                    setting = [c for c, other in project.callers_of(target) if c[0] == self.index and project.passes(
                        other, switch, _position(callee, switch, project.receiving(c, other, target)[2]))]
                    if setting:
                        yield UnitDisagreement(call, target, switch, setting[0])
                        continue
                    # In another module, where one caller hands both builds the same value (`unitpartners`).
                    met = partner_setting_switch(project, caller, call, target, switch, position)
                    if met is not None:
                        yield UnitDisagreement(call, target, switch, met[0], via=met[1])
        stream = int(Tag.STREAM)
        # This file's own stream pads with a literal in their unit first (`stream_pads` ' of this file, in
        # its order): only those read the project's other stream pads.
        own = [] if project.files[self.index].is_test else [
            ((self.index, pad.function), pad) for pad in project.pads_of(self.index)
            if pad.value_tags & stream and pad.unit
            and any(part.isdigit() for part in pad.unit.replace("(", "*").split("*"))]
        stream_pads = project.stream_pads if own else []
        for ref, pad in own:
            mine = atoms(pad.unit)
            unused = set(project.function(ref).unused_params)
            for other_ref, other in stream_pads:
                theirs = atoms(other.unit)
                if other_ref == ref or not (mine & theirs):
                    continue
                ignored = sorted((theirs - mine) & unused)
                if ignored:
                    yield UnitDisagreement(pad, ref, ignored[0], other_ref)
                    break
                # The sibling takes, in the literal's place, a factor its callers give it (a parameter it
                # reads): the project configures that factor, and this pad hard-codes it. Only for partner
                # streams: the two functions read a field of one record (the tokens a replay mirrors); a
                # stream of other data may have a unit of its own.
                given = theirs - mine  # (`atoms` leaves the literal out: the unit's text shows it, above)
                sibling = project.function(other_ref)
                params = {p.name for p in sibling.params}
                if given and given <= params - set(sibling.unused_params) \
                        and set(sibling.reads) & set(project.function(ref).reads):
                    yield UnitDisagreement(pad, ref, min(given), other_ref, hard_coded=True)
                    break

    # ------------------------------------------------------------ LC113: pad sides

    def left_into_heads(self) -> Iterator[HeadReach]:
        """This file's left-padding calls whose rows reach a head reader in another function, through calls
        in any module (`layoutcheck.model.headreach`)."""
        for found in self.project.left_into_heads:
            if found[0][0] == self.index:
                yield found

    def side_disagreements(self) -> Iterator[SideDisagreement]:
        """This file's placements on one side where the layout's other users take the other."""
        for found in self.project.sides.disagreements:
            if found.function[0] == self.index:
                yield found

    # ------------------------------------------------------------ LC107: owners that disagree

    def reshifted_stores(self) -> Iterator[ReshiftedStore]:
        """This file's stores of a shifted value into a field that the project shifts again where it is
        read (`layoutcheck.model.reshiftflow`)."""
        for found in self.project.reshifted:
            if found.file == self.index:
                yield found

    def disagreeing_owners(self) -> Iterator[OwnerDisagreement]:
        """This file's owner pads whose unit (or rounding) another owner of the layout does not use."""
        for found in self.project.disagreements:
            if found[1][0] == self.index:
                yield OwnerDisagreement(*found)


def _literal_unit(unit: str) -> bool:
    """A canonical unit that is one integer literal (``16``)."""
    return unit.isdigit()


def _argument(call: Call, name: str, position: int | None) -> Arg | None:
    """The argument ``call`` passes for ``name`` (by keyword, or at ``position``)."""
    count = 0
    for arg in call.args:
        if arg.keyword == name:
            return arg
    for arg in call.args:
        if arg.keyword is None:
            if position is not None and count == position:
                return arg
            count += 1
    return None


def _by_hand(signature: HelperSignature) -> HelperSignature:
    """``signature`` for a call passing the helper's receiver by hand (``Cls.helper(obj, ...)``,
    `ProjectGraph.through_class`): each positional parameter one place further."""
    def moved(slot: tuple[str, int | None] | None) -> tuple[str, int | None] | None:
        return None if slot is None or slot[1] is None else (slot[0], slot[1] + 1)
    return replace(signature, layout=moved(signature.layout) or signature.layout,
                   padded=moved(signature.padded) or signature.padded)


def _position(function: Function, name: str, method: bool | None = None) -> int | None:
    """The 0-based position a call passes parameter ``name`` at (the receiver not counted where the call
    fills it, ``method``: by default, an instance's call; `ProjectGraph.receiving`), or None."""
    positional = [p for p in function.params if p.kind in ("posonly", "pos")]
    if method is None:
        method = function.receiver is not None
    if method:
        positional = positional[1:]
    names = [p.name for p in positional]
    return names.index(name) if name in names else None
