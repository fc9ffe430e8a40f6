"""Cost of one cross-rank exchange (X1), against the bare transports, side by side in one run.

Usage::

    python benchmarks/cross_rank_exchange.py [--ranks N] [--iterations N]

Spawns N ranks (default 2) in one gloo process group on 127.0.0.1 and times,
per call, on rank 0 (every rank runs the same loops, with a barrier between
rows):

* ``CrossRankChecker.check_batch`` on agreeing metadata (one round: the
  progress key in the store plus one all-gather of the header);
* the same check deferred (``defer=True``, as the hooks make it): queued,
  exchanged at ``end_step`` (per call: the queueing alone);
* a step of 24 deferred checks and its ``end_step`` (one all-gather of two
  int64 values), per step;
* the same with a differing sample order on one rank (two rounds);
* a bare gloo ``all_gather`` of the header's 10 int64 values (the floor);
* a bare ``store.set`` (the progress key alone);
* ``all_gather_object`` of the same metadata as a dict (pickling; what the
  check does not do);
* a store-only exchange (``set`` + ``wait`` + ``multi_get`` of every rank's
  key), the transport the check could use instead.

Ratios are against the bare all-gather.

With ``--pipeline`` it times, instead, one training step of the reference
pipeline (``fixtures/minitrainer``: producer, two replay fillers, the
log-prob and the training pass; 6 micro-batches, so 24 hooked calls that
make an X1 check) on every rank, with layoutcheck activated from a
configuration in record mode, cp = the number of ranks, in rounds that
alternate three states in one process per rank:

* ``X1 off``: the same hooks with ``cross-rank = false``;
* ``X1 per step``: the hooks as they are (each rank queues its checks; the
  next step's producer call exchanges them: one all-gather a step);
* ``X1 per call``: the same checker switched to an exchange per check (what
  the hooks did before issue 29).

Each row gives the median step time on rank 0, what X1 adds to a step, and
that divided by the step's 24 X1-making hooked calls, with the side group's
all-gathers per step. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, iterations: int, queue: multiprocessing.Queue) -> None:
    sys.path.insert(0, str(ROOT))
    import torch
    import torch.distributed as dist

    from layoutcheck.runtime.crossrank.distributed import CrossRankChecker

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    group = dist.new_group(backend="gloo")
    store = dist.distributed_c10d._get_default_store()
    agree = CrossRankChecker(cp_size=world, mode=None)
    differ = CrossRankChecker(cp_size=world, mode=None)
    deferred = CrossRankChecker(cp_size=world, mode=None, defer=True, step_limit=10**9)
    stepped = CrossRankChecker(cp_size=world, mode=None, defer=True, step_limit=10**9)

    def step_of_24(i: int) -> None:  # what the hooks do: 24 checks queued, one exchange at the step's end
        for j in range(24):
            stepped.check_batch(24 * i + j, padded=2048, samples=samples, lengths=[1900, 1800, 1700, 1600],
                                scheme="zigzag", qkv_format="bshd")
        stepped.end_step()

    header = torch.zeros(10, dtype=torch.int64)
    out = [torch.empty_like(header) for _ in range(world)]
    samples = [0, 1, 2, 3]
    order = samples[::-1] if rank == 1 else samples
    rows = {
        "CrossRankChecker.check_batch, agreeing (1 round)": lambda i: agree.check_batch(
            i, padded=2048, samples=samples, lengths=[1900, 1800, 1700, 1600], scheme="zigzag", qkv_format="bshd"),
        "CrossRankChecker.check_batch, differing order (2 rounds)": lambda i: differ.check_batch(
            i, padded=2048, samples=order, lengths=[1900, 1800, 1700, 1600], scheme="zigzag", qkv_format="bshd"),
        "deferred check_batch (queued; per call)": lambda i: deferred.check_batch(
            i, padded=2048, samples=samples, lengths=[1900, 1800, 1700, 1600], scheme="zigzag", qkv_format="bshd"),
        "a step of 24 deferred checks + end_step, per step": step_of_24,
        "gloo all_gather of 10 int64 (floor)": lambda i: dist.all_gather(out, header, group=group),
        "store.set of the progress key": lambda i: store.set(f"bench/{rank}", str(i)),
        "all_gather_object of a dict": lambda i: dist.all_gather_object(
            [None] * world, {"k": i, "P": 2048, "samples": samples, "scheme": "zigzag"}, group=group),
        "store-only exchange (set + wait + multi_get)": lambda i: (
            store.set(f"x/{i}/{rank}", b"\0" * 80), store.wait([f"x/{i}/{r}" for r in range(world)]),
            store.multi_get([f"x/{i}/{r}" for r in range(world)])),
    }
    results = {}
    for name, fn in rows.items():
        fn(0)  # warm-up (creates the checkers' side groups)
        dist.barrier(group=group)
        start = time.perf_counter()
        for i in range(1, iterations + 1):
            fn(i)
        results[name] = (time.perf_counter() - start) / iterations
    if rank == 0:
        queue.put(results)
    dist.barrier(group=group)


PIPELINE_CONFIG = """
[runtime]
mode = "record"
summary = false
parallel-state = "minitrainer.parallel:get_parallel_state"
cross-rank = {cross_rank}
[runtime.hooks]
producer = ["minitrainer.data:get_rollout_data"]
batch-builder = ["minitrainer.data:get_batch"]
replay-filler = ["minitrainer.replay_data:fill_replay_data"]
offset-helper = ["minitrainer.cp_utils:get_logits_and_tokens_offset_with_cp"]
"""

LENGTHS = [300, 130, 700, 520, 90, 260]


def _pipeline_rank(rank: int, world: int, port: int, steps: int, rounds: int, folder: str,
                   queue: multiprocessing.Queue) -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "fixtures")]
    import statistics

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    from minitrainer.actor import TrainActor
    from minitrainer.args import make_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import make_rollout_ref

    from layoutcheck.runtime import activation

    configs = {}
    for name, on in (("off", "false"), ("on", "true")):
        configs[name] = Path(folder, f"{name}.toml")
        if rank == 0:
            configs[name].write_text(PIPELINE_CONFIG.format(cross_rank=on))
    dist.barrier()
    refs = [make_rollout_ref(LENGTHS, seed=i) for i in range(4)]
    times: dict[str, list[float]] = {"X1 off": [], "X1 per step": [], "X1 per call": []}
    gathers: dict[str, list[int]] = {name: [] for name in times}
    with parallel_state(cp_size=world, cp_rank=rank):
        for r in range(rounds + 1):  # round 0 warms up
            for name in times:
                activation.deactivate()
                session = activation.activate(config=configs["off" if name == "X1 off" else "on"])
                actor = TrainActor(make_args())
                actor.train(0, refs[0])  # the checker and its side group are made here, untimed
                xr = session.checker._agreement()
                if xr is not None:
                    xr.end_step()
                    xr.defer = name == "X1 per step"
                before = xr.collectives if xr is not None else 0
                dist.barrier()
                for i in range(steps):
                    start = time.perf_counter()
                    actor.train(i + 1, refs[(i + 1) % len(refs)])
                    if r:
                        times[name].append(time.perf_counter() - start)
                if xr is not None:
                    xr.end_step()
                    if r:
                        gathers[name].append(xr.collectives - before)
                # The side group stays: torch would give a new group over the same ranks the name (and the stale
                # addresses) of one destroyed before it.
    activation.deactivate()
    if rank == 0:
        queue.put({name: (statistics.median(t), sum(gathers[name]) / (rounds * steps)) for name, t in times.items()})
    dist.barrier()


def pipeline(opts: argparse.Namespace) -> None:
    import tempfile

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    port = _port()
    with tempfile.TemporaryDirectory() as folder:
        procs = [ctx.Process(target=_pipeline_rank, args=(r, opts.ranks, port, opts.steps, opts.rounds, folder, queue))
                 for r in range(opts.ranks)]
        for p in procs:
            p.start()
        results = queue.get(timeout=900)
        for p in procs:
            p.join()
    off = results["X1 off"][0]
    print(f"{opts.ranks} ranks (cp={opts.ranks}), gloo on 127.0.0.1, reference pipeline step (24 hooked calls that "
          f"make an X1 check), {opts.rounds} rounds x {opts.steps} steps per state, median on rank 0")
    print(f"{'state':<14} {'per step':>10} {'X1 adds a step':>15} {'per X1 call':>12} {'all-gathers a step':>19}")
    for name, (seconds, gathered) in results.items():
        extra = seconds - off
        print(f"{name:<14} {seconds * 1e3:>8.2f}ms {extra * 1e3:>13.2f}ms {extra / 24 * 1e6:>10.1f}us {gathered:>19.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--pipeline", action="store_true", help="time reference-pipeline steps with X1 off, per step, per call")
    parser.add_argument("--steps", type=int, default=5, help="--pipeline: steps per state and round")
    parser.add_argument("--rounds", type=int, default=4, help="--pipeline: rounds alternating the states")
    opts = parser.parse_args()
    if opts.pipeline:
        pipeline(opts)
        return
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    port = _port()
    procs = [ctx.Process(target=_rank, args=(r, opts.ranks, port, opts.iterations, queue)) for r in range(opts.ranks)]
    for p in procs:
        p.start()
    results = queue.get(timeout=600)
    for p in procs:
        p.join()
    floor = results["gloo all_gather of 10 int64 (floor)"]
    print(f"{opts.ranks} ranks, gloo on 127.0.0.1, {opts.iterations} calls per row, time per call on rank 0")
    print(f"{'row':<58} {'per call':>10} {'vs floor':>9}")
    for name, seconds in results.items():
        print(f"{name:<58} {seconds * 1e6:>8.1f}us {seconds / floor:>8.2f}x")


if __name__ == "__main__":
    main()
