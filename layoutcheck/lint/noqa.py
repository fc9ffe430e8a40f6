"""``# noqa`` comments as ruff reads them, and ``--add-noqa``.

The forms (ruff's, which flake8's include)::

    x = f(y)  # noqa                    every rule, this line (layoutcheck's and other tools')
    x = f(y)  # noqa: LC101             layoutcheck's LC101 only
    x = f(y)  # noqa: LC101, E501       codes separated by commas and/or spaces
    x = f(y)  # some words  # noqa: LC101 why   (found after other text; a trailing reason is fine)

``noqa`` is matched in any case; codes are upper-case letters then digits.
Beyond ruff, a layoutcheck rule name (``# noqa: global-max-padding``) is
read too, as in ``# layoutcheck: ignore[...]`` (ruff warns about a name in
a ``noqa``, so `add_noqa` writes codes). ``#noqa:`` with no code, or
``# noqa;``, is malformed: ruff ignores it and so does layoutcheck. A
directive covers the findings that *start* on its line; a finding inside a
multi-line string or a backslash-continued line is covered from the last
line of that string or continuation, where a comment can go (ruff's rule).

Codes of other tools (``E501``) neither suppress layoutcheck's findings nor
count as unused here. Pure text and `tokenize`: no libcst.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Sequence
from layoutcheck.records import dataclass

from layoutcheck.lint.findings import Finding

__all__ = ["NOQA_TEXT", "LineMap", "Noqa", "add_noqa", "lex_noqa", "line_map"]

NOQA_TEXT = re.compile(r"#\s*noqa", re.IGNORECASE)
"""Text a file must hold for any ``noqa`` directive: a file without it is never tokenized for one."""

_CODE = re.compile(r"[A-Z]+[0-9]+")
_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+")
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_ENGINE_CODE = "LC001"
"""The unused-suppression check: `add_noqa` never silences it (remove the stale comment instead)."""


@dataclass(frozen=True)
class Noqa:
    """One ``noqa`` directive in a comment; columns are 0-based offsets into the comment text."""

    start: int
    """Where its ``#`` is."""
    end: int
    """Just past its last code (or past ``noqa`` for a blanket one)."""
    codes: tuple[str, ...] | None
    """Codes and rule names as written; None for a bare (blanket) ``# noqa``."""


def _codes(text: str, at: int) -> tuple[list[str], int]:
    """The codes from ``text[at:]`` and where the last one ends; stops at the first word that is no code."""
    found: list[str] = []
    end = at
    position = at
    while position < len(text):
        while position < len(text) and (text[position].isspace() or text[position] == ","):
            position += 1
        match = _CODE.match(text, position) or _NAME.match(text, position)
        if match is None:
            break
        after = match.end()
        if after < len(text) and not (text[after].isspace() or text[after] in ",#"):
            if found:
                break  # words after the codes: a reason, not a code
            return [], at  # a code run into other text (`LC101x`): malformed
        found.append(match.group())
        position = end = after
    return found, end


def lex_noqa(comment: str) -> Noqa | None:
    """The first well-formed ``noqa`` directive in ``comment`` (a ``#`` comment's text), or None.

    As ruff: ``#``, optional spaces, ``noqa`` in any case, then the end of
    the comment or another ``#`` (blanket), or ``:`` (optionally after spaces)
    and codes, or spaces and other words (blanket: ``# noqa because...``).
    ``#noqa:`` without codes and ``# noqa;...`` are malformed, so ignored.
    """
    for hit in NOQA_TEXT.finditer(comment):
        start, position = hit.start(), hit.end()
        rest = comment[position:]
        if not rest or rest[0] == "#":
            return Noqa(start, position, None)
        stripped = rest.lstrip()
        if rest[0] == ":" or (rest[0].isspace() and stripped.startswith(":")):
            colon = position + len(rest) - len(stripped) if rest[0].isspace() else position
            codes, end = _codes(comment, colon + 1)
            return Noqa(start, end, tuple(codes)) if codes else None
        if rest[0].isspace():
            return Noqa(start, position, None)
        return None  # `noqa` run into a code, or followed by `;`: ruff rejects these
    return None


@dataclass
class LineMap:
    """Which line's comment covers a finding that starts on a given line (ruff's noqa line mapping).

    Lines inside a multi-line string, and the lines of a backslash
    continuation, are covered from the last line of the string or
    continuation: it is the only one of them where a comment can go.
    """

    ranges: list[tuple[int, int]]

    def covering(self, line: int) -> int:
        """The line whose ``noqa`` covers a finding that starts on ``line``."""
        for first, last in self.ranges:
            if first <= line <= last:
                return last
        return line

    def covered(self, line: int) -> tuple[int, int]:
        """The lines a ``noqa`` on ``line`` covers: (first, last)."""
        for first, last in self.ranges:
            if last == line:
                return first, last
        return line, line


