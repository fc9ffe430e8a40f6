"""The X1 comparison, on the values ranks exchange, without any process group."""

from __future__ import annotations

import pytest
import torch

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.crossrank.agreement import (
    HEADER,
    Header,
    RankLayout,
    compare,
    count_mismatch,
    decode_lists,
    digest_headers,
    needs_lists,
)


def batch(padded=1536, *, k=3, call=4, samples=(4, 5), lengths=(1400, 1200), scheme="zigzag", layout="bshd"):
    return RankLayout.of("batch", call, k, padded, scheme=scheme, layout=layout, samples=samples, lengths=lengths)


def run(*layouts: RankLayout, field=None):
    """What every rank computes after the exchange: round one, and round two when the digests differ."""
    headers = [Header.decode(x.header()) for x in layouts]
    longest = needs_lists(headers)
    lists = None if longest is None else decode_lists(headers, [x.lists(*longest) for x in layouts], longest[0])
    found, in_step = compare(headers, lists, global_ranks=range(len(layouts)), where="get_batch", field=field)
    return [(v.field, v.problem) for v in found], in_step, found


def test_a_header_is_ints_only_and_decodes_to_what_was_sent():
    mine = batch()
    values = mine.header()
    assert len(values) == HEADER and all(type(v) is int for v in values)
    h = Header.decode(values)
    assert (h.role, h.call, h.micro_batch, h.padded, h.scheme, h.layout) == ("batch", 4, 3, 1536, "zigzag", "bshd")
    assert h.n_samples == 2 and 0 <= h.samples_digest < 2**56
    assert Header.decode(batch(samples=(5, 4)).header()).samples_digest != h.samples_digest


def test_ranks_that_agree_need_one_round_and_report_nothing():
    names, in_step, _ = run(batch(), batch(), batch())
    assert names == [] and in_step
    assert needs_lists([Header.decode(batch().header())] * 2) is None


def test_a_different_p_names_the_rank_with_the_values_and_the_micro_batch():
    names, in_step, found = run(batch(1536), batch(2048))
    assert names == [("max_seq_lens", "cp rank 1 has P=2048 for micro-batch 3, cp rank 0 has P=1536")]
    v = found[0]
    assert (v.invariant, v.micro_batch, v.actual, v.expected) == ("X1", 3, 2048, 1536)
    assert v.sizes == {"cp": 2, "global ranks": (0, 1)} and "same `max_seq_lens`" in v.hint
    assert in_step


def test_the_majority_is_the_reference_and_a_tie_goes_to_the_lowest_rank():
    names, _, _ = run(batch(2048), batch(1536), batch(1536), batch(1536))
    assert names == [("max_seq_lens", "cp rank 0 has P=2048 for micro-batch 3, cp ranks 1, 2, 3 have P=1536")]
    names, _, _ = run(batch(1536), batch(2048), batch(2048), batch(1536))
    assert names == [("max_seq_lens", "cp ranks 1, 2 have P=2048 for micro-batch 3, cp ranks 0, 3 have P=1536")]


def test_order_samples_lengths_scheme_and_layout_are_compared_with_round_two_for_the_lists():
    names, _, _ = run(batch(), batch(samples=(5, 4)))
    assert names == [("samples", "cp rank 1 has sample order [5, 4] for micro-batch 3, cp rank 0 has [4, 5]")]
    names, _, _ = run(batch(), batch(samples=(4, 6, 7), lengths=(1400, 1200, 90)))
    assert names == [
        ("samples", "cp rank 1 has samples [4, 6, 7] for micro-batch 3, cp rank 0 has [4, 5]"),
        ("total_lengths", "cp rank 1 has total lengths [1400, 1200, 90] for micro-batch 3, cp rank 0 has [1400, 1200]"),
    ]
    names, _, _ = run(batch(), batch(scheme="allgather"), batch(layout="thd", padded=1536))
    assert names == [
        ("allgather_cp", "cp rank 1 slices micro-batch 3 with allgather CP, cp ranks 0, 2 with zigzag CP"),
        ("qkv_format", "cp rank 2 lays micro-batch 3 out as thd, cp ranks 0, 1 as bshd"),
    ]


