"""The reference pipeline in fixtures/minitrainer: correct with every bug off, observably wrong with each on.

Every CP rank runs in this one process (``with parallel_state(cp_rank=r)``),
and the ranks' slices are put back together here with formulas written in
this file, independent of ``minitrainer.cp_utils``.
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
from minitrainer.actor import StepResult, train_step  # noqa: E402
from minitrainer.args import make_args  # noqa: E402
from minitrainer.cp_utils import get_logits_and_tokens_offset_with_cp  # noqa: E402
from minitrainer.data import DataIterator  # noqa: E402
from minitrainer.parallel_state import get_parallel_state, parallel_state  # noqa: E402
from minitrainer.rollout import RolloutRef, long_tailed_lengths, make_rollout_ref  # noqa: E402
from layoutcheck.geometry import packed_sample_length  # noqa: E402

# Padded lengths with A = 128: 256, 384, 256, 256, 128, 512, 384, 256 -> four groups.
LENGTHS = [130, 300, 140, 250, 90, 500, 260, 129]
REF = make_rollout_ref(LENGTHS)
REPLAY_KEY = "rollout_routed_experts"


# --- helpers: run every rank, undo CP slicing -------------------------------


def run_ranks(args, ref: RolloutRef = REF, *, cp: int = 1, tp: int = 1, tp_rank: int = 0) -> list[StepResult]:
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


def expected_count(total: int, response: int, length: int, cp: int, rank: int, allgather: bool) -> int:
    """Response entries on ``rank`` for a sample laid out with ``length`` (logit p-1+j in the rank's ranges)."""
    if cp == 1:
        return response
    if allgather:
        w = length // cp
        windows = [(rank * w, (rank + 1) * w)]
    else:
        c = math.ceil(length / (2 * cp))
        windows = [(rank * c, (rank + 1) * c), ((2 * cp - 1 - rank) * c, (2 * cp - rank) * c)]
    lo, hi = total - response - 1, total - 1
    return sum(max(0, min(b, hi) - max(a, lo)) for a, b in windows)


def ref_tokens(i: int) -> torch.Tensor:
    return torch.tensor(REF.tokens[i])


def where_is(result: StepResult, sample: int) -> tuple[int, int]:
    """``(micro-batch, position in it)`` of a sample."""
    for k, members in enumerate(result.micro_batches):
        if sample in members:
            return k, members.index(sample)
    raise AssertionError(f"sample {sample} is in no micro-batch")


def check_response_fields(results: list[StepResult], ref: RolloutRef) -> None:
    """Per-rank log-prob counts sum to R_i, reassemble to the rollout's values, and match the model's."""
    for i, response in enumerate(ref.response_lengths):
        full = torch.full((response,), float("nan"))
        counts = 0
        for result in results:
            k, j = where_is(result, i)
            forward = result.forwards[k]
            old = forward.old_log_probs[j]
            assert torch.equal(forward.new_log_probs[j], old), f"sample {i}: model and rollout log-probs disagree"
            counts += old.numel()
            start = result.rollout_data["total_lengths"][i] - response - 1
            at = 0
            for a, b in forward.logit_ranges[j]:
                full[a - start : b - start] = old[at : at + b - a]
                at += b - a
        assert counts == response
        assert torch.equal(full, torch.tensor(ref.rollout_log_probs[i]))


def check_bshd(args, cp: int, *, tp: int = 1, tp_rank: int = 0) -> list[StepResult]:
    """Every flags-off BSHD property of the brief, for all CP ranks."""
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
            for key in ("tokens", "full_loss_masks", "position_ids"):
                assert batch[key].shape == (len(members), length), key
        for j, i in enumerate(members):
            total, response = rd["total_lengths"][i], rd["response_lengths"][i]
            tokens = reassemble([b["tokens"][j] for b in batches], cp, args.allgather_cp)
            assert torch.equal(tokens, pad_to(rd["tokens"][i], materialised))
            positions = reassemble([b["position_ids"][j] for b in batches], cp, args.allgather_cp)
            assert torch.equal(positions, pad_to(torch.arange(total), materialised))
            masks = reassemble([b["full_loss_masks"][j] for b in batches], cp, args.allgather_cp)
            assert masks.sum() == response and masks[total - response - 1 : total - 1].all()

        # G5: the replay filler saw the same P: B * L rows (split over TP under SP)
        rows_per_rank = len(members) * length // (tp if args.sequence_parallel else 1)
        replays = []
        for result in results:
            index, rows = result.replays[REPLAY_KEY][k]
            assert index == k and rows.size(0) == rows_per_rank
            replays.append(rows)
        if not args.sequence_parallel:
            for j, i in enumerate(members):
                pieces = [r.view(len(members), length, *r.shape[1:])[j] for r in replays]
                expected = pad_to(rd[REPLAY_KEY][i], materialised, value=-1)
                assert torch.equal(reassemble(pieces, cp, args.allgather_cp), expected)

    check_response_fields(results, REF)
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
        assert width % 128 == 0 and bounds[-1] == width * cp
        for batch in batches:
            assert batch["tokens"].shape == batch["full_loss_masks"].shape == batch["position_ids"].shape == (1, width)
            assert batch["cu_seqlens"].tolist() == bounds
        for j, i in enumerate(members):
            total = rd["total_lengths"][i]
            packed = packed_sample_length(total, cp)
            start, end = bounds[j] // cp, bounds[j + 1] // cp
            assert end - start == packed // cp
            tokens = reassemble([b["tokens"][0, start:end] for b in batches], cp, allgather)
            assert torch.equal(tokens, pad_to(rd["tokens"][i], packed))
        for result in results:
            index, rows = result.replays[REPLAY_KEY][k]
            assert index == k and rows.size(0) == width  # G5
    check_response_fields(results, REF)


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
            batch = result.batches[k]
            assert batch["tokens"].shape == (len(members), length)
            index, rows = result.replays[REPLAY_KEY][k]
            assert index == k and rows.size(0) == len(members) * length  # the filler agrees
        for j, i in enumerate(members):
            tokens = reassemble([r.batches[k]["tokens"][j] for r in results], cp, allgather)
            assert torch.equal(tokens, pad_to(rd["tokens"][i], length * cp))
    check_response_fields(results, REF)  # log-probs sliced with the bucket match the model's


def test_bug_wrong_bucket() -> None:
    # every sample's bucket is 512, so micro-batches are plain pairs; sample 5 has P = 512, a bucket
    # itself: with `>` where `>=` belongs its micro-batch [4, 5] gets the next bucket, 1024
    args = make_args(buckets=BUCKETS, micro_batch_size=2, bugs={"wrong_bucket"})
    (result,) = run_ranks(args)
    assert result.micro_batches == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [b["tokens"].size(1) for b in result.batches] == [512, 512, 1024, 512]
    rows = [r.size(0) for _, r in result.replays[REPLAY_KEY]]
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
    batches = [r.batches[0] for r in results]
    assert batches[0]["max_seq_lens"] == [256, 384]  # G1: two Ps in one micro-batch
    # sample 1 (T=300) is laid out with P_0 = 256: silently truncated
    tokens = reassemble([b["tokens"][1] for b in batches], 2, False)
    assert tokens.numel() == 256 and torch.equal(tokens, ref_tokens(1)[:256])
    # G4: its log-probs were sliced with its own P_1 = 384, not the batch's 256
    counts = [b["rollout_log_probs"][1].numel() for b in batches]
    total, response = LENGTHS[1], REF.response_lengths[1]
    assert counts == [expected_count(total, response, 384, 2, r, False) for r in range(2)]
    assert counts != [expected_count(total, response, 256, 2, r, False) for r in range(2)]
    assert sum(counts) == response
    assert any(f.new_log_probs[1].shape != f.old_log_probs[1].shape for f in (r.forwards[0] for r in results))


def test_bug_logprobs_sliced_with_other_p() -> None:
    results = run_ranks(make_args(bugs={"logprobs_sliced_with_other_p"}), cp=2)
    wrong = []
    for i, (total, response) in enumerate(zip(LENGTHS, REF.response_lengths)):
        padded = results[0].rollout_data["max_seq_lens"][i]
        counts = [r.rollout_data["rollout_log_probs"][i].numel() for r in results]
        packed = total + (-total) % 4  # the THD rule: T rounded up to 2 cp
        assert counts == [expected_count(total, response, packed, 2, r, False) for r in range(2)]
        assert sum(counts) == response
        if counts != [expected_count(total, response, padded, 2, r, False) for r in range(2)]:
            wrong.append(i)
    assert wrong == list(range(len(LENGTHS)))  # O4: every sample, on both ranks
    assert all(f.new_log_probs[0].shape != f.old_log_probs[0].shape for r in results for f in r.forwards)


def test_bug_replay_thd_pad_multiplier() -> None:
    args = make_args(qkv_format="thd", micro_batch_size=2, bugs={"replay_thd_pad_multiplier"})
    (result,) = run_ranks(args)
    pairs = [(rows.size(0), f.batch["tokens"].numel()) for (_, rows), f in zip(result.replays[REPLAY_KEY], result.forwards)]
    # micro-batch 2 holds samples 4 and 5: 590 tokens -> 640 (x128) in get_batch, 768 (x256) in the filler
    assert pairs[2] == (768, 640)  # G5
    (clean,) = run_ranks(make_args(qkv_format="thd", micro_batch_size=2))
    assert all(rows.size(0) == f.batch["tokens"].numel() for (_, rows), f in zip(clean.replays[REPLAY_KEY], clean.forwards))


def test_bug_stale_lengths_after_expansion() -> None:
    (result,) = run_ranks(make_args(bugs={"stale_lengths_after_expansion"}))
    rd = result.rollout_data
    assert rd["max_seq_lens"][0] == 256  # stale: what the producer wrote for T=130
    assert rd["total_lengths"][0] == rd["tokens"][0].numel() == 256 + 64  # G2: T_0 > P_0
    assert rd["rollout_routed_experts"][0].size(0) == rd["total_lengths"][0] - 1  # replay kept in step (O5 holds)
    row = result.batches[0]["tokens"][0]
    assert torch.equal(row, rd["tokens"][0][:256])  # get_batch silently truncated it
    assert result.forwards[0].new_log_probs[0].shape != result.forwards[0].old_log_probs[0].shape
    assert rd["total_lengths"][1:] == LENGTHS[1:]  # only sample 0 grew


def test_bug_offsets_without_layout() -> None:
    buggy = run_ranks(make_args(bugs={"offsets_without_layout"}), cp=2)
    clean = run_ranks(make_args(), cp=2)
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
    # units: tp * 128 = 128 and compressed attention 2 * k * cp = 12; lcm 384, max 128
    buggy = run_ranks(make_args(compress_ratio=3, bugs={"alignment_max_not_lcm"}), cp=2)
    lens = buggy[0].rollout_data["max_seq_lens"]
    assert all(p % 128 == 0 for p in lens)
    assert any(p % 12 for p in lens)  # O2: not a multiple of every unit
    clean = run_ranks(make_args(compress_ratio=3), cp=2)
    assert all(p % 384 == 0 for p in clean[0].rollout_data["max_seq_lens"])


def test_bug_names_are_validated() -> None:
    assert len(set(bugs.BUG_NAMES)) == len(bugs.BUG_NAMES) == 8
    with pytest.raises(ValueError, match="rollout_global_padding"):
        make_args(bugs={"rollout_global_pading"})
    args = make_args()
    args.bugs = frozenset({"nope"})
    with pytest.raises(ValueError, match="valid names"):
        run_ranks(args)
    for name in bugs.BUG_NAMES:  # each flag is documented in the module table
        assert f"``{name}``" in bugs.__doc__


# --- pieces -------------------------------------------------------------------


def test_make_args_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="micro_batch_sise"):
        make_args(micro_batch_sise=2)


