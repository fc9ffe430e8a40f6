"""What the run report costs per rollout over a long run: the old rewrite against the appended JSON Lines, side by side.

Usage::

    python benchmarks/report_cost.py [--rollouts 1000] [--samples 64] [--micro-batch-size 4] [--bug]

One process runs the reference data path (`fixtures/minitrainer`, the hooks
of ``fixtures/debug-run.toml``, record mode, cp=2) for ``--rollouts``
rollouts of long-tailed samples (median about 1.3k tokens, one 14,010-token
outlier), with a run report configured. Two writes are timed:

* ``append`` (what a debug run does now): the session's own write at the
  start of each rollout, the JSON Lines chunk of what is new since the last
  one (`layoutcheck.runtime.reporting.runlog`), timed around the call the
  session makes;
* ``rewrite`` (what it did before issue 19): the whole report as one JSON
  document, written atomically (`Session.write_report(path)`), timed at the
  same points of the same run, so both see the same state.

``--bug`` switches the rollout-global padding bug on: every rollout then
adds violations (O2, O3, ...), up to the recorder's limit of 10,000, which
is what made the rewrite grow. The table gives each write's time at
rollouts 1, 10, 100 and 1,000 (the median of that rollout and the four
after it, where there are four), the size of the report, and the data path's
own time per rollout for scale.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fixtures"))

CHECKPOINTS = (1, 10, 100, 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1000, help="rollouts in the run (default 1000)")
    parser.add_argument("--samples", type=int, default=64, help="samples per rollout (default 64)")
    parser.add_argument("--micro-batch-size", type=int, default=4, help="B (default 4)")
    parser.add_argument("--bug", action="store_true", help="rollout-global padding: violations every rollout")
    args = parser.parse_args(argv)

    import torch
    from minitrainer.actor import TrainActor
    from minitrainer.args import make_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import long_tailed_lengths, make_rollout_ref

    from layoutcheck.configfile import load_config
    from layoutcheck.runtime.activation.session import Session

    torch.set_num_threads(1)
    checkpoints = [c for c in CHECKPOINTS if c <= args.rollouts]
    timed = {c + i for c in checkpoints for i in range(5) if c + i <= args.rollouts}
    refs = [make_rollout_ref(long_tailed_lengths(args.samples, seed=s), seed=s) for s in range(8)]

    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_config(ROOT / "fixtures" / "debug-run.toml")
        settings, _ = loaded.runtime_settings()
        settings = dataclasses.replace(settings, mode="record", summary=False, report=str(Path(tmp, "run.jsonl")))
        session = Session(settings, config_file=loaded.path, root=loaded.root, key_prefix=loaded.key_prefix)
        appended: dict[int, float] = {}
        rewritten: dict[int, float] = {}
        step: list[float] = []
        own_write = session.write_report

        def timed_append(*a: object, **kw: object) -> Path:
            start = time.perf_counter()
            try:
                return own_write(*a, **kw)
            finally:
                appended[session.checker.rollouts] = time.perf_counter() - start

        session.write_report = timed_append  # type: ignore[method-assign]  # the session's own appends, timed
        try:
            bugs = {"rollout_global_padding"} if args.bug else set()
            with parallel_state(cp_size=2, cp_rank=0):
                actor = TrainActor(make_args(bugs=bugs, micro_batch_size=args.micro_batch_size))
                for r in range(1, args.rollouts + 1):
                    start = time.perf_counter()
                    actor.train(r, refs[r % len(refs)])
                    step.append(time.perf_counter() - start)
                    if r in timed:  # the old way, at the same state: the whole report, rewritten
                        start = time.perf_counter()
                        own_write(Path(tmp, "run.json"))
                        rewritten[r] = time.perf_counter() - start
            own_write()  # the end chunk, as at exit
            jsonl = Path(tmp, "run.jsonl").stat().st_size
            document = Path(tmp, "run.json").stat().st_size
            from layoutcheck.runtime.reporting.runreport import load_run_report

            start = time.perf_counter()
            report = load_run_report(Path(tmp, "run.jsonl"))
            read = time.perf_counter() - start
        finally:
            session.close()

    print(f"reference data path: {args.rollouts} rollouts of {args.samples} samples, B={args.micro_batch_size}, cp=2, "
          f"record mode{', rollout-global padding bug on' if args.bug else ''}; "
          f"data path {statistics.median(step) * 1e3:.1f} ms per rollout (median, hooks on)")
    print(f"{'rollout':>8}  {'violations':>10}  {'rewrite (before)':>16}  {'append (now)':>12}  {'ratio':>6}")
    for c in checkpoints:
        window = [r for r in range(c, c + 5) if r in rewritten and r in appended]
        before = statistics.median(rewritten[r] for r in window)
        after = statistics.median(appended[r] for r in window)
        violations = sum(1 for v in report.violations if v.rollout is not None and v.rollout < c)
        print(f"{c:>8}  {violations:>10}  {before * 1e3:13.2f} ms  {after * 1e3:9.2f} ms  {before / after:6.1f}")
    print(f"report: {jsonl / 1e6:.2f} MB of JSON Lines ({document / 1e6:.2f} MB as one document); read back in "
          f"{read:.2f} s: {len(report.violations)} violations, {report.totals.rollouts} rollouts, "
          f"{len(report.samples)} samples and {len(report.micro_batches)} micro-batches kept, "
          f"complete={report.complete}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
