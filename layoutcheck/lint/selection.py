"""Which rules run: ``select`` / ``extend-select`` / ``ignore`` and ``per-file-ignores``.

A selector is a code (``LC101``), a code prefix (``LC1``), a kebab-case name
(``global-max-padding``) or ``ALL``. As in ruff, when a rule is matched by an
enabling and a disabling selector, the more specific one wins (a full code or
name beats a prefix, a longer prefix beats a shorter one, anything beats
``ALL``), and on a tie the disabling one wins. Without ``select`` the starting
set is every rule that is on by default.

Preview rules (`LintRule.preview`: below the precision bar on the corpus, see
`layoutcheck.lint.precision`) are left out unless preview is on (``--preview``,
``preview = true``): without it only an exact code or name selects one (a prefix
such as ``LC1`` and ``ALL`` pass it by), as in ruff. With preview on they are
selected like any other rule, and the default set holds them too.

The command line replaces the configured ``select`` and adds to the configured
``extend-select`` and ``ignore``; ``--report-unused-suppressions`` switches the
``unused-suppression`` pseudo-rule on whatever else says.

A selector that matches no rule is a `ConfigError` (exit 2) that names where
it was written and lists the valid names: a typo must not silently lint nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from layoutcheck.records import dataclass
from typing import TYPE_CHECKING

from layoutcheck.errors import ConfigError
from layoutcheck.globs import compile_glob

if TYPE_CHECKING:  # the rules import libcst; a fully cached run never needs them
    from layoutcheck.lint.rule import LintRule

__all__ = ["ALL", "RuleSelection", "SelectionOverrides", "describe_rules", "resolve_selection"]

ALL = "ALL"
_EXACT = 1_000  # specificity of a full code or a name: beats any prefix


@dataclass(frozen=True)
class SelectionOverrides:
    """Rule selection given on the command line (it layers over the configuration)."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    report_unused_suppressions: bool = False
    preview: bool | None = None
    """``--preview`` (True) or ``--no-preview`` (False) over the configured ``preview``; None: as configured."""


def describe_rules(universe: Iterable[type[LintRule]]) -> str:
    """``LC101 global-max-padding, ...``: the valid names, for error messages."""
    return ", ".join(f"{r.code} {r.name}" for r in sorted(universe, key=lambda r: r.code))


def _specificity(selector: str, rule: type[LintRule]) -> int | None:
    """How specifically ``selector`` names ``rule``; None when it does not match it."""
    if selector == ALL:
        return 0
    wanted = selector.lower()
    if wanted in (rule.name, rule.code.lower()):
        return _EXACT
    if rule.code.lower().startswith(wanted):
        return len(wanted)
    return None


def _check_selectors(
    selectors: Iterable[str], universe: Sequence[type[LintRule]], origin: str
) -> tuple[str, ...]:
    """Strip ``selectors`` and raise `ConfigError` for any that names no rule."""
    cleaned = []
    for raw in selectors:
        selector = raw.strip()
        if selector.upper() == ALL:
            cleaned.append(ALL)
            continue
        if not selector or not any(_specificity(selector, r) is not None for r in universe):
            raise ConfigError(
                f"unknown rule {raw!r} in {origin}; valid: {describe_rules(universe)}, "
                f"a code prefix such as LC1, or ALL",
                key=origin,
            )
        cleaned.append(selector)
    return tuple(cleaned)


def _strongest(selectors: Iterable[str], rule: type[LintRule]) -> int | None:
    best: int | None = None
    for selector in selectors:
        score = _specificity(selector, rule)
        if score is not None and (best is None or score > best):
            best = score
    return best


@dataclass(frozen=True)
class RuleSelection:
    """The selected rules, and the rules each file runs after ``per-file-ignores``."""

    rules: tuple[type[LintRule], ...]
    """Selected rules, sorted by code."""
    universe: tuple[type[LintRule], ...]
    """Every known rule (suppressions may name any of them)."""
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    _memo: dict[str, tuple[type[LintRule], ...]] = field(default_factory=dict, compare=False, repr=False)

    def for_path(self, relpath: str) -> tuple[type[LintRule], ...]:
        """The rules to run on the file at ``relpath`` (root-relative, ``/``-separated)."""
        cached = self._memo.get(relpath)
        if cached is not None:
            return cached
        ignored = [sel for pattern, sels in self.per_file_ignores
                   if compile_glob(pattern).matches(relpath) for sel in sels]
        rules = tuple(r for r in self.rules if _strongest(ignored, r) is None) if ignored else self.rules
        self._memo[relpath] = rules
        return rules

    def known_names(self) -> frozenset[str]:
        """Names and lower-case codes of every known rule."""
        return frozenset(n for r in self.universe for n in (r.name, r.code.lower()))


def resolve_selection(
    universe: Sequence[type[LintRule]],
    *,
    select: Sequence[str] | None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    per_file_ignores: Mapping[str, Sequence[str]] | None = None,
    overrides: SelectionOverrides = SelectionOverrides(),
    describe: Callable[[str], str] = lambda key: key,
    always: Sequence[type[LintRule]] = (),
    preview: bool = False,
) -> RuleSelection:
    """Resolve the configured and command-line selectors against ``universe``.

    ``describe(key)`` names where a configured key was written (for errors);
    ``always`` are rules switched on regardless (the unused-suppression report);
    ``preview`` (the configured value; ``overrides.preview`` wins when given)
    lets prefixes, ``ALL`` and the default set reach preview rules.
    """
    if overrides.preview is not None:
        preview = overrides.preview
    universe = tuple(sorted(universe, key=lambda r: r.code))
    if overrides.select is not None:
        chosen = _check_selectors(overrides.select, universe, "--select")
    elif select is not None:
        chosen = _check_selectors(select, universe, describe("select"))
    else:
        chosen = None
    enable = (
        *(chosen or ()),
        *_check_selectors(extend_select, universe, describe("extend-select")),
        *_check_selectors(overrides.extend_select, universe, "--extend-select"),
    )
    disable = (
        *_check_selectors(ignore, universe, describe("ignore")),
        *_check_selectors(overrides.ignore, universe, "--ignore"),
    )
    selected = []
    for rule in universe:
        on, off = _strongest(enable, rule), _strongest(disable, rule)
        gated = rule.preview and not preview
        if gated and on is not None and on < _EXACT:
            on = None  # a prefix or ALL does not reach a preview rule; its exact code or name does
        if on is None and off is None:
            keep = chosen is None and rule.default_enabled and not gated
        elif off is None:
            keep = True
        elif on is None:
            keep = False
        else:
            keep = on > off  # a tie goes to `ignore`
        if keep or rule in always:
            selected.append(rule)
    per_file = tuple(
        (pattern, _check_selectors(sels, universe, describe(f'per-file-ignores."{pattern}"')))
        for pattern, sels in (per_file_ignores or {}).items()
    )
    return RuleSelection(tuple(selected), universe, per_file)