def test_parallel_state_is_scoped() -> None:
    with parallel_state(tp_size=2, cp_size=4, cp_rank=3, tp_rank=1) as ps:
        assert (ps.tp.size, ps.tp.rank, ps.cp.size, ps.cp.rank) == (2, 1, 4, 3)
        assert get_parallel_state() is ps
    ps = get_parallel_state()
    assert (ps.tp.size, ps.cp.size, ps.dp.size, ps.cp.rank) == (1, 1, 1, 0)
    with pytest.raises(ValueError):
        with parallel_state(cp_size=2, cp_rank=2):
            pass


def test_data_iterator_walks_indices_or_slices() -> None:
    data = {"a": [0, 1, 2, 3], "b": [10, 11, 12, 13]}
    by_index = DataIterator(data, micro_batch_indices=[[2, 0], [1, 3]])
    assert by_index.get_next(["a", "missing"]) == {"a": [2, 0], "missing": None}
    assert by_index.offset == 1 and by_index.get_next(["b"]) == {"b": [11, 13]}
    by_size = DataIterator(data, micro_batch_size=2)
    assert by_size.get_next(["a"]) == {"a": [0, 1]} and by_size.offset == 2
    assert by_size.reset() is by_size and by_size.offset == 0


def test_offsets_match_slime() -> None:
    # T=10, R=4 (p=6), cp=2, rank 0, packed rule: c = 3, chunks [0,3) and [9,12)
    c, chunks, logits, tokens = get_logits_and_tokens_offset_with_cp(10, 4, 0, 2, qkv_format="thd", max_seq_len=None)
    assert (c, chunks, logits, tokens) == (3, ((0, 3), (9, 12)), ((0, 0), (0, 0)), ((0, 0), (0, 0)))
    # rank 1: chunks [3,6) and [6,9); response logits are [5, 9)
    c, chunks, logits, tokens = get_logits_and_tokens_offset_with_cp(10, 4, 1, 2, qkv_format="thd", max_seq_len=None)
    assert (chunks, logits, tokens) == (((3, 6), (6, 9)), ((5, 6), (6, 9)), ((6, 7), (7, 10)))
    # BSHD: chunk from max_seq_len
    assert get_logits_and_tokens_offset_with_cp(10, 4, 1, 2, "bshd", 16)[0] == 4
    with pytest.raises(ValueError, match="max_seq_len"):
        get_logits_and_tokens_offset_with_cp(10, 4, 1, 2, "bshd")


