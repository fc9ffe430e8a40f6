"""The reference pipeline in fixtures/minitrainer: correct with every bug off, observably wrong with each on.

Every CP rank runs in this one process (``with parallel_state(cp_rank=r)``),
and the ranks' slices are put back together here with formulas written in
this file, independent of ``minitrainer.cp_utils``. The signatures are those
of docs/design.md#a-real-data-path-miles (Miles at 31f1ca961), checked here too.
"""

from __future__ import annotations

import ast
import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
if str(FIXTURES) not in sys.path:  # tests/conftest.py normally does this
    sys.path.insert(0, str(FIXTURES))

from minitrainer import bugs  # noqa: E402
from minitrainer import cp_utils as cp_utils_module  # noqa: E402
from minitrainer import data as data_module  # noqa: E402
from minitrainer.actor import StepResult, record_replay, train_loop, train_step  # noqa: E402
from minitrainer.args import make_args  # noqa: E402
from minitrainer.cp_utils import get_logits_and_tokens_offset_with_cp, slice_with_cp  # noqa: E402
from minitrainer.data import (  # noqa: E402
    DataIterator,
    expand_multimodal_rollout_data_in_place,
    get_batch,
    get_data_iterator,
    get_rollout_data,
)
from minitrainer.global_vars import set_args  # noqa: E402
from minitrainer.parallel import get_parallel_state, parallel_state, set_parallel_state  # noqa: E402
from minitrainer.replay_data import fill_replay_data  # noqa: E402
from minitrainer.rollout import MEDIA_TOKEN_ID, Box, long_tailed_lengths, make_rollout_ref  # noqa: E402
from layoutcheck.geometry import packed_sample_length  # noqa: E402

# Padded lengths with A = 128: 256, 384, 256, 256, 128, 512, 384, 256 -> four groups.
LENGTHS = [130, 300, 140, 250, 90, 500, 260, 129]
REF = make_rollout_ref(LENGTHS)
RAW = REF.inner
REPLAY_KEY = "rollout_routed_experts"


# --- helpers: run every rank, undo CP slicing -------------------------------


def run_ranks(args, ref: Box = REF, *, cp: int = 1, tp: int = 1, tp_rank: int = 0) -> list[StepResult]:
    """One `train_step` per CP rank, in rank order."""
    results = []
    for rank in range(cp):
        with parallel_state(tp_size=tp, tp_rank=tp_rank, cp_size=cp, cp_rank=rank):
            results.append(train_step(args, ref))
    return results


def local_length(padded: int, cp: int, allgather: bool) -> int:
    if cp == 1:
        return padded
    return padded // cp if allgather else 2 * math.ceil(padded / (2 * cp))


def reassemble(pieces: list[torch.Tensor], cp: int, allgather: bool) -> torch.Tensor:
    """Undo CP slicing along dim 0: the sequence as materialised before slicing."""
    if cp == 1 or allgather:
        return torch.cat(pieces)
    c = pieces[0].size(0) // 2
    chunks: list[torch.Tensor] = [pieces[0]] * (2 * cp)
    for rank, piece in enumerate(pieces):
        chunks[rank], chunks[2 * cp - 1 - rank] = piece[:c], piece[c:]
    return torch.cat(chunks)


def pad_to(x: torch.Tensor, length: int, value: int = 0) -> torch.Tensor:
    return F.pad(x, (0, 0) * (x.dim() - 1) + (0, length - x.size(0)), value=value)


def zigzag_count(total: int, response: int, length: int, cp: int, rank: int) -> int:
    """Response entries on ``rank`` for a sample laid out with ``length`` (logit p-1+j in the rank's chunks)."""
    if cp == 1:
        return response
    c = math.ceil(length / (2 * cp))
    windows = [(rank * c, (rank + 1) * c), ((2 * cp - 1 - rank) * c, (2 * cp - rank) * c)]
    lo, hi = total - response - 1, total - 1
    return sum(max(0, min(b, hi) - max(a, lo)) for a, b in windows)


def ref_tokens(i: int) -> torch.Tensor:
    return torch.tensor(RAW.tokens[i])


def ref_replay(i: int) -> torch.Tensor:
    return torch.from_numpy(RAW.rollout_routed_experts[i])


def where_is(result: StepResult, sample: int) -> tuple[int, int]:
    """``(micro-batch, position in it)`` of a sample."""
    for k, members in enumerate(result.micro_batches):
        if sample in members:
            return k, members.index(sample)
    raise AssertionError(f"sample {sample} is in no micro-batch")


def check_response_fields(results: list[StepResult], raw=RAW) -> None:
    """Per-rank log-prob counts sum to R_i, reassemble to the rollout's values, and match the model's."""
    for i, response in enumerate(raw.response_lengths):
        full = torch.full((response,), float("nan"))
        counts = 0
        for result in results:
            k, j = where_is(result, i)
            forward = result.forwards[k]
            old = forward.old_log_probs[j]
            assert torch.equal(forward.new_log_probs[j], old), f"sample {i}: model and rollout log-probs disagree"
            assert torch.equal(result.rollout_data["log_probs"][i], old)  # the log-prob pass agrees too
            counts += old.numel()
            start = result.rollout_data["total_lengths"][i] - response - 1
            at = 0
            for a, b in forward.logit_ranges[j]:
                full[a - start : b - start] = old[at : at + b - a]
                at += b - a
        assert counts == response
        assert torch.equal(full, torch.tensor(raw.rollout_log_probs[i]))


