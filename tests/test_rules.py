"""Every rule's inline examples, run as tests: the examples are the rules' specification.

A valid example must produce no finding of its rule; an invalid one exactly
one, at the line, column and with the message fragment it names. An
invalid example with a ``replacement`` must be fixed to exactly that text,
and fixing again must change nothing.
"""

from __future__ import annotations

import libcst as cst
import pytest

from layoutcheck.lint.engine import lint_source
from layoutcheck.lint.fix import fix_source
from layoutcheck.lint.patterns import Imports, match_pad_amount, match_round_up
from layoutcheck.lint.registry import all_rules, rule_by_name
from layoutcheck.lint.rule import Invalid, LintRule, Valid
from layoutcheck.lint.settings import LintSettings

CASES = [
    pytest.param(rule, case, id=f"{rule.name}-{kind}-{number}")
    for rule in all_rules()
    for kind, cases in (("valid", rule.valid), ("invalid", rule.invalid))
    for number, case in enumerate(cases, start=1)
]


def _findings(rule: type[LintRule], case: Valid | Invalid):
    result = lint_source(case.code, case.path, [rule], LintSettings(**case.settings))
    assert not result.errors, result.errors
    return [f for f in result.findings if f.rule == rule.name]


@pytest.mark.parametrize(("rule", "case"), CASES)
def test_example(rule: type[LintRule], case: Valid | Invalid) -> None:
    found = _findings(rule, case)
    if isinstance(case, Valid):
        assert found == [], [f"{f.line}:{f.column} {f.message}" for f in found]
        return
    assert len(found) == 1, [f"{f.line}:{f.column} {f.message}" for f in found]
    finding = found[0]
    if case.line is not None:
        assert finding.line == case.line, finding
    if case.column is not None:
        assert finding.column == case.column, finding
    if case.message is not None:
        assert case.message in finding.message
    assert finding.fixable == (case.replacement is not None), finding


@pytest.mark.parametrize(
    ("rule", "case"), [p for p in CASES if isinstance(p.values[1], Invalid) and p.values[1].replacement is not None]
)
def test_fix(rule: type[LintRule], case: Invalid) -> None:
    settings = LintSettings(**case.settings)
    first = fix_source(case.code, case.path, [rule], settings)
    assert first.fix is not None and first.fix.fixed == case.replacement
    assert not [f for f in first.findings if f.rule == rule.name]
    again = fix_source(case.replacement, case.path, [rule], settings)
    assert again.fix is None  # a second --fix changes nothing


def test_every_rule_has_enough_examples() -> None:
    for rule in all_rules():
        assert 5 <= len(rule.valid) <= 10, rule.name
        assert 4 <= len(rule.invalid) <= 8, rule.name


def test_all_rules_together_agree_with_each_rule_alone() -> None:
    """The rules share per-file state (`layoutcheck.lint.flow`): running them together
    must give each one the findings it gives alone."""
    rules = list(all_rules())
    for rule in rules:
        for case in rule.invalid:
            settings = LintSettings(**case.settings)
            alone = lint_source(case.code, case.path, [rule], settings).findings
            together = lint_source(case.code, case.path, rules, settings).findings
            assert [f for f in together if f.rule == rule.name] == alone, (rule.name, case.code)


# --- the shared recognisers (layoutcheck.lint.patterns), spelling by spelling ---

ROUND_UPS = [
    "(n + m - 1) // m * m",
    "m * ((n + m - 1) // m)",
    "(n + (m - 1)) // m * m",
    "(n - 1 + m) // m * m",
    "-(-n // m) * m",
    "math.ceil(n / m) * m",
    "int(math.ceil(n / m)) * m",
    "((n - 1) // m + 1) * m",
    "ceil_div(n, m) * m",
    "triton.cdiv(n, m) * m",
    "round_up(n, m)",
    "geometry.round_up(n, m)",
    "align(n, m)",
    "pad_to_multiple(n, m)",
    "(n + 2 * cp - 1) // (2 * cp) * (2 * cp)",
]
PAD_AMOUNTS = ["(m - n % m) % m", "(-n) % m", "-n % m", "m - n % m"]
NEITHER = [
    "(n + m - 1) // m",  # a count (grid size, micro-batches), not a padded length
    "n // m * m",  # rounds down
    "math.ceil(n / m)",
    "(n + m) // m * m",
    "n % m",
    "(n + k - 1) // m * m",
    "round_up(n)",
]


@pytest.mark.parametrize("text", ROUND_UPS)
def test_round_up_spellings(text: str) -> None:
    found = match_round_up(cst.parse_expression(text), Imports())
    assert found is not None
    assert [cst.Module([]).code_for_node(v) for v in found.values] == ["n"]


@pytest.mark.parametrize("text", PAD_AMOUNTS)
def test_pad_amount_spellings(text: str) -> None:
    found = match_pad_amount(cst.parse_expression(text))
    assert found is not None and cst.Module([]).code_for_node(found.unit).strip("() ") == "m"


@pytest.mark.parametrize("text", NEITHER)
def test_not_a_round_up(text: str) -> None:
    node = cst.parse_expression(text)
    assert match_round_up(node, Imports()) is None and match_pad_amount(node) is None


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import torch.nn.functional as F", "F.pad"),
        ("from torch.nn import functional as Fn", "Fn.pad"),
        ("import torch", "torch.nn.functional.pad"),
        ("from torch import nn", "nn.functional.pad"),
        ("from torch.nn.functional import pad", "pad"),
        ("from torch.nn.functional import pad as tpad", "tpad"),
    ],
)
def test_f_pad_is_recognised_under_any_alias(imports: str, call: str) -> None:
    code = f"""{imports}

def collate(tokens):
    longest = max(t.size(0) for t in tokens)
    return [{call}(t, (0, longest - t.size(0))) for t in tokens]
"""
    rule = rule_by_name("padding-outside-owner")
    found = lint_source(code, "example.py", [rule], LintSettings()).findings
    assert [(f.line, f.column) for f in found] == [(4, 15)]


def test_tokenizer_pad_is_not_torch_pad() -> None:
    code = """
def collate(tokenizer, tokens):
    longest = max(len(t) for t in tokens)
    return tokenizer.pad(tokens, (0, longest))
"""
    assert lint_source(code, "example.py", [rule_by_name("padding-outside-owner")], LintSettings()).findings == []
