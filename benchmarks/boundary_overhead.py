"""What boundary contracts cost: a packed-THD trainer's steps with its contracts installed and removed, paired.

Usage::

    python benchmarks/boundary_overhead.py [--steps N] [--episodes N] [--median N]

The workload is ``fixtures/packthd`` (no Miles names): each step plans the
padded lengths of its episodes (log-normal true lengths around ``--median``
tokens), packs micro-batches of 2 into zigzag streams on cp rank 1 of 2 (tp
2), and scores them; ``fixtures/packthd.toml`` describes ``plan``, ``pack``
and ``zigzag`` as boundary contracts (B1-B6). Two configurations are
measured, each in its own process, which alternates steps with the
contracts installed and removed (two processes of one variant differ more
on a shared machine than neighbouring steps of one process do), and reports
the median ratio of neighbouring steps and the cost per hooked call:

* ``shapes``: the contracts without ``from`` (B1-B5 on shapes and Python
  ints: what a GPU run pays in the step, since values wait for a snapshot);
* ``values``: the contracts as configured, with B6 comparing every packed
  value with the layout of its source (CPU tensors are read at once).

CPU caveat: a step here is only slicing small tensors on the CPU; on a GPU
the host time of the hooks overlaps with the kernels of a real step.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = textwrap.dedent("""
    import json, random, sys, time
    import torch
    torch.set_num_threads(1)
    from layoutcheck.runtime.activation.session import activate
    session = activate("record", config=sys.argv[1])
    from packthd import mesh
    from packthd.episodes import make_episodes
    from packthd.train import step

    steps, episodes, median = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(0)
    batches = [make_episodes([max(2, int(rng.lognormvariate(0, 0.6) * median)) for _ in range(episodes)], seed=s)
               for s in range(steps)]
    hooks = session._hooks
    specs = [h.spec for h in hooks.installed] or list(session.settings.hook_specs())
    times = {"on": [], "off": []}
    with mesh.use(ctx=2, ctx_rank=1, tensor=2):
        step(batches[0])  # warm-up, with the hooks
        calls = session.checker.checked["boundary calls"]
        for i in range(2 * steps):
            for state in (("on", "off") if i % 2 else ("off", "on")):
                hooks.remove()
                if state == "on":
                    hooks.add(specs)
                start = time.perf_counter()
                step(batches[i % steps])
                times[state].append(time.perf_counter() - start)
        hooks.remove()
        hooks.add(specs)
        per_step = (session.checker.checked["boundary calls"] - calls) / (2 * steps)
    ratios = sorted(a / b for a, b in zip(times["on"], times["off"]))
    diffs = sorted(a - b for a, b in zip(times["on"], times["off"]))
    print(json.dumps({"ratio": ratios[len(ratios) // 2], "extra": diffs[len(diffs) // 2],
                      "off": sorted(times["off"])[len(times["off"]) // 2], "calls": per_step,
                      "violations": len(session.violations), "notes": len(session.notes)}))
""")


def _run(config: Path, steps: int, episodes: int, median: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "fixtures"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-c", WORKER, str(config), str(steps), str(episodes), str(median)],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="steps per state and process (default 6)")
    parser.add_argument("--episodes", type=int, default=32, help="episodes per step (default 32)")
    parser.add_argument("--median", type=int, default=1300, help="median true length (default 1300)")
    args = parser.parse_args(argv)
    text = (ROOT / "fixtures" / "packthd.toml").read_text().replace('mode = "raise"', 'mode = "record"\nsummary = false')
    shapes = re.sub(r', from = "[^"]+"', "", text)
    print(f"packthd: {args.episodes} episodes a step (median {args.median} tokens), micro-batches of 2, cp=2 "
          f"(rank 1), tp=2; steps alternating with the contracts installed and removed in one process")
    print(f"{'contracts':>9}  {'off s/step':>10}  {'on/off':>7}  {'calls/step':>10}  {'per hooked call':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in (("shapes", shapes), ("values", text)):
            config = Path(tmp, f"{name}.toml")
            config.write_text(body)
            result = _run(config, args.steps, args.episodes, args.median)
            per_call = result["extra"] / result["calls"] * 1e6 if result["calls"] else float("nan")
            print(f"{name:>9}  {result['off']:>10.4f}  {result['ratio']:>7.3f}  {result['calls']:>10.0f}  "
                  f"{per_call:>12.1f} us   (violations {result['violations']}, notes {result['notes']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