def check_bshd(args, cp: int, *, tp: int = 1, tp_rank: int = 0) -> list[StepResult]:
    """Every flags-off BSHD property, for all CP ranks."""
    results = run_ranks(args, cp=cp, tp=tp, tp_rank=tp_rank)
    rd = results[0].rollout_data
    unit = math.lcm(tp * args.data_pad_size_multiplier, cp if args.allgather_cp else 1)
    for t, p in zip(rd["total_lengths"], rd["max_seq_lens"]):
        assert p % unit == 0 and t <= p < t + unit  # O2, O3: tight per-sample padding
    assert all(r.micro_batches == results[0].micro_batches for r in results)

    for k, members in enumerate(results[0].micro_batches):
        batches = [r.batches[k] for r in results]
        (padded,) = set(batches[0]["max_seq_lens"])  # G1: one P per micro-batch
        length = local_length(padded, cp, args.allgather_cp)
        materialised = length * cp
        for batch in batches:
            for key in ("tokens", "full_loss_masks"):
                assert batch[key].shape == (len(members), length), key
        for j, i in enumerate(members):
            total, response = rd["total_lengths"][i], rd["response_lengths"][i]
            tokens = reassemble([b["tokens"][j] for b in batches], cp, args.allgather_cp)
            assert torch.equal(tokens, pad_to(ref_tokens(i), materialised))
            masks = reassemble([b["full_loss_masks"][j] for b in batches], cp, args.allgather_cp)
            assert masks.sum() == response and masks[total - response - 1 : total - 1].all()

        # G5: the replay filler saw the same P: B * L rows (split over TP under SP)
        rows_per_rank = len(members) * length // (tp if args.sequence_parallel else 1)
        replays = [result.replays[REPLAY_KEY][k] for result in results]
        assert all(rows.size(0) == rows_per_rank for rows in replays)
        if not args.sequence_parallel:
            for j, i in enumerate(members):
                pieces = [r.view(len(members), length, *r.shape[1:])[j] for r in replays]
                expected = pad_to(ref_replay(i), materialised, value=-1)
                assert torch.equal(reassemble(pieces, cp, args.allgather_cp), expected)

    check_response_fields(results)
    return results


# --- flags off: the configuration grid ---------------------------------------


@pytest.mark.parametrize("micro_batch_size", [1, 2, 4])
@pytest.mark.parametrize("allgather", [False, True], ids=["zigzag", "allgather"])
@pytest.mark.parametrize("cp", [1, 2, 4])
def test_bshd_layout_is_consistent(cp: int, allgather: bool, micro_batch_size: int) -> None:
    args = make_args(qkv_format="bshd", allgather_cp=allgather, micro_batch_size=micro_batch_size)
    check_bshd(args, cp)


def test_bshd_micro_batches_group_samples_by_padded_length() -> None:
    (result,) = run_ranks(make_args(micro_batch_size=2))
    assert result.micro_batches == [[0, 2], [3, 7], [1, 6], [4], [5]]
    # the schedule travels in rollout_data, as Miles's precomputed schedule does
    assert result.rollout_data["micro_batch_indices"] == result.micro_batches
    assert result.num_microbatches == [5]


@pytest.mark.parametrize("cp", [2, 4])
def test_bshd_zigzag_with_uneven_chunks(cp: int) -> None:
    # A = 20: 2cp does not always divide P, so L = 2 ceil(P / 2cp) > P / cp
    args = make_args(data_pad_size_multiplier=20, micro_batch_size=2)  # layoutcheck: ignore[bucket-spec] -- an odd unit on purpose
    results = check_bshd(args, cp)
    if cp == 4:
        assert any(b["tokens"].size(1) * cp > b["max_seq_lens"][0] for b in results[0].batches)


@pytest.mark.parametrize("tp_rank", [0, 1])
def test_bshd_sequence_parallel_splits_replay_rows_over_tp(tp_rank: int) -> None:
    args = make_args(micro_batch_size=2, sequence_parallel=True)
    results = check_bshd(args, cp=2, tp=2, tp_rank=tp_rank)
    assert {p % 256 for p in results[0].rollout_data["max_seq_lens"]} == {0}  # A = tp * 128


