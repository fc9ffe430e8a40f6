"""Who owns padded lengths: owner inference, and the configured half of it.

A function owns padded lengths when `owners` lists it (per layout), or when
the project sees it decide them: it stores each sample's rounded-up length
into a record (BSHD), or a packed batch's cumulative lengths (THD), or it is
the only padding decision on its path (an inferred owner). The owner is where
the layout is first computed from data: a store of a project function's result
(converted or not) makes that function the owner (`ProjectOwners._computed_by`),
a store of what the callers passed in is a copy, and cumulative lengths are a
packed batch's only when they sum lengths measured from data or the function
handles token tensors (`ProjectOwners._packs_sequences`). A pad elsewhere
is a second owner when an owner pads the same lengths (fields it reads) or
to the same unit (`ProjectOwners.owners_for`); two owners of one layout must
pad alike (`ProjectOwners.disagreements`).

`ProjectOwners` is the project's layer that finds them, over `ProjectHelpers`;
`configured_layouts` answers whether an `owners` entry names a function.
"""

from __future__ import annotations

from layoutcheck.records import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from layoutcheck.model.facts import FieldWrite, FunctionRef, Pad
from layoutcheck.model.helpers import ProjectHelpers
from layoutcheck.model.units import atoms, shape
from layoutcheck.model.vocabulary import Tag

if TYPE_CHECKING:
    from layoutcheck.model.settings import LintSettings

__all__ = ["Owner", "ProjectOwners", "configured_layouts", "owner_matches"]

SRC, PAD, SEQ, MAX = int(Tag.SRC), int(Tag.PAD), int(Tag.SEQ), int(Tag.MAX)
PACKED, TOK, STREAM, SAMPLE = int(Tag.PACKED), int(Tag.TOK), int(Tag.STREAM), int(Tag.SAMPLE)
MEASURED = int(Tag.MEASURED)
_ORIGIN_DEPTH = 3
_TOKEN_WORDS = frozenset({"per-sample tensors", "one sample's tensor"})
"""The spaces `layoutcheck model` names that hold token data (`Function.spaces`)."""


@dataclass(frozen=True)
class Owner:
    """A function that decides padded lengths, and why the linter thinks so."""

    ref: FunctionRef
    layouts: tuple[str, ...]
    """``bshd``, ``thd``."""
    why: str
    """``writes `max_seq_lens```, ``builds `cu_seqlens```, ``listed in `owners.thd```, ``inside `f```."""
    stored_in: str | None = None
    """For an owner whose result another function stores: the field it is stored in."""


def _shape_within(theirs: str, mine: str, *, loose: bool) -> bool:
    """Is a unit of shape ``theirs`` a factor of one of shape ``mine`` (``2*?`` within ``2*?*?``)?

    Factors written ``?`` match anything, so only shapes with an operator count, and only for a
    pad of a stream or of per-sample tensors (``loose``) or when the factors include a literal."""
    if "?" not in theirs or ("*" not in theirs and "(" not in theirs) or "(" in mine or "(" in theirs:
        return theirs == mine and "?" in mine and ("*" in mine or "(" in mine) and (loose or _literal(mine))
    left, right = theirs.split("*"), mine.split("*")
    for factor in left:
        if factor not in right:
            return False
        right.remove(factor)
    return loose or _literal(theirs)


def _literal(text: str) -> bool:
    return any(part.isdigit() and int(part) > 1 for part in text.replace("(", "*").replace(")", "*").replace(",", "*").split("*"))


def _deciding(pad: Pad, layout_of: str) -> bool:
    """The pad that decides an owner's layout: of the packed stream (THD), of each sample (BSHD);
    units of one factor are a parameter's, whose value is the callers' (not compared)."""
    unit_shape = shape(pad.unit)
    if "*" not in unit_shape and "(" not in unit_shape:
        return False
    if layout_of == "thd":
        return bool(pad.value_tags & STREAM)
    return not pad.value_tags & STREAM


def _module_of_path(path: str) -> str:
    text = path.replace("\\", "/")
    if text.endswith(".py"):
        text = text[:-3]
    if text.endswith("/__init__"):
        text = text[: -len("/__init__")]
    return text.strip("/").replace("/", ".")


