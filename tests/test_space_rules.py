"""The tracer's space rules (S1-S5) on real tensors: each bug that keeps its shape caught at the op, its fix silent.

Samples (A = 128): sample 0 has T=300, R=200, P=384; sample 1 has T=1000,
R=500, P=1024. Zigzag with cp=2 on P=384: c = 96, local length 192.
Tags come from `layoutcheck.tag_space`, the entry point a boundary calls.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
import trainer_cp

from layoutcheck import LayoutSpecError, geometry, tag_space
from layoutcheck.runtime.tracing.tagging import tag_batch, wrap_slice_with_cp
from layoutcheck.runtime.tracing.tags import clear_tags, geometry_of
from layoutcheck.runtime.tracing.tracer import Tracer
from layoutcheck.spaces import CPPart, SampleLengths, Space, parse_space

S0, S1 = SampleLengths(300, 200, 384), SampleLengths(1000, 500, 1024)


@pytest.fixture(autouse=True)
def _fresh():
    yield
    clear_tags()  # no tag (nor CP rank) leaks into the next test
    trainer_cp.set_parallel_state(1, 0)


def flagged(fn) -> list:
    tracer = Tracer("record", enabled=True)
    with tracer:
        fn()
    return tracer.violations


def codes(fn) -> list[str]:
    return [v.invariant for v in flagged(fn)]


def next_line() -> int:
    return inspect.currentframe().f_back.f_lineno + 1  # type: ignore[union-attr]


def sample(n: int = 300, lengths: SampleLengths = S0, space: str = "T", **options) -> torch.Tensor:
    x = torch.arange(n)
    tag_space(x, space, field="tokens", samples=0, lengths=lengths, **options)
    return x


def local_batch(scheme: str = "zigzag", rank: int = 1, **space) -> torch.Tensor:
    x = torch.zeros(2, geometry.local_length(384, 2, scheme), dtype=torch.long)
    tag_space(x, Space("P", cp=CPPart(scheme, 2, rank), pad_side="right", **space), field="tokens",
              samples=[0, 4], lengths=[S0, S0], seq_dim=1)
    return x


# --- the entry point ---------------------------------------------------------------------------


def test_tag_space_tags_one_tensor_a_list_a_micro_batch_and_a_packed_stream():
    x = sample(space="T +1")
    t = geometry_of(x)
    assert (t.sample, t.total, t.response, t.padded, t.shift, t.space) == (0, 300, 200, 384, 1, "tokens")
    assert t.layout_space(300) == parse_space("T +1")
    masks = [torch.ones(200), torch.ones(500), [0.5]]  # a list entry that is not a tensor is skipped
    assert tag_space(masks, "R", field="loss_masks", samples=[0, 1, 2], lengths=[S0, S1, S1]) == 2
    assert geometry_of(masks[1]).layout_space(500) == Space("R")
    batch = local_batch(positions="global")
    t = geometry_of(batch)
    assert (t.samples, t.padded, t.local, t.cp_rank, t.positions) == ((0, 4), 384, 192, 1, "global")
    assert t.layout_space().describe() == "P, CP-local (zigzag rank 1 of 2), padded right, global positions"
    stream = torch.zeros(1300)
    assert tag_space(stream, "T packed", field="tokens", samples=[0, 1], lengths=[S0, S1]) == 1
    with Tracer("raise", enabled=True):
        first, second = stream.split([300, 1000])
    assert (geometry_of(first).sample, geometry_of(second).total) == (0, 1000)
    assert geometry_of(stream).layout_space().describe() == "T, packed"


def test_tag_space_refuses_what_does_not_fit():
    with pytest.raises(LayoutSpecError, match="2 lengths for 1 samples"):
        tag_space(torch.zeros(3), "T", field="x", samples=0, lengths=[S0, S1])
    with pytest.raises(LayoutSpecError, match="needs `samples` and `lengths`"):
        tag_space(torch.zeros(3), "T packed", field="x")
    with pytest.raises(LayoutSpecError, match="seq_dim=2"):
        tag_space(torch.zeros(3), "T", field="x", seq_dim=2)
    with pytest.raises(LayoutSpecError, match="unknown word 'sideways'"):
        tag_space(torch.zeros(3), "P sideways", field="x")


# --- S1: a CP slice of a CP-local tensor ---------------------------------------------------------------


def test_a_cp_slice_of_a_cp_local_tensor_is_s1_with_the_helper_or_plain_ops():
    trainer_cp.set_parallel_state(2, 1)
    slice_with_cp = wrap_slice_with_cp(trainer_cp.slice_with_cp, parallel_state=trainer_cp.get_parallel_state)
    row = torch.zeros(192, dtype=torch.long)  # sample 0 as the batch builder returned it, on rank 1
    tag_space(row, "P zigzag right", field="tokens", samples=0, lengths=S0, cp_size=2, cp_rank=1)
    (v,) = flagged(lambda: slice_with_cp(row, 0, "bshd", 384))
    assert v.invariant == "S1" and "already CP-local (zigzag rank 1 of 2, L=192)" in v.problem
    assert row.shape == slice_with_cp(row, 0, "bshd", 384).shape  # what makes it silent: the shape stays
    # the helper unwrapped: its own first step (a pad of the local row to the materialised length) is the op
    assert codes(lambda: trainer_cp.slice_with_cp(row, 0, "bshd", 384)) == ["S1"]
    # the unsliced sample, sliced once: silent
    assert flagged(lambda: slice_with_cp(sample(), 0, "bshd", 384)) == []


# --- S2: a shift of a CP-local tensor, or of a shifted one ------------------------------------------------


def test_a_roll_or_a_one_position_slice_of_a_cp_local_tensor_is_s2():
    batch = local_batch()
    line = next_line()
    (v,) = flagged(lambda: torch.roll(batch, -1, dims=1))
    assert v.invariant == "S2" and v.where == f"torch.roll at tests/test_space_rules.py:{line} in <lambda>"
    assert "crosses this rank's chunk boundaries" in v.problem and v.sample == (0, 4)
    assert codes(lambda: batch.roll(1, 1)) == ["S2"]
    assert codes(lambda: batch[:, 1:]) == ["S2"]
    assert codes(lambda: batch.narrow(1, 1, 191)) == ["S2"]
    assert codes(lambda: local_batch("allgather", 0)[:, 1:]) == ["S2"]
    # along another dimension, or a truncation, or the rows of the batch: silent
    assert flagged(lambda: (torch.roll(batch, 1, dims=0), batch[:, :-1], batch[1:])) == []


def test_the_whole_sequence_shifted_before_the_split_is_silent_and_keeps_its_shift():
    trainer_cp.set_parallel_state(2, 1)
    slice_with_cp = wrap_slice_with_cp(trainer_cp.slice_with_cp, parallel_state=trainer_cp.get_parallel_state)
    tokens = sample()
    tracer = Tracer("raise", enabled=True)
    with tracer:
        labels = slice_with_cp(torch.roll(tokens, -1), 0, "bshd", 384)
        targets = torch.cat([tokens[1:], tokens.new_zeros(1)])  # x[1:] padded back by one: also shifted
    assert (geometry_of(labels).shift, geometry_of(labels).cp_local) == (1, True)
    assert (geometry_of(targets).shift, geometry_of(targets).window) == (1, None)


def test_a_shift_applied_twice_is_s2():
    tokens = sample()

    def twice() -> None:
        once = torch.cat([tokens[1:], tokens.new_zeros(1)])
        torch.cat([once[1:], once.new_zeros(1)])

    (v,) = flagged(twice)
    assert v.invariant == "S2" and "already shifted by +1" in v.problem and "token j+2" in v.problem
    assert codes(lambda: torch.roll(torch.roll(tokens, -1), -1)) == ["S2"]
    assert flagged(lambda: torch.roll(torch.roll(tokens, -1), 1)) == []  # rolled back


# --- S3: partners in different spaces ----------------------------------------------------------------


def test_partners_with_different_shifts_are_s3_at_the_elementwise_op():
    # verl 2d6c6dbb3's shape: targets are the tokens shifted left, the mask is cut at the other end
    tokens = sample()
    mask = torch.ones(200)
    tag_space(mask, "R", field="loss_masks", samples=0, lengths=S0)

    def weighted(cut: slice) -> torch.Tensor:
        aligned = F.pad(mask, (100, 0))  # R entries at their token positions: T long, no shift
        return tokens[1:] * aligned[cut]

    line = next_line()
    (v,) = flagged(lambda: weighted(slice(None, -1)))
    assert v.invariant == "S3" and "shift +1 vs +0" in v.problem and v.sample == 0
    assert v.where == f"Tensor.mul at tests/test_space_rules.py:{line - 3} in weighted"
    assert flagged(lambda: weighted(slice(1, None))) == []
    # a loss between them: reported at the loss, its result laid out like the target
    assert codes(lambda: F.mse_loss(tokens[1:].float(), F.pad(mask, (100, 0))[:-1], reduction="none")) == ["S3"]


def test_partners_padded_on_different_sides_are_s3():
    tokens = sample()
    rows = torch.zeros(299, 4)
    tag_space(rows, "T-1", field="experts", samples=0, lengths=S0)

    def masked(left: bool) -> torch.Tensor:
        present = F.pad(torch.ones_like(tokens), (0, 84)) > 0
        experts = F.pad(rows, (0, 0, 85, 0) if left else (0, 0, 0, 85))
        return torch.where(present[:, None], experts, -1)

    (v,) = flagged(lambda: masked(left=True))
    assert v.invariant == "S3" and "padded right vs left" in v.problem
    assert flagged(lambda: masked(left=False)) == []


def test_partners_with_other_cp_coordinates_are_s3():
    tokens = local_batch("allgather", 1)
    experts = local_batch("zigzag", 1)  # 2 cp divides P = 384: both 192 long
    assert codes(lambda: tokens * experts) == ["S3"]
    assert codes(lambda: tokens * local_batch("allgather", 0)) == ["S3"]  # another rank's window
    assert flagged(lambda: tokens * local_batch("allgather", 1)) == []
    other = torch.zeros(2, 192, dtype=torch.long)
    tag_space(other, "P allgather", field="tokens", samples=[1, 5], lengths=[S0, S0], seq_dim=1, cp_size=2, cp_rank=0)
    assert flagged(lambda: tokens * other) == []  # other samples: not partners


# --- S4: positions of the other space ----------------------------------------------------------------


def test_a_negative_index_into_a_cp_local_sequence_is_s4():
    batch = local_batch()
    (v,) = flagged(lambda: batch[:, -1])
    assert v.invariant == "S4" and "this rank's last local position, not the sequence's" in v.problem
    assert flagged(lambda: (sample()[-1], batch[-1], batch[:, 0])) == []


def test_global_positions_indexing_a_cp_local_tensor_are_s4():
    batch = local_batch()
    positions = torch.zeros(2, 192, dtype=torch.long)
    tag_batch({"position_ids": positions, "max_seq_lens": [384, 384]}, samples=[0, 4], cp_size=2, cp_rank=1,
              fields=("position_ids",))
    assert geometry_of(positions).positions == "global"
    assert codes(lambda: batch.gather(1, positions)) == ["S4"]
    assert codes(lambda: batch[0].index_select(0, positions[0])) == ["S4"]
    assert codes(lambda: batch[0][positions[0]]) == ["S4"]
    table = torch.zeros(384)  # a table of the whole sequence (rotary frequencies): global positions fit
    assert flagged(lambda: table[positions[0]]) == []


def test_slice_bounds_that_went_negative_are_s4_and_clamped_ones_silent():
    # slime afda55394's shape: a CP chunk's positions minus the prompt length, as response indices
    mask = torch.ones(200)
    tag_space(mask, "R", field="loss_masks", samples=0, lengths=S0)
    prompt = 100
    chunk = (0, 96)  # inside the prompt
    assert codes(lambda: mask[chunk[0] - prompt : chunk[1] - prompt]) == ["S4"]
    straddling = (96, 192)
    assert codes(lambda: mask[straddling[0] - prompt : straddling[1] - prompt]) == ["S4"]
    clamped = [mask[max(0, a - prompt) : max(0, b - prompt)] for a, b in (chunk, straddling, (288, 384))]
    assert flagged(lambda: [mask[max(0, a - prompt) : max(0, b - prompt)] for a, b in (chunk, straddling)]) == []
    assert [c.numel() for c in clamped] == [0, 92, 12]
    assert flagged(lambda: (mask[-5:], mask[-100:0], mask[3:-3])) == []  # from the end, empty, inner


# --- S5: T-long data cut at P offsets -------------------------------------------------------------------


def test_t_long_data_cut_at_padded_offsets_is_s5():
    # verl b178a3cd5 / 45c0f58a6's shape: zigzag chunk bounds from P on the unpadded tokens
    tokens = sample(n=130, lengths=SampleLengths(130, 30, 256))
    half = 256 // 2 // 2  # cp = 2: c = 64; rank 1 keeps [64, 128) and [128, 192)
    (v,) = flagged(lambda: tokens[2 * half : 3 * half])
    assert v.invariant == "S5" and "[128:192)" in v.problem and "cuts the slice short" in v.problem
    assert flagged(lambda: tokens[2 * half : min(3 * half, tokens.numel())]) == []  # clamped (the fix)
    assert flagged(lambda: F.pad(tokens, (0, 126))[2 * half : 3 * half]) == []  # padded first
    assert flagged(lambda: (tokens[:200], tokens[0:5000])) == []  # "at most n", or past the layout too


def test_a_truncation_keeps_the_alignment_and_other_kinds_of_axis_are_not_compared_by_shift():
    # logits[:, :-1] (next-token predictions, a T-1 axis) against labels[:, 1:]: the canonical pair is silent
    labels, logits, mask = torch.arange(299), torch.zeros(299), torch.zeros(299)
    tag_space(labels, "T +1", field="labels", samples=0, lengths=S0)
    tag_space(logits, "T-1", field="logits", samples=0, lengths=S0)
    tag_space(mask, "T -1", field="mask", samples=0, lengths=S0)  # the space's -1: x[:-1], its own tokens
    assert geometry_of(mask).shift == 0 and geometry_of(labels).layout_space(299).shift == 1
    assert flagged(lambda: (logits * labels, F.cross_entropy(torch.zeros(299, 5), labels % 5, reduction="none")
                            * logits)) == []
    assert codes(lambda: labels * mask) == ["S3"]  # a mask cut at the end against targets shifted left
