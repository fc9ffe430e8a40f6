"""The rectangular consumers (batch builder, replay filler, response offsets): G1-G6.

`check_micro_batch` reads Python ints only, so it can run *before* a batch
builder and fail closed; `check_batch_layout` reads the builder's output
shapes; `check_batch` is both; `check_replay` compares the replay filler's
tensor with the batch builder's layout; `check_response_offsets` compares a
response-offset helper's ranges with the batch's layout.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from layoutcheck import geometry
from layoutcheck.errors import LayoutError, LayoutSpecError, Violation, describe_value
from layoutcheck.runtime.contract.common import (
    HINTS,
    RESPONSE_FIELDS,
    SHAPE_FIELDS,
    bucket_tuple,
    expected_count,
    ints,
    parallel,
    response_sizes,
    same_length,
    sample_ids,
    size,
    usable_padded,
)
from layoutcheck.runtime.contract.meta import count, metadata_only, numel, shape_of

__all__ = [
    "NO_ENTRY",
    "BatchLayout",
    "check_batch",
    "check_batch_layout",
    "check_micro_batch",
    "check_replay",
    "check_response_offsets",
    "expected_logit_ranges",
    "merged_int_ranges",
    "read_batch_layout",
]


# --- the rectangular consumers: G1-G6 -------------------------------------


def check_micro_batch(
    *,
    micro_batch: int | None = None,
    samples: Sequence[int] | None = None,
    max_seq_lens: Sequence[int] | None = None,
    total_lengths: Sequence[int],
    token_lengths: Sequence[int] | None = None,
    padded: int | None = None,
    cp_size: int = 1,
    qkv_format: str = "bshd",
    scheme: str = "zigzag",
    buckets: Sequence[int] | None = None,
    where: str = "get_batch",
) -> list[Violation]:
    """G1, G2, the all-gather part of G3 and G6 for one micro-batch, from Python ints only.

    ``samples`` are the samples' indices in the rollout (for messages;
    default ``0..B-1``). ``token_lengths`` are the *current* token counts
    (``tokens[i].numel()``), which G2 checks against ``P``; without them
    ``total_lengths`` stand in. ``padded`` is the ``P`` the builder uses
    (default: ``max_seq_lens[0]``, the real builder's choice). ``buckets``:
    the static shape buckets (validated; the last one is the max length).

    G1 has two parts: the samples' ``max_seq_lens`` agree, and a ``padded``
    given explicitly is that agreed ``P`` (the builder used the owner's
    length). With ``buckets`` *and* ``padded`` the builder pads each
    micro-batch to a bucket: ``max_seq_lens`` are then the samples' own
    tight lengths, need not agree, and G6 judges ``P`` instead of G1.
    """
    cp, _ = parallel(cp_size, 0, qkv_format, scheme)
    totals = ints("total_lengths", total_lengths)
    current = totals if token_lengths is None else ints("token_lengths", token_lengths)
    lens = None if max_seq_lens is None else ints("max_seq_lens", max_seq_lens)
    b = same_length({"total_lengths": totals, "token_lengths": current, "max_seq_lens": lens, "samples": samples})
    ids = list(range(b)) if samples is None else sample_ids(samples)
    bucket_list = bucket_tuple(buckets)
    out: list[Violation] = []

    # G2 (consistency): total_lengths must still count the tokens
    for j in range(b):
        if current[j] != totals[j]:
            out.append(Violation(
                "G2", where, "total_lengths", "`total_lengths` no longer counts the sample's tokens",
                actual=totals[j], expected=current[j], hint=HINTS["G2"], sample=ids[j], micro_batch=micro_batch,
                sizes={"numel": current[j]},
            ))
    if qkv_format != "bshd" or b == 0:
        return out
    if lens is None and padded is None:
        raise LayoutSpecError("BSHD micro-batch checks need `max_seq_lens` or `padded`")
    p = size("padded", padded, minimum=0) if padded is not None else lens[0]  # type: ignore[index]
    bucketed = bucket_list is not None and padded is not None
    sizes: dict[str, object] = {"P": p, "B": b, "cp": cp}

    # G1: every sample of a BSHD micro-batch has the same P, and the batch uses it
    if lens is not None and not bucketed:
        if len(set(lens)) > 1:
            seen = {ids[j]: lens[j] for j in range(b)}
            out.append(Violation(
                "G1", where, "max_seq_lens",
                f"samples of one BSHD micro-batch have different padded lengths; the batch uses P={p}",
                actual=seen, expected=f"one P for all {b} samples", hint=HINTS["G1"],
                sample=tuple(ids), micro_batch=micro_batch, sizes=sizes,
            ))
        elif lens[0] != p:
            out.append(Violation(
                "G1", where, "max_seq_lens",
                f"the batch builder laid the micro-batch out with P={p}, not the P={lens[0]} that "
                "`max_seq_lens` (the owner) gives its samples",
                actual=p, expected=lens[0], hint=HINTS["G1-owner"],
                sample=tuple(ids), micro_batch=micro_batch, sizes={**sizes, "max_seq_lens": lens[0]},
            ))
    # G2: max T_i <= P, against the current token counts
    for j in range(b):
        if current[j] > p:
            own = f" (its own max_seq_lens entry is {lens[j]})" if lens is not None and lens[j] != p else ""
            out.append(Violation(
                "G2", where, "max_seq_lens",
                f"sample has more tokens than the padded length{own}: the batch would truncate it",
                actual=current[j], expected=f"<= P = {p}", hint=HINTS["G2"], sample=ids[j],
                micro_batch=micro_batch, sizes={"T": current[j], **sizes},
            ))
    # G3 (all-gather): the contiguous window needs P % cp == 0
    if not geometry.cp_can_slice(p, cp, scheme):
        out.append(Violation(
            "G3", where, "max_seq_lens", "all-gather CP needs the padded length to be a multiple of cp",
            actual=p, expected=f"a multiple of cp={cp}", hint=HINTS["G3-allgather"],
            sample=tuple(ids), micro_batch=micro_batch, sizes=sizes,
        ))
    # G6: with buckets, P is the smallest bucket that holds the longest sample
    if bucket_list is not None:
        out.extend(_g6(p, max(current), bucket_list, where, tuple(ids), micro_batch, sizes))
    return out


def _g6(
    p: int, longest: int, buckets: tuple[int, ...], where: str, ids: tuple[int, ...],
    micro_batch: int | None, sizes: dict[str, object],
) -> list[Violation]:
    sizes = {**sizes, "buckets": buckets}
    try:
        fit = geometry.resolve_bucket(longest, buckets)
    except LayoutError as err:  # the longest sample fits no bucket: geometry's violation, in this context
        return [dataclasses.replace(
            v, where=where, field="max_seq_lens", problem="the longest sample fits no bucket", sample=ids,
            micro_batch=micro_batch, sizes=sizes,
        ) for v in err.violations]
    if p == fit:
        return []
    problem = "P is not a bucket" if p not in buckets else "P is a bucket but not the smallest that fits"
    return [Violation(
        "G6", where, "max_seq_lens", problem, actual=p, expected=f"{fit} (smallest bucket >= max T = {longest})",
        hint=HINTS["G6"], sample=ids, micro_batch=micro_batch, sizes=sizes,
    )]


NO_ENTRY = -1
"""In `BatchLayout.counts`: the batch's entry for that sample is ``None`` (nothing to judge)."""


class BatchLayout(NamedTuple):
    """What G3 and G4 read of a batch, metadata only: read once, judged, and compared between passes."""

    shapes: tuple[tuple[int, ...] | None, ...]
    """Per shape field: the tensor's shape (``None``: the batch has no such field)."""
    counts: tuple[tuple[int | None, ...] | None, ...]
    """Per response field: each sample's entry count (`NO_ENTRY` for a ``None`` entry; ``None``: no such field)."""


def read_batch_layout(
    batch: Mapping[str, Any], shape_fields: Sequence[str] = SHAPE_FIELDS, response_fields: Sequence[str] = RESPONSE_FIELDS
) -> BatchLayout:
    """The shapes and response counts of ``batch`` that G3 and G4 judge (call inside `metadata_only()`)."""
    get = batch.get
    shapes = tuple(shape_of(v) if (v := get(f)) is not None else None for f in shape_fields)
    counts = tuple(
        None if (values := get(f)) is None else tuple(NO_ENTRY if v is None else count(v) for v in values)
        for f in response_fields
    )
    return BatchLayout(shapes, counts)


def check_batch_layout(
    batch: Mapping[str, Any],
    *,
    micro_batch: int | None = None,
    samples: Sequence[int] | None = None,
    total_lengths: Sequence[int],
    response_lengths: Sequence[int] | None = None,
    padded: int | None = None,
    cp_size: int = 1,
    cp_rank: int = 0,
    qkv_format: str = "bshd",
    scheme: str = "zigzag",
    response_scheme: str | None = None,
    stream_multiple: int = 1,
    shape_fields: Sequence[str] = SHAPE_FIELDS,
    response_fields: Sequence[str] = RESPONSE_FIELDS,
    where: str = "get_batch",
    read: BatchLayout | None = None,
) -> list[Violation]:
    """G3 (tensor shapes) and G4 (response counts) on a batch builder's output.

    BSHD: every field of ``shape_fields`` present is ``(B, L)`` with ``L`` the
    local length of ``padded`` (``P``) on this rank; THD: ``(1, N)`` with ``N``
    the local packed stream, its tail padded to ``stream_multiple`` (the
    builder's ``tp_size * pad_multiplier``). Each per-sample response field
    holds the count the CP offset rule gives for the batch's geometry,
    sliced by ``response_scheme`` (default: ``scheme``; Miles slices response
    fields with the zigzag rule under both schemes). ``total_lengths`` are
    the current lengths. ``read``: the batch's `read_batch_layout` for these
    fields, when the caller has it already.
    """
    cp, r = parallel(cp_size, cp_rank, qkv_format, scheme)
    response_scheme = geometry.check_scheme(response_scheme or scheme)
    totals = ints("total_lengths", total_lengths)
    responses = None if response_lengths is None else ints("response_lengths", response_lengths)
    b = same_length({"total_lengths": totals, "response_lengths": responses, "samples": samples})
    ids = list(range(b)) if samples is None else list(samples)
    multiple = size("stream_multiple", stream_multiple, minimum=1)
    bshd = qkv_format == "bshd"
    if bshd and padded is None:
        raise LayoutSpecError("BSHD batch checks need the micro-batch's padded length `padded`")
    p = size("padded", padded, minimum=0) if bshd else None
    if read is None:
        with metadata_only():
            read = read_batch_layout(batch, shape_fields, response_fields)
    out: list[Violation] = []

    # G3: tokens, loss masks, position ids share one layout
    expected: tuple[int, ...] | None
    if p is not None:
        if not geometry.cp_can_slice(p, cp, scheme):
            expected = None  # reported by check_micro_batch (G3, all-gather)
        else:
            expected = (b, geometry.local_length(p, cp, scheme))
        sizes: dict[str, object] = {"P": p, "B": b, "cp": cp, "r": r, "scheme": scheme}
    else:
        expected = (1, geometry.packed_stream_length(totals, cp, scheme=scheme, pad_to=multiple))
        sizes = {"sum T": sum(totals), "B": b, "cp": cp, "r": r, "scheme": scheme, "pad_to": multiple}
    if expected is not None:
        for f, shape in zip(shape_fields, read.shapes):
            if shape is not None and shape[:2] != expected:
                layout = "(B, L)" if bshd else "(1, N)"
                out.append(Violation(
                    "G3", where, f, f"batch tensor is not laid out {layout} for this micro-batch",
                    actual=shape, expected=expected, hint=HINTS["G3"], sample=tuple(ids),
                    micro_batch=micro_batch, sizes=sizes,
                ))

    # G4: each per-sample response field has the count for the batch's P
    if responses is None:
        return out
    for f, counts in zip(response_fields, read.counts):
        if counts is None:
            continue
        for j in range(min(b, len(counts))):
            got = counts[j]
            if got == NO_ENTRY:
                continue
            want = (
                expected_count(totals[j], responses[j], p, cp, r, qkv_format, response_scheme)
                if cp > 1 else responses[j]
            )
            if want is None or got == want:  # None: P unusable for this sample (G2/G3 reported)
                continue
            out.append(Violation(
                "G4", where, f, "response field does not hold the count of the batch's layout on this rank",
                actual=got, expected=want, hint=HINTS["G4"], sample=ids[j], micro_batch=micro_batch,
                sizes=response_sizes(totals[j], responses[j], p, cp, r, qkv_format, response_scheme),
            ))
    return out


def check_batch(
    batch: Mapping[str, Any],
    *,
    micro_batch: int | None = None,
    samples: Sequence[int] | None = None,
    max_seq_lens: Sequence[int] | None = None,
    total_lengths: Sequence[int] | None = None,
    response_lengths: Sequence[int] | None = None,
    cp_size: int = 1,
    cp_rank: int = 0,
    scheme: str = "zigzag",
    qkv_format: str = "bshd",
    buckets: Sequence[int] | None = None,
    stream_multiple: int = 1,
    padded: int | None = None,
    response_scheme: str | None = None,
    where: str = "get_batch",
) -> list[Violation]:
    """G1-G4 and G6 for one micro-batch as a batch builder returned it.

    Per-sample lists default to the batch's own ``max_seq_lens``,
    ``total_lengths`` and ``response_lengths``; the current token counts
    (G2) are read from ``unconcat_tokens`` when the batch has it. ``padded``
    defaults to ``max_seq_lens[0]`` (what the builder uses under BSHD). A
    builder that pads micro-batches to static ``buckets`` beyond
    ``max_seq_lens`` is checked by passing the ``P`` it used, e.g.
    ``geometry.padded_for_local_length(L, cp, scheme, candidates=buckets)``
    for its ``(B, L)`` tokens (`LayoutChecker` does this when given buckets).
    """
    if not isinstance(batch, Mapping):
        raise LayoutSpecError(f"`batch` must be a mapping, got {type(batch).__name__}")
    lens = batch.get("max_seq_lens") if max_seq_lens is None else max_seq_lens
    totals = batch.get("total_lengths") if total_lengths is None else total_lengths
    responses = batch.get("response_lengths") if response_lengths is None else response_lengths
    if totals is None:
        raise LayoutSpecError("`total_lengths` is required (pass it, or return it in the batch)")
    with metadata_only():
        unconcat = batch.get("unconcat_tokens")
        current = None if unconcat is None else [numel(t) for t in unconcat]
    if qkv_format != "bshd":
        lens = None
    out = check_micro_batch(
        micro_batch=micro_batch, samples=samples, max_seq_lens=lens, total_lengths=totals,
        token_lengths=current, padded=padded, cp_size=cp_size, qkv_format=qkv_format, scheme=scheme,
        buckets=buckets, where=where,
    )
    if qkv_format == "bshd" and padded is None and lens:
        padded = lens[0]
    out += check_batch_layout(
        batch, micro_batch=micro_batch, samples=samples, total_lengths=current if current is not None else totals,
        response_lengths=responses, padded=padded, cp_size=cp_size, cp_rank=cp_rank, qkv_format=qkv_format,
        scheme=scheme, response_scheme=response_scheme, stream_multiple=stream_multiple, where=where,
    )
    return out


def check_replay(
    replay: Any,
    *,
    micro_batch: int | None = None,
    samples: Sequence[int] | None = None,
    batch_rows: int,
    padded: int | None = None,
    batch_padded: int | None = None,
    batch_samples: Sequence[int] | None = None,
    tp_size: int = 1,
    sequence_parallel: bool = False,
    field: str = "rollout_routed_experts",
    where: str = "fill_replay_data",
) -> list[Violation]:
    """G5: the replay filler's tensor for micro-batch k matches the batch builder's layout.

    ``replay`` is the replay tensor (or its row count, an int).
    ``batch_rows`` is the number of token positions the batch builder laid
    out for the micro-batch on this rank (``B * L`` under BSHD, the stream
    length ``N`` under THD); the replay tensor must have that many rows,
    divided by ``tp_size`` under sequence parallelism. ``padded`` /
    ``batch_padded``: the ``P`` each side used (BSHD; ``None`` under THD).
    ``samples`` / ``batch_samples``: the sample indices each side put in
    micro-batch k.
    """
    rows_in = size("batch_rows", batch_rows, minimum=0)
    tp = size("tp_size", tp_size, minimum=1)
    got = _replay_row_count(replay)
    ids = None if samples is None else tuple(samples)
    out: list[Violation] = []
    sizes: dict[str, object] = {"batch rows": rows_in, "tp": tp, "sequence_parallel": bool(sequence_parallel)}
    if padded is not None and batch_padded is not None:
        sizes["P"] = batch_padded
        if size("padded", padded, minimum=0) != size("batch_padded", batch_padded, minimum=0):
            out.append(Violation(
                "G5", where, field, "the replay filler laid the micro-batch out with another P than the batch builder",
                actual=padded, expected=batch_padded, hint=HINTS["G5"], sample=ids, micro_batch=micro_batch,
                sizes=sizes,
            ))
    if batch_samples is not None and ids is not None and tuple(batch_samples) != ids:
        out.append(Violation(
            "G5", where, field, "the replay filler's micro-batch holds other samples than the batch builder's",
            actual=ids, expected=tuple(batch_samples), hint=HINTS["G5"], sample=ids, micro_batch=micro_batch,
            sizes=sizes,
        ))
    # G5: B * L rows (the stream length under THD), split over TP under sequence parallelism
    try:
        want = geometry.replay_rows(rows_in, tp, sequence_parallel=bool(sequence_parallel))
    except LayoutSpecError:  # the arguments are valid (checked above): the positions do not split
        out.append(Violation(
            "G5", where, field, "the batch's token positions do not split evenly over TP ranks",
            actual=rows_in, expected=f"a multiple of tp={tp}", hint=HINTS["G5"], sample=ids,
            micro_batch=micro_batch, sizes=sizes,
        ))
        return out
    if got != want:
        out.append(Violation(
            "G5", where, field, "replay tensor rows differ from the token positions of the batch",
            actual=got, expected=want, hint=HINTS["G5"], sample=ids, micro_batch=micro_batch, sizes=sizes,
        ))
    return out


def _replay_row_count(replay: Any) -> int:
    # The replay tensor's rows, or the row count given as an int; anything else is a bad argument.
    if type(replay) is int:
        return size("replay", replay, minimum=0)
    with metadata_only():
        shape = shape_of(replay)
    if not shape:
        raise LayoutSpecError(
            f"`replay` must be the replay tensor (or its row count, an int), got {describe_value(replay, quote=True)}"
        )
    return int(shape[0])


def check_response_offsets(
    logit_ranges: Sequence[tuple[int, int]],
    *,
    total_length: int,
    response_length: int,
    cp_size: int = 1,
    cp_rank: int = 0,
    qkv_format: str = "bshd",
    padded: int | None = None,
    scheme: str = "zigzag",
    micro_batch: int | None = None,
    sample: int | None = None,
    field: str = "max_seq_len",
    where: str = "get_logits_and_tokens_offset_with_cp",
    called_with: Mapping[str, object] | None = None,
) -> list[Violation]:
    """G4 at a response-offset helper: the logit ranges it returned are the batch layout's.

    ``logit_ranges`` are the helper's global ``[start, end)`` response-logit
    ranges on this rank (empty ones are ignored); they must equal
    `geometry.response_logit_ranges` for the batch's ``qkv_format`` and
    ``padded`` (``P``). ``called_with`` (the layout arguments the helper
    got) is shown in the message.
    """
    cp, r = parallel(cp_size, cp_rank, qkv_format, scheme)
    t = size("total_length", total_length, minimum=0)
    resp = size("response_length", response_length, minimum=0)
    p = None if padded is None else size("padded", padded, minimum=0)
    if resp > t:
        raise LayoutSpecError(f"response_length={resp} exceeds total_length={t}")
    expected = expected_logit_ranges(t, resp, cp, r, qkv_format, p, scheme)
    if expected is None:
        return []  # no usable P: G2/G3 report it at the batch builder
    actual = _merged((int(a), int(b)) for a, b in logit_ranges)
    if actual == expected:
        return []
    sizes = response_sizes(t, resp, p, cp, r, qkv_format, scheme)
    if called_with:
        sizes["called with"] = ", ".join(f"{k}={describe_value(v, 40, quote=True)}" for k, v in called_with.items())
    got_n, want_n = sum(b - a for a, b in actual), sum(b - a for a, b in expected)
    return [Violation(
        "G4", where, field,
        f"response offsets do not follow the batch's layout ({got_n} response logits on this rank, "
        f"the layout gives {want_n})",
        actual=actual, expected=expected, hint=HINTS["G4"], sample=sample, micro_batch=micro_batch, sizes=sizes,
    )]


@functools.lru_cache(maxsize=4096)
def expected_logit_ranges(
    t: int, resp: int, cp: int, r: int, layout: str, p: int | None, scheme: str
) -> tuple[tuple[int, int], ...] | None:
    """The merged response-logit ranges G4 expects on rank ``r``; ``None`` when ``P`` is unusable (no expectation).

    Cached: offset helpers are called once per sample per pass, the same
    lengths over and over. Arguments are validated by the caller.
    """
    if not usable_padded(t, p, cp, layout, scheme):
        return None
    return _merged(geometry.response_logit_ranges(t, resp, cp, r, layout=layout, padded=p, scheme=scheme))


@functools.lru_cache(maxsize=4096)
def merged_int_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...] | None:
    """``ranges`` as `check_response_offsets` compares them (empties dropped, adjacent merged); ``None`` if a bound is negative.

    Only for a tuple of ``(int, int)`` tuples, which the caller has checked:
    hashing anything else could compare tensors.
    """
    if any(a < 0 or b < 0 for a, b in ranges):
        return None
    return _merged(ranges)


def _merged(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    # Positions, not pieces: adjacent ranges (zigzag chunks r and 2cp-1-r at
    # r = cp-1, or both chunks when cp == 1) describe the same positions merged.
    out: list[list[int]] = []
    for a, b in sorted(x for x in ranges if x[1] > x[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)
