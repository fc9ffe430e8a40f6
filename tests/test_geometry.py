"""The geometry model: formulas pinned by examples, invariants by properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutcheck.errors import LayoutError, LayoutSpecError
from layoutcheck.geometry import (
    PaddedGeometry,
    alignment_unit,
    allgather_window,
    cp_can_slice,
    local_length,
    materialised_length,
    padded_fits,
    padded_for_local_length,
    padded_length,
    per_sample_padded_lengths,
    rank_ranges,
    replay_rows,
    resolve_bucket,
    response_count,
    response_logit_ranges,
    response_token_ranges,
    rollout_global_padded_lengths,
    validate_buckets,
    zigzag_chunk_size,
    zigzag_chunks,
)

cp_sizes = st.sampled_from([1, 2, 3, 4, 8])


# --- examples from the incidents of docs/design.md ------------------------


def test_rollout_global_padding_inflates_short_samples():
    lengths = [14_010, 1_300, 900]
    glob = rollout_global_padded_lengths(lengths, 128)
    own = per_sample_padded_lengths(lengths, 128)
    assert glob == [14_080] * 3
    assert own == [14_080, 1_408, 1_024]
    assert sum(glob) / sum(lengths) > 2.5 > sum(own) / sum(lengths)


def test_padded_length_is_tight():
    assert padded_length(14_010, 128) == 14_080
    assert padded_length(128, 128) == 128
    assert padded_length(0, 128) == 0


def test_zigzag_example_when_2cp_does_not_divide_p():
    # P=384, cp=4: c = ceil(384 / 8) = 48; 2cp divides P here.
    assert zigzag_chunk_size(384, 4) == 48
    # P=128, cp=3: c = ceil(128 / 6) = 22, local 44 > 128/3, materialised 132 > P.
    assert zigzag_chunks(128, 3, 0) == ((0, 22), (110, 132))
    assert local_length(128, 3) == 44
    assert materialised_length(128, 3) == 132


def test_allgather_needs_p_divisible_by_cp():
    assert allgather_window(256, 2, 1) == (128, 256)
    assert local_length(256, 4, "allgather") == 64
    with pytest.raises(LayoutSpecError, match="multiple of cp"):
        allgather_window(130, 4, 0)


def test_cp_can_slice_is_the_allgather_divisibility_rule():
    assert cp_can_slice(300, 4) and cp_can_slice(300, 4, "zigzag")  # zigzag pads to 2 cp c
    assert cp_can_slice(384, 3, "allgather") and not cp_can_slice(128, 3, "allgather")
    assert cp_can_slice(127, 1, "allgather")  # nothing is sliced
    with pytest.raises(LayoutSpecError, match="multiple of cp"):
        allgather_window(128, 3, 0)  # the window uses the same rule
    assert padded_fits(300, 384, 2, "allgather") and not padded_fits(400, 384, 2)
    assert not padded_fits(100, 128, 3, "allgather")


def test_replay_rows_split_over_tp_under_sequence_parallelism():
    assert replay_rows(384) == replay_rows(384, 2) == 384
    assert replay_rows(384, 2, sequence_parallel=True) == 192
    with pytest.raises(LayoutSpecError, match="do not split evenly over tp=2"):
        replay_rows(385, 2, sequence_parallel=True)


def test_padded_for_local_length_prefers_a_candidate():
    # zigzag, cp = 2: L = 192 comes from P in (368, 384]; the bucket 384 is the one
    assert padded_for_local_length(192, 2, candidates=(256, 384, 512)) == 384
    assert padded_for_local_length(192, 2) == 384  # no candidate: the materialised length
    assert padded_for_local_length(150, 2, candidates=(512,)) == 300
    assert padded_for_local_length(100, 3, "allgather", candidates=(128, 300)) == 300
    assert padded_for_local_length(512, 1, candidates=(256,)) == 512


def test_cp1_holds_everything_unsliced():
    assert local_length(1_000, 1) == 1_000
    assert rank_ranges(1_000, 1, 0) == ((0, 1_000),)
    assert response_count(1_000, 300, 1, 0, padded=1_024) == 300


def test_alignment_unit_lcm_and_max_hazard():
    a = alignment_unit(2, 128)
    assert a.value == 256 and not a.max_is_wrong
    # compression k=3 with cp=2: unit 2*3*2 = 12, which does not divide 128.
    b = alignment_unit(1, 128, cp_size=2, compression_ratio=3)
    assert b.value == math.lcm(128, 12) == 384
    assert b.max_is_wrong and b.max_value == 128
    assert "max()" in b.explain()
    # k=4, cp=1: unit 4 divides 128; max() happens to be right.
    assert not alignment_unit(1, 128, compression_ratio=4).max_is_wrong
    # all-gather windows need P % cp == 0: cp=3 joins the units.
    assert alignment_unit(1, 128, cp_size=3, scheme="allgather").value == 384
    assert alignment_unit(1, 128, cp_size=3).value == 128


def test_bshd_vs_packed_response_ranges_differ():
    # A 1000-token sample with P=1024 under cp=2: the chunk is 256 with P,
    # 250 with the packed rule, so rank 0's response entries differ.
    with_p = response_logit_ranges(1_000, 400, 2, 0, layout="bshd", padded=1_024)
    packed = response_logit_ranges(1_000, 400, 2, 0, layout="thd")
    assert with_p != packed
    assert response_token_ranges(1_000, 400, 2, 0, padded=1_024) == tuple(
        (a + 1, b + 1) for a, b in with_p
    )


def test_padded_geometry_bundles_the_formulas():
    g = PaddedGeometry(total=1_000, response=400, padded=1_024, cp_size=2)
    assert g.prompt == 600
    assert g.local_length == 512
    assert sum(g.response_count(r) for r in range(2)) == 400
    assert g.ranges(1) == zigzag_chunks(1_024, 2, 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda: zigzag_chunks(128, 0, 0),
        lambda: zigzag_chunks(128, 2, 2),
        lambda: zigzag_chunks(-1, 2, 0),
        lambda: zigzag_chunks(128, True, 0),
        lambda: local_length(128, 2, "ring"),
        lambda: response_count(10, 11, 1, 0, padded=128),
        lambda: response_count(100, 10, 2, 0, layout="bshd"),
        lambda: response_count(100, 10, 2, 0, layout="sbhd", padded=128),
        lambda: response_count(200, 10, 2, 0, padded=128),
        lambda: PaddedGeometry(total=10, response=2, padded=None),
        lambda: alignment_unit(0),
        lambda: alignment_unit(1, 128, compression_ratio=0),
    ],
)
def test_bad_arguments_are_spec_errors(call):
    with pytest.raises(LayoutSpecError):
        call()


def test_validate_buckets_lists_every_problem_and_appends_max():
    assert validate_buckets([512, 1024], 2048) == (512, 1024, 2048)
    assert validate_buckets([512, 2048], 2048) == (512, 2048)
    with pytest.raises(LayoutSpecError) as err:
        validate_buckets([100, 512, 512, 4096], 2048)
    text = str(err.value)
    assert "not a multiple of 128" in text
    assert "not above the previous bucket 512" in text
    assert "above max_length 2048" in text
    assert validate_buckets([48, 96], 96, quantum=16) == (48, 96)


def test_resolve_bucket_overflow_is_a_layout_error():
    with pytest.raises(LayoutError) as err:
        resolve_bucket(3_000, (512, 2048))
    (violation,) = err.value.violations
    assert violation.invariant == "G6" and violation.actual == 3_000


# --- properties -----------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(padded=st.integers(0, 5_000), cp=cp_sizes)
def test_zigzag_chunks_cover_materialised_length_exactly_once(padded, cp):
    seen = [0] * materialised_length(padded, cp)
    for r in range(cp):
        for start, end in rank_ranges(padded, cp, r):
            for pos in range(start, end):
                seen[pos] += 1
        assert sum(e - s for s, e in rank_ranges(padded, cp, r)) == local_length(padded, cp)
    assert all(count == 1 for count in seen)
    assert materialised_length(padded, cp) >= padded


@settings(max_examples=300, deadline=None)
@given(
    total=st.integers(1, 4_000),
    data=st.data(),
    cp=cp_sizes,
    unit=st.sampled_from([1, 16, 128, 256]),
    layout=st.sampled_from(["bshd", "thd"]),
    scheme=st.sampled_from(["zigzag", "allgather"]),
)
def test_response_counts_sum_to_r_over_ranks(total, data, cp, unit, layout, scheme):
    response = data.draw(st.integers(0, total - 1))  # at least one prompt token
    padded = padded_length(total, math.lcm(unit, cp))  # all-gather needs P % cp == 0
    counts = [
        response_count(total, response, cp, r, layout=layout, padded=padded, scheme=scheme)
        for r in range(cp)
    ]
    assert sum(counts) == response


def test_without_a_prompt_token_the_first_response_token_has_no_logit():
    assert response_count(10, 10, 1, 0, padded=128) == 9


@settings(max_examples=300, deadline=None)
@given(
    raw=st.lists(st.integers(1, 32), min_size=1, max_size=6, unique=True),
    length=st.integers(0, 32 * 128),
)
def test_resolve_bucket_returns_the_smallest_fitting_bucket(raw, length):
    buckets = validate_buckets(sorted(b * 128 for b in raw), 32 * 128)
    got = resolve_bucket(length, buckets)
    assert got in buckets and got >= length
    assert all(b < length for b in buckets if b < got)


@settings(max_examples=200, deadline=None)
@given(total=st.integers(0, 100_000), unit=st.integers(1, 1_024))
def test_per_sample_padding_is_tight_and_aligned(total, unit):
    p = padded_length(total, unit)
    assert p % unit == 0 and total <= p < total + unit


@settings(max_examples=300, deadline=None)
@given(padded=st.integers(0, 5_000), cp=cp_sizes, scheme=st.sampled_from(["zigzag", "allgather"]))
def test_padded_for_local_length_inverts_local_length(padded, cp, scheme):
    if not cp_can_slice(padded, cp, scheme):
        return
    local = local_length(padded, cp, scheme)
    assert padded_for_local_length(local, cp, scheme, candidates=[padded]) == padded
    guess = padded_for_local_length(local, cp, scheme)
    assert local_length(guess, cp, scheme) == local and guess == materialised_length(padded, cp, scheme)
