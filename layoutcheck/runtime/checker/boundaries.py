"""A configured boundary contract around its function: read each call, check B1-B6 and X1, report.

`wrap_boundary(checker, spec, fn, coordinates)` reads ``fn``'s signature once
and refuses (`LayoutSpecError` naming the function, the key, the file and
what is missing) a function that lacks a parameter the contract reads. The
wrapper it returns calls ``fn`` and then, on what the call was given and
returned:

1. evaluates the call's coordinates (``tp``, ``cp``, ``rank``: the boundary's
   sources, else the run's, else the parallel state, else one rank), its
   scheme, its units and each field's ``when``;
2. reads every field (`read_field`), whatever array kind holds it
   (`layoutcheck.runtime.contract.arrays`: tensors, numpy arrays, lists of
   ints, lists of per-sample arrays): shapes and Python ints at once;
   values (a mask's sums, a length or cumulative-length tensor, the data
   the content check compares) from the host (CPU tensors, numpy arrays,
   lists) at once, from device tensors through a snapshot checked at a
   later call (`layoutcheck.runtime.checker.values`); the comparisons over
   plain CPU tensors run on the value-check worker thread by default
   (`layoutcheck.runtime.checker.background`);
3. binds each sample's ``T``, ``R``, ``P`` and checks B1-B5
   (`layoutcheck.runtime.contract.invariants`), B6 and row-padded batches
   (`layoutcheck.runtime.checker.content`);
4. under torch.distributed, exchanges the call's schedule with the other CP
   ranks (X1: sample count, true lengths, padded total, scheme);
5. reports through the checker (raise, warn or record), once per distinct
   violation per rollout.

A call whose ints a clean call had (the same batch shape again) is read by
a plan made at the first clean call (`_BoundaryCalls._fast`): each field's
ints into one key, looked up among the clean calls'; a hit skips the
general reading and B1-B5 (which read nothing but those ints) and goes to
the value checks, which compare each packed stream with its sources by the
pieces worked out once for that clean call (`content.pieces_equal`: every
position of every sample, with no per-sample Python); a stream they do not
confirm is checked as any call's, which names what differs.

Like the role wrappers it returns what ``fn`` returned, raises what it
raised, and keeps no tensor past the call (only snapshots waiting for their
copy). A field it cannot read (a value of a kind no reader knows, a path
that leads nowhere) is a configuration problem, reported once through the
checker (`CheckerState._problem`: the session's set-up ledger, so raise
mode fails) and left out of the checks; any other error of a check is one
note.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import operator
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, Violation, describe_value
from layoutcheck.runtime.checker import background as background_checks
from layoutcheck.runtime.checker import content, values
from layoutcheck.runtime.checker.wrappers import Binder
from layoutcheck.runtime.contract import arrays, invariants
from layoutcheck.runtime.contract.boundary import BoundarySpec, FieldSpec, Source
from layoutcheck.runtime.contract.expressions import MISSING, Expr, entry_attributes
from layoutcheck.runtime.contract.meta import compiling, metadata_only
from layoutcheck.runtime.crossrank.distributed import distributed_ready

if TYPE_CHECKING:
    from layoutcheck.runtime.checker.state import CheckerState

__all__ = ["Coordinates", "check_boundary_signature", "read_field", "sample_count", "wrap_boundary"]

_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


class Coordinates:
    """The run's ``tp``, ``cp`` and CP ``rank`` for a call: configured sources, else the parallel state, else one rank."""

    def __init__(self, *, tp_size: Source | None = None, cp_size: Source | None = None, cp_rank: Source | None = None,
                 cp_group: Source | None = None, parallel_state: Callable[[], Any] | None = None) -> None:
        self.sources = {"tp": tp_size, "cp": cp_size, "rank": cp_rank}
        self.cp_group = cp_group
        """Where the CP process group comes from, for X1 (``None``: the parallel state's, else Megatron's order)."""
        self.parallel_state = parallel_state
        self._loaded: dict[str, Any] = {}
        self._functions: dict[str, Callable[[], Any]] = {}
        self._getters: tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any]] | None = None
        """When ``tp``, ``cp`` and ``rank`` are each a function target found before, with no attribute after it:
        those three functions, called directly by `read` (it runs on every hooked call)."""

    def group(self) -> Any:
        """The CP process group from ``cp_group`` (``None`` when not configured)."""
        return None if self.cp_group is None else self._evaluate(self.cp_group, {})

    @property
    def configured(self) -> bool:
        """Whether any coordinate has a source of its own (else they are the parallel state's, or one rank)."""
        return any(self.sources.values())

    def as_parallel_state(self) -> Callable[[], Any]:
        """A ``get_parallel_state``-like function over these coordinates, for the roles' reader.

        It answers ``.tp.size``, ``.tp.rank`` (0: the roles read the TP size
        only), ``.cp.size``, ``.cp.rank`` and ``.cp.group`` (the ``cp-group``
        source's), as Miles's parallel state does, for a trainer that keeps
        its coordinates elsewhere (``megatron.core.parallel_state``).
        """
        from types import SimpleNamespace

        def parallel_state() -> Any:
            coords = self.read({})
            group = self.group()
            return SimpleNamespace(tp=SimpleNamespace(size=coords["tp"], rank=0),
                                   cp=SimpleNamespace(size=coords["cp"], rank=coords["rank"], group=group))

        return parallel_state

    def over(self, spec: BoundarySpec) -> Coordinates:
        """These coordinates with a boundary's own sources in front."""
        own = {"tp": spec.tp_size, "cp": spec.cp_size, "rank": spec.cp_rank}
        if not any(own.values()):
            return self
        merged = Coordinates(parallel_state=self.parallel_state, cp_group=self.cp_group, **{
            k: own[name] or self.sources[name] for k, name in (("tp_size", "tp"), ("cp_size", "cp"), ("cp_rank", "rank"))})
        return merged

    def read(self, call: Mapping[str, Any]) -> dict[str, int]:
        """``{"tp": ..., "cp": ..., "rank": ...}`` for this call (`LayoutSpecError` for a value that is not an int)."""
        getters = self._getters
        if getters is not None:  # three functions: their answers, checked as below (anything odd: the general path)
            tp, cp, rank = getters[0](), getters[1](), getters[2]()
            if type(tp) is int and type(cp) is int and type(rank) is int and tp >= 1 and 0 <= rank < cp:
                return {"tp": tp, "cp": cp, "rank": rank}
        out: dict[str, int] = {}
        state: Any = None
        for name, source in self.sources.items():
            if source is not None:
                value = self._evaluate(source, call)
            else:
                if state is None and self.parallel_state is not None:
                    state = self.parallel_state()
                group = getattr(state, "cp" if name in ("cp", "rank") else "tp", None)
                value = getattr(group, "rank" if name == "rank" else "size", None) if state is not None else None
                if value is None:
                    value = 0 if name == "rank" else 1
            if type(value) is not int or value < (0 if name == "rank" else 1):
                raise LayoutSpecError(f"the {'CP rank' if name == 'rank' else name + ' size'} must be an int, got "
                                      f"{describe_value(value, 60, quote=True)} from {source.text if source else 'the parallel state'}")
            out[name] = value
        if out["rank"] >= out["cp"]:
            raise LayoutSpecError(f"the CP rank {out['rank']} is not below the CP size {out['cp']}")
        if getters is None:
            found = [self._functions.get(s.text) if s is not None and s.expr is None and not s.attrs else None
                     for s in self.sources.values()]
            if all(found):
                self._getters = tuple(found)  # type: ignore[assignment]
        return out

    def configured_sources(self) -> dict[str, Source]:
        """Every source given as a function target, by its configuration key (``tp-size``, ..., ``cp-group``)."""
        named = {"tp-size": self.sources["tp"], "cp-size": self.sources["cp"], "cp-rank": self.sources["rank"],
                 "cp-group": self.cp_group}
        return {key: s for key, s in named.items() if s is not None and s.target is not None}

    def load(self, source: Source) -> Any:
        """What a function target names (not called); `LayoutSpecError` when its module or attribute is missing."""
        module_name, _, qualname = source.target.partition(":")  # type: ignore[union-attr]
        module = self._loaded.get(module_name)
        try:
            if module is None:
                module = self._loaded[module_name] = importlib.import_module(module_name)
            value: Any = module
            for part in qualname.split("."):  # walked at every call: the attribute may be rebound
                value = getattr(value, part)
        except (ImportError, AttributeError) as err:
            raise LayoutSpecError(f"`{source.text}` cannot be loaded: {err}") from None
        return value

    def _evaluate(self, source: Source, call: Mapping[str, Any]) -> Any:
        if source.expr is not None:
            return source.expr.evaluate(call)
        fn = self._functions.get(source.text)
        if fn is not None:  # a function found before: called again (its answer may change, the function does not)
            value = fn()
            for attr in source.attrs:
                value = getattr(value, attr)
            return value
        value = self.load(source)
        if source.attrs or callable(value):
            if isinstance(value, types.FunctionType | types.BuiltinFunctionType):
                self._functions[source.text] = value
            value = value()
        for attr in source.attrs:
            value = getattr(value, attr)
        return value


