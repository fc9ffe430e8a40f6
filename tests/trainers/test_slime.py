"""slime's real data path on CPU at 2dffecc08 (routing replay laid out unlike the tokens) and a93386e51 (fixed).

Runs when ``LAYOUTCHECK_SLIME_CHECKOUT`` names checkouts at those commits
(README), skipped otherwise. Two CP ranks of a real gloo group, Megatron's
parallel state from megatron-core, the actor's own methods. The bug (docs/design.md#layout-spaces-and-bug-classes, classes 3 and 8): at 2dffecc08 ``fill_routing_replay`` slices each
sample's ``T - 1`` replay rows with the packed CP rule as they are, and pads
the stream to ``tp * 128`` while ``get_batch`` pads the tokens to
``tp * data_pad_size_multiplier``. So the replay rows a rank records do not
sit at the positions of the tokens they route (a sample of 37 tokens packs to
40 positions, chunks of 10, while its 36 rows pack in chunks of 9), and with
a multiplier of 64 the replay stream can be longer than the token stream.
a93386e51 pads each sample by one row first and uses the multiplier.
"""

from __future__ import annotations

import pytest

from layoutcheck.geometry import packed_sample_length, response_logit_ranges, round_up, zigzag_chunks
from trainers.rollouts import token_value
from trainers.slime_harness import SIGNATURES, run_slime_step

CP = 2
MULTIPLIER = 64
STEPS = [
    {"name": "pair", "rollout": {"lengths": [37, 90]},
     "args": {"data_pad_size_multiplier": MULTIPLIER, "micro_batch_size": 2}},
    {"name": "short", "rollout": {"lengths": [37, 20]},
     "args": {"data_pad_size_multiplier": MULTIPLIER, "micro_batch_size": 2}},
]
LENGTHS = {step["name"]: step["rollout"]["lengths"] for step in STEPS}


@pytest.fixture(scope="module", params=["buggy", "fixed"])
def job(request, slime_checkout, slime_deps, shared_run, tmp_path_factory):
    """Every rank's report of one slime job (all `STEPS`) at the pinned ``buggy`` or ``fixed`` commit."""
    checkout = slime_checkout(request.param)
    out = tmp_path_factory.mktemp(f"slime-{request.param}")
    runs = shared_run(f"slime-{checkout.commit[:9]}", lambda: run_slime_step(
        checkout, slime_deps(), out=out, cp=CP, steps=STEPS))
    for run in runs:
        assert run.returncode == 0, f"rank {run.rank} of slime {checkout.commit[:9]} failed:\n{run.stderr[-4000:]}"
    return request.param, runs


def packed_stream(lengths: list[int], cp_rank: int) -> list[int]:
    """The token stream ``get_batch`` must build on ``cp_rank``: packed zigzag samples, padded to the multiplier."""
    stream = []
    for i, total in enumerate(lengths):
        for start, end in zigzag_chunks(packed_sample_length(total, CP), CP, cp_rank):
            stream += [token_value(i, p) if p < total else 0 for p in range(start, end)]
    return stream + [0] * (round_up(len(stream), MULTIPLIER) - len(stream))


def routed(stream: list[int], lengths: list[int]) -> list[int]:
    """Stream positions whose token has a routing-replay row (every token but each sample's last)."""
    last = {token_value(i, t - 1) for i, t in enumerate(lengths)}
    return [k for k, v in enumerate(stream) if v and v not in last]


def test_the_parallel_state_and_signatures_are_those_the_harness_set_and_documents(job):
    _, runs = job
    for run in runs:
        assert run["parallel_state"] == {"rank": run.rank, "world": CP, "tp_size": 1, "tp_rank": 0,
                                         "cp_size": CP, "cp_rank": run.rank, "dp_size": 1}
        assert run["signatures"] == SIGNATURES


def test_get_batch_packs_the_tokens_and_the_owner_slices_log_probs_alike_at_both_commits(job):
    _, runs = job
    for run in runs:
        for name, lengths in LENGTHS.items():
            batch = run[f"{name}/batch:0"]["value"]
            assert batch["tokens"] == [packed_stream(lengths, run.rank)], (name, run.rank)
            log_probs = run[f"{name}/rollout"]["rollout_log_probs"]
            for i, total in enumerate(lengths):
                ranges = response_logit_ranges(total, total // 2, CP, run.rank, layout="thd")
                assert log_probs[i] == [float(token_value(i, p + 1)) for a, b in ranges for p in range(a, b)]


def test_2dffecc08_records_replay_rows_away_from_their_tokens_and_a93386e51_at_them(job):
    which, runs = job
    aligned = {}
    for run in runs:
        for name, lengths in LENGTHS.items():
            stream = run[f"{name}/batch:0"]["value"]["tokens"][0]
            replay = run[f"{name}/replay"][0]
            assert len(replay["rows"]) == 2  # one replay per MoE layer
            for layer, layer_rows in enumerate(replay["rows"]):
                hits = [k for k in routed(stream, lengths) if k < len(layer_rows) and layer_rows[k] == stream[k]]
                aligned[(name, run.rank, layer)] = (len(hits), len(routed(stream, lengths)))
    if which == "fixed":
        assert all(hits == total for hits, total in aligned.values()), aligned
    else:
        # only the first 9 positions of sample 0 on rank 0 agree: its rows are cut in chunks of 9, its tokens of 10
        assert {key: hits for key, (hits, _) in aligned.items()} == {
            (name, rank, layer): 9 if rank == 0 else 0 for name in LENGTHS for rank in range(CP) for layer in (0, 1)}


def test_2dffecc08_pads_the_replay_stream_to_tp_128_beyond_the_token_stream(job):
    which, runs = job
    for run in runs:
        tokens = run["short/batch:0"]["value"]["shape"][1]
        replay = run["short/replay"][0]["shape"][0]
        assert tokens == 64  # 30 local positions, padded to the multiplier 64
        assert replay == (128 if which == "buggy" else 64)
        assert run["pair/replay"][0]["shape"][0] == run["pair/batch:0"]["value"]["shape"][1] == 128
