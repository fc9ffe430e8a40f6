"""Would-be GPU syncs made loud on CPU, and windows that put them around layoutcheck's own code only.

A `SyncGuard` fails any value read while it enforces (docs/development.md#what-the-runtime-is-built-on:
``torch.cuda.set_sync_debug_mode`` exists on CUDA builds only):

* a ``TorchDispatchMode`` that raises on any aten op issued while enforcing,
  naming the ones that sync on CUDA (``_local_scalar_dense`` is what
  ``.item()``, ``bool()`` and ``int()`` dispatch to; ``nonzero``,
  ``masked_select``, ``_unique2`` have data-dependent shapes; ``_to_copy`` is
  ``.cpu()``). A metadata read issues no op at all, so *any* op is a failure;
* function-level interception of what never reaches the dispatcher on CPU
  (``Tensor.tolist``, ``.numpy``, ``.cpu`` on a CPU tensor): the methods are
  replaced while `denying` runs and raise while enforcing;
* a ``TorchFunctionMode`` that raises on any call while enforcing: checks
  run with torch-function handling off (`metadata_only`), so they never
  reach a mode, and a tracer's mode never sees them.

`Windows` runs layoutcheck's code of a debug session in "on" windows and the
trainer's code it calls in "off" ones (`debug_mode_windows` installs them:
the hooks, the tracer's rules before and after each op, the tags the hooks
attach), with any switch: a `SyncGuard` on CPU, ``set_sync_debug_mode``
on CUDA (`benchmarks/gpu_check.py`). It also keeps the host time spent in
each kind of "on" window, nested trainer code left out.

Shared by tests/test_nosync.py and benchmarks/gpu_check.py.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["DENIED_METHODS", "SYNC_OPS", "SyncError", "SyncGuard", "Windows", "debug_mode_windows", "denying"]

REGISTER = "register_replay_list_func"
"""The replay filler's callback argument (the reference pipeline's, as Miles names it)."""

SYNC_OPS = frozenset({
    "_local_scalar_dense", "item", "is_nonzero", "nonzero", "nonzero_static", "masked_select",
    "_unique2", "unique_dim", "unique_consecutive", "_to_copy", "equal", "allclose",
})
"""aten ops that synchronise a CUDA device (value read back, or a data-dependent shape)."""

DENIED_METHODS = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__", "__array__")


class SyncError(AssertionError):
    """A check read a tensor's values (would synchronise the GPU)."""


