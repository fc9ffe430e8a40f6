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

A hook stays in place for the whole run. The finder keeps watching each
module whose hook went in, so a module executed again (``importlib.reload``)
or imported a second time under another name (the same file found through a
second ``sys.path`` entry: ``data`` beside ``pkg.data``) gets its new
function wrapped as soon as its body ran; `HookSet.refresh` finds every
hooked function again by its dotted path (the session calls it at each step
boundary and at exit), re-installs one that something else replaced (an
assignment over it), and reports one it cannot (`HookSet.lost`).

While a hook waits for its module, the finder also watches the module's
packages: when ``pkg`` is imported and has no module ``dataa``, the hook on
``pkg.dataa:f`` can never go in, and ``on_missing`` is told right then
(before the program runs a step), not at exit.

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

import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.hooks.settings import HookSpec
from layoutcheck.runtime.hooks.targets import close_names, missing_module

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
    """Wrappers installed by dotted path, now or when their modules are imported, kept in place for the run.

    ``wrap(spec, original)`` builds each wrapper; when it (or resolving the
    target) raises `LayoutSpecError`, ``on_error(spec, error)`` decides:
    re-raise (the error then surfaces from the ``import`` that triggered the
    installation, naming the target) or keep going without that hook.
    ``on_missing(spec, reason)`` is told when a package of a waiting hook's
    module is imported and the module does not exist in it (the hook stays
    waiting: it can never go in).
    """

    def __init__(self, wrap: Wrap, *, on_error: Callable[[HookSpec, LayoutSpecError], None] | None = None,
                 on_missing: Callable[[HookSpec, str], None] | None = None) -> None:
        self._wrap = wrap
        self._on_error = on_error
        self._on_missing = on_missing
        self._installed: list[InstalledHook] = []
        """Every wrapper put in place, in order: a spec re-installed after a reload has one entry per wrapper."""
        self._pending: list[HookSpec] = []
        self._errors: list[tuple[HookSpec, LayoutSpecError]] = []
        self._missing: set[HookSpec] = set()
        self._lost: dict[HookSpec, str] = {}
        self._reinstalled: list[tuple[HookSpec, str]] = []

    @property
    def installed(self) -> tuple[InstalledHook, ...]:
        """The hooks in place: one per target (the latest wrapper of a target re-installed after a reload)."""
        return tuple(h for h in self._latest() if h.spec not in self._lost)

    def _latest(self) -> list[InstalledHook]:
        """The latest wrapper of each target installed (lost ones included)."""
        return list({h.spec: h for h in self._installed}.values())

    @property
    def pending(self) -> tuple[HookSpec, ...]:
        """Targets whose module has not been imported yet."""
        return tuple(self._pending)

    @property
    def errors(self) -> tuple[tuple[HookSpec, LayoutSpecError], ...]:
        """Targets that could not be hooked, with why (kept when ``on_error`` did not raise)."""
        return tuple(self._errors)

    @property
    def lost(self) -> dict[HookSpec, str]:
        """Installed targets whose function is no longer a wrapper and could not be re-installed, with why."""
        return dict(self._lost)

    def take_reinstalled(self) -> list[tuple[HookSpec, str]]:
        """Targets re-installed since the last call, with what had replaced the wrapper (emptied by the call)."""
        with _LOCK:
            out, self._reinstalled = self._reinstalled, []
        return out

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
                    self._check_missing(spec)

    def refresh(self, *, reinstall: bool) -> None:
        """Find every installed function again by its dotted path; re-install or report one that lost its wrapper.

        A function that is no longer a wrapper (something assigned over it,
        or executed its module again unseen) is wrapped again when
        ``reinstall`` (`take_reinstalled` then lists it), else it is `lost`.
        A module gone from ``sys.modules`` is not judged: its functions are
        the wrappers they were, and a new import of it is watched.
        """
        with _LOCK:
            for hook in self._latest():
                spec = hook.spec
                module = sys.modules.get(spec.module)
                if module is None:
                    continue
                try:
                    _, _, raw = _resolve(spec, module)
                except LayoutSpecError as err:
                    self._lost[spec] = f"`{spec.target}` is gone: {str(err).rpartition('): ')[2]}"
                    continue
                current, _ = _unwrap_descriptor(raw)
                if id(current) in _WRAPPERS:
                    continue
                what = f"`{spec.target}` was replaced by {_describe(current)} after its hook went in"
                if reinstall and callable(current):
                    self._install(spec, module, again=what)
                else:
                    self._lost[spec] = what

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
            names = {h.spec.module for h in self._installed} | {s.module for s in self._pending}
            self._installed.clear()
            self._pending.clear()
            for name in names:
                _FINDER.unwatch(name, self)

    # --- internals (called with _LOCK held) ----------------------------

    def _check_missing(self, spec: HookSpec) -> None:
        """Tell ``on_missing`` once when a package of a waiting hook's module is imported and lacks the module."""
        if spec in self._missing or self._on_missing is None:
            return
        reason = missing_module(spec.module)
        if reason is not None:
            self._missing.add(spec)
            self._on_missing(spec, reason)

    def _package_loaded(self, name: str) -> None:
        for spec in [s for s in self._pending if s.module.startswith(name + ".")]:
            self._check_missing(spec)

    def _module_loaded(self, module: ModuleType, name: str) -> None:
        """Module ``name`` (or a second copy of it: ``module.__name__`` differs) ran its body: install its hooks."""
        for spec in [s for s in self._pending if s.module == name]:
            self._pending.remove(spec)
            self._install(spec, module)
        for hook in [h for h in self._latest() if h.spec.module == name]:
            # a module executed again (a reload) or a second copy of it: its function is new, not yet wrapped
            try:
                _, _, raw = _resolve(hook.spec, module)
            except LayoutSpecError as err:
                if module.__name__ == name:
                    self._lost[hook.spec] = (f"`{hook.spec.target}` is gone after `{name}` was executed again: "
                                             f"{str(err).rpartition('): ')[2]}")
                continue
            current, _ = _unwrap_descriptor(raw)
            if id(current) not in _WRAPPERS:
                how = ("executed again (a reload)" if module.__name__ == name
                       else f"imported a second time as `{module.__name__}`")
                self._install(hook.spec, module, again=f"`{name}` was {how}", announce=False)
        if not any(s.module == name for s in self._pending) and not any(h.spec.module == name for h in self._installed):
            _FINDER.unwatch(name, self)  # every hook of it failed to go in: nothing left to watch

    def _install(self, spec: HookSpec, module: ModuleType, *, again: str | None = None,
                 announce: bool = True) -> None:
        """Wrap ``spec``'s function in ``module``; ``again``: why a hook already in goes in once more.

        A hook going in again that fails (the new function no longer fits) is
        `lost`, never an error raised into the program mid-run.
        """
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
            if again is not None:
                self._lost[spec] = f"{again}, and its hook could not go in again: {err}"
                return
            self._errors.append((spec, err))
            if self._on_error is None:
                raise
            self._on_error(spec, err)
            return
        hook = InstalledHook(spec, original, wrapper)
        _WRAPPERS[id(wrapper)] = hook
        self._installed.append(hook)
        self._lost.pop(spec, None)
        if again is not None and announce:
            self._reinstalled.append((spec, again))
        _FINDER.watch(spec.module, self)  # a reload or a second import of the module is seen
        _FINDER.known(spec.module, module)
        if isinstance(owner, type):
            setattr(owner, attribute, kind(wrapper) if kind is not None else wrapper)
            hook.patched.append((owner, attribute))
        else:
            # the defining module is one of the module dicts; copies taken by name are the others
            _rebind(original, wrapper, hook)


