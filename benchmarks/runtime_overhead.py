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
  by the ``.pth`` start-up file, no code change.

The two variants alternate ``--repeat`` times, so a busy machine slows both
alike; each process times ``--rollouts`` rollouts after one warm-up rollout
and reports its median time per rollout. The table shows the medians, the
ratio on/off (target <= 1.03), and the cost per hook call and per checked
tensor (the difference divided by what the checks counted).

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
"""

WORKER = textwrap.dedent("""
    import json, statistics, sys, time
    import torch
    torch.set_num_threads(1)
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
    print(json.dumps(out))
""")


def _run(variant: str, config: Path, rollouts: int, samples: int, batch: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if variant == "on":
        env.update({"LAYOUTCHECK": "record", "LAYOUTCHECK_CONFIG": str(config)})
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
        print(f"{'B':>2}  {'off s/rollout':>13}  {'on s/rollout':>12}  {'on/off':>7}  {'per hook call':>13}  "
              f"{'per checked tensor':>18}  target <= 1.03")
        for batch in (1, 4):
            off, on, info = [], [], {}
            for _ in range(args.repeat):
                off.append(float(_run("off", config, args.rollouts, args.samples, batch)["median"]))
                result = _run("on", config, args.rollouts, args.samples, batch)
                on.append(float(result["median"]))
                info = result
            a, b = min(off), min(on)
            checked = info.get("checked", {})
            per_rollout = args.rollouts + 1  # the counts include the warm-up rollout
            calls = sum(checked.values()) / per_rollout
            tensors = (checked.get("micro-batches", 0) * 2 + checked.get("replay tensors", 0)) / per_rollout
            verdict = "PASS" if b / a <= 1.03 else "MISS"
            print(f"{batch:>2}  {a:13.4f}  {b:12.4f}  {b / a:7.3f}  {(b - a) / max(calls, 1) * 1e6:10.1f} us"
                  f"  {(b - a) / max(tensors, 1) * 1e6:15.1f} us  {verdict}")
            print(f"    checked per rollout: {', '.join(f'{v / per_rollout:.0f} {k}' for k, v in checked.items())}; "
                  f"violations {info.get('violations')}, notes {info.get('notes')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
