"""Layout spaces: parsing, descriptions, differences between partners, lengths per sample and rank."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError
from layoutcheck.spaces import CPPart, SampleLengths, Space, parse_space

SAMPLE = SampleLengths(total=300, response=100, padded=384)


def test_parse_and_describe():
    space = parse_space("R zigzag +1")
    assert space == Space("R", cp=CPPart("zigzag"), shift=1)
    assert space.describe() == "R, CP-local (zigzag), shifted +1"
    assert parse_space("T-1, packed, left").describe() == "T-1, packed, padded left"
    assert Space("P", cp=CPPart("allgather", size=2, rank=1)).describe() == "P, CP-local (allgather rank 1 of 2)"
    assert parse_space("P local").positions == "local"


@pytest.mark.parametrize("text, word", [("Q", "Q"), ("P sideways", "sideways"), ("", None), ("P +2", "+2")])
def test_a_bad_spelling_names_what_is_wrong(text, word):
    with pytest.raises(LayoutSpecError) as err:
        parse_space(text)
    assert (repr(word) if word else "a space is written like") in str(err.value)


def test_differences_name_the_parts_that_disagree():
    labels = parse_space("T-1 +1 right")
    mask = parse_space("T-1 -1 right")
    assert labels.differences(mask) == ("shift",)
    assert labels.differences(labels) == ()
    assert parse_space("P zigzag").differences(parse_space("P")) == ("cp",)


def test_whole_lengths_per_basis():
    assert Space("T").length(SAMPLE) == 300
    assert Space("R").length(SAMPLE) == 100
    assert Space("T-1").length(SAMPLE) == 299
    assert Space("P").length(SAMPLE) == 384
    assert Space("T", shift=1).length(SAMPLE) == 299  # x[1:] of a T-long axis


def test_cp_local_lengths_come_from_the_geometry_model():
    for rank in (0, 1):
        assert parse_space("P zigzag").length(SAMPLE, cp_size=2, cp_rank=rank) == geometry.local_length(384, 2)
        assert parse_space("R zigzag").length(SAMPLE, cp_size=2, cp_rank=rank) == geometry.response_count(
            300, 100, 2, rank, padded=384)
    # over the ranks, a response field's parts add up to R
    assert sum(parse_space("R zigzag").length(SAMPLE, cp_size=4, cp_rank=r) for r in range(4)) == 100
    # a rank fixed by the space wins over the one passed in
    fixed = Space("P", cp=CPPart("allgather", size=4, rank=3))
    assert fixed.length(SAMPLE) == 96


@given(total=st.integers(1, 5000), unit=st.sampled_from([1, 8, 128, 256]), cp=st.integers(1, 4),
       data=st.data())
def test_response_parts_sum_to_r_over_ranks(total, unit, cp, data):
    response = data.draw(st.integers(0, total))
    padded = geometry.padded_length(total, unit)
    sample = SampleLengths(total, response, padded)
    # unsliced (cp = 1) a response field has R entries; sliced, the offset rule drops the first response
    # token's logit when there is no prompt token before it
    expected = response if cp == 1 or response < total else response - 1
    assert sum(parse_space("R zigzag").length(sample, cp_size=cp, cp_rank=r) for r in range(cp)) == expected


def test_lengths_that_cannot_be_measured_say_why():
    with pytest.raises(LayoutSpecError, match="padded length is not known"):
        Space("P").length(SampleLengths(total=10))
    with pytest.raises(LayoutSpecError, match="T-space axis has no CP-local length"):
        parse_space("T zigzag").length(SAMPLE, cp_size=2)
    with pytest.raises(LayoutSpecError, match="shift is -1, 0 or \\+1"):
        Space("T", shift=2)
