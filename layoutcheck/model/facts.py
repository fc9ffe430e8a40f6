"""The per-file facts: what one file says about padded layouts, as plain data.

`layoutcheck.model.extract` builds a `FileFacts` from one file in one
traversal; the project phase (`layoutcheck.model.project`) reads nothing
else, so the facts are what the result cache keeps per file content
(`to_data` / `from_data`: JSON-able lists, never pickles, so a cache folder
someone else wrote can do no harm; read back, every field has the type its
annotation names, as when extracted, so a rule cannot tell cached facts from
fresh ones). Facts do not depend on the file's path
or module name: those are the project's to assign.

Spans are ``(line, column, end_line, end_column)``, 1-based, columns in
characters, the end exclusive. Ticks number the events of a file (calls,
writes, rewrites, pads) in source order, so "after" is a comparison of ticks.
A function is referred to by its index in `FileFacts.functions`; index 0 is
the module's own top-level code.
"""

from __future__ import annotations

import dataclasses
import marshal
import types
from collections.abc import Callable, Collection
from dataclasses import field
from operator import attrgetter
from typing import Any, NamedTuple, Union, get_args, get_origin

from layoutcheck.records import dataclass

__all__ = [
    "FACTS_VERSION", "exclusive_arms", "Arg", "FunctionRef", "Span", "Broadcast", "BucketLiteral", "Call", "Clash", "EntryRead", "PadSide", "FieldWrite", "FileFacts", "Function",
    "MaxCall", "Pad", "Param", "Record", "Rewrite", "Transform", "Zip", "cache_data", "call_names", "calls_may_spell", "ensure_calls", "from_cache_data",
    "element_call", "ensure_function_calls", "from_data", "functions_by_call_name", "functions_calling_names", "object_hook", "to_data",
]

FACTS_VERSION = 33
"""Bumped whenever the shape or the meaning of the facts changes (cached facts are then misses)."""

Span = tuple[int, int, int, int]
FunctionRef = tuple[int, int]
"""(file index, function index) of a ``def`` in the project."""


class Param(NamedTuple):
    """One parameter of a ``def`` (a tuple: cached facts hold thousands, decoded fast)."""

    name: str
    kind: str
    """``posonly``, ``pos``, ``kwonly``, ``star`` (``*args``) or ``dstar`` (``**kwargs``)."""
    default: str | None
    """The default's source text; None when the parameter has none."""


class Arg(NamedTuple):
    """One argument of a call, with what it derives from (a tuple, like `Param`)."""

    keyword: str | None
    """The keyword; None for a positional argument, ``*`` for ``*args``, ``**`` for ``**kwargs``."""
    tags: int
    """`layoutcheck.model.vocabulary.Tag` flags of the value."""
    params: tuple[str, ...] = ()
    """Parameters of the calling function the value derives from (``max_seq_len`` passed on)."""
    text: str = ""
    """The source text, kept only for values a rule may name (lengths, maxima)."""
    span: Span | None = None
    keys: tuple[str, ...] | None = None
    """For ``**kw``: the keys of the dict ``kw`` was built as (``dict(qkv_format="bshd")``), when known."""
    fields: tuple[str, ...] = ()
    """Fields the value was read from (``batch["max_seq_lens"][i]``: ``max_seq_lens``); the project
    says what each holds."""
    bare: bool = False
    """The value is a parameter of the calling function passed on unchanged."""
    calls: tuple[str, ...] = ()
    """The project's functions whose results the value is (resolved by the project)."""


class Call(NamedTuple):
    """A call of a function the project may define (builtins and library calls are left out).

    A tuple, like `Arg`: calls are most of a file's facts, and a one-file run decodes every
    other file's from the cache.
    """

    callee: str
    """The called name qualified through the file's imports (``.mm_data.expand``, ``self.fill``)."""
    span: Span
    tick: int
    layout: str | None
    """``thd`` or ``bshd`` when the call sits where the layout is known (``if qkv_format == "thd":``)."""
    args: tuple[Arg, ...]
    expects_error: bool = False
    """Inside ``with pytest.raises(...)``: the call is meant to fail."""
    text: str = ""
    fate: str = ""
    """Where the call's result goes (`layoutcheck.model.sinks`), for calls that may be the project's
    round-up helpers (two positional arguments); empty otherwise."""
    unit: str = ""
    """For those calls: the second argument as a canonical unit (`layoutcheck.model.units`)."""


_new_tuple = tuple.__new__
"""Builds a named tuple from a tuple of all its fields without the class's ``__new__`` (a Python
function with a frame of its own): cached facts hold tens of thousands of calls, arguments and
parameters, and a one-file run decodes its project's. Only where every field is given."""
_ARG_DEFAULTS = tuple(Arg._field_defaults[name] for name in Arg._fields[2:])
_ARG_FIELDS = len(Arg._fields)
_CALL_DEFAULTS = tuple(Call._field_defaults[name] for name in Call._fields[5:])


def _call(data: Any) -> Call:
    """A call back from its cached form, arguments included (`to_data`), every field typed as fresh."""
    if type(data) is Call:
        return data
    callee, span, tick, layout, args, *rest = data
    if len(rest) > len(_CALL_DEFAULTS):
        raise TypeError(f"a call of {len(data)} fields")  # as `Call(...)` would: a broken entry
    return _new_tuple(Call, (callee, tuple(span), tick, layout, tuple(map(_arg, args)), *rest,
                             *_CALL_DEFAULTS[len(rest):]))


def _arg(data: Any) -> Arg:
    """An argument back from its cached form: its tags alone, ``[keyword, tags]``, or every field."""
    kind = type(data)
    if kind is int:
        return _new_tuple(Arg, (None, data, *_ARG_DEFAULTS))
    if kind is Arg:
        return data
    if len(data) == 2:
        return _new_tuple(Arg, (data[0], data[1], *_ARG_DEFAULTS))
    if kind is tuple and len(data) == _ARG_FIELDS:
        # Every field, from the calls' `marshal` bytes (`_arg_data` wrote the fresh argument's own
        # values: its tuples are tuples): as it was, without a conversion per field.
        return _new_tuple(Arg, data)
    return _typed(Arg, data if kind is list else list(data))  # a list from JSON


