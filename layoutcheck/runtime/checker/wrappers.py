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
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.checker import consumer_calls
from layoutcheck.runtime.contract.expressions import MISSING
from layoutcheck.runtime.contract.meta import compiling

if TYPE_CHECKING:
    from layoutcheck.runtime.checker.state import CheckerState

__all__ = ["ROLES", "TRACER_PARAMETERS", "Binder", "check_signature", "check_tracer_signature", "role_name", "wrap"]

ROLES: tuple[str, ...] = ("producer", "batch_builder", "replay_filler", "offset_helper")
"""The roles a checker wraps (`LayoutChecker.ROLES`)."""

_POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")
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


def _signature(fn: Callable[..., Any], where: str) -> inspect.Signature:
    if not callable(fn):
        raise LayoutSpecError(f"{where}: it is a {type(fn).__name__}, not a function")
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise LayoutSpecError(f"{where}: its signature cannot be read ({err})") from None


def check_signature(checker: CheckerState, role: str, fn: Callable[..., Any],
                    inputs: Mapping[str, object] | None = None) -> inspect.Signature:
    """``fn``'s signature, if it names every parameter ``role`` reads (by name) or ``inputs`` says where; else `LayoutSpecError`.

    ``inputs`` (a boundary's ``inputs`` table): role input -> a path into the
    call (`layoutcheck.runtime.contract.expressions.Path`, whose parameter
    must exist) or a literal value.
    """
    spec = checker.adapter.roles[role]
    where = f"cannot wrap `{_qualified(fn)}` as {spec.label}"
    signature = _signature(fn, where)
    params = signature.parameters
    found = ", ".join(str(p) for p in params.values()) or "no parameters"
    inputs = inputs or {}
    register = inputs.get(checker.adapter.register_argument)
    if role == "replay_filler" and register is not None and not (
            isinstance(register, str) and TARGET.match(register)):
        raise LayoutSpecError(f"{where}: `inputs.{checker.adapter.register_argument}`: the register function is "
                              "replaced in the call: it is the function's own parameter of that name, or the "
                              "`package.module:Class.method` the filler calls to register (counted during the call)")
    for name, source in inputs.items():
        parameter = getattr(source, "parameter", None)
        if getattr(source, "root", None) == "returns":
            raise LayoutSpecError(f"{where}: `inputs.{name}` reads the return value; a role's inputs come from the call")
        if parameter is not None and (parameter not in params or params[parameter].kind in _VARIADIC):
            raise LayoutSpecError(f"{where}: `inputs.{name}` = `{source}` reads the parameter `{parameter}`, which it "
                                  f"does not have; found ({found})")
    for name, meaning in spec.required.items():
        if name in inputs:
            continue
        param = params.get(name)
        if param is None:
            raise LayoutSpecError(
                f"{where}: it has no parameter `{name}`; expected `{name}` ({meaning}), found ({found}). "
                f"If the function takes it under another name or not at all, say where with "
                f"`inputs.{name}` in its [runtime.boundaries] table"
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


TRACER_PARAMETERS: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "cp-slicer": (("qkv_format",), ("max_seq_len",)),
    "response-slicer": (("total_length",), ("response_length",), ("qkv_format",), ("max_token_len", "max_seq_len")),
}
"""What the tracer's CP-helper roles read by name (each tuple: one of these): Miles's ``slice_with_cp`` and
``slice_log_prob_with_cp``. A helper that lacks one would be read with its default (the packed rule)."""


def check_tracer_signature(role: str, fn: Callable[..., Any], target: str | None = None) -> None:
    """Refuse a CP helper configured as a tracer role that cannot carry the layout the role reads.

    ``slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None)``
    is judged by its ``qkv_format`` and ``max_seq_len``; a helper without
    them (``zigzag(t, length, pad_value)``) would be judged as if it always
    took the packed rule, and every call of a BSHD run would be a false
    alarm. Such a helper is described with a boundary contract instead.
    """
    needed = TRACER_PARAMETERS.get(role)
    if needed is None:
        return
    name = target or _qualified(fn)
    where = f"cannot hook `{name}` as the {role} (a tracer role)"
    params = _signature(fn, where).parameters
    found = ", ".join(params) or "no parameters"
    reads = _TRACER_READS[role]
    for choices in needed:
        if not any(c in params and params[c].kind not in _VARIADIC for c in choices):
            missing = " or ".join(f"`{c}`" for c in choices)
            raise LayoutSpecError(
                f"{where}: it has no parameter {missing}, which the role reads (Miles's {reads}); found "
                f"({found}). Read without it, every call would be judged by the packed rule. Describe the helper "
                f"with a boundary contract instead: [runtime.boundaries.\"{name}\"] with its arguments' and return "
                "value's spaces"
            )


