"""B6, each segment holds its sample: a field's values against the layout of its ``from`` field.

A field configured with ``from = "args.x"`` says that it lays out the
samples of ``args.x`` in its own space. On host values (a CPU tensor, or a
device tensor's snapshot, `layoutcheck.runtime.checker.values`) the expected
layout of each sample is built from the source with the geometry model:

1. the source sample (a list entry, a row selected by its ``mask``, or the
   one tensor of a one-sample call), moved to its sequence axis;
2. shifted as the target's space says relative to the source's
   (``+1``: the first position dropped, ``-1``: the last);
3. padded to the sample's ``P`` with the pad value when the target is in
   ``P`` and the source is not (on the pad side, right by default), then to
   the zigzag's materialised length;
4. cut to this rank's ranges under CP (`layoutcheck.geometry.rank_ranges`);
5. for a packed stream, concatenated, the tail padded to the stream unit
   (all-gather: the global stream padded to ``cp`` times the unit, then
   this rank's window).

Each sample's part is compared with the target's segment at the same
offsets; the first position that differs is named (its value, and whether a
pad or a true token was expected). A part that holds *another* sample's data
is a reordering (B5). The same code runs on CPU tensors at once and on
snapshots later; it needs torch (loaded: the values are tensors).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import Violation
from layoutcheck.runtime.contract.invariants import HINTS, hint
from layoutcheck.spaces import SampleLengths, Space

__all__ = ["Layout", "RowLayout", "StreamPieces", "check_content", "check_rows", "clean_stream", "equal", "pieces_equal",
           "row_samples", "source_samples", "stream_pieces"]


@dataclass(frozen=True)
class Layout:
    """How the target lays each sample out: its space, the rank, the pad value and the stream unit."""

    space: Space
    source_space: Space
    cp: int
    rank: int
    pad_value: Any = 0
    """The pad value; anything but a number (a function that pads, say) leaves pad positions unchecked."""
    stream_unit: int = 1
    axis: int = 0
    """The target tensor's sequence axis."""


def _torch() -> Any:
    return sys.modules["torch"]


def source_samples(value: Any, mask: Any, *, n: int, axis: int | None, one: bool) -> list[Any] | None:
    """Each sample's data of a source field, on the host, with its sequence axis first (``None``: not readable)."""
    torch = _torch()
    if one:
        return [value.movedim(axis or 0, 0)]
    if isinstance(value, (list, tuple)):
        if not axis:  # already sequence-first: the entries as they are (a view of each would be the same data)
            return list(value)
        return [None if v is None else v.movedim(axis, 0) for v in value]
    if mask is not None:  # rows selected by a mask: input_ids[i, attention_mask[i]]
        rows = value.movedim(axis if axis is not None else 1, 1)
        return [rows[i][mask[i].to(torch.bool)] for i in range(min(n, rows.shape[0]))]
    rows = value.movedim(axis if axis is not None else 1, 1)
    return [rows[i] for i in range(min(n, rows.shape[0]))]


def _expected_part(data: Any, sample: SampleLengths, layout: Layout) -> tuple[Any, int] | None:
    # (the sample laid out in the target's space before CP, its true length there), or None when P is unknown
    torch = _torch()
    shift = layout.space.shift - layout.source_space.shift
    if shift > 0:
        data = data[shift:]
    elif shift < 0:
        data = data[:shift]
    true = data.shape[0]
    length = true
    if layout.space.basis == "P" and layout.source_space.basis != "P":
        if sample.padded is None:
            return None
        length = sample.padded
    cp_part = layout.space.cp
    if cp_part is not None and layout.cp > 1 and cp_part.scheme == "zigzag":
        length = max(length, geometry.materialised_length(length, layout.cp, "zigzag"))
    if length > true:
        pad = torch.full((length - true, *data.shape[1:]), _pad(layout), dtype=data.dtype)
        data = torch.cat([pad, data] if layout.space.pad_side == "left" else [data, pad])
    return data, true


def _pad(layout: Layout) -> Any:
    return layout.pad_value if _numeric(layout.pad_value) else 0


def _numeric(value: object) -> bool:
    return isinstance(value, (bool, int, float))


def _rank_part(full: Any, layout: Layout) -> Any:
    cp_part = layout.space.cp
    if cp_part is None or layout.cp == 1:
        return full
    ranges = geometry.rank_ranges(full.shape[0], layout.cp, layout.rank, cp_part.scheme)
    return _torch().cat([full[a:b] for a, b in ranges])