@dataclass
class Function:
    """One ``def`` (or, at index 0, the module's top-level code).

    The fields most functions leave at their defaults come last: the cache drops trailing
    defaults (`to_data`), so a plain function costs a few bytes.
    """

    qualname: str
    """``Class.method``, ``outer.inner``; ``<module>`` for index 0."""
    span: Span
    """The ``def`` line's name."""
    params: tuple[Param, ...] = ()
    parent: int = -1
    """The enclosing function's index (-1 for index 0; 0 for a top-level def or a method)."""
    cls: str | None = None
    """The enclosing class's name, for methods."""
    in_model: bool = False
    """A method of model code (a class deriving from `model-bases`), or nested in one."""
    named_for_source: bool = False
    """Named after a source and not a check (``build_max_seq_lens``): it produces it."""
    end_tick: int = 0
    calls: tuple[Call, ...] = ()
    returns_tags: int = 0
    iterates: bool = False
    """Does it walk a per-sample list (a loop or a comprehension over samples)?"""
    reads_source: bool = False
    reads_packed: bool = False
    writes_source: bool = False
    writes_packed: bool = False
    source_ticks: tuple[int, ...] = ()
    """When it writes a source, or calls something that recomputes it (``recompute_max_seq_lens``)."""
    none_checked: tuple[str, ...] = ()
    """Parameters it asserts (or raises unless) are not None: omitting them fails loudly."""
    refused: tuple[str, ...] = ()
    """Names an ``if ...: raise`` refuses set, alone or with other conditions (``if bucket is not None and
    replay: raise``): the function handles that setting's combinations itself, at run time."""
    guarded: tuple[str, ...] = ()
    """Containers whose per-sample entries a check in this function shows to agree (LC103)."""
    sample_indices: tuple[int, ...] = ()
    """Constant indices also used on other per-sample lengths (``total_lengths[0]``)."""
    layout_params: tuple[str, ...] = ()
    """Parameters compared with a layout kind (``qkv_format == "thd"``) or defaulting to one."""
    padded_params: tuple[str, ...] = ()
    """Parameters used as one sample's padded length `P`: a pad target (``p - x.size(0)``), or a
    length where the layout is BSHD, or asserted present there (local evidence; the project adds
    those passed on to another function's)."""
    true_params: tuple[str, ...] = ()
    """Parameters used as a true length where the layout is packed (the THD branch's length)."""
    rounds: tuple[int, int] | None = None
    """The function returns its parameter ``i`` rounded up to a multiple of parameter ``j``."""
    spaces: tuple[tuple[str, str, int, str], ...] = ()
    """What the function's own code shows each name or field is: ``(subject, space, line, why)``."""
    guard_fields: tuple[str, ...] = ()
    """Fields whose entries an agreement check in this function shows to agree."""
    reads: tuple[str, ...] = ()
    """Fields the function reads by key (``d["k"]``, ``d.get("k")``)."""
    param_uses: tuple[tuple[str, int], ...] = ()
    """Per parameter: what its uses in the body show (`layoutcheck.model.uses`), as `Tag` flags."""
    returns_calls: tuple[str, ...] = ()
    """The project's functions whose results it returns (``return build(x)``): what they return, it
    returns (`layoutcheck.model.spaces`)."""
    returns_elements: tuple[tuple[int, tuple[str, ...], tuple[str, ...]], ...] = ()
    """Its summary per element, when every ``return`` gives a tuple of the same length (``return a,
    b``, or a local bound to one): each position's tags, the project's functions and the parameters
    it derives from (a caller reads what it passes for those), joined over the returns. A caller's ``_, x = f()`` or ``f()[1]`` reads its element there (an
    element of a call is written ``*i:f`` in a value's calls, `element_call`)."""
    unused_params: tuple[str, ...] = ()
    """Parameters the body never reads."""
    unit_switches: tuple[str, ...] = ()
    """Parameters an ``if`` tests to change a pad's unit (``if fp8: unit = lcm(16, unit)``)."""
    zero_elements: tuple[int, ...] = ()
    """Positions of its returned tuple that hold the literal pair ``(0, 0)`` on some path and a computed
    pair on another (`layoutcheck.model.summaries.zero_pair_elements`): positions it clamps on one path
    only."""
    receiver: str | None = None
    """For a ``def`` in a class body: its receiver parameter, the first positional one whatever it is
    called (``self``, a ``@classmethod``'s ``cls``, ``this``); None for a ``@staticmethod``, for a
    ``def`` outside a class and at index 0. Calls bind their arguments past it, and ``<receiver>.m()``
    / ``<receiver>.x`` are the instance's (`ProjectGraph.receiver`), by place, never by name."""
    takes_class: bool = False
    """A ``@classmethod``: its receiver is the class, so a call through the class (``Cls.build(x)``) binds
    past it as an instance's call does, where a method taking an instance, called through its class
    (``Cls.method(obj, x)``), is passed its receiver explicitly (`ProjectGraph.through_class`)."""
    returns_params: tuple[str, ...] = ()
    """The parameters what it returns derives from, joined over its returns (``return tensor``, ``return
    torch.cat([tensor, fill])``): a caller reads what it passes for those (`layoutcheck.model.headreach`)."""


def _param(data: Any) -> Param:
    if type(data) is str:
        return _new_tuple(Param, (data, "pos", None))
    if len(data) == 2:
        return _new_tuple(Param, (data[0], "pos", data[1]))
    return Param(*data)


