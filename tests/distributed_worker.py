"""One rank of the cross-rank tests: a real gloo process group on loopback, running scenarios in order.

`run_job` (called by tests/test_distributed.py) starts ``world`` processes
that each join one process group and run the named scenarios one after the
other, so a test file pays for one group start-up. Each scenario writes
``<out>/<scenario>.<rank>.json``: the X1 violations this rank saw (recorded,
or carried by a `LayoutError`), or the error it raised. A scenario that
kills a rank must come last.

The pipeline scenarios run the reference pipeline (``minitrainer.actor.train_step``)
with layoutcheck activated from a configuration in each rank, as a debug run
is: the batch-builder and replay-filler hooks make the cross-rank exchange
themselves. The other scenarios call `CrossRankChecker` directly.
"""

from __future__ import annotations

import faulthandler
import json
import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from isolation import loopback_env

TIMEOUT = 2.0
"""The cross-rank timeout the scenarios use (seconds)."""
KILL_TIMEOUT = 20.0
"""The cross-rank timeout of the scenarios that kill a rank: long, so that a report made before it shows."""

LENGTHS = [300, 130, 700, 520, 90, 260]
"""True lengths of the shared rollout: short samples get a much larger P under rollout-global padding."""


def run_job(world: int, scenarios: Sequence[str], out: Path, *, deadline: float = 240.0) -> dict[str, dict[int, Any]]:
    """Start ``world`` ranks running ``scenarios``; ``{scenario: {rank: result}}``. Never waits past ``deadline``."""
    # One spawned process (`_launch`) imports torch and forks the ranks: torch's import (seconds of CPU, the
    # bulk of a job on 2 cores) is paid once a job, not once a rank. It waits for them in rank order, as a
    # parent of spawned ranks does, so a rank that dies stays unreaped (a zombie) while rank 0 still runs, as
    # under a launcher that reaps late: the survivors' liveness check meets that case too.
    ctx = multiprocessing.get_context("spawn")
    # A file store in the job's own folder: no port to pick, nothing shared with another run on the machine.
    store = out / "store"
    launcher = ctx.Process(target=_launch, args=(world, str(store), str(out), list(scenarios), deadline))
    launcher.start()
    launcher.join(deadline + 60)  # it gives up on its ranks at the deadline: this is only a backstop
    if launcher.is_alive():
        launcher.kill()
        launcher.join()
    hung_file = out / "ranks.hung"
    if not hung_file.exists():
        pids = json.loads((out / "ranks.pids").read_text()) if (out / "ranks.pids").exists() else []
        for pid in pids:  # the ranks it started, by their own ids
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        raise AssertionError(f"the process that starts the ranks failed (exit code {launcher.exitcode}) after "
                             f"starting {pids}")
    hung = json.loads(hung_file.read_text())
    if hung:
        # What each hung rank had finished, and where it stood (its stacks, dumped just before the deadline).
        done = sorted(p.name for p in out.glob("*.json"))
        stacks = "\n".join(f"rank {rank}:\n{(out / f'stack.{rank}.txt').read_text()}" for rank in hung
                           if (out / f"stack.{rank}.txt").exists())
        raise AssertionError(f"ranks {hung} still running after {deadline} s: an exchange hung; results written: "
                             f"{done}\n{stacks}")
    results: dict[str, dict[int, Any]] = {}
    for scenario in scenarios:
        results[scenario] = {}
        for rank in range(world):
            path = out / f"{scenario}.{rank}.json"
            results[scenario][rank] = json.loads(path.read_text()) if path.exists() else None
    return results


def _launch(world: int, store: str, out: str, scenarios: list[str], deadline: float) -> None:
    """Fork the ``world`` ranks of a job (torch imported first), wait for them in rank order, kill what runs past
    ``deadline``; writes their pids to ``ranks.pids`` and the ranks it killed to ``ranks.hung``."""
    import torch.distributed  # noqa: F401 - imported once here, every forked rank has it

    pids = []
    for rank in range(world):
        pid = os.fork()
        if pid == 0:  # the rank
            code = 1
            try:
                main(rank, world, store, out, scenarios, max(1.0, deadline - 5))  # ends with os._exit(0)
            except BaseException:  # noqa: BLE001 - shown on stderr; the rank's missing result fails the test
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    Path(out, "ranks.pids").write_text(json.dumps(pids))
    end = time.monotonic() + deadline
    hung = []
    for rank, pid in enumerate(pids):
        while os.waitpid(pid, os.WNOHANG)[0] == 0:  # reaps this rank only: a dead later rank stays a zombie
            if time.monotonic() >= end:
                hung.append(rank)
                break
            time.sleep(0.05)
    for rank in hung:
        os.kill(pids[rank], signal.SIGKILL)
        os.waitpid(pids[rank], 0)
    Path(out, "ranks.hung").write_text(json.dumps(hung))


