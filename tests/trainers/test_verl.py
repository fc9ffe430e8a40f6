"""verl's real Megatron data path on CPU, at 0.7.0 (short-sample bug) and 0.9.1 (fixed), with cp=2, tp=2.

These are facts about verl, asserted to prove the harness runs the real code
as Megatron would: both CP ranks of a real gloo group, Megatron's parallel
state set by megatron-core itself, the TP size declared with its setter.
The bug (docs/design.md#layout-spaces-and-bug-classes, class 3): 0.7.0's ``preprocess_packed_seqs``
cuts the T-long sample at P-space offsets. With ``A = tp*cp*2 = 8`` a
sample of ``T <= 3`` pads to ``P = 8`` (chunk ``c = 2``); rank 1's first
chunk ``d[2:4]`` is empty for ``T = 2`` (a shape error) and one token for
``T = 3`` (broadcast over both slots of the chunk: a pad position holds a
real token, and the packed loss mask counts it). Expected layouts come from
layoutcheck's geometry model, independently of verl.
"""

from __future__ import annotations

from itertools import accumulate

import pytest

from layoutcheck.geometry import round_up, zigzag_chunks
from trainers.pins import VERL, VERL_BUGGY, VERL_FIXED
from trainers.verl_harness import SIGNATURES, run_verl
from trainers.rollouts import token_value

CP, TP = 2, 2
UNIT = TP * CP * 2
"""verl's alignment unit under CP: every sample pads to a multiple of tp*cp*2."""

PACKING = [
    {"name": "short_raises", "lengths": [2, 9]},
    {"name": "short_broadcast", "lengths": [3, 9]},
    {"name": "mixed_left_padded", "lengths": [5, 9, 16], "left_pad": True},
]
MICROBATCHING = [
    {"name": "over_budget", "lengths": [6, 6, 6], "max_token_len": 10},
    {"name": "fits", "lengths": [5, 7, 6, 4], "max_token_len": 12},
]
CASES = {case["name"]: case for case in PACKING}


@pytest.fixture(scope="module", params=sorted(VERL))
def job(request, verl_folder, shared_run, tmp_path_factory):
    """Every rank's report of one verl job over all cases (run once per version and test run)."""
    version = request.param
    out = tmp_path_factory.mktemp(f"verl-{version}")
    runs = shared_run(f"verl-{version}", lambda: run_verl(
        verl_folder(version), "trainers.verl_scenarios", out=out, cp=CP, tp=TP,
        parameters={"packing": PACKING, "microbatching": MICROBATCHING}))
    for run in runs:
        assert run.returncode == 0, f"rank {run.rank} of verl {version} failed:\n{run.stderr[-4000:]}"
    return version, runs


def expected_local(lengths: list[int], cp_rank: int) -> list[int]:
    """Rank ``cp_rank``'s packed stream: each zero-padded sample's zigzag chunks, samples one after the other."""
    stream = []
    for i, length in enumerate(lengths):
        padded = [token_value(i, j) for j in range(length)] + [0] * (round_up(length, UNIT) - length)
        for start, end in zigzag_chunks(len(padded), CP, cp_rank):
            stream += padded[start:end]
    return stream