@dataclass
class Pad:
    """A padded length or a pad decided here: a round-up, a pad amount, a pad target."""

    function: int
    kind: str
    """``round_up``, ``pad_amount``, ``chunk_pad``, ``pad_target`` (a maximum sizing a pad or a
    tensor), ``pad_sequence`` (pad-to-longest over token tensors)."""
    span: Span
    text: str
    value_tags: int
    unit_tags: int
    unit: str
    """The alignment unit, canonical (`layoutcheck.model.units`): ``data_pad_size_multiplier*tp.size``."""
    rounding: str
    """``ceil`` (to the next multiple when not one already) or ``next`` (``m - n % m``: a whole
    extra unit when ``n`` is already a multiple)."""
    layout: str | None
    fate: str
    """Where the value goes: ``metric`` (only metrics, logs, conditions), ``escapes`` (returned, stored
    into a field, or sizing or padding something that is), ``local``."""
    tick: int
    params: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    """Fields the padded value was read from (``d["total_lengths"]``)."""
    unit_params: tuple[str, ...] = ()
    """Parameters the unit derives from (resolved against callers by the project)."""
    unit_span: Span | None = None
    """Where the unit is decided: the expression a local unit was bound to, else the unit as written."""
    operand: str = ""
    """What is rounded, when plain (`layoutcheck.model.idioms.padded_operand`): a local's name,
    ``"size"`` for a measured size, else ``""``."""


@dataclass
class Broadcast:
    """One value given to every entry of a list (LC101)."""

    function: int
    span: Span
    text: str
    target: str
    """The field, name, keyword it is stored as, or ``""`` when returned."""
    value_tags: int
    count_per_sample: bool
    """The entry count is the number of samples: ``len(xs)``, ``xs.size(0)``, a walk over ``xs``."""
    placeholder: bool
    """The repeated value is a placeholder filled later (``[0] * n``, ``[None] * n``)."""
    target_kind: str = "field"
    """``field`` (``d["k"] = ...``, ``{"k": ...}``, ``obj.k = ...``), ``name``, ``keyword`` or ``return``."""
    value_fields: tuple[str, ...] = ()
    value_params: tuple[str, ...] = ()
    value_calls: tuple[str, ...] = ()


@dataclass
class EntryRead:
    """One entry of a per-sample list read as a micro-batch length (``max_seq_lens[0]``)."""

    function: int
    span: Span
    text: str
    container: str | None
    index: int
    fields: tuple[str, ...] = ()
    """The field the list is (``batch["max_seq_lens"][0]``: ``max_seq_lens``)."""
    params: tuple[str, ...] = ()
    """The parameter the list is (``max_seq_lens[0]`` with ``max_seq_lens`` a parameter)."""
    source: bool = False
    """The list is a configured source (`sources`)."""
    spread: bool = False
    """The entry is used for many samples: a pad target or extent inside a walk over samples."""


@dataclass
class Rewrite:
    """A rewrite of a per-sample field (LC105 judges it when the owner derives padded lengths from it)."""

    function: int
    span: Span
    text: str
    field: str
    tick: int
    entry: bool = False
    """One entry is stored (``d["tokens"][i] = t``), not the whole field."""
    tags: int = 0
    """What the stored value is (`layoutcheck.model.vocabulary.Tag`)."""


@dataclass
class Record:
    """A padded length stored into a field (``batch["padded_to_length"] = P``)."""

    function: int
    span: Span
    field: str
    tick: int
    value: str = ""
    """The local stored, when the value is one (``P``), else ``""``."""


@dataclass
class MaxCall:
    """``max(...)`` that may combine alignment units (LC106): the project judges its atoms."""

    function: int
    span: Span
    text: str
    atoms: tuple[str, ...] = ()
    """Factors of the combined values (attributes, fields, parameters)."""
    unit: bool = False
    """The result is used as a round-up unit here, or a combined value is one."""


@dataclass
class Clash:
    """Two spaces meeting in one function without a conversion (the section-10 classes the file
    alone shows): ``double_shift`` (a shift applied to what is already shifted), ``shift_mismatch``
    (values shifted opposite ways combined), ``zero_slice`` (``x[-n:]`` / ``x[:-n]`` with an ``n``
    that can be 0), ``padded_offset`` (true-length data sliced at a padded length's offsets)."""

    function: int
    kind: str
    span: Span
    text: str
    detail: str = ""
    """What the rule's message needs (the other value, the shift)."""
    params: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()
    """What the judged value derives from, for the project to resolve (``zero_slice``'s ``n``)."""
    calls: tuple[str, ...] = ()
    """The project's functions whose results the judged value is (``moved_origin``'s positions)."""
    one_pair: bool = False
    """``moved_origin``: the two bounds are the two ends of one pair (``x[p[0] - q : p[1] - q]``): where
    the pair is ``(0, 0)`` the bounds are equal and the slice is empty, as an empty range's should be."""


@dataclass
class FieldWrite:
    """A value stored into a field (``d["k"] = v``, ``{"k": v}``, ``obj.k = v``, ``d.update(k=v)``)."""

    function: int
    key: str
    span: Span
    tags: int
    """What the value is (`layoutcheck.model.vocabulary.Tag`), from how it was computed."""
    fields: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    entry: bool = False
    """One entry stored (``d["k"][i] = v``) or appended."""
    tick: int = 0
    text: str = ""
    per_sample: bool = False
    """The value is a list built per sample (a comprehension, a broadcast, a list grown by appends)
    or one entry of one: its tags describe each sample's entry."""
    fresh: bool = False
    """Stored into a container built here (a dict literal, ``{}``), not into a record passed in."""
    calls: tuple[str, ...] = ()
    """The project's functions whose results the value is (``_round_up(t, unit)``); ``*i:f`` for
    element ``i`` of the tuple ``f`` returns (``a, b = f(x)``, ``f(x)[1]``), ``*f`` for one not known
    (`element_call`)."""
    record: int = 0
    """Writes of one record built in one expression (a dict literal) share this number; 0 for others."""


