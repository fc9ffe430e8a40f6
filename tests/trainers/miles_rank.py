"""One rank of a Miles data-path run: stubs, gloo, Miles's parallel state and object store, then the script.

Run by `trainers.ranks.launch` as ``python -m trainers.miles_rank TARGET``
with the Miles checkout first on ``PYTHONPATH``. The world is the ``cp``
ranks of one CP group (data parallel size 1). The launch parameters'
``"harness"`` entry holds ``cp`` and ``tp``.

* Parallel state: Miles's training utilities read it from
  ``miles.backends.training_utils.parallel.get_parallel_state()``; its
  Megatron backend builds it from Megatron's groups in
  ``create_megatron_parallel_state``, which needs ``megatron.training``'s
  arguments. Here it is built the same way from real groups instead and set
  with Miles's own ``set_parallel_state``: ``cp`` is the world group,
  ``intra_dp`` this rank's group of one, ``intra_dp_cp`` the world; ``tp``
  carries the declared size with no group (the data path only reads
  ``tp.size`` and ``tp.rank``), like Megatron's TP setter for verl.
* Object store: the rollout side puts each DP shard into
  ``miles.utils.object_store`` (Ray's object store, or Mooncake) and the
  training side gets it back; both are transports between processes that the
  data path does not shape. `InProcessStore` implements Miles's own
  ``BaseObjectStore`` interface in this process, and is installed as the
  module's singleton (Miles's ``init_instance`` only builds the Ray and
  Mooncake stores). ``put`` keeps a deep copy, as a transport would.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from trainers import ranks, stubs

STUBS = ("sglang",)
"""`trainers.stubs.MODULE_STUBS` that Miles's data-path modules need on CPU."""


def parallel_state(cp: int, tp: int) -> dict[str, int]:
    """Set Miles's parallel state from this run's gloo groups; what the state now says."""
    import torch.distributed as dist
    from miles.backends.training_utils.parallel import ParallelState, get_parallel_state, set_parallel_state
    from miles.utils.ft_utils.process_group_utils import GroupInfo

    rank, world = dist.get_rank(), dist.get_world_size()
    if world != cp:
        raise ValueError(f"world size {world} is not cp={cp}: a Miles harness run is one CP group")
    alone = [dist.new_group([r]) for r in range(world)]  # every rank creates every group, in the same order
    whole = dist.group.WORLD
    one = GroupInfo(rank=0, size=1, group=None)
    set_parallel_state(ParallelState(
        intra_dp=GroupInfo(rank=0, size=1, group=alone[rank]),
        intra_dp_cp=GroupInfo(rank=rank, size=world, group=whole),
        cp=GroupInfo(rank=rank, size=cp, group=whole),
        tp=GroupInfo(rank=0, size=tp, group=None),
        pp=one, ep=one, etp=one, indep_dp=one,
    ))
    state = get_parallel_state()
    return {"cp_size": state.cp.size, "cp_rank": state.cp.rank, "tp_size": state.tp.size,
            "dp_size": state.effective_dp.size, "vpp_size": state.vpp_size}


def install_store() -> None:
    """Install `InProcessStore` as Miles's object store."""
    from miles.utils import object_store
    from miles.utils.ray_utils import Box

    class InProcessStore(object_store.BaseObjectStore):
        """Miles's object-store interface in one process: ``put`` keeps a copy, ``get`` hands it back."""

        def put(self, value: Any, value_spec: Any = None) -> Box:
            return Box(copy.deepcopy(value))

        def get(self, ref: Box) -> object_store.ObjectStoreGetResult:
            return object_store.ObjectStoreGetResult(value=ref.inner, release_fn=lambda value: None)

        def remove(self, ref: Box) -> None:
            pass

    object_store._INSTANCE = InProcessStore()  # Miles has no setter for another backend (see module doc)


def main() -> None:
    target = sys.argv[1]
    sys.argv = sys.argv[1:]

    def body() -> None:
        harness = ranks.params().get("harness", {})
        stubs.install(STUBS, cuda_on_cpu=True)
        ranks.init_process_group()
        ranks.report("parallel_state", parallel_state(int(harness.get("cp", 1)), int(harness.get("tp", 1))))
        install_store()
        ranks.run_script(target)

    ranks.main_guard(body)


if __name__ == "__main__":
    main()