@pytest.mark.parametrize("micro_batch_size", [1, 2, 4])
@pytest.mark.parametrize("allgather", [False, True], ids=["zigzag", "allgather"])
@pytest.mark.parametrize("cp", [1, 2, 4])
def test_thd_layout_is_consistent(cp: int, allgather: bool, micro_batch_size: int) -> None:
    args = make_args(qkv_format="thd", allgather_cp=allgather, micro_batch_size=micro_batch_size)
    results = run_ranks(args, cp=cp)
    rd = results[0].rollout_data
    assert "max_seq_lens" not in rd  # THD padding is owned per micro-batch by get_batch
    for k, members in enumerate(results[0].micro_batches):
        batches = [r.batches[k] for r in results]
        bounds = batches[0]["cu_seqlens"].tolist()
        width = batches[0]["tokens"].size(1)
        for batch in batches:
            assert batch["tokens"].shape == batch["full_loss_masks"].shape == (1, width)
            assert batch["cu_seqlens"].tolist() == bounds
        if allgather and cp > 1:
            # one global stream of the samples as they are, padded to cp * 128, cut into cp windows
            assert (width * cp) % (cp * 128) == 0 and bounds[-1] == width * cp
            stream = torch.cat([b["tokens"][0] for b in batches])
            for j, i in enumerate(members):
                assert bounds[j + 1] - bounds[j] == rd["total_lengths"][i]
                assert torch.equal(stream[bounds[j] : bounds[j + 1]], ref_tokens(i))
        else:
            assert width % 128 == 0 and bounds[-1] == width * cp
            for j, i in enumerate(members):
                packed = packed_sample_length(rd["total_lengths"][i], cp)
                start, end = bounds[j] // cp, bounds[j + 1] // cp
                assert end - start == packed // cp
                tokens = reassemble([b["tokens"][0, start:end] for b in batches], cp, False)
                assert torch.equal(tokens, pad_to(ref_tokens(i), packed))
        for result in results:
            assert result.replays[REPLAY_KEY][k].size(0) == width  # G5
    check_response_fields(results)


def test_thd_dynamic_batch_size_balances_tokens() -> None:
    args = make_args(qkv_format="thd", use_dynamic_batch_size=True, max_tokens_per_gpu=600)
    results = run_ranks(args, cp=2)
    (result,) = results[:1]
    assert sorted(i for mb in result.micro_batches for i in mb) == list(range(len(LENGTHS)))
    assert all(sum(LENGTHS[i] for i in mb) <= 600 * 2 or len(mb) == 1 for mb in result.micro_batches)
    assert result.num_microbatches == [len(result.micro_batches)] and len(result.micro_batches) >= 2
    check_response_fields(results)


# --- static shape buckets ---------------------------------------------------------

BUCKETS = (512, 1024)  # padded lengths 128..512 -> 512; none above 512 here


@pytest.mark.parametrize("micro_batch_size", [1, 2, 4])
@pytest.mark.parametrize("allgather", [False, True], ids=["zigzag", "allgather"])
@pytest.mark.parametrize("cp", [1, 2, 4])
def test_bshd_buckets_pad_micro_batches_to_a_bucket(cp: int, allgather: bool, micro_batch_size: int) -> None:
    args = make_args(buckets=(256, 512, 1024), allgather_cp=allgather, micro_batch_size=micro_batch_size)
    results = run_ranks(args, cp=cp)
    rd = results[0].rollout_data
    unit = 128 if not allgather else math.lcm(128, cp)
    assert all(t <= p < t + unit for t, p in zip(rd["total_lengths"], rd["max_seq_lens"]))  # still tight per sample
    for k, members in enumerate(results[0].micro_batches):
        bucket = min(b for b in (256, 512, 1024) if b >= max(rd["max_seq_lens"][i] for i in members))
        assert all(min(b for b in (256, 512, 1024) if b >= rd["max_seq_lens"][i]) == bucket for i in members)
        length = local_length(bucket, cp, allgather)
        for result in results:
            assert result.batches[k]["tokens"].shape == (len(members), length)
            assert result.replays[REPLAY_KEY][k].size(0) == len(members) * length  # the filler agrees
        for j, i in enumerate(members):
            tokens = reassemble([r.batches[k]["tokens"][j] for r in results], cp, allgather)
            assert torch.equal(tokens, pad_to(ref_tokens(i), length * cp))
    check_response_fields(results)  # log-probs sliced with the bucket match the model's


def test_bug_wrong_bucket() -> None:
    # every sample's bucket is 512, so micro-batches are plain pairs; sample 5 has P = 512, a bucket
    # itself: with `>` where `>=` belongs its micro-batch [4, 5] gets the next bucket, 1024
    args = make_args(buckets=BUCKETS, micro_batch_size=2, bugs={"wrong_bucket"})
    (result,) = run_ranks(args)
    assert result.micro_batches == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [b["tokens"].size(1) for b in result.batches] == [512, 512, 1024, 512]
    rows = [r.size(0) for r in result.replays[REPLAY_KEY]]
    assert rows == [1024, 1024, 1024, 1024]  # the replay filler still pads to 512 (2 x 512 rows)
    (clean,) = run_ranks(make_args(buckets=BUCKETS, micro_batch_size=2))
    assert all(b["tokens"].size(1) == 512 for b in clean.batches)
    with pytest.raises(ValueError, match="strictly increasing"):
        make_args(buckets=(1024, 512))


def test_dp_ranks_split_the_rollout() -> None:
    args = make_args()
    shares = []
    for rank in range(2):
        with parallel_state(dp_size=2, dp_rank=rank):
            shares.append(train_step(args, REF).rollout_data["total_lengths"])
    assert shares == [LENGTHS[0::2], LENGTHS[1::2]]


# --- each bug flag leaves an observable buggy state ------------------------------