@dataclass
class Transform:
    """A per-sample transform applied to a field: ``d["k"] = [f(x, ...) for x in d["k"]]``."""

    function: int
    key: str
    callee: str
    """The transform's callee as written (``slice_log_prob_with_cp``); the project resolves it."""
    span: Span
    tick: int


@dataclass
class Zip:
    """Fields of one record walked together (``zip(d["a"], d["b"])``): co-indexed, entry for entry."""

    function: int
    span: Span
    text: str
    fields: tuple[str, ...]


@dataclass
class BucketLiteral:
    """An int literal (or a list of them) bound to a bucket or pad-multiplier name (LC201)."""

    span: Span
    name: str
    kind: str
    """``buckets`` or ``multiplier``."""
    values: tuple[int, ...]
    max_length: int | None = None
    configured: bool = False
    """The name matched a configured pattern (`bucket-names`, `pad-multiplier-names`)."""


@dataclass
class PadSide:
    """Where a per-sample tensor's real tokens sit in its padded row (docs/design.md#layout-spaces-and-bug-classes, class 7).

    ``act`` is ``place`` when the code puts them there (``F.pad(x, (0, k))``, ``pad_sequence``,
    ``buf[i, P - n:] = x``) and ``read`` when it reads them assuming that side (``x[i, :n]`` with a
    true length ``n``)."""

    function: int
    side: str
    """``left`` (real tokens at the row's end) or ``right`` (at its start)."""
    act: str
    span: Span
    text: str
    extent: tuple[str, ...] = ()
    """The padded length the placement pads to (``P`` of ``F.pad(x, (0, P - len(x)))``, the sizes
    of the buffer written): two placements in one function to the same extent are partners."""
    fields: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    """What the tensor read derives from, for the project to resolve (``read``)."""
    arms: tuple[str, ...] = ()
    """The branch arms it sits in (``12:4:body``, ``12:4:else``: the ``if`` at line 12, column 4): two
    placements in different arms of one ``if`` never both run (`exclusive_arms`)."""


def exclusive_arms(one: tuple[str, ...], other: tuple[str, ...]) -> bool:
    """Do two positions sit in different arms of one ``if`` (``if right: ... elif left: ...``)?"""
    mine = {arm.rsplit(":", 1)[0]: arm for arm in one}
    return any(arm.rsplit(":", 1)[0] in mine and mine[arm.rsplit(":", 1)[0]] != arm for arm in other)


_Origin = tuple[str, int, tuple[tuple[str, int], ...]]
"""A value's origin by call (`layoutcheck.model.origins.Origin`)."""
_Origins = tuple[_Origin, ...]


@dataclass
class FileFacts:
    """Everything the project phase needs from one file."""

    functions: list[Function] = field(default_factory=list)
    imports: tuple[tuple[str, str], ...] = ()
    """Local name -> qualified name (leading dots kept for relative imports)."""
    imported: tuple[str, ...] = ()
    """Every module the file imports from."""
    classes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Class name and the last names of its bases."""
    assigned_methods: tuple[tuple[str, str], ...] = ()
    """Functions assigned onto a class (``mod.Cls.name = f``, ``setattr(Cls, "name", f)``), as written:
    ``(target, function)`` (`layoutcheck.model.calls.methods_assigned`)."""
    kernel: bool = False
    """The file imports a kernel module (`kernel-modules`)."""
    mentions_source: bool = False
    """The file reads or writes a source somewhere, or calls an owner."""
    pads: list[Pad] = field(default_factory=list)
    broadcasts: list[Broadcast] = field(default_factory=list)
    entry_reads: list[EntryRead] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    max_calls: list[MaxCall] = field(default_factory=list)
    buckets: list[BucketLiteral] = field(default_factory=list)
    field_writes: list[FieldWrite] = field(default_factory=list)
    field_uses: tuple[tuple[str, int], ...] = ()
    """Per field read in the file: what its uses show (`layoutcheck.model.uses`), as `Tag` flags."""
    unit_atoms: tuple[str, ...] = ()
    """Attributes and fields that are factors of a round-up unit in this file."""
    bucket_names: tuple[str, ...] = ()
    """Names, attributes and fields searched for the smallest entry that fits a length."""
    partners: tuple[tuple[str, ...], ...] = ()
    """Groups of fields transformed alike in one loop (``for key in ("a", "b"): d[key] = f(d[key])``)."""
    transforms: list[Transform] = field(default_factory=list)
    gathered: tuple[str, ...] = ()
    """Fields rewritten as a gather by an index list (``d["k"] = [d["k"][i] for i in order]``): reordered
    or partitioned per sample; ``*`` when a loop does it to every key of a record."""
    shipped_whole: tuple[str, ...] = ()
    """Fields a function copies whole into a record (``out[key] = data[key]``) that it fills with shares
    of several other fields (``out[k] = [data[k][i] for i in part]``): left out of the partition on
    purpose."""
    zips: list[Zip] = field(default_factory=list)
    shifters: tuple[tuple[str, str, str, str, str], ...] = ()
    """Functions returning a one-position shift of a parameter (`layoutcheck.model.reshift.ShiftSummary`):
    what a call of one in another module stores or reads."""
    packed_rows: tuple[tuple[tuple[str, int, str, str], ...],
                       tuple[tuple[str, str, int, int, int, int, str, str], ...]] = ((), ())
    """The fields a loop packs several samples into, and the fields read and shifted by one position
    (`layoutcheck.model.packedrows.PackedRows`): what another module's shift or packer meets."""
    pieces: tuple[tuple[tuple[str, int, str, int], ...],
                  tuple[tuple[str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]], ...]] = ((), ())
    """The functions returning a piece of a split sequence and those rolling a parameter
    (`layoutcheck.model.pieceroll.PieceSummaries`): what a call from another module meets."""
    callbacks: tuple[tuple[tuple[str, str, int, str, int, str, int, tuple[tuple[str, int], ...]], ...],
                     tuple[tuple[str, str, str, str, tuple[str, ...],
                                 tuple[tuple[str, int, Span, str], ...]], ...]] = ((), ())
    """The functions calling a function parameter with another parameter's entries cut by a call, and the
    calls handing a ``def`` that rolls a parameter beside a dict (`layoutcheck.model.callbackroll.CallbackSummaries`)."""
    origins: tuple[tuple[tuple[str, int, _Origin], ...], tuple[tuple[str, int, str, _Origins, Span, str], ...],
                   tuple[tuple[str, str, bool, _Origins, tuple[tuple[str, _Origins, Span, str], ...], tuple[str, ...],
                               _Origins], ...]] = ((), (), ())
    """Where values come from by call: returns, returned dicts' entries, calls with their arguments
    (`layoutcheck.model.origins.ValueOrigins`)."""
    instances: tuple[tuple[tuple[str, str, str], ...], tuple[tuple[str, str], ...],
                     tuple[tuple[str, int, int, str, str, tuple[tuple[str, str], ...]], ...],
                     tuple[tuple[str, str, str], ...], tuple[tuple[str, str, str], ...]] = ((), (), (), (), ())
    """Locals holding an instance of one callee's result (a class, when the project resolves it), the
    functions returning a DataLoader given a parameter as its collate function, the calls given a
    local another call built, a class's attributes holding an instance of one callee's result, and
    attributes stored into a local's instance from outside its class (`layoutcheck.model.origins.Summaries`)."""
    side_summaries: tuple[tuple[tuple[str, str, str, str, str, str], ...], tuple[tuple[str, str], ...]] = ((), ())
    """Side switches (a pad side picked by a parameter compared with a string) and head readers (a
    parameter whose rows are read from their start, ``row[:n]``), by function
    (`layoutcheck.model.sidedefault.SideSummaries`): what a call from another module meets."""
    assigned_onto: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = ()
    """Functions assigned onto classes, each candidate of a local, onto an instance's class too
    (`layoutcheck.model.objectcalls.AssignedMethod`)."""
    clashes: list[Clash] = field(default_factory=list)
    sides: list[PadSide] = field(default_factory=list)
    extracted: bool = False
    """The file was parsed and walked (False: the text prefilter cleared it, or it does not parse)."""
    syntax_error: tuple[int | None, int | None, str] | None = None
    """``(line, column, message)`` when the file does not parse; everything else is then empty."""