# ---------------------------------------------------------------- in the rank


def _result(found: Sequence[Any] = (), error: BaseException | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"violations": [v.to_dict() for v in found], **extra}
    if error is not None:
        out["error"] = {"type": type(error).__name__, "message": str(error),
                        "missing": list(getattr(error, "missing", ()))}
        if hasattr(error, "violations"):
            out["violations"] = [v.to_dict() for v in error.violations]
    return out


CONFIG = """
[runtime]
mode = "record"
parallel-state = "minitrainer.parallel:get_parallel_state"
cross-rank-timeout = {timeout}
[runtime.hooks]
producer = ["minitrainer.data:get_rollout_data"]
batch-builder = ["minitrainer.data:get_batch"]
replay-filler = ["minitrainer.replay_data:fill_replay_data"]
offset-helper = ["minitrainer.cp_utils:get_logits_and_tokens_offset_with_cp"]
"""


def _pipeline(mode: str, args: Any, ref: Any, *, ps: dict[str, int], before: Callable[[int], None] | None = None,
              timeout: float = TIMEOUT, refs: Sequence[Any] = (), end: Callable[[Any], Any] | None = None) -> Any:
    """Train steps of the reference pipeline with layoutcheck's hooks activated from a config, as a debug run has.

    The cross-rank check (X1) is the one the batch-builder and replay-filler
    hooks queue themselves once torch.distributed is up; each step's
    producer call exchanges the step before it. ``ref`` and then ``refs``
    are the steps' rollouts. ``end(checker)`` ends the last step (default
    ``checker.end_step()``, as the next producer call would; the exit
    handler's ``close_cross_rank`` is the other choice). ``before(k)`` runs
    before each ``get_batch`` call (in the caller's module, around the
    hook). Returns the session (its checker holds what was found;
    ``session.ended``: what ``end`` returned).
    """
    from minitrainer import model
    from minitrainer.actor import train_step
    from minitrainer.parallel import parallel_state

    from layoutcheck.runtime import activation

    config = Path(os.environ["LAYOUTCHECK_TEST_OUT"], f"layoutcheck-{timeout:g}.toml")
    if not config.exists():
        config.write_text(CONFIG.format(timeout=timeout))
    activation.deactivate()
    session = activation.activate(mode, config=config)
    hooked, calls = model.get_batch, [0]

    def counted(*a: Any, **kw: Any) -> Any:
        if before is not None:
            before(calls[0])
        calls[0] += 1
        return hooked(*a, **kw)

    model.get_batch = counted
    try:
        with parallel_state(**ps):
            for i, step_ref in enumerate([ref, *refs]):
                train_step(args, step_ref, rollout_id=i)
    finally:
        model.get_batch = hooked
    session.batches = calls[0]
    agreement = session.checker._agreement()
    session.queued = agreement.pending if agreement is not None else None  # None: the check never started
    session.ended = (end or (lambda checker: checker.end_step()))(session.checker)
    return session


def _count_side_group_collectives() -> Callable[[Any], int]:
    """Count every all-gather this process issues; ``count(group)``: those on ``group`` (the calls go through)."""
    import torch.distributed as dist

    real, groups = dist.all_gather, []

    def all_gather(tensor_list: Any, tensor: Any, group: Any = None, async_op: bool = False) -> Any:
        groups.append(group)
        return real(tensor_list, tensor, group=group, async_op=async_op)

    dist.all_gather = all_gather
    return lambda group: sum(g is group for g in groups)


def _x1(session: Any) -> list[Any]:
    return [v for v in session.checker.violations if v.invariant == "X1"]