def test_bug_rollout_global_padding() -> None:
    (result,) = run_ranks(make_args(bugs={"rollout_global_padding"}))
    lens = result.rollout_data["max_seq_lens"]
    assert lens == [512] * len(LENGTHS)  # round_up(max(T) = 500, 128) everywhere
    assert lens[4] >= LENGTHS[4] + 128  # O3: T=90 carries P=512
    (clean,) = run_ranks(make_args())
    assert clean.rollout_data["max_seq_lens"][4] == 128


def test_bug_mixed_padded_lengths() -> None:
    args = make_args(micro_batch_size=2, bugs={"mixed_padded_lengths"})
    results = run_ranks(args, cp=2)
    assert results[0].micro_batches == [[0, 1], [2, 3], [4, 5], [6, 7]]  # plain order
    assert "micro_batch_indices" not in results[0].rollout_data
    batches = [r.batches[0] for r in results]
    assert batches[0]["max_seq_lens"] == [256, 384]  # G1: two Ps in one micro-batch
    # sample 1 (T=300) is laid out with P_0 = 256: silently truncated
    tokens = reassemble([b["tokens"][1] for b in batches], 2, False)
    assert tokens.numel() == 256 and torch.equal(tokens, ref_tokens(1)[:256])
    # G4: its log-probs were sliced with its own P_1 = 384, not the batch's 256
    counts = [b["rollout_log_probs"][1].numel() for b in batches]
    total, response = LENGTHS[1], RAW.response_lengths[1]
    assert counts == [zigzag_count(total, response, 384, 2, r) for r in range(2)]
    assert counts != [zigzag_count(total, response, 256, 2, r) for r in range(2)]
    assert sum(counts) == response
    assert any(f.new_log_probs[1].shape != f.old_log_probs[1].shape for f in (r.forwards[0] for r in results))


@pytest.mark.parametrize("allgather", [False, True], ids=["zigzag", "allgather"])
def test_bug_logprobs_sliced_with_other_p(allgather: bool) -> None:
    results = run_ranks(make_args(bugs={"logprobs_sliced_with_other_p"}, allgather_cp=allgather), cp=2)
    wrong = []
    for i, (total, response) in enumerate(zip(LENGTHS, RAW.response_lengths)):
        padded = results[0].rollout_data["max_seq_lens"][i]
        counts = [r.rollout_data["rollout_log_probs"][i].numel() for r in results]
        packed = total + (-total) % 4  # the THD rule: T rounded up to 2 cp
        assert counts == [zigzag_count(total, response, packed, 2, r) for r in range(2)]
        assert sum(counts) == response
        if counts != [zigzag_count(total, response, padded, 2, r) for r in range(2)]:
            wrong.append(i)
    assert wrong == list(range(len(LENGTHS)))  # O4: every sample, on both ranks
    assert all(f.new_log_probs[0].shape != f.old_log_probs[0].shape for r in results for f in r.forwards)


def test_bug_replay_thd_pad_multiplier() -> None:
    args = make_args(qkv_format="thd", micro_batch_size=2, bugs={"replay_thd_pad_multiplier"})
    (result,) = run_ranks(args)
    pairs = [(rows.size(0), f.batch["tokens"].numel()) for rows, f in zip(result.replays[REPLAY_KEY], result.forwards)]
    # micro-batch 2 holds samples 4 and 5: 590 tokens -> 640 (x128) in get_batch, 768 (x256) in the filler
    assert pairs[2] == (768, 640)  # G5
    (clean,) = run_ranks(make_args(qkv_format="thd", micro_batch_size=2))
    assert all(rows.size(0) == f.batch["tokens"].numel() for rows, f in zip(clean.replays[REPLAY_KEY], clean.forwards))


MEDIA = {0: 193}  # sample 0's placeholder grows to 193 tokens: T_0 = 130 - 1 + 193 = 322


def test_multimodal_expansion_before_the_owner_is_consistent() -> None:
    ref = make_rollout_ref(LENGTHS, media=MEDIA)
    for fmt in ("bshd", "thd"):
        results = run_ranks(make_args(qkv_format=fmt, micro_batch_size=2), ref, cp=2)
        rd = results[0].rollout_data
        assert rd["total_lengths"][0] == rd["tokens"][0].numel() == 322
        assert int((rd["tokens"][0] == MEDIA_TOKEN_ID).sum()) == 193
        if fmt == "bshd":
            assert rd["max_seq_lens"][0] == 384  # derived from the expanded length
        check_response_fields(results, ref.inner)


def test_bug_stale_lengths_after_expansion() -> None:
    ref = make_rollout_ref(LENGTHS, media=MEDIA)
    (result,) = run_ranks(make_args(bugs={"stale_lengths_after_expansion"}), ref)
    rd = result.rollout_data
    assert rd["max_seq_lens"][0] == 256  # stale: what the producer wrote for T=130
    assert rd["total_lengths"][0] == rd["tokens"][0].numel() == 322  # G2: T_0 > P_0
    row = result.batches[0]["tokens"][0]
    assert torch.equal(row, rd["tokens"][0][:256])  # get_batch silently truncated it
    assert result.forwards[0].new_log_probs[0].shape != result.forwards[0].old_log_probs[0].shape
    assert rd["total_lengths"][1:] == LENGTHS[1:]  # only sample 0 grew
    (thd,) = run_ranks(make_args(qkv_format="thd", bugs={"stale_lengths_after_expansion"}), ref)
    assert thd.rollout_data["total_lengths"][0] == 322  # BSHD-only: THD expands before the owner as always


