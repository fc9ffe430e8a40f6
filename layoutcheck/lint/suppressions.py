"""Suppression comments, and the report of the ones that suppress nothing.

Forms (names are rule names or codes, comma-separated)::

    x = f(y)  # layoutcheck: ignore[global-max-padding, LC102]
    x = f(y)  # layoutcheck: ignore            (every rule, this line)
    # layoutcheck: ignore-file[bucket-spec]     (whole file; first comment block only)
    # layoutcheck: ignore-file                  (whole file, every rule)
    x = f(y)  # noqa: LC101, LC103              (ruff's and flake8's form: `layoutcheck.lint.noqa`)
    x = f(y)  # noqa                            (every rule, this line: as ruff reads it)

A ``layoutcheck:`` line suppression on the first line of a multi-line
statement covers every line of that statement (one comment above a long
call, not one per line); a ``noqa`` covers what ruff's does: the findings
that start on its line (or in the multi-line string or backslash
continuation it ends). A ``noqa`` code of another tool (``E501``) neither
suppresses a layoutcheck finding nor is reported as unused, and a bare
``# noqa`` is never reported as unused (it may serve another tool).

Cost (docs/development.md#what-the-linter-avoids: Fixit pays a parent-metadata walk for this on
every file): nothing for a file whose text holds neither ``layoutcheck:`` nor
``# noqa``; otherwise one `tokenize` pass, and only when the file has
findings or unused suppressions are being reported. No libcst is involved.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Collection, Iterable, Sequence
from dataclasses import field
from layoutcheck.records import dataclass
from typing import TYPE_CHECKING

from layoutcheck.lint.findings import Finding
from layoutcheck.lint.noqa import NOQA_TEXT, LineMapBuilder, lex_noqa
from layoutcheck.lint.rule import LintRule

if TYPE_CHECKING:
    from layoutcheck.lint.settings import LintSettings

__all__ = ["MARKER", "Suppression", "Suppressions", "UnusedSuppression", "may_suppress", "parse_suppressions"]

MARKER = "layoutcheck:"
"""Text every ``layoutcheck:`` suppression comment holds."""

_OUR_CODE = re.compile(r"LC[0-9]+", re.IGNORECASE)
"""A code in layoutcheck's namespace: one no rule has is a typo worth reporting, in a ``noqa`` too."""


def may_suppress(source: str) -> bool:
    """Could ``source`` hold a suppression comment? (A file that cannot is never tokenized.)"""
    return MARKER in source or NOQA_TEXT.search(source) is not None

_DIRECTIVE = re.compile(r"#\s*layoutcheck:\s*(?P<kind>ignore-file|ignore)\b(?:\[(?P<names>[^\]]*)\])?")


class UnusedSuppression(LintRule):
    """Flags a suppression comment that suppresses nothing.

    ## What it does
    Reports a `# layoutcheck: ignore[...]` (or `ignore-file[...]`) comment
    when no finding of the rules it names is on the lines it covers, when it
    names a rule that does not exist, and when an `ignore-file` comment sits
    below the file's first comment block, where it has no effect. In a
    `# noqa: ...` comment it judges layoutcheck's codes (and names) only:
    `# noqa: LC101, E501` is reported when no LC101 finding is there, never
    for `E501` (another tool's), and a bare `# noqa` is never reported.

    ## Why it matters
    A suppression outlives the code it was written for. Once the flagged
    line changes, a stale suppression silently hides the next real finding
    there, and a misspelt rule name never suppressed anything.

    ## Example
    ```python
    lengths = [len(t) for t in tokens]  # layoutcheck: ignore[global-max-padding]
    ```

    ## How to fix
    Remove the comment, or the names in it that no longer apply. This is an
    engine check (code `LC001`), off by default: switch it on with
    `--report-unused-suppressions` or `extend-select = ["LC001"]`. It has no
    autofix.
    """

    code = "LC001"
    message = "Unused suppression: it suppresses nothing here; remove it."
    default_enabled = False

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # The engine handles it from the comments: it never needs a traversal.
        return False


@dataclass
class Suppression:
    """One directive in one comment."""

    line: int
    """Line of the comment (1-based)."""
    column: int
    """1-based column of the directive's ``#``."""
    end_column: int
    names: tuple[str, ...] | None
    """Rule names or codes as written (matched case-insensitively); None for a bare directive."""
    file_level: bool
    first: int
    """First and last line covered (a line directive covers its statement)."""
    last: int
    misplaced: bool = False
    """An ``ignore-file`` below the first comment block: it covers nothing."""
    used: set[str] = field(default_factory=set)
    """The names (or ``*`` for a bare directive) that suppressed a finding."""
    noqa: bool = False
    """A ``# noqa`` directive (ruff's form) rather than ``# layoutcheck: ignore``."""

    def covers(self, finding: Finding) -> str | None:
        """The name under which this directive suppresses ``finding``, or None."""
        if self.misplaced or not (self.first <= finding.line <= self.last):
            return None
        if self.names is None:
            return "*"
        for name in self.names:
            # A noqa code is matched as ruff matches it (exact, upper case); our names in any case.
            if name == finding.code or (not self.noqa and name.lower() == finding.code.lower()) \
                    or name.lower() == finding.rule:
                return name
        return None


