from megatron.core import parallel_state  # noqa: F401 - `from megatron.core import parallel_state as mpu`