def _first_difference(seen: Any, want: Any, compared: Any = None) -> int | None:
    # ``compared``: a boolean per position of the part, the ones to compare (None: all)
    torch = _torch()
    n = min(seen.shape[0], want.shape[0])
    if n:
        diff = (seen[:n].to(want.dtype) != want[:n]).reshape(n, -1).any(dim=1)
        if compared is not None:
            diff &= compared[:n]
        where = torch.nonzero(diff)  # host tensors only: no device is involved
        if where.shape[0]:
            return int(where[0, 0])
    return None if seen.shape[0] == want.shape[0] else n


def _value(t: Any, i: int) -> object:
    if i >= t.shape[0]:
        return "nothing (the part ends here)"
    v = t[i]
    if v.dim() == 0:
        return v.item()
    # a position that is a row (a (T, k) sample's k experts): its values when few (host tensors only)
    return v.tolist() if v.numel() <= 8 else f"a row of shape {tuple(v.shape)}"


def check_content(
    target: Any,
    sources: Sequence[Any],
    samples: Sequence[SampleLengths | None],
    layout: Layout,
    *,
    key: str,
    source_key: str,
    where: str,
    space_text: str,
    packed: bool,
    sizes: dict[str, object],
    one: bool = False,
) -> list[Violation]:
    """B6 (and B5 for a part holding another sample's data) for one field of one call, on host values.

    ``target`` is the field's value: a packed stream (``packed``), one
    sample's tensor (``one``), or a list of per-sample tensors.
    """
    torch = _torch()
    if packed and _clean_stream(target, sources, samples, layout):
        return []  # the whole stream equals its samples laid out: no part to name
    parts: list[Any] = []
    trues: list[int] = []
    for data, sample in zip(sources, samples):
        built = None if data is None or sample is None else _expected_part(data, sample, layout)
        if built is None:
            return []  # a sample without the lengths its layout needs: B1/B2 say why
        parts.append(built[0])
        trues.append(built[1])
    seen_all = target.movedim(layout.axis, 0) if packed else None
    if packed and seen_all is not None and layout.axis != 0 and seen_all.dim() > 1 and seen_all.shape[1] == 1:
        seen_all = seen_all[:, 0]  # a (1, N) stream: its one row
    cp_part = layout.space.cp
    if packed and cp_part is not None and cp_part.scheme == "allgather" and layout.cp > 1:
        return _check_window(seen_all, parts, trues, layout, key=key, source_key=source_key, where=where,
                             space_text=space_text, sizes=sizes)
    expected = [_rank_part(p, layout) for p in parts]
    seen_parts: list[Any] = []
    offset = 0
    for i, want in enumerate(expected):
        if packed:
            seen_parts.append(seen_all[offset: offset + want.shape[0]])
            offset += want.shape[0]
        elif one:
            seen_parts.append(target.movedim(layout.axis, 0))
        else:
            entry = target[i] if i < len(target) else None
            seen_parts.append(None if entry is None else entry.movedim(layout.axis, 0))
    for i, (seen, want) in enumerate(zip(seen_parts, expected)):
        if seen is None:
            continue
        compared = None
        if not _numeric(layout.pad_value):  # pads of unknown value: only the true positions are compared
            compared = torch.tensor([p < trues[i] for p in _rank_positions(parts[i].shape[0], layout)])
        elif seen.dtype == want.dtype and torch.equal(seen, want):
            continue  # the clean part: one comparison, no position search
        at = _first_difference(seen, want, compared)
        if at is None:
            continue
        for j, other in enumerate(expected):  # another sample's data in sample i's place: a reordering
            if j != i and other.shape == seen.shape and torch.equal(seen.to(other.dtype), other):
                return [Violation(
                    "B5", where, key, f"sample {i}'s part holds the data of sample {j} of `{source_key}`: the "
                    "samples are in another order", actual=f"sample {j}'s data", expected=f"sample {i}'s data",
                    hint=HINTS["B5"], sample=i, space=space_text, sizes=sizes,
                )]
        local = _rank_positions(parts[i].shape[0], layout)
        position = local[at] if at < len(local) else None
        pad = position is not None and position >= trues[i]
        what = "a pad" if pad else "a true position"
        where_text = f" (position {position} of the sample in its space)" if position is not None else ""
        return [Violation(
            "B6", where, key, f"sample {i}'s part is not its data from `{source_key}` laid out in this space: "
            f"position {at} of the part{where_text} should hold {what}",
            actual=_value(seen, at), expected=_value(want, at) if at < want.shape[0] else "the part to end",
            hint=hint("B6", layout.space, source=layout.source_space), sample=i, space=space_text,
            sizes={"T": trues[i], **({"P": samples[i].padded} if samples[i] and samples[i].padded else {}),  # type: ignore[union-attr]
                   **sizes, "cp": layout.cp, "r": layout.rank},
        )]
    if packed and seen_all is not None and _numeric(layout.pad_value):
        total = geometry.round_up(offset, layout.stream_unit)
        tail = seen_all[offset:total]
        pads = torch.full_like(tail, layout.pad_value) if tail.numel() else tail
        if tail.numel() and not torch.equal(tail, pads):
            return [Violation("B6", where, key, "the stream's tail padding holds data", actual=f"{tail.shape[0]} "
                              "positions, not all the pad value", expected=f"{layout.pad_value!r} everywhere",
                              hint=hint("B6", layout.space, source=layout.source_space), space=space_text,
                              sizes=sizes)]
    return []


