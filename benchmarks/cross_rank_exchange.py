"""Cost of one cross-rank exchange (X1), against the bare transports, side by side in one run.

Usage::

    python benchmarks/cross_rank_exchange.py [--ranks N] [--iterations N]

Spawns N ranks (default 2) in one gloo process group on 127.0.0.1 and times,
per call, on rank 0 (every rank runs the same loops, with a barrier between
rows):

* ``CrossRankChecker.check_batch`` on agreeing metadata (one round: the
  progress key in the store plus one all-gather of the header);
* the same with a differing sample order on one rank (two rounds);
* a bare gloo ``all_gather`` of the header's 10 int64 values (the floor);
* a bare ``store.set`` (the progress key alone);
* ``all_gather_object`` of the same metadata as a dict (pickling; what the
  check does not do);
* a store-only exchange (``set`` + ``wait`` + ``multi_get`` of every rank's
  key), the transport the check could use instead.

Ratios are against the bare all-gather. Nothing here is a test.
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
    header = torch.zeros(10, dtype=torch.int64)
    out = [torch.empty_like(header) for _ in range(world)]
    samples = [0, 1, 2, 3]
    order = samples[::-1] if rank == 1 else samples
    rows = {
        "CrossRankChecker.check_batch, agreeing (1 round)": lambda i: agree.check_batch(
            i, padded=2048, samples=samples, lengths=[1900, 1800, 1700, 1600], scheme="zigzag", qkv_format="bshd"),
        "CrossRankChecker.check_batch, differing order (2 rounds)": lambda i: differ.check_batch(
            i, padded=2048, samples=order, lengths=[1900, 1800, 1700, 1600], scheme="zigzag", qkv_format="bshd"),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=1000)
    opts = parser.parse_args()
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
