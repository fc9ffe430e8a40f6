"""``.gitignore`` and ``.ignore`` files, read as git reads them, without git.

Discovery (`layoutcheck.lint.discovery`) skips what these files ignore, as
ruff does by default (``respect-gitignore``). git need not be installed, nor
the tree be a repository: the files are read wherever they are.

Which files apply to a path: the ``.gitignore`` and ``.ignore`` of every
folder from the path's folder up to the repository's root (the nearest
folder holding ``.git``; without one, the root of the file system), and the
repository's ``.git/info/exclude``. The user's global ignore file
(``core.excludesFile``) is not read: finding it needs git's configuration.

The pattern format is git's (https://git-scm.com/docs/gitignore):

* blank lines and lines starting with ``#`` are skipped; ``\\#`` and ``\\!``
  start a pattern with that character; trailing spaces are dropped unless
  escaped with ``\\``;
* ``!`` re-includes what an earlier pattern excluded; a file inside an
  excluded folder cannot be re-included (the folder is never walked);
* a trailing ``/`` matches folders only;
* a pattern with a ``/`` at its start or middle is relative to the ignore
  file's folder; any other matches a name at any depth below it;
* ``*`` and ``?`` stay within a path component, ``[...]`` is a character
  class (``[!...]`` its complement), ``**/`` at the start and ``/**/`` in the
  middle match any number of folders, a trailing ``/**`` everything inside.

Precedence, as in git: a deeper folder's file over a shallower one's; within
a folder, ``.ignore`` over ``.gitignore`` (ripgrep's and ruff's order) over
``info/exclude``; within a file, the last matching pattern.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from layoutcheck.records import dataclass
from functools import cached_property, lru_cache

__all__ = ["IGNORE_FILES", "IgnoreRules", "Pattern", "compile_line", "folder_patterns", "parse_ignore_file"]

IGNORE_FILES = (".gitignore", ".ignore")
"""Read in this order from each folder: the later file's patterns take precedence."""


@dataclass(frozen=True)
class Pattern:
    """One line of an ignore file; `regex` matches a ``/`` path relative to the file's folder."""

    text: str
    source: str
    """The regular expression, compiled on first use (`regex`): a folder's patterns are usually
    matched all at once (`IgnoreRules`), by one expression of them all."""
    negated: bool
    dir_only: bool
    name: str | None = None
    """The expression of the last path component, for a pattern that matches by name at any depth
    (``*.so``, ``build/``, ``**/wandb``): then a path matches when its own name does."""
    literal: str | None = None
    """That name itself when it has no wildcard (``build``)."""

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.source, re.DOTALL)