_RANGES_BY: dict[tuple[int, int, str], dict[int, tuple[tuple[int, int], ...]]] = {}
"""`geometry.rank_ranges` by (cp, rank, scheme), then by length, kept across calls (ints only)."""
_MATERIALISED_BY: dict[int, dict[int, int]] = {}
"""`geometry.materialised_length` under zigzag by cp, then by length, kept across calls (ints only)."""


def _clean_stream(target: Any, sources: Sequence[Any], samples: Sequence[SampleLengths | None], layout: Layout) -> bool:
    """`clean_stream` over the samples' lengths objects (``None``: a sample whose ``T`` is not known)."""
    return clean_stream(target, sources, [None if s is None else s.total for s in samples],
                        [None if s is None else s.padded for s in samples], layout)


def clean_stream(target: Any, sources: Sequence[Any], totals: Sequence[int | None], padded: Sequence[int | None],
                 layout: Layout, *, counts: Sequence[int] | None = None) -> bool:
    """Whether a packed stream is exactly its samples laid out, compared in one piece (``False``: not known).

    ``totals`` and ``padded`` are the call's columns of ``T`` and ``P``
    (``None`` where not known). ``True`` only where the per-sample
    comparison of `check_content` finds every part equal (same dtype, same
    values) and the tail all pads; on anything else (a difference, a dtype
    that differs, pads of unknown value, an all-gather window, a sample
    without the lengths it needs) ``False``, and the per-sample comparison
    says what and where. ``counts``: each source's length along its first
    axis when the caller has read them already (else read here).

    The expected stream is built by host ints only: each sample's true
    positions on this rank are views of its source (the source itself
    where it is whole), its pads views of one pad-filled tensor, adjacent
    pieces joined, then one ``cat`` and one comparison (`equal`; no
    per-sample layout is built, and the sources are not concatenated first:
    the stream holds only this rank's part of them). The pieces, ints
    alone, are kept by the stream's geometry (`_stream_plan`): a stream of
    lengths met before is not worked out again. Gathering by an index of
    every position instead (one ``cumsum`` and one ``index_select`` over
    the stream) measured 8-13% slower on CPU, and by an index kept per
    geometry no faster over two streams (benchmarks/README.md). Where a
    piece is cut from its source (CP, a shift), numpy is installed and can
    view every tensor (CPU, no grad, a dtype numpy has, every source of the
    stream's dtype), the same pieces are numpy slices of views of the
    sources joined by one ``concatenate``; anything else takes the torch
    build (a stream of whole sources: one ``cat`` of them).
    """
    torch = _torch()
    cp_part = layout.space.cp
    if not _numeric(layout.pad_value) or (cp_part is not None and cp_part.scheme == "allgather" and layout.cp > 1):
        return False
    if not sources or len(totals) != len(sources) or None in totals or type(None) in set(map(type, sources)):
        return False
    seen = target.movedim(layout.axis, 0)
    if layout.axis != 0 and seen.dim() > 1 and seen.shape[1] == 1:
        seen = seen[:, 0]  # a (1, N) stream: its one row
    dtype, rest = sources[0].dtype, tuple(sources[0].shape[1:])
    if seen.dtype != dtype or tuple(seen.shape[1:]) != rest:
        return False
    try:
        # every source of the stream's shape past its sequence axis, as concatenating them all would require (a
        # sample with no true position on this rank gives no piece to the `cat` below that would notice it)
        if set(map(torch.Tensor.dim, sources)) != {len(rest) + 1} or (
                rest and any(tuple(d.shape[1:]) != rest for d in sources)):
            return False
        if counts is None or len(counts) != len(sources):
            counts = [d.shape[0] for d in sources]  # each source's length (sequence axis first; `len` costs more)
        return _stream_equal(torch, seen, sources, padded, layout, dtype, rest, counts)
    except (TypeError, IndexError, RuntimeError):  # sources that do not stack (0-d, another width): sample by sample
        return False