def test_expansion_is_idempotent_and_keeps_replay_rows_in_step() -> None:
    ref = make_rollout_ref([40, 50], media={1: 7})
    with parallel_state():
        set_args(make_args())
        rd, _ = get_rollout_data(make_args(), ref)
    before = [t.clone() for t in rd["tokens"]]
    expand_multimodal_rollout_data_in_place(rd)  # already expanded: nothing changes
    assert [torch.equal(a, b) for a, b in zip(before, rd["tokens"])] == [True, True]
    assert rd["total_lengths"] == [40, 56] and rd["rollout_routed_experts"][1].size(0) == 55


@pytest.mark.parametrize("allgather", [False, True], ids=["zigzag", "allgather"])
def test_bug_offsets_without_layout(allgather: bool) -> None:
    buggy = run_ranks(make_args(bugs={"offsets_without_layout"}, allgather_cp=allgather), cp=2)
    clean = run_ranks(make_args(allgather_cp=allgather), cp=2)
    for b, c in zip(buggy, clean):
        # the producer is fine; the model reads the wrong logit positions (G4)
        assert all(torch.equal(x, y) for x, y in zip(b.rollout_data["rollout_log_probs"], c.rollout_data["rollout_log_probs"]))
        assert any(fb.logit_ranges != fc.logit_ranges for fb, fc in zip(b.forwards, c.forwards))
        assert any(
            not torch.equal(new, old) if new.shape == old.shape else True
            for f in b.forwards
            for new, old in zip(f.new_log_probs, f.old_log_probs)
        )


def test_bug_alignment_max_not_lcm() -> None:
    # units: tp * 128 = 128 and compressed attention 2 * k * cp = 12 (k = max of the ratios); lcm 384, max 128
    buggy = run_ranks(make_args(compress_ratios=[1, 3], bugs={"alignment_max_not_lcm"}), cp=2)
    lens = buggy[0].rollout_data["max_seq_lens"]
    assert all(p % 128 == 0 for p in lens)
    assert any(p % 12 for p in lens)  # O2: not a multiple of every unit
    clean = run_ranks(make_args(compress_ratios=[1, 3]), cp=2)
    assert all(p % 384 == 0 for p in clean[0].rollout_data["max_seq_lens"])
    for ratios in (None, []):  # no compressed attention: A = 128
        (plain,) = run_ranks(make_args(compress_ratios=ratios))
        assert plain.rollout_data["max_seq_lens"][4] == 128


# --- the loss function, and the bugs inside it ------------------------------------------


def loss_by_micro_batch(results: list[StepResult]) -> list[tuple[int, float]]:
    """Per micro-batch of the training pass, over every CP rank: (tokens the loss counted, sum of their log-probs)."""
    out = []
    for k in range(len(results[0].forwards)):
        losses = [r.forwards[k].loss for r in results]
        out.append((sum(int(n) for _, n, _ in losses), sum(float(loss * n) for loss, n, _ in losses)))
    return out


def response_totals(micro_batches: list[list[int]]) -> list[tuple[int, float]]:
    """The same, from the raw rollout: every response token once, with the oracle's log-prob of its predictor."""
    from minitrainer.rollout import position_log_prob

    out = []
    for samples in micro_batches:
        count, total = 0, 0.0
        for i in samples:
            tokens, r = torch.tensor(RAW.tokens[i]), RAW.response_lengths[i]
            count += r
            total -= float(position_log_prob(tokens[len(tokens) - r - 1 : len(tokens) - 1]).sum())
        out.append((count, total))
    return out


@pytest.mark.parametrize(("fmt", "cp", "b", "allgather"), [("bshd", 2, 1, False), ("bshd", 4, 2, True),
                                                           ("thd", 2, 2, False), ("thd", 1, 4, False)])
def test_the_loss_counts_every_response_token_once(fmt: str, cp: int, b: int, allgather: bool) -> None:
    results = run_ranks(make_args(qkv_format=fmt, micro_batch_size=b, allgather_cp=allgather), cp=cp)
    got, want = loss_by_micro_batch(results), response_totals(results[0].micro_batches)
    assert [n for n, _ in got] == [n for n, _ in want]
    assert [round(x, 3) for _, x in got] == [round(x, 3) for _, x in want]


def test_bug_loss_repad_to_rollout_max() -> None:
    args = {"rollout_max_context_len": 4096}
    for cp in (1, 2):
        clean = loss_by_micro_batch(run_ranks(make_args(**args), cp=cp))
        buggy = loss_by_micro_batch(run_ranks(make_args(bugs={"loss_repad_to_rollout_max"}, **args), cp=cp))
        if cp == 1:  # padded past the output and cut back: the same positions
            assert buggy == clean
        else:  # zigzag chunks of the rollout's max: the mask covers other positions
            assert sum(b != c for b, c in zip(buggy, clean)) > len(clean) // 2
    # it needs the setting, and BSHD
    assert loss_by_micro_batch(run_ranks(make_args(bugs={"loss_repad_to_rollout_max"}), cp=2)) == \
        loss_by_micro_batch(run_ranks(make_args(), cp=2))