def _class(pattern: str, i: int) -> tuple[str, int] | None:
    """The regex for the character class opening at ``pattern[i] == "["`` and the index past it."""
    j = i + 1
    if j < len(pattern) and pattern[j] in "!^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return None
    body = pattern[i + 1 : j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("[", "\\[")
    return ("[^/" if negate else "[") + body + "]", j + 1


def _translate(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                after = i + 2
                if at_start and pattern.startswith("/", after):
                    out.append("(?:[^/]*/)*")  # `**/`: zero or more folders
                    i = after + 1
                    continue
                if at_start and after == n:
                    out.append(".*")  # a trailing `/**`: everything inside
                    i = after
                    continue
                # Any other `**` is two ordinary stars.
            while i < n and pattern[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            found = _class(pattern, i)
            if found is not None:
                out.append(found[0])
                i = found[1]
                continue
            out.append("\\[")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@lru_cache(maxsize=4096)
def compile_line(line: str) -> Pattern | None:
    """One ignore-file line as a `Pattern`; None for a blank line or a comment."""
    text = line.rstrip("\n").rstrip("\r")
    # Trailing spaces go, unless escaped with a backslash.
    stripped = text.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(text):
        stripped += " "
    body = stripped
    if not body or body.startswith("#"):
        return None
    negated = body.startswith("!")
    if negated:
        body = body[1:]
    elif body.startswith(("\\!", "\\#")):
        body = body[1:]
    dir_only = body.endswith("/")
    body = body.rstrip("/")
    if not body:
        return None
    anchored = "/" in body
    body = body.lstrip("/")
    regex = _translate(body)
    if not anchored:
        regex = "(?:[^/]*/)*" + regex
    # `name` and `**/name` match a path by its last component: `name` holds no `/`, and none of
    # its wildcards matches one (a lone `**`, which does, matches every name alike).
    tail = body if not anchored else body[3:] if body.startswith("**/") and "/" not in body[3:] else None
    if not tail:
        return Pattern(stripped, regex + r"\Z", negated, dir_only)
    literal = None if any(c in tail for c in "*?[\\") else tail
    return Pattern(stripped, regex + r"\Z", negated, dir_only, _translate(tail) + r"\Z", literal)


def parse_ignore_file(text: str) -> tuple[Pattern, ...]:
    """Every pattern of one ignore file, in order."""
    return tuple(p for p in map(compile_line, text.splitlines()) if p is not None)


@dataclass(frozen=True)
class IgnoreRules:
    """The ignore files in effect inside one folder: ``(folder, patterns)``, the outermost first."""

    chain: tuple[tuple[str, tuple[Pattern, ...], tuple[_Runs | None, _Runs | None]], ...] = ()
    """Per folder: its patterns, and the same as runs tested at once, for a file and for a folder (`_runs`)."""

    def inside(self, folder: str, patterns: Sequence[Pattern]) -> IgnoreRules:
        """The rules inside ``folder``, whose own ignore files hold ``patterns``."""
        if not patterns:
            return self
        patterns = tuple(patterns)
        return IgnoreRules((*self.chain, (folder, patterns, (_runs(patterns, False), _runs(patterns, True)))))

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Does the deepest ignore file with a pattern matching ``path`` (absolute) ignore it?"""
        for folder, patterns, tested in reversed(self.chain):
            # Paths and folders are both absolute and normalised: a prefix test, not `relpath` (the walk
            # asks for every entry of every folder).
            prefix = folder if folder.endswith(os.sep) else folder + os.sep
            if not path.startswith(prefix):
                continue
            rel = path[len(prefix):]
            if os.sep != "/":
                rel = rel.replace(os.sep, "/")
            runs = tested[is_dir]
            if runs is not None:
                for run, verdict in runs:
                    if run.match(rel):
                        return verdict
                continue
            for pattern in reversed(patterns):
                if pattern.dir_only and not is_dir:
                    continue
                if pattern.regex.match(rel):
                    return not pattern.negated
        return False

    def __bool__(self) -> bool:
        return bool(self.chain)


class _AnyOf:
    """What any of some patterns matches, tested at once (`_runs`): names without wildcards as a
    set, the other name patterns as one expression of the last component, the rest as one
    expression of the path (verl's 75 patterns, asked of every entry of every folder)."""

    def __init__(self, patterns: Sequence[Pattern]):
        self.literal = frozenset(p.literal for p in patterns if p.literal is not None)
        self.named = _either(p.name for p in patterns if p.name is not None and p.literal is None)
        self.paths = _either(p.source for p in patterns if p.name is None)

    def match(self, rel: str) -> bool:
        name = rel[rel.rfind("/") + 1:]
        return name in self.literal or bool(self.named and self.named.match(name)) or bool(
            self.paths and self.paths.match(rel))


def _either(sources: Iterable[str]) -> re.Pattern[str] | None:
    joined = "|".join(f"(?:{s})" for s in sources)
    return re.compile(joined, re.DOTALL) if joined else None


_Runs = tuple[tuple["_AnyOf", bool], ...]


def _runs(patterns: tuple[Pattern, ...], is_dir: bool) -> _Runs | None:
    """The patterns that apply to a folder (``is_dir``) or a file, as runs of patterns that all
    ignore or all re-include (``!``), the last run first, each with its verdict: the last pattern
    that matches decides, so the first run with a match does, whichever of its patterns matched.
    None when an expression does not compile: each pattern is then tried in turn."""
    runs: list[tuple[list[Pattern], bool]] = []
    for pattern in patterns:
        if not is_dir and pattern.dir_only:
            continue
        if runs and runs[-1][1] == (not pattern.negated):
            runs[-1][0].append(pattern)
        else:
            runs.append(([pattern], not pattern.negated))
    try:
        return tuple((_AnyOf(run), verdict) for run, verdict in reversed(runs))
    except re.error:
        return None


def folder_patterns(folder: str, names: Sequence[str] | set[str], read: Callable[[str], str | None],
                    repository_root: bool = False) -> tuple[Pattern, ...]:
    """The patterns of ``folder``'s own ignore files (``names``: its entries), in precedence order;
    ``read`` gives a file's text (None when it cannot be read). A repository's root adds its
    ``.git/info/exclude``, below the others."""
    patterns: list[Pattern] = []
    if repository_root:
        text = read(os.path.join(folder, ".git", "info", "exclude"))
        if text:
            patterns.extend(parse_ignore_file(text))
    for name in IGNORE_FILES:
        if name in names:
            text = read(os.path.join(folder, name))
            if text:
                patterns.extend(parse_ignore_file(text))
    return tuple(patterns)