# ---------------------------------------------------------------- JSON-able data

_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (Function, Pad, Broadcast, EntryRead, Rewrite, Record, MaxCall, BucketLiteral, FieldWrite, Transform,
                Clash, PadSide, Zip, FileFacts)
}
_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _CLASSES.values()
}


def _default(f: dataclasses.Field) -> Any:  # type: ignore[type-arg]
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


_DEFAULTS: dict[type, tuple[Any, ...]] = {
    cls: tuple(_default(f) for f in dataclasses.fields(cls)) for cls in _CLASSES.values()
}
_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    cls: attrgetter(*names) for cls, names in _FIELDS.items() if len(names) > 1
}
"""Per class, its fields' values as a tuple, in order (`_positional`: one call, not one `getattr` each)."""
_REQUIRED: dict[type, int] = {
    cls: sum(1 for d in defaults if d is dataclasses.MISSING) for cls, defaults in _DEFAULTS.items()
}


def element_call(callee: str) -> tuple[int | None, str]:
    """A value's call as (the element of the callee's returned tuple it is, the callee): ``*2:f`` is
    element 2 of what ``f`` returns, ``*f`` an element not known, ``f`` the whole result (None)."""
    if not callee.startswith("*"):
        return None, callee
    head, sep, name = callee[1:].partition(":")
    if sep and head.isdigit():
        return int(head), name
    return -1, callee[1:]


def to_data(value: Any) -> Any:
    """Facts as JSON-able data: a dataclass becomes ``{"t": name, "v": [fields]}``, tuples lists."""
    kind = type(value)
    names = _FIELDS.get(kind)
    if names is not None:
        values = [getattr(value, n) for n in names]
        defaults = _DEFAULTS[kind]
        while values and len(values) > _REQUIRED[kind] and values[-1] == defaults[len(values) - 1]:
            values.pop()  # trailing defaults: the dataclass fills them back in
        return {"t": kind.__name__, "v": [to_data(v) for v in values]}
    if kind is Param:
        # `name` for a plain positional parameter, `[name, default]` for one with a default.
        if value.kind == "pos":
            return value.name if value.default is None else [value.name, value.default]
        return list(value)
    if kind is Arg:
        # Most arguments carry nothing but their tags: a positional one is then just its
        # tags, a keyword one `[keyword, tags]` (calls are most of a file's facts).
        if (not value.params and not value.text and value.span is None and value.keys is None
                and not value.fields and not value.bare and not value.calls):
            return value.tags if value.keyword is None else [value.keyword, value.tags]
        return [to_data(v) for v in value]
    if kind is list or kind is tuple or kind is Call:
        return [to_data(v) for v in value]
    return value


def _positional(value: Any) -> list[Any]:
    """A dataclass as the cache keeps it (`cache_data`): the list of its fields (trailing defaults
    dropped), each plain value as it is (tuples stay tuples), the fields that hold dataclasses or
    `Param`, `Arg` and `Call` (`to_data`'s compact forms) converted by `_ENCODE`. Only plain values,
    for `marshal`; read back by `_BUILD`."""
    kind = type(value)
    values = list(_GETTERS[kind](value))
    defaults, n, required = _DEFAULTS[kind], len(values), _REQUIRED[kind]
    while n > required and values[n - 1] == defaults[n - 1]:
        n -= 1  # the dataclass fills them back in
    del values[n:]
    for i, encode in _ENCODE[kind]:
        if i < n:
            values[i] = encode(values[i])
    return values