def test_bug_loss_cat_mixed_padded_lengths() -> None:
    args = {"qkv_format": "thd", "micro_batch_size": 2}
    results = run_ranks(make_args(bugs={"loss_cat_mixed_padded_lengths"}, **args), cp=2)
    buggy, want = loss_by_micro_batch(results), response_totals(results[0].micro_batches)
    for (n, _), (m, _), samples in zip(buggy, want, results[0].micro_batches):
        lengths = {LENGTHS[i] for i in samples}
        assert (n < m) if len(lengths) > 1 else (n == m)  # positions past the shortest sample are lost
    assert loss_by_micro_batch(run_ranks(make_args(bugs={"loss_cat_mixed_padded_lengths"}, micro_batch_size=2), cp=2)) \
        == loss_by_micro_batch(run_ranks(make_args(micro_batch_size=2), cp=2))  # BSHD: nothing changes


def test_bug_names_are_validated() -> None:
    assert len(set(bugs.BUG_NAMES)) == len(bugs.BUG_NAMES) == 10
    with pytest.raises(ValueError, match="rollout_global_padding"):
        make_args(bugs={"rollout_global_pading"})
    args = make_args()
    args.bugs = frozenset({"nope"})
    with pytest.raises(ValueError, match="valid names"):
        run_ranks(args)
    for name in bugs.BUG_NAMES:  # each flag is documented in the module table
        assert f"``{name}``" in bugs.__doc__


# --- the real trainer's signatures and call patterns ----------------------------------


def test_signatures_match_the_appendix() -> None:
    import inspect

    def params(fn):
        return [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values()]

    empty, pk, kw = inspect.Parameter.empty, "POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY"
    assert params(get_rollout_data) == [("args", pk, empty), ("rollout_data_ref", pk, empty), ("witness_info", pk, None)]
    assert params(DataIterator) == [("rollout_data", pk, empty), ("micro_batch_size", pk, None),
                                    ("micro_batch_indices", pk, None)]
    assert params(get_data_iterator) == [("args", pk, empty), ("model", pk, empty), ("rollout_data", pk, empty)]
    assert params(get_batch) == [("data_iterator", pk, empty), ("keys", pk, empty), ("pad_multiplier", pk, 128),
                                 ("qkv_format", pk, "thd"), ("get_position_ids", pk, False), ("allgather_cp", pk, False)]
    assert params(fill_replay_data) == [
        ("args", kw, empty), ("models", kw, empty), ("data_iterator", kw, empty), ("num_microbatches", kw, empty),
        ("rollout_data", kw, empty), ("data_key", kw, empty), ("replay_list", kw, empty),
        ("register_replay_list_func", kw, empty), ("if_sp_region", kw, True), ("indices_are_token_positions", kw, False)]
    assert params(get_logits_and_tokens_offset_with_cp) == [
        ("total_length", pk, empty), ("response_length", pk, empty), ("qkv_format", pk, "thd"),
        ("max_seq_len", pk, None), ("cp_rank", pk, None), ("cp_size", pk, None)]
    assert params(slice_with_cp) == [("tokens", pk, empty), ("pad_value", pk, empty), ("qkv_format", pk, "thd"),
                                     ("max_seq_len", pk, None), ("parallel_state", pk, None)]
    assert params(cp_utils_module.slice_log_prob_with_cp) == [
        ("log_prob", pk, empty), ("total_length", pk, empty), ("response_length", pk, empty),
        ("qkv_format", pk, "thd"), ("max_token_len", pk, None)]
    assert params(cp_utils_module.all_gather_with_cp) == [
        ("tensor", pk, empty), ("total_length", pk, empty), ("response_length", pk, empty),
        ("qkv_format", pk, "thd"), ("max_seq_len", pk, None)]


def test_callers_import_the_data_path_by_name() -> None:
    import minitrainer.actor as actor
    import minitrainer.model as model

    assert model.get_batch is data_module.get_batch and model.DataIterator is DataIterator
    assert actor.get_rollout_data is data_module.get_rollout_data and actor.fill_replay_data is fill_replay_data
    assert data_module.slice_log_prob_with_cp is cp_utils_module.slice_log_prob_with_cp


def test_data_iterator_list_and_per_step_counts() -> None:
    args = make_args(qkv_format="thd", micro_batch_size=2, use_dynamic_global_batch_size=False, global_batch_size=4)
    with parallel_state(vpp_size=2):
        set_args(args)
        rd, store = get_rollout_data(args, REF)
        iterators, counts = get_data_iterator(args, None, rd)
    assert isinstance(iterators, list) and len(iterators) == 2 and counts == [2, 2]  # two steps of 4 samples
    assert all(it.rollout_data is rd and it.offset == 0 for it in iterators)
    assert store.value is RAW
    with parallel_state(vpp_size=2):
        (result,) = [train_step(args, REF)]
    assert result.num_microbatches == [2, 2] and len(result.forwards) == 4


