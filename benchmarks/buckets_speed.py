"""How fast is the bucket advisor? One million lengths, K = 1..8, the 128-token grid.

Prints, best of ``--repeat`` runs in this process (numpy imported beforehand,
so start-up is not counted):

* the whole advisor (`layoutcheck.advisor.advise.advise`: two simulated
  shuffles, the exact optimum for every K on both, the hand-picked lists,
  the current buckets, warnings and verdict), against the target of one
  second;
* its parts side by side: simulating the micro-batches, the distribution of
  maxima, and the dynamic programme alone (docs/development.md#what-the-runtime-is-built-on measured about
  4 ms for it);
* the same for the length-grouped sampler at batch size 8;
* the whole command, ``layoutcheck buckets FILE`` on a file of one length
  per line, as a fresh process (start-up, reading and parsing included).

    python benchmarks/buckets_speed.py [--samples N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from layoutcheck import geometry
from layoutcheck.advisor.advise import Settings, advise
from layoutcheck.advisor.dp import optimal_buckets
from layoutcheck.advisor.sampler import simulate
from layoutcheck.advisor.score import MaximaDistribution

TARGET_SECONDS = 1.0
MAX_LENGTH = 8192


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    lengths = np.clip(np.rint(rng.lognormal(np.log(1300), 0.8, args.samples)), 16, MAX_LENGTH).astype(np.int64)
    grid = geometry.bucket_grid(MAX_LENGTH)
    print(f"{args.samples:,} log-normal lengths (median 1.3k, capped at {MAX_LENGTH}), K = 1..8, "
          f"{len(grid)} grid lengths of 128; best of {args.repeat}")
    print()
    print(f"{'step':<58} {'seconds':>9} {'x target':>9}")
    for batch_size, sampler in ((1, "random"), (8, "random"), (8, "grouped")):
        settings = Settings(max_length=MAX_LENGTH, batch_size=batch_size, sampler=sampler,
                            current=(1024, 2048, 4096, 8192))
        batches = simulate(lengths, batch_size, sampler)
        dist = MaximaDistribution.of(batches, MAX_LENGTH)
        weights = dist.weights(grid)
        steps: list[tuple[str, Callable[[], object]]] = [
            (f"advise(): everything, batch {batch_size}, {sampler}", lambda: advise(lengths, settings)),
            ("  simulate one shuffle's micro-batches", lambda: simulate(lengths, batch_size, sampler)),
            ("  distribution of the micro-batch maxima", lambda: MaximaDistribution.of(batches, MAX_LENGTH)),
            ("  dynamic programme, K = 1..8", lambda: optimal_buckets(grid, weights, 8)),
        ]
        for name, fn in steps:
            seconds = best_of(args.repeat, fn)
            print(f"{name:<58} {seconds:>9.4f} {seconds / TARGET_SECONDS:>8.2f}x")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "lengths.txt")
        np.savetxt(path, lengths, fmt="%d")
        cmd = [sys.executable, "-m", "layoutcheck", "buckets", path, "--max-length", str(MAX_LENGTH), "-q"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(cmd, check=True, capture_output=True, env=env)  # compile .pyc files untimed
        seconds = best_of(args.repeat, lambda: subprocess.run(cmd, check=True, capture_output=True, env=env))
        print(f"{'layoutcheck buckets FILE (a fresh process, batch 1)':<58} {seconds:>9.4f} "
              f"{seconds / TARGET_SECONDS:>8.2f}x")
    print()
    print(f"target: the whole advisor well under {TARGET_SECONDS:g} s for {args.samples:,} lengths")


if __name__ == "__main__":
    main()