class SyncGuard:
    """Dispatch- and function-level deny lists, enforced only while `enforcing`."""

    def __init__(self) -> None:
        self.enforcing = False
        self.entered = 0  # how many times checker code ran under enforcement

    def deny(self, what: str) -> None:
        if self.enforcing:
            raise SyncError(f"a layout check called {what}")

    @contextmanager
    def enforce(self, on: bool = True) -> Iterator[None]:
        previous, self.enforcing = self.enforcing, on
        self.entered += on
        try:
            yield
        finally:
            self.enforcing = previous

    def on(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def guarded(*args, **kwargs):
            with self.enforce(True):
                return fn(*args, **kwargs)
        return guarded

    def off(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def unguarded(*args, **kwargs):
            with self.enforce(False):
                return fn(*args, **kwargs)
        return unguarded


class _DenyDispatch(TorchDispatchMode):
    def __init__(self, guard: SyncGuard) -> None:
        super().__init__()
        self.guard = guard

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        kind = "a GPU-synchronising op" if name in SYNC_OPS else "an op on tensor data (checks read metadata only)"
        self.guard.deny(f"aten.{name}, {kind}")
        return func(*args, **(kwargs or {}))


class _DenyFunction(TorchFunctionMode):
    def __init__(self, guard: SyncGuard) -> None:
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.guard.deny(f"{getattr(func, '__name__', func)} through __torch_function__ (checks must disable it)")
        return func(*args, **(kwargs or {}))


@contextmanager
def denying() -> Iterator[SyncGuard]:
    """A `SyncGuard` with its deny lists in place (the methods patched, both modes entered) for the block."""
    guard = SyncGuard()
    originals = {name: getattr(torch.Tensor, name) for name in DENIED_METHODS}
    for name, original in originals.items():

        def denied(self, *args, __name=name, __original=original, **kwargs):  # type: ignore[no-untyped-def]
            guard.deny(f"Tensor.{__name}")
            return __original(self, *args, **kwargs)

        setattr(torch.Tensor, name, denied)
    try:
        with _DenyDispatch(guard), _DenyFunction(guard):
            yield guard
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


class Windows:
    """Layoutcheck's code in "on" windows, the trainer's in "off" ones, with host time per kind of window.

    ``switch(on)`` is the context manager that makes a window enforcing or
    not (`SyncGuard.enforce`, or a sync-debug-mode setter on CUDA).
    ``seconds`` maps each kind (``"hooks"``, ``"tracer"``) to the host time
    spent in its windows, the trainer's code called from inside left out.
    """

    def __init__(self, switch: Callable[[bool], AbstractContextManager[object]]) -> None:
        self.switch = switch
        self.seconds: dict[str, float] = {"hooks": 0.0, "tracer": 0.0}
        self.entered = 0
        self._stack: list[list[Any]] = []  # [kind, start] of the open windows, innermost last

    def _run(self, kind: str | None, on: bool, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        now = time.perf_counter()
        if self._stack:
            outer = self._stack[-1]
            if outer[0] is not None:
                self.seconds[outer[0]] += now - outer[1]
        self._stack.append([kind, now])
        self.entered += on
        try:
            with self.switch(on):
                return fn(*args, **kwargs)
        finally:
            done = time.perf_counter()
            kind_, start = self._stack.pop()
            if kind_ is not None:
                self.seconds[kind_] += done - start
            if self._stack:
                self._stack[-1][1] = done

    def on(self, fn: Callable[..., Any], kind: str = "hooks") -> Callable[..., Any]:
        """``fn`` run in an enforcing window of ``kind``."""
        @functools.wraps(fn)
        def enforced(*args: Any, **kwargs: Any) -> Any:
            return self._run(kind, True, fn, args, kwargs)
        return enforced

    def off(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (the trainer's code) run outside any enforcing window."""
        @functools.wraps(fn)
        def free(*args: Any, **kwargs: Any) -> Any:
            return self._run(None, False, fn, args, kwargs)
        return free


@contextmanager
def debug_mode_windows(windows: Windows) -> Iterator[Windows]:
    """Put a debug session's own code in ``windows``' "on" windows and the trainer's in "off" ones, for the block.

    Patched while the block runs (install the session's hooks inside it):
    each hook's wrapper (``on``, kind ``hooks``) around the trainer's
    function (``off``), the replay filler's register function (the
    checker's code: ``on``); the tracer's rules before and after each op and
    its CP-helper checks (``on``, kind ``tracer``) around the op (``off``);
    the tags the hooks attach (``tag_rollout``, ``tag_batch``, the session
    tracer's glue: ``on``, kind ``tracer``).
    """
    from layoutcheck.runtime.activation import session as sessions
    from layoutcheck.runtime.tracing import session_tracer, tagging, tracer

    on, off = windows.on, windows.off
    real_wrap, real_checked, real_glue = sessions.Session._wrap, tracer.checked, session_tracer.SessionTracer._glue
    real_tags = {name: getattr(tagging, name) for name in ("tag_rollout", "tag_batch")}

    def wrap(session: Any, spec: Any, original: Callable[..., Any]) -> Callable[..., Any]:
        if spec.role != "replay-filler":
            return on(real_wrap(session, spec, off(original)))

        @functools.wraps(original)
        def filler(**kwargs: Any) -> Any:  # the checker's register wrapper, as the filler calls it: checker code
            kwargs[REGISTER] = on(kwargs[REGISTER])
            return original(**kwargs)

        hook = on(real_wrap(session, spec, off(filler)))

        @functools.wraps(original)
        def entry(*args: Any, **kwargs: Any) -> Any:  # the trainer's own register function: trainer code
            if REGISTER in kwargs:
                kwargs[REGISTER] = off(kwargs[REGISTER])
            return hook(*args, **kwargs)

        return entry

    def checked(tracing: Any, op: Any, before: Callable[..., Any], before_args: Any, run: Callable[..., Any],
                args: Any, kwargs: Any) -> Any:
        def enforced_before(*a: Any) -> Any:
            after = on(before, "tracer")(*a)
            return None if after is None else on(after, "tracer")
        return real_checked(tracing, op, enforced_before, before_args, off(run), args, kwargs)

    sessions.Session._wrap = wrap  # type: ignore[method-assign]
    tracer.checked = checked
    session_tracer.SessionTracer._glue = lambda self, where, work: real_glue(self, where, on(work, "tracer"))  # type: ignore[method-assign]
    for name, fn in real_tags.items():
        setattr(tagging, name, on(fn, "tracer"))
    try:
        yield windows
    finally:
        sessions.Session._wrap = real_wrap  # type: ignore[method-assign]
        tracer.checked = real_checked
        session_tracer.SessionTracer._glue = real_glue  # type: ignore[method-assign]
        for name, fn in real_tags.items():
            setattr(tagging, name, fn)
