"""Stub: a CPU run."""

is_npu_available = False


def get_device_name() -> str:
    return "cpu"
