"""The dotted path a project's file imports as: what a hook must be written with to install.

The linter names a module by walking up while ``__init__.py`` exists (what
its owners match). A trainer imports it from a folder on ``sys.path``: the
project's folder, or its ``src/`` in the src layout, and folders without
``__init__.py`` on the way are implicit namespace packages
(``workers/megatron_worker.py`` imports as ``workers.megatron_worker``, never
as ``megatron_worker``). `sys_path_roots` says where a project imports from,
`module_of` the name a file has there; `layoutcheck.init.probe` checks that
the name really imports.
"""

from __future__ import annotations

import keyword
import os
from collections.abc import Sequence

__all__ = ["module_of", "sys_path_roots"]


def sys_path_roots(project: str | os.PathLike[str]) -> list[str]:
    """Where ``project``'s modules import from: ``src/`` when it has one (the src layout), then the folder.

    A folder that is itself a package (``layoutcheck init pkg/``) imports from
    its parent, above every ``__init__.py``.
    """
    top = os.path.abspath(project)
    while os.path.isfile(os.path.join(top, "__init__.py")) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    roots = [top]
    src = os.path.join(top, "src")
    if os.path.isdir(src) and not os.path.isfile(os.path.join(src, "__init__.py")):
        roots.insert(0, src)
    return roots


def module_of(path: str | os.PathLike[str], roots: Sequence[str]) -> str | None:
    """The dotted name the Python file ``path`` imports as from the first of ``roots`` that holds it.

    ``None`` when no root holds it or a folder on the way is no identifier
    (``my-scripts/``): nothing can import it by name.
    """
    path = os.path.abspath(path)
    for root in roots:
        if not path.startswith(root.rstrip(os.sep) + os.sep):
            continue
        parts = os.path.relpath(path, root).split(os.sep)
        parts[-1] = os.path.splitext(parts[-1])[0]
        if parts[-1] == "__init__":
            parts.pop()
        if parts and all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            return ".".join(parts)
        return None
    return None
