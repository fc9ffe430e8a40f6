"""Interpreter start-up with and without layoutcheck's start-up files, side by side in one run.

Usage::

    python benchmarks/startup_cost.py [--runs N]

What it measures: the issue's promise that installing layoutcheck costs a
process nothing while ``LAYOUTCHECK`` is unset (target: under 1 ms more for
``python -c pass``). A fresh virtual environment without any packages is
made in a temporary folder; ``python -c pass`` runs there ``--runs`` times
without layoutcheck's start-up files and ``--runs`` times with them copied
into its site-packages (``a0_layoutcheck.pth``, ``a0_layoutcheck.start``,
``_layoutcheck_startup.py``), alternating run for run so that a busy machine
slows both alike. It prints the medians, their difference and the ratio,
then the cost with ``LAYOUTCHECK=raise`` set but nothing to hook (import
layoutcheck, read the configuration, print why nothing is checked), for
scale.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

STARTUP = Path(__file__).resolve().parent.parent / "startup"
FILES = ("a0_layoutcheck.pth", "a0_layoutcheck.start", "_layoutcheck_startup.py")


def _time(python: Path, env: dict[str, str], cwd: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", "pass"], env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per variant (default 40)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare, with_files = root / "bare", root / "with"
        for where in (bare, with_files):
            venv.EnvBuilder(with_pip=False).create(where)
        python_bare, python_with = bare / "bin" / "python", with_files / "bin" / "python"
        site = Path(subprocess.run(
            [str(python_with), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip())
        for name in FILES:
            shutil.copy(STARTUP / name, site / name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}
        env.pop("PYTHONPATH", None)
        for python in (python_bare, python_with):  # warm the page cache and the .pyc files
            _time(python, env)
        without, withf = [], []
        for _ in range(args.runs):
            without.append(_time(python_bare, env))
            withf.append(_time(python_with, env))
        a, b = statistics.median(without), statistics.median(withf)
        print(f"python -c pass, {args.runs} runs each, alternating (median):")
        print(f"  without layoutcheck's start-up files   {a * 1e3:7.2f} ms")
        print(f"  with them, LAYOUTCHECK unset           {b * 1e3:7.2f} ms")
        print(f"  difference                             {(b - a) * 1e3:+7.2f} ms  (ratio {b / a:.3f}; target < 1 ms)")
        status = "PASS" if b - a < 1e-3 else "MISS"
        print(f"  {status}")
    # For scale: the real installation, with the variable set and no hooks configured.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LAYOUTCHECK")}, "LAYOUTCHECK": "raise"}
    with tempfile.TemporaryDirectory() as empty:
        plain = [_time(Path(sys.executable), {**env, "LAYOUTCHECK": "0"}, empty) for _ in range(5)]
        runs = [_time(Path(sys.executable), env, empty) for _ in range(5)]
    print(f"this interpreter, LAYOUTCHECK=0: {statistics.median(plain) * 1e3:.1f} ms")
    print(f"this interpreter, LAYOUTCHECK=raise with nothing to hook: {statistics.median(runs) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