def test_get_batch_called_positionally_and_by_keyword_agree() -> None:
    args = make_args(micro_batch_size=2)
    keys = ["tokens", "loss_masks", "total_lengths", "response_lengths", "max_seq_lens"]
    with parallel_state(cp_size=2, cp_rank=1):
        set_args(args)
        rd, _ = get_rollout_data(args, REF)
        (iterator,), _ = get_data_iterator(args, None, rd)
        positional = get_batch(iterator, keys, 128, "bshd", True, False)
        keyword = get_batch(iterator.reset(), keys, pad_multiplier=128, qkv_format="bshd", get_position_ids=True,
                            allgather_cp=False)
    for key in ("tokens", "full_loss_masks", "position_ids"):
        assert torch.equal(positional[key], keyword[key])
    positions = positional["position_ids"][0]
    assert torch.equal(positions, pad_to(torch.arange(LENGTHS[0]), 256)[64:192])  # rank 1: chunks 1 and 2 (c = 64)
    with parallel_state(), pytest.raises(ValueError, match="tokens"):
        get_batch(iterator, ["loss_masks"])


def test_fill_replay_data_follows_the_register_protocol() -> None:
    # (replay_list, replay_data, **kwargs): models by keyword, never a micro-batch index
    calls = []

    def register(replay_list, replay_data, *, models):
        calls.append((replay_list, replay_data.size(0), models))

    args = make_args(micro_batch_size=2)
    with parallel_state():
        set_args(args)
        rd, _ = get_rollout_data(args, REF)
        iterators, counts = get_data_iterator(args, None, rd)
        iterators[0].get_next(["tokens"])  # the filler resets its iterators first
        replay_list, models = [], ["m"]
        fill_replay_data(args=args, models=models, data_iterator=iterators, num_microbatches=counts, rollout_data=rd,
                         data_key=REPLAY_KEY, replay_list=replay_list, register_replay_list_func=register)
    assert [n for _, n, _ in calls] == [2 * 256, 2 * 256, 2 * 384, 128, 512]
    assert all(lst is replay_list and m is models for lst, _, m in calls)
    assert REPLAY_KEY not in rd and iterators[0].offset == 0  # deleted afterwards, iterators reset
    replay_list = []
    record_replay(replay_list, torch.zeros(3), models=None)
    assert len(replay_list) == 1


def test_offset_helper_reads_the_parallel_state_and_is_called_inside_the_producer(monkeypatch) -> None:
    # T=10, R=4 (p=6), cp=2, rank 0, packed rule: c = 3, chunks [0,3) and [9,12)
    c, chunks, logits, tokens = get_logits_and_tokens_offset_with_cp(10, 4, "thd", None, 0, 2)
    assert (c, chunks, logits, tokens) == (3, ((0, 3), (9, 12)), ((0, 0), (0, 0)), ((0, 0), (0, 0)))
    with parallel_state(cp_size=2, cp_rank=1):  # callers omit cp_rank / cp_size
        c, chunks, logits, tokens = get_logits_and_tokens_offset_with_cp(10, 4, qkv_format="thd", max_seq_len=None)
        assert (chunks, logits, tokens) == (((3, 6), (6, 9)), ((5, 6), (6, 9)), ((6, 7), (7, 10)))
        assert get_logits_and_tokens_offset_with_cp(10, 4, qkv_format="bshd", max_seq_len=16)[0] == 4  # from P
        with pytest.raises(ValueError, match="max_seq_len"):
            get_logits_and_tokens_offset_with_cp(10, 4, "bshd")
        seen = []
        original = cp_utils_module.get_logits_and_tokens_offset_with_cp

        def spy(*args, **kwargs):
            seen.append((args, kwargs))
            return original(*args, **kwargs)

        monkeypatch.setattr(cp_utils_module, "get_logits_and_tokens_offset_with_cp", spy)
        set_args(make_args())
        rd, _ = get_rollout_data(make_args(), REF)
    # two response fields per sample, positional (total, response, qkv_format, max_seq_len), no cp_rank/cp_size
    assert len(seen) == 2 * len(LENGTHS) and all(len(a) == 4 and not kw for a, kw in seen)
    assert seen[0][0] == (LENGTHS[0], RAW.response_lengths[0], "bshd", rd["max_seq_lens"][0])


def test_slice_with_cp_takes_a_pad_function() -> None:
    with parallel_state(cp_size=2, cp_rank=0):
        rows = slice_with_cp(torch.ones(5, 2), lambda t, n: torch.cat([t, torch.full((n, 2), 7.0)]), "bshd", 8)
    assert rows.shape == (4, 2) and rows[:2].eq(1).all() and rows[2:].eq(7).all()  # chunks 0 and 3 of size 2


def test_several_rollouts_in_one_run() -> None:
    refs = [make_rollout_ref(LENGTHS, seed=s) for s in range(3)]
    with parallel_state(cp_size=2, cp_rank=1):
        results = train_loop(make_args(micro_batch_size=2), refs)
    assert [r.rollout_id for r in results] == [0, 1, 2]
    for result, ref in zip(results, refs):
        assert result.rollout_data["tokens"][0].tolist() == ref.inner.tokens[0]
        for f in result.forwards:
            assert all(torch.equal(new, old) for new, old in zip(f.new_log_probs, f.old_log_probs))


# --- pieces -------------------------------------------------------------------


def test_make_args_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="micro_batch_sise"):
        make_args(micro_batch_sise=2)
    with pytest.raises(ValueError, match="compress_ratios"):
        make_args(compress_ratios=[1.5])


