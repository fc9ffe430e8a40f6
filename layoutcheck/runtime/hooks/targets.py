"""Whether a hook's module exists, found without importing anything, and near names for a missing target.

A hook waits for the program to import its module (`install`). When the
module is never imported, the debug mode must tell a misspelled path
(``minitrainer.dataa``) from a module this process simply does not use (a
launcher, a Ray driver, ``pip``). `module_state` answers from what is
already known, without running any code of the program:

* ``imported``: in ``sys.modules``;
* ``importable``: not imported, but the finders find it;
* ``missing``: its parent package is imported and has no such module: a
  typo, in any process;
* ``not found``: a top-level package the finders cannot find. In a process
  that runs the trainer this is a typo too; in a launcher it may only be
  on another ``sys.path`` (a script's folder under torchrun);
* ``unknown``: its parent package is not imported (finding the module
  would import the parent, which runs the program's code).
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
from typing import Any, Literal

__all__ = ["ModuleState", "close_names", "missing_module", "module_state", "not_installed_reason", "submodule_names"]

ModuleState = Literal["imported", "importable", "missing", "not found", "unknown"]


def module_state(name: str) -> ModuleState:
    """What this process knows of module ``name`` (see the module docs); never imports anything."""
    if name in sys.modules:
        return "imported"
    top, parent = name.partition(".")[0], name.rpartition(".")[0]
    try:
        if top not in sys.modules:  # finding a top-level name imports nothing
            if importlib.util.find_spec(top) is None:
                return "not found"
            return "importable" if not parent else "unknown"
        if parent not in sys.modules:
            return "unknown"  # finding the module would import its parent: the program's code
        return "importable" if importlib.util.find_spec(name) is not None else "missing"
    except (ImportError, ValueError, AttributeError):  # a broken parent, an odd finder: no evidence either way
        return "unknown"


def missing_module(name: str) -> str | None:
    """Why module ``name`` cannot exist, judged from its packages already imported; ``None`` while it may.

    The first package of ``name`` not imported yet is looked up in its
    imported parent (which runs no code): when the parent has no such
    module, ``name`` can never be imported (``pkg.dataa:f`` once ``pkg`` is
    imported). A top-level package that cannot be found is not judged here:
    a script's folder may not be on ``sys.path`` yet.
    """
    parts = name.split(".")
    for i in range(1, len(parts)):
        parent, here = ".".join(parts[:i]), ".".join(parts[: i + 1])
        if parent not in sys.modules:
            return None
        if here in sys.modules:
            continue
        try:
            found = importlib.util.find_spec(here)
        except (ImportError, ValueError, AttributeError):  # a broken parent, an odd finder: no evidence
            return None
        if found is not None:
            return None
        near = difflib.get_close_matches(parts[i], submodule_names(parent), n=1)
        return (f"module `{name}` does not exist: `{parent}` has no module `{parts[i]}`"
                + (f"; did you mean `{parent}.{near[0]}`?" if near else ""))
    return None


def close_names(name: str, namespace: Any, *, limit: int = 1) -> list[str]:
    """Public names of ``namespace`` (a module or class) close to ``name``: the "did you mean" of a missing target."""
    try:
        names = [n for n in dir(namespace) if not n.startswith("_")]
    except Exception:  # noqa: BLE001 - a namespace whose dir() fails has no suggestion
        return []
    return difflib.get_close_matches(name, names, n=limit)


def submodule_names(parent: str) -> list[str]:
    """The submodules an imported package ``parent`` has (for a "did you mean"); empty when unknown."""
    package = sys.modules.get(parent)
    paths = getattr(package, "__path__", None)
    if paths is None:
        return []
    import pkgutil

    try:
        return [info.name for info in pkgutil.iter_modules(list(paths))]
    except Exception:  # noqa: BLE001 - an unusual loader: no suggestion
        return []


def not_installed_reason(module: str, *, calls: int, at_exit: bool) -> str | None:
    """Why a hook whose ``module`` was never imported did not go in, or ``None`` while that is no evidence yet.

    ``calls``: the calls the process's other hooks saw (none: a launcher, a
    driver, a tool, which never imports the trainer). ``at_exit``: whether
    the process is ending (a module that exists but was never imported is
    a problem only then). A module that does not exist is one at any time.
    """
    state = module_state(module)
    parent, _, leaf = module.rpartition(".")
    if state == "missing":
        near = difflib.get_close_matches(leaf, submodule_names(parent), n=1)
        return (f"module `{module}` does not exist: `{parent}` has no module `{leaf}`"
                + (f"; did you mean `{parent}.{near[0]}`?" if near else ""))
    if not calls:
        return None
    if state == "not found":
        return f"no module `{module.partition('.')[0]}` can be found in this process"
    if at_exit and state != "imported":
        return (f"this process never imported `{module}` (its other hooks saw {calls} call{'s' if calls != 1 else ''}): is the function "
                "defined in another module?")
    return None
