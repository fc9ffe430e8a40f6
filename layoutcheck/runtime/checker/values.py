"""Reading tensor *values* for the boundary contract, without ever synchronising a GPU.

Most invariants read shapes and Python ints only. A few need a tensor's
values: a mask's row sums (verl computes ``T`` as ``attention_mask.sum(-1)``
on the device), cumulative lengths held in a tensor (``cu_seqlens``), a
length tensor, and the data the content check (B6) compares. This module is
the one place such values are read, and it reads them two ways:

* a value on the host (a CPU tensor, a numpy array, a Python list) is read
  at once, by `layoutcheck.runtime.contract.arrays` (no device is involved,
  nothing waits);
* a tensor on a device is *snapshotted*: the reduction the check needs (a
  mask's row sums) runs on the device, the result is copied into pinned host
  memory with ``non_blocking=True``, and a CUDA event is recorded after the
  copy. The check runs later, at a hooked call where ``event.query()`` says
  the copy is done (``query`` never blocks), or at exit. The stream orders
  the copy after the kernels that wrote the tensor and before any later
  write, so the snapshot holds the values the call saw.

Where a snapshot cannot be taken (no CUDA runtime for a device tensor, a
fake tensor), the value checks of that call are left out with a note.
torch is imported only when a tensor is met (it is already loaded then).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.contract import arrays
from layoutcheck.runtime.contract.arrays import is_array

__all__ = ["Deferred", "Request", "Snapshot", "is_array", "on_host", "read", "snapshot"]

KINDS = ("ints", "sums", "data")


@dataclass(frozen=True)
class Request:
    """One value a check needs: ``ints`` (a 1-D int tensor as a list), ``sums`` (a mask's sums along its last axis), ``data``."""

    key: str
    kind: str
    value: Any
    """A tensor, or a list of tensors (per-sample masks or data)."""


_IS_CPU = operator.attrgetter("is_cpu")


def _device_type(value: Any) -> str:
    device = getattr(value, "device", None)
    return "cpu" if device is None else str(getattr(device, "type", device))


def on_host(request: Request) -> bool:
    """Whether every tensor of ``request`` is on the CPU (and not a fake tensor): readable at once."""
    values = request.value if isinstance(request.value, (list, tuple)) else [request.value]
    torch = sys.modules.get("torch")
    tensor = torch.Tensor if torch is not None else None
    if tensor is not None and set(map(type, values)) == {tensor}:  # plain tensors (per-sample data): their flags
        return all(map(_IS_CPU, values))
    for v in values:
        if type(v) is tensor:  # a plain tensor (never a fake one, a subclass): its device flag, per sample
            if not v.is_cpu:
                return False
            continue
        if v is None or not is_array(v):
            continue
        if _device_type(v) != "cpu" or type(v).__name__ == "FakeTensor":
            return False
    return True


def _reduce(request: Request) -> Any:
    # The device-side part of a request: what is copied (no value is read here).
    torch = sys.modules["torch"]
    if request.kind == "sums":
        if isinstance(request.value, (list, tuple)):
            return [None if m is None else m.sum(dtype=torch.int64) for m in request.value]
        return request.value.sum(dim=-1, dtype=torch.int64)
    return request.value


def _host_list(value: Any) -> Any:
    # CPU tensors only (callers check `on_host` or copied to the host first).
    if isinstance(value, (list, tuple)):
        return [None if v is None else _host_list(v) for v in value]
    if is_array(value):
        return value.tolist()
    return value


def read(requests: Sequence[Request]) -> dict[str, Any]:
    """The values of host requests, now: ``ints`` and ``sums`` as Python ints, ``data`` as CPU torch tensors.

    Any kind `layoutcheck.runtime.contract.arrays` reads: CPU tensors,
    numpy arrays, lists of ints, lists of per-sample tensors or arrays; a
    value of another kind raises `~layoutcheck.runtime.contract.arrays.Unreadable`.
    """
    out: dict[str, Any] = {}
    for r in requests:
        key = r.key.removeprefix("data:")
        if r.kind == "data":
            out[r.key] = arrays.host_data(r.value, key)
        elif r.kind == "sums":
            out[r.key] = arrays.host_sums(r.value, key)
        else:
            out[r.key] = arrays.host_ints(r.value, key)
    return out


@dataclass
class Snapshot:
    """Host copies of device values, and the event that says when they are complete."""

    copies: dict[str, Any]
    kinds: dict[str, str]
    event: Any

    def ready(self) -> bool:
        """Whether the copies are done (``event.query()``: never blocks)."""
        return self.event is None or bool(self.event.query())

    def wait(self) -> None:
        """Block until the copies are done (only at exit, when no step is waiting)."""
        if self.event is not None:
            self.event.synchronize()

    def values(self) -> dict[str, Any]:
        return {k: (v if self.kinds[k] == "data" else _host_list(v)) for k, v in self.copies.items()}


def snapshot(requests: Sequence[Request]) -> Snapshot:
    """Start non-blocking copies of device values into pinned memory; `LayoutSpecError` when it cannot."""
    torch = sys.modules["torch"]
    if not torch.cuda.is_available():
        raise LayoutSpecError("values on a device cannot be read without a CUDA runtime to copy them "
                              "asynchronously; the value checks of this call are left out")

    def copy(t: Any) -> Any:
        if t is None or not is_array(t):
            return t
        if _device_type(t) == "cpu":
            return t
        host = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=True)
        host.copy_(t, non_blocking=True)
        return host

    copies: dict[str, Any] = {}
    for r in requests:
        reduced = _reduce(r)
        copies[r.key] = [copy(t) for t in reduced] if isinstance(reduced, (list, tuple)) else copy(reduced)
    event = torch.cuda.Event()
    event.record()
    return Snapshot(copies=copies, kinds={r.key: r.kind for r in requests}, event=event)


@dataclass
class Deferred:
    """Value checks waiting for their snapshot: run at the next hooked call that finds them ready."""

    limit: int = 64
    """At most this many calls wait; beyond it the oldest is dropped unchecked (never waited for in a step)."""
    waiting: list[tuple[Snapshot, Callable[[dict[str, Any]], None]]] = field(default_factory=list)
    dropped: int = 0

    def add(self, snap: Snapshot, check: Callable[[dict[str, Any]], None]) -> bool:
        """Queue ``check`` until ``snap`` is ready; False when an older check had to be dropped to make room."""
        self.waiting.append((snap, check))
        if len(self.waiting) > self.limit:
            self.waiting.pop(0)
            self.dropped += 1
            return False
        return True

    def poll(self, *, wait: bool = False) -> int:
        """Run every check whose copies are done, in order (all of them with ``wait``: at exit only)."""
        done = 0
        while self.waiting:
            snap, check = self.waiting[0]
            if not snap.ready():
                if not wait:
                    break
                snap.wait()
            self.waiting.pop(0)
            check(snap.values())
            done += 1
        return done
