"""The owner's exit (the rollout-data producer): invariants O1-O5 of docs/design.md#the-invariants."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutError, LayoutSpecError, Violation
from layoutcheck.runtime.contract.common import (
    HINTS,
    REPLAY_FIELDS,
    RESPONSE_FIELDS,
    UNSLICED_RESPONSE_FIELDS,
    bucket_tuple,
    expected_count,
    ints,
    parallel,
    response_sizes,
    size,
)
from layoutcheck.runtime.contract.meta import count, metadata_only, numel, shape_of

__all__ = ["check_rollout"]


# --- the owner's exit: O1-O5 ----------------------------------------------


def check_rollout(
    rollout_data: Mapping[str, Any],
    *,
    unit: int | geometry.AlignmentUnit,
    cp_size: int = 1,
    cp_rank: int = 0,
    layout: str | None = "bshd",
    scheme: str = "zigzag",
    response_scheme: str | None = None,
    per_sample: bool = True,
    buckets: Sequence[int] | None = None,
    response_fields: Sequence[str] = RESPONSE_FIELDS,
    unsliced_fields: Sequence[str] = UNSLICED_RESPONSE_FIELDS,
    replay_fields: Sequence[str] = REPLAY_FIELDS,
    where: str = "get_rollout_data",
) -> list[Violation]:
    """Check a producer's ``rollout_data`` (a dict of per-sample lists) against O1-O5.

    ``unit`` is the alignment unit ``A`` (an int, or a `geometry.AlignmentUnit`
    whose explanation then appears in O2 messages). ``layout`` is the
    ``qkv_format``: ``max_seq_lens`` is required and checked (O2, O3) under
    ``"bshd"`` only. ``per_sample=False`` skips the tightness check O3 (for
    bucketed padding). Response fields are checked for the CP rank
    ``cp_rank``; fields absent from the dict, and ``None`` entries, are skipped.
    ``layout=None`` (the layout is not known) runs only what does not depend
    on it: O1 without ``max_seq_lens``, O4 for unsliced fields (and every
    field when ``cp == 1``), O5.

    ``scheme`` is the CP scheme of the tokens (O2: all-gather windows need
    ``P % cp == 0``); ``response_scheme`` the one response fields are sliced
    with (default: ``scheme``). Miles slices them with the zigzag rule under
    both schemes.

    ``buckets`` (static shape buckets, BSHD): a sample is laid out with the
    bucket of its micro-batch, not with ``P_i``, so CP-sliced response fields
    (O4) are checked against the sample's own bucket (the smallest that holds
    ``T_i``): its micro-batch's ``P`` when the schedule groups samples by
    bucket. A micro-batch with another ``P`` is then G4 at the batch builder.
    """
    if not isinstance(rollout_data, Mapping):
        raise LayoutSpecError(
            f"`rollout_data` must be a mapping of per-sample lists, got {type(rollout_data).__name__}"
        )
    cp, r = parallel(cp_size, cp_rank, layout or "bshd", scheme)
    response_scheme = geometry.check_scheme(response_scheme or scheme)
    explain = unit.explain() if isinstance(unit, geometry.AlignmentUnit) else None
    a = size("unit", unit.value if isinstance(unit, geometry.AlignmentUnit) else unit, minimum=1)
    bucket_list = bucket_tuple(buckets) if layout == "bshd" else None
    for key in ("tokens", "total_lengths"):
        if rollout_data.get(key) is None:
            raise LayoutSpecError(f"`rollout_data` has no `{key}`: the checks need it")

    out: list[Violation] = []
    with metadata_only():
        tokens = rollout_data["tokens"]
        n = len(tokens)
        totals = ints("total_lengths", rollout_data["total_lengths"])
        responses = rollout_data.get("response_lengths")
        responses = None if responses is None else ints("response_lengths", responses)
        padded = rollout_data.get("max_seq_lens") if layout == "bshd" else None
        padded = None if padded is None else ints("max_seq_lens", padded)

        # O1: one entry per sample in every per-sample field
        fields = {"total_lengths": totals, "response_lengths": responses, "max_seq_lens": padded}
        fields.update({f: rollout_data.get(f) for f in (*response_fields, *unsliced_fields, *replay_fields)})
        for name, values in fields.items():
            if values is not None and len(values) != n:
                out.append(Violation(
                    "O1", where, name, "per-sample field has a different number of entries than `tokens`",
                    actual=len(values), expected=n, hint=HINTS["O1"], sizes={"samples": n},
                ))
        if layout == "bshd" and padded is None:
            out.append(Violation(
                "O1", where, "max_seq_lens", "BSHD rollout data has no `max_seq_lens`",
                actual=None, expected=f"{n} padded lengths", hint="write `max_seq_lens` in the producer "
                "(the owner of BSHD padding): P_i = round_up(T_i, A)", sizes={"samples": n},
            ))
        # T_i is the tokens' count; total_lengths must agree (O1), and the
        # other invariants judge the tokens, so one wrong entry is one report.
        true_totals = list(totals)
        for i in range(min(n, len(totals))):
            t_tokens = numel(tokens[i])
            if t_tokens is not None and t_tokens != totals[i]:
                true_totals[i] = t_tokens
                out.append(Violation(
                    "O1", where, "total_lengths", "`total_lengths[i]` is not the token count of sample i",
                    actual=totals[i], expected=t_tokens, hint=HINTS["O1"], sample=i, sizes={"numel": t_tokens},
                ))

        # O3 names rollout-global padding when max_seq_lens are exactly what the bug writes
        rollout_global = geometry.rollout_global_padded_lengths(true_totals, a)
        is_global = padded is not None and len(padded) > 1 and padded == rollout_global
        rollout_max = rollout_global[0] if rollout_global else 0
        # each field looked up once, not once per sample: (name, entries, kept whole on every rank)
        judged = [(f, values, True) for f in unsliced_fields if (values := rollout_data.get(f)) is not None]
        judged += [(f, values, False) for f in response_fields if (values := rollout_data.get(f)) is not None]
        replays = [(f, values) for f in replay_fields if (values := rollout_data.get(f)) is not None]
        for i in range(min(n, len(totals))):
            t = true_totals[i]
            p = padded[i] if padded is not None and i < len(padded) else None
            if p is not None:
                out.extend(_owner_padding(
                    where, i, t, p, a, cp, scheme, explain, per_sample, rollout_max if is_global else None,
                ))
            if responses is not None and i < len(responses):
                laid_out = p if bucket_list is None else _own_bucket(t, bucket_list)
                out.extend(_owner_responses(
                    judged, where, i, t, responses[i], laid_out, cp, r, layout, response_scheme,
                ))
            for f, values in replays:  # O5: T_i - 1 rows before padding
                entry = values[i] if i < len(values) else None
                if entry is not None and count(entry) != t - 1:
                    out.append(Violation(
                        "O5", where, f, "replay array does not have one row per predicted token",
                        actual=shape_of(entry), expected=f"{t - 1} rows (T_i - 1)", hint=HINTS["O5"],
                        sample=i, sizes={"T": t},
                    ))
    return out


def _own_bucket(t: int, buckets: tuple[int, ...]) -> int | None:
    # None: T_i fits no bucket (G6 reports it at the batch builder).
    try:
        return geometry.resolve_bucket(t, buckets)
    except LayoutError:
        return None


def _owner_padding(
    where: str, i: int, t: int, p: int, a: int, cp: int, scheme: str,
    explain: str | None, per_sample: bool, rollout_global: int | None,
) -> list[Violation]:
    # rollout_global: the one P every entry carries, when the rollout is padded to its maximum
    sliceable = geometry.cp_can_slice(p, cp, scheme)
    if not p % a and t <= p and sliceable and not (per_sample and p >= t + a):
        return []  # the common case: no message to build
    out: list[Violation] = []
    sizes = {"T": t, "P": p, "A": a}
    # O2: P_i % A == 0 and T_i <= P_i
    if p % a:
        problem = "padded length is not a multiple of the alignment unit"
        if explain:
            problem += f" ({explain})"
        out.append(Violation("O2", where, "max_seq_lens", problem, actual=p,
                             expected=f"a multiple of A={a}: {geometry.round_up(p, a)}",
                             hint=HINTS["O2"], sample=i, sizes=sizes))
    if t > p:
        out.append(Violation("O2", where, "max_seq_lens", "padded length is below the true length",
                             actual=p, expected=f">= T_i = {t}: {geometry.round_up(t, a)}",
                             hint=HINTS["O2"], sample=i, sizes=sizes))
    if not sliceable:  # the all-gather window needs P % cp == 0
        out.append(Violation("O2", where, "max_seq_lens",
                             "all-gather CP needs the padded length to be a multiple of cp",
                             actual=p, expected=f"a multiple of cp={cp}", hint=HINTS["G3-allgather"],
                             sample=i, sizes={**sizes, "cp": cp}))
    # O3: per-sample padding is tight, T_i <= P_i < T_i + A
    if per_sample and t <= p and p >= t + a:
        own = geometry.padded_length(t, a)
        problem = f"padded length is {_ratio(p, t)} the true length"
        if rollout_global is not None:
            problem += f" (every entry is round_up(max T, A) = {rollout_global}: rollout-global padding)"
        else:
            problem += ", more than one alignment unit above it"
        out.append(Violation("O3", where, "max_seq_lens", problem, actual=p,
                             expected=f"{own} (T_i <= P_i < T_i + A)", hint=HINTS["O3"], sample=i,
                             sizes={**sizes, "P/T": _ratio(p, t)}))
    return out


def _ratio(p: int, t: int) -> str:
    return f"{p / t:.1f}x" if t else "inf x"


def _owner_responses(
    fields: Sequence[tuple[str, Sequence[Any], bool]], where: str, i: int, t: int, resp: int, p: int | None,
    cp: int, r: int, layout: str | None, scheme: str,
) -> list[Violation]:
    # O4: R_i entries before CP slicing; after slicing, the count the CP offset
    # rule gives for (T_i, R_i, P_i, cp, r). fields: (name, entries, kept whole), present fields only.
    out: list[Violation] = []
    if resp > t:  # O1: no response is longer than its sample
        return [Violation(
            "O1", where, "response_lengths", "response length exceeds the sample's total length",
            actual=resp, expected=f"<= T_i = {t}", hint=HINTS["O1"], sample=i, sizes={"T": t, "R": resp},
        )]
    # without a layout there is no slicing rule to compare with: sliced fields are judged at cp == 1 only
    expected_sliced = None if layout is None else expected_count(t, resp, p, cp, r, layout, scheme)
    for f, values, whole in fields:
        entry = values[i] if i < len(values) else None
        if entry is None:
            continue
        want = resp if (whole or cp == 1) else expected_sliced
        if want is None:  # P_i unusable (O2 reported): no expectation to compare with
            continue
        got = count(entry)
        if got != want:
            rule = "R_i entries" if want == resp and (whole or cp == 1) else "the CP offset rule's count"
            out.append(Violation(
                "O4", where, f, f"response field does not hold {rule} on this rank",
                actual=got, expected=want, hint=HINTS["O4"], sample=i,
                sizes=response_sizes(t, resp, p, cp, r, layout or "unknown", scheme),
            ))
    return out
