"""The tracer: a scoped propagation context that carries tags through the data path.

    tracer = Tracer(mode="warn")
    with tracer:                       # around the data path only, never a model's forward
        batch = get_batch(...)         # tags flow through pad, slice, cat, stack, view, ...
    tracer.violations                  # also reported as the mode says (raise / warn / record)

Inside ``with tracer`` a ``TorchFunctionMode`` sees each torch call. The ops
that move a layout (indexing and slicing, ``narrow``, ``chunk``, ``split``,
``unbind``, ``cat``, ``stack``, ``F.pad``, ``view``/``reshape``/``flatten``/
``unsqueeze``/``squeeze``, ``to``/``contiguous``/``clone``/``detach`` and
dtype casts) carry their input's tag to their output, transformed by the
rules of `layoutcheck.runtime.tracing.propagation`, which also say what breaks a
layout (G1, G2, G3, G4, G6). A violation is reported *before* the op runs
(so ``raise`` mode stops at it), naming the op and the user's source line:
the first frame outside torch and layoutcheck. Every other op passes
through untouched; its result is not tagged.

Cost and safety (docs/development.md#what-the-runtime-is-built-on): a function mode costs about 1-4 us
per op while it is active and nothing once it exits, so it is entered only
around the data path; the tracer's own reads run with torch-function
handling off (`metadata_only`), read shapes and Python ints only (no GPU
sync), and do nothing while ``torch.compile`` traces (the mode is not
entered then, and an active mode passes every call straight through to the
compiler, so no graph breaks).

State is per thread: each thread has its own stack of active tracers (torch's
mode stack is per thread too).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

import torch
from torch.overrides import TorchFunctionMode

from layoutcheck import geometry
from layoutcheck.errors import LayoutError, LayoutSpecError, Violation, describe_value
from layoutcheck.runtime.reporting.modes import LayoutWarning, Recorder, check_mode, report
from layoutcheck.runtime.tracing.op_rules import JOINS, NAMES, OPERANDS, RULES, After
from layoutcheck.runtime.tracing.tags import entry_at
from layoutcheck.runtime.tracing.trace_switch import tracer_enabled

__all__ = ["Tracer", "active_tracer"]

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../layoutcheck/
_DisableTorchFunction = torch._C.DisableTorchFunction
_is_compiling = torch.compiler.is_compiling
_stack_len = torch._C._len_torch_function_stack
_stack_at = torch._C._get_function_stack_at
_pop_stack = torch._C._pop_torch_function_stack
_push_stack = torch._C._push_on_torch_function_stack

_LOCAL = threading.local()
_INLINE = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})

F = TypeVar("F", bound=Callable[..., Any])


def _stack() -> list[tuple[Tracer, _Mode | None]]:
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    return stack


def active_tracer() -> Tracer | None:
    """The tracer whose mode is active in this thread (the innermost enabled one), or ``None``."""
    mode = _active_mode()
    return None if mode is None else mode.tracer


def user_site(skip: int = 1) -> tuple[str, int, str, int]:
    """``(path, line, function, level)`` of the first frame outside torch and layoutcheck.

    ``level`` counts frames from the caller of `user_site` (1; ``skip``
    frames up is level ``skip``), so that it is the ``stacklevel`` the caller
    passes to `layoutcheck.runtime.reporting.modes.report`. ``path`` is relative to the
    working folder when inside it.
    """
    frame = sys._getframe(skip)
    level = skip
    while frame is not None:
        name = frame.f_code.co_filename
        if not (name.startswith(_TORCH_DIR) or name.startswith(_OWN_DIR)):
            break
        frame, level = frame.f_back, level + 1
    if frame is None:
        return ("<unknown>", 0, "<unknown>", level)
    path, line = frame.f_code.co_filename, frame.f_lineno
    function = frame.f_code.co_name
    outer = frame
    while function in _INLINE and outer.f_back is not None:  # a comprehension: name the function it is in
        outer = outer.f_back
        function = outer.f_code.co_name
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:  # another drive on Windows
        pass
    return (path, line, function, level)


class Tracer:
    """Carries tags through the ops of the data path and reports where a layout breaks.

    ``mode``: ``"raise"``, ``"warn"`` or ``"record"``, as for `LayoutChecker`.
    ``enabled``: ``None`` resolves it from ``LAYOUTCHECK_TRACE`` and the mode
    (`layoutcheck.runtime.tracing.trace_switch.tracer_enabled`); a disabled tracer's
    ``with`` block costs one attribute check. ``recorder`` collects every
    violation in every mode (pass a checker's recorder to share one list).

    ``layout``: the run's ``qkv_format`` (``"bshd"`` or ``"thd"``), when
    known: the CP-helper wrappers then also judge calls on untagged values
    (a producer slicing lists of floats). Settable (a session learns it from
    the producer's ``args``).

    ``per_sample``: also judge the owner's ``P`` where a sample is laid out
    with it (O2; O3 too when ``True``, the checker's per-sample mode; ``None``
    leaves both to the producer's checks). ``stream_multiple``: the batch
    builder's THD stream multiple (``tp_size * pad_multiplier``), when known:
    a packed stream padded to another length is flagged (G5 for replay rows).

    ``checker``: a `LayoutChecker` whose mode the tracer follows (the
    pytest marker switches it per test) and whose recorder it shares.

    ``scope``: returns ``(rollout, index)`` for the current rollout (a
    session passes its checker's): each distinct violation is then reported
    once per rollout, recorded with its index. Without it every one is reported.
    ``attribute``: ``(T, R) -> (sample, micro_batch)`` (``None`` each when
    not known), so that a CP-helper call on untagged values (lists of floats,
    plain ints) names its sample.

    ``with tracer:`` is re-entrant and per thread. Tags are attached with
    `layoutcheck.runtime.tracing.tags.tag` or the producer / batch-builder helpers of
    `layoutcheck.runtime.tracing.tagging`, whether or not a tracer is active.
    """

    def __init__(self, mode: str = "warn", *, enabled: bool | None = None, recorder: Recorder | None = None,
                 layout: str | None = None, per_sample: bool | None = None, stream_multiple: int | None = None,
                 scope: Callable[[], tuple[object, int | None]] | None = None, checker: Any = None,
                 attribute: Callable[[int, int], tuple[int | None, int | None]] | None = None) -> None:
        self._checker = checker
        self._mode = check_mode(mode)
        self.enabled = tracer_enabled(self.mode, enabled)
        if recorder is None:
            recorder = checker.recorder if checker is not None else Recorder()
        self.recorder = recorder
        self.layout = None if layout is None else geometry.check_layout(layout)
        self.per_sample = per_sample
        self.stream_multiple = stream_multiple
        self.scope = scope
        self.attribute = attribute
        self._seen: set[tuple[object, ...]] = set()
        self._seen_in: object = None

    @property
    def mode(self) -> str:
        """``raise``, ``warn`` or ``record``: the checker's when the tracer was given one (it follows it)."""
        return self._checker.mode if self._checker is not None else self._mode  # type: ignore[no-any-return]

    @mode.setter
    def mode(self, value: str) -> None:
        if self._checker is not None:
            self._checker.mode = check_mode(value)
        else:
            self._mode = check_mode(value)

    @property
    def violations(self) -> list[Violation]:
        """Every violation reported so far (in every mode)."""
        return self.recorder.violations

    def __enter__(self) -> Tracer:
        stack = _stack()
        mode: _Mode | None = None
        if self.enabled and not _is_compiling() and not any(t is self and m is not None for t, m in stack):
            mode = _Mode(self)
            mode.__enter__()
        stack.append((self, mode))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _stack()
        entry = stack.pop()
        if entry[1] is not None:
            entry[1].__exit__(None, None, None)

    def wrap(self, fn: F) -> F:
        """``fn`` run inside this tracer: what a hook wraps a data-path function with.

        While ``torch.compile`` traces, the wrapper calls ``fn`` and nothing
        else, so a compiled region can call a wrapped function without a graph
        break (a ``with tracer:`` block inside a compiled function would be
        one: Dynamo does not enter user context managers).
        """

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if not self.enabled or _is_compiling():
                return fn(*args, **kwargs)
            with self:
                return fn(*args, **kwargs)

        return traced  # type: ignore[return-value]

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Inside an active tracer, let torch calls pass untraced (a helper that tags its own result)."""
        mode = _active_mode()
        if mode is None:
            yield
            return
        mode.paused += 1
        try:
            yield
        finally:
            mode.paused -= 1

    @property
    def judging(self) -> bool:
        """Whether calls made outside the traced region are judged (CP helpers): enabled, and not `quiet` here."""
        return self.enabled and not getattr(_LOCAL, "quiet", 0)

    def quiet(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``fn(*args, **kwargs)`` with nothing judged in this thread (code the tracer already followed once)."""
        _LOCAL.quiet = getattr(_LOCAL, "quiet", 0) + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _LOCAL.quiet -= 1

    def run_untraced(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``fn(*args, **kwargs)`` with no op traced: what `paused` does, cheaper (a hot path of the CP helpers).

        When the active mode is on top of torch's mode stack it is taken off
        for the call, so the helper's own ops do not reach Python at all;
        otherwise (another mode above it) the mode lets them through.
        """
        mode = _active_mode()
        if mode is None:
            return fn(*args, **kwargs)
        if _stack_len() and _stack_at(_stack_len() - 1) is mode:
            _pop_stack()
            try:
                return fn(*args, **kwargs)
            finally:
                _push_stack(mode)
        mode.paused += 1
        try:
            return fn(*args, **kwargs)
        finally:
            mode.paused -= 1

    def failed(self, exc: Exception, op: str) -> None:
        """The tracer could not follow ``op``: raise in raise mode, else one note (and a warning in warn mode)."""
        note = f"the tracer could not follow {op}: {type(exc).__name__}: {exc}"
        if self.mode == "raise":
            raise LayoutSpecError(note) from exc
        self.recorder.add_note(note)
        if self.mode == "warn":
            warnings.warn(note, LayoutWarning, stacklevel=user_site(2)[3])

    def report(self, violations: Sequence[Violation], op: str) -> None:
        """Report ``violations`` seen at ``op``, naming the user's source line, as the mode says."""
        path, line, function, level = user_site(2)
        where = f"{op} at {path}:{line} in {function}"
        found = [replace(v, where=where) for v in violations]
        rollout = None
        if self.scope is not None:
            run, rollout = self.scope()
            if run is not self._seen_in:  # a new rollout: report everything again
                self._seen_in, self._seen = run, set()
            found = [v for v in found if _fresh(self._seen, v)]
        report(found, self.mode, recorder=self.recorder, stacklevel=level, rollout=rollout)


def _fresh(seen: set[tuple[object, ...]], v: Violation) -> bool:
    # Once per rollout: an owner's wrong P (O2, O3) once per sample, wherever it is laid out; the
    # rest once per op site and value.
    if v.invariant.startswith("O"):
        key: tuple[object, ...] = (v.invariant, v.sample, describe_value(v.actual, 200))
    else:
        key = (v.invariant, v.where, v.field, v.sample, v.micro_batch, describe_value(v.actual, 200),
               describe_value(v.expected, 200))
    if key in seen:
        return False
    seen.add(key)
    return True


def _active_mode() -> _Mode | None:
    for _, mode in reversed(getattr(_LOCAL, "stack", None) or ()):
        if mode is not None:
            return mode
    return None


# --- the mode -------------------------------------------------------------------------------

class _Mode(TorchFunctionMode):
    """The torch-function mode of one entered `Tracer` (one thread); its rules are `op_rules.RULES`."""

    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer
        self.paused = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        if _is_compiling():  # first: the compiler traces only this branch
            return func(*args, **kwargs)
        rule = RULES.get(func)
        if rule is None or self.paused:
            return func(*args, **kwargs)  # not a layout op: nothing of the tracer's runs
        # A layout op on tensors nobody tagged: a table lookup per operand, and the op runs (the fast path)
        operands = OPERANDS.get(func)
        if operands is not None:
            if not kwargs and not any(entry_at(id(args[i])) is not None for i in operands if i < len(args)):
                return func(*args, **kwargs)
        else:
            first = args[0] if args else kwargs.get("tensors" if func in JOINS else "input")
            if func in JOINS:
                if not isinstance(first, (list, tuple)) or not any(entry_at(id(t)) is not None for t in first):
                    return func(*args, **kwargs)
            elif entry_at(id(first)) is None:
                return func(*args, **kwargs)
        return checked(self.tracer, func, rule, (self, func, args, kwargs), func, args, kwargs)

    def flag(self, violations: list[Violation], func: Any) -> None:
        if violations:
            self.tracer.report(violations, _op_name(func))


def checked(tracer: Tracer, op: Any, before: Callable[..., After | None], before_args: tuple[Any, ...],
            run: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``run(*args, **kwargs)`` with the tracer's ``before`` (flags, returns an `After`) and its `After`.

    The tracer's parts run with torch-function handling off, and an error of
    theirs never breaks the call (`Tracer.failed`); a `LayoutError` (raise
    mode) stops it before it runs. ``run`` is the user's op or helper, as it
    was called. Shared by the mode and the CP-helper wrappers.
    """
    after: After | None
    try:
        with _DisableTorchFunction():
            after = before(*before_args)
    except LayoutError:
        raise
    except Exception as exc:  # noqa: BLE001 - the tracer must never break a training step
        after = tracer.failed(exc, _op_name(op))
    out = run(*args, **kwargs)
    if after is not None:
        try:
            with _DisableTorchFunction():
                after(out)
        except Exception as exc:  # noqa: BLE001
            tracer.failed(exc, _op_name(op))
    return out


def _op_name(func: Any) -> str:
    if isinstance(func, str):
        return func
    name = NAMES.get(func)
    if name is None:
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
    return name


