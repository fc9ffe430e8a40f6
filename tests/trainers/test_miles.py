"""Miles's real data path on CPU at 31f1ca961 (rollout-global BSHD padding) and e78cfb3 (per-sample padding).

Runs when ``LAYOUTCHECK_MILES_CHECKOUT`` names checkouts at those commits
(README), skipped otherwise. Two CP ranks of a real gloo group drive whole
steps: the rollout side's DP split, ``get_rollout_data``,
``get_data_iterator``, ``fill_replay_data`` and ``get_batch``. The facts
asserted are Miles's: at 31f1ca961 every BSHD sample is padded to the
rollout's longest (``round_up(700, 128) = 768``), so a 100-token sample
fills 768 positions and CP rank 1 holds none of its tokens; at e78cfb3 each
sample pads to its own ``round_up(T, 128)``, and a micro-batch mixing padded
lengths fails closed in ``get_batch`` and ``fill_replay_data``. Within each
commit, tokens, loss masks, log-probs and replay rows agree with the owner's
``P`` (so the harness runs Miles's layout as Miles does); expected layouts
come from layoutcheck's geometry model.
"""

from __future__ import annotations

import pytest

from layoutcheck.geometry import response_logit_ranges, round_up, zigzag_chunks
from trainers.miles_harness import SIGNATURES, run_miles_step
from trainers.rollouts import token_value

CP = 2
UNIT = 128  # tp (1) x data_pad_size_multiplier (128)
LENGTHS = [100, 700, 300]
STEPS = [
    {"name": "bshd", "rollout": {"lengths": LENGTHS}, "args": {"qkv_format": "bshd", "micro_batch_size": 1}},
    {"name": "bshd_pairs", "rollout": {"lengths": [*LENGTHS, 120]},
     "args": {"qkv_format": "bshd", "micro_batch_size": 2}},
    {"name": "thd", "rollout": {"lengths": LENGTHS}, "args": {"qkv_format": "thd", "micro_batch_size": 3}},
    {"name": "thd_dynamic", "rollout": {"lengths": [*LENGTHS, 120]},
     "args": {"qkv_format": "thd", "use_dynamic_batch_size": True, "max_tokens_per_gpu": 500}},
]


@pytest.fixture(scope="module", params=["buggy", "fixed"])
def job(request, miles_checkout, miles_deps, shared_run, tmp_path_factory):
    """Every rank's report of one Miles job (all `STEPS`) at the pinned ``buggy`` or ``fixed`` commit."""
    checkout = miles_checkout(request.param)
    out = tmp_path_factory.mktemp(f"miles-{request.param}")
    runs = shared_run(f"miles-{checkout.commit[:9]}", lambda: run_miles_step(
        checkout, miles_deps(), out=out, cp=CP, steps=STEPS))
    for run in runs:
        assert run.returncode == 0, f"rank {run.rank} of Miles {checkout.commit[:9]} failed:\n{run.stderr[-4000:]}"
    return request.param, runs


def positions(padded: int, cp_rank: int) -> list[int]:
    """The sample positions CP rank ``cp_rank`` holds under zigzag CP, in its local order."""
    return [p for start, end in zigzag_chunks(padded, CP, cp_rank) for p in range(start, end)]


def expected_sample(sample: int, total: int, response: int, padded: int, cp_rank: int) -> dict:
    """What rank ``cp_rank`` must hold of a sample laid out with padded length ``padded``."""
    held = positions(padded, cp_rank)
    prompt = total - response
    logits = [p for start, end in response_logit_ranges(total, response, CP, cp_rank, layout="bshd", padded=padded)
              for p in range(start, end)]
    return {"tokens": [token_value(sample, p) if p < total else 0 for p in held],
            "replay": [token_value(sample, p) if p < total - 1 else -1 for p in held],
            "log_probs": [float(token_value(sample, p + 1)) for p in logits],
            "loss_positions": sum(1 for p in held if prompt - 1 <= p < total - 1)}


def test_the_parallel_state_and_signatures_are_those_the_harness_set_and_documents(job):
    _, runs = job
    for run in runs:
        assert run["parallel_state"] == {"cp_size": CP, "cp_rank": run.rank, "tp_size": 1, "dp_size": 1,
                                         "vpp_size": 1}
        assert run["signatures"] == SIGNATURES