def _dotted_suffix(whole: str, part: str) -> bool:
    return whole == part or whole.endswith("." + part)


def owner_matches(entry: str, qualname: str, path: str, module_name: str | None) -> bool:
    """Does owner ``entry`` name the function ``qualname`` of this file?

    Forms: ``pkg.mod:func``, ``pkg/mod.py:Class.method``, ``pkg.mod.func``,
    or a bare ``func`` (any module). A module part matches a dotted suffix of
    the module name (when the engine knows it) or of the file's path, so
    ``training_utils.data:get_batch`` names ``miles/backends/training_utils/data.py``.
    """
    if ":" in entry:
        where, func = entry.rsplit(":", 1)
        if func != qualname:
            return False
    elif "." not in entry:
        return entry == qualname.rsplit(".", 1)[-1]
    elif entry.endswith("." + qualname):
        where = entry[: -len(qualname) - 1]
    else:
        return False
    if where.endswith(".py"):
        where = _module_of_path(where)
    candidates = (module_name, _module_of_path(path))
    return any(m is not None and _dotted_suffix(m, where) for m in candidates)


def configured_layouts(settings: LintSettings, qualname: str, path: str, module_name: str | None) -> list[str]:
    """The layouts (``bshd``, ``thd``) whose `owners` entries name this function."""
    return [
        layout for layout, entries in settings.owners.items()
        if any(owner_matches(entry, qualname, path, module_name) for entry in entries)
    ]