def cache_data(facts: FileFacts) -> dict[str, Any]:
    """``facts`` as a cache entry's data (`layoutcheck.lint.cache` writes it with `marshal`): the
    calls apart, as `marshal` bytes of their own.

    A one-file run reads every other file of its project from the cache, and calls are most
    of their bytes; the project decodes a file's calls only when it asks about a name the
    file calls (`call_names`, `ensure_calls`), or one ``def`` 's (`ensure_function_calls`), so the
    rest stay unread bytes (`marshal` reads them back about three times faster than the JSON they
    were, tuples as tuples). The rest
    (``core``, `_positional`) keeps its tuples and lists as they are, so reading it back builds
    only the dataclasses and the named tuples (`from_cache_data`): on verl, a one-file run reads
    its project's entries in about half the time JSON with a type tag per object took.
    """
    pending = facts.__dict__.get("pending_calls")
    if pending is not None:  # read from a cache entry (or a worker), the calls still undecoded: as they came
        core = _positional(dataclasses.replace(facts, functions=[]))
        functions = []
        for function in facts.functions:
            values = _positional(function)
            if len(values) > _CALLS:
                values[_CALLS] = ()  # decoded one by one (`ensure_function_calls`): the bytes hold them
            functions.append(values)
        core[:1] = [functions]
        return {"core": core, "calls": pending, "names": sorted(facts.__dict__["call_names"])}
    functions, calls = [], []
    for function in facts.functions:
        values = _positional(function)
        if len(values) > _CALLS:
            calls.append(values[_CALLS])  # `to_data`'s form, kept apart as `marshal` bytes
            values[_CALLS] = ()
        else:
            calls.append(())
        functions.append(values)
    core = _positional(dataclasses.replace(facts, functions=[]))
    core[:1] = [functions]  # `functions` is the first field
    names = sorted({c.callee.rsplit(".", 1)[-1] for f in facts.functions for c in f.calls})
    return {"core": core, "calls": marshal.dumps(calls), "names": names}


def from_cache_data(data: Any) -> FileFacts:
    """The inverse of `cache_data` (after `marshal`: every tuple still a tuple); calls stay pending."""
    if not isinstance(data, dict) or not isinstance(data.get("core"), list):
        raise ValueError("not cached facts")
    calls, names = data["calls"], data["names"]
    if not isinstance(calls, bytes) or not isinstance(names, list):
        raise ValueError("not cached calls")
    facts: FileFacts = _BUILD[FileFacts](data["core"])
    facts.pending_calls = calls  # type: ignore[attr-defined]
    facts.call_names = frozenset(names)  # type: ignore[attr-defined]
    return facts


def ensure_calls(facts: FileFacts) -> None:
    """Decode the calls a cached `FileFacts` still holds as `marshal` bytes (`cache_data`)."""
    state = facts.__dict__
    pending = state.pop("pending_calls", None)
    if pending is None:
        return
    rows = state.pop("call_rows", None)
    done = state.pop("calls_done", ())
    for i, (function, calls) in enumerate(zip(facts.functions, marshal.loads(pending) if rows is None else rows)):
        if i not in done:
            function.calls = tuple(_call(c) for c in calls)


def ensure_function_calls(facts: FileFacts, index: int) -> Function:
    """Function ``index`` of ``facts``, its calls decoded; the file's other functions' calls stay as
    they are (`ensure_calls` decodes them when asked).

    The project reads one ``def`` 's calls where a caller binds its arguments (`ProjectGraph.function`):
    on verl a one-file run asks that of a few dozen ``def`` s in as many cached files, and turning
    every call of those files into named tuples cost as much as reading them. The file's calls stay
    pending (`call_names`, `calls_may_spell` and `cache_data` read the bytes, which still hold every
    call), the rows read are kept for the next ``def`` asked."""
    function = facts.functions[index]
    state = facts.__dict__
    pending = state.get("pending_calls")
    if pending is None:
        return function
    done = state.get("calls_done")
    if done is None:
        done = state["calls_done"] = set()
    if index not in done:
        rows = state.get("call_rows")
        if rows is None:
            rows = state["call_rows"] = marshal.loads(pending)
        function.calls = tuple(_call(c) for c in rows[index]) if index < len(rows) else ()
        done.add(index)
    return function


def _pending_call_rows(facts: FileFacts) -> list | None:
    """The `marshal` rows of ``facts`` ' calls, loaded once and kept; None when the calls are decoded already."""
    state = facts.__dict__
    pending = state.get("pending_calls")
    if pending is None:
        return None
    rows = state.get("call_rows")
    if rows is None:
        rows = state["call_rows"] = marshal.loads(pending)
    return rows


def functions_calling_names(facts: FileFacts, names: Collection[str]) -> list[int] | None:
    """The indexes of ``facts`` ' functions with a call whose last name is in ``names``, read from the
    calls' `marshal` rows without decoding a call (`cache_data`); None when the calls are decoded
    already. A one-file run asks this of the files whose calls spell a name the project looks for
    (`ProjectGraph.functions_with_calls`): only those functions' calls are then decoded, the file's
    others stay pending (on verl, most of the functions of the 170 files read so)."""
    rows = _pending_call_rows(facts)
    if rows is None:
        return None
    found = []
    for j, calls in enumerate(rows[: len(facts.functions)]):
        for call in calls:
            if call[0].rsplit(".", 1)[-1] in names:  # the callee, first of a call's fields (`_call_data`)
                found.append(j)
                break
    return found


