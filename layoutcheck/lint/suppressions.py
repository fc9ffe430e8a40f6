"""Suppression comments, and the report of the ones that suppress nothing.

Forms (names are rule names or codes, comma-separated)::

    x = f(y)  # layoutcheck: ignore[global-max-padding, LC102]
    x = f(y)  # layoutcheck: ignore            (every rule, this line)
    # layoutcheck: ignore-file[bucket-spec]     (whole file; first comment block only)
    # layoutcheck: ignore-file                  (whole file, every rule)

A line suppression on the first line of a multi-line statement covers every
line of that statement (one comment above a long call, not one per line).

Cost (DESIGN.md section 9: Fixit pays a parent-metadata walk for this on
every file): nothing for a file whose text lacks ``layoutcheck:``; otherwise
one `tokenize` pass, and only when the file has findings or unused
suppressions are being reported. No libcst metadata is involved.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from layoutcheck.lint.findings import Finding
from layoutcheck.lint.rule import LintRule

if TYPE_CHECKING:
    from layoutcheck.lint.settings import LintSettings

__all__ = ["MARKER", "Suppression", "Suppressions", "UnusedSuppression", "parse_suppressions"]

MARKER = "layoutcheck:"
"""Text every suppression comment holds: a file without it is never tokenized."""

_DIRECTIVE = re.compile(r"#\s*layoutcheck:\s*(?P<kind>ignore-file|ignore)\b(?:\[(?P<names>[^\]]*)\])?")


class UnusedSuppression(LintRule):
    """Flags a suppression comment that suppresses nothing.

    ## What it does
    Reports a `# layoutcheck: ignore[...]` (or `ignore-file[...]`) comment
    when no finding of the rules it names is on the lines it covers, when it
    names a rule that does not exist, and when an `ignore-file` comment sits
    below the file's first comment block, where it has no effect.

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

    def covers(self, finding: Finding) -> str | None:
        """The name under which this directive suppresses ``finding``, or None."""
        if self.misplaced or not (self.first <= finding.line <= self.last):
            return None
        if self.names is None:
            return "*"
        for name in self.names:
            if name.lower() in (finding.rule, finding.code.lower()):
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
                if not item.used:
                    scope = "in this file" if item.file_level else "here"
                    problems.append(f"no finding {scope} to suppress")
            else:
                for name in item.names:
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


def _from_tokens(source: str) -> list[Suppression]:
    items: list[Suppression] = []
    # Start line of the logical line being read (None between statements), and
    # the comments seen on its first line, which cover the whole statement.
    start: int | None = None
    opening: list[Suppression] = []
    header = True  # still in the first comment block
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind == tokenize.COMMENT:
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
    return items


def _from_lines(source: str) -> list[Suppression]:
    """Fallback when `tokenize` rejects code libcst accepted: each directive covers its line only."""
    items = []
    header = True
    for number, text in enumerate(source.splitlines(), start=1):
        stripped = text.strip()
        if header and stripped and not stripped.startswith("#"):
            header = False
        if MARKER not in text:
            continue
        hash_at = text.find("#")
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
    if MARKER not in source:
        return None
    try:
        items = _from_tokens(source)
    except (tokenize.TokenError, SyntaxError):
        items = _from_lines(source)
    return Suppressions(items) if items else None


def rule_names(rules: Sequence[type[LintRule]]) -> frozenset[str]:
    """Names and lower-case codes of ``rules``, as directives may spell them."""
    return frozenset(n for r in rules for n in (r.name, r.code.lower()))