def _run(name: str, rank: int, world: int) -> dict[str, Any]:
    from minitrainer.args import make_args
    from minitrainer.rollout import make_rollout_ref

    from layoutcheck import LayoutError
    from layoutcheck.runtime.crossrank.distributed import CrossRankChecker, CrossRankTimeout

    ref = make_rollout_ref(LENGTHS)
    if name == "agree":  # every rank of the world is one CP group; one pipeline step in record mode
        session = _pipeline("record", make_args(), ref, ps={"cp_size": world, "cp_rank": rank})
        xr = session.checker._agreement()
        return _result(session.checker.violations, exchanges=xr.exchanges, batches=session.batches,
                       notes=session.checker.notes, pending=session.queued, collectives=xr.collectives)
    if name == "steps":  # three agreeing steps: the side group's all-gathers, counted as torch sees them
        count = _count_side_group_collectives()
        refs = [make_rollout_ref(LENGTHS[::-1], seed=1), make_rollout_ref(LENGTHS[1:] + [333], seed=2)]
        session = _pipeline("raise", make_args(), ref, ps={"cp_size": world, "cp_rank": rank}, refs=refs)
        xr = session.checker._agreement()
        return _result(session.checker.violations, exchanges=xr.exchanges, collectives=count(xr._group),
                       checked=dict(session.checker.checked), calls=dict(xr._calls), notes=session.checker.notes)
    if name == "steps_differ":  # raise mode; rank 1's first rollout differs, which no local check can see
        from layoutcheck import LayoutError

        count = _count_side_group_collectives()
        first = make_rollout_ref([n + 8 for n in LENGTHS] if rank == 1 else LENGTHS)
        try:
            _pipeline("raise", make_args(), first, ps={"cp_size": world, "cp_rank": rank}, refs=[ref])
        except LayoutError as err:
            from layoutcheck.runtime import activation

            session = activation.active_session()
            xr = session.checker._agreement()
            return _result(error=err, collectives=count(xr._group), exchanges=xr.exchanges,
                           rollouts=session.checker.rollouts)
        return _result()
    if name == "agree_dp":  # cp=2 x dp=2: the DP groups hold different samples, which is not a disagreement
        ps = {"cp_size": 2, "cp_rank": rank % 2, "dp_size": world // 2, "dp_rank": rank // 2}
        session = _pipeline("raise", make_args(), make_rollout_ref(LENGTHS + [410, 610]), ps=ps)
        xr = session.checker._agreement()
        # A trainer's parallel state with process groups (Miles: `.cp.group`) names the CP group itself;
        # here the CP groups are [0, 2] and [1, 3], which sizes alone would not give.
        import torch.distributed as dist

        groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        state = SimpleNamespace(cp=SimpleNamespace(group=groups[rank % 2], rank=rank // 2, size=2))
        from_state = CrossRankChecker(parallel_state=lambda: state, timeout=TIMEOUT)
        from_state.check_batch(0, padded=256 * (1 + rank % 2), samples=[rank % 2])  # agree within [0, 2], [1, 3]
        return _result(session.checker.violations, exchanges=xr.exchanges, batches=session.batches,
                       ranks=list(xr.ranks), state_ranks=list(from_state.ranks),
                       state_exchanges=from_state.exchanges)
    if name == "spec":  # bad specifications fail locally, before any exchange
        import torch

        from layoutcheck import LayoutSpecError

        errors = []
        for make in (
            lambda: CrossRankChecker(),
            lambda: CrossRankChecker([1 - rank]),
            lambda: CrossRankChecker(cp_size=3),
            lambda: CrossRankChecker(parallel_state=SimpleNamespace(cp=SimpleNamespace(size=2, rank=1 - rank))),
            lambda: CrossRankChecker(cp_size=2, timeout=0),
            lambda: CrossRankChecker(cp_size=2).check_batch(0, padded=torch.tensor(512)),
        ):
            try:
                make()
            except LayoutSpecError as err:
                errors.append(str(err))
        alone = CrossRankChecker(cp_size=1)  # a CP group of one: nothing to exchange, no side group
        return _result(alone.check_batch(0, padded=512), errors=errors, alone=list(alone.ranks),
                       alone_exchanges=alone.exchanges)
    if name == "bug":  # the last rank's producer pads rollout-globally; record mode, so every rank goes on
        args = make_args(bugs={"rollout_global_padding"} if rank == world - 1 else set())
        session = _pipeline("record", args, ref, ps={"cp_size": world, "cp_rank": rank})
        local = sorted({v.invariant for v in session.checker.violations if v.invariant != "X1"})
        return _result(_x1(session), local=local)
    if name == "metadata":  # direct calls, every 2nd: rank 1 reorders micro-batch 2 and pads its replay differently
        xr = CrossRankChecker(list(range(world)), timeout=TIMEOUT, mode="record", every=2)
        for k in range(6):
            samples = [2 * k + 1, 2 * k] if (rank == 1 and k == 2) else [2 * k, 2 * k + 1]
            xr.check_batch(k, padded=512, samples=samples, lengths=[400, 300], scheme="zigzag", qkv_format="bshd")
            xr.check_replay(k, padded=640 if (rank == 1 and k == 4) else 512, samples=samples)
        return _result(xr.recorder.violations, exchanges=xr.exchanges)
    if name == "boundary":  # a boundary contract's calls: rank 1's third call sees its samples in another order
        from layoutcheck import LayoutChecker
        from layoutcheck.runtime.checker.boundaries import Coordinates
        from layoutcheck.runtime.checker.state import CrossRankOptions
        from layoutcheck.runtime.contract.boundary import parse_boundary, parse_source

        def pack(seqs: list, lengths: list) -> list:
            return list(seqs)

        spec = parse_boundary("worker:pack", {"args": {"seqs": "T", "lengths": "len P"}, "returns": "T", "unit": [8]})
        checker = LayoutChecker("record", cross_rank=CrossRankOptions(timeout=TIMEOUT))
        coordinates = Coordinates(cp_size=parse_source(world), cp_rank=parse_source(rank), tp_size=parse_source(1))
        hooked = checker.wrap_boundary(spec, pack, coordinates)
        import torch

        for k in range(4):  # the run's first boundary opens each step: its calls 2-4 exchange the one before
            sizes = [5, 13, 9] if not (rank == 1 and k == 2) else [13, 5, 9]
            hooked([torch.ones(n) for n in sizes], [-(-n // 8) * 8 for n in sizes])
        xr = checker._boundary_agreement({"cp": world, "tp": 1})
        before_end = xr.exchanges
        checker.end_step()
        return _result(checker.violations, exchanges=xr.exchanges, before_end=before_end, notes=checker.notes)
    if name == "release":  # the trainer destroys every group at its end; the session's exit then closes its own
        import torch.distributed as dist

        from layoutcheck import LayoutChecker
        from layoutcheck.runtime.checker.state import CrossRankOptions

        # `ending`'s last step is exchanged by the exit handler's `close_cross_rank`, the group still up; then the
        # trainer destroys every group, and `checker`'s last step has nothing left to go on. (Both side groups
        # are made first: torch names a new group over the same ranks as one destroyed before it, and its stale
        # addresses would be read.)
        checker = LayoutChecker("record", cross_rank=CrossRankOptions(timeout=TIMEOUT))
        ending = LayoutChecker("raise", cross_rank=CrossRankOptions(timeout=TIMEOUT))
        xr = checker._boundary_agreement({"cp": world, "tp": 1})
        last = ending._boundary_agreement({"cp": world, "tp": 1})
        xr.check_boundary(1, count=2, padded=16, lengths=[5, 9], where="worker:pack")
        checker.end_step()
        last.check_boundary(1, count=2, padded=16, lengths=[5, 9 + rank], where="worker:pack")
        at_exit = ending.close_cross_rank()  # recorded whatever the mode: an exit handler does not raise
        xr.check_boundary(2, count=2, padded=16, lengths=[5, 9], where="worker:pack")  # the last step's
        dist.destroy_process_group()  # as a trainer ends: the side group goes with every other
        checker.close_cross_rank()  # what the session's exit handler does next: nothing left to destroy
        return _result(checker.violations, exchanges=xr.exchanges, initialized=dist.is_initialized(),
                       notes=checker.notes, at_exit=[v.problem for v in at_exit],
                       recorded=[v.problem for v in ending.violations])
    if name == "stop":  # rank 1 skips micro-batch 2's check (busy past the timeout), then checks micro-batch 3
        xr = CrossRankChecker(cp_size=world, timeout=TIMEOUT, mode="raise")
        start = time.monotonic()
        try:
            for k in range(4):
                if rank == 1 and k == 2:
                    time.sleep(TIMEOUT + 1.0)
                    continue
                xr.check_batch(k, padded=512, samples=[k], lengths=[400])
        except CrossRankTimeout as err:
            return _result(error=err, exchanges=xr.exchanges, seconds=time.monotonic() - start)
        return _result(exchanges=xr.exchanges)
    if name == "kill_at_start":
        # The last rank dies before its first check, while the others make theirs (record mode): the side group
        # cannot form. Said once, never retried on later calls (each try would wait out the timeout again).
        if rank == world - 1:
            os._exit(17)
        import torch.distributed as dist

        real, tries = dist.new_group, []

        def new_group(*a: Any, **kw: Any) -> Any:
            tries.append(1)
            return real(*a, **kw)

        dist.new_group = new_group
        try:
            session = _pipeline("record", make_args(), ref, ps={"cp_size": world, "cp_rank": rank}, refs=[ref])
        finally:
            dist.new_group = real
        return _result(session.checker.violations, batches=session.batches, notes=session.checker.notes,
                       groups_tried=len(tries))
    if name in ("kill", "kill_record", "kill_unworded", "kill_late"):
        # The last rank dies before micro-batch 2's exchange. Raise mode: every other rank raises as soon as the
        # transport has lost it, not after the timeout. Record mode: the others note it and finish the step.
        # `seconds` runs from micro-batch 2 (where the rank dies) to the error, or to the step's end.
        start: list[float] = []

        def die(k: int) -> None:
            if k == 2:
                # Every rank has made its first check, and so its side group, before the last one dies: the
                # death measured here is one midway through a step (`kill_at_start` is one during set-up).
                import torch.distributed as dist

                dist.barrier()
                start.append(time.monotonic())
                if rank == world - 1:
                    os._exit(17)
            if name == "kill_late" and rank == 1 and k == 3:
                # This rank reaches the step's exchange after the others have failed on the dead rank and
                # closed their side group: it must fail at once on the closed connections, not time out.
                time.sleep(1.5)

        mode = "record" if name == "kill_record" else "raise"
        if name == "kill_unworded":
            # A transport that words a lost peer otherwise than "connection closed" (a timeout, a peer closing
            # its group): the process's exit is the evidence, not the wording.
            from layoutcheck.runtime.crossrank import distributed

            distributed._connection_lost = lambda err: False
        try:
            session = _pipeline(mode, make_args(), ref, ps={"cp_size": world, "cp_rank": rank}, before=die,
                                timeout=KILL_TIMEOUT, refs=[ref])
        except CrossRankTimeout as err:
            return _result(error=err, seconds=time.monotonic() - start[0], gone=list(err.gone))
        return _result(session.checker.violations, seconds=time.monotonic() - start[0], batches=session.batches,
                       notes=session.checker.notes, checked=dict(session.checker.checked))
    raise ValueError(f"unknown scenario {name!r}")


def main(rank: int, world: int, store: str, out: str, scenarios: list[str], stack_after: float = 235.0) -> None:
    """The body of one spawned rank; its stacks go to ``stack.<rank>.txt`` if it still runs after ``stack_after`` s."""
    import torch.distributed as dist

    stacks = open(Path(out, f"stack.{rank}.txt"), "w")  # noqa: SIM115 - open until the process ends
    faulthandler.dump_traceback_later(stack_after, file=stacks)

    os.environ["LAYOUTCHECK_TEST_OUT"] = out
    os.environ.update(loopback_env())  # gloo's connections on loopback
    # Generous: on a loaded 2-core CI machine four ranks importing torch can arrive tens of seconds apart (a
    # 4-rank job once failed in its set-up there); the scenarios' own timeouts are what the tests measure.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=90))
    for name in scenarios:
        try:
            result = _run(name, rank, world)
        except Exception as err:  # noqa: BLE001 - an unexpected error is a result the test shows
            result = _result(error=err, traceback=traceback.format_exc())
        Path(out, f"{name}.{rank}.json").write_text(json.dumps(result))
    if rank == 0:
        # Rank 0 stays until the other live ranks are done: its exit would close their gloo connections.
        dead = {world - 1} if any(s.startswith("kill") for s in scenarios) else set()
        end = time.monotonic() + 3 * TIMEOUT + 5 + (KILL_TIMEOUT if dead else 0)
        last = Path(out, f"{scenarios[-1]}")
        while time.monotonic() < end and not all(
            Path(f"{last}.{r}.json").exists() for r in range(1, world) if r not in dead
        ):
            time.sleep(0.05)
    sys.stdout.flush()
    # A dead peer (the kill scenario) can make a clean shutdown wait: leave without it.
    os._exit(0)
