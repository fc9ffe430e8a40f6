"""Gitignore-ish glob patterns for ``exclude``, ``per-file-ignores`` and ``test-paths``.

Patterns match paths relative to the project root (the folder of the
configuration file), written with ``/``:

* a pattern without a ``/`` (``build``, ``*_pb2.py``) matches a file or folder
  name at any depth, as in ``.gitignore``;
* a pattern with a ``/`` is anchored at the root (``tests/fixtures/*``; a
  leading ``/`` or ``./`` is allowed and means the same);
* ``*`` and ``?`` stay inside one path component, ``**`` crosses folders,
  ``[abc]`` is a character class;
* a pattern that matches a folder matches everything under it.

Python 3.11 has no ``glob.translate``; this small translator is the part of it
that configuration needs, compiled once per pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from layoutcheck.records import dataclass
from functools import lru_cache


def _translate(pattern: str) -> str:
    """The regex body for one glob pattern (no anchors)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                # `**/` matches zero or more folders; a trailing `**` everything below.
                if pattern.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            start = i + 1
            if pattern.startswith("!", start):
                start += 1
            if pattern.startswith("]", start):  # `[]x]`: a literal `]` comes first
                start += 1
            end = pattern.find("]", start)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class Glob:
    """One compiled pattern; `matches` takes a root-relative ``/`` path."""

    pattern: str
    regex: re.Pattern[str]

    def matches(self, relpath: str) -> bool:
        """True when ``relpath`` or one of the folders above it matches."""
        return self.regex.match(relpath) is not None


@lru_cache(maxsize=512)
def compile_glob(pattern: str) -> Glob:
    """Compile ``pattern`` (see the module docs); cached, patterns repeat across files."""
    body = pattern.strip()
    if body.startswith("./"):
        body = body[2:]
    dir_only = body.endswith("/") and len(body) > 1
    body = body.rstrip("/") or body
    anchored = "/" in body
    body = body.lstrip("/")
    regex = _translate(body)
    prefix = "" if anchored else "(?:.*/)?"
    # A match may end at a component boundary: the pattern named a folder.
    suffix = "/.*" if dir_only else "(?:/.*)?"
    return Glob(pattern, re.compile(f"{prefix}{regex}{suffix}\\Z", re.DOTALL))


def any_match(patterns: Iterable[str], relpath: str) -> str | None:
    """The first pattern that matches ``relpath``, or None."""
    for pattern in patterns:
        if compile_glob(pattern).matches(relpath):
            return pattern
    return None
