"""Shared by the owner and consumer checks: field names, hints, argument validation.

Argument validation raises `LayoutSpecError` (a bad specification), never a
violation. The expected response count comes from `layoutcheck.geometry`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from numbers import Integral

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, describe_value, metadata_only

__all__ = [
    "HINTS",
    "REPLAY_FIELDS",
    "RESPONSE_FIELDS",
    "SHAPE_FIELDS",
    "UNSLICED_RESPONSE_FIELDS",
    "bucket_tuple",
    "expected_count",
    "frozen",
    "ints",
    "is_mapping",
    "parallel",
    "response_sizes",
    "same_length",
    "sample_ids",
    "size",
    "usable_padded",
]

RESPONSE_FIELDS: tuple[str, ...] = ("rollout_log_probs", "teacher_log_probs", "opd_reverse_kl")
"""Per-sample response fields CP-sliced by the producer (``R_i`` entries before slicing)."""
UNSLICED_RESPONSE_FIELDS: tuple[str, ...] = ("loss_masks",)
"""Per-sample response fields kept whole (``R_i`` entries on every rank)."""
REPLAY_FIELDS: tuple[str, ...] = ("rollout_routed_experts", "rollout_indexer_topk")
"""Per-sample replay arrays (``T_i - 1`` rows before padding)."""
SHAPE_FIELDS: tuple[str, ...] = ("tokens", "full_loss_masks", "position_ids")
"""Batch tensors laid out like the tokens: ``(B, L)`` under BSHD, ``(1, N)`` under THD."""

HINTS = {
    "O1": "keep one entry per sample in every per-sample field, and recompute `total_lengths` "
    "from the tokens after any step that changes them",
    "O2": "pad each sample to a multiple of the alignment unit: P_i = round_up(T_i, A), "
    "with A the lcm (not the max) of every unit",
    "O3": "pad each sample to its own aligned length P_i = round_up(T_i, A) instead of one "
    "rollout-wide maximum",
    "O4": "slice response fields with the sample's own layout (qkv_format and max_seq_len=P_i) "
    "through the same CP offset rule the batch builder uses",
    "O5": "store replay arrays with one row per predicted token (T_i - 1 rows); pad them only "
    "when laying out the batch",
    "G1": "use one sample per micro-batch (micro_batch_size=1), or bucket samples by padded "
    "length so that every micro-batch shares one P",
    "G1-owner": "lay the micro-batch out with the P of `max_seq_lens` (the owner); if micro-batches are "
    "padded to static shape buckets, configure the buckets (G6 then judges P)",
    "G2": "recompute `max_seq_lens` (and `total_lengths`) after any step that changes the "
    "tokens, such as multimodal expansion",
    "G3": "lay every batch tensor out with the micro-batch's P and CP scheme "
    "(L = local length of P on this rank)",
    "G3-allgather": "make P a multiple of cp (add cp to the alignment unit) or use zigzag CP",
    "G4": "slice response fields with the micro-batch's P (`max_seq_lens`) and pass "
    "qkv_format and max_seq_len to the response-offset helper",
    "G5": "lay replay tensors out from the batch builder's geometry (same P, same pad multiple); "
    "do not re-derive padding in the replay filler",
    "G6": "pad each micro-batch to the smallest bucket that holds its longest sample",
}


# --- argument validation (LayoutSpecError, never a violation) --------------

_INT_ONLY = frozenset({int})
_LAYOUTS = frozenset(geometry.LAYOUTS)
_SCHEMES = frozenset(geometry.SCHEMES)


def size(name: str, value: object, *, minimum: int) -> int:
    if type(value) is int and value >= minimum:  # the common case, without the ABC check below
        return value
    # bool is an int subclass; True as a CP size is a bug, not a 1. numpy
    # integers are Integral; a tensor is not (reading it would sync a GPU).
    if isinstance(value, bool) or not isinstance(value, Integral):
        got, hint = f"{type(value).__name__} {describe_value(value, quote=True)}", ""
        with metadata_only():
            array = hasattr(value, "shape")
        if array:  # described by dtype, shape and device: repr() would read the values
            got = describe_value(value)
            hint = " (pass a Python int: reading a tensor's value would synchronise the GPU)"
        raise LayoutSpecError(f"`{name}` must be an integer >= {minimum}, got {got}{hint}")
    if value < minimum:
        raise LayoutSpecError(f"`{name}` must be an integer >= {minimum}, got {value}")
    return int(value)


def ints(name: str, values: Sequence[object] | None, *, minimum: int = 0) -> list[int]:
    # The common case in one pass of C loops (every hooked call validates a few lists); else entry by entry.
    if type(values) is list and set(map(type, values)) <= _INT_ONLY and (not values or min(values) >= minimum):
        return list(values)  # a copy, as below: a record never aliases the trainer's list
    if values is None:
        raise LayoutSpecError(f"`{name}` is required")
    if not isinstance(values, (list, tuple)):
        raise LayoutSpecError(f"`{name}` must be a list of Python ints, got {type(values).__name__}")
    return [size(f"{name}[{i}]", v, minimum=minimum) for i, v in enumerate(values)]


def frozen(values: Sequence[object] | None) -> tuple[object, ...] | None:
    """``values`` as a tuple (``None`` stays ``None``): per-sample ints as part of a memo key."""
    return None if values is None else tuple(values)


def is_mapping(value: object) -> bool:
    """``isinstance(value, Mapping)``, answering for a plain dict without the ABC check (hooked calls ask often)."""
    return type(value) is dict or isinstance(value, Mapping)


def sample_ids(samples: Sequence[object]) -> list[int]:
    """Sample indices as a list of ints >= 0 (`LayoutSpecError` naming ``samples[j]`` otherwise)."""
    if type(samples) is list and set(map(type, samples)) <= _INT_ONLY and (not samples or min(samples) >= 0):
        return list(samples)
    return [size(f"samples[{j}]", s, minimum=0) for j, s in enumerate(samples)]


def parallel(cp_size: object, cp_rank: object, layout: str, scheme: str) -> tuple[int, int]:
    if type(cp_size) is int and type(cp_rank) is int and 0 <= cp_rank < cp_size and layout in _LAYOUTS and scheme in _SCHEMES:
        return cp_size, cp_rank
    cp = size("cp_size", cp_size, minimum=1)
    r = size("cp_rank", cp_rank, minimum=0)
    if r >= cp:
        raise LayoutSpecError(f"`cp_rank` must be below `cp_size`: got cp_rank={r}, cp_size={cp}")
    geometry.check_layout(layout)
    geometry.check_scheme(scheme)
    return cp, r


def same_length(lists: Mapping[str, Sequence[object] | None]) -> int:
    lengths = {len(v) for v in lists.values() if v is not None}
    if len(lengths) <= 1:
        return lengths.pop() if lengths else 0
    given = {k: len(v) for k, v in lists.items() if v is not None}
    if len(set(given.values())) > 1:
        detail = ", ".join(f"{k}: {n}" for k, n in given.items())
        raise LayoutSpecError(f"per-sample arguments have different lengths ({detail})")
    return next(iter(given.values()), 0)



def usable_padded(t: int, p: int | None, cp: int, layout: str, scheme: str) -> bool:
    """Whether there is a layout to judge a sample's fields against (else G2/G3/O2 say why)."""
    return layout != "bshd" or (p is not None and geometry.padded_fits(t, p, cp, scheme))


@functools.lru_cache(maxsize=4096)
def expected_count(t: int, resp: int, p: int | None, cp: int, r: int, layout: str, scheme: str) -> int | None:
    # None: no expectation (R > T, or P unusable); another invariant reports why.
    if resp > t or not usable_padded(t, p, cp, layout, scheme):
        return None
    return geometry.response_count(t, resp, cp, r, layout=layout, padded=p if layout == "bshd" else None, scheme=scheme)


def response_sizes(t: int, resp: int, p: int | None, cp: int, r: int, layout: str, scheme: str) -> dict[str, object]:
    sizes: dict[str, object] = {"T": t, "R": resp}
    if layout == "bshd":
        sizes["P"] = p
    sizes.update({"cp": cp, "r": r, "layout": layout})
    if cp > 1:
        sizes["scheme"] = scheme
    return sizes


def bucket_tuple(buckets: Sequence[object] | None) -> tuple[int, ...] | None:
    """Validated static shape buckets (the largest is the max length), or ``None`` for no buckets."""
    if not buckets:
        return None
    values = list(buckets)
    top = max((b for b in values if type(b) is int), default=geometry.DEFAULT_BUCKET_QUANTUM)
    return geometry.validate_buckets(values, top)  # type: ignore[arg-type]
