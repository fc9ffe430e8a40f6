"""Stub: `DataProto` is only imported by the micro-batching module (the test passes plain dicts)."""


class DataProto:
    pass