class LineMapBuilder:
    """Builds a `LineMap` from a stream of tokens (fed by the suppression scanner, or `line_map`)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []
        self._depth = 0
        self._previous_end: int | None = None
        self._fstring_starts: list[int] = []

    def feed(self, tok: tokenize.TokenInfo) -> None:
        kind = tok.type
        first, last = tok.start[0], tok.end[0]
        if kind in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.ENCODING, tokenize.INDENT,
                    tokenize.DEDENT, tokenize.ENDMARKER):
            if kind in (tokenize.NL, tokenize.NEWLINE):
                self._previous_end = None
            return
        if self._previous_end is not None and first > self._previous_end and self._depth == 0:
            self._add(self._previous_end, first)  # a backslash joined these lines
        fstring_start = getattr(tokenize, "FSTRING_START", None)
        fstring_end = getattr(tokenize, "FSTRING_END", None)
        if kind == fstring_start:
            self._fstring_starts.append(first)
        elif kind == fstring_end and self._fstring_starts:
            opened = self._fstring_starts.pop()
            if last > opened:
                self._add(opened, last)
        elif kind == tokenize.STRING and last > first:
            self._add(first, last)
        elif kind == tokenize.OP and tok.string in "([{":
            self._depth += 1
        elif kind == tokenize.OP and tok.string in ")]}":
            self._depth = max(0, self._depth - 1)
        self._previous_end = last

    def _add(self, first: int, last: int) -> None:
        if self.ranges and self.ranges[-1][1] >= first:  # overlapping or touching: one range
            start, end = self.ranges[-1]
            self.ranges[-1] = (min(start, first), max(end, last))
        else:
            self.ranges.append((first, last))

    def build(self) -> LineMap:
        return LineMap(list(self.ranges))


def line_map(source: str) -> LineMap:
    """The `LineMap` of ``source`` (no ranges when `tokenize` rejects it)."""
    builder = LineMapBuilder()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            builder.feed(tok)
    except (tokenize.TokenError, SyntaxError):
        return LineMap([])
    return builder.build()


def _comments(source: str) -> dict[int, tuple[int, str]]:
    """Each line's comment: line -> (its 0-based column, its text)."""
    out: dict[int, tuple[int, str]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = (tok.start[1], tok.string)
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def add_noqa(source: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """``source`` with a ``# noqa: CODE`` for every finding, and how many lines got one.

    As ruff's ``--add-noqa``: the comment goes on the line that covers the
    finding (`LineMap`), two spaces after the code; a line whose ``noqa``
    lists codes already gets the new ones merged in, sorted (text after the
    codes is kept, where ruff drops it); a line with a bare ``# noqa`` is
    covered already. Unused-suppression findings (LC001) get none.
    """
    wanted: dict[int, set[str]] = {}
    mapping = line_map(source)
    for finding in findings:
        if finding.code == _ENGINE_CODE:
            continue
        wanted.setdefault(mapping.covering(finding.line), set()).add(finding.code)
    if not wanted:
        return source, 0
    comments = _comments(source)
    lines = _LINES.findall(source)  # as `tokenize` counts lines (not `str.splitlines`, which splits at \f too)
    count = 0
    for number, codes in sorted(wanted.items()):
        if not 1 <= number <= len(lines):
            continue
        text = lines[number - 1]
        body = text.rstrip("\r\n")
        ending = text[len(body):]
        comment = comments.get(number)
        directive = lex_noqa(comment[1]) if comment else None
        if directive is not None and directive.codes is None:
            continue  # a bare noqa covers every rule already
        if directive is not None and comment is not None:
            assert directive.codes is not None
            merged = sorted({*directive.codes, *codes})
            if merged == sorted(directive.codes):
                continue
            at = comment[0]
            head = body[:at + directive.start].rstrip()
            tail = body[at + directive.end:]
            body = f"{head}  # noqa: {', '.join(merged)}{tail}"
        else:
            body = f"{body.rstrip()}  # noqa: {', '.join(sorted(codes))}"
        lines[number - 1] = body + ending
        count += 1
    return "".join(lines), count


def external(codes: Sequence[str], ours: Iterable[str]) -> list[str]:
    """The codes of ``codes`` that are not layoutcheck's (``ours``: rule names and lower-case codes)."""
    known = set(ours)
    return [c for c in codes if c.lower() not in known and not c.upper().startswith("LC")]