def test_parallel_state_is_set_and_scoped() -> None:
    with pytest.raises(RuntimeError, match="set_parallel_state"):
        get_parallel_state()
    with parallel_state(tp_size=2, cp_size=4, cp_rank=3, tp_rank=1, dp_size=2, dp_rank=1) as ps:
        assert (ps.tp.size, ps.tp.rank, ps.cp.size, ps.cp.rank) == (2, 1, 4, 3)
        assert (ps.effective_dp.rank, ps.effective_dp.size, ps.etp.size, ps.intra_dp_cp.size) == (1, 2, 2, 8)
        assert ps.vpp_size == 1 and ps.cp_comm_type is None and ps.indep_dp.size == 1
        assert get_parallel_state() is ps
    with pytest.raises(ValueError):
        with parallel_state(cp_size=2, cp_rank=2):
            pass
    set_parallel_state(None)


def test_data_iterator_walks_indices_or_slices() -> None:
    data = {"a": [0, 1, 2, 3], "b": [10, 11, 12, 13]}
    by_index = DataIterator(data, micro_batch_indices=[[2, 0], [1, 3]])
    assert by_index.get_next(["a", "missing"]) == {"a": [2, 0], "missing": None}
    assert by_index.offset == 1 and by_index.get_next(["b"]) == {"b": [11, 13]}
    by_size = DataIterator(data, micro_batch_size=2)
    assert by_size.get_next(["a"]) == {"a": [0, 1]} and by_size.offset == 2
    assert by_size.reset() is by_size and by_size.offset == 0
    with pytest.raises(ValueError, match="exactly one"):
        DataIterator(data, 2, [[0]])


def test_rollout_ref_shapes() -> None:
    raw = make_rollout_ref([5, 9], [2, 8], num_layers=3, topk=4).inner
    assert [len(t) for t in raw.tokens] == [5, 9]
    assert [len(x) for x in raw.rollout_log_probs] == [2, 8] == [len(m) for m in raw.loss_masks]
    assert [a.shape for a in raw.rollout_routed_experts] == [(4, 3, 4), (8, 3, 4)]
    assert [a.shape[0] for a in raw.rollout_indexer_topk] == [4, 8]
    assert raw.multimodal_train_inputs is None
    with pytest.raises(ValueError):
        make_rollout_ref([5], [5])  # no prompt token
    with pytest.raises(ValueError, match="media"):
        make_rollout_ref([5], [4], media={0: 3})  # a one-token prompt cannot hold a placeholder


def test_long_tailed_lengths() -> None:
    lengths = long_tailed_lengths(64, seed=3)
    assert len(lengths) == 64 and lengths.count(14010) == 1 and max(lengths) == 14010
    body = sorted(t for t in lengths if t != 14010)
    assert 900 < body[len(body) // 2] < 1900  # median around 1.3k
    assert long_tailed_lengths(64, seed=3) == lengths


def test_minitrainer_imports_nothing_of_layoutcheck_but_its_annotations() -> None:
    # user code: it pads on its own; `shapes` takes the `Padded` annotations (optionally) and nothing else
    for path in (FIXTURES / "minitrainer").glob("*.py"):
        allowed = {"layoutcheck.typing"} if path.name == "shapes.py" else set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "layoutcheck" and n not in allowed for n in names), path


def test_agrees_with_layoutcheck_geometry() -> None:
    """The fixture's own padding and per-rank counts equal layoutcheck's geometry model."""
    from layoutcheck import geometry
    for layout in ("bshd", "thd"):
        for allgather in (False, True):
            for cp in (1, 2, 4):
                for ratios in (None, [3]):
                    args = make_args(qkv_format=layout, allgather_cp=allgather, compress_ratios=ratios)
                    results = run_ranks(args, cp=cp)
                    rd = results[0].rollout_data
                    padded = rd.get("max_seq_lens", [None] * len(LENGTHS))
                    scheme = "allgather" if allgather else "zigzag"
                    if layout == "bshd":
                        k = ratios[0] if ratios else None
                        unit = geometry.alignment_unit(1, 128, cp_size=cp, compression_ratio=k, scheme=scheme).value
                        assert padded == geometry.per_sample_padded_lengths(LENGTHS, unit)
                    for rank, result in enumerate(results):
                        for batch in result.batches:  # tokens: the scheme's geometry
                            totals = batch["total_lengths"]
                            if layout == "bshd":
                                batch_p = batch["max_seq_lens"][0]  # layoutcheck: ignore[unguarded-rectangular-batch]
                                want = geometry.local_length(batch_p, cp, scheme)
                            else:
                                want = geometry.packed_stream_length(totals, cp, scheme=scheme, pad_to=128)
                            assert batch["tokens"].size(1) == want, (layout, scheme, cp)
                        log_probs = result.rollout_data["rollout_log_probs"]
                        for t, r, p, lp in zip(LENGTHS, rd["response_lengths"], padded, log_probs):
                            # response fields follow the zigzag rule whatever the tokens' scheme (as Miles)
                            count = geometry.response_count(t, r, cp, rank, layout=layout, padded=p, scheme="zigzag")
                            assert lp.numel() == count, (layout, scheme, cp, rank, t)
