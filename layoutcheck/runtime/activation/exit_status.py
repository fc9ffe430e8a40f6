"""Ending a process with a failing status from an ``atexit`` handler, when raise mode says the run was not checked.

An exception raised in an ``atexit`` handler is printed and ignored: the
exit status stays what the program made it. So raise mode, which must not
let ``LAYOUTCHECK=raise`` end a run with status 0 when it checked less than
configured, ends the process with `os._exit` once the handler has said why.
That skips the interpreter's last clean-up, so first: every other ``atexit``
handler registered after the session's has run (they run in reverse order,
and the session registers at interpreter start), threads have been joined
(the interpreter does that before ``atexit``), and `fail` flushes the
standard streams and every open file object it can find, so that nothing
the program wrote is lost.

A process that is already failing (an uncaught exception: ``sys.last_value``
is set) keeps its own status: its traceback says enough.
"""

from __future__ import annotations

import gc
import io
import os
import sys

__all__ = ["already_failing", "fail"]


def already_failing() -> bool:
    """Whether the program ended with an uncaught exception (its status is already 1)."""
    return getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None


def _flush_open_files() -> None:
    for obj in gc.get_objects():
        # the type, never the object: a lazy or deprecated proxy answers `isinstance` with a warning
        if issubclass(type(obj), (io.BufferedIOBase, io.TextIOBase)):
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except Exception:  # noqa: BLE001, S112 - a broken stream must not stop the others
                continue


def fail(status: int = 1) -> None:
    """Flush what the program wrote and end the process now with ``status`` (unless it already fails)."""
    if already_failing():
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed stream: nothing to flush
            pass
    _flush_open_files()
    os._exit(status)
