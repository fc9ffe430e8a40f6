"""What the debug mode costs a training step: the reference data path with the hooks off and on, side by side.

Usage::

    python benchmarks/runtime_overhead.py [--rollouts N] [--samples N] [--repeat N]

The workload is production-shaped (issue 7): rollouts of 64 samples whose
true lengths are log-normal around 1.3k tokens with one 14,010-token
outlier, BSHD, cp=2 (one CP rank), micro-batches of B=1 and B=4, the whole
reference pipeline (`fixtures/minitrainer`: producer, schedule, both replay
fillers, the log-prob pass and the training pass with the loss-side slicing).

Each variant runs in its own fresh process, as a user's run does:

* ``off``: ``LAYOUTCHECK`` unset (the start-up file imports nothing);
* ``on``: ``LAYOUTCHECK=record`` with a configuration naming the pipeline's
  producer, batch builder, replay filler and offset helper: hooks installed
  by the ``.pth`` start-up file, no code change;
* ``bare``: the same hooks with every check taken out (each hooked call
  binds its arguments and calls through): the fixed cost of hooking, which
  no faster check can go under;
* ``tracer``: the same hooks plus ``LAYOUTCHECK_TRACE=1`` (the tracer's
  roles too: ``cp-slicer``, ``response-slicer``, ``loss-function``);
* ``mode``: the tracer with its function mode passing every op straight
  through (tags at the hooks and the CP helpers' judgement kept): what the
  mechanism costs before any op is traced;
* ``typeguard``: the hooks, with the pipeline imported under
  ``typeguard.install_import_hook(["minitrainer"])`` (its ``Padded``
  annotations checked on every call; tracer off).

The variants alternate ``--repeat`` times, so a busy machine slows them
alike; each process times ``--rollouts`` rollouts after one warm-up rollout
and reports its median time per rollout. The table shows the medians, the
ratio on/off (target <= 1.03), the bare hooks' ratio, and the cost per hook
call (all of it, and the checks' share: on minus bare) and per checked
tensor (the difference divided by what the checks counted). A second table
compares the tracer, its mode alone (``mode only``, a ratio) and typeguard
with the hooks alone (the tracer's target: <= 1.05), with the tracer's work per rollout counted in an untimed rollout:
torch calls its mode saw, how many went through a rule (a tagged tensor),
and the CP-helper calls it judged; the cost per traced op is the difference
divided by the rule ops and judged calls together.

CPU caveat: on this machine a step is only CPU work on small tensors, so the
checks' Python cost weighs far more than on a GPU, where the same host time
overlaps with kernels running on the device.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

CONFIG = """
[runtime]
mode = "record"
summary = false
parallel-state = "minitrainer.parallel:get_parallel_state"
[runtime.hooks]
producer = ["minitrainer.data:get_rollout_data"]
batch-builder = ["minitrainer.data:get_batch"]
replay-filler = ["minitrainer.replay_data:fill_replay_data"]
offset-helper = ["minitrainer.cp_utils:get_logits_and_tokens_offset_with_cp"]
cp-slicer = ["minitrainer.cp_utils:slice_with_cp"]
response-slicer = ["minitrainer.cp_utils:slice_log_prob_with_cp"]
loss-function = ["minitrainer.loss:loss_function"]
"""

WORKER = textwrap.dedent("""
    import json, os, statistics, sys, time
    import torch
    torch.set_num_threads(1)
    if os.environ.get("LC_BENCH_TYPEGUARD"):
        from typeguard import install_import_hook
        hook = install_import_hook(["minitrainer"])
    if os.environ.get("LC_BENCH_BARE"):  # before the pipeline's modules are imported, so hooked
        from layoutcheck.runtime import wrappers
        def through(checker, fn, where, binder):
            return lambda args, kwargs, call: fn(*args, **kwargs)
        wrappers._BODIES = {role: through for role in wrappers._BODIES}
    if os.environ.get("LC_BENCH_MODE_ONLY"):  # the tracer's mode, every op straight through
        from layoutcheck.runtime import tracer as traced
        def passthrough(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
        traced._Mode.__torch_function__ = passthrough
    from minitrainer.actor import TrainActor
    from minitrainer.args import make_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import long_tailed_lengths, make_rollout_ref

    rollouts, samples, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    refs = [make_rollout_ref(long_tailed_lengths(samples, seed=s), seed=s) for s in range(rollouts + 1)]
    times = []
    with parallel_state(cp_size=2, cp_rank=1):
        actor = TrainActor(make_args(micro_batch_size=batch))
        for i, ref in enumerate(refs):
            start = time.perf_counter()
            actor.train(i, ref)
            if i:  # the first rollout warms up
                times.append(time.perf_counter() - start)
    out = {"median": statistics.median(times)}
    from layoutcheck.runtime.activation import active_session
    session = active_session() if "layoutcheck.runtime.activation" in sys.modules else None
    if session is not None:
        checker = session.checker
        out["checked"] = dict(checker.checked)
        out["violations"] = len(checker.violations)
        out["notes"] = len(checker.notes)
        if session.tracing:  # the tracer's work in one more (untimed) rollout
            from layoutcheck.runtime import tracer as module
            counts = {"calls": 0, "rule": 0, "judged": 0}
            seen, checked = module._Mode.__torch_function__, module.checked
            def counting(self, func, types, args=(), kwargs=None):
                counts["calls"] += 1
                return seen(self, func, types, args, kwargs)
            def counted(tracer, op, *rest):
                counts["rule" if op in module._RULES else "judged"] += 1
                return checked(tracer, op, *rest)
            module._Mode.__torch_function__, module.checked = counting, counted
            with parallel_state(cp_size=2, cp_rank=1):
                actor.train(len(refs), refs[0])
            out["traced"] = counts
    print(json.dumps(out))
""")


VARIANTS = ("off", "bare", "on", "mode", "tracer", "typeguard")


def _run(variant: str, config: Path, rollouts: int, samples: int, batch: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if variant != "off":
        env.update({"LAYOUTCHECK": "record", "LAYOUTCHECK_CONFIG": str(config)})
    if variant in ("tracer", "mode"):
        env["LAYOUTCHECK_TRACE"] = "1"
    if variant == "mode":
        env["LC_BENCH_MODE_ONLY"] = "1"
    if variant == "typeguard":
        env["LC_BENCH_TYPEGUARD"] = "1"
    if variant == "bare":
        env["LC_BENCH_BARE"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, str(rollouts), str(samples), str(batch)],
        env=env, capture_output=True, text=True, check=False,
    )
    if proc.returncode:
        raise SystemExit(f"the {variant} worker failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=3, help="timed rollouts per process (default 3)")
    parser.add_argument("--samples", type=int, default=64, help="samples per rollout (default 64)")
    parser.add_argument("--repeat", type=int, default=3, help="processes per variant, alternating (default 3)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "layoutcheck.toml")
        config.write_text(CONFIG)
        print(f"reference data path: {args.samples} samples per rollout (median ~1.3k tokens, one 14,010), "
              f"BSHD, cp=2, best of {args.repeat} processes x median of {args.rollouts} rollouts")
        print(f"{'B':>2}  {'off s/rollout':>13}  {'bare/off':>8}  {'on s/rollout':>12}  {'on/off':>7}  "
              f"{'per hook call':>13}  {'checks only':>11}  {'per checked tensor':>18}  target <= 1.03")
        tables = []
        for batch in (1, 4):
            times: dict[str, list[float]] = {v: [] for v in VARIANTS}
            info: dict[str, dict] = {}
            for _ in range(args.repeat):
                for variant in VARIANTS:
                    result = _run(variant, config, args.rollouts, args.samples, batch)
                    times[variant].append(float(result["median"]))
                    info[variant] = result
            best = {v: min(t) for v, t in times.items()}
            a, b = best["off"], best["on"]
            checked = info["on"].get("checked", {})
            per_rollout = args.rollouts + 1  # the counts include the warm-up rollout
            calls = sum(checked.values()) / per_rollout
            tensors = (checked.get("micro-batches", 0) * 2 + checked.get("replay tensors", 0)) / per_rollout
            verdict = "PASS" if b / a <= 1.03 else "MISS"
            bare = best["bare"]
            print(f"{batch:>2}  {a:13.4f}  {bare / a:8.3f}  {b:12.4f}  {b / a:7.3f}  "
                  f"{(b - a) / max(calls, 1) * 1e6:10.1f} us  {(b - bare) / max(calls, 1) * 1e6:8.1f} us"
                  f"  {(b - a) / max(tensors, 1) * 1e6:15.1f} us  {verdict}")
            print(f"    checked per rollout: {', '.join(f'{v / per_rollout:.0f} {k}' for k, v in checked.items())}; "
                  f"violations {info['on'].get('violations')}, notes {info['on'].get('notes')}")
            tables.append((batch, best, info))
        print("\nthe tracer and typeguard on top of the hooks (the hooks alone = 1.00; tracer target <= 1.05)")
        print(f"{'B':>2}  {'hooks s':>8}  {'mode only':>9}  {'+tracer s':>9}  {'ratio':>6}  {'+typeguard s':>12}  "
              f"{'ratio':>6}  {'torch calls':>11}  {'rule ops':>8}  {'judged':>6}  {'per traced op':>13}  tracer")
        for batch, best, info in tables:
            hooks, tracer, typeguard = best["on"], best["tracer"], best["typeguard"]
            mode = best["mode"] / hooks
            work = info["tracer"].get("traced", {})
            traced_ops = work.get("rule", 0) + work.get("judged", 0)
            per_op = (tracer - hooks) / max(traced_ops, 1) * 1e6
            verdict = "PASS" if tracer / hooks <= 1.05 else "MISS"
            print(f"{batch:>2}  {hooks:8.4f}  {mode:9.2f}  {tracer:9.4f}  {tracer / hooks:6.2f}  {typeguard:12.4f}  "
                  f"{typeguard / hooks:6.2f}  {work.get('calls', 0):11d}  {work.get('rule', 0):8d}  "
                  f"{work.get('judged', 0):6d}  {per_op:10.1f} us  {verdict}")
            print(f"    with the tracer: violations {info['tracer'].get('violations')}, "
                  f"notes {info['tracer'].get('notes')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