@dataclass
class Suppressions:
    """Every directive of one file."""

    items: list[Suppression]

    def filter(self, findings: Iterable[Finding]) -> list[Finding]:
        """The findings no directive covers; marks the directives that were used."""
        kept = []
        for finding in findings:
            hit = False
            for item in self.items:
                name = item.covers(finding)
                if name is not None:
                    item.used.add(name)
                    hit = True
            if not hit:
                kept.append(finding)
        return kept

    def unused(
        self,
        path: str,
        ran: Collection[str],
        known: Collection[str] | None,
    ) -> list[Finding]:
        """`UnusedSuppression` findings for the directives that suppressed nothing.

        ``ran`` holds the names and lower-case codes of the rules that ran on the
        file: a directive naming a rule that was not selected here cannot be
        judged and is left alone. ``known`` (every rule's names and codes) lets
        a misspelt name be reported; None skips that check.
        """
        out = []
        for item in self.items:
            problems: list[str] = []
            if item.misplaced:
                problems.append("`ignore-file` only works in the file's first comment block")
            elif item.names is None:
                # A bare noqa may serve another tool (ruff, flake8): never ours to call unused.
                if not item.used and not item.noqa:
                    scope = "in this file" if item.file_level else "here"
                    problems.append(f"no finding {scope} to suppress")
            else:
                for name in item.names:
                    ours = _OUR_CODE.fullmatch(name) is not None or (known is not None and name.lower() in known)
                    if item.noqa and not ours:
                        continue  # another tool's code (`E501`): not ours to judge
                    if known is not None and name.lower() not in known:
                        problems.append(f"unknown rule `{name}`")
                    elif name.lower() in ran and name not in item.used:
                        problems.append(f"no `{name}` finding {'in this file' if item.file_level else 'here'}")
            if problems:
                out.append(Finding(
                    path=path, line=item.line, column=item.column,
                    rule=UnusedSuppression.name, code=UnusedSuppression.code,
                    end_line=item.line, end_column=item.end_column,
                    message=f"Unused suppression: {'; '.join(problems)}. Remove it, or the names that no longer apply.",
                ))
        return out


def _directives(comment: str, col0: int) -> Iterable[tuple[re.Match[str], int, int]]:
    """Each directive in ``comment`` (which starts at 0-based column ``col0``) and its 1-based columns."""
    for match in _DIRECTIVE.finditer(comment):
        yield match, col0 + match.start() + 1, col0 + match.end() + 1


def _names(match: re.Match[str]) -> tuple[str, ...] | None:
    raw = match.group("names")
    if raw is None:
        return None
    return tuple(n.strip() for n in raw.split(",") if n.strip())


def _noqa(comment: str, line: int, col0: int) -> Suppression | None:
    """The ``noqa`` directive of one comment, covering its own line (`LineMap` widens it)."""
    found = lex_noqa(comment)
    if found is None:
        return None
    return Suppression(line, col0 + found.start + 1, col0 + found.end + 1, found.codes, False, line, line,
                       noqa=True)


def _from_tokens(source: str) -> list[Suppression]:
    items: list[Suppression] = []
    # Start line of the logical line being read (None between statements), and
    # the comments seen on its first line, which cover the whole statement.
    start: int | None = None
    opening: list[Suppression] = []
    header = True  # still in the first comment block
    noqa = NOQA_TEXT.search(source) is not None
    lines = LineMapBuilder() if noqa else None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if lines is not None:
            lines.feed(tok)
        if kind == tokenize.COMMENT:
            if noqa:
                item = _noqa(tok.string, *tok.start)
                if item is not None:
                    items.append(item)
            if MARKER not in tok.string:
                continue
            line, col0 = tok.start
            for match, col, end in _directives(tok.string, col0):
                file_level = match.group("kind") == "ignore-file"
                item = Suppression(
                    line, col, end, _names(match), file_level, line, line,
                    misplaced=file_level and not header,
                )
                if file_level and not item.misplaced:
                    item.first, item.last = 1, 1 << 30
                elif start is not None and line == start:
                    opening.append(item)
                items.append(item)
            continue
        if kind in (tokenize.NL, tokenize.ENCODING):
            continue
        if kind == tokenize.NEWLINE:
            for item in opening:
                item.last = tok.start[0]
            start, opening = None, []
            continue
        if kind in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        header = False
        if start is None:
            start = tok.start[0]
    if lines is not None:
        mapping = lines.build()
        for item in items:
            if item.noqa:
                item.first, item.last = mapping.covered(item.line)
    return items


def _from_lines(source: str) -> list[Suppression]:
    """Fallback when `tokenize` rejects code libcst accepted: each directive covers its line only."""
    items = []
    header = True
    for number, text in enumerate(source.splitlines(), start=1):
        stripped = text.strip()
        if header and stripped and not stripped.startswith("#"):
            header = False
        hash_at = text.find("#")
        if hash_at >= 0:
            item = _noqa(text[hash_at:], number, hash_at)
            if item is not None:
                items.append(item)
        if MARKER not in text:
            continue
        for match, col, end in _directives(text[hash_at:], hash_at):
            file_level = match.group("kind") == "ignore-file"
            item = Suppression(number, col, end, _names(match), file_level, number, number,
                               misplaced=file_level and not header)
            if file_level and header:
                item.first, item.last = 1, 1 << 30
            items.append(item)
    return items


def parse_suppressions(source: str) -> Suppressions | None:
    """The directives in ``source``; None (cheaply) when it holds none."""
    if not may_suppress(source):
        return None
    try:
        items = _from_tokens(source)
    except (tokenize.TokenError, SyntaxError):
        items = _from_lines(source)
    return Suppressions(items) if items else None


def rule_names(rules: Sequence[type[LintRule]]) -> frozenset[str]:
    """Names and lower-case codes of ``rules``, as directives may spell them."""
    return frozenset(n for r in rules for n in (r.name, r.code.lower()))
