"""Small rules that exist only for the engine, runner and CLI tests.

The real rules are queries on the project model; these are libcst syntax
rules (`layoutcheck.lint.syntaxrule`), the kind that can offer fixes, and
they stay put, so the engine's plumbing is tested on its own. They reach the
engine through ``lint_source(..., rules=...)``, ``run(..., rules=...)``, or
by patching ``layoutcheck.lint.registry.all_rules`` (see `use_rules`).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from layoutcheck.lint.rule import Invalid, LintRule, Valid
from layoutcheck.lint.syntaxrule import SyntaxRule


class PadCall(SyntaxRule):
    """Flags a use of the name `pad_me` (a stand-in for a padding idiom).

    ## What it does
    Reports every `pad_me` name.

    ## How to fix
    Use `padded`; the autofix renames it.
    """

    code = "LC901"
    message = "`pad_me` pads by hand; use `padded`."
    prefilter = ("pad_me",)
    valid = (Valid("padded(x)"),)
    invalid = (Invalid("pad_me(x)\n", line=1, column=1, replacement="padded(x)\n"),)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "pad_me":
            self.report(node, replacement=node.with_changes(value="padded"))


class GlobalMax(SyntaxRule):
    """Flags a call of `max` (a stand-in for a max over lengths); no autofix."""

    code = "LC902"
    message = "`max` over lengths; read `max_seq_lens` instead."
    prefilter = ("max(",)
    invalid = (Invalid("m = max(lengths)\n", line=1, column=5),)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "max":
            self.report(node)


class NoisyThing(SyntaxRule):
    """Flags the name `noisy`; off by default."""

    code = "LC951"
    message = "`noisy` found."
    default_enabled = False
    prefilter = ("noisy",)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "noisy":
            self.report(node)


class PreviewThing(SyntaxRule):
    """Flags the name `fresh`; on by default, but in preview (as the registry marks a rule under 90%)."""

    code = "LC952"
    message = "`fresh` found."
    preview = True
    prefilter = ("fresh",)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "fresh":
            self.report(node)


class CrashyRule(SyntaxRule):
    """Raises on any call of `explode`: the engine must contain it."""

    code = "LC990"
    message = "never reported"
    prefilter = ("explode",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "explode":
            raise RuntimeError("rule bug on purpose")


class WhereAmI(SyntaxRule):
    """Reports the module name the engine derived, on the name `where_am_i`."""

    code = "LC960"
    message = "module"
    prefilter = ("where_am_i",)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "where_am_i":
            self.report(node, f"module is {self.context.module_name}")


class BrokenFix(SyntaxRule):
    """Offers a 'fix' whose output does not parse: the engine must refuse it."""

    code = "LC970"
    message = "broken"
    prefilter = ("break_me",)
    invalid = (Invalid("break_me\n", replacement="if\n"),)  # claims a fix, so it is applied

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "break_me":
            self.report(node, replacement=cst.Name("if"))


ALL_TEST_RULES: tuple[type[LintRule], ...] = (
    PadCall, GlobalMax, NoisyThing, PreviewThing, CrashyRule, WhereAmI, BrokenFix
)
DEFAULT_TEST_RULES: tuple[type[LintRule], ...] = (PadCall, GlobalMax, NoisyThing)


def use_rules(monkeypatch: object, rules: Sequence[type[LintRule]] = DEFAULT_TEST_RULES) -> None:
    """Make the registry (hence the CLI) see exactly ``rules``."""
    import layoutcheck.lint.registry as registry

    monkeypatch.setattr(registry, "all_rules", lambda: tuple(rules))  # type: ignore[attr-defined]