def _stream_equal(torch: Any, seen: Any, sources: Sequence[Any], padded_lengths: Sequence[int | None],
                  layout: Layout, dtype: Any, rest: tuple[int, ...], counts: Sequence[int]) -> bool:
    # `clean_stream` past its guards: a source of another dtype is promoted by `cat` and then compared with
    # `torch.equal` (`equal`), which says equal only for equal values (what the per-sample check compares after a
    # cast). The pieces are kept by the stream's geometry (ints only); streams whose geometry never repeats (each
    # step's new lengths) stop paying for the key: after _MISSES misses in a row, one stream in _MISSES looks it up
    key, plan = None, _UNPLANNED
    _LOOKUPS[0] += 1
    if _LOOKUPS[1] < _MISSES or _LOOKUPS[0] % _MISSES == 0:
        key = (layout.space.key, layout.source_space.key, layout.cp, layout.rank, layout.stream_unit, seen.shape[0],
               tuple(counts), tuple(padded_lengths))
        plan = _PLANS.get(key, _UNPLANNED)
        _LOOKUPS[1] = 0 if plan is not _UNPLANNED else _LOOKUPS[1] + 1
    if plan is _UNPLANNED:
        plan = _stream_plan(counts, padded_lengths, layout, seen.shape[0])
        if key is not None:
            _LOOKUPS[2] += len(counts) + 1
            if len(_PLANS) >= 256 or _LOOKUPS[2] > 1 << 16:  # a few MB of ints at most; then the table starts again
                _PLANS.clear()
                _LOOKUPS[2] = len(counts) + 1
            _PLANS[key] = plan
    if plan is None:
        return False  # a sample without its padded length, or parts past the stream's end: the per-sample check
    cuts, pads, order, length, cut = plan
    numpy = _numpy()
    if numpy is not None and cut:
        # CPU tensors numpy can view: the pieces as numpy slices (a fifth of a torch slice's cost), one
        # `concatenate`, one `array_equal`; what numpy cannot view or join without a cast goes the torch way below
        try:
            return _numpy_stream_equal(numpy, torch, seen, sources, counts, cuts, pads, order, length, layout,
                                       dtype, rest)
        except (TypeError, RuntimeError, ValueError):
            pass
    # a view of each source where it is cut (the source itself where it is whole): no copy of the sources, of
    # which this rank's stream holds only a part (concatenating them first, then cutting, cost more)
    pieces = [sources[i] if a == 0 and b == counts[i] else sources[i][a:b] for i, a, b in cuts]
    if pads:
        trues = iter(pieces)
        fills = iter(torch.full((sum(pads), *rest), layout.pad_value, dtype=dtype).split(pads))
        pieces = [next(trues) if real else next(fills) for real in order]
    want = torch.cat(pieces) if pieces else seen[:0]
    return equal(seen[:length], want)


def _numpy_stream_equal(numpy: Any, torch: Any, seen: Any, sources: Sequence[Any], counts: Sequence[int],
                        cuts: list[list[int]], pads: list[int], order: list[bool], length: int, layout: Layout,
                        dtype: Any, rest: tuple[int, ...]) -> bool:
    # `_stream_equal`'s build and comparison through numpy views of host tensors. `.numpy()` raises TypeError or
    # RuntimeError for what numpy cannot view (bfloat16, a tensor that requires grad, another device) and
    # `concatenate(casting="no")` TypeError for pieces of a dtype other than the stream's (sources of two dtypes,
    # which torch's `cat` promotes): the caller then builds it with torch, so the answer is always torch's.
    want_seen = seen[:length].numpy()
    views = list(map(torch.Tensor.numpy, sources))  # no copy: each source's memory
    pieces = [views[i] if a == 0 and b == counts[i] else views[i][a:b] for i, a, b in cuts]
    if pads:
        # the pads filled by torch as the torch build fills them (the same cast of the pad value), then viewed
        block = torch.full((sum(pads), *rest), layout.pad_value, dtype=dtype).numpy()
        trues, fills, at = iter(pieces), iter(pads), 0
        pieces = []
        for real in order:
            if real:
                pieces.append(next(trues))
            else:
                n = next(fills)
                pieces.append(block[at:at + n])
                at += n
    want = numpy.concatenate(pieces, dtype=want_seen.dtype, casting="no")
    return bool(numpy.array_equal(want_seen, want))


_NUMPY: list[Any] = []
"""numpy once looked for (``[None]`` when it is not installed)."""


def _numpy() -> Any:
    if not _NUMPY:
        try:
            import numpy
        except ImportError:  # torch without numpy: torch compares
            _NUMPY.append(None)
        else:
            _NUMPY.append(numpy)
    return _NUMPY[0]


