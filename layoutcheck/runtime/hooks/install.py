"""Installing wrappers by dotted path, with no change to the program.

A `HookSet` puts a wrapper in place of ``package.module:function`` (or
``package.module:Class.method``):

* in the module (or class) that defines it;
* in every module that copied the function by name before the hook went in
  (``from ..data import get_batch``: trainers import this way, and a copy is
  a second reference that patching the module alone would miss). The copies
  are found by identity in the dicts of ``sys.modules``;
* when the module is imported *later* (the usual case: activation runs at
  interpreter start, before the trainer is imported), right after the module
  body ran, by a small ``sys.meta_path`` finder that wraps the real loader's
  ``exec_module`` for the target modules only. A module that imports the
  function after that gets the wrapper already.

References held elsewhere (a dict, a class attribute, a closure, a
``functools.partial``) are not rebound: say so in the docs of a hook that
needs it. `HookSet.remove` restores every patched name (and any copy taken
of the wrapper since) to the original. Installing the same target twice, or
wrapping a wrapper, does nothing. Everything here holds one lock, so
installation from several threads (a trainer importing in a thread pool) is
safe.

Nothing here imports the target modules: a hook is installed when the
program imports them, so activation in a process that never does (``pip``, a
Ray driver, a launcher) costs nothing more.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.hooks.settings import HookSpec
from layoutcheck.runtime.hooks.targets import close_names

__all__ = ["HookSet", "InstalledHook", "Wrap"]

Wrap = Callable[[HookSpec, Callable[..., Any]], Callable[..., Any]]
"""Builds the wrapper of one function: ``wrap(spec, original) -> wrapper``; may raise `LayoutSpecError`."""

_LOCK = threading.RLock()
_WRAPPERS: dict[int, InstalledHook] = {}
"""Every live wrapper by ``id``: a wrapper is never wrapped again (idempotence across hook sets)."""


@dataclass(eq=False)
class InstalledHook:
    """One installed wrapper and every name it was put under."""

    spec: HookSpec
    original: Callable[..., Any]
    wrapper: Callable[..., Any]
    patched: list[tuple[Any, str]] = field(default_factory=list)
    """``(module or class, attribute)`` pairs that now hold the wrapper."""


def _unwrap_descriptor(raw: Any) -> tuple[Any, Callable[[Any], Any] | None]:
    # staticmethod/classmethod hold the function in __func__; re-wrap the wrapper the same way.
    if isinstance(raw, (staticmethod, classmethod)):
        return raw.__func__, type(raw)
    return raw, None


def _resolve(spec: HookSpec, module: ModuleType) -> tuple[Any, str, Any]:
    """``(owner, attribute, raw value)`` of a target in an imported module; `LayoutSpecError` if absent."""
    parts = spec.qualname.split(".")
    owner: Any = module
    for i, part in enumerate(parts):
        namespace = vars(owner) if isinstance(owner, type) else None
        raw = namespace.get(part) if namespace is not None and part in namespace else getattr(owner, part, None)
        if raw is None:
            found = ".".join([spec.module, *parts[:i]])
            near = close_names(part, owner)
            raise LayoutSpecError(
                f"cannot hook `{spec.target}` ({spec.role}): `{found}` has no attribute `{part}`"
                + (f"; did you mean `{near[0]}`?" if near else "; check the dotted path")
            )
        if i < len(parts) - 1:
            owner = raw
    return owner, parts[-1], raw


def _module_dicts() -> list[dict[str, Any]]:
    out = []
    for module in list(sys.modules.values()):
        try:
            namespace = module.__dict__
        except Exception:  # an odd object in sys.modules (a lazy proxy): skip it
            continue
        if isinstance(namespace, dict):
            out.append(namespace)
    return out


def _rebind(old: Any, new: Any, hook: InstalledHook | None) -> None:
    # Replace every module-level reference to `old` with `new` (identity, never ==).
    for namespace in _module_dicts():
        for key, value in list(namespace.items()):
            if value is old:
                namespace[key] = new
                if hook is not None:
                    module = sys.modules.get(namespace.get("__name__", ""), namespace)
                    hook.patched.append((module, key))


class HookSet:
    """Wrappers installed by dotted path, now or when their modules are imported.

    ``wrap(spec, original)`` builds each wrapper; when it (or resolving the
    target) raises `LayoutSpecError`, ``on_error(spec, error)`` decides:
    re-raise (the error then surfaces from the ``import`` that triggered the
    installation, naming the target) or keep going without that hook.
    """

    def __init__(self, wrap: Wrap, *, on_error: Callable[[HookSpec, LayoutSpecError], None] | None = None) -> None:
        self._wrap = wrap
        self._on_error = on_error
        self._installed: list[InstalledHook] = []
        self._pending: list[HookSpec] = []
        self._errors: list[tuple[HookSpec, LayoutSpecError]] = []

    @property
    def installed(self) -> tuple[InstalledHook, ...]:
        """The hooks in place now."""
        return tuple(self._installed)

    @property
    def pending(self) -> tuple[HookSpec, ...]:
        """Targets whose module has not been imported yet."""
        return tuple(self._pending)

    @property
    def errors(self) -> tuple[tuple[HookSpec, LayoutSpecError], ...]:
        """Targets that could not be hooked, with why (kept when ``on_error`` did not raise)."""
        return tuple(self._errors)

    def add(self, specs: Iterable[HookSpec]) -> None:
        """Install each target whose module is imported; the others as soon as the program imports them."""
        with _LOCK:
            for spec in specs:
                if any(h.spec == spec for h in self._installed) or spec in self._pending:
                    continue
                module = sys.modules.get(spec.module)
                if module is not None:
                    self._install(spec, module)
                else:
                    self._pending.append(spec)
                    _FINDER.watch(spec.module, self)

    def remove(self) -> None:
        """Restore every patched name, and every copy of a wrapper taken since, to the original."""
        with _LOCK:
            for hook in reversed(self._installed):
                for owner, attribute in hook.patched:
                    namespace = vars(owner) if isinstance(owner, (type, ModuleType)) else owner
                    raw, kind = _unwrap_descriptor(namespace.get(attribute))
                    if raw is hook.wrapper:
                        restored = kind(hook.original) if kind is not None else hook.original
                        if isinstance(owner, type):
                            setattr(owner, attribute, restored)
                        else:
                            namespace[attribute] = restored
                _rebind(hook.wrapper, hook.original, None)  # copies of the wrapper taken after installation
                _WRAPPERS.pop(id(hook.wrapper), None)
            self._installed.clear()
            for spec in self._pending:
                _FINDER.unwatch(spec.module, self)
            self._pending.clear()

    # --- internals (called with _LOCK held) ----------------------------

    def _module_loaded(self, module: ModuleType) -> None:
        for spec in [s for s in self._pending if s.module == module.__name__]:
            self._pending.remove(spec)
            self._install(spec, module)

    def _install(self, spec: HookSpec, module: ModuleType) -> None:
        try:
            owner, attribute, raw = _resolve(spec, module)
            original, kind = _unwrap_descriptor(raw)
            if id(original) in _WRAPPERS:  # already hooked (by this set or another): idempotent
                return
            if not callable(original):
                raise LayoutSpecError(
                    f"cannot hook `{spec.target}` ({spec.role}): it is a {type(original).__name__}, not a function"
                )
            wrapper = self._wrap(spec, original)
        except LayoutSpecError as err:
            self._errors.append((spec, err))
            if self._on_error is None:
                raise
            self._on_error(spec, err)
            return
        hook = InstalledHook(spec, original, wrapper)
        _WRAPPERS[id(wrapper)] = hook
        self._installed.append(hook)
        if isinstance(owner, type):
            setattr(owner, attribute, kind(wrapper) if kind is not None else wrapper)
            hook.patched.append((owner, attribute))
        else:
            # the defining module is one of the module dicts; copies taken by name are the others
            _rebind(original, wrapper, hook)


class _PostImportFinder:
    """A ``sys.meta_path`` entry that tells hook sets when a watched module's body has run.

    It answers only for watched module names: it asks the finders after it
    for the real spec and wraps that spec's loader, so the import itself is
    unchanged. It removes itself from ``sys.meta_path`` when nothing is watched.
    """

    def __init__(self) -> None:
        self._watchers: dict[str, list[HookSet]] = {}
        self._busy = threading.local()

    def watch(self, name: str, hooks: HookSet) -> None:
        self._watchers.setdefault(name, [])
        if hooks not in self._watchers[name]:
            self._watchers[name].append(hooks)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def unwatch(self, name: str, hooks: HookSet) -> None:
        watchers = self._watchers.get(name, [])
        if hooks in watchers:
            watchers.remove(hooks)
        if not watchers:
            self._watchers.pop(name, None)
        if not self._watchers and self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in self._watchers or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.on = False
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _NotifyingLoader(spec.loader, self)
        return spec

    def loaded(self, module: ModuleType) -> None:
        with _LOCK:
            for hooks in list(self._watchers.pop(module.__name__, [])):
                hooks._module_loaded(module)
            if not self._watchers and self in sys.meta_path:
                sys.meta_path.remove(self)


class _NotifyingLoader:
    """The real loader, plus a call to the finder once the module body has run."""

    def __init__(self, loader: Any, finder: _PostImportFinder) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # hand the module back to its real loader: nothing of ours stays on it
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._finder.loaded(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


_FINDER = _PostImportFinder()
