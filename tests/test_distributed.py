"""Cross-rank agreement (X1) between real processes: gloo on loopback, the reference pipeline per rank.

Four jobs, each one process group for all its scenarios (tests/distributed_worker.py):
2 ranks (agree, several steps, a step that differs in raise mode, bad
specifications, differing metadata, a bug flag on one rank, a rank that
stops calling), 4 ranks (cp=2 x dp=2 agreeing, cp=4 with a bug flag on
one rank, a rank killed midway), 4 ranks where one is killed and another
reaches the exchange late, and 2 ranks where one is killed and the
transport's words for it are not read. The pipeline scenarios activate layoutcheck
from a configuration in every rank, as a debug run does: the exchanges are
the ones the hooks make, one per step (the hooks queue their checks and the
next step's producer call, or the end of the run, exchanges them). Timeouts are 2 s, so a
hang shows as a failure here, never as a stuck suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from distributed_worker import KILL_TIMEOUT, TIMEOUT, run_job

from layoutcheck.runtime.crossrank.distributed import CrossRankChecker, cp_group_ranks, distributed_ready
from layoutcheck.errors import LayoutSpecError


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_distributed")


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    return run_job(2, ["agree", "steps", "steps_differ", "spec", "metadata", "bug", "boundary", "stop", "kill_record"],
                   tmp_path_factory.mktemp("two"))


@pytest.fixture(scope="module")
def unworded(tmp_path_factory):
    return run_job(2, ["kill_unworded"], tmp_path_factory.mktemp("unworded"))


@pytest.fixture(scope="module")
def late(tmp_path_factory):
    return run_job(4, ["kill_late"], tmp_path_factory.mktemp("late"))


@pytest.fixture(scope="module")
def at_start(tmp_path_factory):
    return run_job(2, ["kill_at_start"], tmp_path_factory.mktemp("at_start"))


@pytest.fixture(scope="module")
def four(tmp_path_factory):
    return run_job(4, ["agree_dp", "bug", "kill"], tmp_path_factory.mktemp("four"))


def problems(result):
    return [(v["field"], v["problem"]) for v in result["violations"]]


def test_every_cp_rank_of_a_boundary_call_sees_the_same_schedule(two):
    # X1 generalised: each call of a boundary contract exchanges its sample count, true lengths and padded total;
    # the run's only boundary opens each step, so each call is exchanged at the next one (the last at the end)
    for rank, result in two["boundary"].items():
        assert result["before_end"] == 3 and result["exchanges"] == 4 and result["notes"] == [], result
        x1 = [v for v in result["violations"] if v["invariant"] == "X1"]
        assert len(x1) == 1 and x1[0]["where"] == "worker:pack" and x1[0]["micro_batch"] == 3, x1
        assert x1[0]["problem"] == "cp rank 1 has total lengths [13, 5, 9] for micro-batch 3, cp rank 0 has [5, 13, 9]"


def test_the_exit_closes_the_side_group_even_after_the_trainer_destroyed_every_group(tmp_path):
    # the session's exit handler closes layoutcheck's gloo group; a trainer's destroy_process_group() came first
    for rank, result in run_job(2, ["release"], tmp_path)["release"].items():
        assert "error" not in result, result
        assert result["exchanges"] == 1 and result["initialized"] is False, result
        # the exit handler exchanges the last step while the group is up: its violations are recorded, not raised
        problem = "cp rank 1 has total lengths [5, 10] for micro-batch 1, cp rank 0 has [5, 9]"
        assert result["at_exit"] == result["recorded"] == [problem], result
        # the check queued after the last step boundary has no group left to go on: said, not lost silently
        (note,) = result["notes"]
        assert "the last step's 1 cross-rank check was not exchanged: the process group was destroyed" in note


# ---------------------------------------------------------------- 2 ranks


def test_two_ranks_running_the_same_pipeline_agree_on_every_micro_batch(two):
    # the hooks queue a check per micro-batch in the replay fillers (2 keys) and per get_batch call (the
    # log-prob and the training pass): 6 micro-batches x 4 checks, exchanged at the step's end in one all-gather
    for rank, result in two["agree"].items():
        assert "error" not in result, result
        assert result["violations"] == [] and result["notes"] == []
        assert result["batches"] == 12 and result["pending"] == 24, rank
        assert result["exchanges"] == 1 and result["collectives"] == 1, result


def test_a_step_costs_one_collective_on_the_side_group_whatever_its_number_of_checks(two):
    # three steps of 24 checks each: torch.distributed.all_gather is called three times on the side group
    for rank, result in two["steps"].items():
        assert "error" not in result and result["violations"] == [] and result["notes"] == [], result
        assert result["checked"]["rollouts"] == 3
        assert result["calls"] == {"replay": 36, "batch": 36}, result["calls"]
        assert result["exchanges"] == 3 and result["collectives"] == 3, result


def test_a_step_that_differs_stops_a_raise_run_at_the_next_step_naming_micro_batch_ranks_and_values(two):
    # rank 1's first rollout is 8 tokens longer per sample: locally right, across ranks not; the exchange at
    # the second step's producer call raises on both ranks, before that step's rollout starts
    for rank, result in two["steps_differ"].items():
        error = result["error"]
        assert error["type"] == "LayoutError", result
        x1 = [v for v in result["violations"] if v["invariant"] == "X1"]
        assert x1 and all(v["invariant"] == "X1" for v in result["violations"])
        # the replay fillers' P agree (8 tokens more stay under the same padded length); the lengths do not
        first = x1[0]
        assert (first["where"], first["field"], first["micro_batch"]) == ("get_batch", "total_lengths", 0), first
        assert first["problem"] == "cp rank 1 has total lengths [308] for micro-batch 0, cp rank 0 has [300]", first
        assert [v["micro_batch"] for v in x1] == [0, 1, 2, 3, 4, 5], x1  # the log-prob pass; the training pass's
        # second reading of the same micro-batches is the same violation, reported once per rollout
        assert result["rollouts"] == 1  # the second rollout never started
        # a step that differs pays the round with the headers and the one with the lists, once each
        assert result["exchanges"] == 1 and result["collectives"] == 3, result


def test_a_rank_with_the_bug_flag_on_is_named_on_both_ranks(two):
    # rank 1's producer pads rollout-globally: micro-batch 0 (T=300) gets P=768, not 384
    batch = "cp rank 1 has P=768 for micro-batch 0, cp rank 0 has P=384"
    replay = "cp rank 1's replay filler has P=768 for micro-batch 0, cp rank 0 has P=384"
    for rank, result in two["bug"].items():
        assert "error" not in result, result
        x1 = [(v["where"], v["field"], v["problem"]) for v in result["violations"] if v["micro_batch"] == 0]
        assert ("get_batch", "max_seq_lens", batch) in x1, x1
        assert ("fill_replay_data", "rollout_routed_experts", replay) in x1, x1
        assert all(v["invariant"] == "X1" for v in result["violations"])
        assert result["local"] == (["O3"] if rank == 1 else [])  # the buggy rank also sees its own O3


def test_differing_order_and_replay_padding_are_recorded_alike_on_every_rank_checking_every_second_call(two):
    a, b = two["metadata"][0], two["metadata"][1]
    assert a["violations"] == b["violations"]
    assert problems(a) == [
        ("samples", "cp rank 1 has sample order [5, 4] for micro-batch 2, cp rank 0 has [4, 5]"),
        ("samples", "cp rank 1 has sample order [5, 4] for micro-batch 2, cp rank 0 has [4, 5]"),
        ("rollout_routed_experts", "cp rank 1's replay filler has P=640 for micro-batch 4, cp rank 0 has P=512"),
    ]
    assert [v["where"] for v in a["violations"]] == ["get_batch", "fill_replay_data", "fill_replay_data"]
    assert a["exchanges"] == 6  # 6 batch + 6 replay calls, every 2nd exchanged


def test_a_rank_that_stops_calling_times_out_on_both_ranks_with_the_missing_rank_named(two):
    waiting, late = two["stop"][0], two["stop"][1]
    assert waiting["error"]["type"] == late["error"]["type"] == "CrossRankTimeout"
    assert waiting["error"]["missing"] == [1]
    assert "cp rank 1 is missing (cp rank 1 (global rank 1): its last was exchange 2 (get_batch, micro-batch 1))" \
        in waiting["error"]["message"]
    assert TIMEOUT <= waiting["seconds"] < TIMEOUT + 3
    # rank 1 comes back after rank 0 gave up: it is told that it is the late one
    assert late["error"]["missing"] == []
    assert "cp rank 0 gave up on it after its timeout, before this rank arrived: this rank is late" \
        in late["error"]["message"]


def test_bad_specifications_fail_locally_and_a_group_of_one_exchanges_nothing(two):
    result = two["spec"][0]
    assert result["errors"] == [
        "a CrossRankChecker needs the CP group: `ranks`, `parallel_state` or `cp_size`",
        "`ranks` [1] must be distinct global ranks below the world size 2 and include this process's rank 0",
        "tp_size x cp_size = 1 x 3 does not divide the world size 2",
        "the parallel state says cp rank 1, but global rank 0 is cp rank 0 of [0, 1] in Megatron's order "
        "(tp=1, cp=2); pass the CP group's global `ranks` explicitly",
        "`timeout` must be a positive number of seconds, got 0",
        "`padded` must be an integer >= 0, got Tensor(dtype=torch.int64, shape=(), device=cpu) "
        "(pass a Python int: reading a tensor's value would synchronise the GPU)",
    ]
    assert result["alone"] == [0] and result["alone_exchanges"] == 0 and result["violations"] == []


# ---------------------------------------------------------------- 4 ranks


def test_four_ranks_compare_within_their_cp_groups_only(four):
    for rank, result in four["agree_dp"].items():
        assert "error" not in result, result
        assert result["violations"] == []
        assert result["ranks"] == [[0, 1], [0, 1], [2, 3], [2, 3]][rank]
        assert result["batches"] == 8 and result["exchanges"] == 1  # 4 micro-batches per DP rank, one step
        # from a parallel state's process groups, CP groups [0, 2] and [1, 3]
        assert result["state_ranks"] == [[0, 2], [1, 3], [0, 2], [1, 3]][rank]
        assert result["state_exchanges"] == 1


def test_one_rank_of_four_with_the_bug_flag_on_is_named_against_the_majority_on_all_four(four):
    expected = "cp rank 3 has P=768 for micro-batch 0, cp ranks 0, 1, 2 have P=384"
    for rank, result in four["bug"].items():
        problems = [(v["field"], v["problem"]) for v in result["violations"] if v["where"] == "get_batch"]
        assert ("max_seq_lens", expected) in problems, problems
        assert result["local"] == (["O3"] if rank == 3 else [])


def test_a_rank_killed_midway_is_named_on_every_live_rank_as_soon_as_the_transport_loses_it(four):
    assert four["kill"][3] is None  # it died before writing anything
    for rank in (0, 1, 2):
        result = four["kill"][rank]
        error = result["error"]
        assert error["type"] == "CrossRankTimeout" and error["missing"] == [3], error
        assert result["gone"] == [3], (rank, result)  # same host: its pid is gone, so nobody waits for it
        # the survivors finish the step (their checks queued) and name it at the next step's exchange
        assert "did not complete: the transport lost a connection: cp rank 3 is gone (cp rank 3 (global rank 3): " \
               "its process has exited; it never reached an exchange" in error["message"], error["message"]
        # the report comes long before the 20 s timeout (the bound is loose: a loaded machine is slow)
        assert result["seconds"] < KILL_TIMEOUT / 2, result["seconds"]


def test_a_killed_rank_is_named_gone_at_once_whatever_words_the_transport_uses(unworded):
    # Ranks that gloo does not connect to the dead one fail otherwise (a peer closing its group, a timeout): its
    # exited process is the evidence, so they name it gone and do not wait out the timeout either.
    assert unworded["kill_unworded"][1] is None
    result = unworded["kill_unworded"][0]
    assert result["gone"] == [1], result
    assert "cp rank 1 is gone (cp rank 1 (global rank 1): its process has exited" in result["error"]["message"], result
    assert result["seconds"] < KILL_TIMEOUT / 2, result["seconds"]


def test_a_rank_gone_before_its_first_check_is_said_once_and_the_local_checks_go_on(at_start):
    result = at_start["kill_at_start"][0]
    assert "error" not in result, result
    failures = [n for n in result["notes"] if "could not start: its side group did not form" in n]
    # once, not once per hooked call (each retry waited out the timeout again: minutes over a run)
    assert len(failures) == 1, result["notes"]
    assert "global ranks [0, 1]" in failures[0] and "fix:" in failures[0]
    assert result["groups_tried"] == 1
    assert result["batches"] == 24  # every micro-batch of both steps ran, checked locally
    assert at_start["kill_at_start"][1] is None  # it died before writing anything


def test_a_rank_that_reaches_the_exchange_after_the_others_closed_it_fails_at_once(late):
    # The survivors that saw the dead rank close their side group; a survivor arriving later must see those
    # connections closed. It waited out the whole timeout while the failed collective's frames (kept by the
    # error's traceback) still held the group open (a CI run failed so).
    assert late["kill_late"][3] is None  # rank 1's neighbours in gloo's ring are ranks 0 and 2, both alive
    for rank in (0, 1, 2):
        result = late["kill_late"][rank]
        assert result["error"]["missing"] == [3] and result["gone"] == [3], (rank, result)
    assert late["kill_late"][1]["seconds"] < KILL_TIMEOUT / 2, late["kill_late"][1]


def test_in_record_mode_a_killed_rank_is_noted_and_the_step_goes_on(two):
    assert two["kill_record"][1] is None  # it died before writing anything
    result = two["kill_record"][0]
    assert "error" not in result, result
    assert result["violations"] == [] and result["batches"] == 24  # every get_batch of both steps ran
    assert result["checked"]["micro-batches"] == 12  # and was still checked locally
    (note,) = result["notes"]
    # the first step's exchange, at the second step's producer call, names the last check it held
    assert note.startswith("layoutcheck could not check `cross-rank agreement (X1)`: layoutcheck: the cross-rank "
                           "check (X1) of `get_batch`, micro-batch 5 (exchange 1)"), note
    assert "cp rank 1 is gone" in note and "the cross-rank checks stop here" in note
    assert result["seconds"] < KILL_TIMEOUT / 2, result["seconds"]


# ---------------------------------------------------------------- without a process group


def test_megatron_rank_order_gives_the_cp_groups():
    assert cp_group_ranks(5, 8, cp_size=2) == (4, 5)
    assert cp_group_ranks(5, 8, cp_size=2, tp_size=2) == (5, 7)  # tp fastest: g = tp_r + tp * (cp_r + cp * rest)
    assert cp_group_ranks(6, 16, cp_size=4, tp_size=2) == (0, 2, 4, 6)
    with pytest.raises(LayoutSpecError, match="does not divide the world size 6"):
        cp_group_ranks(0, 6, cp_size=4)


def test_without_an_initialised_process_group_a_checker_is_a_spec_error():
    assert not distributed_ready()
    with pytest.raises(LayoutSpecError, match="torch.distributed is not initialised"):
        CrossRankChecker(cp_size=2)


def test_distributed_ready_is_torch_distributed_is_initialized():
    # read from where `is_initialized` reads it (the default group), before, during and after a group of one
    code = textwrap.dedent("""
        import socket
        import torch.distributed as dist
        from layoutcheck.runtime.crossrank.distributed import distributed_ready
        seen = [(distributed_ready(), dist.is_initialized())]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        seen.append((distributed_ready(), dist.is_initialized()))
        dist.destroy_process_group()
        seen.append((distributed_ready(), dist.is_initialized()))
        print(seen)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[(False, False), (True, True), (False, False)]"
