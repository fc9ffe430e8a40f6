"""A training job for the debug-mode tests: the reference pipeline, once correct and once per bug flag.

Run as a script (``python tests/debug_run.py OUT.json [--buckets]``), under
``torchrun`` (the CP rank is the launcher's ``RANK``), or called in a Ray
actor (`run_cases`). It never mentions layoutcheck's hooks: whatever checks
happen are the ones the ``LAYOUTCHECK`` environment variable switched on.
It catches each case's `LayoutError` only to go on to the next case, and
writes what each one raised, per rank, to a JSON file.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from bugcases import CASES, CP, LENGTHS, MEDIA


def run_cases(buckets: bool = False, rank: int | None = None, only: str | None = None) -> dict[str, Any]:
    """``{"clean@r": ..., case: {"type", "invariants", "message"}}`` on CP rank ``rank`` (``None``: each case's own).

    ``buckets``: the cases that need static shape buckets (the others do not
    run). ``only``: just that case, after the clean runs.
    """
    from minitrainer.actor import TrainActor
    from minitrainer.args import make_args
    from minitrainer.parallel import parallel_state
    from minitrainer.rollout import make_rollout_ref

    refs = [make_rollout_ref(LENGTHS, seed=3, media=MEDIA), make_rollout_ref(LENGTHS[::-1], seed=4)]
    out: dict[str, Any] = {"pid": os.getpid(), "env": os.environ.get("LAYOUTCHECK")}

    def train(args: Any, cp_rank: int) -> dict[str, Any]:
        with parallel_state(cp_size=CP, cp_rank=cp_rank):
            actor = TrainActor(args)
            try:
                for i, ref in enumerate(refs):  # two rollouts per case: state carries over correctly
                    actor.train(i, ref)
            except Exception as err:  # noqa: BLE001 - what the step raised is the result
                return {"type": type(err).__name__, "message": str(err),
                        "invariants": sorted({v.invariant for v in getattr(err, "violations", ())})}
        return {"type": None, "invariants": []}

    base = {"buckets": CASES["wrong_bucket"].args["buckets"]} if buckets else {}
    traced = os.environ.get("LAYOUTCHECK_TRACE") == "1"  # the cases only the tracer sees run only with it on
    for r in range(CP) if rank is None else [rank]:
        out[f"clean@{r}"] = train(make_args(**base), r)
    out["session"] = _session()
    for name, case in CASES.items():
        if case.buckets == buckets and (traced or not case.tracer) and only in (None, name):
            out[name] = train(make_args(bugs={name}, **case.args), case.rank if rank is None else rank)
    return out


def _session() -> dict[str, Any] | None:
    activation = sys.modules.get("layoutcheck.runtime.activation.session")
    session = activation.active_session() if activation is not None else None
    if session is None:
        return None
    return {"violations": len(session.violations), "notes": list(session.notes), "summary": session.summary(),
            "hooks": [str(s) for s in session.hooks]}


if __name__ == "__main__":
    rank = int(os.environ["RANK"]) if "RANK" in os.environ else None
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    result = run_cases("--buckets" in sys.argv, rank, only)
    target = Path(sys.argv[1])
    if rank is not None:
        target = target.with_name(f"{target.stem}.{rank}{target.suffix}")
    target.write_text(json.dumps(result))
