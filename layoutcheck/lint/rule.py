"""The rule base class and the inline examples that test every rule.

A rule is one `LintRule` subclass in one module of ``rules/`` (shipped as
``layoutcheck.rules``); its docstring is the user documentation, with the
sections ``What it does``, ``Why it matters``, ``Example`` and ``How to fix``.
All selected rules of a file run in one libcst traversal, so a rule is a
`libcst.BatchableCSTVisitor`: it cannot prune the walk, and it keeps any
state it needs (an enclosing-function stack, say) itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import libcst as cst

if TYPE_CHECKING:
    from layoutcheck.lint.settings import LintSettings


@dataclass(frozen=True)
class Valid:
    """Code the rule must not flag. ``settings`` overrides `LintSettings` fields."""

    code: str
    settings: dict[str, Any] = field(default_factory=dict)
    path: str = "example.py"


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag exactly once.

    ``line``/``column`` (1-based) and ``message`` (a substring) pin the
    finding when given; ``replacement`` is the whole fixed source when the
    rule offers a safe autofix for this case.
    """

    code: str
    line: int | None = None
    column: int | None = None
    message: str | None = None
    replacement: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    path: str = "example.py"


@dataclass
class Report:
    """What a rule reported during the walk; positions are resolved later."""

    rule: type[LintRule]
    node: cst.CSTNode
    message: str
    replacement: cst.CSTNode | cst.RemovalSentinel | None = None


@dataclass
class LintContext:
    """Per-file state shared by the rules of one traversal."""

    path: str
    source: str
    settings: LintSettings
    module_name: str | None = None
    """Dotted module name of ``path`` when it can be derived (for owner matching)."""
    reports: list[Report] = field(default_factory=list)


def _kebab(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", class_name).lower()


class LintRule(cst.BatchableCSTVisitor):
    """Base class of every lint rule.

    Class attributes: ``code`` (``LC1xx``), ``message`` (what is wrong, then
    what to do), ``default_enabled``, ``prefilter`` (substrings, any of which
    must occur in a file's text for the rule to possibly fire: files that
    match no selected rule's prefilter are never parsed), and the ``valid``
    and ``invalid`` examples. ``name`` derives from the class name
    (``GlobalMaxPadding`` -> ``global-max-padding``).
    """

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    default_enabled: ClassVar[bool] = True
    prefilter: ClassVar[tuple[str, ...]] = ()
    valid: ClassVar[Sequence[Valid]] = ()
    invalid: ClassVar[Sequence[Invalid]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = _kebab(cls.__name__)

    def __init__(self, context: LintContext) -> None:
        super().__init__()
        self.context = context
        self.settings = context.settings

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        """Cheap text test: may this file hold a finding? Override for config-driven names."""
        return not cls.prefilter or any(s in source for s in cls.prefilter)

    @classmethod
    def has_autofix(cls) -> bool:
        """A rule offers a fix exactly when one of its examples expects one."""
        return any(case.replacement is not None for case in cls.invalid)

    def report(
        self,
        node: cst.CSTNode,
        message: str | None = None,
        *,
        replacement: cst.CSTNode | cst.RemovalSentinel | None = None,
    ) -> None:
        """Record a finding on ``node``; ``replacement`` only when the rewrite is provably safe."""
        self.context.reports.append(Report(type(self), node, message or self.message, replacement))
