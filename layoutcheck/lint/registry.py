"""Finds the rules by walking the ``layoutcheck.rules`` package: no hand-kept list.

Each rule's release status (stable or preview) and measured precision come from
the one table `layoutcheck.lint.precision.MEASURED`; a rule the table does not
list is an error, so a new rule is measured (or listed with no finding: preview)
before it ships.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from layoutcheck.errors import LayoutSpecError
from layoutcheck.lint.precision import MEASURED, PREVIEW
from layoutcheck.lint.rule import LintRule


def _rules_package() -> ModuleType:
    try:
        return importlib.import_module("layoutcheck.rules")
    except ModuleNotFoundError:
        # A plain source checkout on sys.path (no install): the rules live in
        # the top-level rules/ folder beside the package.
        init = Path(__file__).resolve().parents[2] / "rules" / "__init__.py"
        spec = importlib.util.spec_from_file_location(
            "layoutcheck.rules", init, submodule_search_locations=[str(init.parent)]
        )
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules["layoutcheck.rules"] = module
        spec.loader.exec_module(module)
        return module


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[LintRule], ...]:
    """Every rule, sorted by code. Each rules module defines exactly one rule."""
    package = _rules_package()
    found: list[type[LintRule]] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        rules = [
            obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, LintRule) and obj is not LintRule
            and obj.__module__ == module.__name__
        ]
        if len(rules) != 1:
            raise LayoutSpecError(
                f"rules module {module.__name__} must define exactly one LintRule, found {len(rules)}"
            )
        found.append(_with_status(rules[0]))
    return tuple(sorted(found, key=lambda r: r.code))


def _with_status(rule: type[LintRule]) -> type[LintRule]:
    """``rule`` with ``measured`` and ``preview`` set from the precision table."""
    measured = MEASURED.get(rule.code)
    if measured is None:
        raise LayoutSpecError(
            f"rule {rule.code} {rule.name} has no row in the precision table (layoutcheck/lint/precision.py): "
            f"add `\"{rule.code}\": Measured(0, 0)` (preview until measured) or measure it with "
            "benchmarks/lint_truth.py"
        )
    rule.measured = measured
    rule.preview = measured.status == PREVIEW
    return rule


def rule_by_name(name: str) -> type[LintRule]:
    """Look a rule up by kebab-case name or code (case-insensitive)."""
    wanted = name.lower()
    for rule in all_rules():
        if wanted in (rule.name, rule.code.lower()):
            return rule
    known = ", ".join(f"{r.code} {r.name}" for r in all_rules())
    raise LayoutSpecError(f"unknown rule {name!r}; known rules: {known}")