def equal(seen: Any, want: Any) -> bool:
    """``torch.equal(seen, want)`` for host tensors: the same shape and every position equal (NaN never is).

    Two CPU tensors of one dtype are compared through numpy views of them
    (no copy): `numpy.array_equal` answers as `torch.equal` does at a half
    (int64) to a quarter (float32) of its cost on a 49k-position stream
    (benchmarks/README.md). What numpy cannot view (bfloat16, a tensor that
    requires grad, another device) and tensors of two dtypes go to
    `torch.equal`.
    """
    numpy = _numpy() if seen.dtype is want.dtype else None
    if numpy is not None:
        try:
            return bool(numpy.array_equal(seen.numpy(), want.numpy()))
        except (TypeError, RuntimeError):
            pass
    return bool(_torch().equal(seen, want))


# --- a packed stream of lengths met before: its pieces kept with the call's ints ----------------------------


@dataclass(frozen=True)
class StreamPieces:
    """A packed stream's expected layout as cuts of its sources (and of one block of pads), in stream order.

    Made once per geometry (`stream_pieces`) by a caller that keeps it by
    everything the layout reads (the boundary's fast reading keeps it with a
    clean call's ints: the sources' lengths, the padded lengths, the spaces,
    the coordinates, the stream unit, the target's shape); `pieces_equal`
    compares a call's stream with it with no per-sample Python and none of
    the checks that those ints already settle.
    """

    length: int
    """The stream positions compared (``seen[:length]``, the tail padding included), as `clean_stream` compares."""
    row: bool
    """The stream is a ``(1, N)`` tensor read along axis 1 (its one row compared); else a 1-D tensor, axis 0."""
    sources: tuple[int, ...]
    """Each piece's source, in stream order (``len(sources)``: the pads block)."""
    cuts: tuple[slice, ...]
    """Each piece's cut of its source (or of the pads block)."""
    pad_total: int
    """The pad positions in all (the pads block's length; 0: no pads)."""


def stream_pieces(target: Any, totals: Sequence[int | None], padded: Sequence[int | None], layout: Layout,
                  counts: Sequence[int]) -> StreamPieces | None:
    """`clean_stream`'s expected stream for this geometry as `StreamPieces` (``None``: not one this fits).

    It fits a 1-D or ``(1, N)`` stream of samples of known ``T``, pads of a
    numeric value and no all-gather window (else ``None``: `clean_stream`
    and the per-sample check answer). The pieces are `_stream_plan`'s,
    worked out once from ints.
    """
    cp_part = layout.space.cp
    if not _numeric(layout.pad_value) or (cp_part is not None and cp_part.scheme == "allgather" and layout.cp > 1):
        return None
    if not counts or len(totals) != len(counts) or None in totals:
        return None
    shape = tuple(target.shape)
    if len(shape) == 2 and layout.axis == 1 and shape[0] == 1:
        row, length_seen = True, shape[1]
    elif len(shape) == 1 and layout.axis == 0:
        row, length_seen = False, shape[0]
    else:
        return None
    plan = _stream_plan(counts, padded, layout, length_seen)
    if plan is None:
        return None
    cuts, pads, order, length, _ = plan
    sources: list[int] = []
    slices: list[slice] = []
    true_pieces, pad_pieces, at = iter(cuts), iter(pads), 0
    for real in order:
        if real:
            i, a, b = next(true_pieces)
            sources.append(i)
            slices.append(slice(a, b))
        else:
            n = next(pad_pieces)
            sources.append(len(counts))
            slices.append(slice(at, at + n))
            at += n
    return StreamPieces(length=length, row=row, sources=tuple(sources), cuts=tuple(slices), pad_total=at)


_GETITEM = operator.getitem
_NDIM = operator.attrgetter("ndim")
_PAD_BLOCKS: dict[tuple[type, Any, Any, int], Any] = {}
"""Blocks of a pad value by (type, value, dtype, length), as numpy views: only read (cut into pieces)."""


