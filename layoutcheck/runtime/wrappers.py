"""The role wrappers `LayoutChecker.wrap` builds, and the signature check made when wrapping.

``wrap(checker, role, fn)`` reads ``fn``'s signature once and refuses, with
a `LayoutSpecError` naming the function, the parameter, what was expected
and what was found, a function that does not name the parameters its role
reads (the adapter's `~layoutcheck.runtime.adapters.RoleSpec`). The
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
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from layoutcheck.errors import LayoutSpecError

if TYPE_CHECKING:
    from layoutcheck.runtime.checker import LayoutChecker, _FillerCallState

__all__ = ["check_signature", "role_name", "wrap"]

_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _compiling() -> bool:
    # Hooks belong at eager boundaries; never run inside a torch.compile trace.
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def role_name(role: str) -> str:
    """``role`` with hyphens as underscores, if it is one of `LayoutChecker.ROLES`; else `LayoutSpecError`."""
    from layoutcheck.runtime.checker import LayoutChecker

    name = role.replace("-", "_") if isinstance(role, str) else role
    if name not in LayoutChecker.ROLES:
        raise LayoutSpecError(f"unknown role {role!r}: expected one of {', '.join(LayoutChecker.ROLES)}")
    return name


def _qualified(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}:{name}" if module else name


def check_signature(checker: LayoutChecker, role: str, fn: Callable[..., Any]) -> inspect.Signature:
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


def _bound(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments | None:
    try:
        return signature.bind(*args, **kwargs)
    except TypeError:
        return None


def _arguments(bound: inspect.BoundArguments) -> dict[str, Any]:
    # The call's arguments with the defaults applied (what the function will see), leaving `bound` as called.
    full = bound.signature.bind(*bound.args, **bound.kwargs)
    full.apply_defaults()
    return dict(full.arguments)


def _unbound(checker: LayoutChecker, where: str) -> None:
    checker._note(where, "a call's arguments did not bind to the signature read when it was wrapped",
                  key=f"unbound {where}")


def wrap(checker: LayoutChecker, role: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The checked wrapper of ``fn`` in ``role`` for ``checker`` (see the module docs)."""
    role = role_name(role)
    if getattr(fn, "__layoutcheck_role__", None) == role and getattr(fn, "__layoutcheck_checker__", None) is checker:
        return fn
    signature = check_signature(checker, role, fn)
    wrapper = _BUILDERS[role](checker, fn, signature, getattr(fn, "__name__", role))
    wrapper.__layoutcheck_role__ = role  # type: ignore[attr-defined]
    wrapper.__layoutcheck_checker__ = checker  # type: ignore[attr-defined]
    return wrapper


def _producer(checker: LayoutChecker, fn: Callable[..., Any], signature: inspect.Signature, where: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def layoutcheck_producer(*args: Any, **kwargs: Any) -> Any:
        if _compiling():
            return fn(*args, **kwargs)
        checker._enter_producer()  # offset-helper calls from inside are the producer's (O4 judges them)
        try:
            result = fn(*args, **kwargs)
        finally:
            checker._exit_producer()
        bound = _bound(signature, args, kwargs)
        if bound is None:
            _unbound(checker, where)
        else:
            call = _arguments(bound)
            checker._checking(where, lambda: checker._producer_returned(where, call, result))
        return result

    return layoutcheck_producer


def _batch_builder(checker: LayoutChecker, fn: Callable[..., Any], signature: inspect.Signature, where: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def layoutcheck_batch_builder(*args: Any, **kwargs: Any) -> Any:
        if _compiling():
            return fn(*args, **kwargs)
        bound = _bound(signature, args, kwargs)
        if bound is None:
            batch = fn(*args, **kwargs)
            _unbound(checker, where)
            return batch
        call = _arguments(bound)
        state = checker._checking(where, lambda: checker._batch_before(where, call))  # may fail closed (raise mode)
        batch = fn(*args, **kwargs)
        if state is not None:
            checker._checking(where, lambda: checker._batch_after(where, state, batch))
        return batch

    return layoutcheck_batch_builder


def _replay_filler(checker: LayoutChecker, fn: Callable[..., Any], signature: inspect.Signature, where: str) -> Callable[..., Any]:
    name = checker.adapter.register_argument

    @functools.wraps(fn)
    def layoutcheck_replay_filler(*args: Any, **kwargs: Any) -> Any:
        if _compiling():
            return fn(*args, **kwargs)
        bound = _bound(signature, args, kwargs)
        if bound is None:
            result = fn(*args, **kwargs)
            _unbound(checker, where)
            return result
        call = _arguments(bound)
        state = checker._checking(where, lambda: checker._filler_before(where, call))  # may fail closed
        if state is None or name not in bound.arguments:
            return fn(*args, **kwargs)
        bound.arguments[name] = _counted_register(checker, state, bound.arguments[name])
        return fn(*bound.args, **bound.kwargs)

    return layoutcheck_replay_filler


def _counted_register(checker: LayoutChecker, state: _FillerCallState, register: Callable[..., Any]) -> Callable[..., Any]:
    # One per filler call: the state is that call's, never the checker's shared one.
    @functools.wraps(register)
    def layoutcheck_register(*args: Any, **kwargs: Any) -> Any:
        checker._checking(state.where, lambda: checker._replay_registered(state, args, kwargs))
        return register(*args, **kwargs)

    return layoutcheck_register


def _offset_helper(checker: LayoutChecker, fn: Callable[..., Any], signature: inspect.Signature, where: str) -> Callable[..., Any]:
    @functools.wraps(fn)
    def layoutcheck_offset_helper(*args: Any, **kwargs: Any) -> Any:
        if _compiling():
            return fn(*args, **kwargs)
        result = fn(*args, **kwargs)
        if checker._in_producer():
            return result
        bound = _bound(signature, args, kwargs)
        if bound is None:
            _unbound(checker, where)
            return result
        call = _arguments(bound)
        checker._checking(where, lambda: checker._offset_returned(where, call, result))
        return result

    return layoutcheck_offset_helper


_BUILDERS = {
    "producer": _producer,
    "batch_builder": _batch_builder,
    "replay_filler": _replay_filler,
    "offset_helper": _offset_helper,
}
