"""What boundary contracts cost: a packed-THD trainer's steps with its contracts installed and removed, paired.

Usage::

    python benchmarks/boundary_overhead.py [--steps N] [--episodes N] [--median N]
    python benchmarks/boundary_overhead.py --per-contract [--calls N] [--root DIR]
    python benchmarks/boundary_overhead.py --per-contract --before COMMIT [--rounds N] [--fresh] [--only pack]

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

With ``--per-contract`` (issue 29's yardstick: the cost of one clean hooked
call of 64 samples) each process installs one contract only and calls its
function directly with the arguments a step gives it, 64 episodes packed as
one micro-batch (``plan`` and ``pack``: one call of 64 samples; ``zigzag``,
``samples = 1``: one sample), alternating the hooked function and the
function it wraps, ``--calls`` times each; the table gives each contract's
cost per call (the best hooked call less the best unhooked one, and the
median of neighbouring pairs), shapes and values. Timing the call, not the
step: a step of 64 episodes takes milliseconds, whose jitter on a shared
machine is larger than the checks of one call. ``--root DIR`` runs the same
against another checkout of layoutcheck (say ``git archive COMMIT | tar -x
-C DIR``), for a before/after table; ``--before COMMIT`` does that itself
(``git archive`` of the package into a scratch folder) and prints one table
of both, each cell the best of ``--rounds`` processes per side, the
processes of the two sides alternating so that a busy machine slows both.
Every call gets the same batch unless ``--fresh``: then each call's
episodes are the batch's cut by 1, 2, ... tokens (views), so that no call
meets lengths another met, as a trainer's steps do not, and what a
boundary keeps by lengths (clean B1-B5 verdicts, a packed stream's pieces)
is never found again: the cost of a call that pays every check.

With ``--per-contract`` three configurations are measured: ``shapes``,
``values`` (value checks on the worker thread, ``value-checks =
"background"``) and ``inline`` (``value-checks = "inline"``, the default:
B6 in the call), each before and after with ``--before`` (a COMMIT older
than the ``value-checks`` key cannot be measured so); ``--only pack``
measures one contract. Besides the calling thread's
time per call, each row gives the CPU the checks consume per call: the
calling thread's CPU time (``time.thread_time``) in hooked calls less in
unhooked ones, plus the worker thread's (its own ``thread_time`` around
each job; the worker is waited for before the figure is read), so that a
cost moved off the calling thread is still shown.

CPU caveat: a step here is only slicing small tensors on the CPU; on a GPU
the host time of the hooks overlaps with the kernels of a real step.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tarfile
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
    only, micro_batch = sys.argv[5], int(sys.argv[6])
    if only:  # one contract installed
        specs = [s for s in specs if s.target.endswith(":" + only)]
    times = {"on": [], "off": []}
    with mesh.use(ctx=2, ctx_rank=1, tensor=2):
        hooks.remove()
        hooks.add(specs)
        step(batches[0], micro_batch)  # warm-up, with the hooks
        calls = session.checker.checked["boundary calls"]
        for i in range(2 * steps):
            for state in (("on", "off") if i % 2 else ("off", "on")):
                hooks.remove()
                if state == "on":
                    hooks.add(specs)
                start = time.perf_counter()
                step(batches[i % steps], micro_batch)
                times[state].append(time.perf_counter() - start)
        hooks.remove()
        hooks.add(specs)
        per_step = (session.checker.checked["boundary calls"] - calls) / (2 * steps)
        if getattr(session.checker, "values_worker", None) is not None:
            session.checker.take_values(wait=True)  # what the value worker still holds, in the counts below
    ratios = sorted(a / b for a, b in zip(times["on"], times["off"]))
    diffs = sorted(a - b for a, b in zip(times["on"], times["off"]))
    print(json.dumps({"ratio": ratios[len(ratios) // 2], "extra": diffs[len(diffs) // 2],
                      "best": min(times["on"]) - min(times["off"]),
                      "off": sorted(times["off"])[len(times["off"]) // 2], "calls": per_step,
                      "violations": len(session.violations), "notes": len(session.notes)}))
""")


