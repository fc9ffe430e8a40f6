"""The padded-sequence geometry model: the one place for every formula.

Pure Python (no torch, no libcst), so the linter's docs, the runtime checks
and the bucket advisor all read the same definitions. Names follow
docs/design.md#vocabulary:

=========  ===============================================================
``T``      true total length of a sample (prompt + response tokens)
``R``      response length; ``p = T - R`` is the prompt length
``P``      padded length, the sample's entry in ``max_seq_lens``
``A``      alignment unit (TP size x pad multiplier, compressed attention)
``cp, r``  context-parallel size and rank
``c``      zigzag chunk size ``ceil(P / (2 cp))``
=========  ===============================================================

Every function validates its arguments and raises `LayoutSpecError` for
nonsense (negative sizes, ``r >= cp``, unknown names): a bad argument must
never look like a layout violation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from layoutcheck.records import dataclass
from typing import Literal

from layoutcheck.errors import LayoutError, LayoutSpecError, Violation, describe_value

__all__ = [
    "BSHD",
    "DEFAULT_BUCKET_QUANTUM",
    "DEFAULT_PAD_MULTIPLIER",
    "LAYOUTS",
    "SCHEMES",
    "THD",
    "AlignmentUnit",
    "Layout",
    "PaddedGeometry",
    "Scheme",
    "alignment_unit",
    "allgather_window",
    "bucket_divisors",
    "bucket_grid",
    "bucket_problems",
    "bucket_recompile_limit",
    "bucket_step",
    "ceil_div",
    "cp_can_slice",
    "local_length",
    "materialised_length",
    "packed_sample_length",
    "packed_stream_length",
    "padded_fits",
    "padded_for_local_length",
    "padded_length",
    "per_sample_padded_lengths",
    "repair_buckets",
    "resolve_bucket",
    "response_count",
    "response_logit_ranges",
    "response_token_ranges",
    "replay_rows",
    "rollout_global_padded_lengths",
    "round_up",
    "validate_buckets",
    "zigzag_chunk_size",
    "zigzag_chunks",
]

Layout = Literal["bshd", "thd"]
Scheme = Literal["zigzag", "allgather"]
BSHD: Layout = "bshd"
THD: Layout = "thd"
LAYOUTS: tuple[str, ...] = ("bshd", "thd")
SCHEMES: tuple[str, ...] = ("zigzag", "allgather")

DEFAULT_PAD_MULTIPLIER = 128
"""Tokens per TP rank that a padded length is a multiple of, by default."""

DEFAULT_BUCKET_QUANTUM = 128
"""Bucket lengths are multiples of this: flex-attention block masks work in
128-token blocks, and fp8 needs multiples of 16, which 128 satisfies."""

Range = tuple[int, int]
"""A half-open ``[start, end)`` interval of positions."""


# --- argument validation --------------------------------------------------


def _int(name: str, value: object, *, minimum: int) -> int:
    if type(value) is int and value >= minimum:  # the common case, on every hooked call
        return value
    # bool is an int subclass; True as a CP size is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise LayoutSpecError(
            f"`{name}` must be an integer >= {minimum}, got {describe_value(value, quote=True)} ({type(value).__name__})"
        )
    if value < minimum:
        raise LayoutSpecError(f"`{name}` must be an integer >= {minimum}, got {value}")
    return value


def _rank(cp_size: int, cp_rank: int) -> None:
    _int("cp_size", cp_size, minimum=1)
    _int("cp_rank", cp_rank, minimum=0)
    if cp_rank >= cp_size:
        raise LayoutSpecError(f"`cp_rank` must be below `cp_size`: got r={cp_rank}, cp={cp_size}")


def check_layout(layout: str) -> Layout:
    """Return ``layout`` if it names a known layout, else raise `LayoutSpecError`."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise LayoutSpecError(
            f"unknown layout {describe_value(layout, quote=True)}: expected one of {', '.join(LAYOUTS)}"
        )
    return layout  # type: ignore[return-value]


