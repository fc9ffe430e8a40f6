"""Matching `owners` entries against a function: the configured half of owner inference.

A function owns padded lengths when `owners` lists it (per layout), or when
the project sees it decide them (`layoutcheck.model.project`: it writes a
source, builds a packed batch's `cu_seqlens`, or is the only padding
decision on its path). This module answers the configuration half: does an
entry name this function?
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from layoutcheck.lint.settings import LintSettings

__all__ = ["configured_layouts", "owner_matches"]


def _module_of_path(path: str) -> str:
    text = path.replace("\\", "/")
    if text.endswith(".py"):
        text = text[:-3]
    if text.endswith("/__init__"):
        text = text[: -len("/__init__")]
    return text.strip("/").replace("/", ".")


def _dotted_suffix(whole: str, part: str) -> bool:
    return whole == part or whole.endswith("." + part)


def owner_matches(entry: str, qualname: str, path: str, module_name: str | None) -> bool:
    """Does owner ``entry`` name the function ``qualname`` of this file?

    Forms: ``pkg.mod:func``, ``pkg/mod.py:Class.method``, ``pkg.mod.func``,
    or a bare ``func`` (any module). A module part matches a dotted suffix of
    the module name (when the engine knows it) or of the file's path, so
    ``training_utils.data:get_batch`` names ``miles/backends/training_utils/data.py``.
    """
    if ":" in entry:
        where, func = entry.rsplit(":", 1)
        if func != qualname:
            return False
    elif "." not in entry:
        return entry == qualname.rsplit(".", 1)[-1]
    elif entry.endswith("." + qualname):
        where = entry[: -len(qualname) - 1]
    else:
        return False
    if where.endswith(".py"):
        where = _module_of_path(where)
    candidates = (module_name, _module_of_path(path))
    return any(m is not None and _dotted_suffix(m, where) for m in candidates)


def configured_layouts(settings: LintSettings, qualname: str, path: str, module_name: str | None) -> list[str]:
    """The layouts (``bshd``, ``thd``) whose `owners` entries name this function."""
    return [
        layout for layout, entries in settings.owners.items()
        if any(owner_matches(entry, qualname, path, module_name) for entry in entries)
    ]