def test_rollout_ref_shapes() -> None:
    ref = make_rollout_ref([5, 9], [2, 8], num_layers=3, topk=4)
    assert [len(t) for t in ref.tokens] == [5, 9]
    assert [len(x) for x in ref.rollout_log_probs] == [2, 8] == [len(m) for m in ref.loss_masks]
    assert [a.shape for a in ref.rollout_routed_experts] == [(4, 3, 4), (8, 3, 4)]
    assert [a.shape[0] for a in ref.rollout_indexer_topk] == [4, 8]
    with pytest.raises(ValueError):
        make_rollout_ref([5], [5])  # no prompt token


def test_long_tailed_lengths() -> None:
    lengths = long_tailed_lengths(64, seed=3)
    assert len(lengths) == 64 and lengths.count(14010) == 1 and max(lengths) == 14010
    body = sorted(t for t in lengths if t != 14010)
    assert 900 < body[len(body) // 2] < 1900  # median around 1.3k
    assert long_tailed_lengths(64, seed=3) == lengths


def test_minitrainer_does_not_import_layoutcheck() -> None:
    for path in (FIXTURES / "minitrainer").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "layoutcheck" for n in names), path


def test_agrees_with_layoutcheck_geometry() -> None:
    """The fixture's own padding and per-rank counts equal layoutcheck's geometry model."""
    from layoutcheck import geometry
    for layout in ("bshd", "thd"):
        for allgather in (False, True):
            for cp in (1, 2, 4):
                for compress in (None, 3):
                    args = make_args(qkv_format=layout, allgather_cp=allgather, compress_ratio=compress)
                    results = run_ranks(args, cp=cp)
                    rd = results[0].rollout_data
                    padded = rd.get("max_seq_lens", [None] * len(LENGTHS))
                    if layout == "bshd":
                        unit = geometry.alignment_unit(1, 128, cp_size=cp, compression_ratio=compress).value
                        assert padded == geometry.per_sample_padded_lengths(LENGTHS, unit)
                    scheme = "allgather" if allgather else "zigzag"
                    for rank, result in enumerate(results):
                        log_probs = result.rollout_data["rollout_log_probs"]
                        for t, r, p, lp in zip(LENGTHS, rd["response_lengths"], padded, log_probs):
                            count = geometry.response_count(t, r, cp, rank, layout=layout, padded=p, scheme=scheme)
                            assert lp.numel() == count, (layout, scheme, cp, rank, t)
