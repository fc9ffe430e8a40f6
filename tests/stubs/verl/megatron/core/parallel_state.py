"""Megatron-core's parallel state, as far as verl's data path reads it: set by the job with `set_state`."""

_STATE = {"tp": 1, "cp": 1, "cp_rank": 0, "group": None}


def set_state(tp: int = 1, cp: int = 1, cp_rank: int = 0, group=None) -> None:
    _STATE.update(tp=tp, cp=cp, cp_rank=cp_rank, group=group)


def get_tensor_model_parallel_world_size() -> int:
    return _STATE["tp"]


def get_context_parallel_world_size() -> int:
    return _STATE["cp"]


def get_context_parallel_rank() -> int:
    return _STATE["cp_rank"]


def get_context_parallel_group():
    return _STATE["group"]
