"""Value checks of host tensors (B6, a row-padded batch's contents), run beside the trainer on one worker thread.

A boundary's shape checks (B1-B5) read ints and run in the call. Its value
checks compare every position of a field with its source's layout: for a
packed stream of 64 samples and 49k positions, two streams cost 300-400 us
of host work, most of it torch and numpy ops that release the GIL. With
``value-checks = "background"`` (the default is ``"inline"``) the hooked call only takes a
`Job`: references to the tensors the check reads (the sources, the
outputs, nothing copied) and the sum of their ``_version`` counters, and
one daemon thread per process (`ValueWorker`, started at the first job)
runs the comparison while the trainer goes on.

Sound by construction, never a false alarm:

* only plain torch tensors on the CPU go to the worker (a numpy array or a
  Python list can change in place without a version counter to say so:
  those are checked in the call, as are device tensors, which take the
  snapshot path of `layoutcheck.runtime.checker.values`);
* a tensor's ``_version`` only grows, and every in-place write (and every
  write through a view, which shares its base's counter) bumps it, so the
  sum of the versions is unchanged exactly when no tensor was written. The
  worker compares the sum before and after the check; a job whose sum moved
  is not judged: it is counted as "changed in place before it could be
  checked" (`Outcome.changed`), never as checked and never as a violation;
* the queue is bounded (`ValueWorker.limit` jobs, each holding its call's
  tensors alive): when it is full the calling thread runs the check itself,
  so nothing is dropped and memory stays bounded. One lock lets one value
  check run at a time, in the worker or in a call.

What the worker finds (violations, errors of a check, changed tensors) is
handed back to the calling thread (`ValueWorker.take`) and reported there,
in the checker's mode: at the next hooked boundary call (raise mode raises
there, before that call's function runs), at the step boundary
(`CheckerState.end_step` waits for the worker), or at exit (the session
waits for it, and a violation found then fails raise mode's exit status).
A process that forks starts its own worker if it needs one.
"""

from __future__ import annotations

import collections
import operator
import os
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from layoutcheck.errors import Violation

__all__ = ["Job", "Outcome", "ValueWorker", "version_sum", "watchable"]


def watchable(value: Any, tensor: type) -> list[Any] | None:
    """The plain tensors ``value`` is made of (a tensor, or a list or tuple of them and ``None``), else ``None``.

    ``value`` is host data (`layoutcheck.runtime.checker.values.on_host` said
    so). ``None`` for anything whose in-place changes a version counter would
    not show: a numpy array (even one torch shares), a list of numbers, a
    tensor subclass.
    """
    if type(value) is tensor:
        return [value]
    if type(value) in (list, tuple):
        kinds = set(map(type, value))
        if kinds == {tensor}:
            return list(value)
        if kinds == {tensor, type(None)}:
            return [v for v in value if v is not None]
    return None


_VERSION = operator.attrgetter("_version")


def version_sum(tensors: list[Any]) -> int:
    """The sum of the tensors' ``_version`` counters: each only grows, so the sum moves when any tensor is written."""
    return sum(map(_VERSION, tensors))


@dataclass
class Outcome:
    """What one job came to: ``violations``, or ``changed`` (not judged), or ``error`` (the check could not run)."""

    target: str
    violations: list[Violation] = field(default_factory=list)
    changed: bool = False
    error: Exception | None = None


@dataclass
class Job:
    """One call's value checks: ``check()`` returns its violations; ``tensors`` are what it reads, at ``version``."""

    target: str
    check: Callable[[], list[Violation]]
    tensors: list[Any]
    version: int

    def run(self) -> Outcome:
        """The check, judged only if no tensor it reads was written before or while it ran."""
        if version_sum(self.tensors) != self.version:
            return Outcome(self.target, changed=True)
        try:
            torch = sys.modules.get("torch")
            if torch is not None:
                with torch.no_grad():  # the worker's own grad mode: no graph for a comparison
                    found = self.check()
            else:
                found = self.check()
        except Exception as err:  # noqa: BLE001 - reported as a note on the calling thread, as `_checking` does
            if version_sum(self.tensors) != self.version:
                return Outcome(self.target, changed=True)
            return Outcome(self.target, error=err)
        if version_sum(self.tensors) != self.version:  # written while compared: what was compared is not the call's
            return Outcome(self.target, changed=True)
        return Outcome(self.target, violations=found)


