"""The invariants O1-O5 and G1-G6 on hand-built data, the spec errors, and the modes.

Each invariant: a correct case (no violation) and a broken one asserting the
invariant id, the sample, the field, the seen and expected values and
fragments of the formatted message. Numbers are worked out by hand in the
comments (A = 128, zigzag CP unless said otherwise).
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch

from layoutcheck import (
    LayoutChecker,
    LayoutError,
    LayoutSpecError,
    LayoutWarning,
    Recorder,
    Violation,
    check_batch,
    check_batch_layout,
    check_micro_batch,
    check_replay,
    check_response_offsets,
    check_rollout,
    check_rollout_data,
    format_violations,
    geometry,
    report,
)


def rollout(totals, responses=None, *, padded=None, log_probs=None, cp=1, r=0, layout="bshd", scheme="zigzag"):
    """A producer's rollout dict built by hand: ``tokens``, lengths, masks, log-probs, replay."""
    responses = responses or [t - t // 4 for t in totals]
    padded = padded or [geometry.round_up(t, 128) for t in totals]
    if log_probs is None:
        log_probs = [
            t_r if cp == 1 else geometry.response_count(
                t, t_r, cp, r, layout=layout, padded=p if layout == "bshd" else None, scheme=scheme)
            for t, t_r, p in zip(totals, responses, padded)
        ]
    data = {
        "tokens": [torch.ones(t, dtype=torch.long) for t in totals],
        "total_lengths": list(totals),
        "response_lengths": list(responses),
        "loss_masks": [torch.ones(x, dtype=torch.int) for x in responses],
        "rollout_log_probs": [torch.zeros(n) for n in log_probs],
        "rollout_routed_experts": [torch.zeros(t - 1, 2, 2, dtype=torch.int32) for t in totals],
    }
    if layout == "bshd":
        data["max_seq_lens"] = list(padded)
    return data


def only(violations: list[Violation]) -> Violation:
    assert len(violations) == 1, format_violations(violations)
    return violations[0]


# --- O1: one entry per sample, total_lengths count the tokens ------------------


def test_o1_correct():
    assert check_rollout(rollout([300, 130, 700]), unit=128) == []


def test_o1_total_length_is_not_the_token_count():
    data = rollout([300, 130])
    data["total_lengths"][1] = 140
    data["max_seq_lens"][1] = 256
    v = only(check_rollout(data, unit=128))
    assert (v.invariant, v.sample, v.field, v.actual, v.expected) == ("O1", 1, "total_lengths", 140, 130)
    assert "[O1] get_rollout_data, sample 1, field `total_lengths`" in v.format()


def test_o1_per_sample_field_with_a_missing_entry():
    data = rollout([300, 130])
    data["rollout_log_probs"].pop()
    v = only(check_rollout(data, unit=128))
    assert (v.invariant, v.field, v.actual, v.expected) == ("O1", "rollout_log_probs", 1, 2)


def test_o1_bshd_without_max_seq_lens():
    data = rollout([300])
    del data["max_seq_lens"]
    v = only(check_rollout(data, unit=128))
    assert (v.invariant, v.field, v.actual) == ("O1", "max_seq_lens", None)
    assert check_rollout(data, unit=128, layout="thd") == []  # THD: padding is the batch builder's


# --- O2: P_i % A == 0 and T_i <= P_i ---------------------------------------------


def test_o2_not_a_multiple_of_a():
    v = only(check_rollout(rollout([300], padded=[320]), unit=128))
    assert (v.invariant, v.sample, v.field, v.actual) == ("O2", 0, "max_seq_lens", 320)
    assert "384" in v.expected and v.sizes == {"T": 300, "P": 320, "A": 128}
    assert "not a multiple of the alignment unit" in v.format()


def test_o2_below_the_true_length():
    v = only(check_rollout(rollout([300], padded=[256]), unit=128))
    assert (v.invariant, v.sample, v.actual) == ("O2", 0, 256)
    assert "below the true length" in v.problem and ">= T_i = 300" in v.expected


def test_o2_explains_an_lcm_unit():
    unit = geometry.alignment_unit(1, 128, cp_size=2, compression_ratio=3)  # lcm(128, 12) = 384
    v = only(check_rollout(rollout([300], padded=[384]) | {"max_seq_lens": [512]}, unit=unit))
    assert v.invariant == "O2" and "lcm" in v.format() and "max()" in v.format()


# --- O3: T_i <= P_i < T_i + A (per-sample padding) -------------------------------


def test_o3_correct_and_not_checked_for_buckets():
    assert check_rollout(rollout([300, 14010]), unit=128) == []
    data = rollout([300, 14010], padded=[14080, 14080])
    assert check_rollout(data, unit=128, per_sample=False) == []


def test_o3_rollout_global_padding_names_sample_and_inflation():
    totals = [300, 1300, 14010]
    data = rollout(totals, padded=[14080] * 3)  # round_up(14010, 128) = 14080 copied everywhere
    found = check_rollout(data, unit=128)
    assert [(v.invariant, v.sample) for v in found] == [("O3", 0), ("O3", 1)]
    v = found[1]
    assert (v.field, v.actual) == ("max_seq_lens", 14080)
    assert v.expected.startswith("1408 ")  # round_up(1300, 128)
    assert v.sizes["P/T"] == "10.8x"  # 14080 / 1300
    text = v.format()
    assert "10.8x the true length" in text and "rollout-global padding" in text
    assert "pad each sample to its own aligned length" in text


# --- O4: response fields have R_i entries, or the CP rule's count -------------


def test_o4_correct_under_cp_for_both_layouts_and_schemes():
    for layout in ("bshd", "thd"):
        for scheme in ("zigzag", "allgather"):
            for r in range(2):
                data = rollout([300, 130, 700], cp=2, r=r, layout=layout, scheme=scheme)
                assert check_rollout(data, unit=128, cp_size=2, cp_rank=r, layout=layout, scheme=scheme) == []


def test_o4_log_probs_sliced_with_another_p():
    # T=300, R=225, P=384, cp=2, r=0: c = 96, chunks [0,96) and [288,384);
    # response logits [74, 299): 22 + 11 = 33 entries. The packed rule
    # (chunk from round_up(300, 4) = 300, c = 75) would give [74,75) + [225,299) = 75.
    data = rollout([300], cp=2, r=0, log_probs=[75])
    v = only(check_rollout(data, unit=128, cp_size=2, cp_rank=0))
    assert (v.invariant, v.sample, v.field, v.actual, v.expected) == ("O4", 0, "rollout_log_probs", 75, 33)
    assert v.sizes == {"T": 300, "R": 225, "P": 384, "cp": 2, "r": 0, "layout": "bshd", "scheme": "zigzag"}


def test_o4_unsliced_field_has_r_entries():
    data = rollout([300])
    data["loss_masks"][0] = torch.ones(224)
    v = only(check_rollout(data, unit=128))
    assert (v.invariant, v.field, v.actual, v.expected) == ("O4", "loss_masks", 224, 225)


# --- O5: replay tensors have T_i - 1 rows ----------------------------------------


def test_o5_replay_rows():
    data = rollout([300, 130])
    data["rollout_routed_experts"][1] = torch.zeros(130, 2, 2)
    v = only(check_rollout(data, unit=128))
    assert (v.invariant, v.sample, v.field, v.actual) == ("O5", 1, "rollout_routed_experts", (130, 2, 2))
    assert "129 rows" in v.expected


# --- G1: one P per BSHD micro-batch ---------------------------------------------


def test_g1_correct():
    assert check_micro_batch(max_seq_lens=[256, 256], total_lengths=[130, 250]) == []


def test_g1_mixed_padded_lengths_names_the_samples():
    v = only(check_micro_batch(micro_batch=3, samples=[6, 7], max_seq_lens=[384, 256], total_lengths=[300, 130]))
    assert (v.invariant, v.micro_batch, v.sample, v.field) == ("G1", 3, (6, 7), "max_seq_lens")
    assert v.actual == {6: 384, 7: 256}
    text = v.format()
    assert "[G1] get_batch, micro-batch 3, samples 6, 7, field `max_seq_lens`" in text
    assert "one sample per micro-batch" in text and "bucket samples by padded length" in text


def test_g1_a_batch_p_other_than_the_agreeing_max_seq_lens_is_its_own_violation():
    # Both samples agree on P = 1280; the builder used 2048: not "different padded lengths".
    v = only(check_micro_batch(micro_batch=2, samples=[4, 5], max_seq_lens=[1280, 1280], padded=2048,
                               total_lengths=[1200, 1100]))
    assert (v.invariant, v.micro_batch, v.sample, v.field, v.actual, v.expected) == (
        "G1", 2, (4, 5), "max_seq_lens", 2048, 1280)
    assert "different padded lengths" not in v.problem
    assert v.problem == ("the batch builder laid the micro-batch out with P=2048, not the P=1280 that "
                         "`max_seq_lens` (the owner) gives its samples")
    assert "configure the buckets" in v.hint
    assert check_micro_batch(max_seq_lens=[1280, 1280], padded=1280, total_lengths=[1200, 1100]) == []


def test_g1_samples_that_disagree_are_reported_once_whatever_the_batch_p():
    v = only(check_micro_batch(max_seq_lens=[1280, 1408], padded=2048, total_lengths=[1200, 1300]))
    assert v.invariant == "G1" and v.actual == {0: 1280, 1: 1408}
    assert "different padded lengths; the batch uses P=2048" in v.problem


def test_g1_with_buckets_and_a_batch_p_leaves_p_to_g6():
    # A builder that pads micro-batches to buckets keeps tight, different max_seq_lens: no G1.
    assert check_micro_batch(max_seq_lens=[384, 512], padded=512, total_lengths=[300, 500], buckets=BUCKETS) == []
    v = only(check_micro_batch(max_seq_lens=[384, 512], padded=1024, total_lengths=[300, 500], buckets=BUCKETS))
    assert (v.invariant, v.actual) == ("G6", 1024) and v.expected.startswith("512 ")


def test_g1_does_not_apply_to_thd():
    assert check_micro_batch(total_lengths=[300, 130], qkv_format="thd") == []


# --- G2: max T_i <= P against the current lengths --------------------------------


def test_g2_grown_tokens_exceed_p():
    v = only(check_micro_batch(samples=[4], max_seq_lens=[384], total_lengths=[448], token_lengths=[448]))
    assert (v.invariant, v.sample, v.field, v.actual, v.expected) == ("G2", 4, "max_seq_lens", 448, "<= P = 384")
    assert "recompute `max_seq_lens`" in v.hint


def test_g2_total_lengths_no_longer_count_the_tokens():
    v = only(check_micro_batch(max_seq_lens=[384], total_lengths=[300], token_lengths=[320]))
    assert (v.invariant, v.field, v.actual, v.expected) == ("G2", "total_lengths", 300, 320)


def test_g2_uses_the_tokens_numel_in_check_batch():
    batch = {"max_seq_lens": [384], "total_lengths": [448], "unconcat_tokens": [torch.ones(448)]}
    found = check_batch(batch)
    assert [(v.invariant, v.actual) for v in found] == [("G2", 448)]


# --- G3: (B, L) shapes, all-gather P % cp ---------------------------------------


def bshd_batch(b, length, *, responses=None):
    return {"tokens": torch.zeros(b, length, dtype=torch.long), "full_loss_masks": torch.zeros(b, length),
            "position_ids": torch.zeros(b, length, dtype=torch.long)} | (responses or {})


def test_g3_correct_zigzag_and_allgather():
    # P = 384, cp = 2: zigzag L = 2c = 192; all-gather L = P / cp = 192
    for scheme in ("zigzag", "allgather"):
        assert check_batch_layout(bshd_batch(2, 192), total_lengths=[300, 290], padded=384, cp_size=2,
                                  cp_rank=1, scheme=scheme) == []


def test_g3_zigzag_local_length_exceeds_p_over_cp():
    # P = 300 (not a multiple of 2cp = 4): c = ceil(300 / 4) = 75, L = 150; cp = 3: c = 50, L = 100
    assert check_batch_layout(bshd_batch(1, 100), total_lengths=[290], padded=300, cp_size=3) == []
    # P = 288: c = 48, L = 96
    v = only(check_batch_layout({"tokens": torch.zeros(1, 100)}, total_lengths=[290], padded=288, cp_size=3))
    assert (v.invariant, v.field, v.actual, v.expected) == ("G3", "tokens", (1, 100), (1, 96))


def test_g3_wrong_shape_names_the_field():
    batch = bshd_batch(2, 192)
    batch["full_loss_masks"] = torch.zeros(2, 384)
    v = only(check_batch_layout(batch, micro_batch=1, samples=[0, 1], total_lengths=[300, 290], padded=384,
                                cp_size=2))
    assert (v.invariant, v.field, v.actual, v.expected) == ("G3", "full_loss_masks", (2, 384), (2, 192))
    assert v.micro_batch == 1
    assert v.sizes["P"] == 384 and "(B, L)" in v.problem


def test_g3_allgather_needs_p_multiple_of_cp():
    v = only(check_micro_batch(max_seq_lens=[128], total_lengths=[100], cp_size=3, scheme="allgather"))
    assert (v.invariant, v.field, v.actual) == ("G3", "max_seq_lens", 128)
    assert "multiple of cp=3" in v.expected


def test_g3_thd_stream_length():
    # T = 300, 130 at cp = 2: packed 300, 132 -> local 150 + 66 = 216 -> tail to 256
    batch = {"tokens": torch.zeros(1, 256, dtype=torch.long)}
    assert check_batch_layout(batch, total_lengths=[300, 130], cp_size=2, qkv_format="thd", stream_multiple=128) == []
    v = only(check_batch_layout(batch, total_lengths=[300, 130], cp_size=2, qkv_format="thd", stream_multiple=384))
    assert (v.invariant, v.actual, v.expected) == ("G3", (1, 256), (1, 384))


# --- G4: response fields have the count of the batch's P --------------------------


def test_g4_correct_and_broken():
    good = bshd_batch(1, 192, responses={"rollout_log_probs": [torch.zeros(33)]})
    assert check_batch_layout(good, total_lengths=[300], response_lengths=[225], padded=384, cp_size=2) == []
    # sliced for P = 512 (c = 128: [74, 128) + [384, 512) -> 54), batch uses P = 384 (33)
    bad = bshd_batch(1, 192, responses={"rollout_log_probs": [torch.zeros(54)]})
    v = only(check_batch_layout(bad, samples=[5], total_lengths=[300], response_lengths=[225], padded=384, cp_size=2))
    assert (v.invariant, v.sample, v.field, v.actual, v.expected) == ("G4", 5, "rollout_log_probs", 54, 33)


def test_g4_response_offsets():
    # the packed rule's ranges for T=300 at cp=2, r=0: [74,75) + [225,299); the BSHD P=384 layout: [74,96) + [288,299)
    assert check_response_offsets([(74, 96), (288, 299)], total_length=300, response_length=225, cp_size=2,
                                  padded=384) == []
    v = only(check_response_offsets([(74, 75), (225, 299)], total_length=300, response_length=225, cp_size=2,
                                     padded=384, sample=2, called_with={"max_seq_len": None}))
    assert (v.invariant, v.sample, v.field) == ("G4", 2, "max_seq_len")
    assert v.actual == ((74, 75), (225, 299)) and v.expected == ((74, 96), (288, 299))
    assert "75 response logits on this rank, the layout gives 33" in v.problem
    assert "max_seq_len=None" in v.format()


# --- G5: the replay filler agrees with the batch builder ------------------------------


def test_g5_correct_and_sequence_parallel():
    assert check_replay(torch.zeros(384, 2, 2), batch_rows=384, padded=384, batch_padded=384) == []
    assert check_replay(torch.zeros(192, 2, 2), batch_rows=384, tp_size=2, sequence_parallel=True) == []


def test_g5_rows_differ():
    v = only(check_replay(torch.zeros(512, 2, 2), micro_batch=1, samples=[2, 3], batch_rows=256,
                          field="rollout_indexer_topk"))
    assert (v.invariant, v.micro_batch, v.sample, v.field, v.actual, v.expected) == (
        "G5", 1, (2, 3), "rollout_indexer_topk", 512, 256)


def test_g5_other_p_and_other_samples():
    found = check_replay(torch.zeros(256, 2), samples=[1], batch_samples=[2], batch_rows=384, padded=256,
                         batch_padded=384)
    assert [(v.invariant, v.actual, v.expected) for v in found] == [
        ("G5", 256, 384), ("G5", (1,), (2,)), ("G5", 256, 384)]


def test_g5_rows_not_split_over_tp():
    v = only(check_replay(torch.zeros(0), batch_rows=385, tp_size=2, sequence_parallel=True))
    assert v.invariant == "G5" and "multiple of tp=2" in v.expected


# --- G6: P is the smallest bucket that fits ------------------------------------------


BUCKETS = [512, 1024, 2048]


def test_g6_correct():
    assert check_micro_batch(max_seq_lens=[512, 512], total_lengths=[300, 500], buckets=BUCKETS) == []


def test_g6_not_the_smallest_bucket():
    v = only(check_micro_batch(max_seq_lens=[1024], total_lengths=[300], buckets=BUCKETS))
    assert (v.invariant, v.field, v.actual) == ("G6", "max_seq_lens", 1024)
    assert v.expected.startswith("512 ") and "not the smallest" in v.problem


def test_g6_not_a_bucket_and_no_bucket_fits():
    v = only(check_micro_batch(max_seq_lens=[384], total_lengths=[300], buckets=BUCKETS))
    assert v.problem == "P is not a bucket"
    v = only(check_micro_batch(max_seq_lens=[4096], total_lengths=[3000], buckets=BUCKETS))
    assert v.problem == "the longest sample fits no bucket" and v.actual == 3000


# --- bad arguments are specification errors, never violations ---------------------


BAD_BUCKETS = [100, 200]  # deliberately not multiples of 128
SPEC_ERRORS = {
    "per-sample lists of different lengths": lambda: check_micro_batch(max_seq_lens=[384, 256], total_lengths=[300]),
    "samples and lengths differ": lambda: check_micro_batch(samples=[0, 1], total_lengths=[300]),
    "negative size": lambda: check_micro_batch(max_seq_lens=[384], total_lengths=[-1]),
    "negative rollout length": lambda: check_rollout(rollout([300]) | {"total_lengths": [-300]}, unit=128),
    "cp_size zero": lambda: check_rollout(rollout([300]), unit=128, cp_size=0),
    "cp_size float": lambda: check_rollout(rollout([300]), unit=128, cp_size=2.0),
    "cp_size bool": lambda: check_batch_layout({}, total_lengths=[1], padded=128, cp_size=True),
    "cp_size tensor": lambda: check_micro_batch(total_lengths=[1], max_seq_lens=[128], cp_size=torch.tensor(2)),
    "cp_rank >= cp_size": lambda: check_rollout(rollout([300]), unit=128, cp_size=2, cp_rank=2),
    "unknown layout": lambda: check_rollout(rollout([300]), unit=128, layout="sbhd"),
    "unknown scheme": lambda: check_micro_batch(total_lengths=[1], max_seq_lens=[128], scheme="ring"),
    "unit zero": lambda: check_rollout(rollout([300]), unit=0),
    "length is a tensor": lambda: check_micro_batch(max_seq_lens=[384], total_lengths=[torch.tensor(300)]),
    "rollout is not a mapping": lambda: check_rollout([1, 2], unit=128),
    "bshd without P": lambda: check_batch_layout({}, total_lengths=[300]),
    "bad buckets": lambda: check_micro_batch(max_seq_lens=[128], total_lengths=[1], buckets=BAD_BUCKETS),
    "replay is None": lambda: check_replay(None, batch_rows=384),
    "replay is a float": lambda: check_replay(384.0, batch_rows=384),
    "replay is a 0-d tensor": lambda: check_replay(torch.tensor(384), batch_rows=384),
    "unknown mode": lambda: report([], "explode"),
    "checker mode": lambda: LayoutChecker("loud"),
}


@pytest.mark.parametrize("case", SPEC_ERRORS)
def test_bad_arguments_raise_spec_errors(case):
    with pytest.raises(LayoutSpecError) as info:
        SPEC_ERRORS[case]()
    assert not isinstance(info.value, (LayoutError, AssertionError))
    assert str(info.value)  # a message, not a bare exception


def test_a_tensor_length_says_why():
    with pytest.raises(LayoutSpecError, match="synchronise the GPU"):
        check_micro_batch(max_seq_lens=[384], total_lengths=[torch.tensor(300)])


def test_spec_errors_describe_tensors_without_their_values():
    # repr() of a CUDA tensor reads it back (a GPU sync): messages show type, dtype, shape and device only.
    with pytest.raises(LayoutSpecError) as info:
        check_micro_batch(max_seq_lens=[384], total_lengths=[torch.tensor(300)])
    text = str(info.value)
    assert "got Tensor(dtype=torch.int64, shape=(), device=cpu)" in text and "tensor(" not in text
    with pytest.raises(LayoutSpecError) as info:
        check_replay(torch.tensor(384), batch_rows=384)
    assert "Tensor(dtype=torch.int64, shape=(), device=cpu)" in str(info.value)
    with pytest.raises(LayoutSpecError) as info:
        check_micro_batch(max_seq_lens=[128], total_lengths=[1], buckets=[torch.tensor(512)])
    assert "bucket #0 is Tensor(dtype=torch.int64, shape=()" in str(info.value) and "tensor(" not in str(info.value)
    with pytest.raises(LayoutSpecError) as info:
        check_micro_batch(total_lengths=[1], max_seq_lens=[128], scheme=torch.zeros(2))
    assert "unknown CP scheme Tensor(dtype=torch.float32, shape=(2,)" in str(info.value)


def test_violations_describe_tensors_without_their_values():
    v = Violation("G3", "get_batch", "tokens", "a problem", actual=torch.zeros(2, 3), expected=[torch.ones(1)],
                  hint="do this", sizes={"t": torch.zeros(4)})
    text = v.format()
    assert "seen:     Tensor(dtype=torch.float32, shape=(2, 3), device=cpu)" in text
    assert "expected: [Tensor(dtype=torch.float32, shape=(1,), device=cpu)]" in text
    assert "tensor(" not in text and "tensor(" not in str(v.to_dict())
    # offset-helper arguments are shown as called, a tensor by its metadata
    found = check_response_offsets([(74, 75), (225, 299)], total_length=300, response_length=225, cp_size=2,
                                   padded=384, called_with={"max_seq_len": torch.tensor(384)})
    assert "max_seq_len=Tensor(dtype=torch.int64" in only(found).format()


# --- modes: raise, warn, record ------------------------------------------------------


def violations():
    return check_rollout(rollout([300, 14010], padded=[14080, 14080]), unit=128)


def test_raise_mode_message_has_the_fixed_order():
    with pytest.raises(LayoutError) as info:
        report(violations(), "raise")
    lines = str(info.value).splitlines()
    assert lines[0] == "1 layout violation"
    assert lines[1].startswith("[O3] get_rollout_data, sample 0, field `max_seq_lens`: ")
    assert [line.split(":")[0].strip() for line in lines[2:]] == ["seen", "expected", "sizes", "fix"]
    assert info.value.violations[0].sample == 0


def test_warn_mode():
    with pytest.warns(LayoutWarning) as caught:
        found = report(violations(), "warn")
    assert len(found) == 1 and "[O3]" in str(caught[0].message)
    assert caught[0].filename == __file__


def test_record_mode_and_summary():
    recorder = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report(violations(), "record", recorder=recorder)
        report([], "raise", recorder=recorder)  # nothing found: nothing happens
    assert len(recorder) == 1 and recorder.by_invariant() == {"O3": 1}
    assert recorder.summary() == "1 layout violation (O3 x1) in get_rollout_data"
    assert "... and" not in recorder.format(limit=1)


def test_layout_error_message_shows_the_first_violations_and_counts_the_rest():
    totals = [100 + i for i in range(30)] + [14010]
    found = check_rollout(rollout(totals, padded=[14080] * len(totals)), unit=128)
    assert len(found) == 30
    with pytest.raises(LayoutError) as info:
        report(found, "raise")
    text = str(info.value)
    assert text.startswith("30 layout violations\n") and text.count("[O3]") == 20
    assert text.endswith("... and 10 more (O3 x10)")
    assert len(info.value.violations) == 30  # the full list stays on the error
    with pytest.warns(LayoutWarning) as caught:
        report(found, "warn")
    assert str(caught[0].message).count("[O3]") == 20


def test_format_violations_truncates():
    found = check_rollout(rollout([300, 200, 100, 14010], padded=[14080] * 4), unit=128)
    text = format_violations(found, limit=1)
    assert text.startswith("3 layout violations\n[O3]") and text.endswith("... and 2 more (O3 x2)")


# --- the manual API on a hand-built trainer --------------------------------------------


class Iterator:
    """A minimal DataIterator: fixed micro-batches over a rollout dict."""

    def __init__(self, rollout_data, micro_batch_size=1):
        self.rollout_data, self.micro_batch_size, self.micro_batch_indices, self.offset = (
            rollout_data, micro_batch_size, None, 0)

    def get_next(self, keys):
        mb = {k: self.rollout_data[k][self.offset:self.offset + self.micro_batch_size] for k in keys}
        self.offset += self.micro_batch_size
        return mb

    def reset(self):
        self.offset = 0


def get_batch(data_iterator, keys, pad_multiplier=128, qkv_format="thd", get_position_ids=False, allgather_cp=False):
    mb = data_iterator.get_next(["tokens", "max_seq_lens", "total_lengths", "response_lengths"])
    p = mb["max_seq_lens"][0]  # layoutcheck: ignore[unguarded-rectangular-batch] (a Miles-shaped builder)
    return mb | {"tokens": torch.zeros(len(mb["tokens"]), p, dtype=torch.long)}


def fill_replay_data(*, args, models=None, data_iterator, num_microbatches, rollout_data, data_key, replay_list,
                     register_replay_list_func, rows_per_batch, if_sp_region=True):
    # Miles's register protocol: (replay_list, replay_data, models=...), no micro-batch index
    for rows in rows_per_batch[: sum(num_microbatches)]:
        register_replay_list_func(replay_list, torch.zeros(rows, 2), models=models)


ARGS = SimpleNamespace(qkv_format="bshd", allgather_cp=False, data_pad_size_multiplier=128, compress_ratios=None)


@pytest.mark.parametrize("replay_first", [True, False])
def test_checker_pairs_replay_and_batch_in_either_order(replay_first):
    checker = LayoutChecker("record")
    data = checker.wrap_producer(lambda args, ref: (rollout(ref), None))(ARGS, [300, 130])
    it = Iterator(data[0])
    builder, filler = checker.wrap_batch_builder(get_batch), checker.wrap_replay_filler(fill_replay_data)
    def replay():
        filler(args=ARGS, data_iterator=[it], num_microbatches=[2], rollout_data=data[0],
               data_key="rollout_routed_experts", register_replay_list_func=lambda *a, **kw: None, replay_list=[],
               rows_per_batch=[384, 128])

    if replay_first:
        replay()
    batches = [builder(it, ["tokens"], qkv_format="bshd") for _ in range(2)]
    if not replay_first:
        replay()
    assert [tuple(b["tokens"].shape) for b in batches] == [(1, 384), (1, 256)]
    v = only(checker.violations)  # micro-batch 1: 128 replay rows for 256 token positions
    assert (v.invariant, v.micro_batch, v.sample, v.actual, v.expected) == ("G5", 1, (1,), 128, 256)
    assert checker.checked == {"rollouts": 1, "micro-batches": 2, "replay tensors": 2}
    assert checker.summary().startswith("1 layout violation (G5 x1) in fill_replay_data")


def test_wrappers_keep_name_and_signature():
    import inspect

    checker = LayoutChecker()
    wrapped = checker.wrap_batch_builder(get_batch)
    assert wrapped.__name__ == "get_batch" and wrapped.__wrapped__ is get_batch
    assert inspect.signature(wrapped) == inspect.signature(get_batch)


def test_check_rollout_data_reads_the_layout_from_args():
    data = rollout([300, 14010], padded=[14080, 14080])
    def state():
        return SimpleNamespace(tp=SimpleNamespace(size=1, rank=0), cp=SimpleNamespace(size=1, rank=0))

    with pytest.raises(LayoutError, match=r"\[O3\]"):
        check_rollout_data(data, ARGS, parallel_state=state)
    assert check_rollout_data(rollout([300]), ARGS) == []


# --- warn and record modes never crash training ------------------------------------------


def tensor_lengths_producer(args, ref):
    """A producer that returns `total_lengths` as a tensor (a bad specification, not a layout bug)."""
    data = rollout(ref)
    data["total_lengths"] = torch.tensor(data["total_lengths"])
    return data, None


def test_warn_mode_turns_a_check_that_cannot_run_into_one_warning():
    checker = LayoutChecker("warn")
    producer = checker.wrap_producer(tensor_lengths_producer)
    with pytest.warns(LayoutWarning) as caught:
        data, _ = producer(ARGS, [300, 130])
    assert len(data["tokens"]) == 2  # the step goes on with the producer's result
    (warning,) = caught
    assert warning.filename == __file__  # it points at the user's call, not into layoutcheck
    text = str(warning.message)
    assert text.startswith("layoutcheck could not check `tensor_lengths_producer`: `total_lengths` must be a list")
    assert "got Tensor" in text and "unchecked" in text
    assert checker.violations == [] and checker.notes == [text.removesuffix(" (the call went ahead unchecked)")]
    assert checker.summary().startswith("no layout violations; 1 check could not run")


def test_record_mode_keeps_a_note():
    checker = LayoutChecker("record")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checker.wrap_producer(tensor_lengths_producer)(ARGS, [300, 130])
    (note,) = checker.notes
    assert "could not check `tensor_lengths_producer`" in note and "tensor(" not in note


def test_raise_mode_notes_a_check_that_cannot_run_and_lets_the_call_through():
    # Only violations raise: a shape the checker cannot read is a note (and a warning), in every mode.
    checker = LayoutChecker("raise")
    with pytest.warns(LayoutWarning, match="`total_lengths` must be a list"):
        data, _ = checker.wrap_producer(tensor_lengths_producer)(ARGS, [300, 130])
    assert len(data["tokens"]) == 2 and checker.violations == [] and len(checker.notes) == 1
    with pytest.raises(LayoutSpecError, match="`total_lengths` must be a list"):  # called directly, it raises
        checker.check_rollout_data(data, ARGS)


def test_every_wrapper_survives_a_check_that_cannot_run():
    # The builder's and the filler's checks need `args` and a readable iterator; here the filler
    # gets args=None and the iterator's rollout has a tensor `total_lengths`.
    checker = LayoutChecker("record")
    data = rollout([300, 130])
    data["total_lengths"] = torch.tensor(data["total_lengths"])
    it = Iterator(data)
    batch = checker.wrap_batch_builder(get_batch)(it, ["tokens"], qkv_format="bshd")
    assert tuple(batch["tokens"].shape) == (1, 384)
    registered = []
    checker.wrap_replay_filler(fill_replay_data)(
        args=None, data_iterator=[it], num_microbatches=[1], rollout_data=data, data_key="rollout_routed_experts",
        register_replay_list_func=lambda lst, rows, **kw: registered.append(rows.size(0)), replay_list=[],
        rows_per_batch=[384])
    assert registered == [384]  # the filler ran, with the user's register function
    assert len(checker.notes) == 2
    assert any("could not check `get_batch`" in n and "total_lengths" in n for n in checker.notes)
    assert any("could not check `fill_replay_data`" in n and "`args`" in n for n in checker.notes)


def test_errors_of_the_wrapped_function_always_propagate():
    def producer(args, ref):
        raise LayoutSpecError("the producer's own error")

    for mode in ("warn", "record"):
        with pytest.raises(LayoutSpecError, match="the producer's own error"):
            LayoutChecker(mode).wrap_producer(producer)(ARGS, [300])
