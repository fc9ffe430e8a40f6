"""Syntax errors that a newer Python's grammar accepts: which Python a file needs.

A syntax error is CPython's verdict, from the Python running layoutcheck. A
file written for a newer one (``f"{x["a"]}"``, ``type X = int``, ``def
f[T](x: T)``) is then "f-string: unmatched '['" or "invalid syntax", which
reads like broken code. `newer_python` names the release whose grammar brings
the construct at the error, and only when the error is that construct: the
construct is rewritten on a copy of the source into what the running Python
accepts (the type parameters dropped, the f-string's replacement fields
parsed on their own, ...) and the copy parsed again; the error must be gone,
or have moved past the construct's line. Any other error gets no hint.

Constructs known (the running Python must be older):

* 3.12 (PEP 701): f-strings whose replacement fields reuse the string's
  quote, hold a backslash or a comment, or span lines;
* 3.12 (PEP 695): ``type`` statements and type parameters of ``def`` and
  ``class`` (3.13, PEP 696, with defaults);
* 3.14: ``except A, B:`` without parentheses (PEP 758) and template strings
  ``t"..."`` (PEP 750).
"""

from __future__ import annotations

import ast
import re
import sys
import warnings
from collections.abc import Callable, Iterator

__all__ = ["hint", "newer_python"]

Version = tuple[int, int]

