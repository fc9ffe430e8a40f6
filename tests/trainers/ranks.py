"""Ranks of a trainer run: real processes joined by a real gloo process group on loopback.

Parent side: `launch` starts ``world`` processes running one command, each
with ``RANK``/``WORLD_SIZE``, a file store of the run's own (no port to pick),
the given ``PYTHONPATH`` and parameters, and waits for all of them; a rank
that outlives the deadline is stopped (with everything it started) and named.

Rank side: `init_process_group` joins the group from that environment,
`params` reads the parameters, and `report` / `attempt` record what the rank
saw as JSON, written to ``<out>/rank<r>.json`` by `write_report` (the
bootstraps call it at exit). An exception inside `attempt` is recorded as
``{"error": {"type", "message"}}``: a trainer bug is a result, not a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

__all__ = ["TESTS", "RankRun", "attempt", "error_of", "init_process_group", "launch", "main_guard", "params", "report",
           "run_script", "signatures", "write_report"]

TESTS = Path(__file__).resolve().parent.parent
"""The suite's ``tests/`` folder: on every rank's path, so ``trainers`` imports there."""

_ENV_STORE = "LAYOUTCHECK_HARNESS_STORE"
_ENV_OUT = "LAYOUTCHECK_HARNESS_OUT"
_ENV_PARAMS = "LAYOUTCHECK_HARNESS_PARAMS"


@dataclass(frozen=True)
class RankRun:
    """One rank's end: exit code, output tails and what it reported (``None`` if it wrote nothing)."""

    rank: int
    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any] | None

    def __getitem__(self, key: str) -> Any:
        """A reported value; fails with the rank's output when the rank did not report it."""
        if self.result is None or key not in self.result:
            raise KeyError(f"rank {self.rank} did not report {key!r} (exit {self.returncode}); "
                           f"stderr:\n{self.stderr[-4000:]}")
        return self.result[key]


def launch(world: int, argv: Sequence[str], *, out: Path, pythonpath: Sequence[Path | str] = (),
           parameters: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
           timeout: float = 300.0) -> list[RankRun]:
    """Run ``python argv...`` as ``world`` ranks of one gloo group; every rank's `RankRun`, in rank order.

    ``pythonpath`` comes first on the ranks' path, then ``tests/`` (for ``trainers``). The ranks get this
    process's environment without its ``LAYOUTCHECK*`` and ``RAY_*`` variables, plus ``env`` (e.g.
    ``{"LAYOUTCHECK": "raise", "LAYOUTCHECK_CONFIG": ...}`` to debug the trainer). Raises `AssertionError`
    naming the ranks still running after ``timeout`` seconds (they are stopped first).
    """
    from isolation import loopback_env, stop_session

    out.mkdir(parents=True, exist_ok=True)
    store = out / "store"
    if store.exists():
        store.unlink()  # a file store must start empty
    # a debug-mode or Ray setting of the test process must not reach the trainer unless ``env`` says so
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LAYOUTCHECK", "RAY_"))}
    base.update(loopback_env())
    base.update(env or {})
    paths = [str(p) for p in pythonpath] + [str(TESTS)]
    if base.get("PYTHONPATH"):
        paths.append(base["PYTHONPATH"])
    base.update({"PYTHONPATH": os.pathsep.join(paths), _ENV_STORE: str(store), _ENV_OUT: str(out),
                 _ENV_PARAMS: json.dumps(dict(parameters or {})), "WORLD_SIZE": str(world), "PYTHONUNBUFFERED": "1"})
    procs = []
    for rank in range(world):
        rank_env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank)}
        (out / f"rank{rank}.json").unlink(missing_ok=True)
        stdout = open(out / f"rank{rank}.out", "w")
        stderr = open(out / f"rank{rank}.err", "w")
        procs.append((subprocess.Popen([sys.executable, *argv], env=rank_env, stdout=stdout, stderr=stderr,
                                       start_new_session=True), stdout, stderr))
    end = time.monotonic() + timeout
    hung = []
    for rank, (proc, stdout, stderr) in enumerate(procs):
        try:
            proc.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung.append(rank)
    for proc, stdout, stderr in procs:
        stop_session(proc.pid)  # what a rank started (a gloo helper, a Ray worker) goes with it
        proc.wait()
        stdout.close()
        stderr.close()
    runs = []
    for rank, (proc, _, _) in enumerate(procs):
        path = out / f"rank{rank}.json"
        runs.append(RankRun(rank, proc.returncode, (out / f"rank{rank}.out").read_text(),
                            (out / f"rank{rank}.err").read_text(),
                            json.loads(path.read_text()) if path.exists() else None))
    if hung:
        tails = "\n".join(f"rank {r} stderr:\n{runs[r].stderr[-2000:]}" for r in hung)
        raise AssertionError(f"ranks {hung} of {list(argv)} still running after {timeout} s: stopped\n{tails}")
    return runs


