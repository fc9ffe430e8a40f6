"""The optimum against hand-picked buckets on three synthetic corpora (the README's comparison table).

Corpora, all at max length 8192 on the 128-token grid, fixed seeds:

* ``lognormal``: log-normal with median 1.3k tokens (sigma 0.8), capped at 8192;
* ``uniform``: uniform over 1024..8192;
* ``bimodal``: 60% short (log-normal, median 600, sigma 0.35) and 40% long
  (normal, mean 5000, sd 800), within 16..8192.

For each corpus, the exact optimum with K buckets against sample quantiles,
powers of two and even spacing with as many buckets, at batch size 1 (each
sample its own micro-batch). ``x true`` is positions per true token;
``saves`` is the share of a hand-picked list's padding that the optimum
removes.

    python benchmarks/bucket_corpora.py                  # the markdown table (K=4)
    python benchmarks/bucket_corpora.py --k 8            # another K
    python benchmarks/bucket_corpora.py --write lognormal lengths.txt   # a corpus, one length per line
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from layoutcheck.advisor.advise import Settings, advise

MAX_LENGTH = 8192
SAMPLES = 200_000


def lognormal(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.clip(np.rint(rng.lognormal(np.log(1300), 0.8, n)), 16, MAX_LENGTH)


def uniform(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(1024, MAX_LENGTH + 1, n)


def bimodal(n: int, rng: np.random.Generator) -> np.ndarray:
    short = rng.lognormal(np.log(600), 0.35, n)
    long = rng.normal(5000, 800, n)
    return np.clip(np.rint(np.where(rng.random(n) < 0.6, short, long)), 16, MAX_LENGTH)


CORPORA: dict[str, tuple[str, Callable[[int, np.random.Generator], np.ndarray]]] = {
    "lognormal": ("log-normal, median 1.3k, capped at 8192", lognormal),
    "uniform": ("uniform 1024-8192", uniform),
    "bimodal": ("bimodal: 60% around 600, 40% around 5000", bimodal),
}


def corpus(name: str, n: int = SAMPLES, seed: int = 0) -> np.ndarray:
    """The lengths of corpus ``name`` (int64)."""
    return CORPORA[name][1](n, np.random.default_rng(seed)).astype(np.int64)


def comparison_table(k: int = 4, n: int = SAMPLES) -> str:
    """The README's markdown table: the optimum and the hand-picked lists at ``k`` buckets, per corpus."""
    lines = [
        f"| corpus (max length {MAX_LENGTH}) | optimum K={k} | optimum | quantiles | powers of two | even "
        "| optimum saves vs quantiles / powers of two / even |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, (title, _) in CORPORA.items():
        advice = advise(corpus(name, n), Settings(max_length=MAX_LENGTH, ks=(k,)))
        row = advice.row(k)
        true = advice.true_tokens
        best = row.optimum.positions

        def saves(positions: int) -> str:
            return f"{(positions - best) / (positions - true):.0%}" if positions > true else "-"

        base = row.baselines
        lines.append(
            f"| {title} | {','.join(map(str, row.optimum.buckets or ()))} | {best / true:.3f}x | "
            f"{base['quantiles'].positions / true:.3f}x | {base['powers_of_two'].positions / true:.3f}x | "
            f"{base['even'].positions / true:.3f}x | {saves(base['quantiles'].positions)} / "
            f"{saves(base['powers_of_two'].positions)} / {saves(base['even'].positions)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--write", nargs=2, metavar=("CORPUS", "FILE"), help="write a corpus, one length per line")
    args = parser.parse_args()
    if args.write:
        name, path = args.write
        np.savetxt(path, corpus(name, args.samples), fmt="%d")
        return
    print(comparison_table(args.k, args.samples))


if __name__ == "__main__":
    main()