_FSTRING_START = re.compile(r"""(?<![\w.])(?:[fF][rR]?|[rR][fF])("\"\"|'''|"|')""")
_TSTRING_START = re.compile(r"""(?<![\w.])(?:[tT][rR]?|[rR][tT])(?="|')""")
_TYPE_STATEMENT = re.compile(r"^(\s*)type\s+([A-Za-z_]\w*)\s*(\[)?")
_GENERIC = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+[A-Za-z_]\w*\s*(\[)")
_EXCEPT = re.compile(r"^(\s*except\*?\s+)(.+?)(\s*:.*)$", re.DOTALL)


def _parses(source: str, line: int) -> bool:
    """``source`` parses, or its first error is past ``line`` (the rewritten construct was the error)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError as exc:
        return exc.lineno is not None and exc.lineno > line
    except (ValueError, MemoryError, RecursionError):
        return False
    return True


def _expression(text: str) -> bool:
    """``text`` is one expression (a replacement field's, before ``!r`` / ``:spec``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(f"(\n{text}\n)", mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


class _FString:
    """One f-string scanned by the 3.12 rules (PEP 701): its end, its fields, whether it needs 3.12."""

    def __init__(self, text: str, start: int, quote: str):
        self.text, self.quote = text, quote
        self.fields: list[str] = []
        self.new = False
        self.end = self._literal(start, quote, top=True)

    def _string(self, i: int) -> int:
        """The end of the string literal (any prefix already passed) whose quote starts at ``i``."""
        text = self.text
        prefix_start = i
        while prefix_start > 0 and text[prefix_start - 1] in "rRbBuUfF":
            prefix_start -= 1
        prefix = text[prefix_start:i].lower()
        quote = text[i : i + 3] if text.startswith(text[i] * 3, i) else text[i]
        if quote[0] == self.quote[0]:
            self.new = True  # the enclosing f-string's own quote, inside one of its fields
        if "f" in prefix:
            inner = _FString(text, i + len(quote), quote)
            self.fields.extend(inner.fields)
            self.new = self.new or inner.new
            return inner.end
        j = i + len(quote)
        while j < len(text):
            if text[j] == "\\":
                self.new = True  # a backslash anywhere in a field, even in a string there
                j += 2  # an escaped quote does not end a string, raw or not
                continue
            if text.startswith(quote, j):
                return j + len(quote)
            if text[j] == "\n" and len(quote) == 1:
                return -1
            j += 1
        return -1

    def _literal(self, i: int, quote: str, *, top: bool) -> int:
        """Scan literal text (of the f-string, or of a format spec when not ``top``) from ``i``;
        the index past its end (past the closing quote, or at the spec's closing brace), -1 if none."""
        text = self.text
        while i < len(text):
            c = text[i]
            if top and text.startswith(quote, i):
                return i + len(quote)
            if c == "\\":
                i += 2
                continue
            if c == "\n" and len(quote) == 1:
                return -1
            if c == "{":
                if top and text.startswith("{{", i):
                    i += 2
                    continue
                i = self._field(i + 1)
                if i < 0:
                    return -1
                continue
            if c == "}":
                if not top:
                    return i
                i += 2 if text.startswith("}}", i) else 1
                continue
            if not top and text.startswith(quote, i):
                return -1
            i += 1
        return -1

    def _field(self, i: int) -> int:
        """Scan a replacement field's expression from ``i``; the index past its closing brace."""
        text = self.text
        start, depth = i, 0
        while i < len(text):
            c = text[i]
            if c in "([{":
                depth += 1
            elif c in ")]" or (c == "}" and depth):
                depth -= 1
            elif c == "}" or (depth == 0 and (c == ":" or (c == "!" and not text.startswith("!=", i)))):
                self._expression(text[start:i])
                if c == "!":
                    i += 2  # the conversion character
                    if i < len(text) and text[i] == ":":
                        c = ":"
                if c == ":" and i < len(text):
                    i = self._literal(i + 1, self.quote, top=False)
                    if i < 0:
                        return -1
                return i + 1 if i < len(text) and text[i] == "}" else -1
            elif c in "'\"":
                i = self._string(i)
                if i < 0:
                    return -1
                continue
            elif c == "#":
                self.new = True  # a comment, to the end of the line
                newline = text.find("\n", i)
                if newline < 0:
                    return -1
                i = newline
                continue
            elif c == "\\":
                self.new = True
            elif c == "\n" and len(self.quote) == 1:
                self.new = True  # a field spanning lines, in a single-quoted f-string
            i += 1
        return -1

    def _expression(self, text: str) -> None:
        stripped = text.rstrip()
        if stripped.endswith("=") and not stripped.endswith(("==", "!=", "<=", ">=")):
            stripped = stripped[:-1]  # `{x=}`: the expression and its text
        self.fields.append(stripped)


def _line_span(source: str, line: int) -> tuple[int, int]:
    lines = source.splitlines(keepends=True)
    start = sum(len(text) for text in lines[: line - 1])
    return start, start + (len(lines[line - 1]) if line - 1 < len(lines) else 0)


def _fstrings(source: str, line: int) -> Version | None:
    """3.12 when an f-string starting on ``line`` uses what PEP 701 allows, and with each such f-string
    replaced by a tuple of its fields, the source gets past the line."""
    start, end = _line_span(source, line)
    rewritten, found, shift = source, False, 0
    for match in _FSTRING_START.finditer(source, start, end):
        scanned = _FString(source, match.end(), match.group(1))
        if not scanned.new or scanned.end < 0:
            continue
        if not all(_expression(field) for field in scanned.fields):
            return None
        tuple_text = "(" + "".join(f"(\n{field}\n)," for field in scanned.fields) + ")"
        a, b = match.start() + shift, scanned.end + shift
        rewritten = rewritten[:a] + tuple_text + rewritten[b:]
        shift += len(tuple_text) - (scanned.end - match.start())
        found = True
    if not found:
        return None
    rewritten_line = line + rewritten[: start].count("\n") - source[:start].count("\n")
    extra = rewritten.count("\n") - source.count("\n")
    return (3, 12) if _parses(rewritten, rewritten_line + max(extra, 0)) else None


def _bracket_end(text: str, i: int) -> int:
    """The index past the ``]`` that closes the ``[`` at ``i`` (-1 if none)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] in "([{":
            depth += 1
        elif text[j] in ")]}":
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def _type_parameters(source: str, line: int) -> Version | None:
    """3.12 (3.13 with defaults) for a ``type`` statement or a generic ``def`` / ``class`` on ``line``."""
    start, end = _line_span(source, line)
    text = source[start:end]
    statement = _TYPE_STATEMENT.match(text)
    generic = _GENERIC.match(text)
    if statement is not None:
        # `type X[T] = v` -> `X = v`
        rest = statement.end()
        params = ""
        if statement.group(3):
            close = _bracket_end(text, statement.start(3))
            if close < 0:
                return None
            params, rest = text[statement.start(3) : close], close
        if not re.match(r"\s*=", text[rest:]):
            return None
        replaced = f"{statement.group(1)}{statement.group(2)}" + text[rest:]
    elif generic is not None:
        close = _bracket_end(text, generic.start(1))
        if close < 0:
            return None
        params = text[generic.start(1) : close]
        replaced = text[: generic.start(1)] + text[close:]
    else:
        return None
    if not _parses(source[:start] + replaced + source[end:], line):
        return None
    return (3, 13) if "=" in params else (3, 12)


def _except_group(source: str, line: int) -> Version | None:
    """3.14 (PEP 758) for ``except A, B:`` on ``line``."""
    start, end = _line_span(source, line)
    match = _EXCEPT.match(source[start:end])
    if match is None or "," not in match.group(2) or " as " in match.group(2):
        return None
    replaced = f"{match.group(1)}({match.group(2)}){match.group(3)}"
    return (3, 14) if _parses(source[:start] + replaced + source[end:], line) else None


def _template_strings(source: str, line: int) -> Version | None:
    """3.14 (PEP 750) for ``t"..."`` on ``line``: read as f-strings, the source gets past the line."""
    start, end = _line_span(source, line)
    text = source[start:end]
    replaced = _TSTRING_START.sub(lambda m: m.group(0).replace("t", "f").replace("T", "F"), text)
    if replaced == text:
        return None
    return (3, 14) if _parses(source[:start] + replaced + source[end:], line) else None


_CONSTRUCTS: tuple[Callable[[str, int], Version | None], ...] = (
    _fstrings, _type_parameters, _except_group, _template_strings,
)


def _candidates(source: str, line: int) -> Iterator[Version]:
    for construct in _CONSTRUCTS:
        try:
            version = construct(source, line)
        except (ValueError, IndexError, RecursionError):  # a heuristic never fails the run
            version = None
        if version is not None:
            yield version


def newer_python(source: str, line: int | None, running: Version | None = None) -> Version | None:
    """The Python release whose grammar accepts the construct at the syntax error on ``line``, when it is
    newer than ``running`` (default: this interpreter's); None for any other error."""
    running = running or (sys.version_info[0], sys.version_info[1])
    if line is None or line < 1:
        return None
    for version in _candidates(source, line):
        if version > running:
            return version
    return None


def hint(source: str, line: int | None, running: Version | None = None) -> str:
    """What a syntax-error message adds for code a newer Python accepts (``""`` for other errors)."""
    running = running or (sys.version_info[0], sys.version_info[1])
    version = newer_python(source, line, running)
    if version is None:
        return ""
    return (f" (Python {version[0]}.{version[1]} accepts this: the file may need a newer Python than the "
            f"{running[0]}.{running[1]} running layoutcheck; run layoutcheck with Python "
            f"{version[0]}.{version[1]} or later)")