def test_thd_compares_the_stream_length_and_the_replay_filler_names_its_data_key():
    thd = dict(layout="thd", samples=None, lengths=None)
    names, _, _ = run(batch(4096, **thd), batch(4224, **thd))
    assert names == [("cu_seqlens", "cp rank 1 has N=4224 for micro-batch 3, cp rank 0 has N=4096")]
    replay = [RankLayout.of("replay", 1, 0, p) for p in (512, 640)]
    names, _, found = run(*replay, field="rollout_routed_experts")
    assert names == [("rollout_routed_experts", "cp rank 1's replay filler has P=640 for micro-batch 0, cp rank 0 has P=512")]
    assert "(G5)" in found[0].hint


def test_another_micro_batch_index_is_reported_and_unknown_values_are_not_compared():
    names, in_step, _ = run(batch(k=3), batch(k=4, padded=None, samples=None, lengths=None))
    assert names == [("micro-batch index", "cp rank 1 is at micro-batch 4 where cp rank 0 is at micro-batch 3")]
    assert in_step


def test_ranks_at_different_checks_are_out_of_step_and_nothing_else_is_compared():
    names, in_step, _ = run(batch(call=4), RankLayout.of("replay", 4, 3, 4096), batch(call=5, padded=1))
    assert not in_step
    assert names == [
        ("micro-batch schedule",
         "the CP ranks are out of step: cp rank 1 is at its replay-filler check #4, cp rank 0 at its batch-builder check #4"),
        ("micro-batch schedule",
         "the CP ranks are out of step: cp rank 2 is at its batch-builder check #5, cp rank 0 at its batch-builder check #4"),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"padded": torch.tensor(512)}, "reading a tensor's value would synchronise the GPU"),
        ({"padded": True}, "`padded` must be an integer >= 0, got bool True"),
        ({"samples": [0, -1]}, r"`samples\[1\]` must be an integer >= 0, got -1"),
        ({"lengths": torch.tensor([1, 2])}, "`lengths` must be a list of Python ints, got Tensor"),
        ({"scheme": "ring"}, "unknown CP scheme 'ring'"),
        ({"layout": "sbhd"}, "unknown layout 'sbhd'"),
    ],
)
def test_bad_values_are_spec_errors_before_anything_is_sent(change, message):
    values = {"padded": 512, "scheme": "zigzag", "layout": "bshd", "samples": [0, 1], "lengths": [10, 20], **change}
    with pytest.raises(LayoutSpecError, match=message):
        RankLayout.of("batch", 1, 0, values.pop("padded"), **values)


def test_a_steps_digest_covers_every_header_in_order():
    # a deferred step's round one is (count, digest): any value or order that differs must change the digest
    step = [batch(k=0, call=1).header(), batch(k=1, call=2).header()]
    assert 0 <= digest_headers(step) < 2**56 and digest_headers(step) == digest_headers([list(h) for h in step])
    assert digest_headers(step[::-1]) != digest_headers(step)
    assert digest_headers([step[0], batch(k=1, call=2, padded=1664).header()]) != digest_headers(step)


def test_ranks_that_made_different_numbers_of_checks_in_a_step_are_named_with_their_counts():
    v = count_mismatch([24, 24, 23], global_ranks=[4, 5, 6], where="get_batch", micro_batch=5)
    assert v.invariant == "X1" and v.field == "micro-batch schedule" and v.micro_batch == 5
    assert v.problem == ("the CP ranks are out of step: in this step cp ranks 0, 1 made 24 checks; cp rank 2 made "
                         "23 checks (the checks they share agree)")
    assert v.actual == [23] and v.expected == 24
