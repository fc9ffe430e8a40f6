"""The role wrappers `LayoutChecker.wrap` builds, and the signature check made when wrapping.

They read and update the checker's state (`~layoutcheck.runtime.checker.state.CheckerState`),
never the `LayoutChecker` class, which imports this module to ``wrap``.

``wrap(checker, role, fn)`` reads ``fn``'s signature once and refuses, with
a `LayoutSpecError` naming the function, the parameter, what was expected
and what was found, a function that does not name the parameters its role
reads (the adapter's `~layoutcheck.runtime.contract.adapters.RoleSpec`). The
wrapper it returns:

* returns exactly what ``fn`` returned (the same object) and raises what
  ``fn`` raised; it keeps no tensor (the checks keep ints only);
* passes a call it does not understand through unchanged (arguments that do
  not bind, a result of an unexpected shape) and leaves one note;
* holds only ``checker``, ``fn`` and the signature: all per-rollout state is
  the checker's, looked up at call time, so one wrapper can be installed
  under several names (every module that imported ``fn`` by name);
* does nothing but call ``fn`` inside a ``torch.compile`` trace;
* carries ``__wrapped__`` (so `inspect.signature` shows ``fn``'s) and
  ``__layoutcheck_role__``.

The replay filler's wrapper hands the filler a wrapper of its register
function that accepts any arguments (Miles calls it ``(replay_list,
replay_data, models=models)``: no micro-batch index), counts its calls from
the filler's start (micro-batch ``k`` is the ``k``-th call) and calls the
original with exactly what it got.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.checker import consumer_calls
from layoutcheck.runtime.contract.meta import compiling

if TYPE_CHECKING:
    from layoutcheck.runtime.checker.state import CheckerState

__all__ = ["ROLES", "Binder", "check_signature", "role_name", "wrap"]

ROLES: tuple[str, ...] = ("producer", "batch_builder", "replay_filler", "offset_helper")
"""The roles a checker wraps (`LayoutChecker.ROLES`)."""

_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def role_name(role: str) -> str:
    """``role`` with hyphens as underscores, if it is one of `ROLES`; else `LayoutSpecError`."""
    name = role.replace("-", "_") if isinstance(role, str) else role
    if name not in ROLES:
        raise LayoutSpecError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    return name


def _qualified(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}:{name}" if module else name


def check_signature(checker: CheckerState, role: str, fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature, if it names every parameter ``role`` reads (by name); else `LayoutSpecError`."""
    spec = checker.adapter.roles[role]
    where = f"cannot wrap `{_qualified(fn)}` as {spec.label}"
    if not callable(fn):
        raise LayoutSpecError(f"{where}: it is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise LayoutSpecError(f"{where}: its signature cannot be read ({err})") from None
    params = signature.parameters
    found = ", ".join(str(p) for p in params.values()) or "no parameters"
    for name, meaning in spec.required.items():
        param = params.get(name)
        if param is None:
            raise LayoutSpecError(
                f"{where}: it has no parameter `{name}`; expected `{name}` ({meaning}), found ({found})"
            )
        if param.kind is _POSITIONAL_ONLY or param.kind in _VARIADIC:
            raise LayoutSpecError(
                f"{where}: parameter `{name}` is {param.kind.description}; expected a parameter that can be "
                f"passed by name ({meaning}), found ({found})"
            )
    for name in spec.optional:
        param = params.get(name)
        if param is not None and param.kind is _POSITIONAL_ONLY:
            raise LayoutSpecError(f"{where}: parameter `{name}` is positional-only; expected one that can be passed by name")
    return signature


class Binder:
    """Maps a call's arguments to parameter names, defaults applied, without `inspect.Signature.bind`.

    Binding is on every hooked call, and ``Signature.bind`` costs tens of
    microseconds; for a plain signature (no positional-only or variadic
    parameters) the mapping is a few dict operations. Anything else, and any
    call the fast path cannot place, goes through ``Signature.bind``, whose
    ``TypeError`` says the call does not fit (``None``).
    """

    def __init__(self, signature: inspect.Signature) -> None:
        self.signature = signature
        params = list(signature.parameters.values())
        self.plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        self.positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        self.order = [p.name for p in params]  # a parameter's position when passed positionally
        self.names = frozenset(p.name for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        # the names filled by n positional arguments, for each n: a keyword may not repeat one
        self.taken = [frozenset(self.positional[:n]) for n in range(len(self.positional) + 1)]

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The call's arguments by name with the defaults applied, or ``None`` when the call does not fit."""
        if (self.plain and len(args) <= len(self.positional) and self.names.issuperset(kwargs)
                and self.taken[len(args)].isdisjoint(kwargs)):
            call = self.defaults.copy()  # C-level dict operations only: this runs on every hooked call
            call.update(zip(self.positional, args))
            call.update(kwargs)
            if len(call) == len(self.names):  # every parameter without a default was given
                return call
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        return dict(bound.arguments)


Body = Callable[[tuple[Any, ...], dict[str, Any], dict[str, Any]], Any]
"""A role's call: ``body(args, kwargs, call)`` calls the original with the checks around it (``call``: by name)."""


def wrap(checker: CheckerState, role: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The checked wrapper of ``fn`` in ``role`` for ``checker`` (see the module docs)."""
    role = role_name(role)
    if getattr(fn, "__layoutcheck_role__", None) == role and getattr(fn, "__layoutcheck_checker__", None) is checker:
        return fn
    binder = Binder(check_signature(checker, role, fn))
    where = getattr(fn, "__name__", role)
    body = _BODIES[role](checker, fn, where, binder)

    @functools.wraps(fn)
    def layoutcheck_wrapper(*args: Any, **kwargs: Any) -> Any:
        if compiling():  # hooks belong at eager boundaries: never inside a torch.compile trace
            return fn(*args, **kwargs)
        call = binder.arguments(args, kwargs)
        if call is None:  # not the call the signature promised: through, with a note
            result = fn(*args, **kwargs)
            checker._note(where, "a call's arguments did not bind to the signature read when it was wrapped",
                          key=f"unbound {where}")
            return result
        return body(args, kwargs, call)

    layoutcheck_wrapper.__layoutcheck_role__ = role  # type: ignore[attr-defined]
    layoutcheck_wrapper.__layoutcheck_checker__ = checker  # type: ignore[attr-defined]
    return layoutcheck_wrapper


def _producer(checker: CheckerState, fn: Callable[..., Any], where: str, binder: Binder) -> Body:
    def body(args: tuple[Any, ...], kwargs: dict[str, Any], call: dict[str, Any]) -> Any:
        checker._enter_producer()  # offset-helper calls from inside are the producer's (O4 judges them)
        try:
            result = fn(*args, **kwargs)
        finally:
            checker._exit_producer()
        checker._checking(where, lambda: checker._producer_returned(where, call, result))
        return result

    return body


def _batch_builder(checker: CheckerState, fn: Callable[..., Any], where: str, binder: Binder) -> Body:
    def body(args: tuple[Any, ...], kwargs: dict[str, Any], call: dict[str, Any]) -> Any:
        state = checker._checking(where, lambda: consumer_calls.batch_before(checker, where, call))
        agreed = checker._checking(where, lambda: consumer_calls.batch_agreement(checker, where, state))
        checker._report([*(state.found if state is not None else ()), *(agreed or ())])  # may fail closed
        batch = fn(*args, **kwargs)
        if state is not None:
            checker._checking(where, lambda: consumer_calls.batch_after(checker, where, state, batch))
        return batch

    return body


def _replay_filler(checker: CheckerState, fn: Callable[..., Any], where: str, binder: Binder) -> Body:
    name = checker.adapter.register_argument

    def body(args: tuple[Any, ...], kwargs: dict[str, Any], call: dict[str, Any]) -> Any:
        state = checker._checking(where, lambda: consumer_calls.filler_before(checker, where, call))  # may fail closed
        if state is None:
            return fn(*args, **kwargs)
        # the same call, with the register function counted (Miles passes everything by keyword)
        register = _counted_register(checker, state, call[name])
        if name in kwargs:
            return fn(*args, **{**kwargs, name: register})
        position = binder.order.index(name)
        return fn(*args[:position], register, *args[position + 1 :], **kwargs)

    return body


def _counted_register(checker: CheckerState, state: consumer_calls.FillerCallState, register: Callable[..., Any]) -> Callable[..., Any]:
    # One per filler call: the state is that call's, never the checker's shared one.
    @functools.wraps(register)
    def layoutcheck_register(*args: Any, **kwargs: Any) -> Any:
        checker._checking(state.where, lambda: consumer_calls.replay_registered(checker, state, args, kwargs))
        return register(*args, **kwargs)

    return layoutcheck_register


def _offset_helper(checker: CheckerState, fn: Callable[..., Any], where: str, binder: Binder) -> Body:
    def body(args: tuple[Any, ...], kwargs: dict[str, Any], call: dict[str, Any]) -> Any:
        result = fn(*args, **kwargs)
        if not checker._in_producer():
            checker._checking(where, lambda: consumer_calls.offset_returned(checker, where, call, result))
        return result

    return body


_BODIES: dict[str, Callable[[CheckerState, Callable[..., Any], str, Binder], Body]] = {
    "producer": _producer,
    "batch_builder": _batch_builder,
    "replay_filler": _replay_filler,
    "offset_helper": _offset_helper,
}