_TRACER_READS = {
    "cp-slicer": "slice_with_cp(tokens, pad_value, qkv_format, max_seq_len)",
    "response-slicer": "slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format, max_token_len)",
}


class Binder:
    """Maps a call's arguments to parameter names, defaults applied, without `inspect.Signature.bind`.

    Binding is on every hooked call, and ``Signature.bind`` costs tens of
    microseconds; for a plain signature (no positional-only or variadic
    parameters) the mapping is a few dict operations. Anything else, and any
    call the fast path cannot place, goes through ``Signature.bind``, whose
    ``TypeError`` says the call does not fit (``None``).
    """

    def __init__(self, signature: inspect.Signature, inputs: Mapping[str, object] | None = None) -> None:
        self.signature = signature
        self.inputs = dict(inputs or {})
        """A role's inputs read from other parameters or given as values (a boundary's ``inputs``)."""
        params = list(signature.parameters.values())
        self.plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
        self.positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        self.order = [p.name for p in params]  # a parameter's position when passed positionally
        self.names = frozenset(p.name for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        # the names filled by n positional arguments, for each n: a keyword may not repeat one
        self.taken = [frozenset(self.positional[:n]) for n in range(len(self.positional) + 1)]

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The call's arguments by name with the defaults applied (and the ``inputs``), or ``None`` when the call does not fit."""
        call = self._arguments(args, kwargs)
        if call is not None and self.inputs:
            for name, source in self.inputs.items():
                read = getattr(source, "read", None)
                value = read(call) if read is not None else source
                call[name] = None if value is MISSING else value
        return call

    def _arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
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


def wrap(checker: CheckerState, role: str, fn: Callable[..., Any],
         inputs: Mapping[str, object] | None = None) -> Callable[..., Any]:
    """The checked wrapper of ``fn`` in ``role`` for ``checker`` (see the module docs); ``inputs``: see `check_signature`."""
    role = role_name(role)
    if getattr(fn, "__layoutcheck_role__", None) == role and getattr(fn, "__layoutcheck_checker__", None) is checker:
        return fn
    binder = Binder(check_signature(checker, role, fn, inputs), inputs)
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
    # `inputs.register_replay_list_func = "pkg.mod:Class.method"`: the filler registers by calling that function
    # (slime's `RoutingReplay.record`, once per layer), which is counted for the length of the call
    intercept = binder.inputs.get(name)
    intercept = intercept if isinstance(intercept, str) else None

    def body(args: tuple[Any, ...], kwargs: dict[str, Any], call: dict[str, Any]) -> Any:
        if intercept is not None:
            owner, attribute, original = _target(intercept)
            call[name] = original
        state = checker._checking(where, lambda: consumer_calls.filler_before(checker, where, call))  # may fail closed
        if state is None:
            return fn(*args, **kwargs)
        if intercept is not None:
            state.by_offset = True
            counted = _counted_register(checker, state, original)
            setattr(owner, attribute, counted)
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(owner, attribute, original)
        # the same call, with the register function counted (Miles passes everything by keyword)
        register = _counted_register(checker, state, call[name])
        if name in kwargs:
            return fn(*args, **{**kwargs, name: register})
        position = binder.order.index(name)
        return fn(*args[:position], register, *args[position + 1 :], **kwargs)

    return body


def _target(target: str) -> tuple[Any, str, Callable[..., Any]]:
    # (owner, attribute, the function) of `pkg.mod:Class.method`, read at the call: the owner may be patched
    import importlib

    module, _, qualname = target.partition(":")
    owner: Any = importlib.import_module(module)
    parts = qualname.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    raw = vars(owner).get(parts[-1]) if isinstance(owner, type) else getattr(owner, parts[-1])
    if raw is None or not callable(raw):
        raise LayoutSpecError(f"`{target}` is not a function to count registrations with")
    return owner, parts[-1], raw


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