def functions_by_call_name(facts: FileFacts) -> dict[str, list[int]] | None:
    """For each last name of ``facts`` ' calls, the indexes of the functions calling it (ascending),
    read from the calls' `marshal` rows without decoding a call; None when the calls are decoded
    already (`ProjectGraph` then indexes the decoded calls)."""
    rows = _pending_call_rows(facts)
    if rows is None:
        return None
    out: dict[str, list[int]] = {}
    for j, calls in enumerate(rows[: len(facts.functions)]):
        for name in {call[0].rsplit(".", 1)[-1] for call in calls}:
            out.setdefault(name, []).append(j)
    return out


def calls_may_spell(facts: FileFacts, text: str) -> bool:
    """False only when ``facts`` ' calls are still pending (`cache_data`) and their bytes hold no
    string equal to ``text`` in any of the forms `marshal` writes one in (`_marshal_forms`): then no
    call's argument names it, and the calls can stay undecoded."""
    pending = facts.__dict__.get("pending_calls")
    return pending is None or any(form in pending for form in _marshal_forms(text))


def _marshal_forms(text: str) -> tuple[bytes, ...]:
    """The bytes `marshal` writes ``text`` as, whole: its type code (interned or not, flagged as
    referenced or not), its length, its UTF-8 bytes. Each string a dump holds is written so at
    least once (a later occurrence of the same object may be a reference back to it)."""
    raw = text.encode("utf-8", "surrogatepass")
    if text.isascii() and len(raw) < 256:
        codes, size = b"zZ", bytes([len(raw)])  # TYPE_SHORT_ASCII(_INTERNED)
    elif text.isascii():
        codes, size = b"aA", len(raw).to_bytes(4, "little")  # TYPE_ASCII(_INTERNED)
    else:
        codes, size = b"ut", len(raw).to_bytes(4, "little")  # TYPE_UNICODE, TYPE_INTERNED
    return tuple(bytes([code | flag]) + size + raw for code in codes for flag in (0, 0x80))  # 0x80: FLAG_REF


def call_names(facts: FileFacts) -> frozenset[str] | None:
    """The last names of every call in ``facts`` when its calls are still pending, else None."""
    return facts.__dict__.get("call_names") if "pending_calls" in facts.__dict__ else None


def object_hook(data: dict[str, Any]) -> Any:
    """`json.loads`'s ``object_hook`` that builds the facts while the JSON is parsed (fast: the C
    decoder does the lists and scalars), each field typed as `extract` makes it (`_typed`). Other
    objects pass through."""
    kind = data.get("t")
    if kind is None or "v" not in data or len(data) != 2:
        return data
    cls = _CLASSES.get(kind)
    if cls is None:
        raise ValueError(f"unknown facts type {kind!r}")
    values = data["v"]
    if not isinstance(values, list) or not _REQUIRED[cls] <= len(values) <= len(_FIELDS[cls]):
        raise ValueError(f"facts of {kind} have the wrong fields")
    return _typed(cls, values)


def from_data(data: Any) -> Any:
    """The inverse of `to_data`: the facts with every field of the type it had when extracted."""
    if isinstance(data, dict):
        if set(data) != {"t", "v"} or not isinstance(data["v"], list):
            raise ValueError("not facts data")
        return object_hook({"t": data["t"], "v": [from_data(v) for v in data["v"]]})
    if isinstance(data, list):
        return [from_data(v) for v in data]
    return data


# ---------------------------------------------------------------- the typed decode
#
# JSON has arrays, not tuples: read back as they are, a span would be a list, and a rule that
# puts one in a set or a dict key crashes on cached facts only (it did: LC113, `unhashable type:
# 'list'`). So every field is decoded once, here, to the type its annotation names, and a rule
# reads the same types whether the facts are fresh or cached (tests/test_cache_types.py checks
# every fixture's facts type by type).

_Convert = Callable[[Any], Any]


def _converter(hint: Any, native: bool = False) -> _Convert | None:
    """What turns a field's stored form into ``hint``'s type; None where it has that type already.

    JSON (`to_data`) has arrays, not tuples: each tuple is converted, and `object_hook` has built
    the dataclasses. The cache's ``native`` form (`cache_data`) keeps tuples and lists: only the
    dataclasses (`_BUILD`) and the named tuples are built. A field of a type this does not know
    fails at import, not on someone's cache.
    """
    special = _SPECIAL.get(hint)
    if special is not None:
        return special
    if hint in _FIELDS and native:
        return _BUILD[hint]
    if hint in _SCALARS or hint in _FIELDS:  # dataclasses: built by `object_hook` / `from_data`
        return None
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or origin is types.UnionType:
        inner = [a for a in args if a is not type(None)]
        converts = [_converter(a, native) for a in inner]
        if all(c is None for c in converts):
            return None
        if len(inner) != 1:
            raise TypeError(f"facts field type {hint!r}: a union of containers has no decoding")
        convert = converts[0]
        assert convert is not None
        return lambda v: None if v is None else convert(v)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _converter(args[0], native)
            if item is None:
                return None if native else tuple
            if native:  # most are empty (a function's calls are kept apart): kept as they came
                return lambda v: v if v == () else tuple(map(item, v))
            return lambda v: tuple(map(item, v))
        items = [_converter(a, native) for a in args]
        if all(c is None for c in items):
            return None if native else _fixed(len(items))
        return lambda v: tuple(x if c is None else c(x) for c, x in zip(items, v, strict=True))
    if origin is list:
        item = _converter(args[0], native)
        if item is None:
            return None if native else list
        if native:  # most of a file's lists of facts are empty; `marshal` made each a list of its own
            return lambda v: v if type(v) is list and not v else list(map(item, v))
        return lambda v: list(map(item, v))
    raise TypeError(f"facts field type {hint!r} has no decoding")


def _fixed(size: int) -> _Convert:
    """A tuple of ``size`` scalars (a span): a list of another length is a broken entry, not facts."""
    def convert(v: Any) -> tuple[Any, ...]:
        if len(v) != size:
            raise ValueError(f"expected {size} values, got {len(v)}")
        return tuple(v)
    return convert