def test_31f1ca961_pads_every_bshd_sample_to_the_rollout_max_and_e78cfb3_to_its_own_length(job):
    which, runs = job
    seen = {tuple(run["bshd/rollout"]["max_seq_lens"]) for run in runs}
    if which == "buggy":
        assert seen == {(768, 768, 768)}  # round_up(max(T), 128) copied to every sample
    else:
        assert seen == {(128, 768, 384)}  # round_up(T_i, 128)


def test_every_field_of_a_bshd_micro_batch_is_laid_out_with_the_owners_padded_length(job):
    _, runs = job
    for run in runs:
        padded = run["bshd/rollout"]["max_seq_lens"]
        replay = run["bshd/replay"]["value"]
        for k, total in enumerate(LENGTHS):
            batch = run[f"bshd/batch:{k}"]["value"]
            want = expected_sample(k, total, total // 2, padded[k], run.rank)
            assert batch["max_seq_lens"] == [padded[k]] and batch["shape"] == [1, padded[k] // CP]
            assert batch["tokens"] == [want["tokens"]], (run.rank, k)
            assert batch["rollout_log_probs"] == [want["log_probs"]], (run.rank, k)
            assert batch["loss_mask_sum"] == want["loss_positions"], (run.rank, k)
            assert replay[k] == {"shape": [padded[k] // CP, 2, 2], "rows": want["replay"]}, (run.rank, k)


def test_rollout_global_padding_leaves_cp_rank_1_no_token_of_a_short_sample_and_costs_positions(job):
    which, runs = job
    rank1_sample0 = runs[1]["bshd/batch:0"]["value"]
    positions_per_step = sum(run[f"bshd/batch:{k}"]["value"]["shape"][1] for run in runs for k in range(3))
    if which == "buggy":
        assert set(rank1_sample0["tokens"][0]) == {0} and rank1_sample0["rollout_log_probs"] == [[]]
        assert positions_per_step == 3 * 768  # 2304 positions for 1100 tokens
    else:
        assert 0 not in rank1_sample0["tokens"][0][:14] and len(rank1_sample0["rollout_log_probs"][0]) == 47
        assert positions_per_step == 128 + 768 + 384


def test_a_bshd_micro_batch_mixing_padded_lengths_fails_closed_at_e78cfb3_only(job):
    which, runs = job
    for run in runs:
        outcomes = [run["bshd_pairs/replay"], run["bshd_pairs/batch:0"], run["bshd_pairs/batch:1"]]
        if which == "buggy":  # every P is 768: nothing to disagree about
            assert all("value" in o for o in outcomes)
            assert run["bshd_pairs/batch:0"]["value"]["shape"] == [2, 384]
        else:
            assert [o["error"]["type"] for o in outcomes] == ["AssertionError"] * 3
            assert "bshd microbatch mixes padded lengths [128, 768]" in outcomes[0]["error"]["message"]
            assert outcomes[0]["error"]["where"][-1].endswith("fill_replay_data")
            assert outcomes[1]["error"]["where"][-1].endswith("get_batch")


def test_thd_is_the_same_at_both_commits_a_packed_stream_padded_to_the_tp_unit(job):
    _, runs = job
    for run in runs:
        batch = run["thd/batch:0"]["value"]
        assert run["thd/rollout"]["max_seq_lens"] is None
        # samples padded to a multiple of 2*cp (all are), halves laid end to end, the stream padded to 128
        assert batch["cu_seqlens"] == [0, 100, 800, 1100, 1280] and batch["max_seqlen"] == 700
        stream = [t for k, total in enumerate(LENGTHS) for t in expected_sample(k, total, total // 2, total,
                                                                                 run.rank)["tokens"]]
        assert batch["tokens"] == [stream + [0] * (round_up(len(stream), UNIT) - len(stream))]
        assert run["thd/replay"]["value"][0]["shape"] == [640, 2, 2]


def test_dynamic_micro_batches_partition_the_samples_alike_on_every_cp_rank(job):
    _, runs = job
    schedules = [run["thd_dynamic/schedule"] for run in runs]
    assert schedules[0] == schedules[1]
    indices = schedules[0]["micro_batch_indices"]
    assert schedules[0]["num_microbatches"] == [2] and sorted(i for part in indices for i in part) == [0, 1, 2, 3]
    lengths = [*LENGTHS, 120]
    assert all(sum(lengths[i] for i in part) <= 500 * CP for part in indices)
