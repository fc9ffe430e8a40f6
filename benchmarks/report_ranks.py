"""Time and peak memory of ``layoutcheck report`` over a job's rank reports, against one report, in one run.

Usage::

    python benchmarks/report_ranks.py [--ranks 128] [--repeat 3] [--keep DIR]

Writes ``--ranks`` synthetic run reports of one job (`fixtures/rankreports.py`:
built with the run-report model, each the size the debug mode writes by
default: the samples of 4 of 8 rollouts of 256, the first 512 micro-batches,
whole-run totals; CP groups of 2 ranks), then runs ``layoutcheck report``
as a fresh process on 1, 8, 32 and all of them (a folder for the job rows),
best of ``--repeat``, and prints wall time, time per rank beyond the
one-report run, and the peak resident memory of the process (its
``ru_maxrss``). The reports are read one at a time, so the time should grow
linearly with the ranks and the memory stay flat. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures"))


def write_job(folder: Path, ranks: int) -> int:
    """Write ``ranks`` reports into ``folder`` (a few with planted bugs); returns the bytes written."""
    from rankreports import rank_report

    size = 0
    for rank in range(ranks):
        report = rank_report(rank, ranks, global_padding={5} if rank in (2, 3) else (),
                             other_p=rank == 5, short_schedule=rank == 6)
        text = report.to_json()
        (folder / f"run.rank{rank}.json").write_text(text)
        size += len(text)
    return size


def measure(args: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of ``layoutcheck report ARGS`` as a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "layoutcheck", "report", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"layoutcheck report {' '.join(args[:2])}... failed: {proc.stderr.read().decode()}")
    proc.stderr.close()
    return seconds, usage.ru_maxrss * 1024  # kilobytes on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="write the reports here and keep them")
    args = parser.parse_args()

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="report_ranks_"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        size = write_job(folder, args.ranks)
        print(f"{args.ranks} rank reports, {size / args.ranks / 1e3:.0f} kB each ({size / 1e6:.1f} MB) in {folder}")
        files = sorted(folder.glob("*.json"), key=lambda p: int(p.stem.rpartition("rank")[2]))
        counts = sorted({1, min(8, args.ranks), min(32, args.ranks), args.ranks})
        rows = []
        for n in counts:
            target = [str(folder)] if n == args.ranks else [str(p) for p in files[:n]]
            best = min((measure(target) for _ in range(args.repeat)), key=lambda m: m[0])
            rows.append((n, *best))
        one_time, one_memory = rows[0][1], rows[0][2]
        print()
        print("| reports | wall time | per rank beyond one report | peak memory | memory vs one report |")
        print("| --- | --- | --- | --- | --- |")
        for n, seconds, memory in rows:
            per = f"{(seconds - one_time) / (n - 1) * 1e3:.0f} ms" if n > 1 else "-"
            print(f"| {n} | {seconds:.2f} s | {per} | {memory / 2**20:.0f} MiB | {memory / one_memory:.2f}x |")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