def pieces_equal(target: Any, sources: Sequence[Any], plan: StreamPieces, pad_value: Any) -> bool:
    """Whether ``target`` is exactly its sources laid out as ``plan`` says (``False``: not, or not known here).

    ``plan`` is `stream_pieces`'s for this geometry (the caller's key holds
    the ints it was made from). ``True`` only where `clean_stream` says
    ``True``: a numpy view of each source (no copy) cut into the planned
    pieces, the pads cut from one block filled by ``torch.full`` (the cast
    the per-sample build makes), joined in the stream's dtype with
    ``casting="no"`` (a piece of another dtype raises: no cast) and
    compared position by position
    (`numpy.array_equal`, as `equal`). On ``False`` (a difference, what
    numpy cannot view: bfloat16, a tensor that requires grad; no numpy) the
    caller checks as before, which names what differs.
    """
    numpy = _numpy()
    if numpy is None or not _numeric(pad_value):
        return False
    torch = _torch()
    seen = target[0] if plan.row else target
    dtype = seen.dtype
    try:
        want_seen = seen[:plan.length].numpy()
        views = list(map(torch.Tensor.numpy, sources))  # no copy: each source's memory
        # `clean_stream`'s guards that the caller's ints do not settle: the first source of the stream's dtype, every
        # source of one axis (a source no piece is cut from has none to refuse it in the join)
        if not views or views[0].dtype != want_seen.dtype or set(map(_NDIM, views)) != {1}:
            return False
        if plan.pad_total:
            block = _PAD_BLOCKS.get((type(pad_value), pad_value, dtype, plan.pad_total))
            if block is None:
                if len(_PAD_BLOCKS) > 16:
                    _PAD_BLOCKS.clear()
                block = _PAD_BLOCKS[type(pad_value), pad_value, dtype, plan.pad_total] = torch.full(
                    (plan.pad_total,), pad_value, dtype=dtype).numpy()
            views.append(block)
        pieces = list(map(_GETITEM, map(views.__getitem__, plan.sources), plan.cuts))
        # a new array, not a buffer kept across calls: fresh memory from the allocator is warmer in cache than a
        # buffer the function's own work has evicted (measured: a kept buffer cost 30 us a call more on new lengths)
        want = numpy.concatenate(pieces, dtype=want_seen.dtype, casting="no")
    except (TypeError, RuntimeError, ValueError):  # what numpy cannot view or join without a cast: as before
        return False
    return bool(numpy.array_equal(want_seen, want))


_Plan = tuple[list[list[int]], list[int], list[bool], int, bool]
_PLANS: dict[tuple[Any, ...], _Plan | None] = {}
"""A packed stream's layout by its geometry (spaces, cp, rank, stream unit, the stream's and each source's length,
each padded length) -> its pieces (`_stream_plan`), kept across calls (ints only)."""
_UNPLANNED: Any = object()
_MISSES = 32
"""After this many streams in a row whose geometry was new, only one stream in this many looks its pieces up."""
_LOOKUPS = [0, 0, 0]
"""Streams compared, streams in a row whose geometry was not found in `_PLANS`, and the samples of its plans."""


def _stream_plan(counts: Sequence[int], padded_lengths: Sequence[int | None], layout: Layout,
                 length_seen: int) -> _Plan | None:
    """The expected stream as pieces, from ints alone: ``(cuts, pads, order, length, cut)``; ``None``: not decidable.

    ``cuts``: each true piece as [sample, start, end) in the sample's own
    positions; ``pads``: each pad piece's length; ``order``: the pieces in
    stream order (``True`` a true piece); ``length``: the positions they
    cover, the tail padding included; ``cut``: whether a piece is a part
    of its source (not the whole source). ``None`` for a sample without the
    padded length it needs, or parts that run past the stream's end.
    """
    cp_part = layout.space.cp
    shift = layout.space.shift - layout.source_space.shift
    padded = layout.space.basis == "P" and layout.source_space.basis != "P"
    left = layout.space.pad_side == "left"
    cut = cp_part is not None and layout.cp > 1
    zigzag = cut and cp_part.scheme == "zigzag"  # type: ignore[union-attr]
    cuts: list[list[int]] = []  # [sample, start, end) of each true piece, in the sample's own positions, in order
    pads: list[int] = []  # each pad piece's length
    order: list[bool] = []  # the pieces in stream order: True a true piece, False a pad piece
    stream = 0
    drop = abs(shift)
    cp, rank, scheme = layout.cp, layout.rank, cp_part.scheme if cp_part is not None else "zigzag"
    # the tables of ints kept across calls, for this call's cp, rank and scheme: looked up by a length alone
    materialised_of = _MATERIALISED_BY.get(cp) or _MATERIALISED_BY.setdefault(cp, {})
    ranges_of = _RANGES_BY.get((cp, rank, scheme)) or _RANGES_BY.setdefault((cp, rank, scheme), {})
    if len(materialised_of) > 65536 or len(ranges_of) > 65536:
        materialised_of.clear()
        ranges_of.clear()
    for i, (n, p) in enumerate(zip(counts, padded_lengths)):
        true = n - drop if n > drop else 0  # data[shift:] or data[:shift]
        first = min(shift, n) if shift > 0 else 0
        length = true
        if padded:
            if p is None:
                return None
            length = p
        if zigzag:
            materialised = materialised_of.get(length)
            if materialised is None:
                materialised = materialised_of[length] = geometry.materialised_length(length, cp, "zigzag")
            if materialised > length:
                length = materialised
        if true > length:
            length = true  # padded only when longer than the data (`_expected_part`)
        lo, hi = (length - true, length) if left else (0, true)
        if cut:
            ranges = ranges_of.get(length)
            if ranges is None:
                ranges = ranges_of[length] = geometry.rank_ranges(length, cp, rank, scheme)
        else:
            ranges = ((0, length),)
        for a, b in ranges:
            # the range [a, b) of the laid-out sample: pads before `lo`, its true positions [lo, hi), pads after;
            # a piece that continues the one before it (pads after pads, or the same sample's next positions) joins it
            if a < lo:
                end = lo if lo < b else b
                if order and not order[-1]:
                    pads[-1] += end - a
                else:
                    pads.append(end - a)
                    order.append(False)
                stream += end - a
                a = end
            end = hi if hi < b else b
            if end > a:
                start = first + a - lo
                if order and order[-1] and cuts[-1][0] == i and cuts[-1][2] == start:
                    cuts[-1][2] = first + end - lo
                else:
                    cuts.append([i, start, first + end - lo])
                    order.append(True)
                stream += end - a
                a = end
            if b > a:
                if order and not order[-1]:
                    pads[-1] += b - a
                else:
                    pads.append(b - a)
                    order.append(False)
                stream += b - a
    if length_seen < stream:
        return None  # a part runs past the stream's end: the per-sample check names it
    tail = min(geometry.round_up(stream, layout.stream_unit), length_seen) - stream
    if tail:
        _pad_piece(pads, order, tail)
    # whether a piece is cut from its source: if not, one torch `cat` of the sources costs less than a numpy view
    # of each (0.7 us a source, as much as a torch slice)
    return cuts, pads, order, stream + tail, any(a or b != counts[i] for i, a, b in cuts)