# ---------------------------------------------------------------- in a rank

_REPORT: dict[str, Any] = {}


def init_process_group() -> tuple[int, int]:
    """Join the run's gloo group; ``(rank, world)``."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"file://{os.environ[_ENV_STORE]}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    return rank, world


def params() -> dict[str, Any]:
    """The parameters the parent passed to `launch`."""
    return json.loads(os.environ.get(_ENV_PARAMS, "{}"))


def report(key: str, value: Any) -> None:
    """Record ``value`` (JSON-able) under ``key`` in this rank's report."""
    _REPORT[key] = value


def error_of(exc: BaseException) -> dict[str, str]:
    """An exception as a report entry: its type, message and the innermost frames."""
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    return {"type": type(exc).__name__, "message": str(exc),
            "where": [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames]}


def attempt(key: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; report ``{"value": fn(...)}`` under ``key``, or ``{"error": ...}`` if it raised (then None)."""
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:  # a trainer's exception is what the harness is here to see
        report(key, {"error": error_of(exc)})
        return None
    report(key, {"value": value})
    return value


def write_report() -> None:
    """Write this rank's report to ``<out>/rank<r>.json``."""
    path = Path(os.environ[_ENV_OUT]) / f"rank{os.environ['RANK']}.json"
    path.write_text(json.dumps(_REPORT))


def signatures(names: Sequence[str]) -> dict[str, str]:
    """``module:qualified.name`` -> ``str(inspect.signature(...))`` of the code this rank imports."""
    import importlib
    import inspect

    found = {}
    for dotted in names:
        module, name = dotted.split(":")
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
        found[dotted] = str(inspect.signature(obj))
    return found


def run_script(target: str) -> None:
    """Run ``target`` as ``__main__``: a path to a ``.py`` file, or a module name."""
    import runpy

    if target.endswith(".py"):
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)


def main_guard(body: Callable[[], None]) -> None:
    """Run a rank's ``body``, record an uncaught exception as ``"crash"``, and always write the report.

    A rank that finished its work ends through `_exit_after_handlers`, not the interpreter's teardown.
    """
    try:
        body()
    except BaseException as exc:
        report("crash", error_of(exc))
        write_report()
        raise
    finally:
        _leave_group()
    write_report()
    _exit_after_handlers()


def _leave_group() -> None:
    """Destroy the rank's process groups, if it joined one, before the interpreter's teardown."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _exit_after_handlers() -> None:
    """Run the exit handlers (layoutcheck's summary and run report among them), flush, and end with status 0.

    The interpreter's teardown after them is skipped: with the groups destroyed, a rank still aborted
    there now and then on a loaded 2-core CI machine, after its work and its report ("terminate called
    without an active exception", exit -6, from C++ threads of the libraries it imports). A handler that
    fails the run (layoutcheck's raise mode) still ends the process with its own status.
    """
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)