def check_scheme(scheme: str) -> Scheme:
    """Return ``scheme`` if it names a known CP scheme, else raise `LayoutSpecError`."""
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise LayoutSpecError(
            f"unknown CP scheme {describe_value(scheme, quote=True)}: expected one of {', '.join(SCHEMES)}"
        )
    return scheme  # type: ignore[return-value]


# --- integer helpers ------------------------------------------------------


def ceil_div(n: int, m: int) -> int:
    """``ceil(n / m)`` on integers."""
    _int("n", n, minimum=0)
    _int("m", m, minimum=1)
    return -(-n // m)


def round_up(n: int, m: int) -> int:
    """The smallest multiple of ``m`` that is ``>= n``."""
    return ceil_div(n, m) * m


# --- the alignment unit A -------------------------------------------------


@dataclass(frozen=True)
class AlignmentUnit:
    """The alignment unit ``A`` and the units it combines.

    ``value`` is their least common multiple: a padded length must be a
    multiple of *every* unit. ``max_value`` is what combining with ``max()``
    gives; when it differs, code that uses ``max()`` is latently wrong.
    """

    value: int
    units: tuple[tuple[str, int], ...]

    @property
    def max_value(self) -> int:
        return max(u for _, u in self.units)

    @property
    def max_is_wrong(self) -> bool:
        """True when ``max()`` of the units is not a multiple of all of them."""
        return self.max_value != self.value

    def explain(self) -> str:
        parts = " and ".join(f"{name}={u}" for name, u in self.units)
        text = f"A = lcm({parts}) = {self.value}"
        if self.max_is_wrong:
            text += f"; combining with max() would give {self.max_value}, which is not a multiple of every unit"
        return text


def alignment_unit(
    tp_size: int = 1,
    pad_multiplier: int = DEFAULT_PAD_MULTIPLIER,
    *,
    cp_size: int = 1,
    compression_ratio: int | None = None,
    scheme: str = "zigzag",
) -> AlignmentUnit:
    """The alignment unit ``A`` of docs/design.md#vocabulary.

    ``A`` is a multiple of ``tp_size * pad_multiplier``; with compressed
    attention of ratio ``k`` it is also a multiple of ``k * cp`` when
    ``cp == 1`` and ``2 k cp`` when ``cp > 1`` (each zigzag chunk must hold
    whole compressed blocks). All-gather CP with ``cp > 1`` adds ``cp``
    itself (its windows need ``P % cp == 0``). Units are combined with ``lcm``.
    """
    _int("tp_size", tp_size, minimum=1)
    _int("pad_multiplier", pad_multiplier, minimum=1)
    _int("cp_size", cp_size, minimum=1)
    units: list[tuple[str, int]] = [("tp_size*pad_multiplier", tp_size * pad_multiplier)]
    if compression_ratio is not None:
        k = _int("compression_ratio", compression_ratio, minimum=1)
        units.append(("compression", k * cp_size * (2 if cp_size > 1 else 1)))
    if check_scheme(scheme) == "allgather" and cp_size > 1:
        units.append(("allgather_cp", cp_size))
    return AlignmentUnit(value=math.lcm(*(u for _, u in units)), units=tuple(units))


# --- padded lengths P ----------------------------------------------------


def padded_length(total_length: int, unit: int) -> int:
    """Per-sample padded length: the tight ``P`` with ``T <= P < T + A`` (invariant O3)."""
    return round_up(_int("total_length", total_length, minimum=0), _int("unit", unit, minimum=1))


def per_sample_padded_lengths(total_lengths: Iterable[int], unit: int) -> list[int]:
    """``max_seq_lens`` as the owner should write it: each sample its own ``P``."""
    return [padded_length(t, unit) for t in total_lengths]


def rollout_global_padded_lengths(total_lengths: Sequence[int], unit: int) -> list[int]:
    """The rollout-global rule (the bug): one rounded maximum copied to every sample.

    Kept only to measure what the bug costs: `layoutcheck.demo` prints
    ``sum()`` of it as the predicted cost and checks the buggy run against it.
    """
    if not total_lengths:
        return []
    return [padded_length(max(total_lengths), unit)] * len(total_lengths)


def packed_sample_length(total_length: int, cp_size: int) -> int:
    """A sample's length in a packed (THD) stream: ``T`` padded to a multiple of ``2 cp``.

    With ``cp == 1`` no per-sample padding is needed.
    """
    _int("cp_size", cp_size, minimum=1)
    if cp_size == 1:
        return _int("total_length", total_length, minimum=0)
    # The model defines the packed rule; it is not a second owner.
    return round_up(total_length, 2 * cp_size)


# --- context-parallel slicing --------------------------------------------


def zigzag_chunk_size(padded: int, cp_size: int) -> int:
    """The zigzag chunk size ``c = ceil(P / (2 cp))``."""
    return ceil_div(_int("padded_length", padded, minimum=0), 2 * _int("cp_size", cp_size, minimum=1))


def zigzag_chunks(padded: int, cp_size: int, cp_rank: int) -> tuple[Range, Range]:
    """The two chunks rank ``r`` keeps under zigzag CP: chunk ``r`` and chunk ``2cp-1-r``."""
    _rank(cp_size, cp_rank)
    c = zigzag_chunk_size(padded, cp_size)
    first = (cp_rank * c, (cp_rank + 1) * c)
    second = ((2 * cp_size - 1 - cp_rank) * c, (2 * cp_size - cp_rank) * c)
    return first, second


@functools.lru_cache(maxsize=4096)  # asked per sample and per micro-batch: the same few P over and over
def cp_can_slice(padded: int, cp_size: int, scheme: str = "zigzag") -> bool:
    """Whether CP ``scheme`` can lay a sample of padded length ``P`` out over ``cp`` ranks.

    Always with ``cp == 1`` and under zigzag (which materialises ``2 cp c``
    positions); all-gather CP needs ``P % cp == 0``, since its windows are
    ``P / cp`` long. The one place this rule is written.
    """
    _int("padded_length", padded, minimum=0)
    _int("cp_size", cp_size, minimum=1)
    return check_scheme(scheme) == "zigzag" or padded % cp_size == 0


def padded_fits(total: int, padded: int, cp_size: int = 1, scheme: str = "zigzag") -> bool:
    """Whether ``P`` can hold a sample of ``T`` tokens and be CP-sliced: ``T <= P`` and `cp_can_slice`.

    When it does not, there is no layout to compare a sample's fields with
    (the checks report why: G2, G3 or O2).
    """
    return _int("total", total, minimum=0) <= padded and cp_can_slice(padded, cp_size, scheme)


def allgather_window(padded: int, cp_size: int, cp_rank: int) -> Range:
    """The contiguous window rank ``r`` keeps under all-gather CP; needs ``P % cp == 0``."""
    _rank(cp_size, cp_rank)
    if not cp_can_slice(padded, cp_size, "allgather"):
        raise LayoutSpecError(
            f"all-gather CP needs the padded length to be a multiple of cp: P={padded}, cp={cp_size}"
        )
    size = padded // cp_size
    return (cp_rank * size, (cp_rank + 1) * size)


def local_length(padded: int, cp_size: int, scheme: str = "zigzag") -> int:
    """Positions one CP rank holds for a sample of padded length ``P``.

    ``P`` when ``cp == 1`` (nothing is sliced); ``2c`` under zigzag (more than
    ``P / cp`` when ``2 cp`` does not divide ``P``); ``P / cp`` under all-gather.
    """
    check_scheme(scheme)
    _int("cp_size", cp_size, minimum=1)
    if cp_size == 1:
        return _int("padded_length", padded, minimum=0)
    if scheme == "allgather":
        start, end = allgather_window(padded, cp_size, 0)
        return end - start
    return 2 * zigzag_chunk_size(padded, cp_size)


def materialised_length(padded: int, cp_size: int, scheme: str = "zigzag") -> int:
    """The padded length actually materialised before slicing: ``2 cp c`` under zigzag."""
    return local_length(padded, cp_size, scheme) * cp_size


def padded_for_local_length(
    local: int, cp_size: int = 1, scheme: str = "zigzag", *, candidates: Iterable[int] = ()
) -> int:
    """The padded length ``P`` a batch was laid out with, from the local length ``L`` one rank holds.

    The smallest of ``candidates`` (static shape buckets, say) whose
    `local_length` is ``L``; when none is, the length materialised for ``L``
    (``L * cp``: zigzag's ``2 cp c``, all-gather's ``cp * P / cp``), which
    lays out to ``L`` again. With ``cp == 1``, ``L`` itself. Under zigzag
    several ``P`` give one ``L``, which is why a known candidate is preferred.
    """
    _int("local_length", local, minimum=0)
    _int("cp_size", cp_size, minimum=1)
    check_scheme(scheme)
    for p in sorted(candidates):
        if cp_can_slice(p, cp_size, scheme) and local_length(p, cp_size, scheme) == local:
            return p
    return local * cp_size


def rank_ranges(padded: int, cp_size: int, cp_rank: int, scheme: str = "zigzag") -> tuple[Range, ...]:
    """The position ranges of ``[0, materialised)`` that rank ``r`` holds, in order."""
    check_scheme(scheme)
    _rank(cp_size, cp_rank)
    if cp_size == 1:
        return ((0, _int("padded_length", padded, minimum=0)),)
    if scheme == "allgather":
        return (allgather_window(padded, cp_size, cp_rank),)
    return zigzag_chunks(padded, cp_size, cp_rank)


# --- response-space offsets (the oracle for O4 / G4) ------------------------


def _layout_length(total: int, padded: int | None, cp_size: int, layout: str) -> int:
    # The length the CP slicing is computed from: BSHD slices with the owner's
    # P; THD (packed) with the sample's own length. Calling a response-offset
    # helper without its layout arguments silently picks the THD rule.
    if check_layout(layout) == "bshd":
        if padded is None:
            raise LayoutSpecError("layout 'bshd' needs the padded length `padded` (the sample's max_seq_lens entry)")
        _int("padded", padded, minimum=0)
        if padded < total:
            raise LayoutSpecError(f"padded length P={padded} is below the total length T={total}")
        return padded
    return packed_sample_length(total, cp_size)


def response_logit_ranges(
    total: int,
    response: int,
    cp_size: int = 1,
    cp_rank: int = 0,
    *,
    layout: str = "bshd",
    padded: int | None = None,
    scheme: str = "zigzag",
) -> tuple[Range, ...]:
    """Global logit positions of sample's response tokens that rank ``r`` holds.

    Response token ``j`` (``0 <= j < R``) is predicted by the logit at
    position ``p - 1 + j``, so the response logits are ``[p - 1, T - 1)``
    intersected with the rank's ranges. Empty intersections are dropped.
    With no prompt token (``R == T``) the first response token has no logit,
    so the ranks hold ``R - 1`` entries in all.
    """
    _int("total", total, minimum=0)
    _int("response", response, minimum=0)
    if response > total:
        raise LayoutSpecError(f"response length R={response} exceeds the total length T={total}")
    length = _layout_length(total, padded, cp_size, layout)
    if response == 0:
        _rank(cp_size, cp_rank)
        return ()
    lo, hi = total - response - 1, total - 1
    out: list[Range] = []
    for start, end in rank_ranges(length, cp_size, cp_rank, scheme):
        a, b = max(start, lo), min(end, hi)
        if a < b:
            out.append((a, b))
    return tuple(out)


def response_token_ranges(
    total: int,
    response: int,
    cp_size: int = 1,
    cp_rank: int = 0,
    *,
    layout: str = "bshd",
    padded: int | None = None,
    scheme: str = "zigzag",
) -> tuple[Range, ...]:
    """Token positions matching `response_logit_ranges` (each shifted by one)."""
    ranges = response_logit_ranges(
        total, response, cp_size, cp_rank, layout=layout, padded=padded, scheme=scheme
    )
    return tuple((a + 1, b + 1) for a, b in ranges)


def response_count(
    total: int,
    response: int,
    cp_size: int = 1,
    cp_rank: int = 0,
    *,
    layout: str = "bshd",
    padded: int | None = None,
    scheme: str = "zigzag",
) -> int:
    """How many response entries rank ``r`` holds (they sum to ``R`` over ranks)."""
    ranges = response_logit_ranges(
        total, response, cp_size, cp_rank, layout=layout, padded=padded, scheme=scheme
    )
    return sum(b - a for a, b in ranges)


# --- one sample's geometry -------------------------------------------------


@dataclass(frozen=True)
class PaddedGeometry:
    """One sample's layout: lengths, padding and CP geometry, validated once.

    ``padded`` is the owner's ``P`` (BSHD); under THD it may be left ``None``
    and the packed length is used.
    """

    total: int
    response: int
    padded: int | None = None
    cp_size: int = 1
    layout: Layout = "bshd"
    scheme: Scheme = "zigzag"

    def __post_init__(self) -> None:
        _int("total", self.total, minimum=0)
        _int("response", self.response, minimum=0)
        _int("cp_size", self.cp_size, minimum=1)
        check_layout(self.layout)
        check_scheme(self.scheme)
        if self.response > self.total:
            raise LayoutSpecError(f"response length R={self.response} exceeds the total length T={self.total}")
        _layout_length(self.total, self.padded, self.cp_size, self.layout)

    @property
    def prompt(self) -> int:
        return self.total - self.response

    @property
    def length(self) -> int:
        """The length CP slicing works from: ``P`` under BSHD, the packed length under THD."""
        return _layout_length(self.total, self.padded, self.cp_size, self.layout)

    @property
    def local_length(self) -> int:
        return local_length(self.length, self.cp_size, self.scheme)

    def ranges(self, cp_rank: int) -> tuple[Range, ...]:
        return rank_ranges(self.length, self.cp_size, cp_rank, self.scheme)

    def response_count(self, cp_rank: int) -> int:
        return response_count(
            self.total, self.response, self.cp_size, cp_rank,
            layout=self.layout, padded=self.padded, scheme=self.scheme,
        )

    def response_logit_ranges(self, cp_rank: int) -> tuple[Range, ...]:
        return response_logit_ranges(
            self.total, self.response, self.cp_size, cp_rank,
            layout=self.layout, padded=self.padded, scheme=self.scheme,
        )


# --- sequence-parallel rows ----------------------------------------------


def replay_rows(positions: int, tp_size: int = 1, *, sequence_parallel: bool = False) -> int:
    """Rows of a replay tensor (routing or indexer replay) for ``positions`` token positions on this rank.

    ``positions`` is what the batch builder laid out for the micro-batch on
    this CP rank (``B * L`` under BSHD, the stream length ``N`` under THD);
    under sequence parallelism each TP rank keeps ``positions / tp`` rows
    (invariant G5). Positions that do not split evenly over TP raise
    `LayoutSpecError`.
    """
    _int("positions", positions, minimum=0)
    _int("tp_size", tp_size, minimum=1)
    if not sequence_parallel:
        return positions
    share, rest = divmod(positions, tp_size)
    if rest:
        raise LayoutSpecError(
            f"{positions} token positions do not split evenly over tp={tp_size} under sequence parallelism"
        )
    return share


# --- static shape buckets -------------------------------------------------


def bucket_problems(
    buckets: Sequence[object],
    max_length: int,
    *,
    quantum: int = DEFAULT_BUCKET_QUANTUM,
    sp_degree: int = 1,
    cp_degree: int = 1,
    require_max_last: bool = False,
) -> list[str]:
    """Every way ``buckets`` breaks the bucket rules, as sentences (empty when valid).

    Rules: positive multiples of ``quantum`` (flex-attention works in
    128-token blocks), strictly increasing, none above ``max_length``, and
    ``max_length`` itself a multiple of ``quantum`` (it is always the last
    bucket). Every bucket (and ``max_length``) must also be a multiple of
    each of `bucket_divisors` (sequence and context parallelism). With
    ``require_max_last`` a list that does not end at ``max_length`` is a
    problem too (`validate_buckets` appends it instead). The linter's
    ``bucket-spec`` rule reports these sentences as they are.
    """
    _int("max_length", max_length, minimum=1)
    _int("quantum", quantum, minimum=1)
    divisors = bucket_divisors(sp_degree, cp_degree)
    values = list(buckets)
    problems: list[str] = []
    if max_length % quantum:
        problems.append(f"max_length {max_length} is not a multiple of the quantum {quantum}")
    problems += [f"max_length {max_length} does not {why}" for d, why in divisors if max_length % d]
    for i, b in enumerate(values):
        if isinstance(b, bool) or not isinstance(b, int):
            problems.append(f"bucket #{i} is {describe_value(b, quote=True)}, not an integer")
            continue
        if b <= 0:
            problems.append(f"bucket #{i} is {b}, not positive")
        elif b % quantum:
            problems.append(f"bucket #{i} is {b}, not a multiple of {quantum}")
        if b > 0:
            problems += [f"bucket #{i} is {b}, which does not {why}" for d, why in divisors if b % d]
        if b > max_length:
            problems.append(f"bucket #{i} is {b}, above max_length {max_length}")
        previous = values[i - 1] if i else None
        if isinstance(previous, int) and not isinstance(previous, bool) and b <= previous:
            problems.append(f"bucket #{i} is {b}, not above the previous bucket {previous}")
    if require_max_last:
        last = values[-1] if values else None
        if last is None:
            problems.append(f"no buckets given: the last bucket must be max_length {max_length}")
        elif isinstance(last, int) and not isinstance(last, bool) and last < max_length:
            # A last bucket that is not an int, or above max_length, is reported above already.
            problems.append(
                f"the last bucket is {last}, not max_length {max_length}: end the list with "
                f"{max_length} (max_length is always the last bucket)"
            )
    return problems


def validate_buckets(
    buckets: Iterable[int],
    max_length: int,
    *,
    quantum: int = DEFAULT_BUCKET_QUANTUM,
) -> tuple[int, ...]:
    """Check a bucket list against the bucket rules and return it normalised.

    See `bucket_problems` for the rules; ``max_length`` is appended when it
    is not the last bucket already. Every broken rule is listed in one
    `LayoutSpecError`.
    """
    values = list(buckets)
    problems = bucket_problems(values, max_length, quantum=quantum)
    if problems:
        raise LayoutSpecError(f"invalid buckets {describe_value(values)}: " + "; ".join(problems))
    if not values or values[-1] != max_length:
        values.append(max_length)
    return tuple(values)


def repair_buckets(
    buckets: Iterable[int],
    max_length: int | None = None,
    *,
    quantum: int = DEFAULT_BUCKET_QUANTUM,
) -> tuple[int, ...] | None:
    """The nearest valid bucket list to ``buckets`` (the linter's ``bucket-spec`` fix), or None.

    Each positive bucket is rounded up to a multiple of ``quantum``; buckets
    that are not positive, or above ``max_length``, are dropped; the rest are
    sorted without repeats, and ``max_length`` (when given) ends the list.
    None when nothing valid is left or ``max_length`` is off the quantum grid
    (then no list satisfies `bucket_problems`).
    """
    _int("quantum", quantum, minimum=1)
    if max_length is not None and (max_length < 1 or max_length % quantum):
        return None
    kept = {round_up(b, quantum) for b in buckets if b > 0}
    if max_length is not None:
        kept = {b for b in kept if b < max_length} | {max_length}
    repaired = tuple(sorted(kept))
    if not repaired or bucket_problems(repaired, max_length or repaired[-1], quantum=quantum):
        return None
    return repaired


def bucket_grid(
    max_length: int,
    quantum: int = DEFAULT_BUCKET_QUANTUM,
    *,
    sp_degree: int = 1,
    cp_degree: int = 1,
) -> tuple[int, ...]:
    """Every length a bucket may have, ascending: the candidates an advisor chooses from.

    The positive multiples of `bucket_step` below
    ``max_length``, then ``max_length`` itself (always the last bucket, even
    when it is not on the grid: `bucket_problems` reports that). Padding each
    micro-batch to the smallest grid length that holds it is the floor of
    every bucket choice.
    """
    _int("max_length", max_length, minimum=1)
    step = bucket_step(quantum, sp_degree, cp_degree)
    return (*range(step, max_length, step), max_length)


def bucket_divisors(sp_degree: int = 1, cp_degree: int = 1) -> tuple[tuple[int, str], ...]:
    """What every bucket must be a multiple of besides the quantum, each with why (a verb phrase).

    Without context parallelism, sequence parallelism splits the whole
    length: ``sp``. With zigzag CP over ``cp`` ranks the length is cut into
    ``2 * cp`` chunks, and sequence parallelism then splits each CP rank's
    part (``P / cp``), so ``P`` must be a multiple of ``cp * sp``, not of
    ``sp`` alone (verl c20d5049a fixed exactly this unit).
    """
    sp, cp = _int("sp_degree", sp_degree, minimum=1), _int("cp_degree", cp_degree, minimum=1)
    if cp == 1:
        return ((sp, f"split evenly over the SP degree {sp}"),) if sp > 1 else ()
    out = [(2 * cp, f"split into the {2 * cp} zigzag chunks of CP degree {cp}")]
    if sp > 1:
        why = f"give each of the {cp} CP ranks a part that splits evenly over the SP degree {sp}"
        out.append((cp * sp, f"{why} (a multiple of cp * sp = {cp * sp})"))
    return tuple(out)


def bucket_step(quantum: int = DEFAULT_BUCKET_QUANTUM, sp_degree: int = 1, cp_degree: int = 1) -> int:
    """The spacing of the bucket grid: the lcm of the quantum and every `bucket_divisors` entry.

    With the default quantum 128 and SP and CP degrees that are powers of
    two (and ``2 * cp * sp <= 128``), that is the quantum itself.
    """
    return math.lcm(_int("quantum", quantum, minimum=1), *(d for d, _ in bucket_divisors(sp_degree, cp_degree)))


def bucket_recompile_limit(buckets: int) -> int:
    """The Dynamo recompile limit ``K`` static shape buckets need: ``2 K + 4``.

    The figure measured for a compiled transformer block family (issue 8):
    with ``torch._dynamo.config.recompile_limit`` below it, Dynamo stops
    compiling new shapes and the later buckets run eagerly.
    """
    return 2 * _int("buckets", buckets, minimum=1) + 4


def resolve_bucket(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds ``length`` (invariant G6).

    ``buckets`` must already be validated. A length above the last bucket
    raises `LayoutError`: that sample cannot be laid out at all.
    """
    _int("length", length, minimum=0)
    if not buckets:
        raise LayoutSpecError("no buckets given")
    for b in buckets:
        if b >= length:
            return b
    raise LayoutError(
        [
            Violation(
                invariant="G6",
                where="resolve_bucket",
                field="buckets",
                problem="the length fits no bucket",
                actual=length,
                expected=f"a length <= the last bucket {buckets[-1]}",
                hint="raise max_length (the last bucket) or truncate samples longer than it",
                sizes={"buckets": tuple(buckets)},
            )
        ]
    )


# --- packed (THD) micro-batches ------------------------------------------


def packed_stream_length(
    total_lengths: Iterable[int],
    cp_size: int = 1,
    *,
    scheme: str = "zigzag",
    pad_to: int = 1,
) -> int:
    """Positions one CP rank holds in a THD (packed) micro-batch.

    Zigzag: each sample is padded to its packed length
    (`packed_sample_length`) and CP-sliced (``packed / cp`` per rank); the
    local stream is concatenated and its tail padded to a multiple of
    ``pad_to`` (the batch builder's ``tp_size * pad_multiplier``).
    All-gather (``cp > 1``): the samples are concatenated unpadded, the
    *global* stream is padded to a multiple of ``cp * pad_to`` and split
    into ``cp`` equal contiguous windows (as Miles's ``get_batch`` does).
    """
    _int("cp_size", cp_size, minimum=1)
    multiple = _int("pad_to", pad_to, minimum=1)
    if check_scheme(scheme) == "allgather" and cp_size > 1:
        stream = sum(_int("total_length", t, minimum=0) for t in total_lengths)
        return round_up(stream, cp_size * multiple) // cp_size
    stream = sum(local_length(packed_sample_length(t, cp_size), cp_size, scheme) for t in total_lengths)
    return round_up(stream, multiple)