def _qualified(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}:{name}" if module else name


def check_boundary_signature(spec: BoundarySpec, fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature, if it has every parameter the contract reads; else `LayoutSpecError` naming what is missing."""
    where = f"cannot hook `{_qualified(fn)}` under its boundary contract"
    if not callable(fn):
        raise LayoutSpecError(f"{where}: it is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise LayoutSpecError(f"{where}: its signature cannot be read ({err})") from None
    params = {name: p for name, p in signature.parameters.items() if p.kind not in _VARIADIC}
    found = ", ".join(signature.parameters) or "no parameters"
    for name, key in spec.parameters().items():
        if name not in params:
            raise LayoutSpecError(
                f"{where}: `{key}` reads the parameter `{name}`, which it does not have; found ({found}). "
                "Name the function's own parameters in the contract"
            )
    return signature


def wrap_boundary(checker: CheckerState, spec: BoundarySpec, fn: Callable[..., Any],
                  coordinates: Coordinates) -> Callable[..., Any]:
    """The checked wrapper of ``fn`` under ``spec`` (see the module docs); refuses a function that does not fit."""
    binder = Binder(check_boundary_signature(spec, fn))
    hook = _BoundaryCalls(checker, spec, coordinates.over(spec))

    @functools.wraps(fn)
    def layoutcheck_boundary(*args: Any, **kwargs: Any) -> Any:
        if compiling():
            return fn(*args, **kwargs)
        hook.poll()
        call = binder.arguments(args, kwargs)
        result = fn(*args, **kwargs)
        if call is None:
            checker._note(spec.target, "a call's arguments did not bind to the signature read when it was hooked",
                          key=f"unbound {spec.target}")
        else:
            checker._checking(spec.target, lambda: hook.after(call, result))
        return result

    layoutcheck_boundary.__layoutcheck_role__ = "boundary"  # type: ignore[attr-defined]
    layoutcheck_boundary.__layoutcheck_checker__ = checker  # type: ignore[attr-defined]
    layoutcheck_boundary.__layoutcheck_boundary__ = hook  # type: ignore[attr-defined]
    return layoutcheck_boundary


# --- reading a field ---------------------------------------------------------------------------------


def _axis(f: FieldSpec, default: int) -> int:
    return f.axis if f.axis is not None else default


def _indices(micro_batch: Any) -> list[int] | None:
    # a schedule's micro-batch: a list of ints, or a 1-D numpy array of them (host memory: read as it is)
    if type(micro_batch).__module__ == "numpy" and arrays.is_array(micro_batch) and len(micro_batch.shape) == 1:
        return arrays.int_list(micro_batch.tolist())
    return arrays.int_list(micro_batch)


def _row_widths(f: FieldSpec, value: Any, shape: tuple[int, ...] | None, listed: list[Any] | None) -> list[int]:
    # A row-padded batch: a (B, S, ...) array, or B rows (lists or arrays) of one width S; S per row.
    if shape is not None and len(shape) >= 2:
        return [int(shape[_axis(f, 1)])] * int(shape[0])
    if listed is not None and shape is None:
        widths = [_entry_length(row, _axis(f, 1) - 1) for row in listed]
        if len(set(widths)) <= 1 and -1 not in widths:
            return widths
    raise arrays.unreadable(f.key, value, "a row-padded batch (a (B, S) tensor or array, or B lists of one width S)")


def _entry_length(entry: Any, axis: int) -> int:
    # one sample's length along its sequence axis (-1: an entry with no shape, which B1 names)
    got = arrays.shape(entry) if entry is not None else None
    return -1 if not got or axis >= len(got) else int(got[axis])


def _entry_lengths(entries: list[Any], axis: int) -> list[int]:
    # `_entry_length` of each entry; a plain torch tensor's length is read off its shape directly (this runs
    # once per sample and field on every call: the general reading builds a tuple per entry)
    torch = sys.modules.get("torch")
    tensor = torch.Tensor if torch is not None else None
    if axis >= 0 and set(map(type, entries)) == {tensor}:  # plain tensors only (the usual call): C-level maps
        try:
            if axis == 0 and set(map(tensor.dim, entries)) == _ONE:  # 1-D: a length is the numel (no torch.Size)
                return list(map(tensor.numel, entries))
            if axis in _AXES:
                return list(map(_AXES[axis], map(_SHAPE, entries)))
            return [entry.shape[axis] for entry in entries]
        except IndexError:  # one with fewer axes: -1 for it, below
            pass
    return [(-1 if not (got := entry.shape) or axis >= len(got) else got[axis]) if type(entry) is tensor
            else _entry_length(entry, axis) for entry in entries]


def _scalars(listed: list[Any]) -> bool:
    """Whether a list holds numbers (one stream's positions), not per-sample entries."""
    return bool(listed) and all(isinstance(v, (int, float)) or arrays.is_int(v) for v in listed[:8]) and \
        isinstance(listed[-1], (int, float))


def read_field(f: FieldSpec, value: Any, scheme: str, *, one: bool) -> tuple[invariants.Reading, list[values.Request]]:
    """What ``value`` shows for field ``f`` (shapes and ints now), and the tensor values it still needs.

    Any kind `layoutcheck.runtime.contract.arrays` reads (torch tensors,
    numpy arrays, lists and tuples of ints, lists of per-sample tensors,
    arrays or lists); another kind raises `~layoutcheck.runtime.contract.arrays.Unreadable`,
    saying what to write instead.
    """
    space = None if f.space is None else f.resolved(scheme)
    r = invariants.Reading(spec=f, space=space, shape="missing")
    if value is MISSING or value is None:
        return r, []
    requests: list[values.Request] = []
    with metadata_only():
        torch = sys.modules.get("torch")
        if torch is not None and type(value) is torch.Tensor:  # the usual field: what `arrays` says of it, directly
            shape, listed = tuple(value.shape), None
        elif type(value) is list:  # per-sample entries, or ints: read now and not kept (no copy needed)
            shape, listed = None, value
        else:
            shape = arrays.shape(value) if arrays.is_array(value) else None
            listed = arrays.entries(value)
        r.seen = shape if shape is not None else type(value).__name__  # described in full only in an error
        if f.holds == "schedule":
            batches = None if listed is None else [_indices(mb) for mb in listed]
            if batches is None or any(b is None for b in batches):
                raise arrays.unreadable(f.key, value, "a schedule (lists of sample indices)")
            r.shape, r.schedule = "schedule", batches  # type: ignore[assignment]
        elif f.holds in ("len", "cu"):
            r.shape = f.holds if f.holds == "cu" else "ints"
            ints = arrays.int_list(value)
            if one and arrays.is_int(value):
                r.lengths = [int(value)]
            elif ints is not None:
                if f.holds == "cu":
                    r.cu = ints
                else:
                    r.lengths = ints
            elif shape is not None and len(shape) == 1 and listed is None:
                requests.append(values.Request(f.key, "ints", value))
            else:
                raise arrays.unreadable(f.key, value, f"{'cumulative lengths' if f.holds == 'cu' else 'lengths'} "
                                        "(a list of ints, or a 1-D integer tensor or array)")
        elif f.holds == "mask":
            r.shape = "mask"
            if listed is not None or (shape is not None and len(shape) in (1, 2)):
                requests.append(values.Request(f.key, "sums", value if not one else [value]))
            else:
                raise arrays.unreadable(f.key, value, "masks (a (B, S) tensor or array, or a list of 1-D masks)")
        elif f.holds == "rows":
            r.shape, r.lengths = "padded rows", _row_widths(f, value, shape, listed)
        elif one:
            if listed is not None and not arrays.is_array(value):  # one sample's values as a list (log-probs, say)
                r.shape, r.lengths = "one", [_entry_length(value, _axis(f, 0))]
            elif shape is None or not shape:
                raise arrays.unreadable(f.key, value, "one sample's data (a tensor, an array or a list)")
            else:
                r.shape, r.lengths = "one", [int(shape[_axis(f, 0)])]
        elif listed is not None and space is not None and space.packed and _scalars(listed):
            r.shape, r.total = "stream", len(listed)  # a packed stream kept as a Python list of numbers
        elif listed is not None:
            r.shape, r.lengths = "list", _entry_lengths(listed, _axis(f, 0))
        elif shape is not None and space is not None and space.packed:
            r.shape, r.total = "stream", int(shape[_axis(f, 1 if len(shape) >= 2 else 0)])
        elif shape is not None and len(shape) >= 2:
            r.shape, r.lengths = "rows", [int(shape[_axis(f, 1)])] * int(shape[0])
        else:
            raise arrays.unreadable(f.key, value, "per-sample data (a list of tensors, arrays or lists, a (B, L) "
                                    "tensor or array, or a packed stream)")
    return r, requests


def sample_count(spec: BoundarySpec, readings: list[invariants.Reading]) -> int:
    """How many samples one call is about: the ``samples`` field's count, else the first argument's (or return's)."""
    if spec.samples == 1:
        return 1
    if spec.samples is not None:
        for r in readings:
            if r.spec.key == spec.samples.text and r.count is not None:  # type: ignore[union-attr]
                return r.count
    for root in ("args", "returns"):
        for r in readings:
            if r.spec.path.root == root and r.count is not None and r.shape not in ("schedule",):
                return r.count
    return 0


# --- one boundary's calls ------------------------------------------------------------------------------


@dataclass
class _Call:
    """What one call showed, kept until its values are read (ints, and the tensors the values come from)."""

    k: int
    where: str
    coords: dict[str, int]
    scheme: str
    units: list[tuple[str, int]]
    tight: bool
    readings: list[invariants.Reading]
    pads: dict[str, Any]
    stream_units: dict[str, int]


_VERDICTS = 256
"""How many clean calls' ints a boundary keeps (`_verdict_key`); the table starts again when full."""
_KEPT_SAMPLES = 1 << 16
"""...and over how many samples in all (a few MB of ints: calls of thousands of samples keep fewer)."""
_MISSES = 32
"""After this many calls in a row whose ints were new, only one call in this many looks its ints up."""


_TENSORS, _TENSOR, _INTS = "tensors", "tensor", "ints"
"""The kinds of field the fast reading reads (`_BoundaryCalls._make_plan`)."""
_UNPLANNED: Any = object()
_ONE_RANK = {"tp": 1, "cp": 1, "rank": 0}
_IS_CPU = operator.attrgetter("is_cpu")
_ONE = {1}
_SHAPE = operator.attrgetter("shape")
_AXES = {axis: operator.itemgetter(axis) for axis in range(4)}
"""An entry's length along a small axis, read off its shape in C (`_BoundaryCalls._fast_key`)."""


def _verdict_key(c: _Call) -> tuple[Any, ...]:
    """Everything B1-B5 read of a call, as one tuple (to hash; one that cannot be hashed is not kept).

    B1-B5 (`_BoundaryCalls._lengths`) are a function of the call's
    coordinates, scheme, units, tightness and stream units and of each
    reading's field, kind, lengths, stream total, cumulative lengths and
    schedule (its space is the field's, resolved by the scheme): two calls
    with equal keys get the same verdict. Only clean verdicts are kept, so
    a call whose ints were seen clean skips B1-B5; any other call runs
    them and names what is wrong. The values (B6, row contents) are never
    kept: each call compares its own.
    """
    coords = c.coords
    parts: list[Any] = [coords["tp"], coords["cp"], coords["rank"], c.scheme, c.tight, tuple(c.units),
                        tuple(c.stream_units.items())]
    for r in c.readings:
        parts += (r.spec.key, r.shape, None if r.lengths is None else tuple(r.lengths), r.total,
                  None if r.cu is None else tuple(r.cu), None if r.schedule is None else tuple(map(tuple, r.schedule)))
    return tuple(parts)


class _BoundaryCalls:
    """The state of one installed boundary: its call count and the checks of each call."""

    def __init__(self, checker: CheckerState, spec: BoundarySpec, coordinates: Coordinates) -> None:
        self.checker = checker
        self.spec = spec
        self.coordinates = coordinates
        self.calls = 0
        self.one = spec.samples == 1
        self.content = [f for f in spec.fields if f.source is not None]
        self._data_keys = tuple((k, "data:" + k) for f in self.content for k in (f.key, f.source.text))  # type: ignore[union-attr]
        self.by_key = {f.key: f for f in spec.fields}
        self.units_by_coordinates = not any(u.parameters for u in spec.units)
        """Whether the units are a function of the coordinates alone (literals, ``tp``, ``cp``): kept per coordinates."""
        self._units: dict[tuple[int, int, int] | None, list[tuple[str, int]]] = {}
        self.rows = [f for f in spec.fields if f.holds == "rows"]
        self._clean: dict[tuple[Any, ...], invariants.Bound] | None = {}
        """The ints of calls that passed B1-B5 (`_verdict_key`) -> their bound lengths; ``None``: not kept."""
        self._missed = 0
        """Calls in a row whose ints were not found in `_clean`."""
        self._kept = 0
        """Samples (plus one a call) of the calls kept in `_clean`: its size in memory, about."""
        self._plan: tuple[Any, ...] | bool | None = None
        """Each field's kind for the fast reading (`_make_plan`); ``None``: not made yet; False: none."""
        self._fast_kept: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        """Clean calls by their fast key (`_fast_key`) -> (readings, bound lengths, sizes, units, tight)."""
        self._fast_missed = 0
        self._fast_samples = 0
        self._plan_groups: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()
        self._owned: frozenset[str] = frozenset()
        self._pads: tuple[tuple[str, Expr], ...] = ()
        self._fast_last: tuple[tuple[Any, ...], tuple[Any, ...]] | None = None
        """The key and readings of the last call the fast reading found (or kept): looked at before `_fast_kept`."""
        self._streamed = [f for f in spec.fields if f.stream_unit is not None]
        self._passed: tuple[invariants.Bound, dict[str, object]] | None = None
        exprs = [*spec.units, spec.tight, spec.scheme] + [e for f in spec.fields for e in (f.pad_value, f.stream_unit, f.when)]
        self.needs_coordinates = spec.cross_rank or any(
            e is not None and e.needs_coordinates for e in exprs) or any(
            f.run_scheme or (f.space is not None and f.space.cp is not None) for f in spec.fields)

    def poll(self) -> None:
        checker = self.checker
        if checker.values_worker is not None and checker.values_worker.has_results:  # found beside the trainer
            checker._checking(self.spec.target, checker.take_values)  # raise mode raises here, before the call
        if checker._deferred.waiting:  # value checks of earlier calls waiting for their copies (a GPU run)
            checker._checking(self.spec.target, lambda: checker._deferred.poll())

    def _eval(self, expr: Expr | None, call: Mapping[str, Any], coords: dict[str, int], default: Any) -> Any:
        return default if expr is None else expr.evaluate(call, coords)

    def after(self, call: Mapping[str, Any], result: Any) -> None:
        fast = None
        if self._plan and self._clean is not None and (self._fast_missed < _MISSES or self.calls % _MISSES == 0):
            fast = self._fast(call, result)
            if fast is None:  # the call was checked from a clean call's readings: done
                return
        self._after(call, result, fast if fast is not _UNPLANNED else None)

    def _after(self, call: Mapping[str, Any], result: Any, fast_key: tuple[Any, ...] | None) -> None:
        spec, checker = self.spec, self.checker
        if spec.cross_rank:
            checker._step_opens(spec.target)
        self.calls += 1
        checker.checked["boundary calls"] += 1
        coords = self.coordinates.read(call) if self.needs_coordinates else {"tp": 1, "cp": 1, "rank": 0}
        scheme = geometry.check_scheme(self._eval(spec.scheme, call, coords, "zigzag"))
        memo = (coords["tp"], coords["cp"], coords["rank"]) if self.units_by_coordinates else None
        units = self._units.get(memo) if memo is not None else None
        if units is None:
            units = []
            for u in spec.units:
                value = u.evaluate(call, coords)
                if type(value) is not int or value < 1:
                    raise LayoutSpecError(f"unit `{u.text}` is {describe_value(value, 40, quote=True)}, not a positive int")
                units.append((u.text, value))
            if memo is not None and len(self._units) < 64:
                self._units[memo] = units
        tight = bool(self._eval(spec.tight, call, coords, True))
        readings, requests, pads, stream_units = [], [], {}, {}
        field_values: dict[str, Any] = {}  # each field's value as read here, for the value checks below
        for f in spec.fields:
            if f.when is not None and not f.when.evaluate(call, coords):
                continue
            value = field_values[f.key] = f.path.read(call, result)
            try:
                reading, needed = read_field(f, value, scheme, one=self.one)
            except arrays.Unreadable as err:
                self._unreadable(f, err)
                continue
            if reading.shape == "missing":
                if value is MISSING:  # the path leads nowhere: the contract names what the call does not hold
                    self._unreadable(f, arrays.Unreadable(
                        f"`{f.key}` leads nowhere in this call: {f.path.explain(call, result)}; write the path of "
                        "the value (or `when = ...` for a field that is only sometimes there)"))
                else:
                    checker._note(spec.target, f"`{f.key}` is None in this call, so it was not checked",
                                  key=f"absent {spec.target} {f.key}")
                continue
            readings.append(reading)
            requests += needed
            if f.pad_value is not None:
                pads[f.key] = f.pad_value.evaluate(call, coords)
            if f.stream_unit is not None:
                stream_units[f.key] = f.stream_unit.evaluate(call, coords)
        wanted: list[str] = []
        for f in self.content:  # the data each content check compares, and its source's mask
            if any(r.spec is f for r in readings):
                wanted += [f.key, f.source.text] + [m.mask.text for m in spec.fields if m.key == f.source.text and m.mask]
        for f in self.rows:  # a row-padded batch: its mask (where its true positions are), its pads
            if any(r.spec is f for r in readings):
                wanted += ([f.mask.text] if f.mask is not None else []) + ([f.key] if f.pad_value is not None else [])
        for key in dict.fromkeys(wanted):
            value = field_values.get(key, MISSING)
            if value is MISSING:  # a field left out by its `when` (a source or a mask): read for the values alone
                value = self.by_key[key].path.read(call, result)
            if value is not MISSING and value is not None:
                requests.append(values.Request("data:" + key, "data", value))
        where = f"{spec.target} (call {self.calls})"
        pending = _Call(self.calls, where, coords, scheme, units, tight, readings, pads, stream_units)
        found = self._cross_rank(pending)  # queued on every rank, exchanged at the step boundary
        device = [r for r in requests if not values.on_host(r)]
        # host values (CPU tensors, numpy arrays, lists) are read now; device tensors through a snapshot
        now = self._read_values([r for r in requests if not any(d is r for d in device)])
        if not device:
            self._passed = None
            # the worker takes the value checks only when what they read are the call's own tensors (a numpy array
            # shared with torch, or a list made into a tensor, would hide an in-place change from the counters)
            torch = sys.modules.get("torch")
            watch = torch is not None and all(
                background_checks.watchable(r.value, torch.Tensor) is not None for r in requests if r.kind == "data")
            found += self._finish(pending, now, background=watch)
            if self._plan is None and self._passed is not None:  # the first clean call: what a fast reading reads
                self._plan = self._make_plan(pending.readings, field_values)
                fast_key = self._fast_key(call, result)[0] if self._plan else None
            if fast_key is not None and self._passed is not None:
                self._keep_fast(fast_key, pending, *self._passed)
        else:
            try:
                snap = values.snapshot(device)
            except LayoutSpecError as err:
                checker._note(spec.target, err, key=f"no snapshot {spec.target}")
            else:
                if not checker._deferred.add(snap, lambda got: checker._report(self._finish(pending, {**now, **got}))):
                    checker._note(spec.target, "value checks waited for more than 64 calls of copies and the oldest "
                                  "were dropped unchecked", key=f"dropped {spec.target}")
        checker._report(found)

    def _read_values(self, requests: list[values.Request]) -> dict[str, Any]:
        # Host values, one request at a time: a field whose value cannot be read leaves only itself out.
        got: dict[str, Any] = {}
        for r in requests:
            try:
                got.update(values.read([r]))
            except arrays.Unreadable as err:
                key = r.key.removeprefix("data:")
                self._unreadable(next((x for x in self.spec.fields if x.key == key), None), err)
        return got

    def _unreadable(self, f: FieldSpec | None, err: arrays.Unreadable) -> None:
        # A value of a kind the contract cannot read: a configuration problem, said once per field, and that
        # field (only) is left out of every call's checks.
        spec = self.spec
        key = f"{spec.key}.{f.key}" if f is not None else spec.key
        self.checker._problem(key, spec.source_file, f"{spec.target}: {err}")

    # --- after the values are known -------------------------------------------------------

    def _finish(self, c: _Call, got: Mapping[str, Any], *, background: bool = False) -> list[Violation]:
        # B1-B5 now; the value checks too, or on the worker thread with ``background`` (host values read in the call).
        # `_passed`: the bound lengths and sizes when B1-B5 found nothing (for the fast reading, `_keep_fast`)
        for r in c.readings:
            value = got.get(r.spec.key)
            if value is None:
                continue
            ints = [int(v) for v in value] if isinstance(value, list) else [int(value)]
            if r.spec.holds == "cu":
                r.cu = ints
            else:
                r.lengths = ints
        sizes: dict[str, object] = {}
        if c.coords["cp"] > 1 or any(r.space is not None and (r.space.cp is not None) for r in c.readings):
            sizes = {"cp": c.coords["cp"], "r": c.coords["rank"], "scheme": c.scheme}
        # calls whose ints never repeat (each step's new lengths) stop paying for the key: after _MISSES misses in a
        # row it is made on one call in _MISSES only, until one of them finds its ints again
        key = _verdict_key(c) if self._clean is not None and (self._missed < _MISSES or c.k % _MISSES == 0) else None
        try:
            bound = self._clean.get(key) if key is not None else None  # type: ignore[union-attr]
        except TypeError:  # something in the readings is not hashable: checked in full, not kept
            key = bound = None
        if bound is not None:  # these ints passed B1-B5 before, and B1-B5 read nothing else: only the values are left
            self._missed = 0
            self._passed = (bound, sizes)
            return self._values(c, got, bound, sizes, background)
        if key is not None:
            self._missed += 1
        found, bound = self._lengths(c, sizes)
        if key is not None and not found:
            self._kept += bound.n + 1
            if len(self._clean) >= _VERDICTS or self._kept > _KEPT_SAMPLES:  # type: ignore[arg-type]
                self._clean.clear()  # type: ignore[union-attr]
                self._kept = bound.n + 1
            self._clean[key] = bound  # type: ignore[index]
        if not found:
            self._passed = (bound, sizes)
        if not any(v.invariant in ("B1", "B5") and v.field.startswith("returns") for v in found):
            found += self._values(c, got, bound, sizes, background)
        return found

    # --- the fast reading: a call whose ints a clean call showed, read with no general reading --------------

    def _make_plan(self, readings: list[invariants.Reading], field_values: Mapping[str, Any]) -> tuple[Any, ...] | bool:
        # Each field's kind as the first clean call showed it, when every field is one the fast reading reads
        # exactly as `read_field` does (else False: every call is read in full): a list of plain tensors (its
        # entries' lengths), a plain tensor (its shape), a list of Python ints. No `when`, masks, rows, schedules,
        # one-sample contracts, units read from the call, nor value requests (their ints change a reading later).
        spec = self.spec
        torch = sys.modules.get("torch")
        if (torch is None or self.one or self.rows or not self.units_by_coordinates
                or len(readings) != len(spec.fields)):
            return False
        plan = []
        for f, r in zip(spec.fields, readings):
            value = field_values.get(f.key, MISSING)
            if r.spec is not f or f.when is not None or f.mask is not None or f.holds in ("mask", "rows", "schedule"):
                return False
            if r.shape == "list" and type(value) is list and set(map(type, value)) == {torch.Tensor}:
                plan.append((f, _TENSORS, f.path.compiled(), _axis(f, 0)))
            elif r.shape == "stream" and type(value) is torch.Tensor:
                plan.append((f, _TENSOR, f.path.compiled(), 0))
            elif r.shape in ("ints", "cu") and type(value) is list and set(map(type, value)) == {int}:
                plan.append((f, _INTS, f.path.compiled(), 0))
            else:
                return False
        groups: dict[str, list[FieldSpec]] = {}  # `args.P.*.name` fields by P: P's entries looked at once a call
        for f, kind, _, _ in plan:
            parts = f.path.parts
            if kind is _TENSORS and f.path.root == "args" and len(parts) == 3 and parts[1] == "*" and isinstance(parts[2], str):
                groups.setdefault(parts[0], []).append(f)  # type: ignore[arg-type]
        self._plan_groups = tuple((name, tuple(f.key for f in fs), tuple(f.path.parts[2] for f in fs))
                                  for name, fs in groups.items() if len(fs) > 1)
        self._owned = frozenset(f.key for fs in groups.values() for f in fs)  # a list the reading made: not copied
        self._pads = tuple((f.key, f.pad_value) for f in spec.fields if f.pad_value is not None)
        kinds = {f.key: kind for f, kind, _, _ in plan}
        if any(kinds.get(k) not in (_TENSORS, _TENSOR) for f in self.content
               for k in (f.key, f.source.text)):  # type: ignore[union-attr]
            return False  # B6 over values the fast reading does not hold as tensors: read in full
        return tuple(plan)

    def _fast_key(self, call: Mapping[str, Any], result: Any) -> tuple[Any, Any, Any, Any, Any]:
        # (key, field values, coordinates, scheme, stream units) of this call, or (None, ...) when a field is not
        # of its planned kind. The key holds everything B1-B5 read (`_verdict_key`'s ints): the coordinates,
        # tightness, scheme and stream units, and each field's ints as `read_field` reads them, one tuple a field in
        # the plan's order (entries' lengths along the axis, a tensor's whole shape, the ints of a list; a tuple's
        # length is the field's count), so equal keys give equal readings. Every entry is read by C-level maps
        # (`map(attrgetter("shape"))`, `map(itemgetter(axis))`): this runs on every hooked call, just after the
        # function's own work has pushed the samples out of cache, and a Python loop per entry costs twice as much
        spec = self.spec
        coords = self.coordinates.read(call) if self.needs_coordinates else _ONE_RANK
        scheme = "zigzag" if spec.scheme is None else geometry.check_scheme(spec.scheme.evaluate(call, coords))
        tight = True if spec.tight is None else bool(spec.tight.evaluate(call, coords))
        stream_units = {f.key: f.stream_unit.evaluate(call, coords) for f in self._streamed} if self._streamed else {}
        parts: list[Any] = [scheme, coords["tp"], coords["cp"], coords["rank"], tight, tuple(stream_units.items())]
        read: dict[str, Any] = {}
        for name, keys, names in self._plan_groups:  # several fields of one list: its entries' class looked at once
            rows = entry_attributes(call.get(name, MISSING), names)
            if rows is not None:
                read.update(zip(keys, rows))
        torch = sys.modules["torch"]
        tensor = torch.Tensor
        plain, ints = {tensor}, {int}
        dim, numel = tensor.dim, tensor.numel
        with torch._C.DisableTorchFunction():  # `metadata_only()`, without its look-ups
            for f, kind, reader, axis in self._plan:  # type: ignore[union-attr]
                value = read[f.key] if f.key in read else reader(call, result)
                read[f.key] = value
                if kind is _TENSORS:
                    if type(value) is not list or set(map(type, value)) != plain:
                        return None, read, coords, scheme, stream_units
                    try:
                        if axis == 0 and set(map(dim, value)) == _ONE:  # 1-D entries: a length is the entry's numel
                            parts.append(tuple(map(numel, value)))  # (an int, where `.shape` builds a torch.Size)
                        else:
                            parts.append(tuple(map(_AXES[axis], map(_SHAPE, value))) if axis in _AXES
                                         else tuple(e.shape[axis] for e in value))
                    except IndexError:  # an entry without that axis: the full reading names it
                        return None, read, coords, scheme, stream_units
                elif kind is _TENSOR:
                    if type(value) is not tensor:
                        return None, read, coords, scheme, stream_units
                    parts.append(value.shape)  # a torch.Size: a tuple, compared and hashed as one
                else:
                    if type(value) is not list or set(map(type, value)) != ints:
                        return None, read, coords, scheme, stream_units
                    parts.append(tuple(value))
        return tuple(parts), read, coords, scheme, stream_units

    def _fast(self, call: Mapping[str, Any], result: Any) -> Any:
        # A call whose key a clean call had: its readings, bound lengths and units are that call's, so B1-B5 pass
        # (they read nothing else); the value checks still compare this call's own values. ``None`` when done,
        # else the key to keep if the full check passes (`_UNPLANNED`: no key).
        spec, checker = self.spec, self.checker
        try:
            key, read, coords, scheme, stream_units = self._fast_key(call, result)
        except Exception:  # noqa: BLE001 - anything odd is the full check's to judge and name
            return _UNPLANNED
        if key is None:
            return _UNPLANNED
        last = self._fast_last
        if last is not None and key == last[0]:  # the same batch shape as the last call read (one comparison, no hash)
            kept = last[1]
        else:
            try:
                kept = self._fast_kept.get(key)
            except TypeError:  # an unhashable value in the key (a stream unit): never kept
                return _UNPLANNED
            if kept is not None:
                self._fast_last = (key, kept)
        if kept is None:
            self._fast_missed += 1
            return key
        if spec.cross_rank and coords["cp"] != 1 and checker.cross_rank is not None and (
                checker._boundary_checker or (checker._boundary_checker is None and distributed_ready())):
            return key  # X1 is exchanged for this call: the full check queues it
        got: dict[str, Any] = {}
        tensors: list[Any] = []
        owned = self._owned
        for k, data in self._data_keys:  # the data B6 compares: plain tensors (the plan's kinds), on the host
            value = read[k]
            if type(value) is list:
                tensors += value
                if k not in owned:
                    value = list(value)  # the worker reads it later: the trainer may refill its own list
            else:
                tensors.append(value)
            got[data] = value
        if not all(map(_IS_CPU, tensors)):  # device tensors: the full check takes a snapshot
            return key
        self._fast_missed = 0
        readings, bound, sizes, units, tight, pieces = kept
        if spec.cross_rank:
            checker._step_opens(spec.target)
        self.calls += 1
        checker.checked["boundary calls"] += 1
        if got:
            pads = {key: expr.value if expr.code is None else expr.evaluate(call, coords) for key, expr in self._pads}
            k = self.calls
            worker = checker.values_worker
            try:
                version = background_checks.version_sum(tensors) if worker is not None else None
            except RuntimeError:  # an inference tensor keeps no version counter: checked in the call
                version = None

            def make_call() -> _Call:  # the call's record, made only where a check needs it
                return _Call(k, f"{spec.target} (call {k})", coords, scheme, units, tight, readings, pads, stream_units)

            if version is None:
                if worker is None:
                    checker._report(self._fast_content(make_call, got, bound, sizes, pads, pieces))
                else:  # values the worker cannot watch: here, one value check at a time
                    with worker.lock:
                        checker._report(self._fast_content(make_call, got, bound, sizes, pads, pieces))
            else:  # the value checks as a job, made here from what the fast reading already knows of these tensors;
                # the call's record (`_Call`) is made by the worker, from values taken now
                job = background_checks.Job(spec.target, lambda: self._fast_content(
                    make_call, got, bound, sizes, pads, pieces), tensors, version)
                if not worker.submit(job):  # type: ignore[union-attr]
                    checker._report(checker._outcomes([worker.run_here(job)]))  # type: ignore[union-attr]
        return None

    def _keep_fast(self, key: tuple[Any, ...], c: _Call, bound: invariants.Bound, sizes: dict[str, object]) -> None:
        # A clean call's readings by its fast key, within the verdict table's limits
        self._fast_samples += bound.n + 1
        if len(self._fast_kept) >= _VERDICTS or self._fast_samples > _KEPT_SAMPLES:
            self._fast_kept.clear()
            self._fast_last = None
            self._fast_samples = bound.n + 1
        kept = self._fast_kept[key] = (c.readings, bound, sizes, c.units, c.tight, {})  # {}: its streams' pieces
        self._fast_last = (key, kept)

    def _values(self, c: _Call, got: Mapping[str, Any], bound: invariants.Bound, sizes: dict[str, object],
                background: bool) -> list[Violation]:
        # The value checks (B6, rows' contents): in the call, or queued for the worker thread when every value they
        # read is a plain CPU tensor whose in-place changes its version counter shows (`background`)
        if not self.content and not self.rows:
            return []
        worker = self.checker.values_worker
        if worker is None:
            return self._content(c, got, bound, sizes) + self._rows(c, got, bound, sizes)
        job = self._job(c, got, bound, sizes) if background else None
        if job is None:  # values the worker cannot watch (numpy, lists, a snapshot's copies): here, one check at a time
            with worker.lock:
                return self._content(c, got, bound, sizes) + self._rows(c, got, bound, sizes)
        if worker.submit(job):
            return []
        return self.checker._outcomes([worker.run_here(job)])  # the queue is full: checked here, nothing dropped

    def _job(self, c: _Call, got: Mapping[str, Any], bound: invariants.Bound,
             sizes: dict[str, object]) -> background_checks.Job | None:
        # The call's value checks as a job for the worker: the data they read (lists copied: a trainer may refill
        # its own list after the call; tensors referenced, not copied) and their version counters now
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        held: dict[str, Any] = {}
        tensors: list[Any] = []
        for key, value in got.items():
            if key.startswith("data:"):
                watched = background_checks.watchable(value, torch.Tensor)
                if watched is None:
                    return None
                tensors += watched
                value = list(value) if type(value) is list else value
            held[key] = value
        try:
            version = background_checks.version_sum(tensors)
        except RuntimeError:  # an inference tensor keeps no version counter: checked in the call
            return None
        return background_checks.Job(
            self.spec.target, lambda: self._content(c, held, bound, sizes) + self._rows(c, held, bound, sizes), tensors, version)

    def _lengths(self, c: _Call, sizes: dict[str, object]) -> tuple[list[Violation], invariants.Bound]:
        # B1-B5 over the call's ints (lengths, cumulative lengths, stream totals, schedules, units, coordinates)
        n = self._count(c.readings)
        args = [r for r in c.readings if r.spec.path.root == "args"]
        rets = [r for r in c.readings if r.spec.path.root == "returns"]
        # both sides say lengths: their order (B5); one sample cannot come back in another order
        both = n > 1 and any(r.spec.binds for r in rets) and any(r.spec.binds for r in args)
        if both:
            inputs, conflicts = invariants.bind(args, n, c.where, sizes)
            outputs, _ = invariants.bind(rets, n, c.where, sizes)
        else:
            inputs = outputs = invariants.Bound(n=n)
        found = invariants.check_samples_kept(inputs, outputs, c.readings, n, c.where, sizes)
        reordered = any(v.invariant == "B5" and v.sample is not None for v in found)
        if both:  # the returns bound on top of the arguments: what binding them all at once gives
            bound, more = invariants.bind(rets, n, c.where, sizes, start=inputs)
            conflicts += more
        else:
            bound, conflicts = invariants.bind(args + rets, n, c.where, sizes)
        if reordered:  # the returns' lengths are the arguments' in another order: said once, as B5
            conflicts = [v for v in conflicts if not v.field.startswith("returns")]
        found += conflicts
        if c.units:
            invariants.derive_padded(bound, math.lcm(*(u for _, u in c.units)))
        fields = invariants.check_fields(c.readings, bound, cp=c.coords["cp"], rank=c.coords["rank"], where=c.where,
                                         sizes=sizes, stream_units=c.stream_units)
        found += [v for v in fields if not (reordered and v.field.startswith("returns"))]
        found += invariants.check_padding(bound, c.units, c.tight, c.where, sizes)
        for r in c.readings:
            if r.shape == "schedule":
                found += invariants.check_schedule(r, n or None, c.where, sizes)
        return found, bound

    def _rows(self, c: _Call, got: Mapping[str, Any], bound: invariants.Bound,
              sizes: dict[str, object]) -> list[Violation]:
        # Row-padded batches: each row's mask marks its T_i true positions flush on the side away from the pads,
        # and (with `from` or a pad value) the row holds the sample's data there and pads elsewhere.
        out: list[Violation] = []
        for f in self.rows:
            reading = next((r for r in c.readings if r.spec is f), None)
            if reading is None or reading.space is None:
                continue
            trues = [None if bound.sample(i) is None else invariants.sample_length(reading.space, bound.sample(i))
                     for i in range(bound.n)]
            mask = got.get("data:" + f.mask.text) if f.mask is not None else None
            data = got.get("data:" + f.key)
            sources = None
            if f.source is not None:
                source_field = next(x for x in self.spec.fields if x.key == f.source.text)
                sources = self._source_samples(source_field, got, bound)
                data = got.get("data:" + f.key)
            layout = content.RowLayout(space=reading.space, pad_value=c.pads.get(f.key), axis=_axis(f, 1))
            out += content.check_rows(data, mask, trues, sources, layout, key=f.key,
                                      mask_key=f.mask.text if f.mask is not None else None,
                                      source_key=f.source.text if f.source is not None else None,
                                      where=c.where, space_text=reading.described, sizes=sizes)
        return out

    def _source_samples(self, source_field: FieldSpec, got: Mapping[str, Any], bound: invariants.Bound) -> list[Any] | None:
        # Each sample's data of a `from` field, on the host: a row-padded source is cut to its true positions.
        source = got.get("data:" + source_field.key)
        if source is None:
            return None
        mask = got.get("data:" + source_field.mask.text) if source_field.mask is not None else None
        if source_field.holds == "rows" and mask is None and source_field.space is not None:
            lengths = [None if bound.sample(i) is None else invariants.sample_length(source_field.space, bound.sample(i))
                       for i in range(bound.n)]
            return content.row_samples(source, lengths, source_field.space.pad_side or "right",
                                       _axis(source_field, 1))
        return content.source_samples(source, mask, n=bound.n, axis=source_field.axis, one=self.one)

    def _count(self, readings: list[invariants.Reading]) -> int:
        return sample_count(self.spec, readings)

    def _content(self, c: _Call, got: Mapping[str, Any], bound: invariants.Bound, sizes: dict[str, object],
                 only: list[FieldSpec] | None = None) -> list[Violation]:
        # B6 over every field with a `from` (``only``: those fields)
        out: list[Violation] = []
        for f in self.content if only is None else only:
            reading = next((r for r in c.readings if r.spec is f), None)
            target = got.get("data:" + f.key)
            source_field = next(x for x in self.spec.fields if x.key == f.source.text)  # type: ignore[union-attr]
            source = got.get("data:" + source_field.key)
            if (reading is None or target is None or source is None or reading.space is None
                    or source_field.space is None or f.holds == "rows"):
                continue  # a row-padded target: `_rows`
            samples = self._source_samples(source_field, got, bound)
            if samples is None:
                continue
            layout = self._layout(c, f, reading, source_field, target)
            packed = reading.shape == "stream"
            counts = self._source_counts(c, source_field, source) if packed else None
            if packed and content.clean_stream(target, samples, bound.columns.get("T") or [None] * bound.n,
                                               bound.columns.get("P") or [None] * bound.n, layout, counts=counts):
                continue  # the whole stream equals its samples laid out (the clean call: no lengths objects made)
            lengths = bound.samples()  # made once per call, shared by the fields
            out += content.check_content(
                target, samples, lengths, layout, key=f.key, source_key=source_field.key, where=c.where,
                space_text=reading.described, packed=reading.shape == "stream", sizes=sizes, one=self.one,
            )
        return out

    def _layout(self, c: _Call, f: FieldSpec, reading: invariants.Reading, source_field: FieldSpec,
                target: Any) -> content.Layout:
        # How the call lays field `f`'s samples out (B6)
        return content.Layout(
            space=reading.space, source_space=source_field.resolved(c.scheme), cp=c.coords["cp"],  # type: ignore[arg-type]
            rank=c.coords["rank"], pad_value=c.pads.get(f.key, 0), stream_unit=c.stream_units.get(f.key, 1),
            axis=_axis(f, (1 if target.dim() >= 2 else 0) if reading.shape == "stream" else 0),
        )

    def _source_counts(self, c: _Call, source_field: FieldSpec, source: Any) -> list[int] | None:
        # the sources' lengths, read with the source field's shape from these same entries: not read again
        if type(source) is list and not source_field.axis and source_field.mask is None:
            held = next((r for r in c.readings if r.spec is source_field), None)
            if held is not None and held.shape == "list" and held.lengths is not None:
                return held.lengths
        return None

    def _fast_content(self, make_call: Callable[[], _Call], got: Mapping[str, Any], bound: invariants.Bound,
                      sizes: dict[str, object], pads: Mapping[str, Any], pieces: dict[str, Any]) -> list[Violation]:
        # B6 of a call the fast reading found: each packed stream compared by the pieces kept with the clean call's
        # ints (`content.pieces_equal`: no per-sample Python, none of the checks those ints settle); a field they do
        # not confirm (a difference, a dtype, no pieces) is checked as any call's field, which names what differs
        rest: list[FieldSpec] = []
        c: _Call | None = None
        for f in self.content:
            plan = pieces.get(f.key, _UNPLANNED)
            if plan is _UNPLANNED:
                c = c or make_call()
                plan = pieces[f.key] = self._stream_pieces(c, f, got, bound)
            if plan is None or not content.pieces_equal(got["data:" + f.key],
                                                        got["data:" + f.source.text],  # type: ignore[union-attr]
                                                        plan, pads.get(f.key, 0)):
                rest.append(f)
        return self._content(c or make_call(), got, bound, sizes, only=rest) if rest else []

    def _stream_pieces(self, c: _Call, f: FieldSpec, got: Mapping[str, Any],
                       bound: invariants.Bound) -> content.StreamPieces | None:
        # A packed field's expected stream as pieces, for this clean call's geometry (None: a field they do not fit)
        reading = next((r for r in c.readings if r.spec is f), None)
        source_field = self.by_key.get(f.source.text)  # type: ignore[union-attr]
        target = got.get("data:" + f.key)
        if (reading is None or reading.shape != "stream" or reading.space is None or source_field is None
                or source_field.space is None or target is None):
            return None
        counts = self._source_counts(c, source_field, got.get("data:" + source_field.key))
        if counts is None:
            return None
        return content.stream_pieces(target, bound.columns.get("T") or [None] * bound.n,
                                     bound.columns.get("P") or [None] * bound.n,
                                     self._layout(c, f, reading, source_field, target), counts)

    # --- across ranks ----------------------------------------------------------------------

    def _cross_rank(self, c: _Call) -> list[Violation]:
        if not self.spec.cross_rank or c.coords["cp"] == 1:
            return []
        agreement = self.checker._boundary_agreement(c.coords, self.coordinates.group)
        if agreement is None:
            return []
        n = self._count(c.readings)
        totals = next((r.lengths for r in c.readings if r.spec.binds == "T" and r.lengths is not None
                       and len(r.lengths) == n), None)
        padded = next((sum(r.lengths) for r in c.readings if r.spec.binds == "P" and r.lengths is not None), None)
        if padded is None:
            padded = next((r.total for r in c.readings if r.shape == "stream"), None)
        schedule = next((r.schedule for r in c.readings if r.schedule is not None), None)
        order = None if schedule is None else [i for mb in schedule for i in mb]
        return agreement.check_boundary(c.k, count=n, padded=padded, lengths=totals, scheme=c.scheme,
                                        where=self.spec.target, order=order)

