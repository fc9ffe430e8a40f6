"""Whether each proposed hook installs: run in a subprocess with the project importable (``python -m``).

`layoutcheck.init.verify` starts ``python -m layoutcheck.init.probe OUT``
in the project's folder and writes a request on its stdin (JSON):
``{"paths": [...], "checks": [{"id", "target", "kind", "table"?}]}``.
``paths`` go first on ``sys.path`` (where the project's modules import
from); each check is judged as the debug mode would judge it when the
program imports the module:

* the module imports by the dotted path written (the project's own code
  runs: this is why it is a subprocess);
* the attribute chain resolves (``Cls.method`` included) to a callable;
* the wrapper of its ``kind`` accepts the signature: a role through the
  checker's own wrap (`LayoutChecker.wrap`, which refuses a function
  without the parameters its role reads), a tracer role through
  `check_tracer_signature`, a boundary contract through
  `check_boundary_signature`; ``parallel-state`` and ``exists`` only resolve.

One JSON line per check goes to ``OUT`` as soon as it is judged, so a probe
stopped at its time limit still says what it judged:
``{"id", "status": "ok" | "refused" | "unchecked", "why"}``. ``refused``:
it would not install (a fact about the project); ``unchecked``: this
environment cannot tell (a dependency it lacks, a module whose import
fails here). No torch is imported here unless the project imports it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any, TextIO

__all__ = ["CHECKER_ROLES", "TRACER_ROLES", "judge", "main", "run"]

CHECKER_ROLES = ("producer", "batch-builder", "replay-filler", "offset-helper")
TRACER_ROLES = ("cp-slicer", "response-slicer")


def _imported(module: str, cache: dict[str, tuple[Any, str, str]], paths: list[str]) -> tuple[Any, str, str]:
    """``(module or None, status, why)``, importing ``module`` once."""
    if module in cache:
        return cache[module]
    try:
        found: tuple[Any, str, str] = (importlib.import_module(module), "ok", "")
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        top = missing.partition(".")[0]
        ours = any(os.path.isdir(os.path.join(p, top)) or os.path.isfile(os.path.join(p, top + ".py")) for p in paths)
        if missing and (module == missing or (module.startswith(missing + ".") and ours)):
            # The project's own module is not there under this name (a dependency not installed here is not).
            found = (None, "refused", f"no module `{missing}` can be imported from the project's folder "
                                      f"(from {', '.join(paths)})")
        elif ours:
            found = (None, "unchecked", f"importing `{module}` fails here: it imports `{missing}`, which the "
                                        f"project's folder does not hold")
        else:
            found = (None, "unchecked", f"importing `{module}` needs `{missing or exc}`, which this Python "
                                        "environment does not have")
    except BaseException as exc:  # noqa: BLE001 - the project's import ran and failed here: no evidence either way
        if isinstance(exc, KeyboardInterrupt):
            raise
        found = (None, "unchecked", f"importing `{module}` failed here: {type(exc).__name__}: {exc}")
    cache[module] = found
    return found


def _resolve(module: Any, target: str) -> tuple[Any, str]:
    """``(the function, "")`` or ``(None, why)``: the attribute chain as the hooks read it (a class's own dict)."""
    from layoutcheck.runtime.hooks.targets import close_names

    name, _, qualname = target.partition(":")
    owner: Any = module
    raw: Any = None
    for i, part in enumerate(qualname.split(".")):
        namespace = vars(owner) if isinstance(owner, type) else None
        raw = namespace[part] if namespace is not None and part in namespace else getattr(owner, part, None)
        if raw is None:
            near = close_names(part, owner)
            where = ".".join([name, *qualname.split(".")[:i]])
            return None, (f"`{where}` has no attribute `{part}`"
                          + (f" (did you mean `{near[0]}`?)" if near else ""))
        owner = raw
    if isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    if not callable(raw):
        return None, f"it is a {type(raw).__name__}, not a function"
    return raw, ""


def judge(check: dict[str, Any], function: Any, checker: Any) -> tuple[str, str]:
    """``("ok" | "refused" | "unchecked", why)``: does the wrapper of ``check["kind"]`` accept ``function``?"""
    from layoutcheck.errors import LayoutSpecError

    kind, target = check["kind"], check["target"]
    try:
        if kind in CHECKER_ROLES:
            checker.wrap(kind, function)
        elif kind in TRACER_ROLES:
            from layoutcheck.runtime.checker.wrappers import check_tracer_signature

            check_tracer_signature(kind, function, target)
        elif kind == "boundary":
            from layoutcheck.runtime.checker.boundaries import check_boundary_signature
            from layoutcheck.runtime.contract.boundary import parse_boundary

            check_boundary_signature(parse_boundary(target, check["table"]), function)
    except LayoutSpecError as exc:
        return "refused", str(exc)
    except Exception as exc:  # noqa: BLE001 - a signature inspect cannot read: no evidence either way
        return "unchecked", f"its signature could not be read: {type(exc).__name__}: {exc}"
    return "ok", ""


def run(request: dict[str, Any], out: TextIO) -> None:
    """Judge every check of ``request`` (see the module docs), one JSON line each to ``out``."""
    from layoutcheck.runtime.checker.layout_checker import LayoutChecker

    paths = [str(p) for p in request["paths"]]
    sys.path[:0] = paths
    checker = LayoutChecker(mode="record")
    modules: dict[str, tuple[Any, str, str]] = {}
    for check in request["checks"]:
        module, status, why = _imported(check["target"].partition(":")[0], modules, paths)
        if module is not None:
            function, why = _resolve(module, check["target"])
            status = "refused" if function is None else "ok"
            if function is not None:
                status, why = judge(check, function, checker)
        out.write(json.dumps({"id": check["id"], "status": status, "why": why}) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    request = json.load(sys.stdin)
    with open(argv[0], "w", encoding="utf-8") as out:
        run(request, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