def _pad_piece(pads: list[int], order: list[bool], length: int) -> None:
    # a pad piece of the expected stream, joined to a pad piece just before it
    if order and not order[-1]:
        pads[-1] += length
    else:
        pads.append(length)
        order.append(False)


def _rank_positions(length: int, layout: Layout) -> list[int]:
    # The positions of the sample (in its laid-out space) that this rank's part holds, in order.
    cp_part = layout.space.cp
    if cp_part is None or layout.cp == 1:
        return list(range(length))
    return [p for a, b in geometry.rank_ranges(length, layout.cp, layout.rank, cp_part.scheme) for p in range(a, b)]


def _check_window(seen: Any, parts: Sequence[Any], trues: Sequence[int], layout: Layout, *, key: str,
                  source_key: str, where: str, space_text: str, sizes: dict[str, object]) -> list[Violation]:
    # All-gather: the samples concatenated, the global stream padded to cp * unit, this rank's window.
    torch = _torch()
    stream = torch.cat(list(parts)) if parts else seen[:0]
    total = geometry.round_up(stream.shape[0], layout.cp * layout.stream_unit)
    if total > stream.shape[0]:
        pad = torch.full((total - stream.shape[0], *stream.shape[1:]), _pad(layout), dtype=stream.dtype)
        stream = torch.cat([stream, pad])
    start, end = geometry.allgather_window(total, layout.cp, layout.rank)
    want = stream[start:end]
    compared = None
    if not _numeric(layout.pad_value):  # pads of unknown value: only the true positions are compared
        true = [k < t for p, t in zip(parts, trues) for k in range(p.shape[0])]
        compared = torch.tensor((true + [False] * (total - len(true)))[start:end])
    at = _first_difference(seen, want, compared)
    if at is None:
        return []
    position, sample, offset = start + at, None, 0
    for i, p in enumerate(parts):
        if offset <= position < offset + p.shape[0]:
            sample = i
            break
        offset += p.shape[0]
    return [Violation(
        "B6", where, key, f"this rank's window of the stream is not the samples of `{source_key}` laid out in "
        f"this space: window position {at} (stream position {position}) differs",
        actual=_value(seen, at), expected=_value(want, at) if at < want.shape[0] else "the window to end",
        hint=hint("B6", layout.space, source=layout.source_space), sample=sample, space=space_text,
        sizes={**sizes, "cp": layout.cp, "r": layout.rank},
    )]


# --- row-padded batches ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowLayout:
    """How a row-padded batch lays its samples out: its space (the pad side), the pad value (``None``: not said),
    the row axis."""

    space: Space
    pad_value: Any = None
    axis: int = 1


def _true_range(width: int, true: int, side: str) -> tuple[int, int]:
    # where a row's true positions sit: flush right when padded left, flush left when padded right
    return (width - true, width) if side == "left" else (0, true)


