"""Which functions own the padding: matching `owners` entries against a function.

A function owns the padded lengths when `owners` lists it (per layout), or
when it writes a source (`layoutcheck.lint.flow` sees the write). This
module answers the configuration half: does an entry name this function,
and does a call reach an owner (which recomputes the source)?
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from layoutcheck.lint.names import is_check_name

if TYPE_CHECKING:
    from layoutcheck.lint.names import Vocabulary
    from layoutcheck.lint.settings import LintSettings

__all__ = ["calls_owner", "is_configured_owner", "owner_matches"]


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


def is_configured_owner(settings: LintSettings, qualname: str, path: str, module_name: str | None) -> bool:
    """Does any `owners` entry, of either layout, name this function?"""
    return any(
        owner_matches(entry, qualname, path, module_name)
        for entries in settings.owners.values()
        for entry in entries
    )


def _function_part(entry: str) -> str:
    """``get_rollout_data`` for ``pkg.data:get_rollout_data`` and ``pkg.data.get_rollout_data``."""
    return entry.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def calls_owner(tail: str | None, settings: LintSettings, vocab: Vocabulary) -> bool:
    """Does a call of a function named ``tail`` recompute the source?

    Calling a configured owner, or a function named after the source
    (``recompute_max_seq_lens``), does; a check (``check_max_seq_lens``) and
    ``dict.update`` do not.
    """
    if tail is None or tail == "update" or is_check_name(tail):
        return False
    if vocab.mentions_source(tail):
        return True
    return any(tail == _function_part(e) for entries in settings.owners.values() for e in entries)
