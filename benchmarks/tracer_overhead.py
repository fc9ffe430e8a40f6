"""Tracer overhead: traced ops and a data-path-like sequence, tracer on vs off, side by side in one run.

Usage::

    python benchmarks/tracer_overhead.py [--repeat N] [--samples N] [--cp N] [--seed S]

Rows (every time is the best of ``--repeat`` runs; on and off alternate run
for run, so drift on a busy machine affects both alike):

* per op: one op on a 1.3k-token sample with no tracer, inside an active
  tracer on an untagged tensor (what every op of a traced region pays), and
  on a tagged tensor (the op is traced: tag read, rule, result tagged);
* data path: a rollout of ``--samples`` samples (median about 1.3k tokens,
  one 14,010-token outlier, A = 128), laid out as a batch builder does on CP
  rank 0 of ``--cp``: each sample padded to its ``P``, zigzag CP-sliced
  (pad to ``2 cp c``, two chunks, ``cat``), its loss mask aligned
  (``F.pad(mask, (p - 1, 1))``) and sliced the same way, then BSHD
  micro-batches stacked per padded length, and a THD stream packed with
  ``cat``. "on" includes tagging the rollout (`tag_rollout`) and entering
  the tracer; "off" runs the same ops with no tracer.

The issue's target is for the full data path (hooks, batch builder, replay
filler, on production-like sizes): tracer on <= 1.05x of off. These rows
are the tracer's share of it, on CPU tensors, where ops are cheap and the
per-op cost shows most.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from layoutcheck import geometry  # noqa: E402
from layoutcheck.runtime.tracing.tagging import tag_rollout  # noqa: E402
from layoutcheck.runtime.tracing.tags import Tag, clear_tags, tag  # noqa: E402
from layoutcheck.runtime.tracing.tracer import Tracer  # noqa: E402

UNIT = 128


def best(fn: Callable[[], object], repeat: int, number: int) -> float:
    """Best seconds per call over ``repeat`` runs of ``number`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def lengths(n: int, seed: int) -> list[int]:
    """Long-tailed total lengths: median about 1.3k tokens, one 14,010-token outlier."""
    rng = random.Random(seed)
    out = [max(64, min(8000, int(rng.lognormvariate(7.17, 0.6)))) for _ in range(n)]
    out[n // 2] = 14_010
    return out


def make_rollout(totals: list[int], seed: int) -> dict[str, list]:
    rng = random.Random(seed)
    responses = [max(1, t - rng.randint(16, max(17, t // 3))) for t in totals]
    return {
        "tokens": [torch.randint(1, 50_000, (t,)) for t in totals],
        "total_lengths": list(totals),
        "response_lengths": responses,
        "loss_masks": [torch.ones(r, dtype=torch.int) for r in responses],
        "max_seq_lens": geometry.per_sample_padded_lengths(totals, UNIT),
    }


def zigzag(t: torch.Tensor, padded: int, cp: int, r: int) -> torch.Tensor:
    """The trainer's zigzag CP slice: pad to 2 cp c, keep chunks r and 2cp-1-r."""
    c = geometry.zigzag_chunk_size(padded, cp)
    full = F.pad(t, (0, 2 * cp * c - t.size(0)))
    (a0, a1), (b0, b1) = geometry.zigzag_chunks(padded, cp, r)
    return torch.cat([full[a0:a1], full[b0:b1]])


def bshd_path(data: dict[str, list], cp: int) -> int:
    """Lay a BSHD rollout out as a batch builder does; return the positions laid out (so work is not dropped)."""
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(data["max_seq_lens"]):
        groups.setdefault(p, []).append(i)
    laid = 0
    for p, members in groups.items():
        tokens, masks = [], []
        for i in members:
            total, response = data["total_lengths"][i], data["response_lengths"][i]
            tokens.append(zigzag(data["tokens"][i], p, cp, 0))
            mask = F.pad(data["loss_masks"][i], (total - response - 1, 1))
            masks.append(zigzag(mask, p, cp, 0))
        laid += torch.stack(tokens).numel() + torch.stack(masks).numel()
    return laid


def thd_path(data: dict[str, list], cp: int) -> int:
    """Pack a THD rollout into one stream: each sample zigzag-sliced with its packed length, tail padded."""
    stream = torch.cat([zigzag(t, geometry.packed_sample_length(t.size(0), cp), cp, 0) for t in data["tokens"]])
    return F.pad(stream, (0, (-stream.size(0)) % UNIT)).numel()


OPS: dict[str, Callable[[torch.Tensor], object]] = {
    "x[a:b]": lambda x: x[128:1152],
    "narrow": lambda x: x.narrow(0, 128, 1024),
    "chunk(2)": lambda x: x.chunk(2),
    "split([..])": lambda x: x.split([640, 640]),
    "cat(2)": lambda x: torch.cat([x, x]),
    "stack(2)": lambda x: torch.stack([x, x]),
    "F.pad (to P)": lambda x: F.pad(x, (0, 128)),
    "view": lambda x: x.view(1, -1),
    "reshape": lambda x: x.reshape(-1, 128),
    "flatten": lambda x: x.flatten(),
    "to(float)": lambda x: x.to(torch.float32),
    "contiguous": lambda x: x.contiguous(),
    "clone": lambda x: x.clone(),
    "detach": lambda x: x.detach(),
    "x + 1 (untraced op)": lambda x: x + 1,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tracer = Tracer("record", enabled=True)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, best of {args.repeat}")
    print("\nper op, on a 1280-token sample (us per call)")
    print(f"{'op':<22}{'no tracer':>11}{'untagged':>11}{'tagged':>11}{'untagged/off':>14}{'tagged/off':>12}")
    x = torch.arange(1280)
    # A sample of T = 1280 tokens with P = 1408: the pad below is its layout, the slices are of its raw tokens.
    tagged = tag(torch.arange(1280), Tag(field="tokens", padded=1408, sample=0, total=1280, response=900))
    number = 2000
    for name, op in OPS.items():
        off = best(lambda: op(x), args.repeat, number)
        with tracer:
            plain = best(lambda: op(x), args.repeat, number)
            traced = best(lambda: op(tagged), args.repeat, number)
        print(f"{name:<22}{off * 1e6:>11.2f}{plain * 1e6:>11.2f}{traced * 1e6:>11.2f}"
              f"{plain / off:>13.2f}x{traced / off:>11.2f}x")

    totals = lengths(args.samples, args.seed)
    ordered = sorted(totals)
    print(f"\ndata path: {args.samples} samples, median {ordered[len(ordered) // 2]} tokens, max {max(totals)}, "
          f"cp={args.cp} (rank 0), A={UNIT}")
    found = 0
    for layout, path in (("bshd", bshd_path), ("thd", thd_path)):
        data = make_rollout(totals, args.seed)
        if layout == "thd":
            del data["max_seq_lens"]

        def run_off() -> None:
            path(data, args.cp)

        def run_on() -> None:
            tag_rollout(data, qkv_format=layout, cp_size=args.cp, cp_rank=0, unit=UNIT)
            with tracer:
                path(data, args.cp)

        off_times, on_times = [], []
        for _ in range(args.repeat):  # alternate, run for run
            off_times.append(best(run_off, 1, 3))
            on_times.append(best(run_on, 1, 3))
        off, on = min(off_times), min(on_times)
        ops = count_ops(lambda: path(data, args.cp))
        print(f"{layout}: tracer off{'':<14}{off * 1e3:>9.2f} ms")
        print(f"{layout}: tracer on (tag + trace){'':<1}{on * 1e3:>9.2f} ms   {on / off:.2f}x   "
              f"(+{(on - off) * 1e6 / ops:.1f} us per torch call, {ops} calls)")
        found += len(tracer.violations)
        clear_tags()
    print(f"violations found on the correct paths: {found}")
    return 0 if found == 0 else 1


def count_ops(run: Callable[[], object]) -> int:
    """How many torch calls ``run`` makes (counted with a pass-through function mode)."""
    from torch.overrides import TorchFunctionMode

    class Count(TorchFunctionMode):
        n = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        run()
    return Count.n


if __name__ == "__main__":
    sys.exit(main())