_SCALARS = (int, str, bool, float, type(None), Any)
_SPECIAL: dict[Any, _Convert] = {Param: _param, Arg: _arg, Call: _call}


def _decoders(cls: type, hints: dict[str, Any], native: bool = False) -> tuple[tuple[int, _Convert], ...]:
    names = _FIELDS[cls] if cls in _FIELDS else cls._fields  # type: ignore[attr-defined]
    out = []
    for i, name in enumerate(names):
        convert = _converter(hints[name], native)
        if convert is not None:
            out.append((i, convert))
    return tuple(out)


def _builder(cls: type, steps: list[tuple[int, _Convert]]) -> _Convert:
    """Builds a ``cls`` from its cached form (`_positional`), the fields that need it converted by ``steps``."""
    def build(values: Any) -> Any:
        if type(values) is not list:
            raise TypeError(f"facts of {cls.__name__} are not a list")
        n = len(values)
        for i, convert in steps:
            if i < n:
                values[i] = convert(values[i])
        return cls(*values)  # too few or too many values: a TypeError, as a broken entry should be
    return build


def _arg_data(arg: Arg) -> Any:
    """An argument as `to_data` writes it (its tags alone, ``[keyword, tags]``, or every field), as
    plain values (`marshal` writes no named tuple; JSON writes a tuple as an array all the same)."""
    if (not arg.params and not arg.text and arg.span is None and arg.keys is None and not arg.fields
            and not arg.bare and not arg.calls):
        return arg.tags if arg.keyword is None else (arg.keyword, arg.tags)
    return tuple(arg)  # `marshal` writes plain tuples only


def _call_data(call: Call) -> tuple[Any, ...]:
    """A call as `to_data` writes it, as plain values, for the calls' bytes (`cache_data`): a one-file
    run writes its own file's entry, and a long file has thousands of calls."""
    return (*call[:4], tuple(map(_arg_data, call.args)), *call[5:])


_ENCODERS: dict[Any, _Convert] = {Param: to_data, Arg: _arg_data, Call: _call_data}


def _encoder(hint: Any) -> _Convert | None:
    """What turns a field's value into plain values for the cache (`_positional`); None where it is
    plain already (scalars, and tuples and lists of them: `marshal` keeps them as they are)."""
    if hint in _ENCODERS:
        return _ENCODERS[hint]
    if hint in _FIELDS:
        return _positional
    if hint in _SCALARS:
        return None
    origin, args = get_origin(hint), get_args(hint)
    inner = [a for a in args if a is not type(None) and a is not Ellipsis]
    encoders = [_encoder(a) for a in inner]
    if all(e is None for e in encoders):
        return None
    if origin is Union or origin is types.UnionType:
        encode = encoders[0]
        assert encode is not None and len(inner) == 1  # `_converter` refuses other unions at import
        return lambda v: None if v is None else encode(v)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = encoders[0]
        assert item is not None
        return lambda v: tuple(map(item, v))
    if origin is tuple:
        return lambda v: tuple(x if e is None else e(x) for e, x in zip(encoders, v, strict=True))
    item = encoders[0]
    assert origin is list and item is not None
    return lambda v: list(map(item, v))


def _type_hints(classes: tuple[type, ...]) -> dict[type, dict[str, Any]]:
    """What `typing.get_type_hints` gives for each of ``classes`` (tests/test_cache_types.py compares
    them), evaluated as one expression: the annotations are strings (``from __future__ import
    annotations``; a named tuple's are `ForwardRef` objects), and `get_type_hints` compiles each of
    the ~180 apart, a third of this module's import, which every one-file run pays. None of these
    classes inherits annotations, and every name in them is this module's."""
    parts = []
    for cls in classes:
        own = cls.__dict__.get("__annotations__", {})
        # A named tuple keeps its annotations as `ForwardRef` objects, a dataclass as strings.
        texts = {name: getattr(hint, "__forward_arg__", hint) for name, hint in own.items()}
        parts.append("{" + ",".join(f"{name!r}:({text})" for name, text in texts.items()) + "}")
    values = eval("(" + ",".join(parts) + ",)", globals())  # noqa: S307 - this module's own annotations
    return {cls: {name: type(None) if hint is None else hint for name, hint in hints.items()}
            for cls, hints in zip(classes, values)}


_HINTS: dict[type, dict[str, Any]] = _type_hints((*_FIELDS, Arg, Call, Param))
_CALLS = _FIELDS[Function].index("calls")
assert _FIELDS[FileFacts][0] == "functions"  # `cache_data` writes them first
_ENCODE: dict[type, tuple[tuple[int, _Convert], ...]] = {
    cls: tuple((i, e) for i, e in ((i, _encoder(_HINTS[cls][n])) for i, n in enumerate(_FIELDS[cls])) if e is not None)
    for cls in _FIELDS
}
"""Per dataclass, the fields `_positional` converts: those holding dataclasses or named tuples."""
_DECODE: dict[type, tuple[tuple[int, _Convert], ...]] = {cls: _decoders(cls, _HINTS[cls]) for cls in _HINTS}
_STEPS: dict[type, list[tuple[int, _Convert]]] = {cls: [] for cls in _FIELDS}
_BUILD: dict[type, _Convert] = {cls: _builder(cls, steps) for cls, steps in _STEPS.items()}
"""Each dataclass's builder from its cached form; the steps are filled below, once every builder
exists (a field of one dataclass type is built by another's builder)."""
for _cls, _steps in _STEPS.items():
    _steps.extend(_decoders(_cls, _HINTS[_cls], native=True))


def _typed(cls: type, values: list[Any]) -> Any:
    """``cls(*values)`` with each field converted to its annotated type (``values``, a fresh list, is
    converted in place)."""
    n = len(values)
    for i, convert in _DECODE[cls]:
        if i < n:
            values[i] = convert(values[i])
    return cls(*values)