def row_samples(value: Any, lengths: Sequence[int | None], side: str, axis: int) -> list[Any]:
    """Each row's true positions of a row-padded batch (host tensors), cut by its length on its side."""
    rows = value.movedim(axis, 1) if not isinstance(value, (list, tuple)) else value
    out = []
    for i, n in enumerate(lengths):
        if i >= len(rows) or n is None:
            out.append(None)
            continue
        row = rows[i] if not isinstance(value, (list, tuple)) else rows[i].movedim(axis - 1, 0)
        a, b = _true_range(row.shape[0], min(n, row.shape[0]), side)
        out.append(row[a:b])
    return out


def _positions(flags: Any) -> str:
    # a mask row's true positions, as messages say them: "5-11", or the first few
    where = [int(j) for j in _torch().nonzero(flags).flatten()]
    if not where:
        return "none"
    if where == list(range(where[0], where[-1] + 1)):
        return f"{where[0]}-{where[-1]}" if len(where) > 1 else str(where[0])
    return ", ".join(map(str, where[:8])) + (" ..." if len(where) > 8 else "")


def check_rows(
    data: Any,
    mask: Any,
    trues: Sequence[int | None],
    sources: Sequence[Any] | None,
    layout: RowLayout,
    *,
    key: str,
    mask_key: str | None,
    source_key: str | None,
    where: str,
    space_text: str,
    sizes: dict[str, object],
) -> list[Violation]:
    """A row-padded batch on host values: each row's mask (B1) and each row's data and pads (B6).

    Row ``i`` holds ``T_i`` true positions flush against the side away from
    the pads (``left``: the last ``T_i``), pads elsewhere. The mask, when
    given, must mark exactly those positions; the data, with ``from``, must
    be the source sample there, and, with a numeric pad value, that value in
    every pad position. The first row that differs is named, per check.
    """
    torch = _torch()
    out: list[Violation] = []
    side = layout.space.pad_side or "right"
    if mask is not None:
        rows = mask if isinstance(mask, (list, tuple)) else mask.movedim(layout.axis, 1) if mask.dim() > 2 else mask
        for i, true in enumerate(trues):
            if true is None or i >= len(rows):
                continue
            row = rows[i].to(torch.bool).reshape(rows[i].shape[0], -1).any(dim=1)
            a, b = _true_range(row.shape[0], true, side)
            want = torch.zeros(row.shape[0], dtype=torch.bool)
            want[a:b] = True
            if not torch.equal(row, want):
                at = int(torch.nonzero(row != want)[0, 0])
                out.append(Violation(
                    "B1", where, mask_key or key, f"row {i}'s mask is not padded {side}: position {at} should be "
                    f"{'a true position' if want[at] else 'a pad'} (the row's {true} true positions sit "
                    f"{'last' if side == 'left' else 'first'} in its {row.shape[0]})",
                    actual=f"true at {_positions(row)}", expected=f"true at {_positions(want)}",
                    hint=hint("B1", layout.space, rows=True), sample=i, space=f"mask of {space_text}",
                    sizes={"T": true, "S": row.shape[0], **sizes},
                ))
                break
    numeric = _numeric(layout.pad_value)
    if data is None or (sources is None and not numeric):
        return out
    rows = data if isinstance(data, (list, tuple)) else data.movedim(layout.axis, 1)
    for i, true in enumerate(trues):
        if true is None or i >= len(rows):
            continue
        row = rows[i] if not isinstance(data, (list, tuple)) else rows[i].movedim(layout.axis - 1, 0)
        width = row.shape[0]
        a, b = _true_range(width, min(true, width), side)
        source = sources[i] if sources is not None and i < len(sources) else None
        want = row.new_full(row.shape, layout.pad_value if numeric else 0)
        compared = torch.zeros(width, dtype=torch.bool)
        if numeric:
            compared[:a] = True
            compared[b:] = True
        if source is not None and source.shape[0] == b - a and source.shape[1:] == row.shape[1:]:
            want[a:b] = source.to(row.dtype)
            compared[a:b] = True
        at = _first_difference(row, want, compared)
        if at is None:
            continue
        pad = not a <= at < b
        what = f"sample {i}'s data from `{source_key}` padded {side}" if source_key else f"padded {side}"
        out.append(Violation(
            "B6", where, key, f"row {i} is not {what}: position {at} of the row should hold "
            f"{'a pad' if pad else 'a true position'}",
            actual=_value(row, at), expected=_value(want, at), hint=hint("B6", layout.space, rows=True), sample=i,
            space=space_text, sizes={"T": true, "S": width, **sizes},
        ))
        break
    return out