CALLS = textwrap.dedent("""
    import inspect, json, random, sys, time
    import torch
    torch.set_num_threads(1)
    from layoutcheck.runtime.activation.session import activate
    session = activate("record", config=sys.argv[1])
    from packthd import collate, cp, mesh
    from packthd.episodes import make_episodes

    calls, median, only, fresh = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "fresh"
    rng = random.Random(0)
    episodes = make_episodes([max(2, int(rng.lognormvariate(0, 0.6) * median)) for _ in range(64)], seed=0)
    hooks = session._hooks
    specs = [h.spec for h in hooks.installed] or list(session.settings.hook_specs())
    specs = [s for s in specs if s.target.endswith(":" + only)]
    owner = cp if only == "zigzag" else collate
    with mesh.use(ctx=2, ctx_rank=1, tensor=2):
        hooks.remove()
        hooks.add(specs)
        functions = [getattr(owner, only)]  # held in a list: installing rebinds module-level names only
        functions.append(inspect.unwrap(functions[0]))
        assert functions[0] is not functions[1], "the contract did not install"
        def arguments(batch):
            lengths = inspect.unwrap(collate.plan)(batch, collate.factors())
            return {"plan": (batch, collate.factors()), "pack": (batch, lengths),
                    "zigzag": (batch[0].ids, lengths[0], 0)}[only]

        def trimmed(d):
            # the batch with every episode longer than d + 2 cut by d tokens (views): lengths no call met before
            return [e if e.ids.shape[0] <= d + 2 else type(e)(ids=e.ids[:-d], logp=e.logp[:-d], prompt=e.prompt)
                    for e in episodes]

        args = arguments(episodes)
        for _ in range(5):  # warm-up, hooked and not
            functions[0](*args)
            functions[1](*args)
        checker = session.checker
        worker = getattr(checker, "values_worker", None)  # the value checks' worker thread (none before it existed)
        if worker is not None:
            checker.take_values(wait=True)
        before = checker.checked["boundary calls"]
        worker_cpu = worker.cpu if worker is not None else 0.0
        inline = worker.inline if worker is not None else 0
        times = {"on": [], "off": []}
        cpu = {"on": 0.0, "off": 0.0}  # the calling thread's CPU time in each kind of call
        for i in range(calls):
            # "fresh": each pair of calls (hooked and unhooked alike) gets lengths never met before, as each step
            # of a trainer does, so that nothing kept across calls by lengths (clean verdicts, stream pieces) is
            # found again; the batch is made just before, as a trainer's collate makes it
            call_args = arguments(trimmed(i + 1)) if fresh else args
            for state in (("on", "off") if i % 2 else ("off", "on")):
                function = functions[0] if state == "on" else functions[1]
                thread = time.thread_time()
                start = time.perf_counter()
                function(*call_args)
                times[state].append(time.perf_counter() - start)
                cpu[state] += time.thread_time() - thread
        if worker is not None:  # what the worker still holds is part of these calls' cost
            checker.take_values(wait=True)
            worker_cpu = worker.cpu - worker_cpu
        checked = checker.checked["boundary calls"] - before
    diffs = sorted(a - b for a, b in zip(times["on"], times["off"]))
    print(json.dumps({"best": min(times["on"]) - min(times["off"]), "median": diffs[len(diffs) // 2],
                      "off": min(times["off"]), "checked": checked, "calls": calls,
                      "cpu": (cpu["on"] - cpu["off"] + worker_cpu) / calls, "worker": worker_cpu / calls,
                      "inline": worker.inline - inline if worker is not None else 0,
                      "violations": len(session.violations), "notes": len(session.notes)}))
""")


