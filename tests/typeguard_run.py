"""The reference pipeline under typeguard's import hook, once correct and once per bug flag (a subprocess job).

``python tests/typeguard_run.py OUT.json [--no-session]``: instruments every
``minitrainer`` module with ``typeguard.install_import_hook`` before it is
imported, so each ``Padded`` annotation of the pipeline (``minitrainer.shapes``)
is checked on every call. Every case runs twice: without layoutcheck's hooks
(``untagged``: ``P``, ``L``, ``T``, ``R`` are sizes), then with the debug
mode's session (``tagged``: ``fixtures/debug-run.toml``, tracer on, record
mode; the names read the tensors' tags). Every annotation violation is
collected (``typecheck_fail_callback``), not raised, so a step runs to its
end; the JSON maps each run and case to the violations it produced, each as
``function: typeguard's message``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typeguard
from typeguard import CollectionCheckStrategy, install_import_hook

from bugcases import CASES, CP, LENGTHS, MEDIA

ROOT = Path(__file__).resolve().parent.parent


def main(out: Path, session: bool) -> None:
    found: list[str] = []

    def collect(exc: typeguard.TypeCheckError, memo: typeguard.TypeCheckMemo) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(str(Path(typeguard.__file__).parent)):
            frame = frame.f_back
        function = frame.f_code.co_name if frame is not None else "?"
        found.append(f"{function}: {str(exc)}")

    typeguard.config.typecheck_fail_callback = collect
    typeguard.config.collection_check_strategy = CollectionCheckStrategy.ALL_ITEMS
    with install_import_hook(["minitrainer"]):
        from minitrainer.actor import train_step
        from minitrainer.args import make_args
        from minitrainer.parallel import parallel_state
        from minitrainer.rollout import make_rollout_ref
    ref = make_rollout_ref(LENGTHS, seed=3, media=MEDIA)
    cases = [("correct", None, {}), *((name, name, case.args) for name, case in CASES.items()),
             ("mixed_padded_lengths@allgather", "mixed_padded_lengths", {"micro_batch_size": 2, "allgather_cp": True})]
    results: dict[str, dict[str, list[str]]] = {}
    for run in ("untagged", "tagged") if session else ("untagged",):
        if run == "tagged":
            from layoutcheck.runtime import activation

            activation.activate("record", config=ROOT / "fixtures" / "debug-run.toml",
                                environ={"LAYOUTCHECK_TRACE": "1"})
        results[run] = {}
        for label, bug, args in cases:
            found.clear()
            rank = CASES[bug].rank if bug else 0
            with parallel_state(cp_size=CP, cp_rank=rank):
                train_step(make_args(bugs={bug} if bug else set(), **args), ref)
            results[run][label] = sorted(set(found))
    out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), "--no-session" not in sys.argv)