class ValueWorker:
    """One daemon thread that runs `Job`s in order; bounded; its results are taken by the calling thread."""

    def __init__(self, limit: int = 8) -> None:
        self.limit = limit
        """At most this many jobs wait or run; `submit` refuses more (the caller checks inline)."""
        self.cpu = 0.0
        """CPU seconds the worker thread spent on jobs (``time.thread_time``), for the benchmark."""
        self.ran = 0
        """Jobs the worker ran."""
        self.inline = 0
        """Jobs run on the calling thread instead (`run_here`: the queue was full)."""
        self._reset()
        if hasattr(os, "register_at_fork"):  # a forked child has no worker thread: it starts its own
            ref = weakref.ref(self)  # the handler stays registered for the process's life; the worker need not
            os.register_at_fork(after_in_child=lambda: _reset_in_child(ref))

    def _reset(self) -> None:
        self.lock = threading.Lock()
        """Held while a value check runs (worker or caller): the content checks' tables see one check at a time."""
        self._count = threading.Lock()  # guards `_pending` (a C lock: the calling thread pays well under 1 us)
        self._pending = 0
        self._queue: queue.SimpleQueue[Job | threading.Event] = queue.SimpleQueue()
        self._results: collections.deque[Outcome] = collections.deque()
        self._thread: threading.Thread | None = None

    @property
    def has_results(self) -> bool:
        """Whether outcomes wait to be taken (a plain read: asked at every hooked call)."""
        return bool(self._results)

    @property
    def idle(self) -> bool:
        """Whether no job waits or runs."""
        return self._pending == 0

    def submit(self, job: Job) -> bool:
        """Queue ``job``; False (not queued) when `limit` jobs already wait or run."""
        with self._count:
            if self._pending >= self.limit:
                return False
            self._pending += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="layoutcheck-values", daemon=True)
            self._thread.start()
        self._queue.put(job)  # C-level; wakes the worker
        return True

    def run_here(self, job: Job) -> Outcome:
        """Run ``job`` on the calling thread (the queue was full), one check at a time."""
        with self.lock:
            self.inline += 1
            return job.run()

    def take(self) -> list[Outcome]:
        """The outcomes finished so far, in order (never waits)."""
        out = []
        while self._results:
            out.append(self._results.popleft())
        return out

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every job queued so far has run (at most ``timeout`` seconds); whether they all did."""
        if self._pending == 0 or self._thread is None:
            return self._pending == 0
        done = threading.Event()
        self._queue.put(done)  # the queue is in order: when the worker reaches it, every earlier job has run
        return done.wait(timeout)

    def drain(self, timeout: float | None = None) -> list[Outcome]:
        """`wait`, then `take`."""
        self.wait(timeout)
        return self.take()

    def _loop(self) -> None:
        while True:
            job = self._queue.get()
            if isinstance(job, threading.Event):
                job.set()
                continue
            start = time.thread_time()
            try:
                with self.lock:
                    outcome = job.run()
            except BaseException as err:  # noqa: BLE001 - the worker never dies with a job in hand
                outcome = Outcome(job.target, error=err if isinstance(err, Exception) else RuntimeError(repr(err)))
            self.cpu += time.thread_time() - start
            self.ran += 1
            if outcome.violations or outcome.changed or outcome.error is not None:  # a clean check: nothing to say
                self._results.append(outcome)  # before the count: a caller that sees the worker idle finds it
            with self._count:
                self._pending -= 1


def _reset_in_child(ref: weakref.ref[ValueWorker]) -> None:
    worker = ref()
    if worker is not None:
        worker._reset()
