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


def _checkout_rules() -> Path | None:
    """The ``rules/`` folder of the source checkout this package runs from; ``None`` for an installed wheel."""
    root = Path(__file__).resolve().parents[2]
    init = root / "rules" / "__init__.py"
    return init.parent if init.is_file() and (root / "pyproject.toml").is_file() else None


def rules_folder() -> Path | None:
    """The folder the rules are read from (the cache's signature stats its files)."""
    mine = _checkout_rules()
    if mine is not None:
        return mine
    spec = importlib.util.find_spec("layoutcheck.rules")
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None


def _rules_package() -> ModuleType:
    # A source checkout's own rules/ first: an editable install of another checkout maps `layoutcheck.rules`
    # to that checkout's rules/ (a finder on sys.meta_path), and a checkout run through PYTHONPATH would lint
    # with the other's rules.
    mine = _checkout_rules()
    if mine is None:
        return importlib.import_module("layoutcheck.rules")
    loaded = sys.modules.get("layoutcheck.rules")
    if loaded is not None and [str(Path(p).resolve()) for p in getattr(loaded, "__path__", [])] == [str(mine)]:
        return loaded
    spec = importlib.util.spec_from_file_location(
        "layoutcheck.rules", mine / "__init__.py", submodule_search_locations=[str(mine)]
    )
    assert spec is not None and spec.loader is not None
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