class ProjectOwners(ProjectHelpers):
    """The project, with its owners and what they decide (see the module docs)."""

    @cached_property
    def owners(self) -> dict[FunctionRef, Owner]:
        """Every function that decides padded lengths (`Owner`), nested ones included: listed in
        `owners`, or seen to store each sample's padded length (BSHD) or a packed batch's cumulative
        lengths (THD) into a field."""
        out: dict[FunctionRef, Owner] = {}
        found_by: dict[FunctionRef, tuple[str, str, str]] = {}
        """Functions that compute what another stores (the owner is where a layout is first computed)."""
        vocab = self.vocab
        spaces = self.spaces
        # Every form of `owners` entry ends with the function's own name (`owner_matches`): a function
        # named by no entry is not matched against each.
        listed = {entry.rsplit(":", 1)[-1].rsplit(".", 1)[-1]
                  for entries in self.settings.owners.values() for entry in entries}
        for ref, function in self.defs():  # reads no calls: a cached file's stay undecoded
            if ref[1] == 0:
                continue
            file = self.files[ref[0]]
            if function.in_model or (file.facts.kernel and function.cls is None):
                continue  # a model's or a kernel's own geometry is not the data layout's
            layouts: list[str] = []
            why: list[str] = []
            configured = (configured_layouts(self.settings, function.qualname, file.relpath, file.module)
                          if function.qualname.rsplit(".", 1)[-1] in listed else [])
            if configured:
                layouts += configured
                why.append("listed in " + " and ".join(f"`owners.{layout}`" for layout in configured))
            if function.writes_source:
                layouts.append("bshd")
                written = next((w.key for w in self.writes(ref) if w.key in vocab.sources), vocab.source)
                why.append(f"writes `{written}`")
            if function.writes_packed:
                layouts.append("thd")
                why.append(f"builds `{vocab.packed_order[0] if vocab.packed_order else 'cu_seqlens'}`")
            for write in self.writes(ref):
                if write.entry and not write.tags & (PAD | MAX):
                    continue
                padded = spaces.is_padded_field(write.key) and write.tags & (PAD | MAX)
                packed = spaces.field(write.key) & PACKED and write.tags & PACKED
                if not padded and not packed:
                    continue  # what the value derives from decides nothing here: not asked
                resolved = spaces.resolve(write.tags, write.fields, write.params, ref)
                if spaces.is_padded_field(write.key) and write.tags & (PAD | MAX) and not resolved & SRC:
                    origins = self._computed_by(ref, write, PAD | MAX)
                    if origins is not None:
                        # Stored here, computed there: the function that computes it owns the layout.
                        for origin in origins:
                            found_by[origin] = ("bshd", f"computes each sample's padded length that "
                                                f"`{function.qualname}` stores in `{write.key}`", write.key)
                        continue
                    if "bshd" not in layouts or not any(w.startswith("writes") for w in why):
                        layouts.append("bshd")
                        why.append(f"writes each sample's padded length to `{write.key}`")
                elif spaces.field(write.key) & PACKED and write.tags & PACKED and not resolved & SRC and not (
                    spaces.read(write.fields) & PACKED
                ):
                    origins = self._computed_by(ref, write, PACKED)
                    if origins is not None:
                        for origin in origins:
                            found_by[origin] = ("thd", f"computes the cumulative lengths that "
                                                f"`{function.qualname}` stores in `{write.key}`", write.key)
                        continue
                    if not self._packs_sequences(ref, write):
                        continue  # a running sum of other counts (environments, memory blocks, experts)
                    if not any(w.startswith("builds") for w in why):
                        layouts.append("thd")
                        why.append(f"builds `{write.key}` (cumulative lengths of the packed batch)")
            if layouts:
                out[ref] = Owner(ref, tuple(sorted(set(layouts))), ", ".join(why))
        for origin, (layout, reason, key) in found_by.items():
            if origin in out or self.function(origin).in_model:
                continue
            out[origin] = Owner(origin, (layout,), reason, key)
        # An owner around a nested function owns it too.
        for ref, _ in self.defs():
            if ref in out or ref[1] == 0:
                continue
            for outer in self.enclosing(ref):
                if outer in out and outer != ref:
                    found = out[outer]
                    out[ref] = Owner(ref, found.layouts, f"inside `{self.function(outer).qualname}`")
                    break
        return out

    def _computed_by(self, ref: FunctionRef, write: FieldWrite, tag: int) -> list[FunctionRef] | None:
        """Where the ``tag`` part of ``write``'s value was computed, when not in ``ref``: the project's
        functions whose results it stores (followed through functions that only return a callee's
        result), or, for a value its callers pass in, none named (they are judged where they compute
        it). None when ``ref`` computes it itself."""
        spaces = self.spaces
        origins: list[FunctionRef] = []
        for callee in write.calls:
            if not spaces.returned(ref, (callee,)) & tag:
                continue
            target = self.resolve_callee(ref, callee)
            if target is None or self.function(target).rounds is not None:
                continue  # a round-up helper applied here (`[_round_up(t, unit) for t in totals]`): decided here
            for _ in range(_ORIGIN_DEPTH):
                if target is None or self.function(target).returns_tags & tag:
                    break  # it computes what it returns
                onward = [c for c in self.function(target).returns_calls if spaces.returned(target, (c,)) & tag]
                if not onward:
                    break
                target = self.resolve_callee(target, onward[0])
            if target is not None and target != ref:
                origins.append(target)
        if origins:
            return origins
        if write.params and not write.calls and any(spaces.param(ref, name) & tag for name in write.params):
            return []  # stored as its callers passed it: a copy, not a decision
        return None

    def _packs_sequences(self, ref: FunctionRef, write: FieldWrite) -> bool:
        """Are the cumulative lengths ``write`` stores those of sequences: are they sums of lengths
        measured from data (tensor sizes, a mask's row sums), or does the function around them handle
        token data (per-sample tensors, one sample's tokens), as a packed batch's builder does? A running
        sum of other counts (environments, memory blocks, lengths a profiling script makes up) is not."""
        spaces = self.spaces
        if spaces.resolve(write.tags, write.fields, write.params, ref) & (TOK | SAMPLE | STREAM | MEASURED):
            return True
        if any(spaces.field(key) & TOK for key in self.fields_read_in(ref[0]).get(ref, ())):
            return True
        function = self.function(ref)
        if any(word in _TOKEN_WORDS for _, word, _, _ in function.spaces):
            return True
        return any(spaces.param(ref, param.name) & (TOK | STREAM) for param in function.params)

    @cached_property
    def owner_fields(self) -> dict[FunctionRef, frozenset[str]]:
        """The lengths each owner pads: the fields its padded values are computed from (the rollout's
        ``total_lengths``, the micro-batch's ``tokens`` it packs), and the per-sample tensors those
        lengths measure. Padding derived from one of them derives the owner's layout a second time."""
        out: dict[FunctionRef, frozenset[str]] = {}
        spaces = self.spaces
        for ref in self.owners:
            found: set[str] = set()
            for write in self.writes(ref):
                if spaces.is_padded_field(write.key) and write.tags & (PAD | MAX):
                    found |= set(write.fields)
            for pad in self.pads_of(ref[0]):
                if pad.function == ref[1] and pad.fate != "metric":
                    found |= set(pad.fields)
            for key in list(found):
                found |= self.measured.get(key, frozenset())
            out[ref] = frozenset(found - {k for k in found if spaces.is_padded_field(k)})
        return out

    @cached_property
    def measured(self) -> dict[str, frozenset[str]]:
        """Per field of lengths: the fields of per-sample tensors it was written from (the lengths of
        ``tokens``, stored as ``total_lengths``)."""
        out: dict[str, set[str]] = {}
        spaces = self.spaces
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for original in file.facts.field_writes:
                write = self.write_at((i, original.function), original.tick)
                if write.tags & SEQ and not write.tags & (PAD | PACKED):
                    tensors = {f for f in write.fields if spaces.field(f) & TOK and f != write.key}
                    if tensors:
                        out.setdefault(write.key, set()).update(tensors)
        return {key: frozenset(found) for key, found in out.items()}

    @cached_property
    def delegated(self) -> frozenset[FunctionRef]:
        """Functions an owner calls (directly or through one more call): their padding is the owner's,
        decided through them."""
        found: set[FunctionRef] = set()
        frontier = [ref for ref in self.owners if not self.owners[ref].why.startswith("inside ")]
        for _ in range(2):
            following = []
            for ref in frontier:
                for call in self.function(ref).calls:  # its calls decoded, the file's others left as they are
                    target = self.resolve(ref, call)
                    if target is not None and target not in found and target not in self.owners:
                        found.add(target)
                        following.append(target)
            frontier = following
        return frozenset(found)

    @cached_property
    def disagreements(self) -> list[tuple[Pad, FunctionRef, FunctionRef, Pad, str]]:
        """Owner pads that another owner of the same layout pads otherwise: another unit shape (``?*?``
        against ``lcm(16,?*?)``), other factors of one shape where both are known, or another rounding:
        ``(pad, owner, other owner, the other's pad, layout)`` (LC107)."""
        out = []
        units = {ref: tuple(p for p in pads if _deciding(p, layout_of=self._deciding_layout(ref)))
                 for ref, pads in self.owner_units.items()}
        for layout in ("thd", "bshd"):
            owners = [ref for ref in self.owners_of_layout(layout) if units.get(ref)]
            if len(owners) < 2:
                continue
            keys = {ref: {(shape(p.unit), p.rounding) for p in units[ref]} for ref in owners}
            holders: dict[tuple[str, str], set[FunctionRef]] = {}
            for ref, owned in keys.items():
                for key in owned:
                    holders.setdefault(key, set()).add(ref)
            for ref in owners:
                for pad in units[ref]:
                    having = holders[(shape(pad.unit), pad.rounding)]
                    if len(having) == len(owners):
                        continue  # every owner pads this way too
                    other = next(o for o in owners if o not in having)
                    out.append((pad, ref, other, units[other][0], layout))
        return out

    def _deciding_layout(self, ref: FunctionRef) -> str:
        owner = self.owners.get(ref)
        return owner.layouts[0] if owner is not None and len(owner.layouts) == 1 else ""

    def owner_of(self, ref: FunctionRef) -> Owner | None:
        return self.owners.get(ref)

    def owners_of_layout(self, layout: str) -> list[FunctionRef]:
        """The owners of ``layout`` (``bshd``/``thd``), not counting nested ones, in path order."""
        return list(self._owners_by_layout.get(layout, ()))

    @cached_property
    def _owners_by_layout(self) -> dict[str, list[FunctionRef]]:
        out: dict[str, list[FunctionRef]] = {}
        for ref, owner in sorted(self.owners.items(), key=lambda item: self.where(item[0])):
            if owner.why.startswith("inside "):
                continue
            for layout in owner.layouts:
                out.setdefault(layout, []).append(ref)
        return out

    @cached_property
    def cp_helper_defs(self) -> list[FunctionRef]:
        """The layout helpers of the tree (found by use, or configured)."""
        return sorted(self.layout_helpers, key=self.where)

    def family(self, pad: Pad) -> str:
        """What a pad pads: ``bshd`` (to the longest sample) or ``unit`` (to a multiple)."""
        if pad.kind in ("pad_target", "pad_sequence"):
            return "bshd"
        return "unit"

    def pad_value(self, pad: Pad, file_index: int) -> int:
        """What a pad pads, resolved against the project (`Spaces.resolve`)."""
        return self.spaces.resolve(pad.value_tags, pad.fields, pad.params, (file_index, pad.function))

    def owners_for(self, pad: Pad, file_index: int | None = None) -> list[FunctionRef]:
        """Who owns what ``pad`` pads, in this project: a pad with an owner elsewhere is a second owner.

        * the same lengths: a pad of lengths read from a field an owner reads or writes (the sizes of
          the rollout's ``tokens``) re-derives that owner's layout, whatever the unit;
        * the same unit: an owner or layout helper pads to the same factors (``tp.size`` and
          ``data_pad_size_multiplier`` within ``cp.size*data_pad_size_multiplier*tp.size``; a parameter
          is no factor, its value is the callers'), or to a unit of the same shape (``2*?``,
          ``?*?``) when the pad is of a stream or of per-sample tensors, or the shape has a literal
          factor. Best first: the same lengths, the same factors, the same shape.
        """
        value = self.pad_value(pad, file_index) if file_index is not None else pad.value_tags
        if value & SRC:
            return []
        ranked: dict[FunctionRef, int] = {}
        fields = set(pad.fields)
        if file_index is not None:
            for param in pad.params:
                fields |= self.spaces.param_fields((file_index, pad.function), param)
        for ref in self.owners_of_fields(fields):
            ranked[ref] = 0
        if self.family(pad) == "unit" and pad.unit:
            mine = atoms(pad.unit) - set(pad.unit_params)
            my_shape = shape(pad.unit)
            layoutish = bool(value & (STREAM | TOK | SAMPLE))
            for ref, pads in self.unit_holders.items():
                best = ranked.get(ref)
                for other in pads:
                    theirs = atoms(other.unit) - set(other.unit_params)
                    if theirs and theirs <= mine:
                        # The more factors shared the better: a unit's owner before a helper's CP factor.
                        score = 10 - min(len(theirs), 9)
                        best = score if best is None else min(best, score)
                    elif _shape_within(shape(other.unit), my_shape, loose=layoutish):
                        best = 20 if best is None else min(best, 20)
                if best is not None:
                    ranked[ref] = best
        return [ref for ref, _ in sorted(ranked.items(), key=lambda item: (
            item[1], item[0] in self.layout_helpers, self.where(item[0])))]

    def owners_of_fields(self, fields: set[str] | frozenset[str]) -> list[FunctionRef]:
        """The owners whose lengths (`owner_fields`) one of ``fields`` is: a length read from one of them
        derives that owner's layout a second time."""
        if not fields:
            return []
        return [ref for ref in self.owners_of_layout("bshd") + self.owners_of_layout("thd")
                if fields & self.owner_fields.get(ref, frozenset())]

    @cached_property
    def _all_owner_fields(self) -> frozenset[str]:
        return frozenset(f for fields in self.owner_fields.values() for f in fields)

    @cached_property
    def owner_units(self) -> dict[FunctionRef, tuple[Pad, ...]]:
        """Each owner's pads to a multiple (those nested in it included)."""
        out: dict[FunctionRef, list[Pad]] = {}
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for pad in self.pads_of(i):
                if pad.kind not in ("round_up", "pad_amount", "chunk_pad") or not pad.unit or pad.fate == "metric":
                    continue
                for ref in self.enclosing((i, pad.function)):
                    if ref in self.owners:
                        out.setdefault(ref, []).append(pad)
                        break
        return {ref: tuple(pads) for ref, pads in out.items()}

    @cached_property
    def unit_holders(self) -> dict[FunctionRef, tuple[Pad, ...]]:
        """The owners' pads and the layout helpers' own pads: the units the layout is decided in."""
        out = {ref: list(pads) for ref, pads in self.owner_units.items()}
        helpers = set(self.layout_helpers)
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for pad in self.pads_of(i):
                if pad.kind not in ("round_up", "pad_amount", "chunk_pad") or not pad.unit:
                    continue
                for ref in self.enclosing((i, pad.function)):
                    if ref in helpers:
                        out.setdefault(ref, []).append(pad)
                        break
        return {ref: tuple(pads) for ref, pads in out.items()}

    @cached_property
    def unit_atoms(self) -> frozenset[str]:
        """Factors of the units the owners pad sequence lengths to (``data_pad_size_multiplier``), and
        the file's own unit factors: a literal bound to one is an alignment unit's factor (LC201)."""
        found: set[str] = set()
        for pads in self.owner_units.values():
            for pad in pads:
                found |= atoms(pad.unit) - set(pad.unit_params)
        return frozenset(found)

    @cached_property
    def owner_inputs(self) -> frozenset[str]:
        """The fields the owners derive per-sample padded lengths from (``total_lengths``), and the
        per-sample tensors those lengths measure (``tokens``): rewriting one leaves them stale."""
        found = set(self.vocab.owner_inputs)
        spaces = self.spaces
        for ref in self.owners_of_layout("bshd"):
            for write in self.writes(ref):
                if spaces.is_padded_field(write.key) and write.tags & (PAD | MAX):
                    found |= set(write.fields)
            for pad in self.files[ref[0]].facts.pads:
                if pad.function == ref[1]:
                    found |= set(pad.fields)
        measured: set[str] = set()
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for original in file.facts.field_writes:
                write = self.write_at((i, original.function), original.tick)
                if write.key in found and write.tags & SEQ:
                    measured |= {f for f in write.fields if spaces.field(f) & TOK}
        return frozenset((found | measured) - {k for k in found | measured if spaces.is_padded_field(k)})

    def is_owner_input(self, key: str) -> bool:
        """Is ``key`` in `owner_inputs`? Only a configured owner input, or a field some store or pad
        derives from, can be: another key is answered without finding the owners (and every field's
        space), which a one-file run whose file rewrites no such field then never does."""
        if "owner_inputs" not in self.__dict__ and key not in self._owner_input_candidates:
            return False
        return key in self.owner_inputs

    @cached_property
    def _owner_input_candidates(self) -> frozenset[str]:
        """A superset of `owner_inputs` read from the facts alone, as `owner_inputs` builds it with each
        condition on what the project resolves widened to what the facts allow: the configured owner
        inputs; the fields of every pad (an owner's among them); the fields of every store that may
        store a padded length (`Spaces.may_be_padded`, its own tags padded or a call's result, which
        `writes` folds in); the fields of every store into one of those fields that may store lengths
        (the measured tensors). Tests' files count too: a superset is as exact."""
        spaces = self.spaces
        found = set(self.vocab.owner_inputs)
        for file in self.files:
            for pad in file.facts.pads:
                found.update(pad.fields)
            for write in file.facts.field_writes:
                if (write.tags & (PAD | MAX) or write.calls) and spaces.may_be_padded(write.key):
                    found.update(write.fields)
        measured: set[str] = set()
        for file in self.files:
            for write in file.facts.field_writes:
                if write.key in found and (write.tags & SEQ or write.calls):
                    measured.update(write.fields)
        return frozenset(found | measured)

    def owns(self, ref: FunctionRef) -> bool:
        """Does ``ref`` decide padded lengths (an owner, a layout helper, or model or kernel code)?"""
        if ref in self.owners or self.is_layout_helper(ref) or any(r in self.delegated for r in self.enclosing(ref)):
            return True
        function = self.function(ref)
        file = self.files[ref[0]]
        if function.in_model:
            return True
        return file.facts.kernel and all(self.function(r).cls is None for r in self.enclosing(ref))

    @cached_property
    def inferred_owners(self) -> dict[FunctionRef, list[Pad]]:
        """Functions that are the only padding decision on their path: they pad, nothing in the
        project owns what they pad, and their callers read the result (it leaves the function)."""
        out: dict[FunctionRef, list[Pad]] = {}
        for i, file in enumerate(self.files):
            if file.is_test:
                continue
            for pad in self.pads_of(i):
                ref = (i, pad.function)
                if pad.function == 0 or pad.fate != "escapes" or self.owns(ref):
                    continue
                if not self.pad_value(pad, i) & (SEQ | STREAM | TOK | SAMPLE | MAX):
                    continue
                if self.owners_for(pad, i):
                    continue
                out.setdefault(ref, []).append(pad)
        return out

    # ------------------------------------------------------------ sources

    @cached_property
    def has_source(self) -> bool:
        """Does anything in the project write per-sample padded lengths?"""
        return bool(self.owners_of_layout("bshd"))

    def ranked(self, refs: list[FunctionRef], layout: str) -> list[FunctionRef]:
        """``refs`` best first for a message: configured owners of ``layout``, then those that pad to
        a unit themselves, then the rest, each in path order."""
        def rank(ref: FunctionRef) -> tuple[int, str]:
            owner = self.owners.get(ref)
            if owner is not None and "listed in" in owner.why and layout in owner.layouts:
                return 0, self.where(ref)
            return (1 if self.owner_units.get(ref) else 2), self.where(ref)

        return sorted(refs, key=rank)

    def source_writers(self) -> list[FunctionRef]:
        """The owners that write per-sample padded lengths (model and kernel code left out), in path order."""
        return [ref for ref in self.owners_of_layout("bshd") if not self._configured_only(ref)]

    def packed_writers(self) -> list[FunctionRef]:
        """The owners that build a packed batch's description (model and kernel code left out)."""
        return [ref for ref in self.owners_of_layout("thd") if not self._configured_only(ref)]

    def _configured_only(self, ref: FunctionRef) -> bool:
        owner = self.owners[ref]
        return owner.why.startswith("listed in") and "," not in owner.why

    def padded_field_of(self, ref: FunctionRef) -> str | None:
        """The field an owner writes each sample's padded length to (or a configured source it writes)."""
        for write in self.writes(ref):
            if self.spaces.is_padded_field(write.key) and write.tags & (PAD | MAX):
                return write.key
        owner = self.owners.get(ref)
        if owner is not None and owner.stored_in and "bshd" in owner.layouts:
            return owner.stored_in
        return self.vocab.source if self.function(ref).writes_source else None

    def packed_field_of(self, ref: FunctionRef) -> str | None:
        """The field an owner stores a packed batch's cumulative lengths in."""
        for write in self.writes(ref):
            if self.spaces.field(write.key) & PACKED and write.tags & PACKED:
                return write.key
        owner = self.owners.get(ref)
        if owner is not None and owner.stored_in and "thd" in owner.layouts:
            return owner.stored_in
        return None

    def source_ticks(self, ref: FunctionRef) -> tuple[int, ...]:
        """When ``ref`` writes per-sample padded lengths: its own writes, and its calls of any project
        function that writes them (the producer, by whatever name)."""
        function = self.function(ref)  # its calls decoded
        ticks = list(function.source_ticks)
        spaces = self.spaces
        for write in self.writes(ref):
            if spaces.is_padded_field(write.key) and write.tags & (PAD | MAX):
                ticks.append(write.tick)
        bshd = set(self.owners_of_layout("bshd"))
        for call in function.calls:
            target = self.resolve(ref, call)
            if target is not None and target != ref and (target in bshd or self.function(target).writes_source):
                ticks.append(call.tick)
        return tuple(sorted(set(ticks)))

    def reads_padded(self, ref: FunctionRef) -> bool:
        """Does ``ref`` read per-sample padded lengths (a configured source, or a field an owner writes)?"""
        function = self.function(ref)
        if function.reads_source:
            return True
        facts = self.files[ref[0]].facts
        spaces = self.spaces
        for read in facts.entry_reads:
            if read.function == ref[1] and any(spaces.is_padded_field(f) for f in read.fields):
                return True
        for call in function.calls:
            if any(spaces.is_padded_field(f) for a in call.args for f in a.fields):
                return True
        return any(spaces.is_padded_field(f) for f in self.fields_read_in(ref[0]).get(ref, ()))

    def param_fed_from_source(self, ref: FunctionRef, param: str, depth: int = 0) -> bool | None:
        """Do the callers of ``ref`` pass the owner's value into ``param``?

        True when a call site passes a value read from per-sample padded lengths (or a round-up),
        directly or through its own parameter; False when call sites exist and none does; None when
        the project has no call of ``ref`` to judge by.
        """
        sites = self.callers_of(ref)
        if not sites:
            return None
        tags = self.spaces.param(ref, param)
        return bool(tags & (SRC | PAD))
