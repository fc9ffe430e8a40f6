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
from dataclasses import dataclass

from layoutcheck.model.facts import Arg, Call, FileFacts, Function, Pad, Record, Rewrite, ensure_calls
from layoutcheck.model.project import FileModel, FunctionRef, HelperSignature, Project
from layoutcheck.model.vocabulary import LAYOUT_KINDS, Tag

__all__ = ["FileQueries", "HelperCall", "OwnerDisagreement", "PaddedArgument", "StaleRewrite"]

SRC, PAD, SEQ, MAX, TOK = int(Tag.SRC), int(Tag.PAD), int(Tag.SEQ), int(Tag.MAX), int(Tag.TOK)
UNIT, FOREIGN, BCAST = int(Tag.UNIT), int(Tag.FOREIGN), int(Tag.BCAST)
_CARRIERS = ("max_", "padded", "pad_")
"""Parameters named like this carry a padded length from the caller (`max_token_len`)."""


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
        function = self.project.function(owner)
        packed = self.vocab.packed_order[0] if self.vocab.packed_order else "cu_seqlens"
        if function.writes_source:
            return f"Read the sample's `{self.vocab.source}` entry instead"
        if function.writes_packed:
            return f"Read the padding from the batch it builds (its `{packed}`) instead"
        return "Read the padded length it decided instead"

    def source_hint(self, layout: str | None = None) -> str:
        """Where the owner's padded length lives in this project, as an imperative sentence.

        Never advises a field the project does not have: with no ``max_seq_lens``
        writer, it points at the packed batch's builder, or at `owners`.
        """
        project = self.project
        source = self.vocab.source
        packed = self.vocab.packed_order[0] if self.vocab.packed_order else "cu_seqlens"
        writers = project.ranked(project.source_writers(), "bshd")
        builders = project.ranked(project.packed_writers(), "thd")
        if layout != "thd" and writers:
            return f"Read the sample's `{source}` entry (written by {project.label(writers[0])})"
        if builders:
            return (f"Read the padding the batch builder {project.label(builders[0])} decided "
                    f"(its `{packed}`)")
        if writers:
            return f"Read the sample's `{source}` entry (written by {project.label(writers[0])})"
        configured = [e for entries in self.settings.owners.values() for e in entries]
        if configured:
            return f"Read the padded length the configured owner `{configured[0]}` decided"
        return "Read the padded length its owner decided (the linter sees no owner here: list it in `owners`)"

    # ------------------------------------------------------------ LC102: second owners

    def second_owner_pads(self) -> Iterator[tuple[Pad, list[FunctionRef]]]:
        """Pads decided here that an owner elsewhere in the project decides already."""
        project = self.project
        for pad in self.facts.pads:
            if pad.fate == "metric":
                continue
            ref = self.ref(pad.function)
            if project.owns(ref):
                continue  # an owner decides; a CP helper defines the packed rule; model code pads locally
            owners = [o for o in project.owners_for(pad) if o != ref]
            if owners:
                yield pad, owners

    def padded_arguments(self) -> Iterator[PaddedArgument]:
        """Values passed where a ``def`` of the tree (or a configured helper) takes `P`."""
        project = self.project
        for j, function in enumerate(self.facts.functions):
            caller = self.ref(j)
            for call in function.calls:
                target = project.resolve(caller, call)
                tail = call.callee.rsplit(".", 1)[-1]
                if target is not None:
                    callee = project.function(target)
                    params = callee.params
                    name = callee.qualname.rsplit(".", 1)[-1]
                    if name in self.vocab.helpers:
                        signature = project.helper(name, target)
                        padded = signature.padded
                    elif any(self.vocab.is_layout_param(p.name) for p in params):
                        # A layout-aware function of the tree: it takes the layout kind and `P`.
                        padded = next(((p.name, None) for p in params if self.vocab.is_padded_length_param(p.name)),
                                      None)
                    else:
                        continue
                    if padded is None:
                        continue
                    arg = project.bind(params, call, callee.cls is not None).get(padded[0])
                    if arg is not None:
                        yield PaddedArgument(call, caller, name, padded[0], arg)
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
        tags = arg.tags
        if tags & (SRC | PAD) or not tags & (SEQ | MAX):
            return False
        if arg.params:
            fed = [self.project.param_fed_from_source(found.caller, p) for p in arg.params]
            if any(fed):
                return False  # every call site passes the owner's value in (cause 3)
            if all(f is None for f in fed) and all(p.startswith(_CARRIERS) for p in arg.params):
                return False  # forwards the caller's padded length; the caller is judged where it calls
        return True

    # ------------------------------------------------------------ LC104: CP helpers

    def helper_calls(self) -> Iterator[HelperCall]:
        project = self.project
        for j, function in enumerate(self.facts.functions):
            caller = self.ref(j)
            for call in function.calls:
                tail = call.callee.rsplit(".", 1)[-1]
                if tail not in self.vocab.helpers or call.expects_error:
                    continue
                target = project.resolve(caller, call)
                signature = project.helper(tail, target)
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
        """Rewrites of the owner's inputs (``total_lengths``, ``tokens``) that run after the owner."""
        project = self.project
        by_function: dict[int, list[Rewrite]] = {}
        for rewrite in self.facts.rewrites:
            by_function.setdefault(rewrite.function, []).append(rewrite)
        for j, rewrites in sorted(by_function.items()):
            function = self.function(j)
            last_write = max(function.source_ticks, default=-1)
            stale = [r for r in rewrites if r.tick > last_write]
            if not stale:
                continue
            ref = self.ref(j)
            if function.reads_source or function.source_ticks:
                yield StaleRewrite(stale[0], ref, None)
                continue
            via = self._after_owner(ref)
            if via is not None:
                yield StaleRewrite(stale[0], ref, via)
            elif not project.callers_of(ref) and self.facts.mentions_source:
                # Called from nowhere the project can see: the module's own use of the
                # source is the evidence that this runs after the owner.
                yield StaleRewrite(stale[0], ref, None)

    def _after_owner(self, ref: FunctionRef) -> tuple[FunctionRef, Call] | None:
        """A call that runs ``ref`` after the owner wrote the source, with no recompute after it."""
        project = self.project
        seen = {ref}
        frontier = [ref]
        for _ in range(6):
            following: list[FunctionRef] = []
            for target in frontier:
                for caller, call in project.callers_of(target):
                    function = project.function(caller)
                    writes = project.source_ticks(caller)
                    if any(t > call.tick for t in writes):
                        continue  # the caller recomputes the source afterwards
                    if function.reads_source or any(t < call.tick for t in writes):
                        return caller, call
                    if caller not in seen:
                        seen.add(caller)
                        following.append(caller)
            frontier = following
            if not frontier:
                break
        return None

    def stale_records(self) -> Iterator[tuple[Pad, Record]]:
        """Pads that raise the padding after a padded length was recorded, the record not updated."""
        records: dict[int, list[Record]] = {}
        for record in self.facts.records:
            records.setdefault(record.function, []).append(record)
        for pad in self.facts.pads:
            if pad.kind not in ("round_up", "pad_amount", "chunk_pad") or pad.fate == "metric":
                continue
            for record in records.get(pad.function, ()):
                if record.tick >= pad.tick:
                    continue
                rewritten = any(r.field == record.field and r.tick > pad.tick for r in records[pad.function])
                if not rewritten:
                    yield pad, record
                    break

    # ------------------------------------------------------------ LC107: owners that disagree

    def disagreeing_owners(self) -> Iterator[OwnerDisagreement]:
        """This file's owner pads whose unit (or rounding) another owner of the layout does not use."""
        for found in self.project.disagreements:
            if found[1][0] == self.index:
                yield OwnerDisagreement(*found)


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
