"""Tracer overhead: traced ops and a data-path-like sequence, tracer on vs off, before vs after, in one run.

Usage::

    python benchmarks/tracer_overhead.py [--repeat N] [--samples N] [--cp N] [--seed S] [--before COMMIT]

Rows (every time is the best of ``--repeat`` runs; off, before and after
alternate run for run, so drift on a busy machine affects all alike).
"before" is the tracer of ``--before`` (default `baseline.BEFORE`, the
commit before tags carried layout spaces and rules S1-S5 judged them),
loaded beside this one in the same process (`baseline.load`); "after" is
this checkout's:

* per op: one op on a 1.3k-token sample with no tracer, inside an active
  tracer on an untagged tensor (what every op of a traced region pays), and
  on a tagged tensor (the op is traced: tag read, rule, result tagged),
  before and after; the ops the earlier tracer did not follow
  (elementwise, ``roll``, ``gather``, ``where``) pass through it untouched;
* data path: a rollout of ``--samples`` samples (median about 1.3k tokens,
  one 14,010-token outlier, A = 128), laid out as a batch builder does on CP
  rank 0 of ``--cp``: each sample padded to its ``P``, zigzag CP-sliced
  (pad to ``2 cp c``, two chunks, ``cat``), its loss mask aligned
  (``F.pad(mask, (p - 1, 1))``) and sliced the same way, then BSHD
  micro-batches stacked per padded length, and a THD stream packed with
  ``cat``; then a loss side on each BSHD micro-batch (next-token targets
  rolled before the CP split, weighted by the loss mask: the ops the space
  rules judge). "on" includes tagging the rollout (`tag_rollout`) and
  entering the tracer; "off" runs the same ops with no tracer. Per path:
  the cost per torch call of the path and per traced op (a call that went
  through a rule), before and after.

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

import baseline  # noqa: E402
from layoutcheck import geometry  # noqa: E402
from layoutcheck.runtime.tracing import tagging, tags, tracer  # noqa: E402

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
    """Lay a BSHD rollout out as a batch builder does, then a loss side; return a count (so work is not dropped)."""
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(data["max_seq_lens"]):
        groups.setdefault(p, []).append(i)
    laid = 0
    for p, members in groups.items():
        tokens, masks, targets = [], [], []
        for i in members:
            total, response = data["total_lengths"][i], data["response_lengths"][i]
            tokens.append(zigzag(data["tokens"][i], p, cp, 0))
            mask = F.pad(data["loss_masks"][i], (total - response - 1, 1))
            masks.append(zigzag(mask, p, cp, 0))
            targets.append(zigzag(torch.roll(data["tokens"][i], -1), p, cp, 0))  # rolled before the split
        batch, mask, target = torch.stack(tokens), torch.stack(masks), torch.stack(targets)
        weighted = torch.where(mask > 0, target * mask, 0)
        laid += batch.numel() + int(weighted.shape[-1])
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
    "x[1:] (shift)": lambda x: x[1:],
    "roll(x, -1)": lambda x: torch.roll(x, -1),
    "x + 1": lambda x: x + 1,
    "x * x (partners)": lambda x: x * x,
    "where(x > 0, x, 0)": lambda x: torch.where(x > 0, x, 0),
    "gather": lambda x: x.gather(0, INDEX),
    "cumsum (not traced)": lambda x: x.cumsum(0),
}
INDEX = torch.arange(0, 1280, 10)


class Side:
    """One tracer (this checkout's, or the one loaded from ``--before``) and what it needs to run a row."""

    def __init__(self, name: str, package: str) -> None:
        import importlib

        self.name = name
        self.tags = importlib.import_module(f"{package}.runtime.tracing.tags")
        self.tagging = importlib.import_module(f"{package}.runtime.tracing.tagging")
        self.module = importlib.import_module(f"{package}.runtime.tracing.tracer")
        self.tracer = self.module.Tracer("record", enabled=True)

    def tagged(self, n: int) -> torch.Tensor:
        """A sample of T = ``n`` tokens with P = n + 128, tagged by this tracer's own table."""
        return self.tags.tag(torch.arange(n), self.tags.Tag(field="tokens", padded=n + 128, sample=0, total=n,
                                                            response=900))

    def rule_ops(self, run: Callable[[], object]) -> int:
        """How many torch calls of ``run`` inside this tracer went through a rule (a tagged operand)."""
        seen = [0]
        checked = self.module.checked

        def counted(*args: object) -> object:
            seen[0] += 1
            return checked(*args)

        self.module.checked = counted
        try:
            with self.tracer:
                run()
        finally:
            self.module.checked = checked
        return seen[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--cp", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--before", default=baseline.BEFORE, help="the commit whose tracer is 'before'")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    baseline.load(args.before)
    before, after = Side("before", baseline.NAME), Side("after", "layoutcheck")

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, best of {args.repeat}; "
          f"before = {args.before}, after = this checkout")
    print("\nper op, on a 1280-token sample (us per call; before and after alternate)")
    print(f"{'op':<21}{'off':>7}{'untagged':>10}{'':>8}{'tagged':>9}{'':>8}{'traced op cost':>16}")
    print(f"{'':<21}{'':>7}{'before':>10}{'after':>8}{'before':>9}{'after':>8}{'before':>8}{'after':>8}")
    x = torch.arange(1280)
    samples = {side.name: side.tagged(1280) for side in (before, after)}
    number = 2000
    for name, op in OPS.items():
        off = best(lambda: op(x), args.repeat, number)
        row = {}
        for _ in range(2):  # alternate the two tracers
            for side in (before, after):
                with side.tracer:
                    plain = best(lambda: op(x), args.repeat, number)
                    traced = best(lambda: op(samples[side.name]), args.repeat, number)
                old = row.get(side.name, (plain, traced))
                row[side.name] = (min(old[0], plain), min(old[1], traced))
        (pb, tb), (pa, ta) = row["before"], row["after"]
        print(f"{name:<21}{off * 1e6:>7.2f}{pb * 1e6:>10.2f}{pa * 1e6:>8.2f}{tb * 1e6:>9.2f}{ta * 1e6:>8.2f}"
              f"{(tb - off) * 1e6:>+8.2f}{(ta - off) * 1e6:>+8.2f}")

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

        def on(side: Side) -> Callable[[], None]:
            def run() -> None:
                side.tagging.tag_rollout(data, qkv_format=layout, cp_size=args.cp, cp_rank=0, unit=UNIT)
                with side.tracer:
                    path(data, args.cp)
            return run

        times: dict[str, list[float]] = {"off": [], "before": [], "after": []}
        for _ in range(args.repeat):  # alternate, run for run
            times["off"].append(best(run_off, 1, 3))
            for side in (before, after):
                times[side.name].append(best(on(side), 1, 3))
        off = min(times["off"])
        calls = count_ops(lambda: path(data, args.cp))
        print(f"{layout}: tracer off {off * 1e3:9.2f} ms, {calls} torch calls")
        for side in (before, after):
            side.tagging.tag_rollout(data, qkv_format=layout, cp_size=args.cp, cp_rank=0, unit=UNIT)
            rules = side.rule_ops(lambda: path(data, args.cp))
            t = min(times[side.name])
            print(f"{layout}: tracer {side.name:<6}{t * 1e3:9.2f} ms  {t / off:5.2f}x   "
                  f"+{(t - off) * 1e6 / calls:5.1f} us per torch call, +{(t - off) * 1e6 / max(rules, 1):5.1f} us "
                  f"per traced op ({rules} traced)")
            found += len(side.tracer.violations)
        before.tags.clear_tags()
        after.tags.clear_tags()
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
