"""One rank of the cross-rank tests: a real gloo process group on loopback, running scenarios in order.

`run_job` (called by tests/test_distributed.py) spawns ``world`` processes
that each join one process group and run the named scenarios one after the
other, so a test file pays for one group start-up. Each scenario writes
``<out>/<scenario>.<rank>.json``: the X1 violations this rank saw (recorded,
or carried by a `LayoutError`), or the error it raised. A scenario that
kills a rank must come last.

The batch-builder check is driven by the reference pipeline
(``minitrainer.actor.train_step``), its ``get_batch`` rebound in the module
that calls it, as a hook would: each micro-batch's ``P``, samples, lengths
and scheme go to `CrossRankChecker.check_batch`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TIMEOUT = 2.0
"""The cross-rank timeout the scenarios use (seconds)."""

LENGTHS = [300, 130, 700, 520, 90, 260]
"""True lengths of the shared rollout: short samples get a much larger P under rollout-global padding."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(world: int, scenarios: Sequence[str], out: Path, *, deadline: float = 120.0) -> dict[str, dict[int, Any]]:
    """Spawn ``world`` ranks running ``scenarios``; ``{scenario: {rank: result}}``. Never waits past ``deadline``."""
    ctx = multiprocessing.get_context("spawn")
    port = free_port()
    procs = [ctx.Process(target=main, args=(rank, world, port, str(out), list(scenarios))) for rank in range(world)]
    for p in procs:
        p.start()
    end = time.monotonic() + deadline
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))
    hung = [rank for rank, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    if hung:
        raise AssertionError(f"ranks {hung} still running after {deadline} s: an exchange hung")
    results: dict[str, dict[int, Any]] = {}
    for scenario in scenarios:
        results[scenario] = {}
        for rank in range(world):
            path = out / f"{scenario}.{rank}.json"
            results[scenario][rank] = json.loads(path.read_text()) if path.exists() else None
    return results


# ---------------------------------------------------------------- in the rank


def _result(found: Sequence[Any] = (), error: BaseException | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"violations": [v.to_dict() for v in found], **extra}
    if error is not None:
        out["error"] = {"type": type(error).__name__, "message": str(error),
                        "missing": list(getattr(error, "missing", ()))}
        if hasattr(error, "violations"):
            out["violations"] = [v.to_dict() for v in error.violations]
    return out


def _pipeline(xr: Any, args: Any, ref: Any, *, ps: dict[str, int], before: Callable[[int], None] | None = None) -> int:
    """Run one train step of the reference pipeline with the cross-rank check on its batch builder."""
    from minitrainer import model
    from minitrainer.parallel_state import parallel_state

    from layoutcheck.runtime.adapters import MilesAdapter

    adapter = MilesAdapter()
    real = model.get_batch
    calls = [0]

    def checked(data_iterator: Any, keys: Any, pad_multiplier: int = 128, qkv_format: str = "thd",
                get_position_ids: bool = False, allgather_cp: bool = False) -> Any:
        k = adapter.next_micro_batch(data_iterator)
        k = calls[0] if k is None else k
        samples = adapter.micro_batch_samples(data_iterator, k)
        if before is not None:
            before(k)
        batch = real(data_iterator, keys, pad_multiplier, qkv_format, get_position_ids, allgather_cp)
        calls[0] += 1
        # P as the builder took it; G1 (not this test) judges whether the micro-batch agrees on it
        padded = batch["max_seq_lens"][0] if qkv_format == "bshd" else None  # layoutcheck: ignore[unguarded-rectangular-batch]
        xr.check_batch(
            k, padded=padded, samples=samples,
            lengths=list(batch["total_lengths"]), scheme="allgather" if allgather_cp else "zigzag",
            qkv_format=qkv_format,
        )
        return batch

    from minitrainer.actor import train_step

    model.get_batch = checked
    try:
        with parallel_state(**ps):
            train_step(args, ref)
    finally:
        model.get_batch = real
    return calls[0]


def _run(name: str, rank: int, world: int) -> dict[str, Any]:
    from minitrainer.args import make_args
    from minitrainer.rollout import make_rollout_ref

    from layoutcheck import LayoutError
    from layoutcheck.runtime.distributed import CrossRankChecker, CrossRankTimeout

    ref = make_rollout_ref(LENGTHS)
    if name == "agree":  # every rank of the world is one CP group; one pipeline step in record mode
        xr = CrossRankChecker(cp_size=world, timeout=TIMEOUT, mode="record")
        batches = _pipeline(xr, make_args(), ref, ps={"cp_size": world, "cp_rank": rank})
        return _result(xr.recorder.violations, exchanges=xr.exchanges, batches=batches, notes=xr.recorder.notes)
    if name == "agree_dp":  # cp=2 x dp=2: the DP groups hold different samples, which is not a disagreement
        xr = CrossRankChecker(cp_size=2, timeout=TIMEOUT, mode="raise")
        ps = {"cp_size": 2, "cp_rank": rank % 2, "dp_size": world // 2, "dp_rank": rank // 2}
        batches = _pipeline(xr, make_args(), make_rollout_ref(LENGTHS + [410, 610]), ps=ps)
        # A trainer's parallel state with process groups (Miles: `.cp.group`) names the CP group itself;
        # here the CP groups are [0, 2] and [1, 3], which sizes alone would not give.
        import torch.distributed as dist

        groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
        state = SimpleNamespace(cp=SimpleNamespace(group=groups[rank % 2], rank=rank // 2, size=2))
        from_state = CrossRankChecker(parallel_state=lambda: state, timeout=TIMEOUT)
        from_state.check_batch(0, padded=256 * (1 + rank % 2), samples=[rank % 2])  # agree within [0, 2], [1, 3]
        return _result(exchanges=xr.exchanges, batches=batches, ranks=list(xr.ranks),
                       state_ranks=list(from_state.ranks), state_exchanges=from_state.exchanges)
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
    if name == "bug":  # the last rank runs the pipeline with rollout-global padding, in raise mode
        xr = CrossRankChecker(cp_size=world, timeout=TIMEOUT, mode="raise")
        args = make_args(bugs={"rollout_global_padding"} if rank == world - 1 else set())
        try:
            _pipeline(xr, args, ref, ps={"cp_size": world, "cp_rank": rank})
        except LayoutError as err:
            return _result(error=err, exchanges=xr.exchanges)
        return _result(exchanges=xr.exchanges)
    if name == "metadata":  # direct calls, every 2nd: rank 1 reorders micro-batch 2 and pads its replay differently
        xr = CrossRankChecker(list(range(world)), timeout=TIMEOUT, mode="record", every=2)
        for k in range(6):
            samples = [2 * k + 1, 2 * k] if (rank == 1 and k == 2) else [2 * k, 2 * k + 1]
            xr.check_batch(k, padded=512, samples=samples, lengths=[400, 300], scheme="zigzag", qkv_format="bshd")
            xr.check_replay(k, padded=640 if (rank == 1 and k == 4) else 512, samples=samples)
        return _result(xr.recorder.violations, exchanges=xr.exchanges)
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
    if name == "kill":  # the last rank dies at micro-batch 2; the others must raise, not hang
        xr = CrossRankChecker(cp_size=world, timeout=TIMEOUT, mode="raise")

        def die(k: int) -> None:
            if rank == world - 1 and k == 2:
                os._exit(17)

        start = time.monotonic()
        try:
            _pipeline(xr, make_args(), ref, ps={"cp_size": world, "cp_rank": rank}, before=die)
        except CrossRankTimeout as err:
            return _result(error=err, exchanges=xr.exchanges, seconds=time.monotonic() - start)
        return _result(exchanges=xr.exchanges)
    raise ValueError(f"unknown scenario {name!r}")


def main(rank: int, world: int, port: int, out: str, scenarios: list[str]) -> None:
    """The body of one spawned rank."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=30))
    for name in scenarios:
        try:
            result = _run(name, rank, world)
        except Exception as err:  # noqa: BLE001 - an unexpected error is a result the test shows
            result = _result(error=err, traceback=traceback.format_exc())
        Path(out, f"{name}.{rank}.json").write_text(json.dumps(result))
    if rank == 0:
        # Rank 0 hosts the store: stay until the other live ranks are done with it.
        dead = {world - 1} if "kill" in scenarios else set()
        end = time.monotonic() + 3 * TIMEOUT + 5
        last = Path(out, f"{scenarios[-1]}")
        while time.monotonic() < end and not all(
            Path(f"{last}.{r}.json").exists() for r in range(1, world) if r not in dead
        ):
            time.sleep(0.05)
    sys.stdout.flush()
    # A dead peer (the kill scenario) can make a clean shutdown wait: leave without it.
    os._exit(0)