def _run(config: Path, steps: int, episodes: int, median: int, *, only: str = "", micro_batch: int = 2,
         root: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    first = [str(root)] if root is not None else []
    env["PYTHONPATH"] = os.pathsep.join([*first, str(ROOT / "fixtures"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # run in the measured checkout: `python -c` puts the working directory first on sys.path, ahead of PYTHONPATH
    proc = subprocess.run([sys.executable, "-c", WORKER, str(config), str(steps), str(episodes), str(median), only,
                           str(micro_batch)], env=env, capture_output=True, text=True, check=False,
                          cwd=str(root or ROOT))
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="steps per state and process (default 6)")
    parser.add_argument("--episodes", type=int, default=32, help="episodes per step (default 32)")
    parser.add_argument("--median", type=int, default=1300, help="median true length (default 1300)")
    parser.add_argument("--per-contract", action="store_true", help="each contract alone, calls of 64 samples")
    parser.add_argument("--calls", type=int, default=300, help="--per-contract: calls of each kind (default 300)")
    parser.add_argument("--root", type=Path, help="the layoutcheck checkout to measure (default: this one)")
    parser.add_argument("--before", metavar="COMMIT", help="--per-contract: also measure COMMIT's layoutcheck "
                        "(`git archive`), processes alternating, in one table")
    parser.add_argument("--rounds", type=int, default=2, help="--before: processes of each side per cell (default 2)")
    parser.add_argument("--only", action="append", choices=("plan", "pack", "zigzag"),
                        help="--before: this contract only (repeat for more; default all three)")
    parser.add_argument("--fresh", action="store_true", help="--per-contract: each call with lengths no call met "
                        "before (the batch's episodes cut by 1, 2, ... tokens), as a trainer's steps are")
    args = parser.parse_args(argv)
    inline = (ROOT / "fixtures" / "packthd.toml").read_text().replace('mode = "raise"', 'mode = "record"\nsummary = false')
    text = inline.replace('value-checks = "inline"', 'value-checks = "background"')  # value checks on the worker
    shapes = re.sub(r', from = "[^"]+"', "", text)
    if args.per_contract:
        return per_contract(args, {"shapes": shapes, "values": text, "inline": inline})
    print(f"packthd: {args.episodes} episodes a step (median {args.median} tokens), micro-batches of 2, cp=2 "
          f"(rank 1), tp=2; steps alternating with the contracts installed and removed in one process")
    print(f"{'contracts':>9}  {'off s/step':>10}  {'on/off':>7}  {'calls/step':>10}  {'per hooked call':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in (("shapes", shapes), ("values", text)):
            config = Path(tmp, f"{name}.toml")
            config.write_text(body)
            result = _run(config, args.steps, args.episodes, args.median, root=args.root)
            per_call = result["extra"] / result["calls"] * 1e6 if result["calls"] else float("nan")
            print(f"{name:>9}  {result['off']:>10.4f}  {result['ratio']:>7.3f}  {result['calls']:>10.0f}  "
                  f"{per_call:>12.1f} us   (violations {result['violations']}, notes {result['notes']})")
    return 0


def _run_calls(config: Path, calls: int, median: int, only: str, root: Path | None, fresh: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
    first = [str(root)] if root is not None else []
    env["PYTHONPATH"] = os.pathsep.join([*first, str(ROOT / "fixtures"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, "-c", CALLS, str(config), str(calls), str(median), only,
                           "fresh" if fresh else "same"],
                          env=env, capture_output=True, text=True, check=False, cwd=str(root or ROOT))
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _extract(commit: str, folder: Path) -> Path:
    # the `layoutcheck` package of `commit`, as a checkout to run workers in (`--root`)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "layoutcheck"], capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def _cell(result: dict) -> str:
    return f"{result['best'] * 1e6:.0f} ({result['median'] * 1e6:.0f})"


def side_by_side(args: argparse.Namespace, configs: dict[str, str]) -> int:
    """``--per-contract --before COMMIT``: each contract's call before and after, processes alternating."""
    print(f"packthd: 64 episodes (median {args.median} tokens) packed as one micro-batch, cp=2 (rank 1), tp=2; "
          f"one contract installed, its function called {args.calls} times hooked and unhooked, alternating; "
          f"before = {args.before}, after = this checkout; {args.rounds} process(es) of each, alternating, best kept; "
          f"{'lengths new at every call' if args.fresh else 'one batch, every call'}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("each cell: us per call, the best hooked call less the best unhooked one (the median of neighbouring pairs); "
          "cpu: the checks' CPU per call, the calling thread's (hooked less unhooked) plus the value worker's")
    heads = ["shapes, before", "shapes, after", "inline, before", "inline, after", "values, before", "values, after",
             "cpu values, before", "cpu values, after"]
    print(f"{'contract':>8}  {'unhooked':>8}  " + "  ".join(f"{h:>18}" for h in heads))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        before = _extract(args.before, Path(tmp, "before"))
        for only in args.only or ("plan", "pack", "zigzag"):
            best: dict[tuple[str, str], dict] = {}
            off = []
            for name, body in configs.items():
                config = Path(tmp, f"{name}.toml")
                config.write_text(body)
                sides = ("before", "after")
                for i in range(args.rounds):
                    for side in (sides if i % 2 == 0 else sides[::-1]):
                        result = _run_calls(config, args.calls, args.median, only, before if side == "before" else None,
                                            args.fresh)
                        if result["violations"] or result["notes"]:
                            print(f"  {only} {name} {side}: {result['violations']} violations, {result['notes']} notes")
                            failed = 1
                        if result.get("inline"):
                            print(f"  {only} {name} {side}: {result['inline']} calls checked in the call (queue full)")
                        kept = best.get((name, side))
                        if kept is None or result["best"] < kept["best"]:
                            best[name, side] = {**result, "cpu": min(result.get("cpu", 1.0),
                                                                     kept["cpu"] if kept else 1.0)}
                        elif result.get("cpu", 1.0) < kept["cpu"]:
                            kept["cpu"] = result["cpu"]
                        off.append(result["off"])
            cells = [_cell(best["shapes", "before"]), _cell(best["shapes", "after"]), _cell(best["inline", "before"]),
                     _cell(best["inline", "after"]), _cell(best["values", "before"]), _cell(best["values", "after"]),
                     f"{best['values', 'before'].get('cpu', float('nan')) * 1e6:.0f}",
                     f"{best['values', 'after']['cpu'] * 1e6:.0f}"
                     f" (worker {best['values', 'after'].get('worker', 0) * 1e6:.0f})"]
            print(f"{only:>8}  {min(off) * 1e6:>5.0f} us  " + "  ".join(f"{c:>18}" for c in cells))
    return failed


def per_contract(args: argparse.Namespace, configs: dict[str, str]) -> int:
    if args.before:
        return side_by_side(args, configs)
    print(f"packthd: 64 episodes (median {args.median} tokens) packed as one micro-batch, cp=2 (rank 1), tp=2; "
          f"one contract installed, its function called {args.calls} times hooked and unhooked, alternating; "
          f"{args.root or ROOT}; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'contract':>8}  {'samples a call':>14}  {'unhooked':>9}  {'shapes, per call':>16}  {'values, per call':>16}"
          f"  {'inline, per call':>16}  {'cpu values':>16}"
          "   (best hooked call - best unhooked; median of neighbouring pairs; the checks' CPU per call)")
    with tempfile.TemporaryDirectory() as tmp:
        for only, samples in (("plan", 64), ("pack", 64), ("zigzag", 1)):
            row, off, cpu = [], 0.0, ""
            for name, body in configs.items():
                config = Path(tmp, f"{name}.toml")
                config.write_text(body if args.root is None else re.sub(r'\nvalue-checks = "[a-z]+"', "", body))
                result = _run_calls(config, args.calls, args.median, only, args.root, args.fresh)
                if result["checked"] != 2 * args.calls and result["checked"] != args.calls:
                    print(f"  {only} {name}: {result['checked']} calls checked of {args.calls}")
                row.append(f"{_cell(result)} us")
                off = result["off"]
                if name == "values":
                    cpu = f"{result.get('cpu', float('nan')) * 1e6:.0f} (worker {result.get('worker', 0) * 1e6:.0f})"
                if result["violations"] or result["notes"]:
                    print(f"  {only} {name}: {result['violations']} violations, {result['notes']} notes")
            print(f"{only:>8}  {samples:>14}  {off * 1e6:>6.0f} us  {row[0]:>16}  {row[1]:>16}  {row[2]:>16}  {cpu:>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
