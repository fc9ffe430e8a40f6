"""One rank of a Megatron-parallel trainer run (verl, slime): stubs, gloo, Megatron's parallel state, the script.

Run by `trainers.ranks.launch` as ``python -m trainers.megatron_rank TARGET``
(a ``.py`` path or a module name). The launch parameters' ``"harness"`` entry
says how to set the parallel state:

* ``cp``: the context-parallel size; ``tp``: the tensor-parallel size;
* ``tp_mode``: ``"setter"`` (default): the world is the ``cp`` ranks of one CP
  group and the TP size is declared with Megatron's own setter
  (``set_tensor_model_parallel_world_size(tp)``, rank 0). ``"groups"``: the
  world is ``tp * cp`` ranks and Megatron builds real TP groups;
* ``stubs``: names from `trainers.stubs.MODULE_STUBS`; ``cuda_on_cpu``: bool.

How megatron-core answers (``megatron/core/parallel_state.py``):
``get_tensor_model_parallel_world_size()`` returns the value set by its
setter if any, else the TP group's size; ``get_context_parallel_world_size()``
and ``get_context_parallel_rank()`` read the CP group that
``initialize_model_parallel(context_parallel_size=cp)`` built, and answer 0
when torch.distributed is not initialised (so CP needs a real group: there is
no setter). The data path only reads these numbers; nothing here replaces them.

Then TARGET runs as ``__main__``; it imports the trainer itself (so hooks that
layoutcheck installs at import time see it) and reports with
`trainers.ranks.report`.
"""

from __future__ import annotations

import sys

from trainers import ranks, stubs


def setup(harness: dict) -> dict[str, int]:
    """Stubs, the process group and Megatron's parallel state; what Megatron now answers."""
    stubs.install(harness.get("stubs", ()), cuda_on_cpu=harness.get("cuda_on_cpu", False))
    rank, world = ranks.init_process_group()
    from megatron.core import parallel_state as mpu

    cp, tp = int(harness.get("cp", 1)), int(harness.get("tp", 1))
    mode = harness.get("tp_mode", "setter")
    if mode not in ("setter", "groups"):
        raise ValueError(f"harness tp_mode must be 'setter' or 'groups', not {mode!r}")
    real_tp = tp if mode == "groups" else 1
    if world != cp * real_tp:
        raise ValueError(f"world size {world} does not hold cp={cp} x tp={real_tp} ranks (tp_mode={mode!r})")
    mpu.initialize_model_parallel(tensor_model_parallel_size=real_tp, context_parallel_size=cp)
    if mode == "setter":
        mpu.set_tensor_model_parallel_world_size(tp)
        mpu.set_tensor_model_parallel_rank(0)
    state = {"rank": rank, "world": world,
             "tp_size": mpu.get_tensor_model_parallel_world_size(), "tp_rank": mpu.get_tensor_model_parallel_rank(),
             "cp_size": mpu.get_context_parallel_world_size(), "cp_rank": mpu.get_context_parallel_rank(),
             "dp_size": mpu.get_data_parallel_world_size()}
    ranks.report("parallel_state", state)
    return state


def main() -> None:
    target = sys.argv[1]
    sys.argv = sys.argv[1:]

    def body() -> None:
        setup(ranks.params().get("harness", {}))
        ranks.run_script(target)

    ranks.main_guard(body)


if __name__ == "__main__":
    main()
