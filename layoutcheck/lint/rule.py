"""The rule base classes and the inline examples that test every rule.

A rule is one class in one module of ``rules/`` (shipped as
``layoutcheck.rules``); its docstring is the user documentation, with the
sections ``What it does``, ``Why it matters``, ``Example`` and ``How to fix``.
Two kinds share `LintRule`'s metadata:

* `ModelRule`: a query on the project model (`layoutcheck.model`). Its
  `ModelRule.check` reads one checked file's `FileQueries` and returns
  `Report` s; it never walks a tree. Every padding rule is one. Its
  `ModelRule.fix`, called only by a run that asks for fixes
  (`layoutcheck.lint.fix`), computes a finding's fix with libcst from the
  finding's place alone.
* `layoutcheck.lint.syntaxrule.SyntaxRule`: a libcst visitor, for a rule
  that needs concrete syntax to find what it reports (its fix is a
  replacement node). Its module imports libcst; this one does not, so a
  run with model rules only never pays for libcst unless it fixes.

Examples (`Valid`, `Invalid`) are code the suite runs through the engine;
``files`` adds other modules of the same project (a helper's ``def`` in
``cp_utils.py``, an owner in ``data.py``) for the cases one file cannot show.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from layoutcheck.records import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from layoutcheck.lint.edits import Fix
    from layoutcheck.lint.fixsite import FixSite
    from layoutcheck.lint.precision import Measured
    from layoutcheck.lint.settings import LintSettings
    from layoutcheck.model.queries import FileQueries

__all__ = ["Invalid", "LintRule", "ModelRule", "Report", "Span", "Valid"]

Span = tuple[int, int, int, int]
"""(line, column, end line, end column): 1-based, columns in characters, the end exclusive."""


@dataclass(frozen=True)
class Valid:
    """Code the rule must not flag. ``settings`` overrides `LintSettings` fields."""

    code: str
    settings: dict[str, Any] = field(default_factory=dict)
    path: str = "example.py"
    files: Mapping[str, str] = field(default_factory=dict)
    """Other files of the same project, by path (their findings are not the example's)."""


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag exactly once.

    ``line``/``column`` (1-based) and ``message`` (a substring) pin the
    finding when given; ``replacement`` is the whole fixed source when the
    rule fixes this case, and ``applicability`` says whether that fix is
    ``"safe"`` (``--fix``) or ``"unsafe"`` (``--fix --unsafe-fixes``). An
    example without a replacement is one the fix must decline.
    """

    code: str
    line: int | None = None
    column: int | None = None
    message: str | None = None
    replacement: str | None = None
    applicability: str = "safe"
    settings: dict[str, Any] = field(default_factory=dict)
    path: str = "example.py"
    files: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Report:
    """What a rule reported; a model rule gives a span, a syntax rule a libcst node."""

    rule: type[LintRule]
    span: Span | None
    message: str
    node: Any = None
    """The libcst node (syntax rules), located after the walk."""
    replacement: Any = None
    """A libcst replacement for ``node``, offered only when the rewrite is provably safe."""
    where: Any = None
    """The libcst range of ``node`` (syntax rules), for fixes."""


def _kebab(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", class_name).lower()


class LintRule:
    """What every rule has: ``code`` (``LC1xx``), ``message`` (what is wrong, then what to do),
    ``default_enabled``, ``prefilter`` (substrings, any of which must occur in a file's text
    for the rule to possibly fire) and the ``valid`` / ``invalid`` examples. ``name`` derives
    from the class name (``GlobalMaxPadding`` -> ``global-max-padding``).

    ``preview`` and ``measured`` are not written in a rule: the registry sets them from the
    precision table (`layoutcheck.lint.precision`) when it loads the rules."""

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    default_enabled: ClassVar[bool] = True
    preview: ClassVar[bool] = False
    """In preview: runs only under ``--preview``, or when selected by its exact code or name."""
    measured: ClassVar[Measured | None] = None
    """Its findings on the precision corpus and how many were true (None: not a measured rule)."""
    prefilter: ClassVar[tuple[str, ...]] = ()
    valid: ClassVar[Sequence[Valid]] = ()
    invalid: ClassVar[Sequence[Invalid]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = _kebab(cls.__name__)

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        """Cheap text test: may this file hold a finding? Override for config-driven names."""
        return not cls.prefilter or any(s in source for s in cls.prefilter)

    @classmethod
    def on_by_default(cls) -> bool:
        """Runs when nothing selects or ignores it and preview is off: on by default and not in preview."""
        return cls.default_enabled and not cls.preview

    @classmethod
    def has_autofix(cls) -> bool:
        """A rule offers a fix exactly when one of its examples expects one."""
        return any(case.replacement is not None for case in cls.invalid)

    @classmethod
    def fix_applicabilities(cls) -> tuple[str, ...]:
        """The applicabilities its examples' fixes have (``("safe",)``, ``("safe", "unsafe")``...)."""
        return tuple(sorted({case.applicability for case in cls.invalid if case.replacement is not None}))


class ModelRule(LintRule):
    """A rule that is a query on the project model: `check` reads one file's `FileQueries`.

    A model rule's prefilter is the text test of the per-file phase: a file
    that no selected model rule could match is never walked for facts (it is
    still syntax-checked).
    """

    def __init__(self, settings: LintSettings) -> None:
        self.settings = settings

    def check(self, file: FileQueries) -> Iterable[Report]:
        """The findings in ``file`` (a checked trainer file of the project)."""
        raise NotImplementedError

    def report(self, span: Span, message: str | None = None) -> Report:
        """A finding at ``span``."""
        return Report(type(self), span, message or self.message)

    def fix(self, site: FixSite) -> Fix | None:
        """The fix for the finding at ``site``, or None (the default: no fix).

        Called only in a run that asks for fixes, and only when the rule's
        examples show a replacement (`has_autofix`). It reads what it needs
        from the file's libcst tree around the finding (`FixSite`), never from
        the model, and imports libcst itself: this module must not.
        """
        return None