def segments(stream: list[int], lengths: list[int]) -> list[list[int]]:
    """The stream cut into each sample's local part (``P_i / cp`` positions)."""
    bounds = [0, *accumulate(round_up(t, UNIT) // CP for t in lengths)]
    return [stream[a:b] for a, b in zip(bounds, bounds[1:])]


def original(case: dict) -> list[list[int]]:
    """The case's ``[B, S]`` input ids, as the round trip must give them back."""
    width = max(case["lengths"])
    rows = []
    for i, length in enumerate(case["lengths"]):
        tokens = [token_value(i, j) for j in range(length)]
        pad = [0] * (width - length)
        rows.append(pad + tokens if case.get("left_pad") else tokens + pad)
    return rows


def test_megatron_answers_the_parallel_state_the_harness_set(job):
    version, runs = job
    for run in runs:
        assert run["verl_version"] == version
        assert run["parallel_state"] == {"rank": run.rank, "world": CP, "tp_size": TP, "tp_rank": 0,
                                         "cp_size": CP, "cp_rank": run.rank, "dp_size": 1}


def test_the_documented_signatures_are_those_of_the_installed_code(job):
    version, runs = job
    assert runs[0]["signatures"] == SIGNATURES[version]


def test_pack_parameters_are_the_global_padded_cumulative_lengths(job):
    _, runs = job
    for name, case in CASES.items():
        padded = [round_up(t, UNIT) for t in case["lengths"]]
        for run in runs:
            pack = run[f"pack:{name}"]
            if "error" in pack:
                continue
            pack = pack["value"]
            cumulative = [0, *accumulate(padded)]
            assert pack["cu_seqlens_q_padded"] == pack["cu_seqlens_kv_padded"] == cumulative, name
            assert pack["cu_seqlens_q"] == cumulative, name  # the padded cumsum, not sum(T)
            assert pack["max_seqlen_q"] == max(padded) and pack["qkv_format"] == "thd"
            assert pack["shape"] == [1, sum(padded) // CP], name


def test_0_7_0_raises_on_the_rank_whose_first_chunk_starts_past_a_short_sample(job):
    version, runs = job
    if version != VERL_BUGGY:
        assert all("value" in run["pack:short_raises"] for run in runs)
        return
    rank0, rank1 = (run["pack:short_raises"] for run in runs)
    assert segments(rank0["value"]["packed"], [2, 9]) == segments(expected_local([2, 9], 0), [2, 9])
    # T=2, P=8, c=2: rank 1's first chunk d[2:4] is empty, its slot holds 2 positions
    assert rank1["error"]["type"] == "RuntimeError"
    assert "must match the existing size (0)" in rank1["error"]["message"]
    assert rank1["error"]["where"][-1].endswith("preprocess_packed_seqs")
    assert all(run["unpack:short_raises"] == {"skipped": "a rank could not pack"} for run in runs)


def test_0_7_0_copies_the_last_token_of_a_short_sample_into_padding_in_silence(job):
    version, runs = job
    lengths = CASES["short_broadcast"]["lengths"]
    packs = [run["pack:short_broadcast"]["value"] for run in runs]  # no rank raises, at either version
    seen = [segments(p["packed"], lengths)[0] for p in packs]
    mask_counted = sum(sum(segments(p["packed_mask"], lengths)[0]) for p in packs)
    if version == VERL_BUGGY:
        # T=3: rank 1's first chunk d[2:4] is one token, broadcast over the chunk's 2 slots
        assert seen == [[token_value(0, 0), token_value(0, 1), 0, 0], [token_value(0, 2), token_value(0, 2), 0, 0]]
        assert mask_counted == 4  # a loss mask packed alike counts the pad position: 4 positions for 3 tokens
    else:
        assert seen == [segments(expected_local(lengths, r), lengths)[0] for r in range(CP)]
        assert mask_counted == 3
    # the round trip reads back only T positions a sample, so it hides the copy
    assert all(run["unpack:short_broadcast"]["value"] == original(CASES["short_broadcast"]) for run in runs)


def test_0_9_1_packs_every_sample_as_the_zigzag_of_its_padded_tokens_and_unpacks_it(job):
    version, runs = job
    for name, case in CASES.items():
        for run in runs:
            pack = run[f"pack:{name}"]
            if version == VERL_BUGGY and "error" in pack:
                continue
            correct = pack["value"]["packed"] == expected_local(case["lengths"], run.rank)
            assert correct or (version == VERL_BUGGY and name == "short_broadcast"), (version, name, run.rank)
            if "value" in run[f"unpack:{name}"]:
                assert run[f"unpack:{name}"]["value"] == original(case), (version, name)
    if version == VERL_FIXED:
        assert all("value" in run[f"unpack:{name}"] for run in runs for name in CASES)


def test_micro_batches_partition_the_samples_identically_on_every_cp_rank(job):
    _, runs = job
    for case in MICROBATCHING:
        schedules = [run[f"microbatch:{case['name']}"]["value"] for run in runs]
        assert schedules[0] == schedules[1], case["name"]  # both CP ranks must build the same schedule
        schedule = schedules[0]
        flat = [i for part in schedule["indices"] for i in part]
        assert sorted(flat) == list(range(len(case["lengths"])))
        assert [flat[i] for i in schedule["reverse"]] == list(range(len(flat)))  # get_reverse_idx inverts it
        rows = original({"lengths": case["lengths"]})
        assert schedule["input_ids"] == [[rows[i][:max(case["lengths"])] for i in part] for part in schedule["indices"]]
        assert schedule["tokens"] == [sum(case["lengths"][i] for i in part) for part in schedule["indices"]]


def test_0_7_0_keeps_a_micro_batch_over_the_token_budget_and_0_9_1_splits_further(job):
    version, runs = job
    schedule = runs[0]["microbatch:over_budget"]["value"]
    if version == VERL_BUGGY:
        # ceil(18 / 10) = 2 micro-batches for three samples of 6: one holds 12 tokens, over max_token_len=10
        assert sorted(schedule["tokens"]) == [6, 12]
    else:
        assert schedule["tokens"] == [6, 6, 6]
    assert all(t <= 12 for t in runs[0]["microbatch:fits"]["value"]["tokens"])