def _describe(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    where = getattr(value, "__module__", None)
    if name:
        return f"`{where}.{name}`" if where else f"`{name}`"
    return f"a {type(value).__name__}"


def _file_of(module: ModuleType | None) -> str | None:
    path = getattr(module, "__file__", None)
    return os.path.realpath(path) if path else None


class _PostImportFinder:
    """A ``sys.meta_path`` entry that tells hook sets when a watched module's body has run.

    It answers only for watched module names (a hook's module, its packages
    while the hook waits, and a second name found for a hooked module's
    file): it asks the finders after it for the real spec and wraps that
    spec's loader, so the import itself is unchanged. Every other import
    costs it two dict look-ups. It removes itself from ``sys.meta_path`` when
    nothing is watched.
    """

    def __init__(self) -> None:
        self._watchers: dict[str, list[HookSet]] = {}
        self._packages: dict[str, int] = {}
        """Packages of watched modules (``a`` and ``a.b`` of ``a.b.c``), with how many watched names are under each."""
        self._leaves: dict[str, set[str]] = {}
        """The last part of each hooked module's name (``data`` of ``pkg.data``): a second import is looked for there."""
        self._files: dict[str, str] = {}
        """Each hooked module's file, real path: the same file under another name is the same module again."""
        self._aliases: dict[str, str] = {}
        """A second name of a hooked module (``data``), to the name its hooks use (``pkg.data``)."""
        self._busy = threading.local()

    def watch(self, name: str, hooks: HookSet) -> None:
        if name not in self._watchers:
            self._watchers[name] = []
            for package in _packages_of(name):
                self._packages[package] = self._packages.get(package, 0) + 1
        if hooks not in self._watchers[name]:
            self._watchers[name].append(hooks)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def known(self, name: str, module: ModuleType) -> None:
        """``name`` is imported (as ``module``) and hooked: a second import of its file is to be watched too."""
        path = _file_of(sys.modules.get(name)) or (_file_of(module) if module.__name__ == name else None)
        if path is not None:
            self._files[name] = path
            self._leaves.setdefault(name.rpartition(".")[2], set()).add(name)

    def unwatch(self, name: str, hooks: HookSet) -> None:
        watchers = self._watchers.get(name, [])
        if hooks in watchers:
            watchers.remove(hooks)
        if not watchers and name in self._watchers:
            del self._watchers[name]
            for package in _packages_of(name):
                self._packages[package] -= 1
                if not self._packages[package]:
                    del self._packages[package]
            self._files.pop(name, None)
            leaf = self._leaves.get(name.rpartition(".")[2])
            if leaf is not None:
                leaf.discard(name)
                if not leaf:
                    del self._leaves[name.rpartition(".")[2]]
            for alias in [a for a, n in self._aliases.items() if n == name]:
                del self._aliases[alias]
        if not self._watchers and self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        watched = fullname in self._watchers or fullname in self._packages or fullname in self._aliases
        second = not watched and fullname.rpartition(".")[2] in self._leaves
        if not (watched or second) or getattr(self._busy, "on", False):
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
        if second:
            origin = os.path.realpath(spec.origin) if isinstance(getattr(spec, "origin", None), str) else None
            names = [n for n in self._leaves.get(fullname.rpartition(".")[2], ()) if self._files.get(n) == origin]
            if not names or origin is None:
                return None  # another module with the same last name: the import goes on as if we were not here
            self._aliases[fullname] = names[0]
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _NotifyingLoader(spec.loader, self)
        return spec

    def loaded(self, module: ModuleType) -> None:
        with _LOCK:
            name = module.__name__
            canonical = self._aliases.get(name, name)
            for hooks in list(self._watchers.get(canonical, [])):
                hooks._module_loaded(module, canonical)
            if name in self._packages:
                for hooks in {id(h): h for n, hs in self._watchers.items() if n.startswith(name + ".")
                              for h in hs}.values():
                    hooks._package_loaded(name)


def _packages_of(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


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
